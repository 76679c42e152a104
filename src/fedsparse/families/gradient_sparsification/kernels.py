"""Gradient sparsification with error feedback (spec seed-003 sections 1.2, 3 and 4).

Clients add a minibatch gradient to their residual ``a_i`` and offer its top-k entries by
magnitude, ranked (largest first, the lower index first among equal magnitudes) so the
server can take top-kappa prefixes; the server's FAB and FUB selections work on those
``(N, k)`` offers and one length-D mark array, never on ``N x D`` arrays. Magnitudes are
compared as the bit patterns of ``|x|`` (the same order as the numbers, NaN above inf), so
selection is a linear-time radix select plus a sort of the k chosen, never a sort of D.
"""

from __future__ import annotations

from typing import NamedTuple

import numba
import numpy as np
from numba import njit, prange

from ...kernels.prox import model_grad
from ...kernels.rng import draw_minibatch
from ...kernels.threshold import RADIX_BINS, radix_select

_MAGNITUDE = np.uint64(0x7FFFFFFFFFFFFFFF)


class OfferConstants(NamedTuple):
    """The constants of :func:`accumulate_offers`."""

    batch: int  # rows per minibatch (<= 0: all the client's rows, no randomness)
    k: int  # offer size (0: accumulate only)


def topk_scratch(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Work space of :func:`top_k` for vectors of length ``n``: keys (twice n) and radix
    counters."""
    return np.empty(2 * n, np.uint64), np.empty(RADIX_BINS, np.int64)


@njit(cache=True)
def _ranked(cand, keys, out):
    """Write ``cand`` (ascending indices) to ``out`` ordered by ``keys[cand]`` descending;
    the stable sort keeps the lower index first among equal keys."""
    m = cand.shape[0]
    comp = np.empty(m, np.uint64)
    for r in range(m):
        comp[r] = ~keys[cand[r]]
    order = np.argsort(comp, kind="mergesort")
    for r in range(m):
        out[r] = cand[order[r]]


# top_k's first pass bins the magnitudes down from the largest: 2**49 apart in bit pattern is
# 1/8 of a binade, so 512 bins span 64 binades (the rest share the last bin). The k-th largest
# of a client's residual then lies in a bin of a few dozen entries, and only the bins down to
# it are selected among, instead of every entry.
_TOP_BINS = 512
_TOP_SHIFT = np.uint64(49)
_LAST_BIN = np.uint64(_TOP_BINS - 1)


@njit(cache=True)
def top_k(a, k, sel, counts, out):
    """The ``k`` indices of ``a`` largest in magnitude, ranked, written to ``out[:k]``.

    Ranking: ``|a_j|`` descending, the lower index first among equal magnitudes (so the
    top-kappa of a client's offer is the prefix ``out[:kappa]``); NaN ranks above every
    number. ``sel`` (uint64, length >= 2 len(a)) and ``counts`` come from
    :func:`topk_scratch`; ``a`` must be contiguous.
    """
    n = a.shape[0]
    if sel.shape[0] < 2 * n or k < 1 or k > n:
        raise ValueError("top_k: need 1 <= k <= len(a) and scratch of 2 len(a)")
    bits = a.view(np.uint64)
    keys = sel[n : 2 * n]  # magnitudes as integers: they order as the magnitudes do
    top = np.uint64(0)
    for j in range(n):
        v = bits[j] & _MAGNITUDE
        keys[j] = v
        top = max(top, v)
    counts[:_TOP_BINS] = 0
    for j in range(n):
        counts[min((top - keys[j]) >> _TOP_SHIFT, _LAST_BIN)] += 1
    last, above = 0, 0  # the bin of the k-th largest, and the entries in the bins before it
    while above + counts[last] < k:
        above += counts[last]
        last += 1
    # the candidates, in index order: every entry of the bins down to ``last``
    cand = np.empty(above + counts[last], np.int64)
    m = 0
    for j in range(n):
        if min((top - keys[j]) >> _TOP_SHIFT, _LAST_BIN) <= last:
            cand[m] = j
            sel[m] = keys[j]
            m += 1
    if k < m:
        radix_select(sel, m, k, counts)
        cut = sel[0]  # the k-th largest magnitude
    else:
        cut = sel[0]
        for r in range(1, m):
            cut = min(cut, sel[r])
    taken = np.empty(k, np.int64)
    above_cut = 0
    for r in range(m):
        if keys[cand[r]] > cut:
            above_cut += 1
    equal_left = k - above_cut  # entries equal to the cut that fit: the lowest indices
    t = 0
    for r in range(m):
        v = keys[cand[r]]
        if v > cut:
            taken[t] = cand[r]
            t += 1
        elif v == cut and equal_left > 0:
            taken[t] = cand[r]
            t += 1
            equal_left -= 1
    _ranked(taken, keys, out)


@njit(cache=True)
def _accumulate_offer(a, g, k, sel, counts, idx, val):
    """``a += g``; then client's ranked top-k offer into ``idx``/``val`` (k = 0: none)."""
    for j in range(a.shape[0]):
        a[j] += g[j]
    if k > 0:
        top_k(a, k, sel, counts, idx)
        for r in range(k):
            val[r] = a[idx[r]]


@njit(parallel=True, cache=True)
def accumulate_offers(X, y, ptr, W, A, perm, rng, constants, model, offers, work, scratch):
    """Every client adds its minibatch gradient at ``W`` to its residual and offers its top-k.

    Parameters
    ----------
    W : array, shape (n_outputs, n_features) for a linear model, (1, n_params) for a network
    A : array, shape (n_clients, W.size)
        Residuals a_i (row-major flat), updated in place.
    perm, rng : per-client row permutations and random states (as in ``local_sgd_round``).
    constants : :class:`OfferConstants`
        ``batch``, the minibatch size (<= 0: all the client's rows, deterministic), and
        ``k``, the offer size (0: accumulate only).
    model : :class:`fedsparse.kernels.prox.StepModel` (``Problem.step_model``).
    offers : (idx, val), arrays of shape (n_clients, k)
        Output: each client's ranked offer (indices, residual values).
    work : per-thread work space from :func:`fedsparse.kernels.prox.step_work` (its G rows
        hold the gradients)
    scratch : (sel, counts), per-thread :func:`topk_scratch` buffers
    """
    batch, k = constants
    n_clients = ptr.shape[0] - 1
    G, S, X0, Aw, Dw, E = work
    idx, val = offers
    sel, counts = scratch
    for i in prange(n_clients):
        t = numba.get_thread_id()
        rows = draw_minibatch(perm, ptr, i, batch, rng)
        Gt = G[t]
        wt = (X0[t], Aw[t], Dw[t], E[t])
        model_grad(X, y, rows, W, Gt, model, S[t], wt)
        _accumulate_offer(A[i], Gt.reshape(A.shape[1]), k, sel[t], counts[t], idx[i], val[i])


@njit(cache=True)
def aggregate_offers(idx, val, p, agg):
    """``agg[j] = sum_i p_i a_ij 1[j in J_i]`` at every offered index (clients in order);
    other entries of ``agg`` are left as they are."""
    n, k = idx.shape
    for i in range(n):
        for r in range(k):
            agg[idx[i, r]] = 0.0
    for i in range(n):
        for r in range(k):
            agg[idx[i, r]] += p[i] * val[i, r]


@njit(cache=True)
def _union_size(idx, kappa, mark):
    """|union of the clients' top-kappa prefixes|; ``mark`` is all False before and after."""
    n = idx.shape[0]
    size = 0
    for i in range(n):
        for r in range(kappa):
            j = idx[i, r]
            if not mark[j]:
                mark[j] = True
                size += 1
    for i in range(n):
        for r in range(kappa):
            mark[idx[i, r]] = False
    return size


@njit(cache=True)
def fab_select(idx, val, agg, k, fill_aggregate, in_J, J):
    """FAB-Select (spec section 3, S.1-S.8): ``J`` (length k) and kappa.

    kappa is the largest value in [k // N, k] with |union of top-kappa| <= k (binary
    search; U is non-decreasing). The rest of J is filled from the clients' (kappa+1)-th
    offers, each index once, ranked by the client's own |a_ij| (reading (a)) or, with
    ``fill_aggregate``, by the aggregated |b_j| (reading (b)); ties to the lower index.
    ``in_J`` (bool, length D, all False before) marks J on return; the caller clears it.
    """
    n = idx.shape[0]
    lo = k // n
    hi = k
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if _union_size(idx, mid, in_J) <= k:
            lo = mid
        else:
            hi = mid - 1
    kappa = lo
    m = 0
    for i in range(n):
        for r in range(kappa):
            j = idx[i, r]
            if not in_J[j]:
                in_J[j] = True
                J[m] = j
                m += 1
    if m < k:  # kappa < k here, so every client has a (kappa+1)-th offer
        cand = np.empty(n, np.int64)
        vals = np.empty(n)
        for i in range(n):
            cand[i] = idx[i, kappa]
            vals[i] = agg[cand[i]] if fill_aggregate else val[i, kappa]
        keys = vals.view(np.uint64)
        for i in range(n):
            keys[i] &= _MAGNITUDE
        # lower index first among equal keys: sort by index, then stably by key
        order = np.argsort(cand, kind="mergesort")
        comp = np.empty(n, np.uint64)
        for r in range(n):
            comp[r] = ~keys[order[r]]
        order2 = np.argsort(comp, kind="mergesort")
        for r in range(n):
            if m == k:
                break
            j = cand[order[order2[r]]]
            if not in_J[j]:
                in_J[j] = True
                J[m] = j
                m += 1
    return kappa


@njit(cache=True)
def union_indices(idx, mark):
    """The union of all offers, ascending; ``mark`` is all False before and after."""
    size = 0
    n, k = idx.shape
    for i in range(n):
        for r in range(k):
            j = idx[i, r]
            if not mark[j]:
                mark[j] = True
                size += 1
    out = np.empty(size, np.int64)
    m = 0
    for i in range(n):
        for r in range(k):
            j = idx[i, r]
            if mark[j]:
                mark[j] = False
                out[m] = j
                m += 1
    out.sort()
    return out


@njit(cache=True)
def fub_select(idx, agg, k, in_J, J):
    """FUB-top-k: the ``k`` indices of the union of the offers with the largest aggregated
    |b_j| (the lower index first among equal ones); marks them in ``in_J``."""
    union = union_indices(idx, in_J)
    vals = np.empty(union.shape[0])
    for r in range(union.shape[0]):
        vals[r] = agg[union[r]]
    pos = np.empty(k, np.int64)
    top_k(vals, k, np.empty(2 * union.shape[0], np.uint64), np.empty(RADIX_BINS, np.int64), pos)
    for r in range(k):
        J[r] = union[pos[r]]
        in_J[J[r]] = True


@njit(cache=True)
def reset_sent(A, idx, in_J, everything):
    """Error-feedback reset: ``a_ij = 0`` for ``j in J_i`` that is in J (or every j in J_i
    when ``everything``: U-top-k applies all it received)."""
    n, k = idx.shape
    for i in range(n):
        for r in range(k):
            j = idx[i, r]
            if everything or in_J[j]:
                A[i, j] = 0.0


@njit(cache=True)
def apply_sparse(w, J, agg, stepsize, in_J):
    """``w_j -= stepsize * b_j`` for j in J; clears ``in_J`` at J."""
    for r in range(J.shape[0]):
        j = J[r]
        w[j] -= stepsize * agg[j]
        in_J[j] = False


@njit(cache=True)
def count_shared(idx, in_J, out):
    """``out[i] = |J ∩ J_i|`` (the fairness view)."""
    n, k = idx.shape
    for i in range(n):
        c = 0
        for r in range(k):
            if in_J[idx[i, r]]:
                c += 1
        out[i] = c


def merge_tree(idx, val, p, k, scratch):
    """The authors' code's FUB_top_K (``global_top_k``): the clients' offers averaged pairwise
    up a binary tree, the ``k`` largest |values| kept at every merge.

    Level by level, clients (then nodes) 2m and 2m + 1 merge into node m: their sparse vectors
    averaged with weights the sum of their clients' p_i, then, when more than ``k`` indices
    are present, only the ``k`` largest magnitudes kept (the lower index first among equal
    ones); an odd node out moves up unchanged. So the root's value at j is the sum of
    p_i a_ij over the clients i whose element j survived every merge above them, and those are
    the elements whose residual is reset. Plain NumPy, N - 1 merges of at most 2k elements a
    round; the code's arithmetic for finite values but for exact zeros (its top-k also picks
    zero-valued indices when fewer than k are nonzero, which changes no value). A merge with a
    NaN (a diverged run's) keeps fewer than k, never the NaN.

    Parameters
    ----------
    idx, val
        The offers, shape (N, k') each: client i's offered indices (distinct) and its a_ij.
    p
        The aggregation weights, shape (N,).
    k
        Elements kept at every merge.
    scratch
        ``(mark, acc)``: a length-D boolean array all False and a length-D float array all
        zero; so they are on return.

    Returns
    -------
    J : ndarray of int64
        The root's indices, ascending (min(k, |union of the offers|) of them).
    b : ndarray of float64
        The root's values at J.
    survived : ndarray of bool, shape (N, k')
        Whether client i's offered element r survived every merge above it.
    """
    mark, acc = scratch
    n = idx.shape[0]
    order = np.argsort(idx, axis=1)
    rows = np.take_along_axis(idx, order, 1), np.take_along_axis(val, order, 1), p
    nodes = [(i_row, v_row, float(w)) for i_row, v_row, w in zip(*rows, strict=True)]
    survived = np.ones(idx.shape, np.bool_)
    span = 1  # clients per node at this level: node m holds clients [m span, (m + 1) span)
    while len(nodes) > 1:
        merged = []
        for m in range(0, len(nodes) - 1, 2):
            (ia, va, wa), (ib, vb, wb) = nodes[m], nodes[m + 1]
            acc[ia] = va * wa
            acc[ib] += vb * wb
            J = np.concatenate((ia, ib))
            J.sort()
            J = J[np.concatenate(([True], J[1:] != J[:-1]))]
            b = acc[J] / (wa + wb)
            acc[J] = 0.0
            if J.size > k:
                J, b = _largest(J, b, k)
                lo, hi = m * span, min((m + 2) * span, n)
                mark[J] = True
                survived[lo:hi] &= mark[idx[lo:hi]]
                mark[J] = False
            merged.append((J, b, wa + wb))
        if len(nodes) % 2:
            merged.append(nodes[-1])
        nodes, span = merged, 2 * span
    J, b, _ = nodes[0]
    return J.astype(np.int64), b, survived


def _largest(J, b, k):
    """The k entries of (J ascending, b) of largest |b|, the lower index first among equal
    magnitudes, in J's order: those above the k-th largest magnitude and the first of those
    equal to it."""
    a = np.abs(b)
    kth = np.partition(a, a.size - k)[a.size - k]
    keep = a > kth
    keep[np.flatnonzero(a == kth)[: k - np.count_nonzero(keep)]] = True
    return J[keep], b[keep]
