"""The local-SGD round for CSR data, touching only each client's active coordinates.

With d in the tens of thousands and a minibatch touching a few hundred
features, work proportional to d in every local step (zeroing the gradient,
updating and thresholding all coordinates) dominates. Here each client keeps
the list of coordinates where its model may be non-zero (the broadcast model's
support plus every feature its minibatches touched); the gradient, ridge,
update, H_tau and aggregation run over that list only. Without ridge or local
H_tau a step updates only its rows' features: every other gradient entry is
zero. The arithmetic and its order are those of
:func:`fedsparse.kernels.rounds.local_sgd_round`, so the results are the same
bits.

A client trains in its thread's dense work space (all-zero between clients,
so it stays in that core's caches) and leaves its model compactly: the active
coordinates and their values. Per-client dense models (n_clients x d, 38 MB
at RCV1's shape, cold in cache for every client) made the same round about a
quarter slower. In the work space a feature's weight and gradient are
neighbours (one cache line, not two: about 10 % faster), and the next
minibatch row is prefetched while the current one is used (about 9 %).
"""

from __future__ import annotations

import numba
import numpy as np
from numba import njit, prange

from .losses import sample_loss_grad
from .rng import sample_without_replacement
from .rows import prefetch_csr_row
from .threshold import SCRATCH_EXTRA, hard_threshold


def sparse_buffers(
    n_clients: int, n_outputs: int, n_features: int, capacity: int
) -> tuple[tuple[np.ndarray, ...], tuple[np.ndarray, ...]]:
    """Client models ``(index, value, count)`` and per-thread work space of
    :func:`local_sgd_round_csr`.

    Client i's model is ``value[i, :, :count[i]]`` at coordinates
    ``index[i, :count[i]]``. The two groups are passed separately: inside a numba
    parallel loop, writes to arrays that arrive packed in a tuple are lost
    (numba 0.68), so the tuple carries only work space that is all-zero (or
    dead) between calls.
    """
    t = numba.config.NUMBA_NUM_THREADS
    return (
        np.zeros((n_clients, capacity), dtype=np.int64),  # coordinates of each client's model
        np.zeros((n_clients, n_outputs, capacity)),  # its values there
        np.zeros(n_clients, dtype=np.int64),  # how many
    ), (
        # the client model being trained and its gradient, interleaved so that a
        # feature's weight and gradient share a cache line; kept all-zero
        np.zeros((t, n_features, 2 * n_outputs)),
        np.empty((t, n_outputs)),  # softmax scores
        np.zeros((t, n_features), dtype=np.uint8),  # membership marks, kept all-zero
        np.empty((t, n_features + 1), dtype=np.int64),  # active coordinates (+1: see the round)
        np.empty((t, n_features)),  # gathered values for H_tau
        np.empty((t, n_features + SCRATCH_EXTRA)),  # H_tau scratch
    )


@njit(parallel=True, cache=True)
def local_sgd_round_csr(
    X, y, ptr, broadcast, index, value, count, perm, rng, constants, model, work
):
    """:func:`~fedsparse.kernels.rounds.local_sgd_round` for CSR ``X``, over active coordinates.

    Client i's model at the end of the round is written compactly: ``value[i, :, k]`` at
    coordinate ``index[i, k]`` for ``k < count[i]``, every other coordinate zero. The capacity
    ``index.shape[1]`` must hold the broadcast support and what the steps leave (c * tau_local
    with local thresholding; without, the support plus every feature of the client's sampled
    rows).

    Parameters
    ----------
    X : CSR triple (data, indices, indptr); y : (n_samples,); ptr : int64 (n_clients + 1,)
    broadcast : (W, support)
        The global model (n_outputs, n_features) and the coordinates where some row of it is
        non-zero (int64, ascending).
    index, value, count : the compact models from :func:`sparse_buffers`, written (loose, not
        a tuple: see there)
    perm, rng : per-client row permutations and random states, advanced in place
    constants : :class:`fedsparse.kernels.SGDConstants` with a float ``stepsize``
    model : :class:`fedsparse.kernels.prox.StepModel` of a linear model (its ``loss`` and
        ``l2`` are read)
    work : per-thread work space from :func:`sparse_buffers`
    """
    W, support = broadcast
    steps, batch, tau_local, stepsize = constants
    loss, l2 = model.loss, model.l2
    data, indices, indptr = X
    WG, S, marks, acts, values, scratch = work
    n_clients = ptr.shape[0] - 1
    c = W.shape[0]
    for i in prange(n_clients):
        t = numba.get_thread_id()
        Wi = WG[t, :, :c].T  # (c, d) views
        Gt = WG[t, :, c:].T
        mark = marks[t]  # 1 where the coordinate is in act[:na], for the whole client
        act = acts[t]
        vals = values[t]
        na = support.shape[0]
        for k in range(na):
            j = support[k]
            act[k] = j
            mark[j] = 1
            for r in range(c):
                Wi[r, j] = W[r, j]
        lo = ptr[i]
        n = ptr[i + 1] - lo
        b = n if batch <= 0 or batch >= n else batch
        scale = 1.0 / b
        for _ in range(steps):
            if b < n:
                sample_without_replacement(perm, lo, n, b, rng, i)
            prefetch_csr_row(X, perm[lo])  # every client has a row
            for q in range(b):
                row = perm[lo + q]
                if q + 1 < b:
                    prefetch_csr_row(X, perm[lo + q + 1])
                sample_loss_grad(X, y, row, Wi, loss, scale, Gt, S[t])
                for p in range(indptr[row], indptr[row + 1]):
                    # list new coordinates without a branch (act has room for one past d)
                    j = indices[p]
                    act[na] = j
                    na += 1 - mark[j]
                    mark[j] = 1
            if tau_local == 0 and l2 == 0.0:
                # coordinates outside this step's rows have a zero gradient and keep
                # their value (w - stepsize * 0 is w, to the bit): update the rows'
                # coordinates only; a repeated coordinate's second update subtracts 0
                for q in range(b):
                    row = perm[lo + q]
                    for p in range(indptr[row], indptr[row + 1]):
                        j = indices[p]
                        for r in range(c):
                            Wi[r, j] -= stepsize * Gt[r, j]
                            Gt[r, j] = 0.0
                continue
            # ridge or local H_tau: every active coordinate moves; the values of the
            # first output row are collected on the way, for H_tau
            for k in range(na):
                j = act[k]
                for r in range(c):
                    if l2 != 0.0:
                        Gt[r, j] += l2 * Wi[r, j]
                    Wi[r, j] -= stepsize * Gt[r, j]
                    Gt[r, j] = 0.0
                vals[k] = Wi[0, j]
            if 0 < tau_local < na:
                na = _threshold_active(Wi, act, na, tau_local, vals, scratch[t], mark)
        for k in range(na):  # hand the model over compactly; the work space is zero again
            j = act[k]
            mark[j] = 0
            index[i, k] = j
            for r in range(c):
                value[i, r, k] = Wi[r, j]
                Wi[r, j] = 0.0
        count[i] = na


@njit(cache=True)
def _threshold_active(Wi, act, na, tau, vals, scratch, mark):
    """H_tau per row of ``Wi`` restricted to ``act[:na]``; drop coordinates now zero in all
    rows from the list (and from ``mark``). ``vals[:na]`` holds row 0 at ``act[:na]``.

    Coordinates outside the list are zero, so thresholding the listed values is
    thresholding the row, except that ties go to the lower coordinate: when
    H_tau reports a tie, the list is sorted and the row thresholded again.
    """
    c = Wi.shape[0]
    for r in range(c):
        if r > 0:
            for k in range(na):
                vals[k] = Wi[r, act[k]]
        if hard_threshold(vals[:na], tau, scratch):
            act[:na] = np.sort(act[:na])  # rare: equal magnitudes at the cut
            for k in range(na):
                vals[k] = Wi[r, act[k]]
            hard_threshold(vals[:na], tau, scratch)
        if c == 1:
            break  # zeros written below, with the list's compaction
        for k in range(na):
            Wi[r, act[k]] = vals[k]
    kept = 0
    for k in range(na):
        j = act[k]
        if c == 1:
            nonzero = vals[k] != 0.0
            if not nonzero:
                Wi[0, j] = 0.0
        else:
            nonzero = False
            for r in range(c):
                nonzero |= Wi[r, j] != 0.0
        if nonzero:
            act[kept] = j
            kept += 1
        else:
            mark[j] = 0
    return kept


@njit(cache=True)
def aggregate_active(index, value, count, p, W_out):
    """``W_out = sum_i p_i W_i`` from the clients' compact models, clients in order.

    The same sums, in the same order, as the dense average (the skipped terms
    are exact zeros). The caller applies H_tau.
    """
    W_out[:, :] = 0.0
    for i in range(index.shape[0]):
        pi = p[i]
        for k in range(count[i]):
            j = index[i, k]
            for r in range(W_out.shape[0]):
                W_out[r, j] += pi * value[i, r, k]


@njit(cache=True)
def nnz_active(value, count):
    """Non-zeros of each client's compact model."""
    out = np.zeros(value.shape[0], dtype=np.int64)
    for i in range(value.shape[0]):
        for r in range(value.shape[1]):
            for k in range(count[i]):
                out[i] += value[i, r, k] != 0.0
    return out


def dense_models(index, value, count, n_features: int) -> np.ndarray:
    """The clients' compact models as a dense array, shape (n_clients, n_outputs, n_features)."""
    out = np.zeros((value.shape[0], value.shape[1], n_features))
    for i in range(value.shape[0]):
        out[i][:, index[i, : count[i]]] = value[i, :, : count[i]]
    return out
