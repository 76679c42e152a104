"""The evidence a claim needs (fedsparse.report.evidence): what is unmet, intervals against
plain NumPy/SciPy computations, the tolerance bands, the verdict rule, and the index's guard
that no family states a paper verdict it did not judge against a setting."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from fedsparse.report.claims import (
    AGREES,
    DISAGREES,
    NOT_MEASURED,
    PAPER_TEXT,
    STAND_IN,
    VARIATION,
    Claim,
    Reading,
    in_reading,
    require_evidence,
)
from fedsparse.report.evidence import (
    INCONCLUSIVE,
    NOT_AT_SETTING,
    Band,
    Interval,
    Ran,
    Setting,
    about,
    accuracy,
    at_least,
    at_most,
    bootstrap_interval,
    judge,
    ordering,
    score,
    t_interval,
    unmet,
)

SETTING = Setting(
    data={"data": "MNIST", "clients": 20},
    model="MLP 784-500-200-10",
    rounds=800,
    hyper={"K": 5, "λ": 15.0},
    methods=("sFedHP", "pFedMe", "FedAvg"),
    seeds=3,
    stand_ins={
        "data": ("Fashion-MNIST", "MNIST is not on this machine"),
        "model": ("MLP 784-100-10", "the paper's network costs 400 core-hours"),
    },
)


def _ran(**changes) -> Ran:
    base = dict(
        data={"data": "MNIST", "clients": 20},
        model="MLP 784-500-200-10",
        rounds=800,
        hyper={"K": 5, "λ": 15.0},
        methods=("FedAvg", "pFedMe", "sFedHP"),
        seeds=3,
    )
    return Ran(**{**base, **changes})


def test_a_run_at_the_setting_meets_it():
    assert unmet(SETTING, _ran()) == ([], [])
    # a hyperparameter run at one value for every method; floats compared with a tolerance
    assert unmet(SETTING, _ran(hyper={"K": (5, 5), "λ": 15.000000000001})) == ([], [])


def test_every_unmet_requirement_is_named():
    ran = _ran(
        data={"data": "MNIST", "clients": 10},
        model="MLP 784-64-10",
        rounds=100,
        hyper={"K": (5, 20)},
        methods=("sFedHP",),
        seeds=1,
    )
    gaps, stand = unmet(SETTING, ran)
    assert stand == []
    assert gaps == [
        "clients 20, ran 10",
        "model MLP 784-500-200-10, ran MLP 784-64-10",
        "needs 800 rounds, ran 100",
        "K 5, ran {5, 20}",
        "λ 15, ran none",
        "pFedMe and FedAvg missing",
        "3 seeds, ran 1",
    ]


def test_a_declared_stand_in_meets_the_setting_and_says_so():
    gaps, stand = unmet(SETTING, _ran(data={"data": "Fashion-MNIST", "clients": 20}))
    assert gaps == [] and stand == ["Fashion-MNIST for MNIST (MNIST is not on this machine)"]
    gaps, stand = unmet(SETTING, _ran(data={"data": "CIFAR-10", "clients": 20}))
    assert gaps == ["data MNIST, ran CIFAR-10"] and stand == []


def test_t_interval_is_students():
    x = np.array([1.4, 1.55, 1.62, 1.48, 1.71])
    iv = t_interval(x)
    half = stats.t.ppf(0.975, 4) * x.std(ddof=1) / math.sqrt(5)
    assert iv.value == pytest.approx(x.mean())
    assert (iv.lo, iv.hi) == pytest.approx((x.mean() - half, x.mean() + half))
    assert iv.n == 5 and iv.text() == f"[{iv.lo:.3g}, {iv.hi:.3g}] (95 %, t over 5 seeds)"
    one = t_interval([2.0])
    assert one.value == 2.0 and math.isnan(one.lo) and one.text() == ""
    inf = t_interval([1.0, math.inf])  # a seed that never reaches: no t, the seeds' range
    assert (inf.lo, inf.hi, inf.method) == (1.0, math.inf, "range")


def test_bootstrap_interval_resamples_each_group_on_its_own():
    rng = np.random.default_rng(3)
    a, b = rng.normal(2.0, 0.1, 8), rng.normal(1.0, 0.1, 6)

    def ratio(x, y):
        return x.mean() / y.mean()

    iv = bootstrap_interval([a, b], ratio)
    assert iv.value == pytest.approx(ratio(a, b)) and iv.n == 6
    # the same percentiles from a plain loop with the same generator
    g = np.random.default_rng(0)
    draws = []
    for _ in range(4000):
        draws.append(ratio(a[g.integers(0, 8, 8)], b[g.integers(0, 6, 6)]))
    lo, hi = np.quantile(draws, [0.025, 0.975], method="inverted_cdf")
    assert (iv.lo, iv.hi) == (lo, hi)
    assert bootstrap_interval([a, b], ratio) == iv  # deterministic
    # 2-D groups: a seed is a row (a curve)
    curves = np.vstack([np.linspace(1, 0, 5) + d for d in (0.0, 0.1, 0.2)])
    iv = bootstrap_interval([curves], lambda c: c.mean(axis=0)[-1])
    assert iv.lo >= 0.0 - 1e-12 and iv.hi <= 0.2 + 1e-12 and iv.value == pytest.approx(0.1)


def test_the_bands_are_one_rule_per_kind():
    assert (about(1.7).lo, about(1.7).hi) == pytest.approx((1.7 / 1.5, 1.7 * 1.5))
    assert (at_least(1.6).lo, at_least(1.6).hi) == (pytest.approx(1.6 / 1.5), math.inf)
    assert (accuracy(85.64).lo, accuracy(85.64).hi) == pytest.approx((84.64, 86.64))
    assert (accuracy(85.0, 2.5).lo, accuracy(85.0, 2.5).hi) == (82.5, 87.5)
    assert (ordering().lo, ordering().hi) == (0.0, math.inf)
    assert (at_most(0.2).lo, at_most(0.2).hi) == (-math.inf, 0.2)


@pytest.mark.parametrize(
    "lo, hi, verdict",
    [
        (1.2, 2.0, AGREES),  # inside [1.13, 2.55]
        (0.0, 1.0, DISAGREES),  # wholly below
        (2.6, 3.0, DISAGREES),  # wholly above
        (1.0, 1.5, INCONCLUSIVE),  # straddles the lower edge
        (0.5, 3.0, INCONCLUSIVE),  # wider than the band
        (math.nan, math.nan, INCONCLUSIVE),  # no interval
    ],
)
def test_the_verdict_is_the_interval_against_the_band(lo, hi, verdict):
    assert score(about(1.7), Interval(1.5, lo, hi, 5, "t")) == verdict


@pytest.mark.parametrize(
    "lo, hi, verdict",
    [
        (0.1, 0.3, AGREES),
        (0.0, 0.3, INCONCLUSIVE),  # an ordering needs the difference above 0
        (0.0, 0.0, DISAGREES),  # a tie on every seed: not better
        (-0.2, -0.1, DISAGREES),
        (-0.1, 0.1, INCONCLUSIVE),
    ],
)
def test_an_ordering_needs_the_difference_above_zero(lo, hi, verdict):
    assert score(ordering(), Interval(0.0, lo, hi, 5, "t")) == verdict


def test_judge_scores_only_at_the_setting():
    claim = Claim("P", "c", "≈1.7x", "1.5x", AGREES)
    band = Band(1.0, 2.0, "[1, 2]")
    inside = Interval(1.5, 1.2, 1.8, 3, "bootstrap")
    row = judge(claim, SETTING, _ran(), band, inside)
    assert row.verdict == AGREES and row.unmet == "" and row.seeds == 3
    assert row.interval == "[1.2, 1.8] (95 %, bootstrap over 3 seeds)"
    assert row.tolerance == "[1, 2]" and row.needs == SETTING.describe()
    short = judge(claim, SETTING, _ran(rounds=100, seeds=1), band, inside)
    assert short.verdict == NOT_AT_SETTING
    assert short.unmet == "needs 800 rounds, ran 100; 3 seeds, ran 1"
    assert short.interval == row.interval  # the measurement is still shown
    untested = judge(Claim("P", "c", "", "no runs", NOT_MEASURED), SETTING, _ran(seeds=0))
    assert untested.verdict == NOT_MEASURED and untested.unmet == "3 seeds, ran 0"
    noint = judge(claim, SETTING, _ran(), band, None)
    assert noint.verdict == INCONCLUSIVE


def test_a_stand_in_run_is_its_own_reading_never_the_papers():
    text = Reading("as written", PAPER_TEXT, "The text.", lambda c: True)
    ran = _ran(data={"data": "Fashion-MNIST", "clients": 20}, model="MLP 784-100-10")
    row = judge(
        Claim("P", "c", "", "", AGREES),
        SETTING,
        ran,
        Band(0, 1, ""),
        Interval(0.5, 0.4, 0.6, 3, "t"),
    )
    assert row.verdict == AGREES and row.stand_in.startswith("Fashion-MNIST for MNIST")
    (row,) = in_reading([row], text)
    assert row.reading_kind == STAND_IN and row.reading.startswith("as written; stand-in: ")
    own = judge(
        Claim("P", "c", "", "", AGREES),
        SETTING,
        _ran(),
        Band(0, 1, ""),
        Interval(0.5, 0.4, 0.6, 3, "t"),
    )
    assert in_reading([own], text)[0].reading_kind == PAPER_TEXT


def test_the_index_keeps_only_judged_paper_verdicts():
    ours = Reading("ours", VARIATION, "Our data.", lambda c: True)
    rows = require_evidence(
        [
            Claim("P", "scored by hand", "", "", AGREES),
            Claim("P", "judged", "", "", DISAGREES, needs="a setting"),
            Claim("P", "derived", "", "", AGREES, claim_kind="derived"),
            *in_reading([Claim("P", "on our data", "", "", AGREES, needs="a setting")], ours),
        ]
    )
    assert [(r.verdict, r.claim_kind) for r in rows] == [
        (NOT_AT_SETTING, "paper"),
        (DISAGREES, "paper"),
        (AGREES, "derived"),
        (AGREES, "variation"),
    ]
    assert rows[0].unmet == "the claim's setting is not declared"
