"""Merge shard outputs into ``traces/`` (hive-partitioned) and ``runs.parquet``.

Streaming, in memory that does not grow with the number of trace rows. One shard file is read
at a time, without the columns its statistics say are null in every row (most of TRACE_SCHEMA's
for any one algorithm), and its rows go out in (run, round) order a row group's worth at a
time. Each data set x algorithm partition keeps fewer than ROW_GROUP_ROWS rows waiting, and one
thread writes the row groups in the order they are made, at most WRITES_AHEAD behind.
(pyarrow's dataset writer, used before and written byte for byte alike, queued up to 64M rows
when writing fell behind reading: 0.5 GB at 10^5 runs, growing with the sweep.) What still
grows: an open Parquet file's footer, ~76 KB for each row group of 89 columns (~2.3 bytes a
trace row, ~0.45 GB at 10^6 runs x 201 rounds), and the run ids' duplicate check (~50 bytes a
run, before any trace is read). Memory also follows the largest shard's non-null columns.

Deterministic: the same shard files in the same order give the same bytes (the order is the
plan's, which the workflow passes). Atomic: both outputs are written beside their destinations
and renamed into place, so a kill at any moment leaves the previous results whole.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections import deque
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as pads
import pyarrow.parquet as pq

from ..atomic import swap_in_directory
from ..errors import DataError, one_line
from .schema import RUNS_SCHEMA, TRACE_SCHEMA

PARTITION_COLUMNS = ("dataset", "algorithm")
PARTITIONING = pads.partitioning(
    pa.schema([(c, pa.string()) for c in PARTITION_COLUMNS]), flavor="hive"
)
# Rows a partition file buffers before it writes a row group (~20 MB of trace rows): few,
# large row groups for readers, and a memory bound of this times the open partitions.
ROW_GROUP_ROWS = 1 << 15
MAX_GROUP_ROWS = 4 * ROW_GROUP_ROWS
# pyarrow's dataset writer took its input in batches of at most this many rows
# (acero::ExecPlan::kMaxBatchSize); cut alike, the row groups end where they ended.
INPUT_BATCH_ROWS = 1 << 15
# Row groups prepared but not yet written: the writer thread's queue (bounds memory).
WRITES_AHEAD = 2


def aggregate(
    trace_files: list[str | Path],
    run_files: list[str | Path],
    traces_dir: str | Path,
    runs_path: str | Path,
) -> None:
    """Stream the shard files into the results' traces dataset and runs table.

    Both outputs are written beside their destinations and renamed into place only when whole;
    on an error nothing is installed. The same inputs in the same order give the same bytes.

    Parameters
    ----------
    trace_files
        The shards' trace files, in plan order.
    run_files
        The shards' runs files, in plan order.
    traces_dir
        The hive-partitioned traces dataset (by ``dataset``, ``algorithm``), replaced whole.
    runs_path
        The runs table, replaced.

    Raises
    ------
    ValueError
        The same run id appears in two shards (checked before any trace is read).
    DataError
        A shard file is not readable Parquet; the message names it.
    FileNotFoundError
        A shard file is missing.
    """
    staged_runs = _write_runs(run_files, runs_path)  # refuses duplicates before any trace
    try:
        staged_traces = stage_traces(_sorted_traces(trace_files), traces_dir)
    except BaseException:
        staged_runs.unlink(missing_ok=True)
        raise
    install(staged_traces, traces_dir, staged_runs, runs_path)


def install(staged_traces: Path, traces_dir: str | Path, staged_runs: Path, runs_path) -> None:
    """Rename staged outputs into place: the traces folder first, then the runs table.

    The traces folder is swapped in whole (:func:`fedsparse.atomic.swap_in_directory`: in one
    exchange where the system has one) and the previous one deleted; the runs table is renamed
    over the old one in one rename.

    Parameters
    ----------
    staged_traces
        The dataset written by :func:`stage_traces`.
    traces_dir
        Where the traces dataset goes.
    staged_runs
        The runs table written beside ``runs_path``.
    runs_path
        Where the runs table goes.
    """
    swap_in_directory(staged_traces, traces_dir)
    os.replace(staged_runs, runs_path)


def _write_runs(run_files: list[str | Path], runs_path: str | Path) -> Path:
    """The runs table of every shard, each shard's rows by run id, in a temporary file
    beside ``runs_path`` (returned; renamed by the caller). A run id found twice is refused
    once every shard is read, from the written file's run ids."""
    runs_path = Path(runs_path)
    runs_path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{runs_path.name}.", suffix=".tmp", dir=runs_path.parent)
    os.close(fd)
    try:
        with pq.ParquetWriter(tmp, RUNS_SCHEMA) as writer:
            for f in run_files:
                with _reading(f):
                    runs = pq.read_table(f, schema=RUNS_SCHEMA)
                writer.write_table(runs.sort_by("run_id"))
        # sorted, a duplicate is next to its twin: ~50 bytes a run at most, for a moment
        ids = pq.read_table(tmp, columns=["run_id"]).column("run_id").combine_chunks()
        ids = ids.take(pc.sort_indices(ids))
        same = pc.equal(ids.slice(1), ids.slice(0, max(len(ids) - 1, 0)))
        if pc.any(same).as_py():
            twice = ids.slice(1).filter(same).unique().to_pylist()
            raise ValueError(f"the same run appears in two shards: {twice[:3]}")
        del ids, same
        with open(tmp, "rb+") as fh:
            os.fsync(fh.fileno())
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return Path(tmp)


def _sorted_traces(trace_files: Iterable[str | Path]) -> Iterator[pa.RecordBatch]:
    """Each shard's rows in (run, round) order, in batches of ROW_GROUP_ROWS rows (a shard's
    last one shorter), columns null throughout the shard as null-type arrays."""
    for f in trace_files:
        with _reading(f):
            table = _read_compact(f)
        order = pc.sort_indices(
            table.select(["run_id", "round"]),
            sort_keys=[("run_id", "ascending"), ("round", "ascending")],
        )
        for start in range(0, table.num_rows, ROW_GROUP_ROWS):
            yield from table.take(order.slice(start, ROW_GROUP_ROWS)).combine_chunks().to_batches()
        del table, order


@contextmanager
def _reading(path: str | Path) -> Iterator[None]:
    """A shard file that is not whole Parquet as one line naming it (a DataError)."""
    try:
        yield
    except FileNotFoundError:
        raise
    except (pa.ArrowException, OSError) as exc:
        raise DataError(
            f"{path}: not a readable shard file ({one_line(exc)}); delete it and rerun the sweep"
        ) from None


def _read_compact(path: str | Path) -> pa.Table:
    """A shard's traces as TRACE_SCHEMA, without reading the columns its statistics say are
    null in every row (those are null-type arrays; :func:`_full` gives them their type)."""
    meta = pq.ParquetFile(path).metadata
    index = {meta.schema.column(j).path: j for j in range(meta.num_columns)}
    empty = set()
    for name, j in index.items():
        stats = [meta.row_group(g).column(j).statistics for g in range(meta.num_row_groups)]
        if all(
            s is not None and s.has_null_count and s.null_count == meta.row_group(g).num_rows
            for g, s in enumerate(stats)
        ):
            empty.add(name)
    empty -= {*PARTITION_COLUMNS, "run_id", "round"}  # the keys are always read
    read = [f.name for f in TRACE_SCHEMA if f.name in index and f.name not in empty]
    table = pq.read_table(path, schema=TRACE_SCHEMA, columns=read)
    n = meta.num_rows
    return pa.table(
        [table.column(f.name) if f.name in read else pa.nulls(n) for f in TRACE_SCHEMA],
        names=TRACE_SCHEMA.names,
    )


def _full(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """``batch`` with its null-type columns as all-null arrays of ``schema``'s types."""
    if batch.schema.equals(schema):
        return batch
    n = batch.num_rows
    columns = zip(batch.columns, schema, strict=True)
    return pa.record_batch(
        [pa.nulls(n, f.type) if pa.types.is_null(c.type) else c for c, f in columns],
        schema=schema,
    )


def write_traces_dataset(traces: pa.Table | Iterable[pa.RecordBatch], traces_dir: str | Path):
    """Write a hive-partitioned dataset (from a table, or a stream of record batches of
    TRACE_SCHEMA), swapped in whole for ``traces_dir``
    (:func:`fedsparse.atomic.swap_in_directory`)."""
    if isinstance(traces, pa.Table):
        traces = traces.to_batches()
    swap_in_directory(stage_traces(traces, traces_dir), traces_dir)


def stage_traces(batches: Iterable[pa.RecordBatch], traces_dir: str | Path) -> Path:
    """The dataset written to a temporary folder beside ``traces_dir`` (returned, for
    :func:`install`). Batches are TRACE_SCHEMA's columns (a column may be null-typed when all
    its rows are null)."""
    traces_dir = Path(traces_dir)
    traces_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{traces_dir.name}.", dir=traces_dir.parent))
    try:
        with _DatasetWriter(tmp) as writer:
            for batch in batches:
                writer.write(batch)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return tmp


class _DatasetWriter:
    """A hive-partitioned Parquet dataset, written as pyarrow's dataset writer writes it with
    preserve_order, min_rows_per_group=ROW_GROUP_ROWS and max_rows_per_group=MAX_GROUP_ROWS
    (same files, same bytes) but with its queue bounded: a batch's rows go to their partition
    (in order), a partition writes a row group once ROW_GROUP_ROWS rows wait (all waiting
    rows, at most MAX_GROUP_ROWS), the rest at the end; one thread writes the row groups in
    the order they are made, at most WRITES_AHEAD behind."""

    def __init__(self, root: Path):
        self.root = root
        positions = [TRACE_SCHEMA.get_field_index(c) for c in PARTITION_COLUMNS]
        self.positions = positions
        self.file_schema = pa.schema(
            [f for i, f in enumerate(TRACE_SCHEMA) if i not in positions],
            metadata=TRACE_SCHEMA.metadata,
        )
        self.parts: dict[tuple, _Partition] = {}
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="fedsparse-write")
        self.pending: deque[Future] = deque()

    def __enter__(self) -> _DatasetWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if exc_type is None:
                for part in self.parts.values():
                    while part.staged:
                        self._submit(part, part.pop())
                    self._submit(part, None)
                while self.pending:
                    self.pending.popleft().result()
        finally:
            for f in self.pending:
                f.cancel()
            self.pool.shutdown(wait=True)
            for part in self.parts.values():
                if part.writer is not None:
                    part.writer.close()

    def write(self, batch: pa.RecordBatch) -> None:
        if batch.schema.names != TRACE_SCHEMA.names:
            raise ValueError("trace batches must have TRACE_SCHEMA's columns")
        # cut as pyarrow's dataset writer cuts its input (Acero's largest batch), which
        # decides where row groups end
        for start in range(0, batch.num_rows, INPUT_BATCH_ROWS):
            self._write(batch.slice(start, INPUT_BATCH_ROWS))

    def _write(self, batch: pa.RecordBatch) -> None:
        for key, rows in _split(batch, self.positions):
            part = self.parts.get(key)
            if part is None:
                path = self.root / _partition_dir(key) / "part-0.parquet"  # one file a partition
                part = self.parts[key] = _Partition(path)
                part.path.parent.mkdir(parents=True, exist_ok=True)
            part.staged.append(rows.drop_columns(list(PARTITION_COLUMNS)))
            part.rows += rows.num_rows
            while part.staged and part.rows >= ROW_GROUP_ROWS:
                self._submit(part, part.pop())

    def _submit(self, part: _Partition, group: list[pa.RecordBatch] | None) -> None:
        while len(self.pending) >= WRITES_AHEAD or (self.pending and self.pending[0].done()):
            self.pending.popleft().result()
        self.pending.append(self.pool.submit(self._write_group, part, group))

    def _write_group(self, part: _Partition, group: list[pa.RecordBatch] | None) -> None:
        if part.writer is None:
            part.writer = pq.ParquetWriter(part.path, self.file_schema)
        if group is None:
            part.writer.close()
            return
        schema = self.file_schema
        table = pa.Table.from_batches([_full(b, schema) for b in group], schema=schema)
        table = table.combine_chunks()
        part.writer.write_table(table, row_group_size=table.num_rows)


class _Partition:
    """One partition's file: its rows waiting for a row group, and its writer."""

    def __init__(self, path: Path):
        self.path = path
        self.staged: deque[pa.RecordBatch] = deque()
        self.rows = 0
        self.writer: pq.ParquetWriter | None = None

    def pop(self) -> list[pa.RecordBatch]:
        """The next row group: waiting batches, in order, up to MAX_GROUP_ROWS rows (the
        last one cut if need be)."""
        group, n = [], 0
        while self.staged and n < MAX_GROUP_ROWS:
            batch = self.staged.popleft()
            room = MAX_GROUP_ROWS - n
            if batch.num_rows > room:
                self.staged.appendleft(batch.slice(room))
                batch = batch.slice(0, room)
            group.append(batch)
            n += batch.num_rows
        self.rows -= n
        return group


def _split(batch: pa.RecordBatch, positions: list[int]) -> Iterator[tuple[tuple, pa.RecordBatch]]:
    """(partition key, the batch's rows of that partition in order) in order of first row."""
    columns = [batch.column(i) for i in positions]
    encoded = [pc.dictionary_encode(c, null_encoding="encode") for c in columns]
    codes = np.zeros(batch.num_rows, dtype=np.int64)
    for e in encoded:
        codes = codes * len(e.dictionary) + e.indices.to_numpy(zero_copy_only=False)
    values, first = np.unique(codes, return_index=True)
    if len(values) == 1:
        yield _key(encoded, 0), batch
        return
    for code in values[np.argsort(first)]:
        rows = np.flatnonzero(codes == code)
        yield _key(encoded, int(rows[0])), batch.take(pa.array(rows))


def _key(encoded: list[pa.DictionaryArray], row: int) -> tuple:
    return tuple(e[row].as_py() for e in encoded)


def _partition_dir(key: tuple) -> str:
    expr = None
    for column, value in zip(PARTITION_COLUMNS, key, strict=True):
        field = pc.field(column)
        term = field.is_null() if value is None else field == value
        expr = term if expr is None else expr & term
    return PARTITIONING.format(expr)[0]
