"""Loss kernels against plain NumPy, for dense and CSR data and all three losses."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from conftest import LOSSES, N_CLASSES, dense, make_data, np_grad, np_loss

from fedsparse import kernels as K

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
    ):
        for _ in range(2):  # a repeated call gives the same answer (G is reset)
            value = K.batch_grad(X, y, rows, W, code, l2, G, s)
            Xr = dense(data.X)[rows]
            np.testing.assert_allclose(value, np_loss(Xr, y[rows], W, loss, l2), rtol=RTOL)
            np.testing.assert_allclose(G, np_grad(Xr, y[rows], W, loss, l2), rtol=RTOL, atol=1e-14)


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
def test_range_loss_matches_numpy(loss, sparse):
    data, W, code = setup_case(loss, sparse)
    l2 = 0.2
    s = np.empty(W.shape[0])
    W_before = W.copy()
    for lo, hi in ((0, data.n_samples), (10, 27), (40, 41)):
        value = K.range_loss(data.kernel_X, data.y, lo, hi, W, code, l2, s)
        expected = np_loss(dense(data.X)[lo:hi], data.y[lo:hi], W, loss, l2)
        np.testing.assert_allclose(value, expected, rtol=RTOL)
    np.testing.assert_array_equal(W, W_before)  # evaluation must not touch W


@pytest.mark.parametrize("loss", LOSSES)
def test_client_losses_matches_numpy(loss, sparse):
    data, W, code = setup_case(loss, sparse)
    l2 = 0.1
    out = K.client_losses(data.kernel_X, data.y, data.client_ptr, W, code, l2)
    Xd, ptr = dense(data.X), data.client_ptr
    expected = [
        np_loss(Xd[ptr[i] : ptr[i + 1]], data.y[ptr[i] : ptr[i + 1]], W, loss, l2)
        for i in range(data.n_clients)
    ]
    assert out.shape == (data.n_clients,)
    np.testing.assert_allclose(out, expected, rtol=RTOL)


def test_weighted_sum_matches_numpy():
    rng = np.random.default_rng(3)
    values = rng.standard_normal(11) * 10
    p = rng.random(11)
    np.testing.assert_allclose(K.weighted_sum(values, p), float(values @ p), rtol=RTOL)
    assert K.weighted_sum(np.array([2.0, -3.0]), np.array([0.25, 0.5])) == -1.0


@pytest.mark.parametrize("loss", ["logistic", "softmax"])
def test_count_correct_matches_numpy(loss, sparse):
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
    got = K.count_correct(data.kernel_X, data.y, W, K.LOSS_CODES[loss])
    assert got == expected
    # a model that predicts every label: all rows correct
    if loss == "logistic":
        y_all = np.where(Z[:, 0] > 0, 1.0, -1.0)
    else:
        y_all = pred
    assert K.count_correct(data.kernel_X, y_all, W, K.LOSS_CODES[loss]) == data.n_samples > 127


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
    client = K.client_losses(X, y, np.array([0, 2, 4], dtype=np.int64), W, K.LOGISTIC, 0.0)
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
