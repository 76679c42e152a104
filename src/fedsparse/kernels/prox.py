"""Proximal local steps of any model, and the minibatch gradient every model kernel shares.

Every client ``i`` takes ``steps`` gradient steps on

    f_i(theta; D) + weight/2 ||theta - a_i||^2 + gamma * phi_rho(theta),

``theta <- theta - stepsize * (grad f_i(theta; D) + weight (theta - a_i) + gamma tanh(theta/rho))``,
with ``a_i = anchors[which[i]]`` (an edge's or the client's own anchor) and ``grad f_i``
including the l2 term. ``fresh``: a new minibatch each step (FedProx), else one minibatch
drawn before the first step and reused (sFedHP/pFedMe's inner solve). Clients run in
parallel threads, each drawing from its own stream, so results do not depend on the
thread count. ``phi_rho`` is the smooth l1 norm ``rho sum log cosh(x/rho)``.

One kernel for every model: a linear model's parameters are (n_outputs, n_features), a
network's (1, n_params), and ``network`` picks the gradient (:func:`model_grad`). The model
is one argument, a :class:`StepModel` (:attr:`fedsparse.objective.problem.Problem.step_model`); the
constants of the steps another, a :class:`ProxConstants`; the work space is
:func:`step_work`'s. numba takes a named tuple as one argument whose fields it reads as
the loose arguments they replace: a kernel compiles once per combination of field types.
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np
from numba import njit, prange

from .losses import batch_grad
from .network import mlp_batch_grad, mlp_thread_work
from .rng import sample_without_replacement


class StepModel(NamedTuple):
    """The model and loss as the kernels that take either kind of model take it (this module's
    and those built on :func:`model_grad`): one argument, built once by the Problem
    (:attr:`fedsparse.objective.problem.Problem.step_model`)."""

    network: bool  # a network's gradient (mlp_batch_grad), else a linear model's (batch_grad)
    sizes: np.ndarray  # layer widths, or a cnn's 2-D layer table (kernels.cnn)
    bias: bool
    act: int  # kernels.layers' activation codes
    loss: int  # kernels.LOSS_CODES
    l2: float


class ProxConstants(NamedTuple):
    """The constants of :func:`prox_steps`: ``steps``, ``batch`` and ``fresh`` are the run's
    (a cohort's members share them); ``stepsize``, ``weight``, ``gamma`` and ``rho`` are a
    run's floats, or one entry per member (arrays (C,)) for :func:`prox_steps_cohort`."""

    steps: int  # steps per call
    batch: int  # rows per minibatch (<= 0: all rows, no randomness)
    fresh: bool  # a new minibatch each step, else one drawn before the first step
    stepsize: float
    weight: float  # of the proximity term weight/2 ||theta - a_i||^2
    gamma: float  # of the smooth l1 term
    rho: float  # the smooth l1 term's smoothing


@njit(cache=True)
def apply_prox(theta, g, anchor, stepsize, weight, gamma, rho):
    """``theta -= stepsize * (g + weight (theta - anchor) + gamma tanh(theta / rho))``."""
    for j in range(theta.shape[0]):
        x = theta[j]
        step = g[j] + weight * (x - anchor[j])
        if gamma != 0.0:
            step += gamma * np.tanh(x / rho)
        theta[j] = x - stepsize * step


@njit(cache=True)
def model_grad(X, y, rows, T, G, model, s, wt):
    """``G`` = minibatch gradient (l2 included) at ``T``: (n_outputs, d), or (1, n_params) for
    a network (``model.network``); no rows: the ridge term alone. Returns the mean loss plus
    ridge (0.0 for no rows). ``model`` is a :class:`StepModel`."""
    network, sizes, bias, act, loss, l2 = model
    if rows.shape[0] == 0:
        for r in range(T.shape[0]):
            G[r, :] = l2 * T[r]
        return 0.0
    if network:
        return mlp_batch_grad(X, y, rows, T[0], sizes, bias, act, loss, l2, G[0], wt)
    return batch_grad(X, y, rows, T, loss, l2, G, s)


def step_work(
    sizes, shape: tuple[int, int], max_batch: int, *, network: bool, dense: bool
) -> tuple[np.ndarray, ...]:
    """Per-thread work space of :func:`prox_steps` and the kernels built on
    :func:`model_grad`: ``(G, S, X0, A, D, E)``, one row per possible thread.

    ``G`` (n_threads, *shape) holds each thread's gradient, ``S`` (n_threads, n_outputs) the
    softmax scratch of a linear model; the last four are :func:`fedsparse.kernels.mlp_work`
    rows for a network (``dense``: room to gather dense input rows), placeholders that are
    never read for a linear model.
    """
    n = numba.config.NUMBA_NUM_THREADS
    G, S = np.zeros((n, *shape)), np.zeros((n, shape[0]))
    if network:
        mlp = mlp_thread_work(sizes, max(max_batch, 1), dense=dense)[:4]
    else:
        mlp = (np.zeros((n, 1)),) * 4
    return (G, S, *mlp)


@njit(cache=True)
def prox_steps(X, y, ptr, thetas, anchors, which, perm, rng, constants, model, work):
    """Proximal steps of every client (module docstring): a cohort of one of
    :func:`prox_steps_cohort`, whose bits it gives.

    Parameters
    ----------
    X, y : data (dense or CSR triple); ptr : int64 (n_clients + 1,) client row bounds
    thetas : (n_clients, *shape), updated in place; shape is (n_outputs, n_features) for a
        linear model, (1, n_params) for a network
    anchors : (n_anchors, *shape); which : int64 (n_clients,)
    perm : int64 (n_samples,) per-client row permutations; rng : uint64 (n_clients,)
    constants : :class:`ProxConstants` of floats (the run's)
    model : :class:`StepModel` (:attr:`Problem.step_model`)
    work : (G, S, X0, A, D, E) from :func:`step_work`
    """
    c = constants
    prox_steps_cohort(
        X,
        y,
        ptr,
        thetas[None],
        anchors[None],
        which,
        np.zeros(1, np.int64),
        perm,
        rng,
        ProxConstants(
            c.steps,
            c.batch,
            c.fresh,
            np.full(1, c.stepsize),
            np.full(1, c.weight),
            np.full(1, c.gamma),
            np.full(1, c.rho),
        ),
        model,
        work,
    )


@njit(parallel=True, cache=True)
def prox_steps_cohort(
    X, y, ptr, thetas, anchors, which, members, perm, rng, constants, model, work
):
    """:func:`prox_steps` of the ``members`` of a cohort at once: runs with the same data, seed
    and structure, member ``m`` with its own ``thetas[m]`` (n_clients, *shape), ``anchors[m]``
    (n_anchors, *shape) and constants ``stepsize[m]``, ``weight[m]``, ``gamma[m]``,
    ``rho[m]`` (``constants``, a :class:`ProxConstants` of arrays (C,)). A minibatch is drawn
    once (from the one ``perm`` and ``rng`` the members share: equal seeds draw equal rows) and
    its rows are read from memory once, from cache for the other members; each member's
    arithmetic is that of a cohort of one, in the same order, so its bits do not depend on its
    cohort. Members not listed are left as they are."""
    steps, batch, fresh, stepsize, weight, gamma, rho = constants
    n_clients = ptr.shape[0] - 1
    c = thetas.shape[2]
    G, S, X0, A, D, E = work
    for i in prange(n_clients):
        t = numba.get_thread_id()
        lo = ptr[i]
        n = ptr[i + 1] - lo
        b = n if batch <= 0 or batch >= n else batch
        Gt = G[t]
        wt = (X0[t], A[t], D[t], E[t])
        for s in range(steps):
            if b < n and (s == 0 or fresh):
                sample_without_replacement(perm, lo, n, b, rng, i)
            rows = perm[lo : lo + b]
            for m in members:
                Ti = thetas[m, i]
                Ai = anchors[m, which[i]]
                model_grad(X, y, rows, Ti, Gt, model, S[t], wt)
                for r in range(c):
                    apply_prox(Ti[r], Gt[r], Ai[r], stepsize[m], weight[m], gamma[m], rho[m])
