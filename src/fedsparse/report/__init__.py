"""The comparison report of a results folder: one self-contained HTML page.

``build_report(RESULTS)`` reads ``RESULTS/runs.parquet`` and ``RESULTS/traces/``
and writes ``RESULTS/report/`` (or ``out_dir``). ``build_report([A, B, ...])`` reports on
the union of several results folders (merged as ``fedsparse merge`` does) into ``./report``
(or ``out_dir``)::

    index.html    every figure embedded as a base64 PNG, CSS inline, no external links
    figures/*.png the same figures as files
    tables/*.csv  the same tables (one file per table kind, with a section column)

The folder is built next to ``out_dir`` under a temporary name and swapped in
at the end, so a crash never leaves a half-written report.
"""

from __future__ import annotations

import base64
import datetime as _dt
import html
import io
import os
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from .. import __version__
from ..errors import FedsparseError
from ..query import merge_results
from ..results import check_results_folder
from . import analysis as an
from . import optuna_section, ssca_section
from .data_section import add_data_section
from .figures import DPI, heatmap_figure, noniid_figure, objective_figure, plt

__all__ = ["build_report"]

CSS = """
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; margin: 0 auto;
       max-width: 1180px; padding: 1.2em 2em 4em; color: #222; line-height: 1.45; }
h1 { margin-bottom: .2em; } h2 { border-bottom: 2px solid #ddd; padding-bottom: .2em;
     margin-top: 2.2em; } h3 { margin-top: 1.6em; }
table { border-collapse: collapse; margin: .6em 0 1em; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f2f2f2; } tr:nth-child(even) td { background: #fafafa; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
img { max-width: 100%; height: auto; border: 1px solid #eee; }
.note { background: #fff8e1; border-left: 4px solid #f0b400; padding: .4em .8em; }
.muted { color: #666; font-size: 90%; } ul.verdicts li { margin-bottom: .3em; }
nav ul { columns: 2; } code { background: #f4f4f4; padding: 0 3px; }
"""


class _Page:
    """Collects HTML fragments, figures and tables while the report is built."""

    def __init__(self, root: Path):
        self.root = root
        self.parts: list[str] = []
        self.figures: list[str] = []
        (root / "figures").mkdir(exist_ok=True)

    def add(self, fragment: str) -> None:
        self.parts.append(fragment)

    def text(self, tag: str, text: str, cls: str | None = None) -> None:
        attr = f' class="{cls}"' if cls else ""
        self.add(f"<{tag}{attr}>{html.escape(text)}</{tag}>")

    def figure(self, fig, name: str, alt: str) -> None:
        if fig is None:
            return
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=DPI)
        plt.close(fig)
        data = buf.getvalue()
        (self.root / "figures" / f"{name}.png").write_bytes(data)
        self.figures.append(name)
        b64 = base64.b64encode(data).decode("ascii")
        self.add(
            f'<figure><img alt="{html.escape(alt)}" src="data:image/png;base64,{b64}">'
            f'<figcaption class="muted">figures/{html.escape(name)}.png</figcaption>'
            "</figure>"
        )

    def table(self, df: pd.DataFrame, formats: dict | None = None) -> None:
        self.add(_html_table(df, formats or {}))


def _html_table(df: pd.DataFrame, formats: dict) -> str:
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in df.columns)
    body = []
    for row in df.itertuples(index=False):  # display rows only (a few per data set)
        cells = []
        for col, v in zip(df.columns, row, strict=True):
            fmt = formats.get(col)
            if fmt is not None and not _missing(v):
                text, num = fmt(v), True
            elif _missing(v):
                text, num = "", False
            elif isinstance(v, float | np.floating):
                text, num = f"{v:.4g}", True
            else:
                text = str(v)
                num = isinstance(v, int | np.integer) and not isinstance(v, bool | np.bool_)
            cls = ' class="num"' if num else ""
            cells.append(f"<td{cls}>{html.escape(text)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _missing(v) -> bool:
    try:
        return bool(pd.isna(v))
    except (TypeError, ValueError):
        return False


def _ratio(v: float) -> str:
    return "∞" if v == float("inf") else f"{v:.2f}x"


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
    out_dir = Path(out_dir) if out_dir is not None else folders[0] / "report"
    out_dir = out_dir.absolute()
    for folder in folders:
        check_results_folder(folder)
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.tmp-", dir=out_dir.parent))
    try:
        if len(folders) == 1:
            _build(folders[0], tmp, folders)
        else:  # the union as one results folder, next to the report (it may be large)
            with tempfile.TemporaryDirectory(prefix=".merged-", dir=out_dir.parent) as merged:
                merge_results(folders, merged)
                _build(Path(merged), tmp, folders)
        _swap_in(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return out_dir / "index.html"


def _swap_in(tmp: Path, out_dir: Path) -> None:
    os.chmod(tmp, 0o755)
    if not out_dir.exists():
        os.replace(tmp, out_dir)
        return
    old = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.old-", dir=out_dir.parent))
    os.rmdir(old)  # keep the unique name, free it for the rename
    os.replace(out_dir, old)
    try:
        os.replace(tmp, out_dir)
    except BaseException:
        os.replace(old, out_dir)
        raise
    shutil.rmtree(old, ignore_errors=True)


def _build(results_dir: Path, root: Path, data_dirs: list[Path]) -> None:
    """The report of ``results_dir`` in ``root``; partition statistics from ``data_dirs``
    (the original folders: a merged folder has no data/)."""
    a = an.analyse(results_dir)
    info = an.overview(a)
    summary = an.summary_table(a)
    r2t, r2t_notes = an.rounds_to_target(a)
    sens = an.grid_sensitivity(results_dir, a, r2t)
    cells = an.heatmap_table(a)
    noniid = an.noniid_table(a)
    sections = a.sections

    tables = root / "tables"
    tables.mkdir()
    sections.drop(columns="slug").to_csv(tables / "datasets.csv", index=False)
    summary.to_csv(tables / "summary.csv", index=False)
    r2t.to_csv(tables / "rounds_to_target.csv", index=False)
    sens.to_csv(tables / "grid_sensitivity.csv", index=False)
    cells.to_csv(tables / "heatmap.csv", index=False)
    noniid.to_csv(tables / "noniid.csv", index=False)
    a.configs.drop(columns="config_id").to_csv(tables / "configs.csv", index=False)
    page = _Page(root)

    _intro(page, a, info)
    for sec in sections.itertuples():
        _section(page, a, sec, summary, r2t, r2t_notes, cells)
        _grid_sensitivity(page, sens[sens["section"] == sec.section])
    _noniid(page, noniid)
    add_data_section(page, results_dir, a, tables, data_dirs)
    optuna_section.add_section(page, results_dir, tables)  # only for Optuna sweeps
    ssca_section.add_section(page, results_dir, tables)  # only with SSCA runs
    _footer(page)
    title = "fedsparse comparison report: " + ", ".join(info["sweeps"])
    doc = (
        f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{html.escape(title)}</title><style>{CSS}</style></head>\n<body>\n"
        + "\n".join(page.parts)
        + "\n</body></html>\n"
    )
    (root / "index.html").write_text(doc, encoding="utf-8")


def _intro(page: _Page, a: an.Analysis, info: dict) -> None:
    page.text("h1", "fedsparse comparison report")
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
    page.text(
        "p",
        "Algorithms: Fed-HT (fedht), FedIter-HT (fediterht) and the baseline "
        "Distributed-IHT (distiht). An algorithm's best configuration is its "
        "hyperparameter setting (step size, local steps, sparsity, batch size, "
        "batch growth) with the lowest final objective averaged over seeds; a "
        "configuration with any diverged seed is not eligible. A run diverged (and ended) "
        "at the first round whose objective is not finite or exceeds divergence_factor "
        "(default 1000) times its round-0 objective. Non-finite objectives "
        "are dropped from means. The grid_edges column flags a best value that is the smallest "
        "or largest value searched: the best may lie beyond the grid.",
    )
    prov = pd.DataFrame(list(info["provenance"].items()), columns=["provenance", "value"])
    page.table(prov)
    page.text("h3", "Data sets")
    overview = a.sections.rename(columns={"section": "data set"}).drop(columns=["slug", "dataset"])
    page.table(overview)
    items = "".join(
        f'<li><a href="#ds-{html.escape(s.slug)}">{html.escape(s.section)}</a></li>'
        for s in a.sections.itertuples()
    )
    page.add(
        f'<nav><ul>{items}<li><a href="#noniid">Effect of the non-IID level</a></li></ul></nav>'
    )


def _section(page, a, sec, summary, r2t, r2t_notes, cells) -> None:
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

    page.text("h3", "Rounds to reach Distributed-IHT's objective")
    t = r2t[r2t["section"] == name]
    if name in r2t_notes:
        page.text("p", r2t_notes[name], "note")
    elif not t.empty:
        r, target = int(t["R"].iloc[0]), float(t["target"].iloc[0])
        page.text(
            "p",
            f"Target: Distributed-IHT's mean objective at round {r} = {target:.6g}. "
            "For each algorithm's best configuration, the first evaluated round at "
            "which its mean objective is at or below the target, and R / that round.",
        )
        shown = t[
            [
                "algorithm",
                "best_config",
                "R",
                "rounds_to_target",
                "ratio",
                "claim_source",
                "claimed_ratio",
            ]
        ].copy()
        shown["rounds_to_target"] = (
            shown["rounds_to_target"].astype(object).where(t["reached"], "not reached")
        )
        shown["ratio"] = shown["ratio"].astype(object).where(t["reached"], "")
        page.table(
            shown,
            {
                "ratio": lambda v: _ratio(v) if isinstance(v, float) else v,
                "claimed_ratio": lambda v: f"≈{v:g}x",
            },
        )
        items = "".join(f"<li>{html.escape(v)}</li>" for v in t["verdict"])
        page.add(f'<ul class="verdicts">{items}</ul>')

    c = cells[cells["section"] == name]
    page.text("h3", "Final objective over step size and local steps")
    if c.empty:
        page.text("p", "Neither Fed-HT nor FedIter-HT was run on this data set.", "note")
        return
    page.figure(heatmap_figure(c, name), f"heatmap_{slug}", f"heatmaps, {name}")
    page.add("<details><summary>Heatmap values</summary>")
    page.table(
        c[
            [
                "algorithm",
                "stepsize",
                "local_steps",
                "cell",
                "configs",
                "valid_configs",
                "diverged_runs",
            ]
        ]
    )
    page.add("</details>")


def _grid_sensitivity(page: _Page, sens: pd.DataFrame) -> None:
    """The verdicts at the papers' step sizes and at ours, side by side (when ours has more)."""
    if sens.empty:
        return
    page.text("h3", "How the verdicts depend on the step-size grid")
    page.text(
        "p",
        "The same rounds-to-target comparison twice: with only the papers' step sizes (each "
        "algorithm's best configuration and Distributed-IHT's target chosen among them), and "
        "with every step size this sweep searched. A verdict that changes was drawn at the "
        "edge of the smaller grid.",
    )
    shown = sens.drop(columns="section").copy()
    shown["algorithm"] = shown["algorithm"].map(an.label)
    shown["rounds_to_target"] = shown["rounds_to_target"].astype(object).fillna("not reached")
    page.table(shown)


def _noniid(page: _Page, noniid: pd.DataFrame) -> None:
    page.add('<h2 id="noniid">Effect of the non-IID level</h2>')
    if noniid.empty:
        page.text("p", "No synthetic data sets with (α, β) levels in these results.", "note")
        return
    page.text(
        "p",
        "Synthetic data sets of the same task at different (α, β) are different "
        "data sets; α controls how much the clients' local models differ, β how "
        "much their local data differ. Each point is an algorithm's best final "
        "objective (mean over seeds). The papers report that higher non-IIDness "
        "slows both federated methods down.",
    )
    for (task, loss), t in noniid.groupby(["task", "loss"], sort=True):
        t = t.dropna(axis=1, how="all").reset_index(drop=True)
        title = f"{task} task, {loss} loss"
        page.text("h3", title)
        if len(t) < 2:
            page.text("p", "Only one (α, β) level: no trend to show.", "muted")
        page.figure(
            noniid_figure(t, title),
            f"noniid_{an.slugify(task)}_{an.slugify(loss)}",
            f"non-IID effect, {title}",
        )
        page.table(t.drop(columns=["task", "loss"]).rename(columns=an.LABELS))


def _footer(page: _Page) -> None:
    page.add("<h2>Notes</h2>")
    page.text(
        "p",
        "f* is the lowest finite objective seen on the data set across all runs; "
        "f - f* is clipped at 1e-12 max(1, |f*|) for the log axis. Bytes are the "
        "cumulative bytes sent up and down (dense vectors d x 8 bytes, sparse ones "
        "τ x 12 bytes). Agreement with a paper's claimed speed-up means the same "
        "direction and a ratio within a factor 1.5 of the claim. Tables are also in "
        "tables/*.csv, figures in figures/*.png. Heatmap colours span at most 4 decades above "
        "the best cell; larger (blown-up but finite) values take the top colour.",
        "muted",
    )
