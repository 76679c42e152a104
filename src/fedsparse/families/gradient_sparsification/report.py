"""The report's page for adaptive gradient sparsification (FAB-top-k and the online choice of
k): loss and test accuracy against normalised time for every method and k controller,
the k_m trajectories, the fairness view, the cross-application matrix of replayed k sequences,
and the paper's section-6 claims checked one by one.

The page writes what ``analysis`` measures and ``figures`` draws: per data set and reading,
every method at fixed k per exchange time beta (Fig. 4, the fairness view, each client's
contribution), the k controllers (Figs. 5-7), the replayed sequences' cross-application, and
per reading the headline; it defines the family's ``FAMILY``. ``analysis``'s docstring says
how the comparisons are made and the claims scored.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ...report.analysis import slugify
from ...report.claims import PAPER_CLAIM, Claim, Family
from ...report.data import ReportData, as_data
from ...report.page import Page
from . import analysis as gs_analysis
from .analysis import GS, PAPER, READINGS
from .figures import curves_figure, fairness_figure, k_figure
from .paper_claims import CLAIMS, HORIZON_ROUNDS, n_params

# n_params is paper_claims': re-exported for the callers that count a run's D through the page
__all__ = ["FAMILY", "READINGS", "build", "n_params"]


def _needs(page: Page, row: Claim) -> None:
    """The page's line on what a section's claims need and what is unmet here."""
    said = f"{row.claim.split(' (')[0]}: scored at the paper's setting only ({row.needs})"
    said += f"; unmet here: {row.unmet}." if row.unmet else "; met here."
    page.text("p", said, "muted")


def _fixed_section(page, reader, runs, ds, slug, n_clients, claims, tables):
    """Fig. 4: every method at fixed k, per beta (``runs``: the data set's, with their values
    at the budget)."""
    for beta, at in runs[runs["part"] == "fixed"].groupby("exchange_time"):
        anchor = f"gs-{slug}-fixed-{beta:g}"
        page.heading("h3", f"Every method at fixed k, beta = {beta:g}", anchor)
        budget = float(at["budget"].iloc[0])
        best = gs_analysis.best_configs(at)
        page.text("p", f"Time budget {budget:.4g}; each method at its best configuration.", "muted")
        shown = best.drop(columns=["runs"]).dropna(axis=1, how="all")
        page.table(shown)
        best.drop(columns=["runs"]).assign(dataset=ds, beta=beta).to_csv(
            tables / f"gs_fixed_{slug}_{beta:g}.csv", index=False
        )
        rows = reader.rows(at[at["run_id"].isin(gs_analysis.best_runs(best))])
        page.figure(
            curves_figure(rows, best, budget, f"{ds}, beta = {beta:g}: fixed k"),
            f"gs-{slug}-fixed-{beta:g}",
            "loss and accuracy against time",
        )
        ks = ", ".join(str(int(k)) for k in sorted(set(best.get("k", pd.Series()).dropna())))
        where = f"{ds}, beta = {beta:g}, k = {ks}"
        if gs_analysis.FAB in set(best["method"]):
            row = gs_analysis.judge_fig4(at, best, claims, where, anchor)
            if row is not None:
                _needs(page, row)
        fixed = at[~at["algorithm"].isin(gs_analysis.BASELINES)]
        _fairness(page, reader.fairness(fixed), ds, slug, beta, n_clients, tables)
        fair = fixed.dropna(subset=["shared_min"])
        gs_analysis.judge_fairness(fair, n_clients, claims, where, f"gs-{slug}-fair-{beta:g}")
        contributions = gs_analysis.client_contributions(reader.data, gs_analysis.best_runs(best))
        per_client = gs_analysis.contribution_table(best, contributions)
        if not per_client.empty:
            per_client.assign(dataset=ds, beta=beta).to_csv(
                tables / f"gs_clients_{slug}_{beta:g}.csv", index=False
            )
            page.add("<details><summary>Per-client contributions (mean over seeds)</summary>")
            page.table(per_client, {c: (lambda v: f"{v:.3g}") for c in per_client.columns[1:]})
            page.add("</details>")


def _fairness(page, counts, ds, slug, beta, n_clients, tables) -> None:
    """The fairness table and figure at one beta (``counts``: the fixed-k runs'
    :meth:`analysis.GsTraces.fairness`)."""
    anchor = f"gs-{slug}-fair-{beta:g}"
    table = gs_analysis.fairness_table(counts, n_clients)
    if table.empty:
        return
    page.heading("h3", f"Fairness, beta = {beta:g}", anchor)
    page.text(
        "p",
        "Per evaluated round (the trace keeps the fairness view of the round that "
        "produced each evaluated model): min over clients of |J ∩ J_i| and the clients "
        "with none of their offer applied.",
        "muted",
    )
    page.table(table)
    table.assign(dataset=ds, beta=beta).to_csv(tables / f"gs_fair_{slug}_{beta:g}.csv", index=False)
    page.figure(
        fairness_figure(counts, f"{ds}, beta = {beta:g}: fairness"),
        f"gs-{slug}-fair-{beta:g}",
        "fairness view",
    )


def _controller_section(page, reader, runs, ds, slug, claims, tables):
    """Figs. 5-7: the k controllers, per beta, and the replayed sequences."""
    fig = k_figure(gs_analysis.k_runs(reader, runs), f"{ds}: k_m trajectories")
    if fig is not None:
        page.heading("h3", "k_m trajectories", f"gs-{slug}-k")  # claims link here
    page.figure(fig, f"gs-{slug}-k", "k_m trajectories")
    lates: dict[float, tuple[list[float], list[str]]] = {}
    for beta, at in runs[runs["part"] == "online"].groupby("exchange_time"):
        anchor = f"gs-{slug}-online-{beta:g}"
        page.heading("h3", f"k chosen online, beta = {beta:g}", anchor)
        budget = float(at["budget"].iloc[0])
        online = gs_analysis.online_best(reader, at)
        best = online.best
        page.text(
            "p",
            f"Time budget {budget:.4g}. k stability: std of log k_m over the second "
            "half of the evaluated rounds (lower: steadier). The controllers' claims need "
            f"Algorithm 3's runs to cover {HORIZON_ROUNDS:,} rounds within the budget.",
            "muted",
        )
        page.table(best.drop(columns=["runs"]).dropna(axis=1, how="all"))
        best.drop(columns=["runs"]).assign(dataset=ds, beta=beta).to_csv(
            tables / f"gs_online_{slug}_{beta:g}.csv", index=False
        )
        page.figure(
            curves_figure(online.rows, best, budget, f"{ds}, beta = {beta:g}: online k"),
            f"gs-{slug}-online-{beta:g}",
            "loss and accuracy, online k",
        )
        where = f"{ds}, beta = {beta:g}"
        stated, late = gs_analysis.judge_controllers(at, online, claims, where, anchor)
        if late is not None:
            lates[beta] = late
        for row in stated:
            _needs(page, row)
    if len(lates) >= 2:
        gs_analysis.judge_fig7_k(runs, lates, claims, ds, f"gs-{slug}-k")


def _cross_section(page, runs, ds, slug, claims, tables):
    """Fig. 7's cross-application: each learned sequence replayed at each beta."""
    replays = runs[runs["part"] == "replay"]
    matrix = gs_analysis.cross_matrix(replays)
    anchor = f"gs-{slug}-cross"
    if matrix.empty:
        gs_analysis.judge_cross(replays, matrix, claims, ds, f"gs-{slug}")
        return
    page.heading("h3", "Cross-application of the learned k sequences", anchor)
    page.text(
        "p",
        "Rows: the beta a k sequence was learned at (Algorithm 3's run); columns: "
        "the beta it was replayed at; cell: the mean training loss at the column's time "
        "budget. The diagonal should be each column's lowest.",
        "muted",
    )
    shown = matrix.reset_index().rename(
        columns=lambda c: f"run at {c:g}" if isinstance(c, float) else c
    )
    page.table(shown)
    matrix.to_csv(tables / f"gs_cross_{slug}.csv")
    _needs(page, gs_analysis.judge_cross(replays, matrix, claims, ds, anchor))


def build(page: Page, data: ReportData, tables: Path) -> list[Claim]:
    """Write the family's page.

    Parameters
    ----------
    page
        Where the page's sections go.
    data
        The build's results reader (a results folder will do outside a build).
    tables
        Where the page's tables go as CSV (gs_claims.csv: the claim rows).

    Returns
    -------
    list of Claim
        The paper's claims as measured here, each judged against the setting it declares
        (``paper_claims.CLAIMS``) in the reading its runs are in, the paper's reading first.
    """
    data = as_data(data)  # a results folder will do outside a build
    readings = gs_analysis.READINGS  # those the runs are recognised by (a test sets its own)
    runs = gs_analysis.gs_runs(data)
    claims = gs_analysis.ClaimRows()
    page.text("p", __doc__.split("\n\n", 1)[0].replace("\n", " "), "muted")
    page.text(
        "p",
        "The paper trains a CNN on FEMNIST (156 writers); its claims are scored from the "
        "stand-ins each declares (Fashion-MNIST over 156 Dirichlet label-skew clients, the "
        "784-100-10 MLP) as the stand-in reading, never as the paper's own setting, and "
        "from runs that meet the rest of its setting only.",
        "note",
    )
    said = " ".join(f"{r.name} ({r.kind}): {r.description}" for r in readings)
    page.text("p", "Readings, recognised from each run's config. " + said, "muted")
    if runs.empty:
        return []
    clients = gs_analysis.client_counts(data)
    runs, reader = gs_analysis.measured(data, runs)
    by_name = {r.name: r for r in readings}
    several = runs.groupby("dataset")["reading"].nunique() > 1
    for reading in readings:  # the paper's reading first
        claims.reading, claims.gains = reading, []
        mine = runs[runs["reading"] == reading.name]
        for ds, rows in mine.groupby("dataset", sort=True):
            slug = slugify(ds)
            title = ds
            if several[ds]:  # one section per reading of this data set
                slug += f"-{readings.index(by_name[reading.name])}"
                title = f"{ds}: {reading.name}"
            page.heading("h2", title, f"gs-{slug}")
            page.text("p", f"Reading {reading.name} ({reading.kind}).", "muted")
            n_clients = clients.get(ds)
            _fixed_section(page, reader, rows, ds, slug, n_clients, claims, tables)
            _controller_section(page, reader, rows, ds, slug, claims, tables)
            _cross_section(page, rows, ds, slug, claims, tables)
        if len(mine):  # the index says when the paper's reading has no runs (only_in_variations)
            _headline(page, claims, reading, readings.index(reading))
    pd.DataFrame([vars(c) for c in claims.rows]).to_csv(tables / "gs_claims.csv", index=False)
    return claims.rows


def _headline(page, claims: gs_analysis.ClaimRows, reading, number: int) -> None:
    """The headline's section for one reading (the ``number``-th): the comparisons it may be
    drawn from, and its row (:func:`analysis.judge_headline`)."""
    anchor = f"gs-headline-{number}"
    page.heading("h2", f"Headline: accuracy at a fixed training time ({reading.name})", anchor)
    if claims.gains:
        page.table(gs_analysis.gains_table(claims), {"relative accuracy gain": gs_analysis.pct})
    gs_analysis.judge_headline(claims, anchor)


FAMILY = Family(
    key="gs",
    title="Adaptive gradient sparsification (FAB-top-k)",
    paper=PAPER,
    algorithms=frozenset(GS),
    build=build,
    readings=READINGS,
    headline=(
        (CLAIMS["fig4_loss"].text, "", PAPER_CLAIM, CLAIMS["fig4_loss"].setting()),
        (CLAIMS["fig5_loss"].text, "", PAPER_CLAIM, CLAIMS["fig5_loss"].setting()),
        (
            CLAIMS["headline"].text,
            CLAIMS["headline"].value,
            PAPER_CLAIM,
            CLAIMS["headline"].setting(),
        ),
    ),
    configs="config/gs-quick.yaml",
)
