"""Building the report: the index, runs and fronts pages, each family's page (``families``),
written under a temporary name and swapped in whole (``build_report``; the layout is in the
package's docstring)."""

from __future__ import annotations

import datetime as _dt
import html
import tempfile
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from .. import __version__
from ..algorithms.registry import report_pages
from ..atomic import atomic_directory
from ..errors import FedsparseError
from ..layout import Layout
from ..lazy import LazyModule
from ..query import merge_results
from ..query.read import check_results_folder
from . import analysis as an
from . import pareto, tune_section
from .claims import (
    NOT_MEASURED,
    SCORED,
    VARIATION,
    VARIATION_CLAIM,
    Claim,
    Family,
    claims_frame,
    in_reading,
    require_evidence,
)
from .data import ReportData
from .data_section import add_data_section
from .figures import objective_figure
from .page import Page
from .verdicts import claims_section, measurements

_PAGES: list[Family] = []


def families() -> tuple[Family, ...]:
    """Each family's page, in the order of the index: the registry's (the built-in families by
    their ORDER, then any plugin's). A family names its page module in REPORT; the module
    defines FAMILY. Read on first use: a page imports this package's modules."""
    if not _PAGES:
        _PAGES.extend(LazyModule(module).FAMILY for module in report_pages())
    return tuple(_PAGES)


def build_report(
    results_dir: str | Path | Sequence[str | Path], out_dir: str | Path | None = None
) -> Path:
    """Write the comparison report of ``results_dir`` (one folder or several); return the
    path of its index.html."""
    if isinstance(results_dir, str | Path):
        results_dir = [results_dir]
    folders = [Path(f) for f in results_dir]
    if not folders:
        raise FedsparseError("no results folder given")
    if len(folders) > 1 and out_dir is None:
        out_dir = Path("report")
        # ./report is not inside a results folder: do not replace an unrelated folder
        if out_dir.is_dir() and any(out_dir.iterdir()) and not (out_dir / "index.html").exists():
            raise FedsparseError(f"{out_dir}: exists and is not a report; give -o REPORT_DIR")
    out_dir = Path(out_dir) if out_dir is not None else Layout(folders[0]).report
    out_dir = out_dir.absolute()
    for folder in folders:
        check_results_folder(folder)
    with atomic_directory(out_dir, mode=0o755) as tmp:
        if len(folders) == 1:
            _build(folders[0], tmp, folders)
        else:  # the union as one results folder, next to the report (it may be large)
            with tempfile.TemporaryDirectory(prefix=".merged-", dir=out_dir.parent) as merged:
                merge_results(folders, merged)
                _build(Path(merged), tmp, folders)
    return out_dir / "index.html"


def _build(results_dir: Path, root: Path, data_dirs: list[Path]) -> None:
    """The report of ``results_dir`` in ``root``; partition statistics from ``data_dirs``
    (the original folders: a merged folder has no data/)."""
    with ReportData(results_dir) as data:
        _build_pages(data, root, data_dirs)


def _build_pages(data: ReportData, root: Path, data_dirs: list[Path]) -> None:
    a = an.analyse(data)
    info = an.overview(a)
    summary = an.summary_table(a)
    tables = root / "tables"
    tables.mkdir()
    a.sections.drop(columns="slug").to_csv(tables / "datasets.csv", index=False)
    summary.to_csv(tables / "summary.csv", index=False)
    a.configs.drop(columns="config_id").to_csv(tables / "configs.csv", index=False)

    present = set(a.runs["algorithm"])
    fronts = pareto.configurations(data, a)  # data sets with more than one algorithm
    pages, claims = [], []
    for family in families():
        if not family.algorithms & present:  # its paper's claims, not measured here
            claims.append(claims_frame(family.unmeasured()))
            continue
        page = _subpage(root, family.title)
        found = only_in_variations(family, require_evidence(family.build(page, data, tables)))
        if not fronts.empty:
            slugs, names = pareto.sections_of(fronts, family.algorithms)
            if slugs:
                page.add(pareto.link(slugs, names))
        page.write(family.page_name(), family.title)
        claims.append(claims_frame(found, family))
        n = len(measurements(claims[-1]))
        pages.append((family.page_name(), family.title, f"{n} measurements of its claims"))
    claim_table = pd.concat(claims, ignore_index=True)
    claim_table.to_csv(tables / "claims.csv", index=False)

    page = _subpage(root, "Every data set: best configurations and objective curves")
    _runs_page(page, a, summary)
    page.write("runs.html", "Best configurations")
    pages.append(("runs.html", "Every data set: best configurations and objective curves", ""))
    if not fronts.empty:
        name = pareto.title(fronts)
        page = _subpage(root, f"{name}: fronts")
        pareto.add_page(page, fronts, tables, pareto.budget_fronts(data, a, fronts))
        page.write(pareto.PAGE, name)
        pages.append((pareto.PAGE, f"{name}: fronts", ""))
    page = _subpage(root, "Data: partitions and test accuracy")
    add_data_section(page, data, a, tables, data_dirs)
    if len(page.parts) > 2:  # more than the heading and the way back
        page.write("data.html", "Data")
        pages.append(("data.html", "Data: partitions and test accuracy", ""))
    page = _subpage(root, "Optuna studies")
    if tune_section.add_section(page, data, tables):
        page.write("optuna.html", "Optuna studies")
        pages.append(("optuna.html", "Optuna studies", ""))

    index = Page(root)
    _intro(index, info)
    front_slugs = {} if fronts.empty else dict(zip(fronts["section"], fronts["slug"], strict=True))
    claims_section(index.parts, claim_table, front_slugs)
    _contents(index, pages, present)
    _provenance(index, info)
    _footer(index)
    index.write("index.html", "fedsparse reproduction report: " + ", ".join(info["sweeps"]))


def only_in_variations(family: Family, claims: list[Claim]) -> list[Claim]:
    """The claims, plus a "not measured here" row in the paper's own reading for each paper
    claim that was measured only in a variation, so that the verdict in the paper's setting
    says so instead of being silent."""
    own = next((r for r in family.readings if r.kind != VARIATION), None)
    if own is None:
        return claims
    in_own = {c.claim for c in claims if c.reading_kind not in ("", VARIATION)}
    extra, seen = [], set()
    for c in claims:
        if c.reading_kind != VARIATION or c.claim in in_own or c.claim in seen:
            continue
        if c.claim_kind != VARIATION_CLAIM or c.verdict not in SCORED:
            continue
        seen.add(c.claim)
        why = (
            f"measured only in a variation ({c.reading}); {family.configs} runs the paper's reading"
        )
        row = Claim(c.paper, c.claim, c.paper_value, why, NOT_MEASURED, anchor=c.anchor)
        extra += in_reading([row], own)
    return extra + claims


def _subpage(root: Path, title: str) -> Page:
    page = Page(root)
    page.add('<p class="muted"><a href="index.html">← reproduction report</a></p>')
    page.text("h1", title)
    return page


def _intro(page: Page, info: dict) -> None:
    page.text("h1", "fedsparse reproduction report")
    now = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    page.text(
        "p",
        f"Sweep{'s' if len(info['sweeps']) > 1 else ''}: "
        f"{', '.join(info['sweeps'])}. {info['runs']} runs "
        f"({info['configs']} configurations) on {info['datasets']} data set"
        f"{'s' if info['datasets'] != 1 else ''}; {info['diverged']} run"
        f"{'s' if info['diverged'] != 1 else ''} diverged. "
        f"Report generated {now} by fedsparse {__version__}.",
    )


def _provenance(page: Page, info: dict) -> None:
    """Where the results come from: after the verdicts, which are what a reader came for."""
    page.add('<h2 id="provenance">Provenance</h2>')
    prov = pd.DataFrame(list(info["provenance"].items()), columns=["provenance", "value"])
    page.table(prov)


def _contents(page: Page, pages: list[tuple[str, str, str]], present: set[str]) -> None:
    page.add('<h2 id="pages">Pages</h2>')
    items = "".join(
        f'<li><a href="{html.escape(f)}">{html.escape(t)}</a>'
        + (f' <span class="muted">({html.escape(n)})</span>' if n else "")
        + "</li>"
        for f, t, n in pages
    )
    page.add(f"<ul>{items}</ul>")
    absent = [f.title for f in families() if not f.algorithms & present]
    if absent:
        page.text("p", "No runs here of: " + "; ".join(absent) + ".", "muted")


def _runs_page(page: Page, a: an.Analysis, summary: pd.DataFrame) -> None:
    page.text(
        "p",
        "An algorithm's best configuration is its hyperparameter setting with the lowest "
        "final objective averaged over seeds; a configuration with any diverged seed is not "
        "eligible. A run diverged (and ended) at the first round whose objective is not finite "
        "or exceeds divergence_factor (default 1000) times its round-0 objective. Non-finite "
        "objectives are dropped from means. The grid_edges column flags a best value that is "
        "the smallest or largest value searched: the best may lie beyond the grid.",
    )
    page.text("h3", "Data sets")
    overview = a.sections.rename(columns={"section": "data set"}).drop(columns=["slug", "dataset"])
    if (overview["center"] == "none").all():  # the papers' reading everywhere: no column
        overview = overview.drop(columns="center")
    page.table(overview)
    items = "".join(
        f'<li><a href="#ds-{html.escape(s.slug)}">{html.escape(s.section)}</a></li>'
        for s in a.sections.itertuples()
    )
    page.add(f"<nav><ul>{items}</ul></nav>")
    for sec in a.sections.itertuples():
        _section(page, a, sec, summary)


def _section(page: Page, a: an.Analysis, sec, summary: pd.DataFrame) -> None:
    name, slug = sec.section, sec.slug
    page.add(f'<h2 id="ds-{html.escape(slug)}">{html.escape(name)}</h2>')
    meta = [f"loss {sec.loss}"]
    if isinstance(sec.kind, str):
        meta.append(f"kind {sec.kind}" + (f" ({sec.task})" if isinstance(sec.task, str) else ""))
    if pd.notna(sec.alpha):
        meta.append(f"α = {sec.alpha:g}, β = {sec.beta:g}")
    meta.append(f"{sec.runs} runs, {sec.diverged} diverged")
    page.text("p", "; ".join(meta) + ".", "muted")

    page.text("h3", "Summary per algorithm")
    s = summary[summary["section"] == name].drop(columns="section")
    page.table(s, {"mean_train_time_s": lambda v: f"{v:.3g}"})
    for alg in s.loc[s["grid_edges"] != "", "algorithm"]:
        page.text("p", f"{an.label(alg)}: {an.edge_note(a, name, alg)}.", "note")
    for alg in s.loc[s["best_config"] == "all configurations diverged", "algorithm"]:
        page.text(
            "p",
            f"Every configuration of {an.label(alg)} diverged on this data set: "
            "it has no best configuration and no curve.",
            "note",
        )

    page.text("h3", "Objective of the best configurations")
    best = a.best[a.best["section"] == name]
    curves = a.curves[a.curves["section"] == name]
    fstar = float(a.fstar.get(name, float("nan")))
    fig = objective_figure(
        curves, dict(zip(best["algorithm"], best["config"], strict=True)), fstar, name
    )
    if fig is None:
        page.text(
            "p", "No algorithm has a valid configuration with a trace: nothing to plot.", "note"
        )
    page.figure(fig, f"objective_{slug}", f"objective curves, {name}")
    if fig is not None and curves.groupby("algorithm")["n"].max().max() <= 1:
        page.text("p", "A single seed per configuration: no min-max band.", "muted")


def _footer(page: Page) -> None:
    page.add("<h2>Notes</h2>")
    page.text(
        "p",
        "Verdicts: agrees (our measurement matches the paper's claim within the tolerance its "
        "page states), does not agree, not measured here (the claim needs runs or data these "
        "results do not have; the row says which), the paper makes no claim here (we measured "
        "a setting the paper states no claim for: not a refutation). f̂ is the lowest finite "
        "objective any run on a data set reached (every run, plotted or not): an estimate of "
        "f*, not the optimum, so the run that reached it drops to the clip at that round; "
        "f - f̂ is clipped at 1e-12 max(1, |f̂|) for the log axis. "
        "Bytes are the cumulative bytes sent up and down (dense vectors d x 8 bytes, sparse ones "
        "τ x 12 bytes). Tables are also in tables/*.csv, figures in figures/*.png. Heatmap "
        "colours span the best cell to 5 times it, or to the cells' 75th percentile where "
        "that is higher, so that a few blown-up cells do not flatten the rest; cells above "
        "take the top colour and are marked ▲.",
        "muted",
    )
