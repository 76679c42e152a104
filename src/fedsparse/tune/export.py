"""Export trials and their traces into the Parquet results; held-out re-runs; status."""

from __future__ import annotations

import json
import logging
import math
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ..layout import Layout
from ..query.grid_edges import EDGE_COLUMNS, edge_warning, grid_edges
from ..results.schema import RUNS_SCHEMA, TRACE_SCHEMA, rows_table, write_parquet_atomic
from ..training.config import run_id
from .spec import TuneError, study_spec
from .storage import load_study, open_storage
from .worker import with_study_columns

log = logging.getLogger("fedsparse.tune")


def finished_trials(study) -> list:
    from optuna.trial import TrialState

    return sorted(
        study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED)),
        key=lambda t: t.number,
    )


def export_study(
    sweep: dict[str, Any], study: str, results_dir: str | Path, traces_out, runs_out
) -> None:
    """Export a finished study's trials: their trace rows and runs table rows.

    Every trial's runs get the study's columns (trial number and state, sampler, search space,
    the trial's objective values).

    Parameters
    ----------
    sweep
        The sweep config.
    study
        The study's name in the sweep's plan.
    results_dir
        The results folder holding the study's storage and trial traces.
    traces_out
        The trace rows (Parquet), written atomically.
    runs_out
        The runs table rows (Parquet), written atomically.

    Raises
    ------
    TuneError
        Fewer (or more) finished trials than ``n_trials``, or a finished trial's trace file
        missing.
    ConfigError
        ``study`` is not one of the sweep's studies.
    """
    spec = study_spec(sweep, study)
    s = load_study(spec, open_storage(spec, results_dir))
    trials = finished_trials(s)
    if len(trials) != spec.settings.n_trials:
        raise TuneError(
            f"study {spec.name}: {len(trials)} finished trials, expected "
            f"{spec.settings.n_trials}; run the workers first"
        )
    parts = Layout(results_dir).study_trial_parts(spec.name)
    tables, rows = [], []
    space = json.dumps(spec.space_json(), sort_keys=True)
    for t in trials:
        path = parts / f"{t.number:06d}.parquet"
        if not path.is_file():
            raise TuneError(f"{path}: trace of finished trial {t.number} is missing")
        table = pq.read_table(path)
        summaries = json.loads(table.schema.metadata[b"fedsparse_run_summaries"])
        table = table.replace_schema_metadata(TRACE_SCHEMA.metadata)
        state = t.state.name
        idx = table.schema.get_field_index("trial_state")
        table = table.set_column(idx, "trial_state", pa.array([state] * table.num_rows))
        tables.append(_conform(table, TRACE_SCHEMA))
        for row in summaries:
            row.update(
                study=spec.name,
                trial_number=t.number,
                trial_state=state,
                sampler=spec.sampler_json(),
                search_space=space,
                **trial_values(t, spec),
            )
            rows.append(row)
    write_parquet_atomic(rows_table(rows, RUNS_SCHEMA), runs_out)
    write_parquet_atomic(pa.concat_tables(tables), traces_out)
    log.info("study %s: exported %d trials (%d runs)", spec.name, len(trials), len(rows))


def run_holdout(
    sweep: dict[str, Any],
    study: str,
    data_root: str | Path,
    results_dir: str | Path,
    traces_out,
    runs_out,
) -> None:
    """Re-run the study's best configuration on its fresh ``holdout_seeds``.

    A single-objective study re-runs its best trial (a warning where it lies at an edge of the
    searched space); a multi-objective one every trial of its Pareto set. The rows'
    ``trial_state`` is ``HOLDOUT``.

    Parameters
    ----------
    sweep
        The sweep config.
    study
        The study's name in the sweep's plan.
    data_root
        The folder of the built data sets.
    results_dir
        The results folder holding the study's storage.
    traces_out
        The trace rows (Parquet), written atomically.
    runs_out
        The runs table rows (Parquet), written atomically.

    Raises
    ------
    TuneError
        No completed trial (all pruned or failed).
    ConfigError
        ``study`` is not one of the sweep's studies.
    """
    from ..data import load_built
    from ..pipeline.shard_runner import run_summary
    from ..sweep.plan import Run
    from ..training.experiment import run_result

    spec = study_spec(sweep, study)
    s = load_study(spec, open_storage(spec, results_dir))
    chosen = pareto_trials(s) if spec.settings.objectives else _best_trial(s)
    if not chosen:
        raise TuneError(
            f"study {spec.name}: no completed trial (all pruned or failed): nothing to re-run"
        )
    if not spec.settings.objectives:
        best = chosen[0]
        tried = {k: [t.params.get(k) for t in finished_trials(s)] for k in spec.space}
        flags = grid_edges(best.params, {k: v for k, v in tried.items() if k in EDGE_COLUMNS})
        if flags:  # the search may not have found the best: say so where it is re-run
            log.warning("study %s: best trial %d: %s", spec.name, best.number, edge_warning(flags))
    else:  # a Pareto set's ends sit at the space's edges by design: no warning
        log.info(
            "study %s: re-running the Pareto set: trials %s",
            spec.name,
            ", ".join(str(t.number) for t in chosen),
        )
    data = load_built(data_root, spec.dataset, spec.data_digest)
    tables, rows = [], []
    for best in chosen:
        for seed in spec.settings.holdout_seeds:
            cfg = spec.run_config(best.params, seed)
            rid = run_id(cfg)
            t0 = time.perf_counter()
            result = run_result(cfg, data)
            trace = with_study_columns(result.trace, rid, spec, best.number, "HOLDOUT")
            wall = time.perf_counter() - t0
            row = run_summary(Run(rid, cfg), trace, wall, spec.name, result.client_summary)
            row.update(
                study=spec.name,
                trial_number=best.number,
                trial_state="HOLDOUT",
                sampler=spec.sampler_json(),
                search_space=json.dumps(spec.space_json(), sort_keys=True),
                **trial_values(best, spec),
            )
            tables.append(trace)
            rows.append(row)
            log.info(
                "study %s: held-out seed %d of trial %d: %s, final objective %.6g",
                spec.name,
                seed,
                best.number,
                row["status"],
                row["final_objective"],
            )
    write_parquet_atomic(rows_table(rows, RUNS_SCHEMA), runs_out)
    write_parquet_atomic(pa.concat_tables(tables), traces_out)


def _best_trial(study) -> list:
    try:
        return [study.best_trial]
    except ValueError:
        return []


def pareto_trials(study) -> list:
    """A multi-objective study's Pareto set (Optuna's ``best_trials``) by trial number,
    without the trials whose values are not all finite (diverged runs score +-inf: only an
    all-diverged study would have them on its front) and each configuration once (NSGA-II
    may breed a copy of a parent; its held-out re-runs would be the same runs): the first
    trial of it."""
    out, seen = [], set()
    for t in sorted(study.best_trials, key=lambda t: t.number):
        key = json.dumps(t.params, sort_keys=True)
        if all(math.isfinite(v) for v in t.values) and key not in seen:
            seen.add(key)
            out.append(t)
    return out


def trial_values(trial, spec) -> dict[str, Any]:
    """A trial's runs-row columns: trial_value (a multi-objective trial's first value) and,
    for a multi-objective study, trial_values: JSON [{metric, direction, value}, ...]
    (null for a value that is not finite)."""
    if not spec.settings.objectives:
        return {"trial_value": _finite_or_none(trial.value)}
    values = trial.values or [None] * len(spec.settings.objectives)  # (a pruned trial: none)
    entries = [
        {"metric": o["metric"], "direction": o["direction"], "value": _json_number(v)}
        for o, v in zip(spec.settings.objectives, values, strict=True)
    ]
    return {"trial_value": _finite_or_none(values[0]), "trial_values": json.dumps(entries)}


def study_status(sweep: dict[str, Any], results_dir: str | Path) -> list[dict[str, Any]]:
    """Per study: trials by state (for ``fedsparse tune status``)."""
    import optuna

    from ..sweep.plan import plan_sweep

    out = []
    for name, spec in plan_sweep(sweep).studies.items():
        row = {"study": name, "n_trials": spec.settings.n_trials}
        try:
            s = load_study(spec, open_storage(spec, results_dir))
        except KeyError:
            row["created"] = False
            out.append(row)
            continue
        row["created"] = True
        for state in optuna.trial.TrialState:
            row[state.name.lower()] = sum(t.state == state for t in s.get_trials(deepcopy=False))
        if spec.settings.objectives:
            row["pareto_trials"] = [t.number for t in pareto_trials(s)]
        else:
            try:
                row["best_value"], row["best_params"] = s.best_value, s.best_params
            except ValueError:
                pass
        out.append(row)
    return out


def _conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` with ``schema``'s columns in its order (columns it lacks are null)."""
    cols = [
        table.column(f.name).cast(f.type)
        if f.name in table.column_names
        else pa.nulls(table.num_rows, f.type)
        for f in schema
    ]
    return pa.Table.from_arrays(cols, schema=schema)


def _finite_or_none(v: float | None) -> float | None:
    return float(v) if v is not None and not math.isnan(v) else None


def _json_number(v: float | None) -> float | None:
    """``v`` if finite, else None (JSON has no infinity)."""
    return float(v) if v is not None and math.isfinite(v) else None
