"""The reproduction page's claims table, and the one interface a family's report section uses.

A family (hard thresholding, sFedHP, gradient sparsification, SSCA) is a ``Family``: a page of
its own in the report, built by ``build(page, data, tables)`` (``data``: the build's
``report.data.ReportData``, which reads the results once), which writes the family's
figures and tables into ``page`` and returns the paper claims it checked as ``Claim`` rows. The
report's index gathers every family's claims into one table with a link to the section that
measured each. The claims live next to the code that measures them; nothing else in the report
knows a family's algorithms.

Readings. Where a paper is silent, or its text and its authors' code differ (labels per client,
where test rows come from, the initial point, a model standing in for one we cannot run), a
*reading* names the choice: ``paper_text``, ``authors_code`` or ``variation`` (ours). A family
declares its readings as predicates over a run's normalised config, so a reading is recognised
from what a run did, never from a label in the config (run ids do not change), and each claim
row says which reading it was measured in. A claim is ``paper`` (the paper makes it) or
``derived`` (an expectation of ours); a derived claim is never counted as the paper's.

Evidence. A paper claim is scored only from runs that meet the setting it declares
(``evidence.judge``: data, model, horizon, hyperparameters, methods, seeds), with a 95 %
interval and its tolerance; otherwise its verdict is ``not at the paper's setting`` and the
row lists what is unmet. A run of a declared stand-in is scored in the ``stand_in`` reading
kind, never as the paper's own setting. ``require_evidence`` enforces this for every family at
the index: a paper verdict that was not judged against a setting is not a verdict.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace

import pandas as pd

from .evidence import AGREES, DISAGREES, INCONCLUSIVE, NOT_AT_SETTING, NOT_MEASURED

__all__ = [
    "AGREES",
    "AUTHORS_CODE",
    "CLAIM_KINDS",
    "COLUMNS",
    "DERIVED",
    "DISAGREES",
    "INCONCLUSIVE",
    "NOT_AT_SETTING",
    "NOT_MEASURED",
    "NO_CLAIM",
    "PAPER_CLAIM",
    "PAPER_TEXT",
    "READING_KINDS",
    "SCORED",
    "STAND_IN",
    "VARIATION_CLAIM",
    "VARIATION",
    "VERDICTS",
    "Claim",
    "Family",
    "Reading",
    "claims_frame",
    "in_reading",
    "reading_of",
    "require_evidence",
    "results_algorithms",
    "run_configs",
    "verdict_of",
]

# a measurement at a setting the paper states no claim for: what claims tables written before
# NOT_AT_SETTING said (the index still reads them); the families now give NOT_AT_SETTING
NO_CLAIM = "the paper makes no claim here"
VERDICTS = (AGREES, DISAGREES, INCONCLUSIVE, NOT_AT_SETTING, NOT_MEASURED, NO_CLAIM)
SCORED = (AGREES, DISAGREES, INCONCLUSIVE)  # verdicts drawn from runs at the claim's setting
PAPER_TEXT, AUTHORS_CODE, VARIATION = "paper_text", "authors_code", "variation"
STAND_IN = "stand_in"  # the paper's setting with a declared stand-in (Fashion-MNIST for MNIST)
STAND_IN_PREFIX = "stand-in: "  # a stand-in reading: its reading, "; ", this, its stand-ins
# the paper's own readings first, then the stand-ins, then ours
READING_KINDS = (PAPER_TEXT, AUTHORS_CODE, STAND_IN, VARIATION)
# derived: an expectation of ours; variation: a paper claim measured on data of ours (a
# variation reading), never counted as the paper's
PAPER_CLAIM, DERIVED, VARIATION_CLAIM = "paper", "derived", "variation"
CLAIM_KINDS = (PAPER_CLAIM, DERIVED, VARIATION_CLAIM)
COLUMNS = [
    "paper",
    "claim",
    "claim_kind",
    "reading",
    "reading_kind",
    "where",
    "paper_value",
    "ours",
    "verdict",
    "reading_description",
    "anchor",
    "link",
    "same_runs_as",
    "seeds",
    "interval",
    "tolerance",
    "unmet",
    "needs",
    "stand_in",
]


@dataclass(frozen=True)
class Reading:
    """One reading of a paper: ``name`` (short, shown in the claims table), ``kind`` (one of
    READING_KINDS), ``description`` (one sentence: what differs from the paper's text) and
    ``matches``, a predicate over a run's normalised config (the dict of ``config_json``)."""

    name: str
    kind: str
    description: str
    matches: Callable[[dict], bool] = field(compare=False, repr=False)

    def __post_init__(self):
        if self.kind not in READING_KINDS:
            raise ValueError(f"reading kind {self.kind!r}: must be one of {READING_KINDS}")


def reading_of(readings: tuple[Reading, ...], config: dict) -> Reading:
    """The first of a family's ``readings`` that matches a run's ``config``; a family's last
    reading matches anything (its variation)."""
    for r in readings:
        if r.matches(config):
            return r
    raise ValueError(f"no reading matches the run config {config!r}")


def run_configs(source) -> dict[str, dict]:
    """Each run's normalised config (``runs.config_json``), by run id, of a results folder or
    a build's ReportData (whose ``configs`` reads only the runs asked for)."""
    from .data import as_data

    data = as_data(source)
    return data.configs(data.runs_table.column("run_id").to_pylist())


@dataclass(frozen=True)
class Claim:
    """One paper claim and our measurement of it.

    paper: the source in a few words ("Tong et al. 2020, Fed-HT"); claim: the claim in one
    sentence; paper_value: the paper's number ("" when the claim is qualitative); ours: our
    number with seeds and spread ("84.1 ± 0.4 % over 3 seeds"); verdict: one of VERDICTS;
    where: the data set or setting measured; anchor: the id of the HTML element on the
    family's page that shows the measurement (the report turns it into a link); claim_kind:
    ``paper`` or ``derived``; reading, reading_kind, reading_description: the reading the
    measurement was made in (``in_reading`` sets them); same_runs_as: when this row repeats
    another reading's measurement (both readings generate the same data, which a sweep runs
    once), that reading's name: the index counts the two rows as one measurement.

    The evidence (``evidence.judge`` fills them): seeds, the number of seeds behind the row;
    interval, the measured quantity's 95 % interval as text ("" when unscored); tolerance, the
    claim at its tolerance; unmet, the requirements of the claim's setting the runs do not meet
    ("" when met); needs, the setting in words; stand_in, the declared stand-ins the runs used.
    """

    paper: str
    claim: str
    paper_value: str
    ours: str
    verdict: str
    where: str = ""
    anchor: str = ""
    claim_kind: str = PAPER_CLAIM
    reading: str = ""
    reading_kind: str = ""
    reading_description: str = ""
    same_runs_as: str = ""
    seeds: int = 0
    interval: str = ""
    tolerance: str = ""
    unmet: str = ""
    needs: str = ""
    stand_in: str = ""

    def __post_init__(self):
        if self.verdict not in VERDICTS:
            raise ValueError(f"claim verdict {self.verdict!r}: must be one of {VERDICTS}")
        if self.claim_kind not in CLAIM_KINDS:
            raise ValueError(f"claim kind {self.claim_kind!r}: must be one of {CLAIM_KINDS}")
        if self.reading_kind not in ("", *READING_KINDS):
            raise ValueError(f"reading kind {self.reading_kind!r}: must be one of {READING_KINDS}")


def in_reading(claims: list[Claim], reading: Reading) -> list[Claim]:
    """The claims, marked as measured in ``reading``; a claim measured on a declared stand-in
    is in that reading's stand-in variant (kind ``stand_in``), never the paper's own."""
    out = []
    for c in claims:
        name, kind, text = reading.name, reading.kind, reading.description
        if c.stand_in and kind != VARIATION:
            name, kind = f"{name}; {STAND_IN_PREFIX}{c.stand_in}", STAND_IN
            text += f" Stand-in: {c.stand_in}."
        out.append(replace(c, reading=name, reading_kind=kind, reading_description=text))
    return out


def require_evidence(claims: list[Claim]) -> list[Claim]:
    """The claims, a paper claim's scored verdict kept only when it was judged against its
    declared setting (``evidence.judge`` sets ``needs``); any other scored paper verdict is
    ``not at the paper's setting``: no family can state a paper verdict its runs do not
    carry. A scored paper claim measured in a variation reading (data of ours, not the
    paper's) becomes a row of kind ``variation``, never counted in the paper's tally."""
    out = []
    for c in claims:
        if c.claim_kind == PAPER_CLAIM and c.verdict in SCORED:
            if not c.needs:
                c = replace(c, verdict=NOT_AT_SETTING, unmet="the claim's setting is not declared")
            elif c.reading_kind == VARIATION:  # measured on data of ours: a variation row
                c = replace(c, claim_kind=VARIATION_CLAIM)
        out.append(c)
    return out


@dataclass(frozen=True)
class Family:
    """A family's page: ``key`` names the file (``key.html``), ``algorithms`` decide whether the
    results hold any of its runs, ``build`` writes the page and returns the claims.
    ``readings``: the family's readings, the paper's own first and a catch-all variation last;
    ``headline``: the paper's headline claims as (claim, paper's number, claim_kind) or
    (claim, paper's number, claim_kind, its ``evidence.Setting``), listed as not measured, with
    what their setting needs, when the results hold no run of the family; ``configs``: the
    config files that measure them."""

    key: str
    title: str
    paper: str
    algorithms: frozenset[str]
    build: Callable[..., list[Claim]] = field(compare=False)
    readings: tuple[Reading, ...] = ()
    headline: tuple[tuple, ...] = ()
    configs: str = ""

    def page_name(self) -> str:
        return f"{self.key}.html"

    def unmeasured(self) -> list[Claim]:
        """The headline claims, not measured: no run of this family in the results."""
        why = f"no runs of this family in these results; {self.configs} measures this"
        own = next((r for r in self.readings if r.kind != VARIATION), None)
        out = []
        for claim, value, kind, *setting in self.headline:
            needs = setting[0].describe() if setting else ""
            out.append(
                Claim(self.paper, claim, value, why, NOT_MEASURED, claim_kind=kind, needs=needs)
            )
        return in_reading(out, own) if own is not None else out


def claims_frame(claims: list[Claim], family: Family | None = None) -> pd.DataFrame:
    """The claims as the index's table, the paper's own readings first (stable otherwise);
    links point into the family's page."""
    rows = []
    for c in claims:
        link = ""
        if family is not None:
            link = family.page_name() + (f"#{c.anchor}" if c.anchor else "")
        rows.append({**vars(replace(c)), "link": link})
    df = pd.DataFrame(rows, columns=COLUMNS)
    rank = {k: i for i, k in enumerate(READING_KINDS)}
    key = df["reading_kind"].map(rank).fillna(len(rank))
    return df.iloc[key.argsort(kind="stable")].reset_index(drop=True)


def verdict_of(holds: bool | None) -> str:
    """agrees / does not agree / not measured here, from a test that may not have run."""
    if holds is None:
        return NOT_MEASURED
    return AGREES if holds else DISAGREES


def results_algorithms(source) -> set[str]:
    """The algorithms that have runs in a results folder or a build's ReportData."""
    from .data import as_data

    return as_data(source).algorithms()
