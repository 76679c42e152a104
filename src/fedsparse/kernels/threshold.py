"""Hard thresholding H_tau by linear-time selection (no sort)."""

from __future__ import annotations

import numpy as np
from numba import njit


@njit(cache=True)
def select_kth_largest(a, k):
    """Return the k-th largest value of ``a`` (k = 1 is the maximum), reordering ``a``.

    Quickselect with a median-of-three pivot and a three-way partition, so long
    runs of equal values (zeros, typically) cost linear time. Expected O(n).

    Parameters
    ----------
    a : array, shape (n,)
        Scratch values; permuted in place. Must not contain NaN.
    k : int
        Rank, 1 <= k <= n.
    """
    lo = 0
    hi = a.shape[0]  # half-open window that holds the answer
    target = k - 1  # index of the answer in descending order
    while True:
        if hi - lo <= 1:
            return a[lo]
        mid = (lo + hi) // 2
        x, y, z = a[lo], a[mid], a[hi - 1]
        if x < y:
            x, y = y, x
        if y < z:
            y, z = z, y
        if x < y:
            x, y = y, x
        pivot = y  # median of three
        # Dutch-flag partition, descending: [> pivot | == pivot | < pivot]
        gt = lo
        i = lo
        lt = hi
        while i < lt:
            v = a[i]
            if v > pivot:
                a[i] = a[gt]
                a[gt] = v
                gt += 1
                i += 1
            elif v < pivot:
                lt -= 1
                a[i] = a[lt]
                a[lt] = v
            else:
                i += 1
        if target < gt:
            hi = gt
        elif target < lt:
            return pivot
        else:
            lo = lt


@njit(cache=True)
def hard_threshold(x, tau, scratch):
    """Keep the ``tau`` entries of ``x`` largest in magnitude, zero the rest, in place.

    Exactly ``min(tau, n)`` positions are kept; among equal magnitudes the lower
    index wins. NaN counts as the largest magnitude, so a diverging iterate stays
    visibly non-finite instead of being thresholded away.

    Parameters
    ----------
    x : array, shape (n,)
    tau : int
    scratch : array, shape (>= n,)
        Work space, overwritten.
    """
    n = x.shape[0]
    if tau >= n:
        return
    if tau <= 0:
        x[:] = 0.0
        return
    for j in range(n):
        v = abs(x[j])
        scratch[j] = np.inf if np.isnan(v) else v
    cut = select_kth_largest(scratch[:n], tau)
    above = 0
    for j in range(n):
        v = abs(x[j])
        if v > cut or np.isnan(v):
            above += 1
    ties = tau - above  # how many entries equal to the cut value survive
    nans = tau  # more than tau NaNs: only the first tau survive (lower index wins)
    for j in range(n):
        v = abs(x[j])
        if np.isnan(v):
            if nans > 0:
                nans -= 1
            else:
                x[j] = 0.0
            continue
        if v > cut:
            continue
        if v == cut and ties > 0:
            ties -= 1
            continue
        x[j] = 0.0


@njit(cache=True)
def hard_threshold_rows(W, tau, scratch):
    """H_tau applied to each row of ``W`` (shape (n_outputs, n_features)): per-class sparsity."""
    for r in range(W.shape[0]):
        hard_threshold(W[r], tau, scratch)
