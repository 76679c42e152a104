"""Merge shard outputs into ``traces/`` (hive-partitioned) and ``runs.parquet``.

Streaming, in bounded memory at any sweep size: one shard file is read at a time, its rows
sorted by (run, round), and passed on to a writer that keeps at most a row group per open
partition file; memory grows with the shard size and the number of data set x algorithm
partitions, not with the sweep. Deterministic: the same shard files in the same order give
the same bytes (the order is the plan's, which the workflow passes). Atomic: both outputs
are written beside their destinations and renamed into place, so a kill at any moment
leaves the previous results whole.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq

from .results import RUNS_SCHEMA, TRACE_SCHEMA, read_results

PARTITION_COLUMNS = ("dataset", "algorithm")
PARTITIONING = pads.partitioning(
    pa.schema([(c, pa.string()) for c in PARTITION_COLUMNS]), flavor="hive"
)
# Rows a partition file buffers before it writes a row group (~20 MB of trace rows): few,
# large row groups for readers, and a memory bound of this times the open partitions.
ROW_GROUP_ROWS = 1 << 15


def aggregate(
    trace_files: list[str | Path],
    run_files: list[str | Path],
    traces_dir: str | Path,
    runs_path: str | Path,
) -> None:
    """Stream the shard files into the results' traces dataset and runs table; a run found
    in two shards is an error (and nothing is written)."""
    staged_runs = _write_runs(run_files, runs_path)  # refuses duplicates before any trace
    try:
        staged_traces = stage_traces(_sorted_traces(trace_files), traces_dir)
    except BaseException:
        staged_runs.unlink(missing_ok=True)
        raise
    install(staged_traces, traces_dir, staged_runs, runs_path)


def install(staged_traces: Path, traces_dir: str | Path, staged_runs: Path, runs_path) -> None:
    """Rename staged outputs into place: the traces folder, then the runs table (each in one
    rename; a reader sees the old or the new one)."""
    _replace_dir(staged_traces, Path(traces_dir))
    os.replace(staged_runs, runs_path)


def _write_runs(run_files: list[str | Path], runs_path: str | Path) -> Path:
    """The runs table of every shard, each shard's rows by run id, in a temporary file
    beside ``runs_path`` (returned; renamed by the caller)."""
    runs_path = Path(runs_path)
    runs_path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{runs_path.name}.", suffix=".tmp", dir=runs_path.parent)
    os.close(fd)
    seen: set[str] = set()
    try:
        with pq.ParquetWriter(tmp, RUNS_SCHEMA) as writer:
            for f in run_files:
                runs = pq.read_table(f, schema=RUNS_SCHEMA).sort_by("run_id")
                ids = runs.column("run_id").to_pylist()
                twice = seen.intersection(ids)
                if twice or len(set(ids)) != len(ids):
                    raise ValueError(f"the same run appears in two shards: {sorted(twice)[:3]}")
                seen.update(ids)
                writer.write_table(runs)
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return Path(tmp)


def _sorted_traces(trace_files: Iterable[str | Path]) -> Iterator[pa.RecordBatch]:
    for f in trace_files:
        table = pq.read_table(f, schema=TRACE_SCHEMA)
        ordered = table.sort_by([("run_id", "ascending"), ("round", "ascending")])
        # the writer buffers what it is given per partition: give it row groups' worth
        yield from ordered.to_batches(max_chunksize=ROW_GROUP_ROWS)


def write_traces_dataset(traces: pa.Table | Iterable[pa.RecordBatch], traces_dir: str | Path):
    """Write a hive-partitioned dataset (from a table, or a stream of record batches of
    TRACE_SCHEMA), replacing ``traces_dir`` in one rename."""
    if isinstance(traces, pa.Table):
        traces = traces.to_batches()
    _replace_dir(stage_traces(traces, traces_dir), Path(traces_dir))


def stage_traces(batches: Iterable[pa.RecordBatch], traces_dir: str | Path) -> Path:
    """The dataset written to a temporary folder beside ``traces_dir`` (returned, for
    :func:`install`)."""
    traces_dir = Path(traces_dir)
    traces_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{traces_dir.name}.", dir=traces_dir.parent))
    try:
        pads.write_dataset(
            pa.RecordBatchReader.from_batches(TRACE_SCHEMA, iter(batches)),
            tmp,
            format="parquet",
            partitioning=PARTITIONING,
            basename_template="part-{i}.parquet",
            existing_data_behavior="overwrite_or_ignore",
            # rows and files in input order, equal inputs give equal bytes: without
            # preserve_order the writer sometimes swaps two shards' batches in a partition
            use_threads=False,
            preserve_order=True,
            min_rows_per_group=ROW_GROUP_ROWS,
            max_rows_per_group=4 * ROW_GROUP_ROWS,
        )
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return tmp


def _replace_dir(new: Path, target: Path) -> None:
    """Put the folder ``new`` at ``target``, the old one (if any) renamed away first and
    deleted after: a reader sees the old folder or the new one."""
    old = None
    if target.exists():
        old = target.with_name(f".{target.name}.old")
        shutil.rmtree(old, ignore_errors=True)
        os.replace(target, old)
    os.replace(new, target)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def read_traces(results_dir: str | Path) -> pa.Table:
    """All traces of a results folder, partition columns as strings, TRACE_SCHEMA order."""
    return read_results([results_dir], "SELECT * FROM traces").cast(TRACE_SCHEMA)
