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

from ..edges import EDGE_COLUMNS, edges_text, grid_edges
from ..results import read_results, to_frame
from .analysis import label, slugify
from .figures import colour, plt

FINISHED = ("COMPLETE", "PRUNED")
MIN_TRIALS_FOR_IMPORTANCE = 4


def optuna_runs(results_dir: str | Path) -> pd.DataFrame:
    """The runs of Optuna studies (trials and held-out re-runs); empty for grid results."""
    return to_frame(read_results([results_dir], "SELECT * FROM runs WHERE study IS NOT NULL"))


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
    smallest or largest value the finished trials tried; fedsparse.edges) and its held-out
    result."""
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


def add_section(page, results_dir: str | Path, tables_dir: Path) -> bool:
    """Append the Optuna section to ``page`` (a report _Page); False when there is none."""
    runs = optuna_runs(results_dir)
    if runs.empty:
        return False
    trials = trials_table(runs)
    best = best_table(runs, trials) if not trials.empty else pd.DataFrame()
    imp, notes = importances(trials) if not trials.empty else (pd.DataFrame(), {})
    best.to_csv(tables_dir / "optuna_best.csv", index=False)
    imp.to_csv(tables_dir / "optuna_importances.csv", index=False)

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
    if trials.empty:
        page.text("p", "No finished trials in these results.", "note")
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
