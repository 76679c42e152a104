"""The evidence a paper claim needs, and how runs are scored against it.

Every family declares, next to each paper claim, a ``Setting``: the data (kind and the
parameters the claim is about), the model, the horizon in rounds, the hyperparameters at which
the paper states it, every method it names and the minimum number of seeds. What the runs
behind a measurement were is a ``Ran`` of the same shape. ``judge`` scores a claim only when
the runs meet its setting; otherwise the row's verdict is ``NOT_AT_SETTING`` and it lists what
is unmet ("needs 800 rounds, ran 100; 5 seeds, ran 1"). Where the project can only run a
stand-in (Fashion-MNIST for MNIST, an MLP for the paper's CNN), the setting names it
(``stand_ins``); a run of the stand-in meets the setting as the stand-in reading, and its row
says so, never as the paper's own setting.

A scored claim states the measured quantity's mean over seeds with a 95 % interval
(``t_interval`` for a mean of per-seed values, ``bootstrap_interval`` over seeds for a statistic
of several methods' seeds) and the claim at its tolerance (a ``Band``: one rule per kind of
claim, below). ``agrees`` only when the interval lies inside the band, ``does not agree`` only
when it lies wholly outside, otherwise ``inconclusive``.

Tolerances, one rule per kind of claim (docs/reproducing.md states them):

- ratios (rounds to a target, simulated wall-clock time): a claimed ≈c agrees within a factor
  ``RATIO_FACTOR`` either way, [c / 1.5, 1.5 c]; "at least c" is [c / 1.5, ∞);
- accuracies (and other levels in percent): within ``ACCURACY_PP`` points of the paper's number;
- orderings ("A is better than B"): the difference, signed so that the claim is positive, above 0;
- bounds ("at most x"): the quantity within the paper's bound, [-∞, x].
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
from scipy import stats

__all__ = [
    "ACCURACY_PP",
    "AGREES",
    "DISAGREES",
    "NOT_MEASURED",
    "BOOTSTRAP_SAMPLES",
    "INCONCLUSIVE",
    "NOT_AT_SETTING",
    "RATIO_FACTOR",
    "Band",
    "Interval",
    "Ran",
    "Setting",
    "about",
    "accuracy",
    "at_least",
    "at_most",
    "bootstrap_interval",
    "judge",
    "ordering",
    "score",
    "t_interval",
    "unmet",
]

# the verdicts a claim can get (claims.VERDICTS adds the older tables' "no claim")
AGREES, DISAGREES, NOT_MEASURED = "agrees", "does not agree", "not measured here"
INCONCLUSIVE = "inconclusive"
NOT_AT_SETTING = "not at the paper's setting"
RATIO_FACTOR = 1.5
ACCURACY_PP = 1.0
BOOTSTRAP_SAMPLES = 4000
DEFAULT_SEEDS = 5  # where the paper states no number of repeats


@dataclass(frozen=True)
class Setting:
    """What a paper states a claim at, and so what the runs must be to score it.

    data: the data's kind and the parameters the claim is about, by name ({"data":
    "Simulation I", "α": 0.1, "d": 1000, "clients": 100, "rows per client": 100}); model: the
    paper's model in words; rounds: the horizon the comparison needs (None: any); hyper: the
    hyperparameters at which the paper states the claim; methods: every method the claim names
    (their labels); seeds: the minimum number of seeds (the paper's repeats, else 5);
    stand_ins: per data key or ``"model"``, the value the project runs instead of the paper's
    and why ({"data": ("Fashion-MNIST", "MNIST is not on this machine")})."""

    data: Mapping[str, object] = field(default_factory=dict)
    model: str = ""
    rounds: int | None = None
    hyper: Mapping[str, object] = field(default_factory=dict)
    methods: tuple[str, ...] = ()
    seeds: int = DEFAULT_SEEDS
    stand_ins: Mapping[str, tuple[object, str]] = field(default_factory=dict)

    def describe(self) -> str:
        """The setting in one line, as the claims table's ``needs`` column shows it."""
        parts = [", ".join(f"{k} {_fmt(v)}" for k, v in self.data.items())]
        if self.model:
            parts.append(f"model {self.model}")
        if self.rounds:
            parts.append(f"{self.rounds:,} rounds")
        if self.hyper:
            parts.append(", ".join(f"{k} = {_fmt(v)}" for k, v in self.hyper.items()))
        if self.methods:
            parts.append("methods " + ", ".join(self.methods))
        parts.append(f"{self.seeds} seeds")
        for key, (value, why) in self.stand_ins.items():
            parts.append(f"stand-in for {key}: {_fmt(value)} ({why})")
        return "; ".join(p for p in parts if p)


@dataclass(frozen=True)
class Ran:
    """What the runs behind a measurement were, in a ``Setting``'s terms: ``data`` and
    ``hyper`` by the setting's names (a hyperparameter that differs between the methods may be
    a tuple of the values run), ``rounds`` the rounds every run covers, ``methods`` the methods
    with runs, ``seeds`` the seeds every compared method has."""

    data: Mapping[str, object] = field(default_factory=dict)
    model: str | tuple[str, ...] = ""  # a tuple: the compared runs' networks differ
    rounds: int | None = None
    hyper: Mapping[str, object] = field(default_factory=dict)
    methods: tuple[str, ...] = ()
    seeds: int = 0


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, (tuple, list, set, frozenset)):
        return "{" + ", ".join(_fmt(x) for x in v) + "}"
    return str(v)


def _same(need, got) -> bool:
    if isinstance(got, (tuple, list, set, frozenset)):
        return len(got) > 0 and all(_same(need, g) for g in got)
    if isinstance(need, (int, float)) and isinstance(got, (int, float)):
        return math.isclose(float(need), float(got), rel_tol=1e-9, abs_tol=1e-12)
    return need == got


def unmet(setting: Setting, ran: Ran) -> tuple[list[str], list[str]]:
    """(what is unmet, the stand-ins used): each unmet requirement as "needs X, ran Y"."""
    gaps, stand = [], []

    def check(key: str, need, got) -> None:
        if _same(need, got):
            return
        if key in setting.stand_ins and _same(setting.stand_ins[key][0], got):
            value, why = setting.stand_ins[key]
            stand.append(f"{_fmt(value)} for {_fmt(need)} ({why})")
            return
        gaps.append(f"{key} {_fmt(need)}, ran {_fmt(got) if got not in (None, '') else 'none'}")

    for key, need in setting.data.items():
        check(key, need, ran.data.get(key))
    if setting.model:
        check("model", setting.model, ran.model)
    if setting.rounds and (ran.rounds or 0) < setting.rounds:
        gaps.append(f"needs {setting.rounds:,} rounds, ran {ran.rounds or 0:,}")
    for key, need in setting.hyper.items():
        check(key, need, ran.hyper.get(key))
    missing = [m for m in setting.methods if m not in ran.methods]
    if missing:
        gaps.append(f"{_and(missing)} missing")
    if ran.seeds < setting.seeds:
        gaps.append(f"{setting.seeds} seeds, ran {ran.seeds}")
    return gaps, stand


def _and(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


@dataclass(frozen=True)
class Interval:
    """A measured quantity: ``value`` (its mean over seeds, or the statistic on all seeds),
    the 95 % interval [lo, hi], the number of seeds ``n`` and how the interval was drawn."""

    value: float
    lo: float
    hi: float
    n: int
    method: str

    def text(self, fmt: Callable[[float], str] = lambda v: f"{v:.3g}") -> str:
        """'[1.21, 1.63] (95 %, t over 5 seeds)'; '' when there is no interval."""
        if math.isnan(self.lo) or math.isnan(self.hi):
            return ""
        return f"[{fmt(self.lo)}, {fmt(self.hi)}] (95 %, {self.method} over {self.n} seeds)"


def t_interval(values: Sequence[float]) -> Interval:
    """The mean of per-seed ``values`` with Student's t 95 % interval (NaN with one seed;
    an infinite value, e.g. a target never reached, makes the interval unbounded that way)."""
    x = np.asarray(values, dtype=float)
    n = len(x)
    if n == 0:
        return Interval(math.nan, math.nan, math.nan, 0, "t")
    if np.isinf(x).any():  # no t interval: the seeds' range, unbounded on that side
        return Interval(float(np.mean(x)), float(np.min(x)), float(np.max(x)), n, "range")
    mean = float(np.mean(x))
    if n < 2:
        return Interval(mean, math.nan, math.nan, n, "t")
    half = float(stats.t.ppf(0.975, n - 1) * np.std(x, ddof=1) / math.sqrt(n))
    return Interval(mean, mean - half, mean + half, n, "t")


def bootstrap_interval(
    groups: Sequence[Sequence], statistic: Callable[..., float], seed: int = 0
) -> Interval:
    """A statistic of per-seed groups with a 95 % percentile bootstrap interval.

    Deterministic (a generator seeded by ``seed``), so a claims table rebuilds byte for byte.
    Percentiles are taken without interpolation, so an infinite statistic (a target never
    reached) is fine.

    Parameters
    ----------
    groups
        Per-seed items (values or curves) of each group; each group is resampled with
        replacement on its own, ``BOOTSTRAP_SAMPLES`` times.
    statistic
        Called as ``statistic(*groups)`` with float arrays; resamples where it is NaN are
        dropped.
    seed
        Seeds the resampling.

    Returns
    -------
    Interval
        The statistic on all seeds and ``[lo, hi]``; ``lo`` and ``hi`` are NaN with fewer than
        two seeds in some group (the value too with none) or when every resample is NaN.
    """
    arrays = [np.asarray(g, dtype=float) for g in groups]
    n = min((len(g) for g in arrays), default=0)
    if n == 0:
        return Interval(math.nan, math.nan, math.nan, 0, "bootstrap")
    value = float(statistic(*arrays))
    if n < 2:
        return Interval(value, math.nan, math.nan, n, "bootstrap")
    rng = np.random.default_rng(seed)
    draws = np.empty(BOOTSTRAP_SAMPLES)
    for b in range(BOOTSTRAP_SAMPLES):
        draws[b] = statistic(*(g[rng.integers(0, len(g), len(g))] for g in arrays))
    draws = draws[~np.isnan(draws)]
    if len(draws) == 0:
        return Interval(value, math.nan, math.nan, n, "bootstrap")
    lo, hi = np.quantile(draws, [0.025, 0.975], method="inverted_cdf")
    return Interval(value, float(lo), float(hi), n, "bootstrap")


@dataclass(frozen=True)
class Band:
    """The claim at its tolerance: the measured quantity agrees when its interval lies in
    [lo, hi] ((lo, hi] when ``open_lo``: an ordering's difference must be above 0), disagrees
    when it lies wholly outside; ``text`` states the rule in the row."""

    lo: float
    hi: float
    text: str
    open_lo: bool = False


def about(ratio: float) -> Band:
    """A claimed ratio ≈c: within a factor RATIO_FACTOR either way."""
    lo, hi = ratio / RATIO_FACTOR, ratio * RATIO_FACTOR
    return Band(lo, hi, f"≈{ratio:g}x within a factor {RATIO_FACTOR:g}: [{lo:.3g}, {hi:.3g}]")


def at_least(ratio: float) -> Band:
    """A claimed ratio of at least c: above c / RATIO_FACTOR (the ratios' one tolerance)."""
    lo = ratio / RATIO_FACTOR
    return Band(lo, math.inf, f"≥{ratio:g}x within a factor {RATIO_FACTOR:g}: ≥ {lo:.3g}")


def accuracy(value_pct: float, pp: float = ACCURACY_PP) -> Band:
    """A claimed accuracy (or level) in percent: within ``pp`` points of it."""
    return Band(
        value_pct - pp,
        value_pct + pp,
        f"{value_pct:g} ± {pp:g} points: [{value_pct - pp:.4g}, {value_pct + pp:.4g}]",
    )


def ordering(what: str = "the difference") -> Band:
    """An ordering: ``what`` (signed so that the claim makes it positive) above 0."""
    return Band(0.0, math.inf, f"{what} > 0", open_lo=True)


def at_most(bound: float, what: str = "the value") -> Band:
    """A bound: ``what`` at most ``bound``."""
    return Band(-math.inf, bound, f"{what} ≤ {bound:g}")


def score(band: Band, interval: Interval) -> str:
    """agrees / does not agree / inconclusive: the interval inside the band, wholly outside it,
    or neither (an interval that could not be drawn is inconclusive)."""
    lo, hi = interval.lo, interval.hi
    if math.isnan(lo) or math.isnan(hi):
        return INCONCLUSIVE
    above = lo > band.lo if band.open_lo else lo >= band.lo
    if above and hi <= band.hi:
        return AGREES
    below = hi <= band.lo if band.open_lo else hi < band.lo
    if below or lo > band.hi:
        return DISAGREES
    return INCONCLUSIVE


def judge(
    claim,
    setting: Setting,
    ran: Ran,
    band: Band | None = None,
    interval: Interval | None = None,
    fmt: Callable[[float], str] = lambda v: f"{v:.3g}",
):
    """A claim scored against its evidence.

    Parameters
    ----------
    claim
        A ``claims.Claim``, its verdict a placeholder (or ``not measured here``).
    setting
        What the paper states the claim at.
    ran
        What the runs behind the measurement were.
    band
        The claim at its tolerance; None: none could be stated.
    interval
        The measured quantity; None: no measurement could be made.
    fmt
        Formats the interval's numbers.

    Returns
    -------
    Claim
        A copy of ``claim`` with the seeds, interval, tolerance, setting, unmet needs and
        stand-ins recorded, and its verdict: kept when it is ``not measured here`` and there
        is no interval; NOT_AT_SETTING when ``ran`` does not meet ``setting``; inconclusive
        without a band or interval; else :func:`score`.
    """
    gaps, stand = unmet(setting, ran)
    fields = {
        "seeds": ran.seeds,
        "interval": interval.text(fmt) if interval is not None else "",
        "tolerance": band.text if band is not None else "",
        "needs": setting.describe(),
        "unmet": "; ".join(gaps),
        "stand_in": "; ".join(stand),
    }
    if claim.verdict == NOT_MEASURED and interval is None:
        return replace(claim, **fields)
    if gaps:
        return replace(claim, verdict=NOT_AT_SETTING, **fields)
    if band is None or interval is None:
        return replace(claim, verdict=INCONCLUSIVE, **fields)
    return replace(claim, verdict=score(band, interval), **fields)
