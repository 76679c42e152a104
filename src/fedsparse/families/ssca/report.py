"""The report's section for mini-batch SSCA and its SGD baseline: the paper's §6
claims checked on our numbers, training cost and test accuracy against rounds per batch size,
Algorithm 2's cost against U and its slack, and the trade-off curves of both algorithms. It
writes what ``analysis.py`` computes and ``figures.py`` draws, and declares the family's FAMILY;
the paragraphs below are the page's opening text.

Built from the traces only (``ssca``, ``ssca_constrained`` and ``fedavg`` rows), per data set.
"The paper's" SSCA runs are those with its schedule (the (a1, a2, alpha) of each B from its
table, gamma_extra = 0.05); each claim compares those at its own tau, lambda, c and U, or, where
none ran there, at the nearest value run, and its row says so. SGD at each (B, E) is its best
(stepsize, stepsize_decay) by mean final training cost, as the paper chose a-bar and alpha-bar
by grid search. "Faster convergence" (in communication rounds, the paper's measure) is a lower
final training cost after the same number of rounds for Algorithm 1, and for Algorithm 2 a
smaller mean distance |F(w_t) - U| over the evaluated rounds.

Every claim of the paper declares the evidence it needs (CLAIMS: MNIST, with Fashion-MNIST as
the declared stand-in; the paper's 784-128-10 network; T = 100; the hyperparameters it is stated
at; every method it names; 10 seeds) and is scored only from runs that meet it, as an ordering:
the difference the claim makes positive, with its 95 % interval over seeds (t on paired
per-seed differences, a bootstrap over seeds for a chain of several), agrees when the interval
lies above 0, does not agree when it lies below, and is inconclusive otherwise.
"""

from __future__ import annotations

import html
from pathlib import Path

import pandas as pd

from ...report.analysis import unique_slugs
from ...report.claims import (
    AGREES,
    DERIVED,
    DISAGREES,
    INCONCLUSIVE,
    NOT_AT_SETTING,
    NOT_MEASURED,
    PAPER_CLAIM,
    Claim,
    Family,
    in_reading,
)
from ...report.data import ReportData, as_data
from .analysis import ALGORITHM_1, ALGORITHM_2, CLAIMS, PAPER, READINGS, analyse, ssca_runs
from .figures import alg2_figure, curves_figure, tradeoff_figure

__all__ = ["FAMILY", "READINGS", "build"]

# the docstring after its first paragraph, printed at the top of the page (its line breaks as
# spaces)
CONVENTIONS = __doc__.split("\n\n", 1)[1].replace("\n", " ")

CLAIM_COLUMNS = [
    "claim",
    "claim_kind",
    "paper_value",
    "ours",
    "seeds",
    "interval",
    "tolerance",
    "verdict",
    "unmet",
    "needs",
    "stand_in",
]


def _counts(verdicts: pd.Series) -> str:
    """'2 agree, 1 does not, 3 inconclusive, 4 not at the paper's setting, 1 not measured
    here.' (the verdicts that occur)."""
    words = {
        AGREES: "agree",
        DISAGREES: "do not agree",
        INCONCLUSIVE: "inconclusive",
        NOT_AT_SETTING: "not at the paper's setting",
        NOT_MEASURED: "not measured here",
    }
    counts = verdicts.value_counts()
    said = [f"{int(counts[v])} {w}" for v, w in words.items() if counts.get(v, 0)]
    return (", ".join(said) or "no claims") + "."


def build(page, data: ReportData, tables: Path) -> list[Claim]:
    """Write the family's page and its claims table; return the paper's §VI claims.

    Parameters
    ----------
    page
        The page written (``report.page.Page``; headings from <h2>, with ids): the
        conventions, then per data set and reading its claims, Algorithm 1 against SGD,
        Algorithm 2's cost limit and slack, and the trade-off at B = 100.
    data
        The results (a ``ReportData``, or a results folder outside a build).
    tables
        The report's tables folder: ``ssca_claims.csv``, every claim row.

    Returns
    -------
    list of Claim
        Per data set and reading, each claim in its reading; NOT_MEASURED (with the reason)
        where the results cannot speak to one.
    """
    data = as_data(data)  # a results folder will do outside a build
    df = ssca_runs(data)
    page.text("p", CONVENTIONS, cls="muted")
    page.text(
        "p",
        "The paper prints no numbers (its figures did not survive the text): its "
        "claims are orderings read from Figs. 1-3, each scored only from runs at the setting "
        "it declares (needs), with the 95 % interval of the difference it makes positive over "
        "seeds; otherwise the row says what is unmet.",
        cls="note",
    )
    said = " ".join(f"{r.name} ({r.kind}): {r.description}" for r in READINGS)
    page.text("p", "Readings, recognised from each run's initial point. " + said, cls="muted")
    ours = df["algorithm"].isin([ALGORITHM_1, ALGORITHM_2])
    by_name = {r.name: r for r in READINGS}
    rank = {r.name: i for i, r in enumerate(READINGS)}
    groups = sorted(
        {(d, r) for d, r in zip(df.loc[ours, "dataset"], df.loc[ours, "reading"], strict=True)},
        key=lambda g: (rank[g[1]], g[0]),
    )  # the paper's reading first
    if not groups:
        page.text("p", "No SSCA runs in these results.", cls="note")
        return in_reading(analyse(data, df.iloc[0:0])["claims"], READINGS[0])
    several = pd.Series([d for d, _ in groups]).value_counts()
    titles = [d if several[d] == 1 else f"{d}: {r}" for d, r in groups]
    slugs = unique_slugs(titles)
    items = "".join(
        f'<li><a href="#ssca-{html.escape(slugs[t])}">{html.escape(t)}</a></li>' for t in titles
    )
    page.add(f"<nav><ul>{items}</ul></nav>")
    claims: list[Claim] = []
    for (dataset, name), title in zip(groups, titles, strict=True):
        rows = df[(df["dataset"] == dataset) & (df["reading"] == name)]
        slug = slugs[title]
        res = analyse(data, rows, where=dataset, slug=slug)
        res["claims"][:] = in_reading(res["claims"], by_name[name])
        claims += res["claims"]
        page.heading("h2", title, f"ssca-{slug}")
        page.text("p", f"Reading {name} ({by_name[name].kind}).", cls="muted")
        page.heading("h3", "The paper's claims", f"ssca-{slug}-claims")
        found = pd.DataFrame([vars(c) for c in res["claims"]])
        page.text("p", _counts(found["verdict"]), cls="muted")
        page.table(found[CLAIM_COLUMNS])
        page.heading("h3", "Algorithm 1 against SGD", f"ssca-{slug}-alg1")
        for name, frame in (("ssca_final", res["ssca_final"]), ("sgd_final", res["sgd_final"])):
            if len(frame):
                page.text(
                    "p",
                    "SSCA (lambda = 1e-5, the paper's schedule), final round, mean over seeds"
                    if name == "ssca_final"
                    else "SGD (fedavg), best step size per (B, E), final round, mean over seeds",
                )
                page.table(frame.dropna(axis=1, how="all"))
        for column, what in (("train_loss", "training cost"), ("test_accuracy", "test accuracy")):
            page.figure(
                curves_figure(
                    res["ssca_curves"],
                    res["sgd_curves"],
                    column,
                    f"{dataset}: {what}, SSCA (λ = 1e-5) vs SGD",
                ),
                f"ssca-{slug}-{column}",
                what,
            )
        page.heading("h3", "Algorithm 2: cost limit and slack", f"ssca-{slug}-alg2")
        if len(res["alg2_final"]):
            page.table(res["alg2_final"].dropna(axis=1, how="all"))
        else:
            page.text("p", "No Algorithm 2 runs on this data set.", cls="muted")
        fig = alg2_figure(res["alg2_curves"], f"{dataset}: Algorithm 2")
        page.figure(fig, f"ssca-{slug}-alg2", "alg2")
        page.heading("h3", "Trade-off at B = 100", f"ssca-{slug}-tradeoff")
        fig = tradeoff_figure(res["tradeoff"], f"{dataset}: trade-off at B = 100")
        if fig is None:
            page.text("p", "No runs at B = 100 with the paper's schedule.", cls="muted")
        page.figure(fig, f"ssca-{slug}-tradeoff", "trade-off")
    pd.DataFrame([vars(c) for c in claims]).to_csv(tables / "ssca_claims.csv", index=False)
    return claims


FAMILY = Family(
    key="ssca",
    title="Mini-batch SSCA",
    paper=PAPER,
    algorithms=frozenset({ALGORITHM_1, ALGORITHM_2}),
    build=build,
    readings=READINGS,
    headline=(
        *(
            (c.text, c.paper_value, PAPER_CLAIM, c.setting)
            for c in (CLAIMS["alg1 batch"], CLAIMS["alg1 sgd 10"], CLAIMS["tradeoff"])
        ),
        (
            "Algorithm 2: the training cost settles at the cost limit, F(w_T) = U with slack 0",
            "our expectation from Fig. 1(b), not the paper's claim",
            DERIVED,
        ),
    ),
    configs="config/ssca-quick.yaml",
)
