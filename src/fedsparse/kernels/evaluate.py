"""Exact evaluation from margins: M = W X^T once, then every metric from M.

A column-major copy of the data (dense ``Xt``, or CSC) lets a sparse W touch only
its support columns: cost n_samples * nnz(W) (dense) or the support columns'
non-zeros (CSC) instead of the whole data set. Results are exact: each sample's
terms are added in increasing feature index (dense data: each term fused into the running
sum, ``s = fma(w_j, x_j, s)``, on a CPU with FMA; numerics 2).
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange

from .elementary import exp_minus, log1p_from_exp
from .losses import LEAST_SQUARES, LOGISTIC

_BLOCK = 512  # samples per parallel task: a tile's columns of the block stay in L1/L2
_TILE = 4  # models per tile: each column's block is read once for four running sums
# the dense sums fuse each multiply into its add (LLVM's contraction, one FMA a term where the
# CPU has FMA): 15-25 % faster margins here, and each term rounds once instead of twice
_FUSED = {"contract"}


@njit(parallel=True, cache=True)
def transpose(X, out):
    """``out[j, i] = X[i, j]``: the column-major copy of dense data, in 64 × 64 tiles (several
    times faster than NumPy's strided copy, which misses the cache on every element)."""
    n, d = X.shape
    for b in prange((n + 63) // 64):
        lo, hi = b * 64, min(n, b * 64 + 64)
        for j0 in range(0, d, 64):
            for j in range(j0, min(d, j0 + 64)):
                for i in range(lo, hi):
                    out[j, i] = X[i, j]


@njit(cache=True)
def _tiles(W):
    """Each full tile of ``_TILE`` consecutive rows of ``W`` (n_rows, d): its union support
    in increasing order, how many, and the tile's weights there (a row's zeros included);
    and the columns any tile reads."""
    d = W.shape[1]
    n_tiles = W.shape[0] // _TILE
    union = np.empty((n_tiles, d), np.int64)
    count = np.zeros(n_tiles, np.int64)
    weights = np.zeros((n_tiles, d, _TILE))
    read = np.zeros(d, np.bool_)
    for t in range(n_tiles):
        for j in range(d):
            hit = False
            for a in range(_TILE):
                hit |= W[t * _TILE + a, j] != 0.0  # NaN counts as a non-zero
            if hit:
                for a in range(_TILE):
                    weights[t, count[t], a] = W[t * _TILE + a, j]
                union[t, count[t]] = j
                count[t] += 1
                read[j] = True
    return union, count, weights, np.flatnonzero(read)


@njit(cache=True)
def _supports(W):
    """Each row's non-zero indices in increasing order, and how many."""
    n_rows, d = W.shape
    index = np.empty((n_rows, d), np.int64)
    count = np.zeros(n_rows, np.int64)
    for q in range(n_rows):
        for j in range(d):
            if W[q, j] != 0.0:  # NaN counts as a non-zero, as in flatnonzero
                index[q, count[q]] = j
                count[q] += 1
    return index, count


def column_checks(Xt: np.ndarray) -> np.ndarray:
    """A fresh record, for :func:`margins_columns`, of which columns of ``Xt`` are finite in
    which block of samples: 0 not looked at yet, 1 finite, 2 holding an inf or NaN. Keep one
    per data set (its owner's), so each column's block is checked once, not at every call."""
    return np.zeros(((Xt.shape[1] + _BLOCK - 1) // _BLOCK, Xt.shape[0]), np.int8)


@njit(cache=True)
def _finite_block(Xt, columns, lo, hi, checked):
    """Whether the values of ``columns`` in samples ``lo:hi`` are all finite; each column's
    answer is read from, or first written to, ``checked`` (this block's row of
    :func:`column_checks`)."""
    bad = False
    for j in columns:
        if checked[j] == 0:
            x = Xt[j, lo:hi]
            nonfinite = 0
            for i in range(hi - lo):
                nonfinite |= (x[i] - x[i]) != 0.0  # NaN for inf and NaN alone; branch-free
            checked[j] = 2 if nonfinite else 1
        bad |= checked[j] == 2
    return not bad


@njit(cache=True, fastmath=_FUSED)
def _tile_block(Xt, union, nu, w, m0, m1, m2, m3, lo, hi):
    """Four running sums over the tile's union support, four columns a pass (a column's
    block read once for all four sums), each term fused into its sum. A row's zero weight
    adds ``0 * x = ±0`` (``fma(0, x, s) = s + ±0``), which leaves a sum unchanged bit for bit
    (a sum starting at +0.0 is never -0.0) when x is finite: each row gets the bits of its
    own support's sums in increasing j."""
    m0[:] = 0.0
    m1[:] = 0.0
    m2[:] = 0.0
    m3[:] = 0.0
    k = 0
    while k + 4 <= nu:
        xa, xb = Xt[union[k], lo:hi], Xt[union[k + 1], lo:hi]
        xc, xd = Xt[union[k + 2], lo:hi], Xt[union[k + 3], lo:hi]
        a0, a1, a2, a3 = w[k, 0], w[k, 1], w[k, 2], w[k, 3]
        b0, b1, b2, b3 = w[k + 1, 0], w[k + 1, 1], w[k + 1, 2], w[k + 1, 3]
        c0, c1, c2, c3 = w[k + 2, 0], w[k + 2, 1], w[k + 2, 2], w[k + 2, 3]
        d0, d1, d2, d3 = w[k + 3, 0], w[k + 3, 1], w[k + 3, 2], w[k + 3, 3]
        for i in range(hi - lo):
            ua, ub, uc, ud = xa[i], xb[i], xc[i], xd[i]
            m0[i] = (((m0[i] + a0 * ua) + b0 * ub) + c0 * uc) + d0 * ud
            m1[i] = (((m1[i] + a1 * ua) + b1 * ub) + c1 * uc) + d1 * ud
            m2[i] = (((m2[i] + a2 * ua) + b2 * ub) + c2 * uc) + d2 * ud
            m3[i] = (((m3[i] + a3 * ua) + b3 * ub) + c3 * uc) + d3 * ud
        k += 4
    while k < nu:
        xa = Xt[union[k], lo:hi]
        a0, a1, a2, a3 = w[k, 0], w[k, 1], w[k, 2], w[k, 3]
        for i in range(hi - lo):
            ua = xa[i]
            m0[i] += a0 * ua
            m1[i] += a1 * ua
            m2[i] += a2 * ua
            m3[i] += a3 * ua
        k += 1


@njit(cache=True, fastmath=_FUSED)
def _row_block(Xt, support, ns, w, m, lo, hi):
    """One row's sum over its own support only (any data, NaN and inf included), eight
    columns a pass: one load and store of ``m`` for eight column streams, the same sums in
    the same order as one column at a time."""
    m[:] = 0.0
    k = 0
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
        wj = w[support[k]]
        x = Xt[support[k], lo:hi]
        for i in range(hi - lo):
            m[i] += wj * x[i]
        k += 1


@njit(parallel=True, cache=True)
def margins_columns(Xt, checks, Ws, M):
    """``M[q, r, i] = sum_j Ws[q, r, j] * Xt[j, i]`` over the non-zeros of each model only,
    each sample's terms added in increasing j.

    Several models (e.g. a cohort's members over consecutive rounds, which share nearly
    all their support) are scored in one pass: each task takes a block of samples, and
    the models' rows go four at a time over their tile's union support, so a column's
    block is read once for four sums and stays in cache for the next tiles; the last rows
    (fewer than four, e.g. one model alone) go one at a time over their own support. The
    bits do not depend on how the models are stacked or tiled; a block holding a non-finite
    value in a tile's columns is summed row by row over each row's own support.

    Parameters
    ----------
    Xt : array, shape (n_features, n_samples)
        The data transposed, C-contiguous (each feature's column contiguous).
    checks : int8 array from :func:`column_checks` of ``Xt``
        Which column blocks are finite, filled in as they are first read and reused by
        later calls (the data does not change): without it each call read every column
        of the tiles' union support once more, a quarter of a 64-model call's time.
    Ws : array, shape (n_models, n_outputs, n_features), C-contiguous
    M : array, shape (n_models, n_outputs, n_samples), C-contiguous
        Output, overwritten.
    """
    n_rows = Ws.shape[0] * Ws.shape[1]
    n = Xt.shape[1]
    if checks.shape[0] != (n + _BLOCK - 1) // _BLOCK or checks.shape[1] != Xt.shape[0]:
        raise ValueError("margins_columns: checks is not column_checks(Xt)")
    W = Ws.reshape((n_rows, Ws.shape[2]))
    R = M.reshape((n_rows, n))
    union, count, weights, columns = _tiles(W)
    index, ns = _supports(W)
    tiled = union.shape[0] * _TILE  # the rows after these (fewer than four) go one by one
    for b in prange((n + _BLOCK - 1) // _BLOCK):
        lo = b * _BLOCK
        hi = min(n, lo + _BLOCK)
        if _finite_block(Xt, columns, lo, hi, checks[b]):
            for t in range(union.shape[0]):
                q = t * _TILE
                m0, m1, m2, m3 = R[q, lo:hi], R[q + 1, lo:hi], R[q + 2, lo:hi], R[q + 3, lo:hi]
                _tile_block(Xt, union[t], count[t], weights[t], m0, m1, m2, m3, lo, hi)
        else:
            for q in range(tiled):
                _row_block(Xt, index[q], ns[q], W[q], R[q, lo:hi], lo, hi)
        for q in range(tiled, n_rows):
            _row_block(Xt, index[q], ns[q], W[q], R[q, lo:hi], lo, hi)


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


_CHUNK = 256  # samples whose losses are computed in one vectorised loop, then summed


@njit(cache=True, error_model="numpy")
def _sample_losses(M, y, lo, hi, loss, out):
    """``out[:hi - lo]``: the losses of samples ``lo:hi`` from their margins. Least squares and
    logistic are branch-free loops that vectorise (the logistic loss by our own
    ``log1p_exp_minus``, :mod:`fedsparse.kernels.elementary`, not libm)."""
    if loss == LEAST_SQUARES:
        m = M[0]
        for i in range(hi - lo):
            e = m[lo + i] - y[lo + i]
            out[i] = e * e
    elif loss == LOGISTIC:
        # log(1 + e^-v), v = y m: log(1 + e^-|v|) + max(-v, 0), NaN for NaN, as
        # log1p_exp_minus(|v|) in two loops: exp's and log1p's chains of dependent operations
        # are each shorter than their sum, so more samples are in flight (a quarter faster)
        m = M[0]
        for i in range(hi - lo):
            out[i] = exp_minus(abs(y[lo + i] * m[lo + i]))
        for i in range(hi - lo):
            v = y[lo + i] * m[lo + i]
            out[i] = log1p_from_exp(out[i], abs(v)) + (-v if v < 0.0 else 0.0)
    else:
        c = M.shape[0]
        for i in range(lo, hi):
            top = -np.inf
            for r in range(c):
                if M[r, i] > top:
                    top = M[r, i]
            s = 0.0
            for r in range(c):
                s += np.exp(M[r, i] - top)
            out[i - lo] = np.log(s) + top - M[int(y[i]), i]


@njit(parallel=True, cache=True)
def client_losses_from_margins(M, y, ptr, loss, W, l2):
    """Each client's mean loss f_i (plus ridge :func:`ridge_term`), given the margins ``M``
    of every sample: with ``l2 = 0`` the data losses, to which adding the ridge term gives
    the same bits as passing ``l2``.

    A client's sample losses are summed in four interleaved lanes (its ``i``-th sample into
    lane ``i % 4``, in order), then ``(lane 0 + lane 1) + (lane 2 + lane 3)``: a fixed order
    on every machine, four times the throughput of one running sum."""
    n_clients = ptr.shape[0] - 1
    reg = ridge_term(W, l2)
    out = np.empty(n_clients)
    for k in prange(n_clients):
        values = np.empty(_CHUNK)
        s0 = 0.0
        s1 = 0.0
        s2 = 0.0
        s3 = 0.0
        for lo in range(ptr[k], ptr[k + 1], _CHUNK):  # _CHUNK is a multiple of 4
            n = min(_CHUNK, ptr[k + 1] - lo)
            _sample_losses(M, y, lo, lo + n, loss, values)
            i = 0
            while i + 4 <= n:
                s0 += values[i]
                s1 += values[i + 1]
                s2 += values[i + 2]
                s3 += values[i + 3]
                i += 4
            if i < n:
                s0 += values[i]
            if i + 1 < n:
                s1 += values[i + 1]
            if i + 2 < n:
                s2 += values[i + 2]
        out[k] = ((s0 + s1) + (s2 + s3)) / (ptr[k + 1] - ptr[k]) + reg
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
