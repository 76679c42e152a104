"""The local-SGD round for CSR data, touching only each client's active coordinates.

With d in the tens of thousands and a minibatch touching a few hundred
features, work proportional to d in every local step (zeroing the gradient,
updating and thresholding all coordinates) dominates. Here each client keeps
the list of coordinates where its model may be non-zero (the broadcast model's
support plus every feature its minibatches touched); the gradient, ridge,
update, H_tau and aggregation run over that list only. The arithmetic and its
order are those of :func:`fedsparse.kernels.rounds.local_sgd_round`, so the
results are the same bits.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import njit, prange

from .losses import sample_loss_grad
from .rng import sample_without_replacement
from .threshold import SCRATCH_EXTRA, hard_threshold


def sparse_buffers(n_clients: int, n_outputs: int, n_features: int) -> tuple[np.ndarray, ...]:
    """Client state ``(active, n_active)`` and per-thread work space of
    :func:`local_sgd_round_csr`.

    The two are passed separately: inside a numba parallel loop, writes to
    arrays that arrive packed in a tuple are lost (numba 0.68), so a tuple may
    only carry scratch.
    """
    t = numba.config.NUMBA_NUM_THREADS
    return (
        np.empty((n_clients, n_features), dtype=np.int64),  # active coordinates per client
        np.zeros(n_clients, dtype=np.int64),  # how many
    ), (
        np.zeros((t, n_outputs, n_features)),  # gradients, kept all-zero between steps
        np.empty((t, n_outputs)),  # softmax scores
        np.zeros((t, n_features), dtype=np.uint8),  # membership marks, kept all-zero
        np.empty((t, n_features)),  # gathered values for H_tau
        np.empty((t, n_features + SCRATCH_EXTRA)),  # H_tau scratch
    )


@njit(parallel=True, cache=True)
def local_sgd_round_csr(
    X,
    y,
    ptr,
    W,
    support,
    W_local,
    active,
    n_active,
    perm,
    rng,
    steps,
    batch,
    stepsize,
    loss,
    l2,
    tau_local,
    work,
):
    """:func:`~fedsparse.kernels.rounds.local_sgd_round` for CSR ``X``, over active coordinates.

    ``support`` lists the coordinates where some row of ``W`` is non-zero
    (ascending). ``W_local[i]`` must be zero outside client i's active list on
    entry (true of zeros and of this function's own output). Client i's active
    coordinates are ``active[i, :n_active[i]]``; ``active``, ``n_active`` and
    ``work`` come from :func:`sparse_buffers`.
    """
    data, indices, indptr = X
    G, S, marks, values, scratch = work
    n_clients = ptr.shape[0] - 1
    c = W.shape[0]
    for i in prange(n_clients):
        t = numba.get_thread_id()
        act = active[i]
        Wi = W_local[i]
        Gt = G[t]
        mark = marks[t]
        for k in range(n_active[i]):  # back to W: clear last round's coordinates
            for r in range(c):
                Wi[r, act[k]] = 0.0
        na = support.shape[0]
        for k in range(na):
            j = support[k]
            act[k] = j
            for r in range(c):
                Wi[r, j] = W[r, j]
        lo = ptr[i]
        n = ptr[i + 1] - lo
        b = n if batch <= 0 or batch >= n else batch
        scale = 1.0 / b
        for _ in range(steps):
            if b < n:
                sample_without_replacement(perm, lo, n, b, rng, i)
            for k in range(na):
                mark[act[k]] = 1
            for q in range(b):
                row = perm[lo + q]
                sample_loss_grad(X, y, row, Wi, loss, scale, Gt, S[t])
                for p in range(indptr[row], indptr[row + 1]):
                    j = indices[p]
                    if mark[j] == 0:
                        mark[j] = 1
                        act[na] = j
                        na += 1
            for k in range(na):
                j = act[k]
                mark[j] = 0
                for r in range(c):
                    if l2 != 0.0:
                        Gt[r, j] += l2 * Wi[r, j]
                    Wi[r, j] -= stepsize * Gt[r, j]
                    Gt[r, j] = 0.0
            if tau_local > 0 and na > tau_local:
                na = _threshold_active(Wi, act, na, tau_local, values[t], scratch[t])
        n_active[i] = na


@njit(cache=True)
def _threshold_active(Wi, act, na, tau, vals, scratch):
    """H_tau per row of ``Wi`` restricted to ``act[:na]``; drop coordinates now zero in all rows.

    Coordinates outside the list are zero, so thresholding the listed values is
    thresholding the row, except that ties go to the lower coordinate: when
    H_tau reports a tie, the list is sorted and the row thresholded again.
    """
    for r in range(Wi.shape[0]):
        for k in range(na):
            vals[k] = Wi[r, act[k]]
        if hard_threshold(vals[:na], tau, scratch):
            act[:na] = np.sort(act[:na])  # rare: equal magnitudes at the cut
            for k in range(na):
                vals[k] = Wi[r, act[k]]
            hard_threshold(vals[:na], tau, scratch)
        for k in range(na):
            Wi[r, act[k]] = vals[k]
    kept = 0
    for k in range(na):
        j = act[k]
        nonzero = False
        for r in range(Wi.shape[0]):
            if Wi[r, j] != 0.0:
                nonzero = True
        if nonzero:
            act[kept] = j
            kept += 1
    return kept


@njit(cache=True)
def aggregate_active(W_local, active, n_active, p, W_out):
    """``W_out = sum_i p_i W_local[i]`` over each client's active coordinates, clients in order.

    The same sums, in the same order, as the dense average (the skipped terms
    are exact zeros). The caller applies H_tau.
    """
    W_out[:, :] = 0.0
    for i in range(W_local.shape[0]):
        pi = p[i]
        for k in range(n_active[i]):
            j = active[i, k]
            for r in range(W_out.shape[0]):
                W_out[r, j] += pi * W_local[i, r, j]


@njit(cache=True)
def nnz_active(W_local, active, n_active):
    """Non-zeros of each client's model, counted over its active coordinates."""
    out = np.zeros(W_local.shape[0], dtype=np.int64)
    for i in range(W_local.shape[0]):
        for k in range(n_active[i]):
            for r in range(W_local.shape[1]):
                out[i] += W_local[i, r, active[i, k]] != 0.0
    return out
