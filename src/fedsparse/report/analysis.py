"""Compute what the report shows from a build's ReportData (no plotting, no HTML): what every
family's page and the index share. A family's own analysis sits beside its page, in the
family's folder.

The runs are vectorised with pandas (one row per run); the traces never enter pandas whole:
SQL gives each run's lowest objective and the rows of the best configurations, whose curves
are averaged here. The only Python loops run over data sets and algorithms, never over runs
or trace rows. An analysis is computed once per build and step-size grid (``ReportData.memo``).

Definitions used throughout:

* a *section* is a data set (suffixed with its loss / partition when one data set
  was run with several, so that objectives in a section are comparable);
* a *configuration* is a setting of the hyperparameter columns (grouped with
  ``dropna=False``); its seeds are averaged;
* a configuration is *valid* if none of its runs diverged and at least one of
  them has a finite final objective; an algorithm's *best configuration* is its
  valid configuration with the lowest mean final objective (non-finite values
  are dropped from means); its ``grid_edges`` name the hyperparameters whose value is
  the smallest or largest of the algorithm's configurations on the section
  (fedsparse.query.grid_edges).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from ..algorithms import ALGORITHMS
from ..query.grid_edges import EDGE_COLUMNS, edge_warning, edges_text, grid_edges
from ..results.schema import HYPERPARAMETER_COLUMNS, RUNS_SCHEMA, to_frame
from .data import ReportData, as_data

HP = list(HYPERPARAMETER_COLUMNS)
# display names the algorithms declare (Algorithm.label); the others show their names, as do
# those whose label only their family's page uses (Algorithm.shared_pages_by_name)
LABELS = {
    name: cls.label
    for name, cls in ALGORITHMS.items()
    if cls.label and not cls.shared_pages_by_name
}
# Algorithm.report_order: the algorithms that declare one lead the report's tables and figures
# in that order (a family's baseline before its methods); every other follows by name.
RANKED = {name: c.report_order for name, c in ALGORITHMS.items() if c.report_order is not None}
ORDER = tuple(sorted(RANKED, key=lambda name: (RANKED[name], name)))
TRACE_COLUMNS = ["run_id", "round", "local_iterations", "objective", "bytes_up", "bytes_down"]
# The runs columns the analysis keeps besides the hyperparameters (and the config fact center).
RUN_COLUMNS = (
    "run_id",
    "sweep",
    "dataset",
    "partition",
    "algorithm",
    "loss",
    "model",
    "seed",
    "status",
    "final_objective",
    "best_objective",
    "train_time_s",
    "dataset_kind",
    "dataset_task",
    "data_alpha",
    "data_beta",
    "finished_at",
    "trial_state",
    "fedsparse_version",
    "git_commit",
    "host",
    "python_version",
    "numpy_version",
    "numba_version",
    "center",
)
STRING_COLUMNS = (
    "run_id",
    "sweep",
    "dataset",
    "partition",
    "algorithm",
    "loss",
    "status",
    "dataset_kind",
    "dataset_task",
)


def label(algorithm: str) -> str:
    return LABELS.get(algorithm, algorithm)


def symbol(algorithm: str, hyperparameter: str) -> str:
    """How the algorithm's declarations write a hyperparameter: the symbol its config_label
    gives it, else its declared symbol, else its name."""
    cls = ALGORITHMS.get(algorithm)
    named = dict(cls.config_label or ()) if cls else {}
    declared = {h.name: h.symbol for h in cls.hyperparameters} if cls else {}
    return named.get(hyperparameter) or declared.get(hyperparameter) or hyperparameter


def _value(v, full_ok: bool = False) -> str:
    if full_ok and pd.isna(v):
        return "full"
    return f"{v:g}" if isinstance(v, float | int | np.number) else str(v)


def algorithm_order(algorithms) -> list[str]:
    known = [a for a in ORDER if a in set(algorithms)]
    return known + sorted(set(algorithms) - set(ORDER))


def slugify(name: str) -> str:
    """A file-name-safe version of ``name`` (letters, digits, '.', '_', '-')."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "_", str(name)).strip("._-")[:80]
    return slug or "unnamed"


def unique_slugs(names: list[str]) -> dict[str, str]:
    """Sanitised, pairwise distinct slugs (a short hash disambiguates collisions)."""
    slugs = {n: slugify(n) for n in names}
    counts = pd.Series(list(slugs.values())).value_counts()
    for n, s in slugs.items():
        if counts[s] > 1:
            slugs[n] = f"{s}-{hashlib.sha1(n.encode()).hexdigest()[:8]}"
    return slugs


def best_per_group(
    configs: pd.DataFrame, by: list[str], score: str, better: str = "lower"
) -> pd.DataFrame:
    """Each group's best configuration: the one rule every page picks "the best configuration
    over seeds" by.

    Parameters
    ----------
    configs
        One row per configuration, ``score`` its mean over seeds.
    by
        The columns that make a group (an algorithm, a batch size, ...).
    score
        The column ranked.
    better
        ``"lower"`` or ``"higher"``: which end of ``score`` wins.

    Returns
    -------
    pandas.DataFrame
        One row of ``configs`` per group that has a score, best first (its index kept). A
        missing score never wins; of equal scores, the row that comes first in ``configs``.
    """
    if better not in ("lower", "higher"):
        raise ValueError(f"better must be 'lower' or 'higher', not {better!r}")
    ranked = configs.dropna(subset=[score])
    key = ranked[score].astype(float)
    order = (key if better == "lower" else -key).sort_values(kind="stable").index
    return ranked.loc[order].drop_duplicates(by)


def config_label(row: pd.Series, algorithm: str | None = None) -> str:
    """Short human-readable hyperparameter setting, e.g. 'γ=0.01, K=5, τ=200, b=10': the
    hyperparameters the algorithm's declarations name (Algorithm.config_label, else every
    declared one by its symbol or name). An algorithm no longer registered: every
    hyperparameter its runs set, by name."""
    cls = ALGORITHMS.get(algorithm)
    if cls is None:
        return ", ".join(f"{c}={_value(row.get(c))}" for c in HP if pd.notna(row.get(c)))
    declared = {h.name: h for h in cls.hyperparameters}
    named = cls.config_label or tuple((h.name, h.symbol or h.name) for h in cls.hyperparameters)
    parts = []
    for name, written in named:
        h, value = declared.get(name), row.get(name)
        if h is None or not (pd.notna(value) or h.full_ok):
            continue
        if h.label_omits_default and pd.notna(value) and value == h.default:
            continue
        parts.append(f"{written}={_value(value, h.full_ok)}")
    return ", ".join(parts)


@dataclass
class Analysis:
    runs: pd.DataFrame  # one row per run, with 'section' and 'config_id' (RUN_COLUMNS and
    # the hyperparameters some run sets; configs has them all)
    sections: pd.DataFrame  # one row per section: dataset, loss, kind, task, alpha, beta, slug
    configs: pd.DataFrame  # one row per configuration: stats over its seeds
    best: pd.DataFrame  # one row per (section, algorithm) that has a valid configuration
    curves: pd.DataFrame  # best configurations' seed-averaged traces
    fstar: pd.Series  # lowest finite objective per section, over all runs
    data: ReportData | None = None  # what it was computed from (run configs, traces)
    # the best configurations' traces per seed (section, algorithm, run_id, round, objective,
    # local_iterations): what an interval over seeds resamples
    seed_traces: pd.DataFrame | None = None


# ---------------------------------------------------------------------------- reading


def read_runs(source: ReportData | str | Path) -> pd.DataFrame:
    """The runs the report compares (grid runs and Optuna's held-out re-runs), with the
    report's defaults for missing labels, by run id: the report is a function of what the
    runs hold, not of when they finished (a mean over seeds summed in finish order differed
    in its last bits between two sweeps of the same runs)."""
    # RUN_COLUMNS (older files: as the current schema; fedsparse.query.read) and the
    # hyperparameters set in some run: a million runs of a few hyperparameters would hold
    # dozens of columns of nulls otherwise
    data = as_data(source)
    unset = data.unset_columns()
    runs = data.run_frame([*RUN_COLUMNS, *(c for c in HP if c not in unset)])
    for col in STRING_COLUMNS:
        runs[col] = runs[col].astype(str).where(runs[col].notna(), None)
    runs["dataset"] = runs["dataset"].fillna("unknown")
    runs["algorithm"] = runs["algorithm"].fillna("unknown")
    runs["loss"] = runs["loss"].fillna("unknown")
    runs["partition"] = runs["partition"].fillna("natural")
    for col in ("final_objective", "best_objective", "train_time_s", "data_alpha", "data_beta"):
        runs[col] = pd.to_numeric(runs[col], errors="coerce").astype(float)
    runs = runs.sort_values("run_id", kind="stable")
    # Optuna trials are searches, not comparable runs (pruned ones are partial): the
    # comparison takes their best configurations' held-out re-runs (trial_state HOLDOUT)
    runs = runs[runs["trial_state"].isna() | runs["trial_state"].eq("HOLDOUT")]
    return runs.reset_index(drop=True)  # each run once (fedsparse.query.read: one folder)


def read_traces(source: ReportData | str | Path, run_ids: pd.Series) -> pd.DataFrame:
    """The trace rows of ``run_ids`` (only the columns the report needs), by run and round:
    read with SQL, never the whole traces table."""
    table = as_data(source).trace_rows(run_ids, TRACE_COLUMNS)
    t = table.to_pandas()
    t["run_id"] = t["run_id"].astype(str)
    for col in ("local_iterations", "bytes_up", "bytes_down", "objective"):
        t[col] = pd.to_numeric(t[col], errors="coerce").astype(float)
    t["round"] = pd.to_numeric(t["round"], errors="coerce")
    return t.dropna(subset=["round"]).astype({"round": "int64"})


# ---------------------------------------------------------------------------- analysis


def analyse(source: ReportData | str | Path, stepsizes: set[float] | None = None) -> Analysis:
    """The analysis of a results folder (or a build's ReportData); with ``stepsizes``, of the
    runs at those step sizes only (and those without one), as if the grid had been that
    smaller one. Traces are read with SQL: each run's lowest objective (for f-hat) and the
    rows of the best configurations only (for their curves)."""
    data = as_data(source)
    key = ("analyse", None if stepsizes is None else frozenset(stepsizes))
    if key not in data.memo:  # pages ask for the same analysis: computed once per build
        data.memo[key] = _analyse(data, stepsizes)
    return data.memo[key]


def _analyse(data: ReportData, stepsizes: set[float] | None) -> Analysis:
    runs = read_runs(data)
    if stepsizes is not None and "stepsize" in runs:
        runs = runs[runs["stepsize"].isna() | runs["stepsize"].isin(stepsizes)]
        runs = runs.reset_index(drop=True)
    runs = _add_sections(runs)
    sections = _sections(runs)

    keys = ["section", "algorithm", *(c for c in HP if c in runs)]  # unset ones: all null
    runs["config_id"] = runs.groupby(keys, dropna=False, sort=False).ngroup()
    fin = runs["final_objective"].where(np.isfinite(runs["final_objective"]))
    r = runs.assign(_fin=fin, _div=runs["status"].eq("diverged"))
    g = r.groupby("config_id", sort=True)
    configs = (
        g[keys]
        .first()
        .join(
            g.agg(
                runs=("run_id", "size"),
                seeds=("seed", "nunique"),
                diverged=("_div", "sum"),
                finite=("_fin", "count"),
                mean_final=("_fin", "mean"),
                sd_final=("_fin", "std"),
                train_time_s=("train_time_s", "mean"),
            )
        )
        .reset_index()
    )
    for col in HP:  # first() skips nulls: a key that is null in every run stays null
        configs[col] = configs[col].astype(runs[col].dtype) if col in runs else _nulls(col, configs)
    stats = [c for c in configs.columns if c not in ("config_id", *keys, *HP)]
    configs = configs[["config_id", "section", "algorithm", *HP, *stats]]
    configs["valid"] = configs["diverged"].eq(0) & configs["mean_final"].notna()
    configs["config"] = [
        config_label(row, algo)
        for algo, (_, row) in zip(configs["algorithm"], configs[HP].iterrows(), strict=True)
    ]

    best = (
        best_per_group(configs[configs["valid"]], ["section", "algorithm"], "mean_final")
        .sort_values(["section", "algorithm"])
        .reset_index(drop=True)
    )
    best["grid_edges"] = _edges(configs, best)

    minima = data.run_minima().merge(runs[["run_id", "section"]], on="run_id")
    fstar = minima.groupby("section")["objective_min"].min().dropna().rename("objective")

    chosen = runs[runs["config_id"].isin(best["config_id"])]
    traces = read_traces(data, chosen["run_id"])
    traces = traces.merge(chosen[["run_id", "section", "algorithm", "config_id"]], on="run_id")
    sel = traces[np.isfinite(traces["objective"])]
    sel = sel.assign(bytes=sel["bytes_up"] + sel["bytes_down"])
    curves = (
        sel.groupby(["section", "algorithm", "round"], sort=True)
        .agg(
            mean=("objective", "mean"),
            min=("objective", "min"),
            max=("objective", "max"),
            n=("objective", "size"),
            local_iterations=("local_iterations", "mean"),
            bytes=("bytes", "mean"),
        )
        .reset_index()
    )
    cols = ["section", "algorithm", "run_id", "round", "objective", "local_iterations"]
    return Analysis(runs, sections, configs, best, curves, fstar, data, sel[cols])


def _nulls(column: str, like: pd.DataFrame) -> pd.Series:
    """A runs column that no run sets, as read_runs would have read it, beside ``like``."""
    typ = RUNS_SCHEMA.field(column).type
    return to_frame(pa.table({column: pa.nulls(len(like), typ)}))[column].set_axis(like.index)


def _edges(configs: pd.DataFrame, best: pd.DataFrame) -> list[str]:
    """Each best configuration's grid edges against every configuration of its algorithm
    on its section (diverged ones too: they were searched)."""
    groups = configs.groupby(["section", "algorithm"])
    out = []
    for _, row in best.iterrows():  # one per section and algorithm
        searched = groups.get_group((row["section"], row["algorithm"]))
        out.append(edges_text(grid_edges(row, {c: searched[c] for c in EDGE_COLUMNS})))
    return out


def edge_note(a: Analysis, section: str, algorithm: str) -> str:
    """The warning that a best configuration lies at an edge of its grid, or ``''``.

    Parameters
    ----------
    a
        The report's analysis.
    section
        The section (data set, and loss or partition where several) of the configuration.
    algorithm
        Its algorithm.

    Returns
    -------
    str
        E.g. ``'stepsize at the lower edge of the grid: extend it'``; ``''`` when the
        configuration is at no edge or ``a.best`` has no row for it.
    """
    hit = a.best[(a.best["section"] == section) & (a.best["algorithm"] == algorithm)]
    flags = hit["grid_edges"].iloc[0] if len(hit) else ""
    return edge_warning(flags.split("; ")) if flags else ""


def _add_sections(runs: pd.DataFrame) -> pd.DataFrame:
    section = runs["dataset"].copy()
    for col in ("loss", "partition"):
        several = runs.groupby("dataset")[col].transform("nunique") > 1
        section = section.where(~several, section + " [" + runs[col] + "]")
    return runs.assign(section=section)


def _sections(runs: pd.DataFrame) -> pd.DataFrame:
    g = runs.groupby("section", sort=True)
    sec = g.agg(
        dataset=("dataset", "first"),
        loss=("loss", "first"),
        kind=("dataset_kind", "first"),
        task=("dataset_task", "first"),
        alpha=("data_alpha", "first"),
        beta=("data_beta", "first"),
        center=("center", "first"),
        runs=("run_id", "size"),
        diverged=("status", lambda s: int(s.eq("diverged").sum())),
        algorithms=("algorithm", lambda s: ", ".join(label(a) for a in algorithm_order(s))),
    ).reset_index()
    slugs = unique_slugs(sec["section"].tolist())
    sec["slug"] = sec["section"].map(slugs)
    return sec


# ---------------------------------------------------------------------------- tables


def summary_table(a: Analysis) -> pd.DataFrame:
    """Per section and algorithm: best config, its final objective, run counts, time."""
    g = a.configs.groupby(["section", "algorithm"])
    out = g.agg(
        configs=("config_id", "size"),
        valid_configs=("valid", "sum"),
        runs=("runs", "sum"),
        diverged_runs=("diverged", "sum"),
    )
    out = out.join(
        a.runs.groupby(["section", "algorithm"])["train_time_s"].mean().rename("mean_train_time_s")
    )
    best = a.best.set_index(["section", "algorithm"])
    best = best[["config", "grid_edges", "mean_final", "sd_final", "seeds"]]
    out = out.join(best.rename(columns={"config": "best_config", "seeds": "best_seeds"}))
    out = out.reset_index()
    out["best_config"] = out["best_config"].fillna("all configurations diverged")
    out["grid_edges"] = out["grid_edges"].fillna("")
    out = out.astype({"configs": int, "valid_configs": int, "runs": int, "diverged_runs": int})
    out["best_seeds"] = out["best_seeds"].astype("Int64")
    return sort_by_algorithm(out)[
        [
            "section",
            "algorithm",
            "best_config",
            "grid_edges",
            "mean_final",
            "sd_final",
            "best_seeds",
            "configs",
            "valid_configs",
            "runs",
            "diverged_runs",
            "mean_train_time_s",
        ]
    ]


def sort_by_algorithm(df: pd.DataFrame) -> pd.DataFrame:
    """Rows by section, then algorithm in :func:`algorithm_order`."""
    rank = {alg: i for i, alg in enumerate(algorithm_order(df["algorithm"].unique()))}
    return df.sort_values(
        ["section", "algorithm"],
        key=lambda s: s.map(rank) if s.name == "algorithm" else s,
        kind="stable",
    ).reset_index(drop=True)


def overview(a: Analysis) -> dict:
    """Counts and provenance for the introduction."""
    runs = a.runs

    def values(col: str) -> str:
        counts = runs[col].dropna().astype(str).value_counts()
        if counts.empty:
            return "unknown"
        return ", ".join(
            f"{k} ({v} runs)" if len(counts) > 1 else str(k) for k, v in counts.items()
        )

    finished = runs["finished_at"].dropna().astype(str)
    return {
        "sweeps": sorted(runs["sweep"].dropna().unique().tolist()) or ["unknown"],
        "runs": len(runs),
        "diverged": int(runs["status"].eq("diverged").sum()),
        "datasets": len(a.sections),
        "configs": len(a.configs),
        "provenance": {
            "fedsparse version": values("fedsparse_version"),
            "git commit": values("git_commit"),
            "host": values("host"),
            "Python / NumPy / Numba": " / ".join(
                values(c) for c in ("python_version", "numpy_version", "numba_version")
            ),
            "runs finished": (
                f"{finished.min()} … {finished.max()}" if len(finished) else "unknown"
            ),
        },
    }
