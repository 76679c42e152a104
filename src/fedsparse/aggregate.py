"""Merge shard outputs into ``traces/`` (hive-partitioned) and ``runs.parquet``."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.parquet as pq

from .results import RUNS_SCHEMA, TRACE_SCHEMA, read_results, write_parquet_atomic

PARTITION_COLUMNS = ("dataset", "algorithm")
PARTITIONING = pads.partitioning(
    pa.schema([(c, pa.string()) for c in PARTITION_COLUMNS]), flavor="hive"
)


def aggregate(
    trace_files: list[str | Path],
    run_files: list[str | Path],
    traces_dir: str | Path,
    runs_path: str | Path,
) -> None:
    """Concatenate shard files; rows sorted so equal inputs give equal outputs."""
    traces = pa.concat_tables([pq.read_table(f, schema=TRACE_SCHEMA) for f in trace_files])
    traces = traces.sort_by(
        [
            ("dataset", "ascending"),
            ("algorithm", "ascending"),
            ("run_id", "ascending"),
            ("round", "ascending"),
        ]
    )
    runs = pa.concat_tables([pq.read_table(f, schema=RUNS_SCHEMA) for f in run_files])
    runs = runs.sort_by([("run_id", "ascending")])
    if len(pc.unique(runs.column("run_id"))) != runs.num_rows:
        raise ValueError("the same run appears in two shards")
    write_traces_dataset(traces, traces_dir)
    write_parquet_atomic(runs, runs_path)


def write_traces_dataset(traces: pa.Table, traces_dir: str | Path) -> None:
    """Write a hive-partitioned dataset, replacing ``traces_dir`` in one rename."""
    traces_dir = Path(traces_dir)
    traces_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{traces_dir.name}.", dir=traces_dir.parent))
    try:
        pads.write_dataset(
            traces,
            tmp,
            format="parquet",
            partitioning=PARTITIONING,
            basename_template="part-{i}.parquet",
            existing_data_behavior="overwrite_or_ignore",
        )
        old = None
        if traces_dir.exists():
            old = traces_dir.with_name(f".{traces_dir.name}.old")
            shutil.rmtree(old, ignore_errors=True)
            os.replace(traces_dir, old)
        os.replace(tmp, traces_dir)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def read_traces(results_dir: str | Path) -> pa.Table:
    """All traces of a results folder, partition columns as strings, TRACE_SCHEMA order."""
    return read_results([results_dir], "SELECT * FROM traces").cast(TRACE_SCHEMA)
