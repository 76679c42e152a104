"""Loss values and gradients for least squares, logistic and softmax models.

The model parameter is always a matrix ``W`` of shape (n_outputs, n_features):
one row for least squares and logistic regression, one row per class for
softmax, so the sparsity constraint is per row. Per-sample losses:

* least squares: ``(z.w - y)**2`` (the papers' form, no 1/2);
* logistic: ``log(1 + exp(-y z.w))`` with ``y`` in {-1, +1};
* softmax: ``logsumexp(W z) - (W z)[y]`` with ``y`` a class index stored as float.

Every loss adds ``l2/2 * ||W||**2`` to the per-client mean. ``X`` is dense or a
CSR triple (see :mod:`fedsparse.kernels.rows`).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .rows import row_axpy, row_axpy3, row_dot, row_dot3

LEAST_SQUARES = 0
LOGISTIC = 1
SOFTMAX = 2
LOSS_CODES = {"least_squares": LEAST_SQUARES, "logistic": LOGISTIC, "softmax": SOFTMAX}


@njit(cache=True)
def sample_loss_grad(X, y, i, W, loss, scale, G, s):
    """Loss of sample ``i`` at ``W``; also ``G += scale * grad``.

    ``s`` is scratch of shape (n_outputs,) for softmax scores.
    """
    return _sample_grad(X, y, i, W, loss, scale, G, s, True)


@njit(cache=True)
def _sample_grad(X, y, i, W, loss, scale, G, s, values):
    """:func:`sample_loss_grad`; without ``values`` a least-squares or logistic sample's loss
    is not computed (0.0 is returned), its gradient is the same."""
    if loss != SOFTMAX:
        value, a = value_and_coef(loss, row_dot(X, i, W[0]), y[i], scale, values)
        row_axpy(X, i, a, G[0])
        return value
    # softmax
    c = W.shape[0]
    label = int(y[i])
    top = -np.inf
    for r in range(c):
        s[r] = row_dot(X, i, W[r])
        if s[r] > top:
            top = s[r]
    true_score = s[label]
    total = 0.0
    for r in range(c):
        s[r] = np.exp(s[r] - top)
        total += s[r]
    value = np.log(total) + top - true_score
    for r in range(c):
        p = s[r] / total
        if r == label:
            p -= 1.0
        row_axpy(X, i, scale * p, G[r])
    return value


@njit(cache=True)
def value_and_coef(loss, z, yi, scale, values):
    """Loss of a sample with score ``z`` and label ``yi`` (0.0 unless ``values``: a local
    step needs only the gradient, and the logistic loss's log1p is a library call), and
    ``scale * d loss / d z`` (least squares or logistic)."""
    if loss == LEAST_SQUARES:
        r = z - yi
        return r * r, scale * 2.0 * r
    m = yi * z
    value = 0.0
    if m > 0.0:
        e = np.exp(-m)
        if values:
            value = np.log1p(e)
        sig = e / (1.0 + e)  # sigmoid(-m)
    else:
        e = np.exp(m)
        if values:
            value = -m + np.log1p(e)
        sig = 1.0 / (1.0 + e)
    return value, -scale * yi * sig


@njit(cache=True)
def _add_ridge(W, l2, G):
    """``G += l2 * W``; return ``l2/2 * ||W||^2``."""
    sq = 0.0
    for r in range(W.shape[0]):
        for j in range(W.shape[1]):
            w = W[r, j]
            sq += w * w
            G[r, j] += l2 * w
    return 0.5 * l2 * sq


@njit(cache=True)
def batch_grad(X, y, rows, W, loss, l2, G, s):
    """Mean loss over ``rows`` plus ridge, and its gradient written into ``G``.

    Parameters
    ----------
    X : array, shape (n_samples, n_features), or CSR triple
    y : array, shape (n_samples,)
    rows : int array, shape (b,), b >= 1
        The sample indices of the minibatch.
    W : array, shape (n_outputs, n_features)
    loss : int
        One of ``LEAST_SQUARES``, ``LOGISTIC``, ``SOFTMAX``.
    l2 : float
    G : array, shape (n_outputs, n_features)
        Output, overwritten.
    s : array, shape (n_outputs,)
        Scratch.
    """
    total = _rows_grad(X, y, rows, W, loss, G, s, True)
    reg = 0.0
    if l2 != 0.0:
        reg = _add_ridge(W, l2, G)
    return total / rows.shape[0] + reg


@njit(cache=True)
def descend(X, y, rows, W, loss, l2, stepsize, G, s):
    """One local SGD step, ``W -= stepsize * G`` with ``G`` the gradient of
    :func:`batch_grad`, its bits included, in fewer passes: the loss is not computed (a
    logistic row's log1p, the ridge's squares) and the ridge term is added as ``W`` is
    updated. ``G`` is work space (it ends holding the gradient without the ridge term)."""
    _rows_grad(X, y, rows, W, loss, G, s, False)
    for r in range(W.shape[0]):
        w, g = W[r], G[r]  # 1-D views vectorise
        if l2 != 0.0:
            for j in range(w.shape[0]):
                w[j] -= stepsize * (g[j] + l2 * w[j])  # batch_grad's G[r, j] += l2 * w first
        else:
            for j in range(w.shape[0]):
                w[j] -= stepsize * g[j]


@njit(cache=True)
def _rows_grad(X, y, rows, W, loss, G, s, values):
    """``G`` = the mean over ``rows`` of their losses' gradients (no ridge); the sum of
    their losses if ``values`` (else least-squares and logistic losses are skipped)."""
    G[:, :] = 0.0
    b = rows.shape[0]
    scale = 1.0 / b
    total = 0.0
    k = 0
    if loss != SOFTMAX:  # three rows at a time (see row_dot3), the rest one by one
        w, g = W[0], G[0]
        while k + 3 <= b:
            i0, i1, i2 = rows[k], rows[k + 1], rows[k + 2]
            z0, z1, z2 = row_dot3(X, i0, i1, i2, w)
            v0, a0 = value_and_coef(loss, z0, y[i0], scale, values)
            v1, a1 = value_and_coef(loss, z1, y[i1], scale, values)
            v2, a2 = value_and_coef(loss, z2, y[i2], scale, values)
            total += v0
            total += v1
            total += v2
            row_axpy3(X, i0, i1, i2, a0, a1, a2, g)
            k += 3
    while k < b:
        total += _sample_grad(X, y, rows[k], W, loss, scale, G, s, values)
        k += 1
    return total


@njit(cache=True)
def weighted_sum(values, p):
    """``sum_i p[i] * values[i]`` in a fixed order (thread-count independent)."""
    total = 0.0
    for i in range(values.shape[0]):
        total += p[i] * values[i]
    return total
