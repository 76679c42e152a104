"""A connection that can read only the ``runs`` and ``traces`` views of results folders
(:mod:`.read`), and one read-only SELECT over them."""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pyarrow as pa

from ..errors import FedsparseError, FedsparseWarning, one_line
from .read import conflicting_runs, results_views, sql_quote

BATCH_ROWS = 65_536


class ResultsConflictWarning(FedsparseWarning):
    """The same run has different trace rows in two results folders."""


@dataclass
class Results:
    """An open DuckDB connection with the ``runs`` and ``traces`` views of ``folders``."""

    con: duckdb.DuckDBPyConnection
    folders: list[Path]
    conflicts: list[str]  # run ids whose trace rows differ between folders


@contextmanager
def open_results(folders: Sequence[str | Path]) -> Iterator[Results]:
    """The views over one or several results folders (see the module docstring)."""
    con = duckdb.connect(":memory:")
    try:
        paths = results_views(con, list(folders))
        conflicts = conflicting_runs(con, len(paths))
        # From here on SQL can read the results folders and nothing else, and cannot undo that.
        dirs = ", ".join(sql_quote(f"{p}/") for p in paths)
        con.execute(f"SET allowed_directories = [{dirs}]")
        con.execute("SET enable_external_access = false")
        con.execute("SET lock_configuration = true")
        warn_conflicts(conflicts, stacklevel=4)
        yield Results(con, paths, conflicts)
    finally:
        con.close()


def run_query(results: Results, sql: str) -> pa.RecordBatchReader:
    """The rows of one read-only SELECT (also WITH, FROM-first, DESCRIBE, SUMMARIZE)."""
    try:
        statements = results.con.extract_statements(sql)
    except duckdb.Error as exc:
        raise FedsparseError(f"query: {one_line(exc)}") from None
    if len(statements) != 1:
        raise FedsparseError(f"query: expected one SQL statement, got {len(statements)}")
    kind = statements[0].type
    if kind == duckdb.StatementType.MULTI:  # PIVOT without IN (...) first creates a type
        raise FedsparseError(
            "query: only a read-only SELECT is allowed; PIVOT needs its values listed: "
            "PIVOT runs ON algorithm IN ('fedht', 'distiht') USING ..."
        )
    if kind != duckdb.StatementType.SELECT:
        raise FedsparseError(
            f"query: only a read-only SELECT is allowed, not {kind.name} "
            "(write results with --format csv|parquet -o FILE)"
        )
    return execute(results, sql)


def execute(results: Results, sql: str) -> pa.RecordBatchReader:
    try:
        return results.con.sql(sql).to_arrow_reader(BATCH_ROWS)
    except duckdb.Error as exc:
        raise FedsparseError(f"query: {one_line(exc)}") from None


def warn_conflicts(conflicts: list[str], stacklevel: int = 3) -> None:
    """Warn of runs whose trace rows differ between the folders read (``stacklevel`` as
    :func:`warnings.warn` counts it from here: 3 is the caller's caller)."""
    if conflicts:
        shown = ", ".join(conflicts[:3]) + (", ..." if len(conflicts) > 3 else "")
        warnings.warn(
            f"{len(conflicts)} run(s) have different trace rows in different folders "
            f"(kept: the folder where the run is ok, else the first given): {shown}",
            ResultsConflictWarning,
            stacklevel=stacklevel,
        )


def scalar(con: duckdb.DuckDBPyConnection, sql: str) -> object:
    return scalar_row(con, sql)[0]


def scalar_row(con: duckdb.DuckDBPyConnection, sql: str) -> tuple:
    try:  # fetch all: DuckDB refuses unfinished results
        return con.execute(sql).fetchall()[0]
    except duckdb.Error as exc:
        raise FedsparseError(f"query: {one_line(exc)}") from None
