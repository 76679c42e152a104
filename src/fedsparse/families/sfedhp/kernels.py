"""Whole rounds of the personalised family (sFedHP, pFedMe, HierFAVG) in one parallel kernel.

Their inner solves are the proximal local steps of :mod:`fedsparse.kernels.prox` (FedProx and
HeurFedAMP call that kernel itself, through :meth:`fedsparse.objective.problem.Problem.prox_steps`):
every client ``i`` takes gradient steps on

    f_i(theta; D) + weight/2 ||theta - a_i||^2 + gamma * phi_rho(theta),

each client drawing from its own stream, so results do not depend on the thread count.
``phi_rho`` is the smooth l1 norm ``rho sum log cosh(x/rho)``; its gradient ``tanh(x/rho)``
never overflows, its value is :func:`smooth_l1` (stable form). The model is one argument, a
:class:`fedsparse.kernels.prox.StepModel` (:attr:`fedsparse.objective.problem.Problem.step_model`);
each algorithm's constants are another (:class:`SFedHPConstants`, ...), and the models a
round writes a third (:class:`SFedHPModels`, ...).
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np
from numba import njit, prange

from ...kernels.prox import apply_prox, model_grad, prox_steps  # noqa: F401  (prox_steps: here too)
from ...kernels.rng import draw_minibatch, sample_without_replacement


class SFedHPConstants(NamedTuple):
    """The constants of :func:`sfedhp_round`: the first four are the run's (a cohort's members
    share them); the rest a run's floats, or one entry per member (arrays (C,)) for
    :func:`sfedhp_cohort_round`."""

    edge_rounds: int
    steps: int  # proximal steps per edge round, on one minibatch
    batch: int  # rows per minibatch (<= 0: all rows)
    per_client: bool  # anchor at the client's own phi_c[u], else at its edge's phi_e
    eta1: float  # the edge model's step
    eta2: float  # the clients' proximal step
    lam1: float
    lam2: float
    gamma1: float  # the clients' smooth-l1 weight
    gamma2: float  # the edge model's smooth-l1 weight
    rho: float
    tol: float  # zero tolerance of the messages' byte counts


class SFedHPModels(NamedTuple):
    """The models :func:`sfedhp_round` writes (a cohort's: each stacked by member first)."""

    thetas: np.ndarray  # (n_clients, *shape)
    w_e: np.ndarray  # (n_edges, *shape)
    phi_e: np.ndarray  # (n_edges, *shape)
    phi_c: np.ndarray  # (n_clients, *shape)
    edge_bytes: np.ndarray  # int64 (n_edges, 2): bytes up, bytes down


class PFedMeConstants(NamedTuple):
    """The constants of :func:`pfedme_round`: the first three the run's, the rest a run's
    floats, or arrays (C,) for :func:`pfedme_cohort_round`."""

    local_rounds: int
    steps: int  # proximal steps per local round, on one minibatch
    batch: int
    eta: float  # the local model's step
    eta_inner: float  # the proximal step
    lam: float


class PFedMeModels(NamedTuple):
    """The models :func:`pfedme_round` writes (a cohort's: each stacked by member first)."""

    thetas: np.ndarray  # (n_clients, *shape): the personalised models
    w_c: np.ndarray  # (n_clients, *shape): the local models


class HierFAVGConstants(NamedTuple):
    """The constants of :func:`hierfavg_round`: the first four the run's, ``stepsize`` a
    run's float, or an array (C,) for :func:`hierfavg_cohort_round`."""

    p: np.ndarray  # the clients' weights (n_clients,)
    edge_rounds: int
    steps: int  # SGD steps per edge round, a fresh minibatch each
    batch: int
    stepsize: float


class HierFAVGModels(NamedTuple):
    """The models :func:`hierfavg_round` writes (a cohort's: each stacked by member first)."""

    thetas: np.ndarray  # (n_clients, *shape)
    w_e: np.ndarray  # (n_edges, *shape)
    edge_bytes: np.ndarray  # int64 (n_edges, 2): bytes up (and 0)


@njit(cache=True)
def smooth_l1(x, rho):
    """``rho * sum log cosh(x / rho)`` as ``sum |x| + rho log1p(exp(-2|x|/rho)) - rho log 2``
    (``cosh`` overflows once |x| > 709 rho)."""
    total = 0.0
    log2 = np.log(2.0)
    for v in x.ravel():
        a = abs(v)
        total += a + rho * np.log1p(np.exp(-2.0 * a / rho)) - rho * log2
    return total


# ---- whole rounds in one parallel region (edges or clients in parallel) -----------------------
# One call per global round instead of one per edge/local round: under load, every parallel
# region waits for its slowest thread to be scheduled.


@njit(cache=True)
def _message_bytes(V, tol):
    """Bytes of ``V`` sent as the cheaper of dense (8 per value) and sparse (12 per |x| > tol)."""
    nnz = 0
    for r in range(V.shape[0]):
        v = V[r]
        for j in range(v.shape[0]):
            nnz += abs(v[j]) > tol
    return min(8 * V.size, 12 * nnz)


@njit(cache=True)
def _prox_on_rows(X, y, rows, T, anchor, steps, stepsize, weight, gamma, rho, model, thread):
    """``steps`` proximal steps of ``T`` on the minibatch ``rows`` (a client's inner solve);
    ``thread``: the thread's ``(G, s, wt)``, its rows of the work space."""
    G, s, wt = thread
    for _ in range(steps):
        model_grad(X, y, rows, T, G, model, s, wt)
        for r in range(T.shape[0]):
            apply_prox(T[r], G[r], anchor[r], stepsize, weight, gamma, rho)


# Every kernel below is a cohort's: members ``members`` of a stack of runs with the same data,
# seed and structure, member ``m`` with its own models (index ``m`` of every stacked array) and
# its own constants (``eta1[m]``, ...: the per-member fields of the constants' named tuple). A
# client's minibatch is drawn once from the one ``perm`` and ``rng`` the members share (equal
# seeds draw equal rows) and its rows are read from memory once, from cache for the other
# members; each member's arithmetic is that of a cohort of one, in the same order, so its bits
# do not depend on its cohort. Members not listed are left as
# they are. The solo kernels (sfedhp_round, ...) are cohorts of one.


@njit(cache=True)
def sfedhp_round(X, y, ptr, w, models, perm, rng, constants, model, work):
    """One global round of every edge of sFedHP (spec seed-002 §2.3), edges in parallel: a
    cohort of one of :func:`sfedhp_cohort_round`.

    Client u is under edge u // J, J = n_clients / n_edges. Per edge: w_e = phi_e = w and
    theta_u = phi_c[u] = w; then ``edge_rounds`` times: each client's ``steps`` proximal steps
    on one minibatch, anchored at phi_e (or its own phi_c[u] if ``per_client``), with
    step ``eta2``, weight ``lam1`` and smooth-l1 weight ``gamma1``; phi_c[u] = (lam1 theta_u +
    lam2 w_e) / (lam1 + lam2); phi_e = mean of the edge's phi_c; w_e -= eta1 (lam2 (w_e -
    phi_e) + gamma2 tanh(w_e / rho)). ``edge_bytes[e]`` = (bytes up, bytes down) of the edge's
    client link (thetas up, anchors down, at zero tolerance ``tol``).

    Parameters
    ----------
    X, y, ptr : the data and the clients' row bounds
    w : (*shape) the global model
    models : :class:`SFedHPModels`, written
    perm, rng : the per-client row permutations and random states, advanced
    constants : :class:`SFedHPConstants` of floats
    model : :class:`fedsparse.kernels.prox.StepModel`
    work : (G, S, X0, A, D, E), one row per thread: gradient (n_threads, *w.shape), softmax
        scratch and the MLP work space (see :func:`fedsparse.kernels.mlp_thread_work`)
    """
    c, o = constants, models
    sfedhp_cohort_round(
        X,
        y,
        ptr,
        w[None],
        SFedHPModels(o.thetas[None], o.w_e[None], o.phi_e[None], o.phi_c[None], o.edge_bytes[None]),
        np.zeros(1, np.int64),
        perm,
        rng,
        SFedHPConstants(
            c.edge_rounds,
            c.steps,
            c.batch,
            c.per_client,
            np.full(1, c.eta1),
            np.full(1, c.eta2),
            np.full(1, c.lam1),
            np.full(1, c.lam2),
            np.full(1, c.gamma1),
            np.full(1, c.gamma2),
            np.full(1, c.rho),
            np.full(1, c.tol),
        ),
        model,
        work,
    )


@njit(parallel=True, cache=True)
def sfedhp_cohort_round(X, y, ptr, ws, models, members, perm, rng, constants, model, work):
    """:func:`sfedhp_round` of a cohort's ``members`` (see above): ``ws`` (C, *shape), the
    :class:`SFedHPModels` ``models`` stacked by member (``thetas`` and ``phi_c`` (C, n_clients,
    *shape), ``w_e`` and ``phi_e`` (C, n_edges, *shape), ``edge_bytes`` (C, n_edges, 2)); the
    per-member :class:`SFedHPConstants` are arrays (C,)."""
    thetas, w_e, phi_e, phi_c, edge_bytes = models
    edge_rounds, steps, batch, per_client, eta1, eta2, lam1, lam2, gamma1, gamma2, rho, tol = (
        constants
    )
    C, n_edges = w_e.shape[0], w_e.shape[1]
    J = thetas.shape[1] // n_edges
    G, S, X0, A, D, E = work
    c = ws.shape[1]
    for e in prange(n_edges):
        t = numba.get_thread_id()
        wt = (X0[t], A[t], D[t], E[t])
        for m in members:
            w = ws[m]
            w_e[m, e][:, :] = w
            phi_e[m, e][:, :] = w
            for u in range(e * J, (e + 1) * J):
                thetas[m, u][:, :] = w
                phi_c[m, u][:, :] = w
        up = np.zeros(C, np.int64)
        down = np.zeros(C, np.int64)
        for _ in range(edge_rounds):
            for u in range(e * J, (e + 1) * J):
                rows = draw_minibatch(perm, ptr, u, batch, rng)
                for m in members:
                    anchor = phi_c[m, u] if per_client else phi_e[m, e]
                    down[m] += _message_bytes(anchor, tol[m])
                    _prox_on_rows(
                        X,
                        y,
                        rows,
                        thetas[m, u],
                        anchor,
                        steps,
                        eta2[m],
                        lam1[m],
                        gamma1[m],
                        rho[m],
                        model,
                        (G[t], S[t], wt),
                    )
                    up[m] += _message_bytes(thetas[m, u], tol[m])
            for m in members:
                _edge_step(
                    thetas[m],
                    w_e[m, e],
                    phi_e[m, e],
                    phi_c[m],
                    e * J,
                    J,
                    c,
                    eta1[m],
                    lam1[m],
                    lam2[m],
                    gamma2[m],
                    rho[m],
                )
        for m in members:
            edge_bytes[m, e, 0] = up[m]
            edge_bytes[m, e, 1] = down[m]


@njit(cache=True)
def _edge_step(thetas, We, Pe, phi_c, first, J, c, eta1, lam1, lam2, gamma2, rho):
    """An edge's aggregation of one member: phi_c of its clients, their mean phi_e, the
    step of w_e."""
    mix = 1.0 / (lam1 + lam2)
    Pe[:, :] = 0.0
    for u in range(first, first + J):
        for r in range(c):
            th, we, pc, pe = thetas[u][r], We[r], phi_c[u][r], Pe[r]
            for j in range(th.shape[0]):
                pc[j] = (lam1 * th[j] + lam2 * we[j]) * mix
                pe[j] += pc[j]
    for r in range(c):
        we, pe = We[r], Pe[r]
        for j in range(we.shape[0]):
            pe[j] /= J
            x = we[j]
            step = lam2 * (x - pe[j])
            if gamma2 != 0.0:
                step += gamma2 * np.tanh(x / rho)
            we[j] = x - eta1 * step


@njit(cache=True)
def pfedme_round(X, y, ptr, w, models, perm, rng, constants, model, work):
    """One global round of every pFedMe client, clients in parallel: theta = w_c[u] = w, then
    ``local_rounds`` times ``steps`` proximal steps (step ``eta_inner``, weight ``lam``) on one
    minibatch anchored at w_c[u], and w_c[u] -= eta lam (w_c[u] - theta). ``constants``: a
    :class:`PFedMeConstants` of floats, ``models`` a :class:`PFedMeModels` (written); the
    rest as in :func:`sfedhp_round`. A cohort of one of :func:`pfedme_cohort_round`."""
    c = constants
    pfedme_cohort_round(
        X,
        y,
        ptr,
        w[None],
        PFedMeModels(models.thetas[None], models.w_c[None]),
        np.zeros(1, np.int64),
        perm,
        rng,
        PFedMeConstants(
            c.local_rounds,
            c.steps,
            c.batch,
            np.full(1, c.eta),
            np.full(1, c.eta_inner),
            np.full(1, c.lam),
        ),
        model,
        work,
    )


@njit(parallel=True, cache=True)
def pfedme_cohort_round(X, y, ptr, ws, models, members, perm, rng, constants, model, work):
    """:func:`pfedme_round` of a cohort's ``members``: ``ws`` (C, *shape), the
    :class:`PFedMeModels` ``thetas`` and ``w_c`` (C, n_clients, *shape); the per-member
    :class:`PFedMeConstants` are arrays (C,)."""
    thetas, w_c = models
    local_rounds, steps, batch, eta, eta_inner, lam = constants
    G, S, X0, A, D, E = work
    c = ws.shape[1]
    for u in prange(thetas.shape[1]):
        t = numba.get_thread_id()
        wt = (X0[t], A[t], D[t], E[t])
        for m in members:
            thetas[m, u][:, :] = ws[m]
            w_c[m, u][:, :] = ws[m]
        for _ in range(local_rounds):
            rows = draw_minibatch(perm, ptr, u, batch, rng)
            for m in members:
                T = thetas[m, u]
                Wu = w_c[m, u]
                _prox_on_rows(
                    X,
                    y,
                    rows,
                    T,
                    Wu,
                    steps,
                    eta_inner[m],
                    lam[m],
                    0.0,
                    1.0,
                    model,
                    (G[t], S[t], wt),
                )
                eta_m, lam_m = eta[m], lam[m]
                for r in range(c):
                    wu, th = Wu[r], T[r]
                    for j in range(wu.shape[0]):
                        wu[j] -= eta_m * lam_m * (wu[j] - th[j])


@njit(cache=True)
def hierfavg_round(X, y, ptr, w, models, perm, rng, constants, model, work):
    """One global round of every HierFAVG edge, edges in parallel: w_e = w, then
    ``edge_rounds`` times every client u of the edge runs ``steps`` SGD steps from w_e (a fresh
    minibatch each) and w_e = sum_u p_u theta_u / sum_u p_u. ``edge_bytes[e, 0]``: the bytes
    the edge's clients sent up (exact zeros free). ``constants``: a
    :class:`HierFAVGConstants` with a float ``stepsize``, ``models`` a
    :class:`HierFAVGModels` (written); the rest as in :func:`sfedhp_round`.
    A cohort of one of :func:`hierfavg_cohort_round`."""
    c = constants
    hierfavg_cohort_round(
        X,
        y,
        ptr,
        w[None],
        HierFAVGModels(models.thetas[None], models.w_e[None], models.edge_bytes[None]),
        np.zeros(1, np.int64),
        perm,
        rng,
        HierFAVGConstants(c.p, c.edge_rounds, c.steps, c.batch, np.full(1, c.stepsize)),
        model,
        work,
    )


@njit(parallel=True, cache=True)
def hierfavg_cohort_round(X, y, ptr, ws, models, members, perm, rng, constants, model, work):
    """:func:`hierfavg_round` of a cohort's ``members``: ``ws`` (C, *shape), the
    :class:`HierFAVGModels` ``thetas`` (C, n_clients, *shape), ``w_e`` (C, n_edges, *shape)
    and ``edge_bytes`` (C, n_edges, 2); the :class:`HierFAVGConstants`' ``stepsize`` is an
    array (C,)."""
    thetas, w_e, edge_bytes = models
    p, edge_rounds, steps, batch, stepsize = constants
    C, n_edges = w_e.shape[0], w_e.shape[1]
    J = thetas.shape[1] // n_edges
    G, S, X0, A, D, E = work
    c = ws.shape[1]
    for e in prange(n_edges):
        t = numba.get_thread_id()
        wt = (X0[t], A[t], D[t], E[t])
        for m in members:
            w_e[m, e][:, :] = ws[m]
        total = 0.0
        for u in range(e * J, (e + 1) * J):
            total += p[u]
        up = np.zeros(C, np.int64)
        for _ in range(edge_rounds):
            for u in range(e * J, (e + 1) * J):
                for m in members:
                    thetas[m, u][:, :] = w_e[m, e]
                lo = ptr[u]
                n = ptr[u + 1] - lo
                b = n if batch <= 0 or batch >= n else batch
                for _s in range(steps):
                    if b < n:
                        sample_without_replacement(perm, lo, n, b, rng, u)
                    rows = perm[lo : lo + b]
                    for m in members:
                        T = thetas[m, u]
                        model_grad(X, y, rows, T, G[t], model, S[t], wt)
                        step = stepsize[m]
                        for r in range(c):
                            th, g = T[r], G[t][r]
                            for j in range(th.shape[0]):
                                th[j] -= step * g[j]
                for m in members:
                    up[m] += _message_bytes(thetas[m, u], 0.0)
            for m in members:
                We = w_e[m, e]
                We[:, :] = 0.0
                for u in range(e * J, (e + 1) * J):
                    for r in range(c):
                        we, th = We[r], thetas[m, u][r]
                        for j in range(we.shape[0]):
                            we[j] += p[u] * th[j]
                for r in range(c):
                    we = We[r]
                    for j in range(we.shape[0]):
                        we[j] /= total
        for m in members:
            edge_bytes[m, e, 0] = up[m]
