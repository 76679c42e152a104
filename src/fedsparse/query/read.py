"""The one reader of results folders (``RESULTS/runs.parquet`` and the hive-partitioned
``RESULTS/traces/``): ``fedsparse query``, ``best`` and ``merge``, the report and
:func:`read_traces` all see the rows of :func:`results_views`, which applies the one rule for a
run found more than once:

    A run (one run_id) found in several folders is kept once: from the folder where it
    finished ok, else from the first one given; its runs row and its trace rows both come
    from that folder.

Within one folder a run is there once (aggregate refuses a run found in two shards, merge
writes the union once), so a single folder is read as it is. Files of older schema versions
read as the current schema, as :func:`fedsparse.results.schema.upgrade` makes them (renamed columns
under their new names, added columns filled as it fills them).
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import pyarrow as pa

from ..errors import FedsparseError, MissingResultsError, one_line
from ..layout import Layout
from ..results.schema import RENAMED_RUNS_COLUMNS, RUNS_SCHEMA, TOTALS, TRACE_SCHEMA, upgrade

_SQL_TYPES = {pa.string(): "VARCHAR", pa.int64(): "BIGINT", pa.float64(): "DOUBLE"}


def check_results_folder(folder: str | Path) -> Path:
    """``folder`` as an absolute path, or a MissingResultsError naming what is missing."""
    folder = Path(folder)
    if not folder.is_dir():
        raise MissingResultsError(f"{folder}: no such results folder")
    layout = Layout(folder)
    for path, shown in ((layout.runs, layout.runs.name), (layout.traces, f"{layout.traces.name}/")):
        if not path.exists():
            raise MissingResultsError(f"{folder}: no {shown} here (not a results folder?)")
    return folder.absolute()


def results_views(con, folders: list[str | Path]) -> list[Path]:
    """Create the views ``runs`` (RUNS_SCHEMA columns) and ``traces`` (TRACE_SCHEMA columns,
    partition columns as strings) of ``folders`` in the DuckDB connection ``con``.

    Several folders read as their union under the rule (the module docstring). Returns the
    folders read: checked, absolute, each once. Errors are FedsparseErrors of one line naming
    the folder.
    """
    paths = list(dict.fromkeys(check_results_folder(f) for f in folders))  # each folder once
    if not paths:
        raise FedsparseError("no results folder given")
    try:
        for i, folder in enumerate(paths):  # one folder: the views themselves
            runs, traces = ("runs", "traces") if len(paths) == 1 else (f"_runs_{i}", f"_traces_{i}")
            con.execute(f"CREATE VIEW {runs} AS {_runs_source(con, folder)}")
            con.execute(f"CREATE VIEW {traces} AS {_traces_source(con, folder)}")
    except duckdb.Error as exc:
        raise FedsparseError(f"reading {folder}: {one_line(exc)}") from None
    if len(paths) > 1:
        _union_views(con, len(paths))
    return paths


def conflicting_runs(con, n_folders: int) -> list[str]:
    """Run ids whose trace rows differ between the folders of ``results_views`` (timings and
    the sweep label aside, which legitimately differ between two executions of a run)."""
    if n_folders < 2:
        return []
    skipped = ("elapsed_s", "sweep")
    compared = ", ".join(sql_ident(f.name) for f in TRACE_SCHEMA if f.name not in skipped)
    rows = con.execute(
        f"""SELECT run_id FROM (
              SELECT run_id, _folder, count(*) AS n, sum(hash({compared})::HUGEINT) AS h
              FROM _traces_all GROUP BY run_id, _folder)
            GROUP BY run_id HAVING min(n) <> max(n) OR min(h) <> max(h) ORDER BY run_id"""
    ).fetchall()
    return [r[0] for r in rows]


def keep_runs_once(con, n_folders: int) -> None:
    """Work out once, into a table, which folder of ``results_views`` each run is kept from
    (the views otherwise apply the rule at each query): for a reader that scans the views
    many times, as merge does."""
    if n_folders > 1:
        con.execute("CREATE TABLE _kept_rows AS SELECT * FROM _kept_rule")
        con.execute("CREATE OR REPLACE VIEW _kept AS SELECT * FROM _kept_rows")


def runs_per_folder(con, n_folders: int) -> list[int]:
    """How many runs each folder of ``results_views`` holds (before the rule keeps one)."""
    if n_folders < 2:
        return [con.execute("SELECT count(*) FROM runs").fetchall()[0][0]]
    found = dict(con.execute("SELECT _folder, count(*) FROM _runs_all GROUP BY 1").fetchall())
    return [found.get(i, 0) for i in range(n_folders)]


def read_results(folders: list[str | Path], sql: str) -> pa.Table:
    """The rows of ``sql`` (a SELECT over the views ``runs`` and ``traces``) on ``folders``."""
    con = duckdb.connect(":memory:")
    try:
        results_views(con, folders)
        return con.sql(sql).to_arrow_table()
    except duckdb.Error as exc:
        raise FedsparseError(f"reading {', '.join(map(str, folders))}: {one_line(exc)}") from None
    finally:
        con.close()


def read_traces(results_dir: str | Path) -> pa.Table:
    """All traces of a results folder, partition columns as strings, TRACE_SCHEMA order."""
    return read_results([results_dir], "SELECT * FROM traces").cast(TRACE_SCHEMA)


def sql_quote(text: str) -> str:
    """``text`` as a SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def sql_ident(name: str) -> str:
    """``name`` as a quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def _runs_source(con, folder: Path) -> str:
    source = f"read_parquet({sql_quote(str(Layout(folder).runs))})"
    runs = _conformed(con, source, RUNS_SCHEMA)
    if not con.execute(f"SELECT count(*) FROM ({runs}) WHERE total_bytes_up IS NULL").fetchone()[0]:
        return runs
    # runs written before schema 3 (or resumed from a run store they wrote): the TOTALS from
    # their traces, so that old results still have fronts; current files never scan traces
    last = ", ".join(
        f"arg_max({sql_ident(col)}, round) AS {sql_ident(name)}" for name, col in TOTALS.items()
    )
    filled = ", ".join(
        f"CAST(coalesce(r.{sql_ident(n)}, t.{sql_ident(n)}) AS "
        f"{_SQL_TYPES[RUNS_SCHEMA.field(n).type]}) AS {sql_ident(n)}"
        for n in TOTALS
    )
    return (
        f"SELECT r.* REPLACE ({filled}) FROM ({runs}) r LEFT JOIN "
        f"(SELECT run_id, {last} FROM ({_traces_source(con, folder)}) GROUP BY run_id) t "
        "USING (run_id)"
    )


def _traces_source(con, folder: Path) -> str:
    traces = Layout(folder).traces
    if not any(traces.rglob("*.parquet")):  # a folder without runs
        return _conformed(con, "(SELECT 1 WHERE false)", TRACE_SCHEMA)
    glob = sql_quote(str(traces / "**" / "*.parquet"))
    # one folder's files share a schema (aggregate writes them together), so no union_by_name,
    # which would read every file's footer each time a view is bound
    source = (
        f"read_parquet({glob}, hive_partitioning = true, "
        "hive_types = {'dataset': VARCHAR, 'algorithm': VARCHAR})"
    )
    return _conformed(con, source, TRACE_SCHEMA)


def _conformed(con, source: str, schema: pa.Schema) -> str:
    """SELECT of ``schema``'s columns, typed and in order, from files of any schema version:
    a renamed column under its new name, a column the files lack as
    :func:`~fedsparse.results.schema.upgrade` fills it."""
    present = {row[0] for row in con.execute(f"DESCRIBE SELECT * FROM {source}").fetchall()}
    renamed = {new: old for old, new in RENAMED_RUNS_COLUMNS.items() if old in present}
    filled = upgrade(pa.table({"_probe": pa.nulls(1)}), schema)  # one row of fill values
    cols = []
    for f in schema:
        if f.name in present:
            value = sql_ident(f.name)
        elif f.name in renamed:
            value = sql_ident(renamed[f.name])
        else:
            value = _sql_literal(filled.column(f.name)[0].as_py())
        cols.append(f"CAST({value} AS {_SQL_TYPES[f.type]}) AS {sql_ident(f.name)}")
    return f"SELECT {', '.join(cols)} FROM {source}"


def _sql_literal(value: str | float | None) -> str:
    if value is None:
        return "NULL"
    return sql_quote(value) if isinstance(value, str) else repr(value)


def _union_views(con, n: int) -> None:
    """The views ``runs`` and ``traces`` of the union of the folders' views, by the rule."""
    for name in ("runs", "traces"):
        union = " UNION ALL ".join(f"SELECT {i} AS _folder, * FROM _{name}_{i}" for i in range(n))
        con.execute(f"CREATE VIEW _{name}_all AS {union}")
    con.execute(  # the rule: per run, the first folder where it is ok, else the first folder
        """CREATE VIEW _kept_rule AS SELECT run_id, _folder FROM (
             SELECT run_id, _folder, row_number() OVER (
               PARTITION BY run_id ORDER BY coalesce(status = 'ok', false) DESC, _folder) AS k
             FROM _runs_all) WHERE k = 1"""
    )
    con.execute("CREATE VIEW _kept AS SELECT * FROM _kept_rule")
    for name in ("runs", "traces"):
        con.execute(
            f"CREATE VIEW {name} AS SELECT * EXCLUDE (_folder) FROM _{name}_all "
            "SEMI JOIN _kept USING (run_id, _folder)"
        )
