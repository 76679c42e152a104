"""The reproduction page's claims table, and the one interface a family's report section uses.

A family (hard thresholding, sFedHP, gradient sparsification, SSCA) is a ``Family``: a page of
its own in the report, built by ``build(page, results_dir, tables)``, which writes the family's
figures and tables into ``page`` and returns the paper claims it checked as ``Claim`` rows. The
report's index gathers every family's claims into one table with a link to the section that
measured each. The claims live next to the code that measures them; nothing else in the report
knows a family's algorithms.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import pandas as pd

__all__ = [
    "AGREES",
    "DISAGREES",
    "NOT_MEASURED",
    "VERDICTS",
    "Claim",
    "Family",
    "claims_frame",
    "results_algorithms",
    "verdict_of",
]

AGREES, DISAGREES, NOT_MEASURED = "agrees", "does not agree", "not measured here"
VERDICTS = (AGREES, DISAGREES, NOT_MEASURED)


@dataclass(frozen=True)
class Claim:
    """One paper claim and our measurement of it.

    paper: the source in a few words ("Tong et al. 2020, Fed-HT"); claim: the claim in one
    sentence; paper_value: the paper's number ("" when the claim is qualitative); ours: our
    number with seeds and spread ("84.1 ± 0.4 % over 3 seeds"); verdict: one of VERDICTS;
    where: the data set or setting measured; anchor: the id of the HTML element on the
    family's page that shows the measurement (the report turns it into a link).
    """

    paper: str
    claim: str
    paper_value: str
    ours: str
    verdict: str
    where: str = ""
    anchor: str = ""

    def __post_init__(self):
        if self.verdict not in VERDICTS:
            raise ValueError(f"claim verdict {self.verdict!r}: must be one of {VERDICTS}")


@dataclass(frozen=True)
class Family:
    """A family's page: ``key`` names the file (``key.html``), ``algorithms`` decide whether the
    results hold any of its runs, ``build`` writes the page and returns the claims."""

    key: str
    title: str
    paper: str
    algorithms: frozenset[str]
    build: Callable[..., list[Claim]] = field(compare=False)

    def page_name(self) -> str:
        return f"{self.key}.html"


def claims_frame(claims: list[Claim], family: Family | None = None) -> pd.DataFrame:
    """The claims as the index's table; links point into the family's page."""
    rows = []
    for c in claims:
        link = ""
        if family is not None:
            link = family.page_name() + (f"#{c.anchor}" if c.anchor else "")
        rows.append({**vars(replace(c)), "link": link})
    cols = ["paper", "claim", "where", "paper_value", "ours", "verdict", "anchor", "link"]
    return pd.DataFrame(rows, columns=cols)


def verdict_of(holds: bool | None) -> str:
    """agrees / does not agree / not measured here, from a test that may not have run."""
    if holds is None:
        return NOT_MEASURED
    return AGREES if holds else DISAGREES


def results_algorithms(results_dir: str | Path) -> set[str]:
    """The algorithms that have runs in a results folder (which family pages to build)."""
    from ..results import read_results, to_frame

    df = to_frame(read_results([results_dir], "SELECT DISTINCT algorithm FROM runs"))
    return set(df["algorithm"])
