"""Execute one shard of a sweep: its runs in one process, resumable run by run.

Each finished run is written at once to ``<output>.parts/<run_id>.parquet``
(atomically, with its summary in the file metadata); a restarted shard skips
those runs. The shard's own outputs are written atomically at the end and the
parts directory is removed.

One process at a time works on a shard (a lock file beside its outputs): after
the Snakemake process on a cluster's login node dies, its jobs run on, and the
rerun may start the same shard again while the orphan is still writing.

A shard finds its runs in the sweep's plan file (``shards/plan.parquet`` next to its
outputs, written once by the Snakemake process; see :func:`fedsparse.sweep.write_plan_file`),
reading only its own part. Where that file is missing, unreadable or was planned from another
sweep config (e.g. a job queued by an earlier Snakemake run of an edited sweep), the shard
plans the sweep itself, as every shard did before plan files, and logs one line saying why:
the runs, their ids and the results are the same either way, only slower to find.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
import logging
import math
import shutil
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from .data import load_dataset_dir
from .experiment import client_summary_json, run_identity, run_trace
from .provenance import provenance
from .results import (
    RENAMED_RUNS_COLUMNS,
    RUNS_SCHEMA,
    TRACE_SCHEMA,
    rows_table,
    upgrade,
    write_parquet_atomic,
)
from .sweep import PlanFileError, Run, plan_file_path, plan_sweep, read_plan_shard

log = logging.getLogger("fedsparse.shard")


def run_summary(run: Run, trace: pa.Table, wall_time: float, shard: str) -> dict[str, Any]:
    """The runs.parquet row of a finished run."""
    cfg = run.config
    objective = trace.column("objective").to_pylist()
    finite = [v for v in objective if v is not None and math.isfinite(v)]
    last = trace.slice(trace.num_rows - 1).to_pylist()[0]
    ds = cfg["dataset"]
    return {
        **run_identity(cfg),
        "run_id": run.run_id,  # an Optuna trial's run has an id of its own (tune.worker)
        "rounds": cfg["rounds"],
        "eval_every": cfg["eval_every"],
        "dataset_kind": ds["kind"],
        "dataset_task": ds.get("task"),
        "data_alpha": ds.get("alpha") if ds["kind"] == "synthetic" else None,
        "data_beta": ds.get("beta") if ds["kind"] == "synthetic" else None,
        "status": last["status"],
        "final_round": last["round"],
        "final_objective": last["objective"],
        "best_objective": min(finite) if finite else None,
        "train_time_s": last["elapsed_s"],
        "wall_time_s": wall_time,
        "config_json": json.dumps(cfg, sort_keys=True),
        "client_summary": client_summary_json(trace),
        "shard": shard,
        **provenance(),
        "finished_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }


def run_shard(
    sweep: dict[str, Any],
    shard: str,
    data_root: str | Path,
    traces_out: str | Path,
    runs_out: str | Path,
    plan_file: str | Path | None = None,
) -> None:
    """Run every run of ``shard`` not yet finished, then write its two Parquet outputs.

    The runs come from ``plan_file`` (default: the plan file next to ``runs_out``, where the
    workflow writes it), else from planning ``sweep`` (see the module docstring).
    """
    runs = shard_runs(sweep, shard, plan_file or plan_file_path(Path(runs_out).parent))
    with _exclusive(Path(runs_out).with_name(f".{shard}.lock"), shard):
        _run_shard(runs, shard, data_root, traces_out, runs_out)


def shard_runs(sweep: dict[str, Any], shard: str, plan_file: str | Path) -> list[Run]:
    """The runs of ``shard``: its part of ``plan_file``, else (one log line says why) its
    runs in a plan of ``sweep`` made here."""
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
    traces_out: str | Path,
    runs_out: str | Path,
) -> None:
    parts = Path(f"{traces_out}.parts")
    parts.mkdir(parents=True, exist_ok=True)
    data = load_dataset_dir(Path(data_root) / runs[0].dataset)  # a shard: one data set
    todo = [r for r in runs if not (parts / f"{r.run_id}.parquet").exists()]
    resumed = len(runs) - len(todo)
    log.info("shard %s: %d runs on %s (%d already done)", shard, len(runs), data.name, resumed)
    start = time.perf_counter()
    for k, run in enumerate(todo, 1):
        t0 = time.perf_counter()
        trace = run_trace(run.config, data)
        summary = run_summary(run, trace, time.perf_counter() - t0, shard)
        meta = {b"fedsparse_run_summary": json.dumps(summary).encode()}
        write_parquet_atomic(
            trace.replace_schema_metadata({**TRACE_SCHEMA.metadata, **meta}),
            parts / f"{run.run_id}.parquet",
        )
        elapsed = time.perf_counter() - start
        eta = elapsed / k * (len(todo) - k)
        p = run.config["params"]
        log.info(
            "shard %s: %d/%d runs done | %s %s seed %d: %s, objective %.6g | "
            "elapsed %s, about %s left",
            shard,
            resumed + k,
            len(runs),
            run.config["algorithm"],
            " ".join(f"{key}={v}" for key, v in p.items()),
            run.config["seed"],
            summary["status"],
            summary["final_objective"],
            _duration(elapsed),
            _duration(eta),
        )
    traces, summaries = [], []
    for run in runs:
        table = pq.read_table(parts / f"{run.run_id}.parquet")
        summary = json.loads(table.schema.metadata[b"fedsparse_run_summary"])
        # a part written by an older version (a shard resumed across an upgrade)
        summaries.append({RENAMED_RUNS_COLUMNS.get(k, k): v for k, v in summary.items()})
        traces.append(upgrade(table, TRACE_SCHEMA))
    write_parquet_atomic(rows_table(summaries, RUNS_SCHEMA), runs_out)
    write_parquet_atomic(pa.concat_tables(traces), traces_out)
    shutil.rmtree(parts)
    log.info(
        "shard %s: finished %d runs in %s", shard, len(runs), _duration(time.perf_counter() - start)
    )


def _duration(seconds: float) -> str:
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"
