"""Local SGD steps of a cohort's least-squares or logistic models on dense rows, in FMA lanes.

The arithmetic of a member's step, which is its bits (the tests transcribe it in exact
rational arithmetic):

* the score of row ``x`` is ``z = hsum(s) + tail``: lane ``l`` of ``s`` sums ``x[j] * w[j]``
  for ``j = l (mod 8)`` below the last multiple of eight, in increasing ``j``, each term by
  ``fma`` from +0.0; :func:`~fedsparse.kernels.simd.hsum` adds the lanes pairwise; the last
  ``d mod 8`` terms follow by ``fma``, in increasing ``j``;
* row ``q``'s coefficient ``a_q`` is that of :func:`~fedsparse.kernels.losses.batch_grad`
  (``scale * d loss / d z``, ``scale = 1 / b``);
* each coordinate's gradient is ``g = fma(a_q, x_q[j], g)`` over the rows in their minibatch
  order, from +0.0; with ridge ``g = fma(l2, w[j], g)``; then ``w[j] = fma(-stepsize, g,
  w[j])``.

Every score is its own chain and every coordinate's gradient its own, so the kernels block
rows and members as they like and a member's bits never depend on its cohort. Blocked here:
two members x four rows share every load (the rows' and the members' weights), whose sums stay
in vector registers (:mod:`~fedsparse.kernels.simd`); the coordinates go in chunks of
:data:`_CHUNK` for all members in turn, so a minibatch's rows are read from memory once and
from L1 for the other members (a chunk's running sums wait in work space); and a coordinate's
gradient is applied to ``w`` in the pass that completes it.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from .losses import value_and_coef
from .simd import LANES, fma, hsum, vfma, vload2, vsplat, vstore2, vzero

# coordinates a pass: a minibatch of ten rows is 10 KB of them, in L1 for all the members
# (one pass over the whole row, 80 KB, read the rows from L2 for each member: about 1.6x slower)
_CHUNK = 128


@njit(cache=True)
def work_space(n_slots, members, rows):
    """Per-thread work space of :func:`descend_members` for ``members`` members and
    minibatches of up to ``rows`` rows: coefficients, score lanes, gradient chunks."""
    return (
        np.empty((n_slots, members, rows)),
        np.empty((n_slots, members * rows, LANES)),
        np.empty((n_slots, 2, _CHUNK)),
    )


@njit(cache=True)
def descend_members(X, y, rows, Wm, members, loss, l2, stepsizes, coef, lanes, grad):
    """One local step of each member ``m`` in ``members``: ``Wm[m]`` moves by ``-stepsizes[m]``
    times the gradient, at ``Wm[m]``, of the mean loss over the rows ``rows`` of dense ``X``
    plus ``l2 * Wm[m]`` (in the module's arithmetic).

    ``Wm`` (C, d) holds the members' models (rows with unit stride); ``coef`` (>= C, >= b),
    ``lanes`` (>= C * b, 8) and ``grad`` (2, :data:`_CHUNK`) are work space (one thread's slot
    of :func:`work_space`).
    """
    b = rows.shape[0]
    _scores(X, rows, Wm, members, lanes)
    scale = 1.0 / b
    d = Wm.shape[1]
    d8 = d - d % LANES
    for k in range(members.shape[0]):
        m = members[k]
        for q in range(b):
            i = rows[q]
            z = hsum(vload2(lanes, m * b + q, 0)) if d8 > 0 else 0.0
            for j in range(d8, d):
                z = fma(X[i, j], Wm[m, j], z)
            coef[m, q] = value_and_coef(loss, z, y[i], scale, False)[1]
    _update(X, rows, Wm, members, coef, l2, stepsizes, grad)


@njit(cache=True, inline="always")
def _fma_pair(x, u, u2, s, t, pair):
    """``x`` times ``u`` into ``s`` and, for a pair of members, times ``u2`` into ``t``."""
    return vfma(x, u, s), (vfma(x, u2, t) if pair else t)


@njit(cache=True, inline="always")
def _lanes_or_zero(lanes, p, first):
    return vzero() if first else vload2(lanes, p, 0)


@njit(cache=True)
def _scores(X, rows, Wm, members, lanes):
    """``lanes[m * b + q]``: the eight lanes of member ``m``'s score of row ``rows[q]``."""
    b = rows.shape[0]
    d = Wm.shape[1]
    d8 = d - d % LANES
    n_members = members.shape[0]
    for j0 in range(0, d8, _CHUNK):
        j1 = min(d8, j0 + _CHUNK)
        first = j0 == 0
        for k in range(0, n_members, 2):
            m = members[k]
            pair = k + 1 < n_members
            v = members[k + 1] if pair else m
            pm, pv = m * b, v * b
            q = 0
            while q < b:  # blocks of up to four rows
                n = min(4, b - q)
                i0 = rows[q]
                i1 = rows[q + 1] if n > 1 else i0
                i2 = rows[q + 2] if n > 2 else i0
                i3 = rows[q + 3] if n > 3 else i0
                s0 = _lanes_or_zero(lanes, pm + q, first)
                s1 = _lanes_or_zero(lanes, pm + q + 1, first or n < 2)
                s2 = _lanes_or_zero(lanes, pm + q + 2, first or n < 3)
                s3 = _lanes_or_zero(lanes, pm + q + 3, first or n < 4)
                t0 = _lanes_or_zero(lanes, pv + q, first or not pair)
                t1 = _lanes_or_zero(lanes, pv + q + 1, first or not pair or n < 2)
                t2 = _lanes_or_zero(lanes, pv + q + 2, first or not pair or n < 3)
                t3 = _lanes_or_zero(lanes, pv + q + 3, first or not pair or n < 4)
                if pair and n == 4:  # the common block, without a branch in its loop
                    for j in range(j0, j1, LANES):
                        u, u2 = vload2(Wm, m, j), vload2(Wm, v, j)
                        x = vload2(X, i0, j)
                        s0, t0 = vfma(x, u, s0), vfma(x, u2, t0)
                        x = vload2(X, i1, j)
                        s1, t1 = vfma(x, u, s1), vfma(x, u2, t1)
                        x = vload2(X, i2, j)
                        s2, t2 = vfma(x, u, s2), vfma(x, u2, t2)
                        x = vload2(X, i3, j)
                        s3, t3 = vfma(x, u, s3), vfma(x, u2, t3)
                else:
                    for j in range(j0, j1, LANES):
                        u, u2 = vload2(Wm, m, j), vload2(Wm, v, j)
                        s0, t0 = _fma_pair(vload2(X, i0, j), u, u2, s0, t0, pair)
                        if n > 1:
                            s1, t1 = _fma_pair(vload2(X, i1, j), u, u2, s1, t1, pair)
                        if n > 2:
                            s2, t2 = _fma_pair(vload2(X, i2, j), u, u2, s2, t2, pair)
                        if n > 3:
                            s3, t3 = _fma_pair(vload2(X, i3, j), u, u2, s3, t3, pair)
                vstore2(lanes, pm + q, 0, s0)
                if n > 1:
                    vstore2(lanes, pm + q + 1, 0, s1)
                if n > 2:
                    vstore2(lanes, pm + q + 2, 0, s2)
                if n > 3:
                    vstore2(lanes, pm + q + 3, 0, s3)
                if pair:
                    vstore2(lanes, pv + q, 0, t0)
                    if n > 1:
                        vstore2(lanes, pv + q + 1, 0, t1)
                    if n > 2:
                        vstore2(lanes, pv + q + 2, 0, t2)
                    if n > 3:
                        vstore2(lanes, pv + q + 3, 0, t3)
                q += n


@njit(cache=True, inline="always")
def _coef_or_zero(coef, m, q, n, k):
    return vsplat(coef[m, q + k] if n > k else 0.0)


@njit(cache=True)
def _update(X, rows, Wm, members, coef, l2, stepsizes, grad):
    """``Wm[m] = fma(-stepsize, g + ridge, Wm[m])`` with ``g`` the coefficients' combination of
    the rows, summed in minibatch order (four rows a pass; ``grad`` carries a chunk's sums
    between passes)."""
    b = rows.shape[0]
    d = Wm.shape[1]
    d8 = d - d % LANES
    n_members = members.shape[0]
    ridge = vsplat(l2)
    for j0 in range(0, d8, _CHUNK):
        j1 = min(d8, j0 + _CHUNK)
        for k in range(0, n_members, 2):
            m = members[k]
            pair = k + 1 < n_members
            v = members[k + 1] if pair else m
            descent_m, descent_v = vsplat(-stepsizes[m]), vsplat(-stepsizes[v])
            q = 0
            while q < b:
                n = min(4, b - q)
                first, last = q == 0, q + n == b
                i0 = rows[q]
                i1 = rows[q + 1] if n > 1 else i0
                i2 = rows[q + 2] if n > 2 else i0
                i3 = rows[q + 3] if n > 3 else i0
                a0, a1 = _coef_or_zero(coef, m, q, n, 0), _coef_or_zero(coef, m, q, n, 1)
                a2, a3 = _coef_or_zero(coef, m, q, n, 2), _coef_or_zero(coef, m, q, n, 3)
                c0, c1 = _coef_or_zero(coef, v, q, n, 0), _coef_or_zero(coef, v, q, n, 1)
                c2, c3 = _coef_or_zero(coef, v, q, n, 2), _coef_or_zero(coef, v, q, n, 3)
                if pair and n == 4 and not first and not last:  # a middle block
                    for j in range(j0, j1, LANES):
                        g, h = vload2(grad, 0, j - j0), vload2(grad, 1, j - j0)
                        x = vload2(X, i0, j)
                        g, h = vfma(a0, x, g), vfma(c0, x, h)
                        x = vload2(X, i1, j)
                        g, h = vfma(a1, x, g), vfma(c1, x, h)
                        x = vload2(X, i2, j)
                        g, h = vfma(a2, x, g), vfma(c2, x, h)
                        x = vload2(X, i3, j)
                        g, h = vfma(a3, x, g), vfma(c3, x, h)
                        vstore2(grad, 0, j - j0, g)
                        vstore2(grad, 1, j - j0, h)
                    q += n
                    continue
                for j in range(j0, j1, LANES):
                    g = vzero() if first else vload2(grad, 0, j - j0)
                    h = vzero() if first or not pair else vload2(grad, 1, j - j0)
                    g, h = _fma_pair(vload2(X, i0, j), a0, c0, g, h, pair)
                    if n > 1:
                        g, h = _fma_pair(vload2(X, i1, j), a1, c1, g, h, pair)
                    if n > 2:
                        g, h = _fma_pair(vload2(X, i2, j), a2, c2, g, h, pair)
                    if n > 3:
                        g, h = _fma_pair(vload2(X, i3, j), a3, c3, g, h, pair)
                    if not last:
                        vstore2(grad, 0, j - j0, g)
                        if pair:
                            vstore2(grad, 1, j - j0, h)
                        continue
                    w = vload2(Wm, m, j)
                    if l2 != 0.0:
                        g = vfma(ridge, w, g)
                    vstore2(Wm, m, j, vfma(descent_m, g, w))
                    if pair:
                        w = vload2(Wm, v, j)
                        if l2 != 0.0:
                            h = vfma(ridge, w, h)
                        vstore2(Wm, v, j, vfma(descent_v, h, w))
                q += n
    for k in range(n_members):  # the last d mod 8 coordinates
        m = members[k]
        for j in range(d8, d):
            g = 0.0
            for q in range(b):
                g = fma(coef[m, q], X[rows[q], j], g)
            if l2 != 0.0:
                g = fma(l2, Wm[m, j], g)
            Wm[m, j] = fma(-stepsizes[m], g, Wm[m, j])
