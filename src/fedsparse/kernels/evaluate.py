"""Exact evaluation from margins: M = W X^T once, then every metric from M.

A column-major copy of the data (dense ``Xt``, or CSC) lets a sparse W touch only
its support columns: cost n_samples * nnz(W) (dense) or the support columns'
non-zeros (CSC) instead of the whole data set. Results are exact: each sample's
terms are added in increasing feature index.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .losses import LEAST_SQUARES, LOGISTIC

_BLOCK = 4096  # samples per parallel task


@njit(cache=True)
def _supports(Ws):
    """Each (model, output)'s non-zero indices in increasing order, and how many."""
    n_models, c, d = Ws.shape
    index = np.empty((n_models, c, d), np.int64)
    count = np.zeros((n_models, c), np.int64)
    for q in range(n_models):
        for r in range(c):
            for j in range(d):
                if Ws[q, r, j] != 0.0:  # NaN counts as a non-zero, as in flatnonzero
                    index[q, r, count[q, r]] = j
                    count[q, r] += 1
    return index, count


@njit(parallel=True, cache=True)
def margins_columns(Xt, Ws, M):
    """``M[q, r, i] = sum_j Ws[q, r, j] * Xt[j, i]`` over the non-zeros of each model only.

    Several models (e.g. the iterates of consecutive rounds of one run, which share
    nearly all their support) are scored in one pass: each task takes a block of
    samples and runs every model over it, so the block's support columns come from
    memory once and from cache for the other models.

    Parameters
    ----------
    Xt : array, shape (n_features, n_samples)
        The data transposed, C-contiguous (each feature's column contiguous).
    Ws : array, shape (n_models, n_outputs, n_features)
    M : array, shape (n_models, n_outputs, n_samples)
        Output, overwritten.
    """
    n_models, c = Ws.shape[0], Ws.shape[1]
    n = Xt.shape[1]
    index, count = _supports(Ws)
    for b in prange((n + _BLOCK - 1) // _BLOCK):
        lo = b * _BLOCK
        hi = min(n, lo + _BLOCK)
        for q in range(n_models):
            for r in range(c):
                support, ns, w = index[q, r], count[q, r], Ws[q, r]
                m = M[q, r, lo:hi]  # 1-D views: the inner loops vectorise
                m[:] = 0.0
                k = 0
                # Eight columns per pass: one load and store of m for eight column
                # streams, the same sums in the same order as one column at a time.
                while k + 8 <= ns:
                    j0, j1, j2, j3 = support[k], support[k + 1], support[k + 2], support[k + 3]
                    j4, j5, j6, j7 = support[k + 4], support[k + 5], support[k + 6], support[k + 7]
                    w0, w1, w2, w3 = w[j0], w[j1], w[j2], w[j3]
                    w4, w5, w6, w7 = w[j4], w[j5], w[j6], w[j7]
                    x0, x1, x2, x3 = Xt[j0, lo:hi], Xt[j1, lo:hi], Xt[j2, lo:hi], Xt[j3, lo:hi]
                    x4, x5, x6, x7 = Xt[j4, lo:hi], Xt[j5, lo:hi], Xt[j6, lo:hi], Xt[j7, lo:hi]
                    for i in range(hi - lo):
                        s = ((m[i] + w0 * x0[i]) + w1 * x1[i]) + w2 * x2[i]
                        s = (((s + w3 * x3[i]) + w4 * x4[i]) + w5 * x5[i]) + w6 * x6[i]
                        m[i] = s + w7 * x7[i]
                    k += 8
                while k < ns:
                    j = support[k]
                    wj = w[j]
                    x = Xt[j, lo:hi]
                    for i in range(hi - lo):
                        m[i] += wj * x[i]
                    k += 1


@njit(cache=True)
def margins_csc(Xc, Ws, M):
    """``M[q, r, i] = sum_j Ws[q, r, j] * X[i, j]`` from sparse data by columns.

    Only the columns of each model's support are read (a τ-sparse model on RCV1's
    shape: about 6,000 of 1.5 million non-zeros), and each sample's terms are added in
    increasing j, so the sums do not depend on the CPU's vector width.

    Parameters
    ----------
    Xc : tuple (data, row indices, indptr)
        CSC form of X (``FederatedData.kernel_csc``).
    Ws : array, shape (n_models, n_outputs, n_features)
    M : array, shape (n_models, n_outputs, n_samples)
        Output, overwritten.
    """
    data, rows, indptr = Xc
    n_models, c, d = Ws.shape
    M[:] = 0.0
    for q in range(n_models):
        for r in range(c):
            w, m = Ws[q, r], M[q, r]
            for j in range(d):
                wj = w[j]
                if wj != 0.0:  # NaN counts: a diverged model's margins are NaN
                    for p in range(indptr[j], indptr[j + 1]):
                        m[rows[p]] += wj * data[p]


@njit(cache=True)
def ridge_term(W, l2):
    """``l2/2 * ||W||^2``, its squares summed in index order (0.0 for ``l2 == 0``)."""
    if l2 == 0.0:
        return 0.0
    sq = 0.0
    for r in range(W.shape[0]):
        for j in range(W.shape[1]):
            sq += W[r, j] * W[r, j]
    return 0.5 * l2 * sq


@njit(parallel=True, cache=True)
def client_losses_from_margins(M, y, ptr, loss, W, l2):
    """Each client's mean loss f_i (plus ridge :func:`ridge_term`), given the margins ``M``
    of every sample: with ``l2 = 0`` the data losses, to which adding the ridge term gives
    the same bits as passing ``l2``."""
    n_clients = ptr.shape[0] - 1
    c = M.shape[0]
    reg = ridge_term(W, l2)
    out = np.empty(n_clients)
    for k in prange(n_clients):
        total = 0.0
        for i in range(ptr[k], ptr[k + 1]):
            if loss == LEAST_SQUARES:
                e = M[0, i] - y[i]
                total += e * e
            elif loss == LOGISTIC:
                # log(1 + e^-m), stable, without a branch on the sign of m (the
                # same bits as -m + log1p(e^m) for m <= 0: addition commutes)
                m = y[i] * M[0, i]
                total += np.log1p(np.exp(-abs(m))) + max(-m, 0.0)
            else:
                top = -np.inf
                for r in range(c):
                    if M[r, i] > top:
                        top = M[r, i]
                s = 0.0
                for r in range(c):
                    s += np.exp(M[r, i] - top)
                total += np.log(s) + top - M[int(y[i]), i]
        out[k] = total / (ptr[k + 1] - ptr[k]) + reg
    return out


@njit(cache=True)
def correct_from_margins(M, y, loss):
    """Samples whose predicted label (sign, or argmax over classes) equals ``y``."""
    hits = 0
    for i in range(M.shape[1]):
        if loss == LOGISTIC:
            pred = 1.0 if M[0, i] > 0.0 else -1.0
            hits += pred == y[i]
        else:
            best = 0
            for r in range(1, M.shape[0]):
                if M[r, i] > M[best, i]:
                    best = r
            hits += best == int(y[i])
    return hits
