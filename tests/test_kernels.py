"""Loss kernels against plain NumPy, for dense and CSR data and all three losses."""

from __future__ import annotations

import math
from fractions import Fraction

import llvmlite.binding as llvm
import numba
import numpy as np
import pytest
import scipy.sparse as sp
from conftest import LOSSES, N_CLASSES, dense, make_data, np_grad, np_loss

from fedsparse import kernels as K
from fedsparse.kernels.elementary import log1p_exp_minus
from fedsparse.kernels.rows import prefetch_csr_row

RTOL = 1e-12


def setup_case(loss: str, sparse: bool, seed: int = 1):
    data = make_data(loss, sparse=sparse, seed=seed)
    rng = np.random.default_rng(seed + 100)
    c = N_CLASSES if loss == "softmax" else 1
    W = 0.3 * rng.standard_normal((c, data.n_features))
    return data, W, K.LOSS_CODES[loss]


def test_loss_codes():
    assert (K.LEAST_SQUARES, K.LOGISTIC, K.SOFTMAX) == (0, 1, 2)
    assert K.LOSS_CODES == {"least_squares": 0, "logistic": 1, "softmax": 2}


def test_as_kernel_matrix_forms():
    rng = np.random.default_rng(0)
    A = rng.standard_normal((4, 6))
    A[A < 0.3] = 0.0
    Xd = K.as_kernel_matrix(np.asfortranarray(A.astype(np.float32)))
    assert isinstance(Xd, np.ndarray) and Xd.dtype == np.float64 and Xd.flags.c_contiguous
    data, indices, indptr = K.as_kernel_matrix(sp.csr_matrix(A))
    assert (data.dtype, indices.dtype, indptr.dtype) == (np.float64, np.int32, np.int64)
    rebuilt = sp.csr_matrix((data, indices, indptr), shape=A.shape).toarray()
    np.testing.assert_array_equal(rebuilt, A)
    # a float32 network's rows stay float32; sparse rows are float64 whatever is asked
    X32 = K.as_kernel_matrix(np.asfortranarray(A), np.float32)
    assert X32.dtype == np.float32 and X32.flags.c_contiguous and not X32.flags.writeable
    assert K.as_kernel_matrix(sp.csr_matrix(A), np.float32)[0].dtype == np.float64
    with pytest.raises(ValueError, match="float64 or float32, not int64"):
        K.as_kernel_matrix(A, np.int64)


@pytest.mark.parametrize("loss", LOSSES)
def test_batch_grad_matches_numpy(loss, sparse):
    data, W, code = setup_case(loss, sparse)
    X, y = data.kernel_X, data.y
    l2 = 0.05
    G = np.full(W.shape, 7.0)  # garbage: must be overwritten, not accumulated into
    s = np.empty(W.shape[0])
    for rows in (
        np.array([3, 0, 7, 12, 40, 64], dtype=np.int64),
        np.array([5, 5, 9, 30, 30, 30, 2], dtype=np.int64),  # repeated rows count repeatedly
        np.arange(data.n_samples, dtype=np.int64),
        # rows go three at a time: batches of 1, 2 and 5 take the remainder paths
        np.array([11], dtype=np.int64),
        np.array([8, 1], dtype=np.int64),
        np.array([4, 22, 4, 17, 50], dtype=np.int64),
    ):
        for _ in range(2):  # a repeated call gives the same answer (G is reset)
            value = K.batch_grad(X, y, rows, W, code, l2, G, s)
            Xr = dense(data.X)[rows]
            np.testing.assert_allclose(value, np_loss(Xr, y[rows], W, loss, l2), rtol=RTOL)
            np.testing.assert_allclose(G, np_grad(Xr, y[rows], W, loss, l2), rtol=RTOL, atol=1e-14)


@numba.njit
def _dot3(X, i0, i1, i2, w):
    return K.row_dot3(X, i0, i1, i2, w)


@numba.njit
def _axpy3(X, i0, i1, i2, a0, a1, a2, g):
    K.row_axpy3(X, i0, i1, i2, a0, a1, a2, g)


@numba.njit
def _axpy(X, i, a, g):
    K.row_axpy(X, i, a, g)


def test_three_row_primitives_match_numpy_and_single_rows(sparse):
    data, W, _ = setup_case("least_squares", sparse)
    X, A, w = data.kernel_X, dense(data.X), W[0]
    rows = (3, 17, 3)  # a repeated row too
    got = _dot3(X, *rows, w)
    np.testing.assert_allclose(got, A[list(rows)] @ w, rtol=1e-13)
    g3 = np.linspace(-1.0, 1.0, data.n_features)
    g1 = g3.copy()
    coefs = (0.5, -1.25, 3.0)
    _axpy3(X, *rows, *coefs, g3)
    for i, a in zip(rows, coefs, strict=True):
        _axpy(X, i, a, g1)
    np.testing.assert_array_equal(g3, g1)  # the same sums in the same order: identical bits


@pytest.mark.parametrize("loss", LOSSES)
def test_batch_grad_without_ridge(loss, sparse):
    data, W, code = setup_case(loss, sparse, seed=2)
    rows = np.arange(5, 25, dtype=np.int64)
    G = np.empty(W.shape)
    value = K.batch_grad(data.kernel_X, data.y, rows, W, code, 0.0, G, np.empty(W.shape[0]))
    Xr = dense(data.X)[rows]
    np.testing.assert_allclose(value, np_loss(Xr, data.y[rows], W, loss, 0.0), rtol=RTOL)
    np.testing.assert_allclose(G, np_grad(Xr, data.y[rows], W, loss, 0.0), rtol=RTOL, atol=1e-14)


@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.parametrize("l2", [0.0, 0.05])
def test_descend_is_batch_grad_and_its_step_bit_for_bit(loss, l2, sparse):
    """A local step skips the loss values and adds the ridge as it updates: the same
    gradient, the same rounding, so the same bits as batch_grad then ``W -= stepsize * G``."""
    data, W, code = setup_case(loss, sparse, seed=3)
    X, y, s = data.kernel_X, data.y, np.empty(W.shape[0])
    stepsize = 0.37
    for rows in (  # the three-row groups and each remainder path
        np.array([3, 0, 7, 12, 40, 64], dtype=np.int64),
        np.array([11], dtype=np.int64),
        np.array([8, 1], dtype=np.int64),
        np.array([4, 22, 4, 17, 50], dtype=np.int64),
        np.arange(data.n_samples, dtype=np.int64),
    ):
        G = np.empty(W.shape)
        K.batch_grad(X, y, rows, W, code, l2, G, s)
        expected = W - stepsize * G
        got = W.copy()
        K.descend(X, y, rows, got, code, l2, stepsize, np.full(W.shape, 7.0), s)
        np.testing.assert_array_equal(got.view(np.int64), expected.view(np.int64))
        Xr = dense(data.X)[rows]
        reference = W - stepsize * np_grad(Xr, y[rows], W, loss, l2)
        np.testing.assert_allclose(got, reference, rtol=RTOL, atol=1e-14)


def margins_of_stack(data, Ws: np.ndarray) -> np.ndarray:
    """Ws X^T through the evaluation kernel of the data's storage: dense columns or CSC."""
    M = np.full((Ws.shape[0], Ws.shape[1], data.n_samples), np.nan)
    if data.is_sparse:
        K.margins_csc(data.kernel_csc, Ws, M)
    else:
        K.margins_columns(data.columns, data.column_checks, Ws, M)
    return M


def margins(data, W) -> np.ndarray:
    """W X^T for one model."""
    return margins_of_stack(data, W[None])[0]


def sparsify(W: np.ndarray) -> np.ndarray:
    """Zero most entries, as H_tau does, so the column path skips columns."""
    W = W.copy()
    W[:, 1::3] = 0.0
    W[:, 2::3] = 0.0
    return W


@pytest.mark.parametrize("loss", LOSSES)
def test_margins_match_numpy(loss, sparse):
    data, W, _ = setup_case(loss, sparse)
    for Wcase in (W, sparsify(W), np.zeros_like(W)):
        expected = Wcase @ dense(data.X).T
        np.testing.assert_allclose(margins(data, Wcase), expected, rtol=RTOL, atol=1e-14)


@pytest.mark.parametrize("support_size", [0, 1, 3, 4, 7, 8, 9, 12, 15, 30])
def test_margins_sum_the_support_in_index_order(support_size, sparse):
    # Dense columns go four at a time, CSC columns one at a time; the sums must be
    # exactly those of one column at a time in index order (for dense data, for every
    # remainder of the support size modulo 4, each term fused where the CPU has FMA).
    data, W, _ = setup_case("least_squares", sparse=sparse)
    rng = np.random.default_rng(support_size)
    W = np.zeros_like(W)
    support = np.sort(rng.choice(data.n_features, support_size, replace=False))
    W[0, support] = rng.standard_normal(support_size)
    X = dense(data.X)
    if sparse:
        expected = np.zeros((1, data.n_samples))
        for j in support:
            expected[0] += W[0, j] * X[:, j]
    else:
        expected = fused_margins(X.T, W[None], np.arange(data.n_samples))[0]
    np.testing.assert_array_equal(margins(data, W), expected)


@pytest.mark.parametrize("loss", LOSSES)
def test_margins_of_a_stack_of_models_equal_one_at_a_time(loss, sparse):
    # Models scored together (consecutive rounds of a run) must get exactly the
    # margins each gets alone, whatever their supports: shared, disjoint, empty, NaN.
    data, W, _ = setup_case(loss, sparse)
    rng = np.random.default_rng(7)
    stack = [sparsify(W), np.zeros_like(W), W]
    for size in (5, 16, 23):
        V = np.zeros_like(W)
        for r in range(W.shape[0]):
            V[r, rng.choice(data.n_features, size, replace=False)] = rng.standard_normal(size)
        stack.append(V)
    stack.append(stack[-1] * 1.5)  # the same support as the model before it
    bad = stack[-1].copy()
    bad[0, np.flatnonzero(bad[0])[:2]] = np.nan
    stack.append(bad)
    Ws = np.stack(stack)
    M = margins_of_stack(data, Ws)
    for q in range(Ws.shape[0]):
        np.testing.assert_array_equal(M[q], margins(data, Ws[q]))
    assert np.isnan(M[-1]).any() and not np.isnan(M[:-1]).any()


@pytest.mark.parametrize("shape", [(1, 1), (65, 130), (200, 7), (64, 64)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_transpose_is_numpys(shape, dtype):
    X = np.random.default_rng(1).standard_normal(shape).astype(dtype)
    for source in (X, X[:, ::-1], np.asfortranarray(X)):  # any layout
        out = np.empty(source.shape[::-1], dtype)
        K.transpose(source, out)
        np.testing.assert_array_equal(out, source.T)


# numba compiles for this CPU: where it has FMA, the dense margins fuse each term into its sum
HOST_FMA = bool(llvm.get_host_cpu_features().get("fma", False))


def fused_margins(Xt: np.ndarray, Ws: np.ndarray, samples: np.ndarray) -> np.ndarray:
    """Each (model, output)'s margin at ``samples``: its sum over its own non-zeros in
    increasing feature index, each term fused into the sum with one rounding (an exact
    rational multiply-add, i.e. an FMA), or multiplied and added on a CPU without FMA."""
    M = np.zeros((Ws.shape[0], Ws.shape[1], samples.size))
    for q, r in np.ndindex(Ws.shape[:2]):
        support = np.flatnonzero(Ws[q, r])
        for c, i in enumerate(samples):
            s = 0.0
            for j in support:
                w, x = float(Ws[q, r, j]), float(Xt[j, i])
                if HOST_FMA and math.isfinite(x) and math.isfinite(s):
                    s = float(Fraction(w) * Fraction(x) + Fraction(s))
                else:  # inf and NaN propagate alike either way
                    s = s + w * x
            M[q, r, c] = s
    return M


@pytest.mark.parametrize("n_models", [1, 2, 3, 4, 5, 9])
@pytest.mark.parametrize("outputs", [1, 3])
def test_margins_in_tiles_of_models_are_each_models_own_sums(n_models, outputs):
    # The dense kernel sums four models at a time over their union support (a model's
    # zero weights add +-0): the bits must be each model's own sum in index order, over
    # blocks of samples that end mid-block, for any stacking and any data, non-finite too.
    rng = np.random.default_rng(n_models * 10 + outputs)
    d, n = 37, 1200
    Xt = rng.standard_normal((d, n)) * rng.choice([1e-3, 1.0, 1e3], size=(d, 1))
    Ws = np.zeros((n_models, outputs, d))
    for q, r in np.ndindex(Ws.shape[:2]):
        size = rng.integers(0, d + 1)
        Ws[q, r, rng.choice(d, size, replace=False)] = rng.standard_normal(size)
    Ws[0, 0, :6] = -0.0  # negative zeros count as zeros
    bad = Xt.copy()
    bad[3, 700], bad[11, 5] = np.inf, np.nan
    # block edges (512 samples), the bad values' samples, and others
    samples = np.unique(np.r_[0, 1, 5, 511, 512, 700, 1023, 1024, n - 1, rng.integers(0, n, 12)])
    for raw in (Xt, bad):
        data = K.as_kernel_matrix(raw)  # read-only, as a data set's columns (one signature)
        M = np.full((n_models, outputs, n), np.nan)
        checks = K.column_checks(data)
        K.margins_columns(data, checks, Ws, M)
        np.testing.assert_array_equal(M[:, :, samples], fused_margins(data, Ws, samples))
        for q in range(n_models):  # whatever a model is stacked with: its bits alone
            alone = np.full((1, outputs, n), np.nan)
            K.margins_columns(data, checks, Ws[q : q + 1], alone)  # the checks reused
            np.testing.assert_array_equal(M[q], alone[0])
            fresh = np.full((1, outputs, n), np.nan)
            K.margins_columns(data, K.column_checks(data), Ws[q : q + 1], fresh)
            np.testing.assert_array_equal(fresh, alone)
        # the tiles' columns are recorded as they are read, a bad value's block as such
        # (samples 700 and 5: the second and first blocks of 512)
        want = np.where(checks != 0, 1, 0)
        if raw is bad:
            want[1, 3], want[0, 11] = 2 * (checks[1, 3] != 0), 2 * (checks[0, 11] != 0)
        np.testing.assert_array_equal(checks, want)
        assert (checks != 0).any() == (n_models * outputs >= 4)  # no tile, no check
        assert (2 in checks) == (raw is bad and n_models * outputs >= 4)


@pytest.mark.parametrize("loss", LOSSES)
def test_client_losses_from_margins_match_numpy(loss, sparse):
    data, W, code = setup_case(loss, sparse)
    l2 = 0.1
    Xd, ptr = dense(data.X), data.client_ptr
    for Wcase in (W, sparsify(W)):
        expected = [
            np_loss(Xd[ptr[i] : ptr[i + 1]], data.y[ptr[i] : ptr[i + 1]], Wcase, loss, l2)
            for i in range(data.n_clients)
        ]
        M = margins(data, Wcase)
        out = K.client_losses_from_margins(M, data.y, ptr, code, Wcase, l2)
        assert out.shape == (data.n_clients,)
        np.testing.assert_allclose(out, expected, rtol=RTOL)


def test_softmax_losses_are_logsumexp_to_an_ulp_at_every_scale_and_keep_nan():
    # within a few ulps of SciPy's log-sum-exp at margins up to 1e300 apart, over more samples
    # than a chunk (256)
    from scipy.special import logsumexp

    rng = np.random.default_rng(7)
    n, c = 700, 5
    M = rng.standard_normal((c, n)) * np.repeat([1.0, 30.0, 700.0, 1e300], n // 4 + 1)[:n]
    M[2, 10] = -np.inf  # one class impossible: its term is exactly 0 beside the others
    y = rng.integers(0, c, n).astype(np.float64)
    y[10] = 0
    ptr = np.arange(n + 1, dtype=np.int64)  # a client a sample: each loss alone
    got = K.client_losses_from_margins(M, y, ptr, K.SOFTMAX, np.zeros((c, 1)), 0.0)
    want = logsumexp(M, axis=0) - M[y.astype(int), np.arange(n)]
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=1e-14, atol=1e-12)
    assert np.array_equal(np.isfinite(got), finite)
    M[3, 20] = np.nan  # a NaN margin makes its sample's loss NaN, never a number
    got = K.client_losses_from_margins(M, y, ptr, K.SOFTMAX, np.zeros((c, 1)), 0.0)
    assert np.isnan(got[20]) and np.isfinite(got[21])


def test_weighted_sum_matches_numpy():
    rng = np.random.default_rng(3)
    values = rng.standard_normal(11) * 10
    p = rng.random(11)
    np.testing.assert_allclose(K.weighted_sum(values, p), float(values @ p), rtol=RTOL)
    assert K.weighted_sum(np.array([2.0, -3.0]), np.array([0.25, 0.5])) == -1.0


@pytest.mark.parametrize("loss", ["logistic", "softmax"])
def test_correct_from_margins_matches_numpy(loss, sparse):
    # 300 rows: more hits than an int8 counter could hold
    data = make_data(loss, sizes=(100, 120, 80), d=20, sparse=sparse, seed=4)
    rng = np.random.default_rng(5)
    c = N_CLASSES if loss == "softmax" else 1
    W = rng.standard_normal((c, data.n_features))
    Z = dense(data.X) @ W.T
    if loss == "logistic":
        pred = np.where(Z[:, 0] > 0, 1.0, -1.0)
    else:
        pred = np.argmax(Z, axis=1).astype(float)
    expected = int(np.sum(pred == data.y))
    code = K.LOSS_CODES[loss]
    M = margins(data, W)
    assert K.correct_from_margins(M, data.y, code) == expected
    # labels equal to the predictions: every row correct
    assert K.correct_from_margins(M, pred, code) == data.n_samples > 127


@pytest.mark.parametrize("loss", LOSSES)
def test_gradient_matches_finite_differences(loss, sparse):
    data, W, code = setup_case(loss, sparse, seed=6)
    X, y = data.kernel_X, data.y
    l2 = 0.03
    rows = np.arange(data.n_samples, dtype=np.int64)
    G = np.empty(W.shape)
    s = np.empty(W.shape[0])
    K.batch_grad(X, y, rows, W, code, l2, G, s)
    scratch = np.empty(W.shape)
    h = 1e-6
    fd = np.empty(W.shape)
    for r in range(W.shape[0]):
        for j in range(W.shape[1]):
            Wp, Wm = W.copy(), W.copy()
            Wp[r, j] += h
            Wm[r, j] -= h
            fp = K.batch_grad(X, y, rows, Wp, code, l2, scratch, s)
            fm = K.batch_grad(X, y, rows, Wm, code, l2, scratch, s)
            fd[r, j] = (fp - fm) / (2 * h)
    assert np.abs(G).max() > 1e-3  # a non-trivial gradient
    np.testing.assert_allclose(G, fd, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("sparse_X", [False, True], ids=["dense", "csr"])
def test_logistic_huge_margins_are_finite(sparse_X):
    # rows z = +-s * e_j, margins y z.w of about +-1000 in both directions
    d = 4
    A = np.zeros((4, d))
    A[0, 0], A[1, 1], A[2, 2], A[3, 3] = 500.0, -500.0, 800.0, -1200.0
    y = np.array([1.0, 1.0, -1.0, -1.0])
    W = np.array([[2.0, 2.0, 1.5, 1.0]])
    m = y * (A @ W[0])
    assert np.all(np.abs(m) >= 1000)
    X = K.as_kernel_matrix(sp.csr_matrix(A)) if sparse_X else K.as_kernel_matrix(A)
    G = np.empty_like(W)
    rows = np.arange(4, dtype=np.int64)
    value = K.batch_grad(X, y, rows, W, K.LOGISTIC, 0.0, G, np.empty(1))
    assert np.isfinite(value) and np.all(np.isfinite(G))
    np.testing.assert_allclose(value, np.mean(np.logaddexp(0.0, -m)), rtol=RTOL)
    np.testing.assert_allclose(G, np_grad(A, y, W, "logistic", 0.0), rtol=RTOL, atol=1e-300)
    # the two misclassified rows (m = -1000, -1200) give loss ~ |m|, gradient -y z / n
    np.testing.assert_allclose(value, (1000.0 + 1200.0) / 4, rtol=RTOL)
    np.testing.assert_allclose(G[0], [0.0, 125.0, 200.0, 0.0], rtol=RTOL, atol=1e-300)
    M = np.empty((1, 1, 4))
    if sparse_X:
        K.margins_csc(K.as_kernel_matrix(sp.csr_matrix(A).T), W[None], M)  # as kernel_csc
    else:
        At = K.as_kernel_matrix(A.T)  # read-only, as FederatedData.columns
        K.margins_columns(At, K.column_checks(At), W[None], M)
    M = M[0]
    ptr = np.array([0, 2, 4], dtype=np.int64)
    client = K.client_losses_from_margins(M, y, ptr, K.LOGISTIC, W, 0.0)
    np.testing.assert_allclose(client, [500.0, 600.0], rtol=RTOL)


def test_softmax_huge_scores_are_finite():
    A = np.array([[1000.0, 0.0], [0.0, -900.0]])
    y = np.array([2.0, 0.0])
    W = np.array([[1.0, 1.0], [0.0, 0.0], [-1.0, 0.5]])  # scores up to +-1000
    G = np.empty_like(W)
    rows = np.arange(2, dtype=np.int64)
    value = K.batch_grad(K.as_kernel_matrix(A), y, rows, W, K.SOFTMAX, 0.0, G, np.empty(3))
    assert np.isfinite(value) and np.all(np.isfinite(G))
    np.testing.assert_allclose(value, np_loss(A, y, W, "softmax", 0.0), rtol=RTOL)
    np.testing.assert_allclose(G, np_grad(A, y, W, "softmax", 0.0), rtol=RTOL, atol=1e-300)


def numba_cache_dir(env: dict) -> str:
    import os
    import subprocess
    import sys

    code = "import numba, fedsparse.kernels; print(numba.config.CACHE_DIR)"
    clean = {
        k: v
        for k, v in os.environ.items()
        if k not in ("FEDSPARSE_NUMBA_CACHE", "NUMBA_CACHE_DIR", "SLURM_JOB_ID")
    }
    if "PYTHONPATH" in env:  # in front of the caller's own
        env = {
            **env,
            "PYTHONPATH": os.pathsep.join([env["PYTHONPATH"], clean.get("PYTHONPATH", "")]),
        }
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**clean, **env},
        check=True,
        capture_output=True,
        text=True,
    )
    return out.stdout.strip()


def test_numba_cache_is_keyed_by_kernel_sources_and_node_local_under_slurm(tmp_path):
    explicit = numba_cache_dir({"FEDSPARSE_NUMBA_CACHE": str(tmp_path / "c")})
    assert explicit.startswith(str(tmp_path / "c") + "/") and len(explicit.rsplit("/", 1)[1]) == 16
    slurm = numba_cache_dir({"SLURM_JOB_ID": "42", "TMPDIR": str(tmp_path / "node")})
    assert slurm.startswith(str(tmp_path / "node") + "/fedsparse-numba-")
    assert slurm.rsplit("/", 1)[1] == explicit.rsplit("/", 1)[1]  # same key: same sources


def test_numba_cache_key_covers_the_builtin_families_kernels(tmp_path):
    # The registry's entry points name the families; the kernels find their sources from them.
    import shutil
    from pathlib import Path

    import fedsparse
    from fedsparse.plugins import builtin_kernel_sources

    package = Path(fedsparse.__file__).resolve().parent
    found = [p.resolve() for p in builtin_kernel_sources()]
    assert found == sorted(package.glob("families/*/kernels.py")) and len(found) >= 3
    copy = tmp_path / "src"
    shutil.copytree(package, copy / "fedsparse", ignore=shutil.ignore_patterns("__pycache__"))
    env = {"FEDSPARSE_NUMBA_CACHE": str(tmp_path / "c"), "PYTHONPATH": str(copy)}
    before = numba_cache_dir(env)
    assert before == numba_cache_dir({**env, "PYTHONPATH": str(package.parent)})
    kernels = copy / "fedsparse" / found[-1].relative_to(package)
    kernels.write_text(kernels.read_text() + "\n# edited\n")
    assert numba_cache_dir(env) != before


KERNELS = {  # a kernel of each module below, and what its module imports of the package
    "dense_steps": "fedsparse.kernels.dense_steps.descend_members",  # simd, losses -> rows
    "rows": "fedsparse.kernels.rows.prefetch_csr_row",  # nothing
    "rounds": "fedsparse.kernels.rounds.local_sgd_cohort_round",  # dense_steps
    "prox": "fedsparse.kernels.prox.prox_steps",  # network -> mlp, cnn -> layers -> losses
    "sfedhp": "fedsparse.families.sfedhp.kernels.sfedhp_round",  # prox
    "ssca": "fedsparse.families.ssca.kernels.weighted_rows",  # network
}


def kernel_source(key: str, root):
    """The file under the package folder ``root`` that defines ``KERNELS[key]``."""
    return root.joinpath(*KERNELS[key].rpartition(".")[0].split(".")[1:]).with_suffix(".py")


def test_each_kernel_module_caches_under_the_key_of_what_it_imports(tmp_path):
    """numba's dispatchers (in a fresh process) hold ``<base>/<module_key(file)>/...``."""
    import json
    import os
    import subprocess
    import sys

    from fedsparse.kernels.cache import PACKAGE_ROOT, module_key

    code = (
        "import importlib, json, sys, fedsparse.kernels\n"
        "out = {}\n"
        "for key, name in json.loads(sys.argv[1]).items():\n"
        "    module, _, fn = name.rpartition('.')\n"
        "    out[key] = getattr(importlib.import_module(module), fn)._cache._cache_path\n"
        "print(json.dumps(out))\n"
    )
    clean = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"}
    out = subprocess.run(
        [sys.executable, "-c", code, json.dumps(KERNELS)],
        env={**clean, "FEDSPARSE_NUMBA_CACHE": str(tmp_path / "c")},
        check=True,
        capture_output=True,
        text=True,
    )
    for key, path in json.loads(out.stdout).items():
        source = kernel_source(key, PACKAGE_ROOT)
        assert path.startswith(f"{tmp_path / 'c'}/{module_key(source)}/"), (key, path)


def test_an_edited_kernel_module_recompiles_itself_and_what_imports_it_only(tmp_path, monkeypatch):
    """An edit reaches the key of every kernel module whose machine code can hold the edited
    code (the edited module and those importing it, directly or not), and no other."""
    import shutil

    from fedsparse.kernels import cache

    copy = tmp_path / "fedsparse"
    shutil.copytree(cache.PACKAGE_ROOT, copy, ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(cache, "PACKAGE_ROOT", copy)
    files = {k: kernel_source(k, copy) for k in KERNELS}

    def keys() -> dict[str, str]:
        cache.module_key.cache_clear()
        return {k: cache.module_key(f) for k, f in files.items()}

    def changed_by(edited: str) -> set[str]:
        before = keys()
        path = copy / edited
        path.write_text(path.read_text() + "\n# edited\n")
        after = keys()
        return {k for k in KERNELS if after[k] != before[k]}

    try:
        assert len(set(keys().values())) == len(KERNELS)  # a key per module
        assert changed_by("families/ssca/kernels.py") == {"ssca"}
        assert changed_by("kernels/simd.py") == {"dense_steps", "rounds"}
        assert changed_by("kernels/layers.py") == {"prox", "sfedhp", "ssca"}
        assert changed_by("kernels/rows.py") == set(KERNELS)
        assert changed_by("cli.py") == set()  # not imported by any kernel module
    finally:
        cache.module_key.cache_clear()


def test_import_closure_reads_relative_and_absolute_imports(tmp_path, monkeypatch):
    from fedsparse.kernels import cache

    root = tmp_path / "fedsparse"
    for name in [
        "kernels/__init__.py",
        "kernels/a.py",
        "kernels/b.py",
        "kernels/c.py",
        "families/f/__init__.py",
        "families/f/kernels.py",
        "other.py",
    ]:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("")
    (root / "kernels/a.py").write_text(
        "from .b import x\nfrom . import (  # the modules\n    c as cc,  # one\n    b,\n)\n"
    )
    (root / "kernels/b.py").write_text("def f():\n    import fedsparse.other\n")
    (root / "families/f/kernels.py").write_text("from ...kernels.a import y\nimport numpy\n")
    monkeypatch.setattr(cache, "PACKAGE_ROOT", root)
    closure = cache.import_closure(root / "families/f/kernels.py")
    expect = ["families/f/kernels.py", "kernels/a.py", "kernels/b.py", "kernels/c.py", "other.py"]
    assert [str(p.relative_to(root)) for p in closure] == expect
    assert cache.import_closure(root / "kernels/c.py") == [root / "kernels/c.py"]
    (root / "kernels/c.py").write_text("from . import helper\n")  # a name of the package
    assert cache.import_closure(root / "kernels/c.py") == [
        root / "kernels/__init__.py",
        root / "kernels/c.py",
    ]


def test_prefetching_csr_rows_reads_nothing_out_of_place():
    """Prefetch hints past a row's end (even the array's) must not fault or write."""
    A = sp.random(30, 50, density=0.1, format="csr", random_state=np.random.default_rng(2))
    A = sp.vstack([A, sp.csr_matrix((1, 50))]).tocsr()  # an empty last row
    X = K.as_kernel_matrix(A)
    before = [a.copy() for a in X]
    for i in range(A.shape[0]):
        prefetch_csr_row(X, i)
    for a, b in zip(X, before, strict=True):
        np.testing.assert_array_equal(a, b)


def test_nnz_per_client_counts_every_output_row():
    rng = np.random.default_rng(3)
    W_local = rng.standard_normal((4, 3, 37))
    W_local[rng.random(W_local.shape) < 0.7] = 0.0
    W_local[2] = 0.0
    W_local[1, 0, 5] = -0.0  # signed zero is no upload
    expect = np.count_nonzero(W_local.reshape(4, -1), axis=1)
    assert np.array_equal(K.nnz_per_client(W_local), expect)


def test_nnz_above_counts_like_numpy_without_temporaries():
    rng = np.random.default_rng(3)
    models = rng.normal(size=(7, 501)) * (rng.random((7, 501)) < 0.3)
    models[2, :5] = [np.nan, 1e-9, -1e-9, np.inf, -0.0]
    for tol in (0.0, 1e-9, 0.5):
        expect = np.count_nonzero(np.abs(models) > tol, axis=1)
        assert np.array_equal(K.nnz_above(models, tol), expect)
    assert K.nnz_above(models, 0.0)[2] == np.count_nonzero(models[2] != 0) - 1  # NaN: not > 0


@numba.njit
def _log1p_exp_minus_each(a):
    out = np.empty_like(a)
    for i in range(a.shape[0]):
        out[i] = log1p_exp_minus(a[i])
    return out


def test_log1p_exp_minus_is_within_an_ulp_of_libm():
    # our own log(1 + e^-a), arithmetic only so that it vectorises: against libm's (within
    # about half an ulp) over the whole range, its edges, subnormal results, inf and NaN
    rng = np.random.default_rng(11)
    a = np.concatenate(
        [
            rng.exponential(3.0, 200_000),
            np.linspace(0.0, 760.0, 20_001),
            10.0 ** rng.uniform(-320, -1, 2_000),
            [0.0, 5e-324, 1e-300, 1e-17, 0.34657359, 0.34657360, 36.7, 37.0, 708.4, 709.8],
            [744.4, 745.1, 745.2, 746.0, 1e10, np.inf, np.nan],
        ]
    )
    out = _log1p_exp_minus_each(a)
    with np.errstate(over="ignore", under="ignore"):
        expected = np.array([math.log1p(math.exp(-x)) if x == x else np.nan for x in a])
    finite = np.isfinite(a)
    assert np.isnan(out[-1]) and out[-2] == 0.0
    gap = np.abs(out[finite] - expected[finite]) / np.spacing(expected[finite])
    assert gap.max() <= 2.0, a[finite][np.argmax(gap)]
    assert np.mean(out[finite] == expected[finite]) > 0.8  # mostly the same bits as libm


def test_client_losses_are_summed_in_four_lanes():
    # the documented order: a client's i-th sample loss into lane i % 4, in order, then
    # (lane 0 + lane 1) + (lane 2 + lane 3); least squares, whose sample losses NumPy gives
    # bit for bit, across chunks and client sizes that leave remainders
    rng = np.random.default_rng(12)
    sizes = [1, 2, 3, 4, 5, 255, 256, 257, 1027]
    ptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    n = int(ptr[-1])
    M = rng.standard_normal((1, n)) * rng.choice([1e-3, 1.0, 1e3], size=n)
    y = rng.standard_normal(n)
    out = K.client_losses_from_margins(M, y, ptr, K.LEAST_SQUARES, np.zeros((1, 3)), 0.0)
    for k, size in enumerate(sizes):
        losses = (M[0, ptr[k] : ptr[k + 1]] - y[ptr[k] : ptr[k + 1]]) ** 2
        lanes = [0.0, 0.0, 0.0, 0.0]
        for i, v in enumerate(losses):
            lanes[i % 4] += v
        assert out[k] == ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) / size


def test_logistic_client_losses_are_log1p_exp_minus_bit_for_bit():
    # the kernel computes exp and log1p in two loops (faster): each sample's loss must still
    # be log1p_exp_minus(|v|) + max(-v, 0) of one call, v = y m, summed in the four lanes
    rng = np.random.default_rng(13)
    sizes = [1, 3, 256, 259, 1000]
    ptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    n = int(ptr[-1])
    M = rng.standard_normal((1, n)) * rng.choice([1e-3, 1.0, 30.0], size=n)
    M[0, rng.choice(n, 40, replace=False)] = rng.uniform(690.0, 760.0, 40) * rng.choice([-1, 1], 40)
    M[0, 7], M[0, 300] = np.inf, -np.inf
    y = rng.choice([-1.0, 1.0], size=n)
    out = K.client_losses_from_margins(M, y, ptr, K.LOGISTIC, np.zeros((1, 3)), 0.0)
    v = y * M[0]
    losses = _log1p_exp_minus_each(np.abs(v)) + np.where(v < 0.0, -v, 0.0)
    for k, size in enumerate(sizes):
        lanes = [0.0, 0.0, 0.0, 0.0]
        for i, value in enumerate(losses[ptr[k] : ptr[k + 1]]):
            lanes[i % 4] += value
        expected = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) / size
        assert out[k] == expected or (np.isnan(out[k]) and np.isnan(expected)), k
