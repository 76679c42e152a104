"""Execute one shard of a sweep (cut by :mod:`fedsparse.sweep.sharding`): its runs in one process,
resumable run by run.

Each finished run is written at once to the results folder's run store
(:mod:`fedsparse.results.run_store`: one atomic file per run, by run id, checked before it is taken
as done, moved aside if it is no finished run) and stays there: a shard job computes only the
runs of its list that the store does not hold, whichever attempt, shard or sweep config
computed them. So nothing that happens to a job's outputs loses a finished run: Snakemake
deletes a job's outputs before it reruns it (after its own process was killed, its orphaned
jobs' outputs count as incomplete), a sweep edit moves runs between shards, another config run
on the same folder replaces the shard files. The shard's own outputs are assembled from the
store and written atomically at the end; a run whose file fails its full read then (a damaged
page) is moved aside and computed again.

A run in progress is not lost either: every ``checkpoint_minutes`` of its computation (a sweep
key, default 5) its whole state is written to ``store/checkpoints/<run_id>.ckpt`` (a cohort's,
as one, under its first run's id; :mod:`fedsparse.results.checkpoint`). A killed run's next attempt
resumes from there, one log line saying from which round, with the trace it would have had
uninterrupted; the checkpoint is deleted once the run is in the store.

One process at a time computes a run (the run's lock in the store, taken without waiting: a
run another process holds is left for last, then waited for) and one process at a time works
on a shard (a lock beside its outputs): after the Snakemake process on a cluster's login node
dies, its jobs run on, and the rerun may start the same shard, or another shard holding the
same runs, while the orphan is still writing.

A shard finds its runs in the sweep's plan file (``shards/plan.parquet`` next to its
outputs, written once by the Snakemake process; see
:func:`fedsparse.sweep.plan_file.write_plan_file`), reading only its own part. Where that file is
missing, unreadable or was planned from another sweep config (e.g. a job queued by an earlier
Snakemake run of an edited sweep), the shard plans the sweep itself, as every shard did before plan
files, and logs one line saying why: the runs, their ids and the results are the same either way,
only slower to find.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import logging
import math
import time
from pathlib import Path
from typing import Any

import pyarrow as pa

from ..data import load_built
from ..data.identity import run_data_digest
from ..data.kinds import kind_of
from ..defaults import SWEEP_DEFAULTS, sweep_default
from ..layout import Layout, checkpoint_in
from ..results.checkpoint import Checkpoint
from ..results.numerics import numerics_version
from ..results.provenance import provenance
from ..results.run_store import (
    BadStoreFile,
    adopt_parts,
    holds_finished,
    is_stored,
    move_aside,
    read_stored,
    run_lock,
    store_path,
    write_stored,
)
from ..results.schema import (
    RENAMED_RUNS_COLUMNS,
    RUNS_SCHEMA,
    TRACE_SCHEMA,
    rows_table,
    upgrade,
    write_parquet_atomic,
)
from ..sweep.plan import Run, plan_sweep
from ..sweep.plan_file import PlanFileError, read_plan_shard
from ..training.experiment import run_cohort, run_identity, time_siblings_key
from ..wording import counted
from .progress import duration

# the shard job's lines: the logger is named for the job, not for the module
log = logging.getLogger("fedsparse.shard")


def run_summary(
    run: Run, trace: pa.Table, wall_time: float, shard: str, client_summary: str | None = None
) -> dict[str, Any]:
    """The runs table's row of a finished run.

    Parameters
    ----------
    run
        The planned run (its id and normalised config).
    trace
        The run's trace, at least one row; its last row gives the final values.
    wall_time
        The run's share of its computation's wall-clock time, in seconds.
    shard
        The shard that computed it.
    client_summary
        The per-client totals as JSON records (:attr:`RunResult.client_summary`), or None.

    Returns
    -------
    dict
        Column name to value: the run's identity and hyperparameters, its final and best
        (finite) objective, totals at the final round, config as JSON, provenance, finish time
        (UTC, ISO 8601) and numerics version.
    """
    cfg = run.config
    objective = trace.column("objective").to_pylist()
    finite = [v for v in objective if v is not None and math.isfinite(v)]
    last = trace.slice(trace.num_rows - 1).to_pylist()[0]
    ds = cfg["dataset"]
    generated = kind_of(ds).generated  # the generator's alpha and beta are columns
    return {
        **run_identity(cfg),
        "run_id": run.run_id,  # an Optuna trial's run has an id of its own (tune.worker)
        "rounds": cfg["rounds"],
        "eval_every": cfg["eval_every"],
        "dataset_kind": ds["kind"],
        "dataset_task": ds.get("task"),
        "data_alpha": ds.get("alpha") if generated else None,
        "data_beta": ds.get("beta") if generated else None,
        "status": last["status"],
        "final_round": last["round"],
        "final_objective": last["objective"],
        "best_objective": min(finite) if finite else None,
        "train_time_s": last["elapsed_s"],
        "wall_time_s": wall_time,
        # the totals at the final round (results.TOTALS)
        "total_bytes_up": last["bytes_up"],
        "total_bytes_down": last["bytes_down"],
        "total_time": last.get("time"),
        "config_json": json.dumps(cfg, sort_keys=True),
        "client_summary": client_summary,
        "shard": shard,
        **provenance(),
        "finished_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "numerics": numerics_version(cfg),
    }


def run_shard(
    sweep: dict[str, Any],
    shard: str,
    data_root: str | Path,
    traces_out: str | Path,
    runs_out: str | Path,
    plan_file: str | Path | None = None,
    store: str | Path | None = None,
) -> None:
    """Run every run of ``shard`` the run store does not hold, then write the shard's outputs.

    One process at a time works on a shard (a lock beside ``runs_out``; a second waits for
    it). Each finished run goes to the store at once; the two outputs are assembled from the
    store and each written atomically, and the shard's files of an earlier plan (other
    digests) are deleted.

    Parameters
    ----------
    sweep
        The sweep config (as read), planned here if the plan file cannot serve the shard.
    shard
        The shard's name in the plan.
    data_root
        The folder of the built data sets; the shard's data set is checked to be its runs'.
    traces_out
        The shard's trace rows (Parquet), written.
    runs_out
        The shard's runs table rows (Parquet), written.
    plan_file
        The sweep's plan file (None: the one of the results folder ``runs_out`` lies in, as
        ``RESULTS/shards/``).
    store
        The run store (None: that results folder's).
    """
    runs_out = Path(runs_out)
    around = Layout.of_shard_output(runs_out)
    runs = shard_runs(sweep, shard, plan_file or around.plan_file)
    store = Path(store) if store is not None else around.store
    with _exclusive(runs_out.with_name(f".{shard}.lock"), shard):
        # (an older fedsparse's shard files were named without a digest)
        for parts in (Path(f"{traces_out}.parts"), around.shards / f"{shard}.parquet.parts"):
            adopt_parts(parts, store)
        minutes = float(sweep_default(sweep, "checkpoint_minutes"))
        _run_shard(runs, shard, data_root, store, minutes)
        _write_outputs(runs, shard, store, data_root, traces_out, runs_out)
        _remove_superseded(around, shard, keep=(traces_out, runs_out))


def _remove_superseded(layout: Layout, shard: str, keep: tuple[str | Path, ...]) -> None:
    """Delete the shard's files of other runs (an earlier plan's, under another digest): they
    are no output of this plan, only disk; their runs stay in the store."""
    kept = {Path(p).resolve() for p in keep}
    for path in layout.shard_outputs(shard):
        if path.resolve() not in kept:
            path.unlink(missing_ok=True)


def shard_runs(sweep: dict[str, Any], shard: str, plan_file: str | Path) -> list[Run]:
    """The runs of ``shard``, from the plan file or else from a plan made here.

    Parameters
    ----------
    sweep
        The sweep config (as read).
    shard
        The shard's name.
    plan_file
        The sweep's plan file; where it cannot serve (missing, unreadable, stale, no such
        shard) one log line says why and ``sweep`` is planned.

    Returns
    -------
    list of Run
        The shard's runs in plan order.

    Raises
    ------
    KeyError
        ``shard`` is in neither the plan file nor the plan of ``sweep``.
    """
    try:
        return read_plan_shard(plan_file, shard, sweep)
    except PlanFileError as exc:
        log.info("shard %s: planning the sweep here: %s", shard, exc)
    return plan_sweep(sweep).shards[shard]


@contextlib.contextmanager
def _exclusive(lock_path: Path, shard: str):
    lock_path.parent.mkdir(parents=True, exist_ok=True)
    with open(lock_path, "a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log.info("shard %s: another process is working on it; waiting for it to finish", shard)
            fcntl.flock(fh, fcntl.LOCK_EX)
        yield


def _run_shard(
    runs: list[Run],
    shard: str,
    data_root: str | Path,
    store: Path,
    checkpoint_minutes: float = SWEEP_DEFAULTS["checkpoint_minutes"],
) -> None:
    """Compute the runs the store does not hold; those another process is computing last,
    once it has finished or died. Runs that differ only in a time model their algorithm does
    not read are computed together, once (fedsparse.training.experiment.run_results). Each
    computation checkpoints every ``checkpoint_minutes`` (0: never) and resumes from its
    checkpoint."""
    todo = [r for r in runs if not is_stored(store, r.run_id)]
    reused = len(runs) - len(todo)
    log.info("shard %s: %s (%d already done)", shard, counted(len(runs), "run"), reused)
    if not todo:
        return
    # a shard: one data set, checked to be its runs' before any of them reads it
    data = load_built(data_root, runs[0].dataset, run_data_digest(runs[0].config))
    start, done, computed, busy = time.perf_counter(), 0, 0, []

    def report(run: Run, outcome: str) -> None:
        elapsed = time.perf_counter() - start
        p = run.config["params"]
        log.info(
            "shard %s: %d/%d runs done | %s %s seed %d: %s | elapsed %s, about %s left",
            shard,
            reused + done,
            len(runs),
            run.config["algorithm"],
            " ".join(f"{key}={v}" for key, v in p.items()),
            run.config["seed"],
            outcome,
            duration(elapsed),
            duration(elapsed / done * (len(todo) - done)),
        )

    # busy fills during the first pass; the second pass waits for each of its runs
    for wait, batch in ((False, _cohorts(runs, todo)), (True, ([r] for r in busy))):
        for group in batch:
            with contextlib.ExitStack() as locks:
                mine = []
                for run in group:
                    if locks.enter_context(run_lock(store, run.run_id, wait)):
                        mine.append(run)
                    else:
                        log.info(
                            "shard %s: run %s is being computed elsewhere; left for last",
                            shard,
                            run.run_id,
                        )
                        busy.append(run)
                stored = [r for r in mine if holds_finished(store, r.run_id, shard)]
                for run in stored:  # finished elsewhere meanwhile
                    done += 1
                    report(run, "finished by another process")
                mine = [r for r in mine if r not in stored]
                if not mine:
                    continue
                summaries = _compute(mine, data, store, shard, checkpoint_minutes)
                computed += len(mine)
            for run, summary in zip(mine, summaries, strict=True):
                done += 1
                f = summary["final_objective"]
                report(run, f"{summary['status']}, objective {'-' if f is None else f'{f:.6g}'}")
    elapsed = duration(time.perf_counter() - start)
    log.info("shard %s: computed %s in %s", shard, counted(computed, "run"), elapsed)


def _cohorts(runs: list[Run], todo: list[Run]) -> list[list[Run]]:
    """The runs of ``todo`` in the groups the plan computes together (a cohort, its members'
    time siblings included: each run that ``joins`` the one before it), in plan order."""
    wanted = {id(r) for r in todo}
    groups: list[list[Run]] = []
    for run in runs:
        if not run.joins or not groups:
            groups.append([])
        if id(run) in wanted:
            groups[-1].append(run)
    return [group for group in groups if group]


def _compute(
    runs: list[Run], data, store: Path, shard: str, checkpoint_minutes: float
) -> list[dict[str, Any]]:
    """Run ``runs`` (one, or a cohort of computations, each a run with its time siblings)
    and put each trace, with its summary in the file metadata, in the store; return the
    summaries. The computation checkpoints as one, under its first run's id."""
    t0 = time.perf_counter()
    computations: dict[Any, list[Run]] = {}  # time siblings compute once
    for i, run in enumerate(runs):
        computations.setdefault(time_siblings_key(run.config) or i, []).append(run)
    groups = list(computations.values())
    first = runs[0].run_id
    label = f"shard {shard}: run {first}"
    if len(groups) > 1:
        label = f"shard {shard}: cohort of {len(groups)} runs from {first}"
    checkpoint = Checkpoint(
        checkpoint_in(store, first),
        [[r.run_id for r in group] for group in groups],
        60.0 * checkpoint_minutes,
        label,
    )
    found = run_cohort([[r.config for r in group] for group in groups], data, checkpoint)
    by_id = {
        r.run_id: result
        for group, results in zip(groups, found, strict=True)
        for r, result in zip(group, results, strict=True)
    }
    results = [by_id[r.run_id] for r in runs]
    # each run's share of the computation's wall time: the runs table's wall_time_s sums to
    # the time the shard computed (time siblings and a cohort's members share one computation)
    wall = (time.perf_counter() - t0) / len(runs)
    summaries = []
    for run, result in zip(runs, results, strict=True):
        summary = run_summary(run, result.trace, wall, shard, result.client_summary)
        write_stored(store, run.run_id, result.trace, summary)
        summaries.append(summary)
    checkpoint.remove()  # every run of it is in the store
    return summaries


def _current_names(summary: dict) -> dict:
    """A run's summary under the current column names: one stored by an older version (a
    shard resumed across an upgrade) named the synthetic data's levels ``alpha``/``beta``.
    A summary that has ``data_beta`` already is current, and its ``beta`` is the
    hyperparameter (sFedHP's, pFedMe's β): renaming it would overwrite the data's level."""
    return {
        k if RENAMED_RUNS_COLUMNS.get(k) in summary else RENAMED_RUNS_COLUMNS.get(k, k): v
        for k, v in summary.items()
    }


def _write_outputs(
    runs: list[Run],
    shard: str,
    store: Path,
    data_root: str | Path,
    traces_out: str | Path,
    runs_out: str | Path,
) -> None:
    """The shard's trace and runs files, from the store's entries of its runs."""
    traces, summaries = [], []
    for run in runs:
        table, summary = _read_or_recompute(run, shard, store, data_root)
        summary = _current_names(summary)
        # The run id leaves out the sweep's label: a run stored by another sweep (or shard)
        # is this sweep's run under this sweep's label.
        label = run.config["sweep"]
        summary.update(sweep=label, shard=shard, config_json=json.dumps(run.config, sort_keys=True))
        summaries.append(summary)
        trace = upgrade(table, TRACE_SCHEMA)
        if trace.num_rows and trace.column("sweep")[0].as_py() != label:
            column = pa.array([label] * trace.num_rows, pa.string())
            trace = trace.set_column(trace.schema.get_field_index("sweep"), "sweep", column)
        traces.append(trace)
    write_parquet_atomic(rows_table(summaries, RUNS_SCHEMA), runs_out)
    write_parquet_atomic(pa.concat_tables(traces), traces_out)
    log.info("shard %s: wrote %s to %s", shard, counted(len(runs), "run"), runs_out)


def _read_or_recompute(
    run: Run, shard: str, store: Path, data_root: str | Path
) -> tuple[pa.Table, dict[str, Any]]:
    """``run``'s stored trace and summary; a store file failing its full read (a damaged
    page, which the footer check cannot see) is moved aside and the run computed again."""
    path = store_path(store, run.run_id)
    try:
        return read_stored(path, run.run_id)
    except (BadStoreFile, FileNotFoundError):
        pass
    with run_lock(store, run.run_id, wait=True):  # another process may have replaced it
        try:
            return read_stored(path, run.run_id)
        except FileNotFoundError:
            pass
        except BadStoreFile as exc:
            move_aside(path, exc, shard)
    _run_shard([run], shard, data_root, store)
    return read_stored(path, run.run_id)  # just written: fails only with a failing disk
