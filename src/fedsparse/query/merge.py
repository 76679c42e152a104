"""``fedsparse merge``: the union of results folders written as one results folder."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from ..aggregate import ROW_GROUP_ROWS, install, stage_traces
from ..errors import FedsparseError
from ..layout import Layout
from ..results import (
    RUNS_SCHEMA,
    TRACE_SCHEMA,
    conflicting_runs,
    one_line,
    results_views,
    runs_per_folder,
    sql_quote,
)
from .views import BATCH_ROWS, scalar, warn_conflicts


@dataclass
class MergeSummary:
    runs: int  # runs in the merged folder
    per_folder: list[int]  # runs found in each source folder
    conflicts: list[str]  # run ids whose trace rows differ between folders


# DuckDB in a merge: sorting a partition's rows (all its runs') spills to disk beyond this
# memory, into a folder inside the merged folder that is removed after, so merge's memory does
# not grow with the results' size. One thread: with two, the sort of a 19M-row partition ran
# out of this memory (one thread merged it in 1.03 GB peak, ~1.7 x a million-run sweep's
# largest partition).
MERGE_DUCKDB_CONFIG = {"memory_limit": "512MB", "threads": 1}


def merge_results(sources: Sequence[str | Path], dest: str | Path) -> MergeSummary:
    """Write the union of ``sources`` (see the module docstring) to ``dest`` as a results
    folder, like the aggregate rule: ``traces/`` then ``runs.parquet``, each atomically."""
    dest = Path(dest).absolute()
    out = Layout(dest)
    spill = None
    try:
        with _merge_views(sources) as (con, folders):
            if out.runs.exists() and dest.resolve() not in {f.resolve() for f in folders}:
                raise FedsparseError(
                    f"{dest}: already holds results; give it as a source too, or another -o"
                )
            dest.mkdir(parents=True, exist_ok=True)
            spill = Path(tempfile.mkdtemp(prefix=".merge-spill.", dir=dest))
            try:
                con.execute(f"SET temp_directory = {sql_quote(str(spill))}")
                conflicts = conflicting_runs(con, len(folders))
                warn_conflicts(conflicts)
                # streamed, one data set x algorithm partition at a time, each in run and
                # round order; staged beside dest and renamed only when both are complete
                # (dest may be a source: it is read to the end first)
                staged_traces = stage_traces(_partition_batches(con), out.traces)
                try:
                    staged_runs = _stage_runs(con, out.runs)
                except BaseException:
                    shutil.rmtree(staged_traces, ignore_errors=True)
                    raise
            # DuckDB's errors, also as Arrow passes them on (an OSError), and the writer's
            except (duckdb.Error, pa.ArrowException, OSError) as exc:
                raise FedsparseError(f"merge: {one_line(exc)}") from None
            n_runs = scalar(con, "SELECT count(*) FROM runs")
            per_folder = runs_per_folder(con, len(folders))
    finally:
        if spill is not None:
            shutil.rmtree(spill, ignore_errors=True)
    install(staged_traces, out.traces, staged_runs, out.runs)
    return MergeSummary(n_runs, per_folder, conflicts)


@contextmanager
def _merge_views(
    sources: Sequence[str | Path],
) -> Iterator[tuple[duckdb.DuckDBPyConnection, list[Path]]]:
    """The ``runs`` and ``traces`` views of ``sources`` (as :func:`open_results` makes them)
    in a connection of MERGE_DUCKDB_CONFIG, and the folders read. Merge runs no user SQL, so
    the connection is not locked (its spill folder is set once the destination is known)."""
    con = duckdb.connect(":memory:", config=dict(MERGE_DUCKDB_CONFIG))
    try:
        yield con, results_views(con, list(sources))
    finally:
        con.close()


def _partition_batches(con: duckdb.DuckDBPyConnection) -> Iterator[pa.RecordBatch]:
    """Each partition's rows in run and round order, in batches of ROW_GROUP_ROWS rows (a
    partition's last one shorter): the row groups do not depend on how DuckDB cuts its
    output (which varies with its threads)."""
    parts = con.execute(
        "SELECT DISTINCT dataset, algorithm FROM traces ORDER BY dataset, algorithm"
    ).fetchall()
    for dataset, algorithm in parts:
        reader = con.sql(
            "SELECT * FROM traces WHERE dataset = ? AND algorithm = ? ORDER BY run_id, round",
            params=[dataset, algorithm],
        ).to_arrow_reader(BATCH_ROWS)
        waiting: list[pa.Table] = []
        rows = 0
        for batch in reader:
            waiting.append(pa.Table.from_batches([batch]).cast(TRACE_SCHEMA))
            rows += batch.num_rows
            if rows >= ROW_GROUP_ROWS:
                table = pa.concat_tables(waiting)
                whole = rows - rows % ROW_GROUP_ROWS
                yield from _even_batches(table.slice(0, whole))
                waiting, rows = [table.slice(whole)], rows - whole
        if rows:
            yield from _even_batches(pa.concat_tables(waiting))


def _even_batches(table: pa.Table) -> Iterator[pa.RecordBatch]:
    """``table`` in batches of ROW_GROUP_ROWS rows (the last one shorter), each one chunk."""
    for start in range(0, table.num_rows, ROW_GROUP_ROWS):
        yield from table.slice(start, ROW_GROUP_ROWS).combine_chunks().to_batches()


def _stage_runs(con: duckdb.DuckDBPyConnection, runs_path: Path) -> Path:
    """The runs, by run id, streamed to a temporary file beside ``runs_path`` (returned)."""
    runs_path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{runs_path.name}.", suffix=".tmp", dir=runs_path.parent)
    os.close(fd)
    try:
        reader = con.sql("SELECT * FROM runs ORDER BY run_id").to_arrow_reader(BATCH_ROWS)
        with pq.ParquetWriter(tmp, RUNS_SCHEMA) as writer:
            for batch in reader:
                writer.write_table(pa.Table.from_batches([batch]).cast(RUNS_SCHEMA))
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return Path(tmp)
