"""Hard thresholding H_tau by linear-time selection (no full sort)."""

from __future__ import annotations

import numpy as np
from numba import njit

RADIX_BINS = 1024
SCRATCH_EXTRA = RADIX_BINS  # radix counters carved from the scratch buffer (see threshold_scratch)
_SIGN = np.uint64(1) << np.uint64(63)
_ONE = np.uint64(1)


def threshold_scratch(n: int) -> np.ndarray:
    """Scratch for :func:`hard_threshold` on vectors of length ``n`` (never allocates inside)."""
    return np.empty(n + SCRATCH_EXTRA)


@njit(cache=True)
def radix_select(keys, m, k, counts):
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
        while (span >> shift) >= np.uint64(RADIX_BINS):
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
    radix_select(keys, n, k, np.empty(RADIX_BINS, dtype=np.int64))
    for i in range(n):
        v = keys[i]
        keys[i] = v & ~_SIGN if v & _SIGN else ~v
    return a[0]


# Bins of the first selection pass, counted down from the largest magnitude: 2**49
# apart in bit pattern is 1/8 of a binade, so 512 bins span 64 binades (the rest
# share the last bin); the bin holding the cut typically has a few dozen entries.
_TOP_BINS = 512
_TOP_SHIFT = 49
_MAGNITUDE = np.int64(0x7FFFFFFFFFFFFFFF)  # all bits but the sign
_INF_BITS = np.int64(0x7FF0000000000000)  # |x| at or above: inf or NaN
_SMALL = 32  # candidates sorted by insertion below this count


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
    # Non-negative floats order like their bit patterns read as integers, so the
    # magnitudes are handled as int64 keys (sign bit cleared): integer loops vectorise.
    keys = x.view(np.int64)
    k_top = 0
    for j in range(n):  # vectorised
        k_top = max(k_top, keys[j] & _MAGNITUDE)
    if k_top >= _INF_BITS:
        return _hard_threshold_nonfinite(x, tau, scratch)
    if k_top == 0:
        return False  # all zero: nothing to cut
    counts = _counters(scratch, n)
    work = scratch[:n].view(np.int64)
    for j in range(n):  # vectorised: bin of each entry, counted down from the top
        work[j] = min((k_top - (keys[j] & _MAGNITUDE)) >> _TOP_SHIFT, _TOP_BINS - 1)
    counts[:_TOP_BINS] = 0
    for j in range(n):
        counts[work[j]] += 1
    b = 0
    above = 0  # entries in bins above the cut's bin: strictly larger than the cut
    while above + counts[b] < tau:
        above += counts[b]
        b += 1
    m = 0
    for j in range(n):  # the cut bin's keys, moved to the front (m <= j: no overlap)
        if work[j] == b:
            work[m] = keys[j] & _MAGNITUDE
            m += 1
    rank = tau - above
    if m <= _SMALL:
        _sort_descending(work, m)
        cut_key = work[rank - 1]
    else:
        radix_select(work.view(np.uint64), m, rank, counts)
        cut_key = work[0]
    equal = 0
    for i in range(m):
        above += work[i] > cut_key
        equal += work[i] == cut_key
    for j in range(n):  # vectorised: keep |x| >= cut
        keys[j] = 0 if (keys[j] & _MAGNITUDE) < cut_key else keys[j]
    work[0] = cut_key  # the cut as a float, read through the scratch's float view
    return _break_ties(x, tau, scratch[0], above, equal)


@njit(cache=True)
def _counters(scratch, n):
    """Selection counters: the scratch beyond its first ``n`` entries, if long enough."""
    if scratch.shape[0] >= n + SCRATCH_EXTRA:
        return scratch[n : n + SCRATCH_EXTRA].view(np.int64)
    return np.empty(SCRATCH_EXTRA, dtype=np.int64)


@njit(cache=True)
def _sort_descending(keys, m):
    """Insertion sort of ``keys[:m]``, largest first (m is small)."""
    for i in range(1, m):
        v = keys[i]
        j = i - 1
        while j >= 0 and keys[j] < v:
            keys[j + 1] = keys[j]
            j -= 1
        keys[j + 1] = v


@njit(cache=True)
def _break_ties(x, tau, cut, above, equal):
    """After keeping every ``|x| >= cut``: drop surplus entries equal to the cut, highest index
    first, so exactly ``tau`` remain. ``above``/``equal``: entries larger than / equal to it."""
    ties = tau - above  # entries equal to the cut that survive, lowest indices first
    if equal > ties and cut > 0.0:
        for j in range(x.shape[0]):
            if abs(x[j]) == cut:
                if ties > 0:
                    ties -= 1
                else:
                    x[j] = 0.0
        return True
    return False


@njit(cache=True)
def _hard_threshold_nonfinite(x, tau, scratch):
    """:func:`hard_threshold` when ``x`` holds NaN or infinity (a diverging iterate)."""
    n = x.shape[0]
    for j in range(n):
        v = abs(x[j])
        scratch[j] = np.inf if np.isnan(v) else v
    counts = _counters(scratch, n)
    radix_select(scratch[:n].view(np.uint64), n, tau, counts)
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
    for j in range(n):  # keep |x| >= cut and NaN
        x[j] = 0.0 if abs(x[j]) < cut else x[j]
    return _break_ties(x, tau, cut, above, equal)


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
