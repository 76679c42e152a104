"""One communication round of the local-SGD-with-hard-thresholding family.

Fed-HT, FedIter-HT and Distributed-IHT share this client-side loop; the server
step (weighted average + H_tau) lives in :func:`aggregate`.
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np
from numba import njit, prange, types
from numba.extending import overload

from .dense_steps import descend_members, work_space
from .losses import SOFTMAX, descend
from .rng import sample_without_replacement
from .threshold import SCRATCH_EXTRA, hard_threshold_rows


class SGDConstants(NamedTuple):
    """The constants of a round of local SGD steps (:func:`local_sgd_round`,
    :func:`fedsparse.kernels.mlp_local_sgd_round`,
    :func:`fedsparse.kernels.local_sgd_round_csr`): ``steps``, ``batch`` and ``tau_local``
    are the run's (a cohort's members share them); ``stepsize`` is a run's float, or one
    entry per member (an array (C,)) for :func:`local_sgd_cohort_round`."""

    steps: int  # local steps per round
    batch: int  # rows per minibatch (<= 0: all rows, no randomness)
    tau_local: int  # > 0: H_tau after every step (FedIter-HT), else none
    stepsize: float


def local_sgd_round(X, y, ptr, W, W_local, perm, rng, constants, model, work):
    """Run ``steps`` local SGD steps on every client, starting from ``W``.

    Client ``i`` owns rows ``ptr[i]..ptr[i+1]-1``. Each step draws a minibatch of
    ``min(batch, n_i)`` rows uniformly without replacement (``batch <= 0``: all
    rows, no randomness), takes ``W_i -= stepsize * grad`` and, if
    ``tau_local > 0``, applies H_tau per row (FedIter-HT). A cohort of one of
    :func:`local_sgd_cohort_round`, whose bits it gives.

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
    constants : :class:`SGDConstants` with a float ``stepsize``
    model : :class:`fedsparse.kernels.prox.StepModel` (``Problem.step_model``) of a linear
        model: its ``loss`` and ``l2`` are read
    work : tuple (G, S, scratch) from :func:`thread_buffers`
        Per-thread gradient, score and selection buffers.
    """
    c = constants
    local_sgd_cohort_round(
        X,
        y,
        ptr,
        W[None],
        W_local[None],
        np.zeros(1, np.int64),
        np.arange(ptr.shape[0] - 1, dtype=np.int64),
        perm,
        rng,
        SGDConstants(c.steps, c.batch, c.tau_local, np.full(1, float(c.stepsize))),
        model,
        work,
    )


@njit(parallel=True, cache=True)
def local_sgd_cohort_round(
    X, y, ptr, Ws, W_locals, members, clients, perm, rng, constants, model, work
):
    """:func:`local_sgd_round` of the members ``members`` of a cohort at once: runs with the
    same data, seed and structure, each with its own model ``Ws[m]``, clients' models
    ``W_locals[m]`` and step size ``stepsizes[m]``. Their minibatches are the same rows
    (drawn once, from the one ``perm`` and ``rng`` they share), read from memory once per
    step and from cache for the other members; each member's arithmetic is that of a cohort
    of one, in the same order, so its bits do not depend on its cohort. On dense rows a
    least-squares or logistic step is :func:`~fedsparse.kernels.dense_steps.descend_members`
    (all members at once, in FMA lanes); otherwise :func:`~fedsparse.kernels.losses.descend`,
    member by member.

    Ws : array, shape (C, n_outputs, n_features); W_locals : (C, n_clients, n_outputs,
    n_features); members : int64 array, the members computing (the others are left as they
    are); clients : int64 array, the clients stepped (the others' models and random states are
    left as they are: a round of sampled clients); constants : :class:`SGDConstants` whose
    ``stepsize`` is an array (C,); model and work as in :func:`local_sgd_round`.
    """
    steps, batch, tau_local, stepsizes = constants
    loss, l2 = model.loss, model.l2
    G, S, scratch = work
    slots = G.shape[0]
    bmax = 0  # the fused kernel's work space: rows of the largest minibatch
    if _fuses(X, loss):
        for i in clients:
            n = ptr[i + 1] - ptr[i]
            bmax = max(bmax, n if batch <= 0 or batch >= n else batch)
    coef, lanes, grad = work_space(slots, Ws.shape[0], bmax)
    for k in prange(clients.shape[0]):
        i = clients[k]
        t = numba.get_thread_id()
        lo = ptr[i]
        n = ptr[i + 1] - lo
        b = n if batch <= 0 or batch >= n else batch
        for m in members:
            W_locals[m, i][:, :] = Ws[m]
        for _ in range(steps):
            if b < n:
                sample_without_replacement(perm, lo, n, b, rng, i)
            rows = perm[lo : lo + b]
            fused = (coef[t], lanes[t], grad[t])
            _descend_members(
                X, y, rows, W_locals, i, members, loss, l2, stepsizes, G[t], S[t], fused
            )
            if tau_local > 0:
                for m in members:
                    hard_threshold_rows(W_locals[m, i], tau_local, scratch[t])


def _fuses(X, loss):
    """Whether a local step runs in :func:`fedsparse.kernels.dense_steps.descend_members`:
    dense rows, least squares or logistic."""
    return not isinstance(X, tuple) and loss != SOFTMAX


@overload(_fuses)
def _fuses_impl(X, loss):
    if isinstance(X, types.Array):
        return lambda X, loss: loss != SOFTMAX
    return lambda X, loss: False


def _descend_members(X, y, rows, W_locals, i, members, loss, l2, stepsizes, G, s, fused):
    """One local step of every member's client ``i`` (jitted code only: see the overload);
    ``fused``: the thread's ``(coef, lanes, grad)`` rows of
    :func:`fedsparse.kernels.dense_steps.work_space`."""
    raise NotImplementedError("a numba overload")


@njit(cache=True)
def _descend_one_by_one(X, y, rows, W_locals, i, members, loss, l2, stepsizes, G, s):
    for m in members:
        descend(X, y, rows, W_locals[m, i], loss, l2, stepsizes[m], G, s)


@overload(_descend_members)
def _descend_members_impl(X, y, rows, W_locals, i, members, loss, l2, stepsizes, G, s, fused):
    if not isinstance(X, types.Array):  # CSR rows: kernels.losses, row by row

        def csr(X, y, rows, W_locals, i, members, loss, l2, stepsizes, G, s, fused):
            _descend_one_by_one(X, y, rows, W_locals, i, members, loss, l2, stepsizes, G, s)

        return csr

    def dense(X, y, rows, W_locals, i, members, loss, l2, stepsizes, G, s, fused):
        if loss == SOFTMAX:
            _descend_one_by_one(X, y, rows, W_locals, i, members, loss, l2, stepsizes, G, s)
        else:  # one output row
            coef, lanes, grad = fused
            descend_members(
                X, y, rows, W_locals[:, i, 0], members, loss, l2, stepsizes, coef, lanes, grad
            )

    return dense


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
