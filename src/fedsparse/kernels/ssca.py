"""The clients' side of mini-batch SSCA: every client's minibatch mean loss and gradient.

SSCA's clients are stateless: each draws a minibatch of its own rows and returns the
mean loss and gradient at the broadcast parameters (the paper's message, up to the
factor B). One numba thread per client, each with its own work space and random
stream, so the results do not depend on the number of threads.
"""

from __future__ import annotations

import numba
from numba import njit, prange

from .mlp import mlp_batch_grad
from .rng import draw_minibatch


@njit(parallel=True, cache=True)
def client_batch_grads(
    X, y, ptr, theta, perm, rng, batch, sizes, bias, act, loss, l2, G, losses, work
):
    """Mean loss (plus ridge) and its gradient of every client on a fresh minibatch.

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
    work : tuple from :func:`fedsparse.kernels.mlp_thread_work`
    Other parameters as in :func:`fedsparse.kernels.mlp_local_sgd_round`.
    """
    n_clients = ptr.shape[0] - 1
    X0, A, D, E, coef = work[0], work[1], work[2], work[3], work[4]
    for i in prange(n_clients):
        t = numba.get_thread_id()
        losses[i] = mlp_batch_grad(
            X,
            y,
            draw_minibatch(perm, ptr, i, batch, rng),
            theta,
            sizes,
            bias,
            act,
            loss,
            l2,
            G[i],
            (X0[t], A[t], D[t], E[t], coef[t]),
        )


@njit(cache=True)
def weighted_rows(G, p, out):
    """``out = sum_i p_i G[i]`` in client order (a fixed summation order)."""
    out[:] = 0.0
    for i in range(G.shape[0]):
        pi = p[i]
        g = G[i]
        for j in range(out.shape[0]):
            out[j] += pi * g[j]
