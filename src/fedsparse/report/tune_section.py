"""The report's Optuna section: optimisation history, best parameters, importances.

Built from ``runs.parquet`` only (trial rows carry the study, trial number and
state, the trial's metric value and the study's search space as JSON), so a
report can be rebuilt without the study storage.
"""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path

import numpy as np
import pandas as pd

from ..query.grid_edges import EDGE_COLUMNS, edges_text, grid_edges
from .analysis import label, slugify
from .data import ReportData, as_data
from .figures import colour, plt

FINISHED = ("COMPLETE", "PRUNED")
MIN_TRIALS_FOR_IMPORTANCE = 4


# a trace column at the last round, for the held-out values of multi-objective studies
_LAST = ("test_accuracy", "train_accuracy", "train_loss", "pm_test_accuracy")


def optuna_runs(source: ReportData | str | Path) -> pd.DataFrame:
    """The runs of Optuna studies (trials and held-out re-runs), with ``last_<column>``: the
    held-out runs' trace values at their last round; empty for grid results (whose traces are
    then not read)."""
    data = as_data(source)
    if not data.has("study"):
        return data.frame("SELECT * FROM runs WHERE false")
    last = ", ".join(f"arg_max({c}, round) AS last_{c}" for c in _LAST)
    return data.frame(
        f"""SELECT r.*, t.* EXCLUDE (run_id) FROM runs r LEFT JOIN (
              SELECT run_id, {last} FROM traces WHERE trial_state = 'HOLDOUT'
              GROUP BY run_id) t USING (run_id)
            WHERE r.study IS NOT NULL"""
    )


def objectives_of(trials: pd.DataFrame) -> list[dict]:
    """A multi-objective study's objectives ({metric, direction}) from its trial_values."""
    for text in trials["trial_values"].dropna():
        return [{"metric": v["metric"], "direction": v["direction"]} for v in json.loads(text)]
    return []


def is_multi(trials: pd.DataFrame) -> pd.Series:
    """Per row: whether its study is multi-objective (its rows carry trial_values)."""
    if "trial_values" not in trials:
        return pd.Series(False, index=trials.index)
    multi = trials.groupby("study")["trial_values"].transform(lambda v: v.notna().any())
    return multi.astype(bool)


def _holdout_value(row: pd.Series, metric: str) -> float:
    """A held-out run's value of an objective metric (NaN where runs do not record it)."""
    if row.get("status") == "diverged":
        return math.nan
    if metric == "total_bytes":
        value = row["total_bytes_up"] + row["total_bytes_down"]
    elif metric in ("final_objective", "best_objective") or metric.startswith("total_"):
        value = row.get(metric)
    elif metric.startswith("final_"):
        value = row.get(f"last_{metric.removeprefix('final_')}")
    else:  # auc_log_objective, rounds_to_target: a trace statistic not kept per run
        return math.nan
    return math.nan if _isna(value) else float(value)


def pareto_table(runs: pd.DataFrame, trials: pd.DataFrame) -> pd.DataFrame:
    """Per multi-objective study: its exported Pareto set (the trials re-run on held-out
    seeds), each trial's parameters, its value of each objective (the trials' seeds) and the
    held-out mean of each, and diverged held-out runs."""
    rows = []
    for study, t in trials.groupby("study", sort=True):
        objectives = objectives_of(t)
        space = searched(t["search_space"].iloc[0])
        hold = runs[(runs["study"] == study) & (runs["trial_state"] == "HOLDOUT")]
        for number, h in hold.groupby("trial_number", sort=True):
            trial = t[t["trial_number"] == number]
            source = trial.iloc[0] if len(trial) else h.iloc[0]
            row = {
                "study": study,
                "dataset": source["dataset"],
                "algorithm": source["algorithm"],
                "trial": int(number),
            }
            for key in space:
                row[key] = _param(source, key, space[key])
            values = (
                json.loads(source["trial_values"])
                if isinstance(source["trial_values"], str)
                else []
            )
            for o, v in zip(objectives, values, strict=False):
                row[o["metric"]] = v["value"]
            for o in objectives:
                held = [_holdout_value(r, o["metric"]) for _, r in h.iterrows()]
                held = [v for v in held if math.isfinite(v)]
                row[f"holdout {o['metric']}"] = float(np.mean(held)) if held else math.nan
            row["holdout_seeds"] = len(h)
            row["holdout_diverged"] = int((h["status"] == "diverged").sum())
            rows.append(row)
    return pd.DataFrame(rows)


def pareto_figure(trials: pd.DataFrame, front: pd.DataFrame, study: str):
    """A two-objective study's trials, its Pareto set and the set's held-out means.

    Parameters
    ----------
    trials
        The study's finished trials (:func:`trials_table`), their ``trial_values`` JSON.
    front
        The study's rows of :func:`pareto_table`: the Pareto set, with its ``holdout``
        means (may be empty).
    study
        The study's name, for the title.

    Returns
    -------
    matplotlib.figure.Figure or None
        The second objective across, the first up (trials without both values left out); None
        unless the study has exactly two objectives.
    """
    objectives = objectives_of(trials)
    if len(objectives) != 2:
        return None
    (y, ydir), (x, xdir) = ((o["metric"], o["direction"]) for o in objectives)
    values = [json.loads(v) if isinstance(v, str) else None for v in trials["trial_values"]]
    pts = np.array(
        [
            [v[1]["value"], v[0]["value"]]
            for v in values
            if v and None not in (v[0]["value"], v[1]["value"])
        ],
        dtype=float,
    ).reshape(-1, 2)
    fig, ax = plt.subplots(figsize=(7.2, 4.4), constrained_layout=True)
    c = colour(trials["algorithm"].iloc[0])
    ax.scatter(pts[:, 0], pts[:, 1], color=c, alpha=0.3, s=18, lw=0, label="trials")
    if not front.empty and x in front and y in front:
        f = front.sort_values(x, ascending=xdir == "minimize")
        ax.plot(
            f[x],
            f[y],
            color=c,
            marker="o",
            ms=5,
            lw=1.4,
            drawstyle="steps-post",
            label="Pareto set (trials)",
        )
        hx, hy = front.get(f"holdout {x}"), front.get(f"holdout {y}")
        if hx is not None and hy is not None:
            ax.scatter(hx, hy, color="black", marker="x", s=30, label="held-out means")
    if len(pts) and (pts[:, 0] > 0).all() and pts[:, 0].max() / max(pts[:, 0].min(), 1e-300) > 10:
        ax.set_xscale("log")
    ax.set_xlabel(f"{x} ({xdir})")
    ax.set_ylabel(f"{y} ({ydir})")
    ax.set_title(f"{study}: {len(pts)} trials with finite values", fontsize=10)
    ax.legend(fontsize=8)
    return fig


def trials_table(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per finished trial: study, data set, algorithm, number, state, value, params."""
    t = runs[runs["trial_state"].isin(FINISHED)]
    if t.empty:
        return pd.DataFrame()
    first = t.sort_values("seed").groupby(["study", "trial_number"], sort=True).first()
    return first.reset_index()


def searched(space_json: str) -> dict:
    return json.loads(space_json) if isinstance(space_json, str) else {}


def best_table(runs: pd.DataFrame, trials: pd.DataFrame) -> pd.DataFrame:
    """Per study: the best complete trial, its parameters, its grid edges (a parameter at the
    smallest or largest value the finished trials tried; fedsparse.query.grid_edges) and its
    held-out result."""
    rows = []
    for study, t in trials.groupby("study", sort=True):
        space = searched(t["search_space"].iloc[0])
        complete = t[(t["trial_state"] == "COMPLETE") & t["trial_value"].notna()]
        hold = runs[(runs["study"] == study) & (runs["trial_state"] == "HOLDOUT")]
        row = {
            "study": study,
            "dataset": t["dataset"].iloc[0],
            "algorithm": t["algorithm"].iloc[0],
            "trials": len(t),
            "complete": int((t["trial_state"] == "COMPLETE").sum()),
            "pruned": int((t["trial_state"] == "PRUNED").sum()),
        }
        if not complete.empty:
            best = complete.sort_values(["trial_value", "trial_number"]).iloc[0]
            row["best_trial"] = int(best["trial_number"])
            row["best_value"] = float(best["trial_value"])
            for key in space:
                row[key] = _param(best, key, space[key])
            tried = {k: t[k] for k in space if k in EDGE_COLUMNS and k in t}
            row["grid_edges"] = edges_text(grid_edges(best, tried))
        fin = hold["final_objective"].astype(float)
        fin = fin[np.isfinite(fin)]
        row["holdout_seeds"] = len(hold)
        row["holdout_final_mean"] = float(fin.mean()) if len(fin) else math.nan
        row["holdout_diverged"] = int((hold["status"] == "diverged").sum())
        rows.append(row)
    return pd.DataFrame(rows)


def _param(row: pd.Series, key: str, spec: dict):
    v = row.get(key)
    if _isna(v) and spec.get("type") == "categorical" and "full" in spec.get("choices", []):
        return "full"  # batch_size: null means the full batch
    return v


def _isna(v) -> bool:
    try:
        return bool(pd.isna(v))
    except (TypeError, ValueError):
        return False


def importances(trials: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, str]]:
    """fANOVA parameter importances per study (Optuna), with a note where there are too few
    complete trials with a finite value or nothing varies."""
    rows, notes = [], {}
    for study, t in trials.groupby("study", sort=True):
        space = searched(t["search_space"].iloc[0])
        ok = t[(t["trial_state"] == "COMPLETE") & np.isfinite(t["trial_value"].astype(float))]
        if len(ok) < MIN_TRIALS_FOR_IMPORTANCE:
            notes[study] = (
                f"{len(ok)} complete trials with a finite value: too few for parameter "
                f"importances (at least {MIN_TRIALS_FOR_IMPORTANCE} needed)."
            )
            continue
        try:
            result = _optuna_importances(ok, space)
        except Exception as exc:  # e.g. every trial at the same point
            notes[study] = f"Parameter importances could not be computed ({exc})."
            continue
        for param, value in result.items():
            rows.append({"study": study, "parameter": param, "importance": value})
    return pd.DataFrame(rows, columns=["study", "parameter", "importance"]), notes


def _optuna_importances(ok: pd.DataFrame, space: dict) -> dict[str, float]:
    import optuna

    from ..tune import SearchParam

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    params = {k: SearchParam(k, **_search_kwargs(v)) for k, v in space.items()}
    dists = {k: p.distribution() for k, p in params.items()}
    study = optuna.create_study(direction="minimize")
    for _, row in ok.iterrows():
        values = {k: _native(_param(row, k, space[k])) for k in dists}
        study.add_trial(
            optuna.trial.create_trial(
                params=values, distributions=dists, value=float(row["trial_value"])
            )
        )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        evaluator = optuna.importance.FanovaImportanceEvaluator(seed=0)
        # objectives span many decades (blown-up runs): rank parameters on log10 of the metric
        positive = bool((ok["trial_value"].astype(float) > 0).all())
        result = optuna.importance.get_param_importances(
            study,
            evaluator=evaluator,
            target=(lambda t: math.log10(t.value)) if positive else None,
            normalize=True,
        )
    if any(not math.isfinite(v) for v in result.values()):
        raise ValueError("the metric values are too spread out")
    return result


def _search_kwargs(spec: dict) -> dict:
    out = {k: v for k, v in spec.items() if k != "choices"}
    if "choices" in spec:
        out["choices"] = tuple(spec["choices"])
    return out


def _native(v):
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.floating):
        return float(v)
    return v


def history_figure(trials: pd.DataFrame, title: str):
    """Per algorithm: metric value per trial (dots: complete, crosses: pruned) and the best
    so far; values beyond 4 decades above the best are drawn at the top edge (triangles)."""
    algos = list(dict.fromkeys(trials["algorithm"]))
    fig, axes = plt.subplots(
        1, len(algos), figsize=(4.2 * len(algos) + 0.8, 3.6), constrained_layout=True, squeeze=False
    )
    for ax, algo in zip(axes[0], algos, strict=True):
        t = trials[trials["algorithm"] == algo].sort_values("trial_number")
        n = t["trial_number"].to_numpy()
        v = t["trial_value"].astype(float).to_numpy()
        done = (t["trial_state"] == "COMPLETE").to_numpy()
        fin = np.isfinite(v)
        best = pd.Series(np.where(done & fin, v, np.nan)).cummin().ffill().to_numpy()
        c = colour(algo)
        good = v[fin]
        log = len(good) > 0 and (good > 0).all() and good.max() / good.min() > 10
        top = np.inf
        if log and np.isfinite(best).any():
            top = np.nanmin(best) * 1e4
            ax.set_yscale("log")
        shown = np.where(fin & (v <= top), v, np.nan)
        clipped = ~fin | (v > top)
        ax.scatter(n[done], shown[done], color=c, s=18)
        ax.scatter(n[~done], shown[~done], color=c, marker="x", s=22, alpha=0.7)
        ax.step(n, np.where(best <= top, best, np.nan), where="post", color=c, label="best so far")
        if clipped.any() and np.isfinite(top):
            ax.scatter(n[clipped], np.full(clipped.sum(), top), color=c, marker="^", s=22)
            ax.set_ylim(top=top * 1.5)
        ax.set_title(label(algo), fontsize=10)
        ax.set_xlabel("trial")
        ax.legend(fontsize=8)
    axes[0][0].set_ylabel("metric (lower is better)")
    fig.suptitle(
        f"Optimisation history, {title} (dots: complete, crosses: pruned, "
        "triangles: beyond the axis or diverged)",
        fontsize=10,
    )
    return fig


def add_section(page, data: ReportData | str | Path, tables_dir: Path) -> bool:
    """Append the Optuna section to the report page, and write its tables.

    Writes ``optuna_best.csv`` and ``optuna_importances.csv`` (and ``optuna_pareto.csv`` for
    multi-objective studies) to ``tables_dir``.

    Parameters
    ----------
    page
        The report page appended to.
    data
        The results read (a :class:`ReportData` or a results folder).
    tables_dir
        The folder the tables are written to.

    Returns
    -------
    bool
        False, with nothing added or written, when the results hold no Optuna runs.
    """
    runs = optuna_runs(data)
    if runs.empty:
        return False
    every = trials_table(runs)
    multi = every[is_multi(every)] if not every.empty else every
    trials = every[~is_multi(every)] if not every.empty else every  # single objective
    best = best_table(runs, trials) if not trials.empty else pd.DataFrame()
    imp, notes = importances(trials) if not trials.empty else (pd.DataFrame(), {})
    best.to_csv(tables_dir / "optuna_best.csv", index=False)
    imp.to_csv(tables_dir / "optuna_importances.csv", index=False)
    fronts = pareto_table(runs, multi) if not multi.empty else pd.DataFrame()
    if not multi.empty:
        fronts.to_csv(tables_dir / "optuna_pareto.csv", index=False)

    page.add('<h2 id="optuna">Optuna studies</h2>')
    sampler = runs["sampler"].dropna().iloc[0] if runs["sampler"].notna().any() else ""
    page.text(
        "p",
        "These algorithms were tuned with Optuna (sampler "
        f"{sampler}); one study per data set and algorithm. A trial's value is the "
        "study's metric (lower is better; +inf for a diverged run); pruned trials stopped "
        "early. The comparison above uses each algorithm's best configuration re-run on "
        "fresh held-out seeds, not the trials themselves.",
    )
    if every.empty:
        page.text("p", "No finished trials in these results.", "note")
        return True
    if not multi.empty:
        _multi_section(page, multi, fronts)
    if trials.empty:
        return True
    for ds, t in trials.groupby("dataset", sort=True):
        page.text("h3", f"Optimisation history: {ds}")
        page.figure(history_figure(t, ds), f"optuna_history_{slugify(ds)}", f"history, {ds}")
    page.text("h3", "Best parameters and held-out check")
    page.table(best.dropna(axis=1, how="all"))
    page.text("h3", "Parameter importances (fANOVA, on log10 of the metric where it is positive)")
    if not imp.empty:
        wide = imp.pivot(index="study", columns="parameter", values="importance").reset_index()
        page.table(wide, {c: (lambda v: f"{v:.2f}") for c in wide.columns if c != "study"})
    for study, note in notes.items():
        page.text("p", f"{study}: {note}", "muted")
    return True


def _multi_section(page, multi: pd.DataFrame, fronts: pd.DataFrame) -> None:
    page.add('<h3 id="optuna-pareto">Multi-objective studies: Pareto sets</h3>')
    page.text(
        "p",
        "A multi-objective study (optuna.objectives) has no single best trial: its Pareto set "
        "is the trials no other trial beats on every objective (Optuna's best_trials; trials "
        "with a diverged run score the worst value on each objective and are left out). Each "
        "of them was re-run on the held-out seeds; the comparison above uses those re-runs, "
        "and the held-out means below check that the trade-off holds on fresh seeds.",
    )
    for study, t in multi.groupby("study", sort=True):
        front = fronts[fronts["study"] == study] if not fronts.empty else fronts
        names = ", ".join(f"{o['metric']} ({o['direction']})" for o in objectives_of(t))
        page.text("p", f"{study}: {len(t)} finished trials; objectives {names}.", "muted")
        page.figure(
            pareto_figure(t, front, study),
            f"optuna_pareto_{slugify(study)}",
            f"Pareto set, {study}",
        )
        if front.empty:
            page.text("p", "No held-out re-runs of its Pareto set in these results.", "note")
        else:
            page.table(front.drop(columns="study").dropna(axis=1, how="all"))
