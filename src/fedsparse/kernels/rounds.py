"""One communication round of the local-SGD-with-hard-thresholding family.

Fed-HT, FedIter-HT and Distributed-IHT share this client-side loop; the server
step (weighted average + H_tau) lives in :func:`aggregate`.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import njit, prange

from .losses import batch_grad
from .rng import sample_without_replacement
from .threshold import SCRATCH_EXTRA, hard_threshold_rows


@njit(parallel=True, cache=True)
def local_sgd_round(
    X, y, ptr, W, W_local, perm, rng, steps, batch, stepsize, loss, l2, tau_local, work
):
    """Run ``steps`` local SGD steps on every client, starting from ``W``.

    Client ``i`` owns rows ``ptr[i]..ptr[i+1]-1``. Each step draws a minibatch of
    ``min(batch, n_i)`` rows uniformly without replacement (``batch <= 0``: all
    rows, no randomness), takes ``W_i -= stepsize * grad`` and, if
    ``tau_local > 0``, applies H_tau per row (FedIter-HT).

    Parameters
    ----------
    X : array, shape (n_samples, n_features), or CSR triple
    y : array, shape (n_samples,)
    ptr : int64 array, shape (n_clients + 1,)
    W : array, shape (n_outputs, n_features)
        The global model broadcast this round.
    W_local : array, shape (n_clients, n_outputs, n_features)
        Output: each client's model at the end of the round.
    perm : int64 array, shape (n_samples,)
        Per-client row permutations, persistent across rounds.
    rng : uint64 array, shape (n_clients,)
        Per-client random states, advanced in place.
    work : tuple (G, S, scratch) from :func:`thread_buffers`
        Per-thread gradient, score and selection buffers.
    """
    n_clients = ptr.shape[0] - 1
    c, d = W.shape
    G, S, scratch = work
    for i in prange(n_clients):
        t = numba.get_thread_id()
        lo = ptr[i]
        n = ptr[i + 1] - lo
        b = n if batch <= 0 or batch >= n else batch
        Wi = W_local[i]
        Wi[:, :] = W
        Gt = G[t]
        for _ in range(steps):
            if b < n:
                sample_without_replacement(perm, lo, n, b, rng, i)
            batch_grad(X, y, perm[lo : lo + b], Wi, loss, l2, Gt, S[t])
            for r in range(c):
                w, g = Wi[r], Gt[r]  # 1-D views vectorise
                for j in range(d):
                    w[j] -= stepsize * g[j]
            if tau_local > 0:
                hard_threshold_rows(Wi, tau_local, scratch[t])


def thread_buffers(n_outputs: int, n_features: int) -> tuple[np.ndarray, ...]:
    """Per-thread work space for :func:`local_sgd_round`, one slot per possible thread."""
    n = numba.config.NUMBA_NUM_THREADS
    return (
        np.empty((n, n_outputs, n_features)),
        np.empty((n, n_outputs)),
        np.empty((n, n_features + SCRATCH_EXTRA)),
    )


@njit(cache=True)
def aggregate(W_local, p, tau, W_out, scratch):
    """Server step: ``W_out = H_tau(sum_i p_i W_local[i])`` (per row), fixed summation order."""
    W_out[:, :] = 0.0
    for i in range(W_local.shape[0]):
        pi = p[i]
        for r in range(W_out.shape[0]):
            out, w = W_out[r], W_local[i, r]  # 1-D views vectorise
            for j in range(out.shape[0]):
                out[j] += pi * w[j]
    hard_threshold_rows(W_out, tau, scratch)


@njit(cache=True)
def nnz_per_client(W_local):
    """Non-zeros of each client's model (what a sparse upload carries)."""
    out = np.zeros(W_local.shape[0], dtype=np.int64)
    for i in range(W_local.shape[0]):
        k = 0
        for r in range(W_local.shape[1]):
            w = W_local[i, r]  # 1-D view: the branch-free count vectorises (about 4x faster)
            for j in range(w.shape[0]):
                k += w[j] != 0.0
        out[i] = k
    return out


@njit(cache=True)
def nnz_above(models, tol):
    """Entries with ``|x| > tol`` in each row of a 2-D stack ``(n, size)`` of models.

    The same counts as ``np.count_nonzero(np.abs(models) > tol, axis=1)`` without its two
    temporaries: a round of 100 clients of a 784-500-200-10 MLP made 395 MB of fresh pages
    there, which the kernel zeroes (a third of the run's CPU time was system time).
    """
    out = np.zeros(models.shape[0], dtype=np.int64)
    for i in range(models.shape[0]):
        w = models[i]
        k = 0
        for j in range(w.shape[0]):
            k += abs(w[j]) > tol
        out[i] = k
    return out
