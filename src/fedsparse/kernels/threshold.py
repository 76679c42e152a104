"""Hard thresholding H_tau by linear-time selection (no sort)."""

from __future__ import annotations

import numpy as np
from numba import njit

_BINS = 1024
SCRATCH_EXTRA = _BINS  # radix counters carved from the scratch buffer (see threshold_scratch)
_SIGN = np.uint64(1) << np.uint64(63)
_ONE = np.uint64(1)


def threshold_scratch(n: int) -> np.ndarray:
    """Scratch for :func:`hard_threshold` on vectors of length ``n`` (never allocates inside)."""
    return np.empty(n + SCRATCH_EXTRA)


@njit(cache=True)
def _radix_select(keys, m, k, counts):
    """Move the k-th largest of ``keys[:m]`` (uint64) to ``keys[0]``; reorder ``keys[:m]``.

    Each pass histograms the candidates over at most 1024 equal-width bins of
    their current key range ``[lo, hi]`` and keeps only the bin holding the
    answer. For real-valued data the boundary bin holds a handful of keys after
    one pass; whatever the distribution, each pass shrinks the range by a factor
    of 512 or more, so there are at most 8 passes (linear time, no sort, and no
    data-dependent branch in the counting loop).
    """
    while m > 1:
        lo = keys[0]
        hi = keys[0]
        for i in range(1, m):
            lo = min(lo, keys[i])
            hi = max(hi, keys[i])
        if lo == hi:
            return  # all candidates equal the answer
        span = hi - lo
        shift = np.uint64(0)
        while (span >> shift) >= np.uint64(_BINS):
            shift += _ONE
        n_bins = int(span >> shift) + 1
        counts[:n_bins] = 0
        for i in range(m):
            counts[int((keys[i] - lo) >> shift)] += 1
        b = n_bins - 1
        while counts[b] < k:
            k -= counts[b]
            b -= 1
        kept = 0
        for i in range(m):
            v = keys[i]
            if int((v - lo) >> shift) == b:
                keys[i] = keys[kept]
                keys[kept] = v
                kept += 1
        m = kept


@njit(cache=True)
def select_kth_largest(a, k):
    """Return the k-th largest value of ``a`` (k = 1 is the maximum), reordering ``a``.

    Radix selection on order-preserving integer keys of the float bit patterns
    (linear time). ``a`` must be contiguous and free of NaN.

    Parameters
    ----------
    a : array, shape (n,)
        Values; permuted in place.
    k : int
        Rank, 1 <= k <= n.
    """
    n = a.shape[0]
    keys = a.view(np.uint64)
    for i in range(n):  # negative floats: flip all bits; positive: set the sign bit
        v = keys[i]
        keys[i] = ~v if v & _SIGN else v | _SIGN
    _radix_select(keys, n, k, np.empty(_BINS, dtype=np.int64))
    for i in range(n):
        v = keys[i]
        keys[i] = v & ~_SIGN if v & _SIGN else ~v
    return a[0]


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
        Work space, overwritten; with length >= n + 1024 (:func:`threshold_scratch`)
        nothing is allocated.

    Returns
    -------
    bool
        True if positions decided between equal magnitudes (ties at a non-zero
        cut, or a non-finite cut): callers that reorder entries must then use
        index order.
    """
    n = x.shape[0]
    if tau >= n:
        return False
    if tau <= 0:
        x[:] = 0.0
        return False
    for j in range(n):
        v = abs(x[j])
        scratch[j] = np.inf if np.isnan(v) else v
    # non-negative floats order like their bit patterns read as unsigned integers
    if scratch.shape[0] >= n + SCRATCH_EXTRA:
        counts = scratch[n : n + SCRATCH_EXTRA].view(np.int64)
    else:
        counts = np.empty(SCRATCH_EXTRA, dtype=np.int64)
    _radix_select(scratch[:n].view(np.uint64), n, tau, counts)
    cut = scratch[0]
    if cut == np.inf:
        _threshold_at_infinity(x, tau)
        return True
    # NaN sits in scratch as inf, so it counts as above a finite cut
    above = 0
    equal = 0
    for j in range(n):
        above += scratch[j] > cut
        equal += scratch[j] == cut
    for j in range(n):  # branch-free: keep |x| >= cut and NaN
        x[j] = 0.0 if abs(x[j]) < cut else x[j]
    ties = tau - above  # entries equal to the cut that survive, lowest indices first
    if equal > ties and cut > 0.0:
        for j in range(n):
            if abs(x[j]) == cut:
                if ties > 0:
                    ties -= 1
                else:
                    x[j] = 0.0
        return True
    return False


@njit(cache=True)
def _threshold_at_infinity(x, tau):
    """H_tau when at least tau entries are NaN or infinite (a diverged iterate).

    NaN outranks inf, which outranks everything finite; lower indices first.
    """
    n = x.shape[0]
    nans = 0
    for j in range(n):
        nans += np.isnan(x[j])
    keep_nan = min(nans, tau)
    keep_inf = tau - keep_nan
    for j in range(n):
        v = abs(x[j])
        if np.isnan(v):
            if keep_nan > 0:
                keep_nan -= 1
                continue
        elif v == np.inf and keep_inf > 0:
            keep_inf -= 1
            continue
        x[j] = 0.0


@njit(cache=True)
def hard_threshold_rows(W, tau, scratch):
    """H_tau applied to each row of ``W`` (shape (n_outputs, n_features)): per-class sparsity."""
    for r in range(W.shape[0]):
        hard_threshold(W[r], tau, scratch)
