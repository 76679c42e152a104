"""``fedsparse merge``: the union of results folders written as one results folder."""

from __future__ import annotations

import itertools
import os
import re
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import FedsparseError, one_line
from ..layout import Layout
from ..results.aggregate import ROW_GROUP_ROWS, install, stage_traces
from ..results.schema import RUNS_SCHEMA, TRACE_SCHEMA
from .read import conflicting_runs, keep_runs_once, results_views, runs_per_folder, sql_quote
from .views import BATCH_ROWS, scalar, warn_conflicts


@dataclass
class MergeSummary:
    runs: int  # runs in the merged folder
    per_folder: list[int]  # runs found in each source folder
    conflicts: list[str]  # run ids whose trace rows differ between folders


# DuckDB in a merge: one thread, and at most this memory (FEDSPARSE_DUCKDB_MEMORY, in DuckDB's
# units, sets another: the tests use a tiny one). What can outgrow it spills to a folder
# inside the merged folder, removed after.
MERGE_DUCKDB_CONFIG = {"memory_limit": "512MB", "threads": 1}
MEMORY_ENV = "FEDSPARSE_DUCKDB_MEMORY"
# DuckDB's ORDER BY of whole rows does not spill within its limit: a 597k-row partition of 89
# trace columns ran out of 512 MB (10 folders of 12,000 runs). So merge sorts a run-id range
# at a time, each range of at most memory / these bytes of rows (sorted, a row took ~850 bytes;
# a runs row is wider, its config_json and provenance strings).
SORT_BYTES_PER_TRACE_ROW = 4096
SORT_BYTES_PER_RUNS_ROW = 16384


def merge_duckdb_config() -> dict[str, str | int]:
    """MERGE_DUCKDB_CONFIG, its memory limit from FEDSPARSE_DUCKDB_MEMORY if set (a value
    that is not a size is a FedsparseError naming the variable)."""
    memory = os.environ.get(MEMORY_ENV) or str(MERGE_DUCKDB_CONFIG["memory_limit"])
    _parse_bytes(memory)
    return {**MERGE_DUCKDB_CONFIG, "memory_limit": memory}


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
                keep_runs_once(con, len(folders))  # each range's query would apply the rule
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
    in a connection of merge_duckdb_config(), and the folders read. Merge runs no user SQL, so
    the connection is not locked (its spill folder is set once the destination is known)."""
    con = duckdb.connect(":memory:", config=merge_duckdb_config())
    try:
        yield con, results_views(con, list(sources))
    finally:
        con.close()


def _partition_batches(con: duckdb.DuckDBPyConnection) -> Iterator[pa.RecordBatch]:
    """Each partition's rows in run and round order, in batches of ROW_GROUP_ROWS rows (a
    partition's last one shorter): the row groups do not depend on how DuckDB cuts its
    output (which varies with its threads), nor on the run-id ranges it sorts one by one."""
    per_range = _sort_rows(con, SORT_BYTES_PER_TRACE_ROW)
    counts = con.sql(  # a few bytes a run: DuckDB sorts these within its memory
        "SELECT dataset, algorithm, run_id, count(*) FROM traces "
        "GROUP BY ALL ORDER BY dataset, algorithm, run_id"
    )
    ranges = list(_run_ranges(counts, per_range))  # read to the end before the next query
    for (dataset, algorithm), part in itertools.groupby(ranges, key=lambda r: r[0]):
        batches = _range_batches(con, dataset, algorithm, [r[1:] for r in part])
        for table in _tables_of(batches, ROW_GROUP_ROWS, TRACE_SCHEMA):
            yield from table.to_batches()


def _range_batches(
    con: duckdb.DuckDBPyConnection, dataset: str, algorithm: str, ranges: list[tuple[str, str]]
) -> Iterator[pa.RecordBatch]:
    """A partition's rows in run and round order: each run-id range sorted on its own (the
    ranges ascend, a run in one of them)."""
    for first, last in ranges:
        yield from con.sql(
            "SELECT * FROM traces WHERE dataset = ? AND algorithm = ? "
            "AND run_id BETWEEN ? AND ? ORDER BY run_id, round",
            params=[dataset, algorithm, first, last],
        ).to_arrow_reader(BATCH_ROWS)


def _run_ranges(counts: duckdb.DuckDBPyRelation, limit: int) -> Iterator[tuple[tuple, str, str]]:
    """(key, first run id, last run id): ``counts``' rows (key columns, run id, rows of the
    run; ordered) cut into ranges of one key and at most ``limit`` rows (or one run)."""
    reader = counts.to_arrow_reader(BATCH_ROWS)
    current = None  # [key, first, last, rows]
    for batch in reader:
        *keys, ids, ns = (c.to_pylist() for c in batch.columns)
        rows_keys = list(zip(*keys, strict=True)) if keys else [()] * batch.num_rows
        for key, run_id, n in zip(rows_keys, ids, ns, strict=True):
            if current is not None and (current[0] != key or current[3] + n > limit):
                yield current[0], current[1], current[2]
                current = None
            if current is None:
                current = [key, run_id, run_id, n]
            else:
                current[2], current[3] = run_id, current[3] + n
    if current is not None:
        yield current[0], current[1], current[2]


def _stage_runs(con: duckdb.DuckDBPyConnection, runs_path: Path) -> Path:
    """The runs, by run id, streamed to a temporary file beside ``runs_path`` (returned), in
    row groups of BATCH_ROWS rows (the last one shorter), however the run-id ranges cut them."""
    runs_path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{runs_path.name}.", suffix=".tmp", dir=runs_path.parent)
    os.close(fd)
    try:
        ids = con.sql("SELECT run_id, 1 FROM runs ORDER BY run_id")
        ranges = list(_run_ranges(ids, _sort_rows(con, SORT_BYTES_PER_RUNS_ROW)))
        batches = (
            batch
            for _, first, last in ranges
            for batch in con.sql(
                "SELECT * FROM runs WHERE run_id BETWEEN ? AND ? ORDER BY run_id",
                params=[first, last],
            ).to_arrow_reader(BATCH_ROWS)
        )
        with pq.ParquetWriter(tmp, RUNS_SCHEMA) as writer:
            for table in _tables_of(batches, BATCH_ROWS, RUNS_SCHEMA):
                writer.write_table(table)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return Path(tmp)


def _tables_of(
    batches: Iterable[pa.RecordBatch], rows: int, schema: pa.Schema
) -> Iterator[pa.Table]:
    """``batches`` (cast to ``schema``) as tables of ``rows`` rows (the last one shorter),
    each one chunk: the files' bytes do not depend on how the batches were cut."""
    waiting: list[pa.Table] = []
    n = 0
    for batch in batches:
        waiting.append(pa.Table.from_batches([batch]).cast(schema))
        n += batch.num_rows
        if n >= rows:
            table = pa.concat_tables(waiting)
            whole = n - n % rows
            for start in range(0, whole, rows):
                yield table.slice(start, rows).combine_chunks()
            waiting, n = [table.slice(whole)], n - whole
    if n:
        yield pa.concat_tables(waiting).combine_chunks()


def _sort_rows(con: duckdb.DuckDBPyConnection, bytes_per_row: int) -> int:
    """How many rows of ``bytes_per_row`` one sort may take in the connection's memory."""
    limit = scalar(con, "SELECT current_setting('memory_limit')")
    return max(1, _parse_bytes(str(limit)) // bytes_per_row)


_UNITS = {"": 1, "b": 1, "k": 10**3, "m": 10**6, "g": 10**9, "t": 10**12}


def _parse_bytes(text: str) -> int:
    """DuckDB's memory sizes ('512MB', '488.2 MiB', '1GiB') in bytes."""
    match = re.fullmatch(r"\s*([0-9.]+)\s*([kmgt]?)(i?)b?\s*", text.lower())
    if match is None:
        raise FedsparseError(f"{MEMORY_ENV}: not a memory size: {text!r}")
    number, unit, binary = match.groups()
    scale = 1024 ** "kmgt".index(unit) * 1024 if binary and unit else _UNITS[unit]
    return int(float(number) * scale)
