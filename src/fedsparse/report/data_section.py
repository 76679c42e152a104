"""The report's data section: how each partitioned data set was split, and test accuracy.

Reads what ``make_data`` leaves in ``RESULTS/data/<name>/``, each data set's latest build
(``partition_stats.csv``, ``embedding.csv``, ``meta.json``), and the traces'
``test_accuracy`` column. Data sets
without these files (e.g. the synthetic ones with their natural clients) are skipped,
so the report still builds from a results folder alone.
"""

from __future__ import annotations

import html
import json
from pathlib import Path

import numpy as np
import pandas as pd

from ..layout import Layout
from . import analysis
from .data import ReportData, as_data
from .figures import plt

SUMMARY_COLUMNS = [
    "dataset",
    "partition",
    "clients",
    "rows",
    "rows_mean",
    "rows_sd",
    "rows_min",
    "rows_max",
    "test_rows",
    "labels_per_client",
    "clusters_per_client",
]


def read_partition_stats(
    results_dirs: list[Path],
) -> dict[str, tuple[dict, pd.DataFrame, pd.DataFrame]]:
    """Per data set directory with partition statistics: (meta, stats, embedding or empty).
    A data set found in several results folders is taken from the first."""
    out = {}
    for results_dir in results_dirs:
        # each data set's latest build, by its name (not every build: data/<name>.<digest>)
        for name, d in Layout(results_dir).datasets_latest().items():
            if name in out or not (d / "partition_stats.csv").is_file():
                continue
            try:
                meta = json.loads((d / "meta.json").read_text())
            except (OSError, json.JSONDecodeError):
                meta = {}
            stats = pd.read_csv(d / "partition_stats.csv")
            emb = pd.read_csv(d / "embedding.csv") if (d / "embedding.csv").is_file() else None
            out[name] = (meta, stats, emb)
    return dict(sorted(out.items()))


def partition_summary(name: str, meta: dict, stats: pd.DataFrame) -> dict:
    """One data set's row of the report's partition summary table.

    Parameters
    ----------
    name
        The data set's name.
    meta
        Its data folder's ``meta.json`` (``{}`` if unreadable): the partition and test shape
        are read from it.
    stats
        Its ``partition_stats.csv``, one row per client (``rows``; ``test_rows``, ``labels``
        and ``clusters`` where present).

    Returns
    -------
    dict
        The data set, its partition label, clients, training rows (total, mean, population sd,
        min, max), test rows, and the mean labels and clusters per client (NaN where not
        recorded).
    """
    part = (meta.get("config") or {}).get("partition", "natural")
    if isinstance(part, dict):
        from ..training.config import partition_label

        part = partition_label(part)
    rows = stats["rows"]
    return {
        "dataset": name,
        "partition": part,
        "clients": len(stats),
        "rows": int(rows.sum()),
        "rows_mean": float(rows.mean()),
        "rows_sd": float(rows.std(ddof=0)),
        "rows_min": int(rows.min()),
        "rows_max": int(rows.max()),
        "test_rows": int(meta["test_shape"][0])
        if meta.get("test_shape")
        else int(stats["test_rows"].sum())
        if "test_rows" in stats
        else 0,
        "labels_per_client": float(stats["labels"].mean()) if "labels" in stats else np.nan,
        "clusters_per_client": float(stats["clusters"].mean()) if "clusters" in stats else np.nan,
    }


def embedding_figure(emb: pd.DataFrame, title: str):
    """t-SNE of a row sample, coloured by cluster (or label)."""
    if emb is None or emb.empty:
        return None
    fig, ax = plt.subplots(figsize=(6.2, 5.2))
    groups = sorted(emb["cluster"].unique())
    cmap = plt.get_cmap("tab10" if len(groups) <= 10 else "tab20")
    for k, g in enumerate(groups):
        e = emb[emb["cluster"] == g]
        ax.scatter(e["x"], e["y"], s=6, alpha=0.75, color=cmap(k % cmap.N), label=str(g))
    ax.set_title(f"t-SNE of {len(emb)} rows, coloured by cluster: {title}", fontsize=10)
    ax.set_xticks([])
    ax.set_yticks([])
    if len(groups) <= 20:
        ax.legend(title="cluster", fontsize=7, markerscale=2, loc="best", ncol=2)
    fig.tight_layout()
    return fig


def test_accuracy_table(source: ReportData | str | Path, a: analysis.Analysis) -> pd.DataFrame:
    """Final and best test accuracy of each algorithm's best configuration (mean over seeds):
    the trace rows of those runs only, read with SQL."""
    cols = ["section", "algorithm", "best_config", "final_test_accuracy", "max_test_accuracy"]
    if a.best.empty:
        return pd.DataFrame(columns=cols)
    chosen = a.runs[a.runs["config_id"].isin(a.best["config_id"])]
    rows = as_data(source).trace_rows(
        chosen["run_id"], ["round", "test_accuracy"], "test_accuracy IS NOT NULL"
    )
    t = rows.to_pandas()
    if t.empty:
        return pd.DataFrame(columns=cols)
    t["run_id"] = t["run_id"].astype(str)
    t = t.merge(chosen[["run_id", "section", "algorithm", "config_id"]], on="run_id")
    last = t.sort_values("round").groupby("run_id").tail(1)
    per = (
        last.groupby(["section", "algorithm", "config_id"])["test_accuracy"]
        .mean()
        .rename("final_test_accuracy")
        .to_frame()
        .join(
            t.groupby(["run_id", "section", "algorithm", "config_id"])["test_accuracy"]
            .max()
            .groupby(["section", "algorithm", "config_id"])
            .mean()
            .rename("max_test_accuracy")
        )
        .reset_index()
    )
    per = per.merge(a.best[["config_id", "config"]], on="config_id").rename(
        columns={"config": "best_config"}
    )
    return per[cols].sort_values(["section", "algorithm"]).reset_index(drop=True)


def add_data_section(
    page, data: ReportData, a: analysis.Analysis, tables: Path, data_dirs: list[Path] | None = None
) -> None:
    """Append the data and partition section to the report page; nothing if nothing to show.

    Writes ``partitions.csv``, ``partition_stats.csv`` and ``test_accuracy.csv`` to ``tables``
    where it has them.

    Parameters
    ----------
    page
        The report page appended to.
    data
        The results read.
    a
        The report's analysis (its best configurations' test accuracy is shown).
    tables
        The folder the section's CSV tables are written to.
    data_dirs
        Results folders whose data sets' partition statistics are shown (None: those of
        ``data``); a data set found in several is taken from the first.
    """
    found = read_partition_stats(data_dirs or data.folders)
    acc = test_accuracy_table(data, a)
    if not found and acc.empty:
        return
    page.add('<h2 id="data">Real data: partitions and test accuracy</h2>')
    if found:
        summary = pd.DataFrame(
            [partition_summary(n, m, s) for n, (m, s, _) in found.items()],
            columns=SUMMARY_COLUMNS,
        )
        summary.to_csv(tables / "partitions.csv", index=False)
        pd.concat(
            [s.assign(dataset=n) for n, (_, s, _) in found.items()], ignore_index=True
        ).to_csv(tables / "partition_stats.csv", index=False)
        page.text(
            "p",
            "How each partitioned data set was split into clients: training rows per "
            "client (mean, standard deviation, range; the papers report per-device mean / "
            "sd), held-out test rows, and the mean number of distinct labels (regression: "
            "quantile bins of y) and clusters per client.",
        )
        page.table(summary)
    for name, (_meta, stats, emb) in found.items():
        page.add(f'<h3 id="data-{html.escape(analysis.slugify(name))}">{html.escape(name)}</h3>')
        page.figure(
            embedding_figure(emb, name), f"embedding_{analysis.slugify(name)}", f"t-SNE, {name}"
        )
        page.add("<details><summary>Rows, labels and clusters per client</summary>")
        page.table(stats)
        page.add("</details>")
    if not acc.empty:
        acc.to_csv(tables / "test_accuracy.csv", index=False)
        page.text("h3", "Test accuracy of the best configurations")
        page.text(
            "p",
            "Accuracy of the global model on the held-out test split, for each algorithm's "
            "best configuration (by training objective): at the last round and the best "
            "over rounds, averaged over seeds.",
        )
        page.table(
            acc,
            {
                "final_test_accuracy": lambda v: f"{v:.4f}",
                "max_test_accuracy": lambda v: f"{v:.4f}",
            },
        )
