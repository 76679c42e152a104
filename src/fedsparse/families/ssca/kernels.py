"""The clients' side of mini-batch SSCA: every client's minibatch mean loss and gradient.

SSCA's clients are stateless: each draws a minibatch of its own rows and returns the
mean loss and gradient at the broadcast parameters (the paper's message, up to the
factor B). One numba thread per client, each with its own work space and random
stream, so the results do not depend on the number of threads.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import njit, prange

from ...kernels.network import mlp_batch_grad
from ...kernels.rng import draw_minibatch


@njit(cache=True)
def client_batch_grads(X, y, ptr, theta, perm, rng, batch, model, G, losses, work):
    """Mean loss (plus ridge) and its gradient of every client on a fresh minibatch: a cohort
    of one of :func:`client_batch_grads_cohort`, whose bits it gives.

    Client ``i`` owns rows ``ptr[i]..ptr[i+1]-1`` and draws ``min(batch, n_i)`` of them
    uniformly without replacement (``batch <= 0``: all rows, no randomness) from its
    slice of ``perm`` with stream ``rng[i]``, as the local-SGD kernels do.

    Parameters
    ----------
    theta : array, shape (n_params,)
        The broadcast parameters (flat; a linear model is an MLP without hidden layer).
    G : array, shape (n_clients, n_params)
        Output: client ``i``'s mean gradient, ``l2 * theta`` included.
    losses : array, shape (n_clients,)
        Output: client ``i``'s mean loss, ``l2/2 ||theta||^2`` included.
    model : the network and loss, a :class:`fedsparse.objective.problem.KernelModel` (``sizes, bias,
        activation_code, loss_code, l2``; ``Problem.kernel_model``)
    work : tuple from :func:`fedsparse.kernels.mlp_thread_work`
    Other parameters as in :func:`fedsparse.kernels.mlp_local_sgd_round`.
    """
    client_batch_grads_cohort(
        X,
        y,
        ptr,
        theta[None],
        np.zeros(1, np.int64),
        perm,
        rng,
        batch,
        model,
        G[None],
        losses[None],
        work,
    )


@njit(parallel=True, cache=True)
def client_batch_grads_cohort(X, y, ptr, thetas, members, perm, rng, batch, model, G, losses, work):
    """:func:`client_batch_grads` of the ``members`` of a cohort at once: runs with the same
    data, seed and batch size, member ``m`` at its own parameters ``thetas[m]`` into ``G[m]``
    and ``losses[m]``. A client's minibatch is drawn once (from the one ``perm`` and ``rng``
    the members share: equal seeds draw equal rows) and its rows are read from memory once,
    from cache for the other members; each member's arithmetic is that of a cohort of one, so
    its bits do not depend on its cohort.

    thetas : (C, n_params); members : int64 array, the members computing (the others are left
    as they are); G : (C, n_clients, n_params); losses : (C, n_clients).
    """
    sizes, bias, act, loss, l2 = model
    n_clients = ptr.shape[0] - 1
    X0, A, D, E = work[0], work[1], work[2], work[3]
    for i in prange(n_clients):
        t = numba.get_thread_id()
        wt = (X0[t], A[t], D[t], E[t])
        rows = draw_minibatch(perm, ptr, i, batch, rng)
        for m in members:
            losses[m, i] = mlp_batch_grad(
                X, y, rows, thetas[m], sizes, bias, act, loss, l2, G[m, i], wt
            )


_CHUNK = 4096  # coordinates per task of the server's passes: 32 KB per row, in L1/L2


@njit(parallel=True, cache=True)
def weighted_rows(G, p, out):
    """``out = sum_i p_i G[i]`` in client order (a fixed summation order), in parallel
    chunks of coordinates: the same bits for any number of threads."""
    P = out.shape[0]
    for c in prange((P + _CHUNK - 1) // _CHUNK):
        lo = c * _CHUNK
        hi = min(lo + _CHUNK, P)
        _weighted_chunk(G, p, lo, hi, out)


@njit(cache=True)
def _weighted_chunk(G, p, lo, hi, out):
    o = out[lo:hi]
    o[:] = 0.0
    for i in range(G.shape[0]):
        pi = p[i]
        g = G[i, lo:hi]
        for j in range(hi - lo):
            o[j] += pi * g[j]


@njit(parallel=True, cache=True)
def ssca_server_step(G, p, w, beta, acc, g, rho, gamma, tau, lam):
    """Algorithm 1's server (spec §3.2 steps 3-7) in one parallel pass over the coordinates.

    ``g = sum_i p_i G[i]`` (client order), then per coordinate, exactly as the NumPy
    expressions ``beta = (1 - rho) beta + rho w``, ``acc = (1 - rho) acc + rho (g - 2 tau w)``,
    ``w_bar = (acc + 2 lambda beta) / (-2 tau)``, ``w = (1 - gamma) w + gamma w_bar``
    evaluate them (the same roundings, so the same bits), updating ``beta``, ``acc`` and
    ``w`` in place: one read of G and of the state instead of a dozen passes over d.
    """
    P = w.shape[0]
    keep_rho = 1.0 - rho
    keep_gamma = 1.0 - gamma
    two_tau = 2.0 * tau
    two_lam = 2.0 * lam
    denom = -2.0 * tau
    for c in prange((P + _CHUNK - 1) // _CHUNK):
        lo = c * _CHUNK
        hi = min(lo + _CHUNK, P)
        _weighted_chunk(G, p, lo, hi, g)
        _server_chunk(
            g[lo:hi],
            w[lo:hi],
            beta[lo:hi],
            acc[lo:hi],
            rho,
            keep_rho,
            gamma,
            keep_gamma,
            two_tau,
            two_lam,
            denom,
        )


@njit(cache=True, error_model="numpy")
def _server_chunk(g, w, beta, acc, rho, keep_rho, gamma, keep_gamma, two_tau, two_lam, denom):
    for j in range(w.shape[0]):
        wj = w[j]
        b = beta[j] * keep_rho + rho * wj
        a = acc[j] * keep_rho + rho * (g[j] - two_tau * wj)
        beta[j] = b
        acc[j] = a
        w[j] = wj * keep_gamma + gamma * ((a + two_lam * b) / denom)
