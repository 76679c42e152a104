"""MLP kernels against a plain NumPy forward/backward, finite differences and the linear kernels."""

from __future__ import annotations

import numba
import numpy as np
import pytest
import scipy.sparse as sp
from conftest import np_act, np_hard_threshold, np_per_sample

from fedsparse import kernels as K
from fedsparse.kernels.elementary import exp_le0_array
from fedsparse.kernels.prox import StepModel

ACTS = ("relu", "swish", "tanh", "sigmoid")
LOSSES = ("least_squares", "logistic", "softmax")
N_CLASSES = 3
RTOL = 1e-11


# ---------------------------------------------------------------------------
# A plain NumPy MLP, written from the layout and the loss definitions


def unpack(theta, sizes, bias):
    """The layers' (W, b) views of a flat parameter vector (b None without bias)."""
    layers, pos = [], 0
    for fan_in, out in zip(sizes[:-1], sizes[1:], strict=True):
        W = theta[pos : pos + out * fan_in].reshape(out, fan_in)
        pos += out * fan_in
        b = None
        if bias:
            b = theta[pos : pos + out]
            pos += out
        layers.append((W, b))
    assert pos == theta.size
    return layers


def np_scores(X, theta, sizes, bias, act):
    """Output scores, each layer's input and each hidden layer's act'(z), for backprop."""
    a, inputs, derivs = np.asarray(X), [], []
    layers = unpack(theta, sizes, bias)
    for k, (W, b) in enumerate(layers):
        inputs.append(a)
        z = a @ W.T + (0.0 if b is None else b)
        if k == len(layers) - 1:
            return z, (inputs, derivs)
        a, da = np_act(act, z)
        derivs.append(da)
    raise AssertionError


def np_value_grad(X, y, theta, sizes, bias, act, loss, l2):
    """Mean loss plus l2/2 ||theta||^2 and its gradient (flat, same layout)."""
    n = len(y)
    z, (inputs, derivs) = np_scores(X, theta, sizes, bias, act)
    per, delta = np_per_sample(z, y, loss)
    delta = delta / n
    layers = unpack(theta, sizes, bias)
    grads = []
    for k in range(len(layers) - 1, -1, -1):
        W, b = layers[k]
        grads.append(delta.sum(axis=0) if b is not None else None)
        grads.append(delta.T @ inputs[k])
        if k > 0:
            delta = (delta @ W) * derivs[k - 1]
    flat = np.concatenate([g.ravel() for g in reversed(grads) if g is not None])
    value = per.mean() if n else np.nan  # no rows (an empty client): only the gradient is used
    return value + 0.5 * l2 * theta @ theta, flat + l2 * theta


def np_correct(z, y, loss):
    if loss == "softmax":
        return int(np.sum(np.argmax(z, axis=1) == y.astype(int)))
    if loss == "logistic":
        return int(np.sum(np.where(z[:, 0] > 0, 1.0, -1.0) == y))
    return 0


# ---------------------------------------------------------------------------
# Data


def make_case(loss, n=40, d=8, seed=0):
    """Dense X with zeros (so CSR has structure), its CSR triple, and labels fit for ``loss``."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((n, d))
    X[rng.random((n, d)) < 0.4] = 0.0
    if loss == "least_squares":
        y = rng.standard_normal(n)
    elif loss == "logistic":
        y = rng.choice([-1.0, 1.0], n)
    else:
        y = rng.integers(0, N_CLASSES, n).astype(np.float64)
    # the kernels' read-only form, as a run passes its data (one compiled signature)
    return K.as_kernel_matrix(X), K.as_kernel_matrix(sp.csr_matrix(X)), y


def n_out(loss):
    return N_CLASSES if loss == "softmax" else 1


def random_theta(sizes, bias, seed=1, scale=0.6):
    return scale * np.random.default_rng(seed).standard_normal(K.n_params(sizes, bias))


def sizes_of(d, hidden, loss):
    return np.array([d, *hidden, n_out(loss)], dtype=np.int64)


ROWS = np.array([3, 0, 7, 12, 7, 31, 25], dtype=np.int64)  # a repeated row counts twice


def kernel_grad(X, y, rows, theta, sizes, bias, act, loss, l2, max_batch=10, dense=True):
    G = np.full(theta.size, 7.0)  # garbage: must be overwritten, not accumulated into
    work = K.mlp_work(sizes, max_batch, dense=dense)
    for buf in work:
        buf[:] = np.nan  # stale work space must not leak into results
    if not isinstance(X, tuple):  # read-only, as a run passes its data (one signature)
        X = K.as_kernel_matrix(X)
    value = K.mlp_batch_grad(
        X, y, rows, theta, sizes, bias, K.ACTIVATIONS[act], K.LOSS_CODES[loss], l2, G, work
    )
    return value, G


# ---------------------------------------------------------------------------
# mlp_batch_grad


def test_constants_and_sizes():
    assert (K.RELU, K.SWISH, K.TANH, K.SIGMOID) == (0, 1, 2, 3)
    assert K.ACTIVATIONS == {"relu": 0, "swish": 1, "tanh": 2, "sigmoid": 3}
    assert K.n_params(np.array([784, 100, 10]), True) == 784 * 100 + 100 + 100 * 10 + 10
    assert K.n_params([5, 3], False) == 15


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("ta, tb", [("n", "n"), ("t", "n"), ("n", "t"), ("t", "t")])
def test_layer_products_are_our_own_blas(dtype, ta, tb):
    """The kernels' row-major ``gemm`` is ``cblas_?gemm`` of scipy-openblas32 (the network
    numerics name that library): the same bits as calling it directly, and NumPy's product
    within rounding, for every transpose flag, with alpha and beta."""
    import ctypes

    from fedsparse.kernels import blas
    from fedsparse.kernels.layers import gemm

    rng = np.random.default_rng(3)
    m, n, k = 37, 29, 53
    A = rng.standard_normal((m, k) if ta == "n" else (k, m)).astype(dtype)
    B = rng.standard_normal((k, n) if tb == "n" else (n, k)).astype(dtype)
    C0 = rng.standard_normal((m, n)).astype(dtype)
    ours = C0.copy()
    flat = (A.ravel(), B.ravel(), 0.5, ours.ravel())
    gemm(ord(ta), ord(tb), m, n, k, 0.75, *flat)
    direct = C0.copy()
    real = ctypes.c_float if dtype == np.float32 else ctypes.c_double
    call = blas.LIBRARY["scipy_cblas_" + ("s" if dtype == np.float32 else "d") + "gemm"]
    flag = {"n": blas.NO_TRANS, "t": blas.TRANS}
    ptr = lambda a: a.ctypes.data_as(ctypes.c_void_p)  # noqa: E731
    call(blas.ROW_MAJOR, flag[ta], flag[tb], m, n, k, real(0.75), ptr(A), A.shape[1], ptr(B),
         B.shape[1], real(0.5), ptr(direct), n)  # fmt: skip
    assert ours.tobytes() == direct.tobytes()
    opA, opB = (A if ta == "n" else A.T), (B if tb == "n" else B.T)
    want = 0.75 * opA.astype(float) @ opB.astype(float) + 0.5 * C0.astype(float)
    tol = 1e-4 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(ours, want, rtol=tol, atol=tol * np.abs(want).max())


@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.parametrize("hidden", [(5,), (6, 4)], ids=["1hidden", "2hidden"])
def test_batch_grad_matches_numpy_dense_and_csr(loss, hidden):
    X, Xcsr, y = make_case(loss)
    sizes = sizes_of(X.shape[1], hidden, loss)
    for act in ACTS:
        for bias in (True, False):
            theta = random_theta(sizes, bias)
            want_v, want_g = np_value_grad(X[ROWS], y[ROWS], theta, sizes, bias, act, loss, 0.05)
            for Xk, dense in ((X, True), (Xcsr, False)):  # CSR: no dense row buffer
                v, G = kernel_grad(Xk, y, ROWS, theta, sizes, bias, act, loss, 0.05, dense=dense)
                np.testing.assert_allclose(v, want_v, rtol=RTOL)
                np.testing.assert_allclose(G, want_g, rtol=RTOL, atol=1e-13)


def test_batch_grad_single_row_and_full_batch():
    X, Xcsr, y = make_case("softmax")
    sizes = sizes_of(X.shape[1], (5,), "softmax")
    theta = random_theta(sizes, True)
    for rows in (np.array([9], dtype=np.int64), np.arange(len(y), dtype=np.int64)):
        want_v, want_g = np_value_grad(X[rows], y[rows], theta, sizes, True, "swish", "softmax", 0)
        for Xk in (X, Xcsr):
            v, G = kernel_grad(Xk, y, rows, theta, sizes, True, "swish", "softmax", 0.0, 40)
            np.testing.assert_allclose(v, want_v, rtol=RTOL)
            np.testing.assert_allclose(G, want_g, rtol=RTOL, atol=1e-13)


def test_relu_derivative_at_zero_is_zero():
    X, Xcsr, y = make_case("softmax")
    sizes = sizes_of(X.shape[1], (5,), "softmax")
    theta = random_theta(sizes, True)
    theta[: 5 * X.shape[1] + 5] = 0.0  # first layer: every hidden z is exactly 0
    for Xk in (X, Xcsr):
        _, G = kernel_grad(Xk, y, ROWS, theta, sizes, True, "relu", "softmax", 0.0)
        np.testing.assert_array_equal(G[: 5 * X.shape[1] + 5], 0.0)


def relu_kink_free_seed(X, sizes, bias, margin=1e-3):
    """A parameter seed whose hidden pre-activations on X all stay ``margin`` away from 0."""
    for seed in range(200):
        theta = random_theta(sizes, bias, seed)
        a = X
        ok = True
        for W, b in unpack(theta, sizes, bias)[:-1]:
            z = a @ W.T + (0.0 if b is None else b)
            ok &= np.abs(z).min() > margin
            a = np.maximum(z, 0.0)
        if ok:
            return theta
    raise AssertionError("no kink-free point found")


@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("loss", LOSSES)
def test_batch_grad_central_differences(act, loss):
    X, _, y = make_case(loss, n=20, d=5, seed=3)
    rows = np.arange(0, 20, 2, dtype=np.int64)
    sizes = sizes_of(5, (4, 3), loss)
    theta = (
        relu_kink_free_seed(X[rows], sizes, True) if act == "relu" else random_theta(sizes, True, 2)
    )
    _, G = kernel_grad(X, y, rows, theta, sizes, True, act, loss, 0.1)
    eps = 1e-6
    for j in np.random.default_rng(4).choice(theta.size, 12, replace=False):
        e = np.zeros_like(theta)
        e[j] = eps
        up = kernel_grad(X, y, rows, theta + e, sizes, True, act, loss, 0.1)[0]
        down = kernel_grad(X, y, rows, theta - e, sizes, True, act, loss, 0.1)[0]
        np.testing.assert_allclose((up - down) / (2 * eps), G[j], rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("loss", LOSSES)
def test_no_hidden_layer_equals_linear_kernel(loss):
    X, Xcsr, y = make_case(loss)
    c, d = n_out(loss), X.shape[1]
    sizes = np.array([d, c], dtype=np.int64)
    theta = random_theta(sizes, False)
    for Xk in (X, Xcsr):
        v, G = kernel_grad(Xk, y, ROWS, theta, sizes, False, "relu", loss, 0.05)
        W = theta.reshape(c, d)
        G_lin = np.empty((c, d))
        v_lin = K.batch_grad(Xk, y, ROWS, W, K.LOSS_CODES[loss], 0.05, G_lin, np.empty(c))
        np.testing.assert_allclose(v, v_lin, rtol=RTOL)
        np.testing.assert_allclose(G, G_lin.ravel(), rtol=RTOL, atol=1e-13)


def test_batch_grad_rejects_small_work_and_wrong_theta():
    X, Xcsr, y = make_case("softmax")
    sizes = sizes_of(X.shape[1], (5,), "softmax")
    theta = random_theta(sizes, True)
    with pytest.raises(ValueError, match="work space"):
        kernel_grad(X, y, ROWS, theta, sizes, True, "relu", "softmax", 0.0, max_batch=3)
    with pytest.raises(ValueError, match="dense"):
        kernel_grad(X, y, ROWS, theta, sizes, True, "relu", "softmax", 0.0, dense=False)
    kernel_grad(Xcsr, y, ROWS, theta, sizes, True, "relu", "softmax", 0.0, dense=False)  # fine
    with pytest.raises(ValueError, match="theta"):
        kernel_grad(X, y, ROWS, theta[:-1], sizes, True, "relu", "softmax", 0.0)
    with pytest.raises(ValueError, match="sizes"):
        K.mlp_work([8, 0, 3], 4)


# ---------------------------------------------------------------------------
# mlp_eval

PTR = np.array([0, 7, 15, 15, 25, 40], dtype=np.int64)  # an empty client; none a multiple of 3


def np_eval(X, y, thetas, which, sizes, bias, act, loss):
    losses, correct = [], []
    for i in range(len(PTR) - 1):
        rows = slice(PTR[i], PTR[i + 1])
        z, _ = np_scores(X[rows], thetas[which[i]], sizes, bias, act)
        losses.append(np_per_sample(z, y[rows], loss)[0].sum())
        correct.append(np_correct(z, y[rows], loss))
    return np.array(losses), np.array(correct)


@pytest.mark.parametrize("loss", LOSSES)
def test_eval_global_and_personalised(loss):
    X, Xcsr, y = make_case(loss)
    sizes = sizes_of(X.shape[1], (6, 4), loss)
    m = len(PTR) - 1
    thetas = np.stack([random_theta(sizes, True, s) for s in range(m)])
    act = K.ACTIVATIONS["tanh"]
    threads = numba.get_num_threads()
    try:
        for which in (np.zeros(m, dtype=np.int64), np.arange(m, dtype=np.int64)):
            want_loss, want_correct = np_eval(X, y, thetas, which, sizes, True, "tanh", loss)
            if loss != "least_squares":
                assert want_correct.sum() > 0
            got = []
            for Xk in (X, Xcsr):
                for t in {1, min(2, numba.config.NUMBA_NUM_THREADS)}:
                    numba.set_num_threads(t)
                    loss_sum, correct = np.full(m, np.nan), np.full(m, -1, dtype=np.int64)
                    K.mlp_eval(
                        Xk,
                        y,
                        PTR,
                        thetas,
                        which,
                        sizes,
                        True,
                        act,
                        K.LOSS_CODES[loss],
                        3,
                        loss_sum,
                        correct,
                    )
                    np.testing.assert_allclose(loss_sum, want_loss, rtol=RTOL, atol=1e-13)
                    np.testing.assert_array_equal(correct, want_correct)
                    got.append(loss_sum)
            np.testing.assert_array_equal(got[0], got[1])  # thread count does not matter
    finally:
        numba.set_num_threads(threads)


def test_eval_softmax_ties_go_to_lowest_index():
    d = 4
    X = K.as_kernel_matrix(np.ones((3, d)))
    y = np.array([0.0, 1.0, 2.0])
    sizes = np.array([d, 3], dtype=np.int64)
    theta = np.zeros(K.n_params(sizes, False))  # all scores equal
    loss_sum, correct = np.empty(1), np.empty(1, dtype=np.int64)
    K.mlp_eval(
        X,
        y,
        np.array([0, 3]),
        theta[None],
        np.zeros(1, dtype=np.int64),
        sizes,
        False,
        K.RELU,
        K.SOFTMAX,
        2,
        loss_sum,
        correct,
    )
    assert correct[0] == 1
    np.testing.assert_allclose(loss_sum[0], 3 * np.log(3.0), rtol=RTOL)


def test_exp_of_the_activations_is_within_an_ulp_of_libm():
    """sigmoid and swish use a branch-free exp (it vectorises); it must match libm's."""
    rng = np.random.default_rng(3)
    edges = [0.0, -0.0, -5e-324, -1e-300, -0.5 * np.log(2), -np.log(2), -1.0, -700.0, -708.0]
    x = np.concatenate([-rng.exponential(4.0, 200_000), -rng.uniform(0, 708, 50_000), edges])
    got = np.empty_like(x)
    exp_le0_array(x, got)
    want = np.exp(x)
    np.testing.assert_allclose(got, want, rtol=2.3e-16, atol=0)
    assert np.mean(got == want) > 0.8  # mostly the very same bits
    # below -708 the value stays at exp(-708) (libm's would be subnormal or 0), NaN stays NaN
    tail = np.array([-708.5, -745.0, -1e4, -np.inf, np.nan])
    out = np.empty_like(tail)
    exp_le0_array(tail, out)
    np.testing.assert_array_equal(out[:4], got[-1])  # = exp(-708), the last edge
    assert np.isnan(out[4])


def test_exp_is_its_documented_arithmetic_bit_for_bit():
    """exp_le0 is Cody-Waite reduction, Horner's rule of degree 13 and 2**k, in plain IEEE
    operations: NumPy's elementwise operations (no FMA) give the same bits, 2**k by ldexp."""
    from fedsparse.kernels import elementary as E

    rng = np.random.default_rng(4)
    x = np.concatenate(
        [
            -rng.uniform(0, 800, 300_000),
            -rng.exponential(2.0, 300_000),
            [0.0, -0.0, -708.0, -707.99, -745.1, -np.inf],
        ]
    )
    xc = np.maximum(x, E._EXP_FLOOR)
    k = (xc * E._LOG2E + E._ROUND) - E._ROUND
    r = (xc - k * E._LN2_HI) - k * E._LN2_LO
    p = np.full_like(r, E._INV_FACT[13])
    for c in E._INV_FACT[12::-1]:
        p = p * r + c
    want = p * np.ldexp(1.0, k.astype(np.int64))
    got = np.empty_like(x)
    exp_le0_array(x, got)
    np.testing.assert_array_equal(got.view(np.int64), want.view(np.int64))


@pytest.mark.parametrize("act", ACTS)
def test_activations_on_large_inputs_match_numpy(act):
    """Hidden pre-activations of both signs and up to |z| ~ 800 (sigmoid's two branches,
    exp's clamp); a NaN parameter gives a NaN loss (relu maps NaN to 0, as before)."""
    X, _, y = make_case("softmax")
    sizes = sizes_of(X.shape[1], (6,), "softmax")
    theta = random_theta(sizes, True, 4, scale=60.0)
    theta[6 * X.shape[1] + 6 :] *= 1e-2  # moderate scores: a finite, testable loss
    v, G = kernel_grad(X, y, ROWS, theta, sizes, True, act, "softmax", 0.0)
    want_v, want_g = np_value_grad(X[ROWS], y[ROWS], theta, sizes, True, act, "softmax", 0.0)
    np.testing.assert_allclose(v, want_v, rtol=RTOL)
    np.testing.assert_allclose(G, want_g, rtol=RTOL, atol=1e-13)
    theta[0] = np.nan  # a hidden unit's pre-activation NaN (the eval adds no ridge term)
    loss_sum, correct = np.empty(1), np.empty(1, dtype=np.int64)
    one, which = np.array([0, len(y)]), np.zeros(1, dtype=np.int64)
    code = K.ACTIVATIONS[act]
    K.mlp_eval(X, y, one, theta[None], which, sizes, True, code, K.SOFTMAX, 8, loss_sum, correct)
    assert np.isnan(loss_sum[0]) == (act != "relu")


def test_eval_one_large_group_is_split_across_threads():
    """One group of many blocks (a test set) is spread over the threads; the sum is still
    taken in row order, so the bits do not depend on the number of threads."""
    X, Xcsr, y = make_case("softmax", n=203, seed=5)
    sizes = sizes_of(X.shape[1], (7,), "softmax")
    theta = random_theta(sizes, False, 6)
    one = np.array([0, len(y)], dtype=np.int64)
    which = np.zeros(1, dtype=np.int64)
    z, _ = np_scores(X, theta, sizes, False, "swish")
    want = np_per_sample(z, y, "softmax")[0].sum()
    threads = numba.get_num_threads()
    got = []
    try:
        for Xk in (X, Xcsr):
            for t in {1, min(2, numba.config.NUMBA_NUM_THREADS)}:
                numba.set_num_threads(t)
                for block in (4, 16, 500):
                    loss_sum, correct = np.empty(1), np.empty(1, dtype=np.int64)
                    K.mlp_eval(
                        Xk,
                        y,
                        one,
                        theta[None],
                        which,
                        sizes,
                        False,
                        K.SWISH,
                        K.SOFTMAX,
                        block,
                        loss_sum,
                        correct,
                    )
                    np.testing.assert_allclose(loss_sum[0], want, rtol=RTOL)
                    assert correct[0] == np_correct(z, y, "softmax")
                    got.append((t, block, loss_sum[0]))
    finally:
        numba.set_num_threads(threads)
    for _, block, value in got:  # same block size: the same bits for any thread count
        assert all(v == value for _, b2, v in got if b2 == block)


# ---------------------------------------------------------------------------
# mlp_local_sgd_round


def py_round(X, y, ptr, theta, perm, rng, steps, batch, stepsize, sizes, bias, act, loss, l2, tau):
    """The round, transcribed: loop over clients and steps, NumPy gradients, same rows."""
    out = np.empty((len(ptr) - 1, theta.size))
    for i in range(len(ptr) - 1):
        lo, n = ptr[i], ptr[i + 1] - ptr[i]
        b = n if batch <= 0 or batch >= n else batch
        ti = theta.copy()
        for _ in range(steps):
            if b < n:
                K.sample_without_replacement(perm, lo, n, b, rng, i)
            rows = perm[lo : lo + b]
            ti -= stepsize * np_value_grad(X[rows], y[rows], ti, sizes, bias, act, loss, l2)[1]
            if tau > 0:
                ti = np_hard_threshold(ti, tau)
        out[i] = ti
    return out


@pytest.mark.parametrize("loss", ["softmax", "logistic"])
@pytest.mark.parametrize("tau", [0, 40])
def test_local_sgd_round_matches_transcription(loss, tau):
    X, Xcsr, y = make_case(loss)
    ptr = np.array([0, 7, 19, 19, 40], dtype=np.int64)  # batch 8: all rows, sampled, empty, sampled
    sizes = sizes_of(X.shape[1], (6, 4), loss)
    theta = random_theta(sizes, True, scale=0.4)
    m, steps, batch, stepsize, l2 = len(ptr) - 1, 4, 8, 0.2, 0.01
    perm0 = np.arange(len(y), dtype=np.int64)
    perm_py, rng_py = perm0.copy(), K.client_states(5, m)
    want = py_round(
        X,
        y,
        ptr,
        theta,
        perm_py,
        rng_py,
        steps,
        batch,
        stepsize,
        sizes,
        True,
        "swish",
        loss,
        l2,
        tau,
    )
    if tau:
        assert np.count_nonzero(want, axis=1).max() == tau
    work = K.mlp_thread_work(sizes, batch)
    for buf in work:
        buf[:] = np.nan  # stale work space must not leak into results
    threads = numba.get_num_threads()
    results = []
    try:
        for Xk in (X, Xcsr):
            for t in {1, min(2, numba.config.NUMBA_NUM_THREADS)}:
                numba.set_num_threads(t)
                perm, rng = perm0.copy(), K.client_states(5, m)
                out = np.full((m, theta.size), np.nan)
                K.mlp_local_sgd_round(
                    Xk,
                    y,
                    ptr,
                    theta,
                    out,
                    perm,
                    rng,
                    K.SGDConstants(steps, batch, tau, stepsize),
                    StepModel(True, sizes, True, K.SWISH, K.LOSS_CODES[loss], l2),
                    work,
                    np.array([0, theta.size]),
                )
                np.testing.assert_allclose(out, want, rtol=1e-10, atol=1e-12)
                np.testing.assert_array_equal(rng, rng_py)  # the same draws
                np.testing.assert_array_equal(perm, perm_py)
                results.append((Xk is X, out))
    finally:
        numba.set_num_threads(threads)
    for dense in (True, False):  # bit-identical across thread counts
        same = [out for flag, out in results if flag == dense]
        for out in same[1:]:
            np.testing.assert_array_equal(out, same[0])


def test_local_sgd_round_full_batch_no_bias():
    X, _, y = make_case("least_squares")
    ptr = np.array([0, 10, 40], dtype=np.int64)
    sizes = sizes_of(X.shape[1], (5,), "least_squares")
    theta = random_theta(sizes, False, scale=0.3)
    rng = K.client_states(0, 2)
    before = rng.copy()
    out = np.empty((2, theta.size))
    perm = np.arange(len(y), dtype=np.int64)
    K.mlp_local_sgd_round(
        X,
        y,
        ptr,
        theta,
        out,
        perm,
        rng,
        K.SGDConstants(3, 0, 0, 0.05),
        StepModel(True, sizes, False, K.TANH, K.LEAST_SQUARES, 0.0),
        K.mlp_thread_work(sizes, 30),
        np.array([0, theta.size]),
    )
    want = py_round(
        X,
        y,
        ptr,
        theta,
        np.arange(len(y)),
        before.copy(),
        3,
        0,
        0.05,
        sizes,
        False,
        "tanh",
        "least_squares",
        0.0,
        0,
    )
    np.testing.assert_allclose(out, want, rtol=1e-10, atol=1e-12)
    np.testing.assert_array_equal(rng, before)  # batch <= 0: no randomness used
