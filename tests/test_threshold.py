"""Hard thresholding H_tau and the quickselect behind it, and the per-client RNG."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import np_hard_threshold, np_hard_threshold_rows
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from fedsparse import kernels as K

settings.register_profile("fedsparse", max_examples=80, deadline=None)
settings.load_profile("fedsparse")

# Small integers make many ties (and zeros); wide floats exercise general magnitudes.
tie_heavy = st.sampled_from([-4.0, -3.0, -2.0, -1.0, 0.0, 1.0, 2.0, 3.0, 4.0])
general = st.floats(-1e6, 1e6, allow_nan=False, allow_infinity=False)
finite_values = st.one_of(tie_heavy, general)
vectors = hnp.arrays(np.float64, st.integers(1, 40), elements=finite_values)
nonzero_vectors = hnp.arrays(
    np.float64,
    st.integers(1, 40),
    elements=st.one_of(
        st.sampled_from([-4.0, -3.0, -2.0, -1.0, 1.0, 2.0, 3.0, 4.0]),
        st.floats(0.5, 1e6),
        st.floats(-1e6, -0.5),
    ),
)


def H(x: np.ndarray, tau: int) -> np.ndarray:
    out = np.array(x, dtype=np.float64)
    K.hard_threshold(out, tau, np.empty(max(out.shape[0], 1)))
    return out


@pytest.mark.parametrize("tau", [1, 7, 200, 999])
@pytest.mark.parametrize(
    "kind", ["iterate", "wide", "crowded", "ties", "subnormal", "sparse", "zeros"]
)
def test_hard_threshold_long_vectors_match_reference(kind, tau):
    """Length 1000, shaped to reach every path of the selection: the cut bin small or
    crowded (> 32 candidates), far below the largest entry, among ties, or at zero."""
    rng = np.random.default_rng(len(kind) * 1000 + tau)
    n = 1000
    if kind == "iterate":  # a tau-sparse model after a gradient step
        x = 1e-3 * rng.standard_normal(n)
        x[rng.choice(n, 200, replace=False)] += rng.standard_normal(200)
    elif kind == "wide":  # 1400 binades: most entries share the last bin
        x = np.exp(rng.uniform(-700, 700, n)) * rng.choice([-1.0, 1.0], n)
    elif kind == "crowded":  # everything within one bin
        x = rng.uniform(1.0, 1.05, n) * rng.choice([-1.0, 1.0], n)
    elif kind == "ties":
        x = rng.integers(-3, 4, n).astype(np.float64)
    elif kind == "subnormal":
        x = rng.standard_normal(n) * 5e-324 * rng.integers(0, 1000, n)
    elif kind == "sparse":
        x = np.zeros(n)
        x[rng.choice(n, 150, replace=False)] = rng.standard_normal(150)
    else:
        x = np.zeros(n)
        x[::7] = -0.0
    np.testing.assert_array_equal(H(x, tau), np_hard_threshold(x, tau))
    scratch = K.threshold_scratch(n)  # the allocation-free path gives the same result
    got = x.copy()
    K.hard_threshold(got, tau, scratch)
    np.testing.assert_array_equal(got, np_hard_threshold(x, tau))


@given(x=vectors, data=st.data())
def test_hard_threshold_matches_reference(x, data):
    tau = data.draw(st.integers(0, x.shape[0] + 2), label="tau")
    got = H(x, tau)
    expected = np_hard_threshold(x, tau)
    np.testing.assert_array_equal(got, expected)
    assert np.count_nonzero(got) <= min(tau, x.shape[0])
    # kept entries are untouched copies of x, dropped ones are exactly 0
    kept = got != 0
    np.testing.assert_array_equal(got[kept], x[kept])


@given(x=nonzero_vectors, data=st.data())
def test_hard_threshold_keeps_exactly_min_tau_n(x, data):
    tau = data.draw(st.integers(0, x.shape[0] + 2), label="tau")
    got = H(x, tau)
    assert np.count_nonzero(got) == min(tau, x.shape[0])
    # every kept |x| is >= every dropped |x|
    kept, dropped = np.abs(x[got != 0]), np.abs(x[got == 0])
    if kept.size and dropped.size:
        assert kept.min() >= dropped.max()


@given(x=vectors, data=st.data())
def test_hard_threshold_is_idempotent(x, data):
    tau = data.draw(st.integers(0, x.shape[0] + 2), label="tau")
    once = H(x, tau)
    np.testing.assert_array_equal(H(once, tau), once)


@given(x=vectors)
def test_tau_at_least_n_leaves_x_unchanged(x):
    for tau in (x.shape[0], x.shape[0] + 5):
        got = H(x, tau)
        np.testing.assert_array_equal(got, x)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(x))  # even -0.0 kept


def test_ties_broken_by_lower_index():
    x = np.array([1.0, -3.0, 3.0, 2.0, -3.0, 3.0])
    np.testing.assert_array_equal(H(x, 2), [0, -3.0, 3.0, 0, 0, 0])
    np.testing.assert_array_equal(H(x, 3), [0, -3.0, 3.0, 0, -3.0, 0])
    np.testing.assert_array_equal(H(x, 5), [0, -3.0, 3.0, 2.0, -3.0, 3.0])
    np.testing.assert_array_equal(H(np.full(5, 2.0), 2), [2.0, 2.0, 0, 0, 0])


def test_nan_is_kept_as_largest():
    x = np.array([1.0, np.nan, -5.0, 4.0, np.inf, 0.5])
    np.testing.assert_array_equal(H(x, 1), [0, np.nan, 0, 0, 0, 0])
    np.testing.assert_array_equal(H(x, 2), [0, np.nan, 0, 0, np.inf, 0])
    np.testing.assert_array_equal(H(x, 3), [0, np.nan, -5.0, 0, np.inf, 0])


def test_more_nans_than_tau_keeps_exactly_tau():
    x = np.array([np.nan, 3.0, np.nan, np.nan, 1.0])
    got = H(x, 2)
    assert np.count_nonzero(got) == 2
    np.testing.assert_array_equal(got, [np.nan, 0, np.nan, 0, 0])
    np.testing.assert_array_equal(H(np.array([np.nan, np.nan, 1.0]), 1), [np.nan, 0, 0])


special = st.one_of(finite_values, st.sampled_from([np.nan, np.inf, -np.inf]))


@given(x=hnp.arrays(np.float64, st.integers(1, 30), elements=special), data=st.data())
def test_hard_threshold_with_nan_and_inf_matches_reference(x, data):
    tau = data.draw(st.integers(0, x.shape[0] + 1), label="tau")
    got = H(x, tau)
    np.testing.assert_array_equal(got, np_hard_threshold(x, tau))
    kept = (got != 0) | np.isnan(got)
    assert kept.sum() <= min(tau, x.shape[0])
    n_nan = int(np.isnan(x).sum())
    assert int(np.isnan(got).sum()) == min(n_nan, max(tau, 0))


@given(
    W=hnp.arrays(
        np.float64, st.tuples(st.integers(1, 4), st.integers(1, 25)), elements=finite_values
    ),
    data=st.data(),
)
def test_hard_threshold_rows_is_per_row(W, data):
    tau = data.draw(st.integers(0, W.shape[1] + 1), label="tau")
    got = W.copy()
    K.hard_threshold_rows(got, tau, np.empty(W.shape[1]))
    np.testing.assert_array_equal(got, np_hard_threshold_rows(W, tau))
    assert np.all(np.count_nonzero(got, axis=1) <= min(tau, W.shape[1]))


@given(
    a=hnp.arrays(np.float64, st.integers(1, 60), elements=finite_values),
    data=st.data(),
)
def test_select_kth_largest_matches_sort(a, data):
    k = data.draw(st.integers(1, a.shape[0]), label="k")
    work = a.copy()
    got = K.select_kth_largest(work, k)
    assert got == np.sort(a)[::-1][k - 1]
    np.testing.assert_array_equal(np.sort(work), np.sort(a))  # only reordered


@given(
    a=hnp.arrays(np.float64, st.integers(1, 200), elements=st.sampled_from([0.0, 1.0, 2.0])),
    data=st.data(),
)
def test_select_kth_largest_many_duplicates(a, data):
    k = data.draw(st.integers(1, a.shape[0]), label="k")
    assert K.select_kth_largest(a.copy(), k) == np.sort(a)[::-1][k - 1]


def test_select_kth_largest_large_constant_runs():
    rng = np.random.default_rng(0)
    a = np.zeros(5000)
    a[rng.choice(5000, 30, replace=False)] = rng.standard_normal(30)
    for k in (1, 15, 30, 31, 2500, 5000):
        assert K.select_kth_largest(a.copy(), k) == np.sort(a)[::-1][k - 1]


# ---- RNG -------------------------------------------------------------------------------


def test_client_states_deterministic_and_distinct():
    a = K.client_states(42, 8)
    assert a.dtype == np.uint64 and a.shape == (8,)
    np.testing.assert_array_equal(a, K.client_states(42, 8))
    assert len(set(a.tolist())) == 8
    assert not np.array_equal(a, K.client_states(43, 8))
    # a client's stream does not depend on how many clients there are
    np.testing.assert_array_equal(K.client_states(42, 3), a[:3])


def test_randbelow_advances_only_its_own_stream():
    state = K.client_states(7, 3)
    before = state.copy()
    draws = [K.randbelow(state, 1, 1000) for _ in range(50)]
    assert state[0] == before[0] and state[2] == before[2] and state[1] != before[1]
    assert len(set(draws)) > 40
    again = before.copy()
    assert [K.randbelow(again, 1, 1000) for _ in range(50)] == draws
    assert all(K.randbelow(state, 0, 1) == 0 for _ in range(20))


@pytest.mark.parametrize("n", [2, 7, 10])
def test_randbelow_roughly_uniform(n):
    state = K.client_states(123, 2)
    draws = np.array([K.randbelow(state, 0, n) for _ in range(20000)])
    assert draws.min() == 0 and draws.max() == n - 1
    counts = np.bincount(draws, minlength=n)
    expected = draws.size / n
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    # dof <= 9: P(chi2 > 40) < 1e-5 for a uniform generator
    assert chi2 < 40.0, (counts, chi2)
    # successive draws are not correlated: pairs (a, b) are uniform over n*n cells too
    pairs = np.bincount(draws[:-1:2] * n + draws[1::2], minlength=n * n)
    exp2 = (draws.size // 2) / (n * n)
    chi2_pairs = float(((pairs - exp2) ** 2 / exp2).sum())
    assert chi2_pairs < (n * n - 1) + 6 * np.sqrt(2 * (n * n - 1)), chi2_pairs


def test_sample_without_replacement_distinct_rows_in_range():
    ptr = np.array([0, 12, 30, 45], dtype=np.int64)
    perm = np.arange(45, dtype=np.int64)
    state = K.client_states(5, 3)
    seen = set()
    for _ in range(200):
        for i in range(3):
            lo, n = int(ptr[i]), int(ptr[i + 1] - ptr[i])
            b = 7
            outside = np.concatenate([perm[:lo], perm[lo + n :]]).copy()
            K.sample_without_replacement(perm, lo, n, b, state, i)
            batch = perm[lo : lo + b]
            assert len(set(batch.tolist())) == b
            assert np.all((batch >= lo) & (batch < lo + n))
            # the client's slice stays a permutation of its rows; others untouched
            assert sorted(perm[lo : lo + n].tolist()) == list(range(lo, lo + n))
            np.testing.assert_array_equal(np.concatenate([perm[:lo], perm[lo + n :]]), outside)
            if i == 0:
                seen.add(tuple(sorted(batch.tolist())))
    assert len(seen) > 150  # many different minibatches


def test_sample_without_replacement_is_uniform_over_rows():
    perm = np.arange(10, dtype=np.int64)
    state = K.client_states(9, 1)
    counts = np.zeros(10)
    trials = 6000
    for _ in range(trials):
        K.sample_without_replacement(perm, 0, 10, 3, state, 0)
        counts[perm[:3]] += 1
    expected = trials * 3 / 10
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert chi2 < 40.0, counts
