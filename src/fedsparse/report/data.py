"""What a report build reads, read once: :class:`ReportData`.

A build opens one ``ReportData`` over its results folder (or several, as their union under
:func:`fedsparse.query.read.results_views`'s rule) and hands it to every page. It holds

* ``con``: one DuckDB connection with the views ``traces`` (the Parquet dataset, never loaded
  whole) and ``runs`` (the runs table below, not the file again);
* the runs table, read once: every RUNS_SCHEMA column but the long JSON ones
  (``config_json``, ``client_summary``), with the facts the pages need from a run's
  normalised config computed once as columns (:data:`FACTS`): ``center``, ``source``,
  ``clients`` and ``k_sequence_run``; as Arrow (``runs_table``), in pandas the columns a page
  asks for (:meth:`run_frame`);
* methods that run SQL over the traces and return only what a table or figure needs: each
  run's lowest finite objective (:meth:`run_minima`, one row per run), the trace rows of
  chosen runs (:meth:`trace_rows`), or any SELECT (:meth:`frame`), also over small tables a page
  computed, such as each run's configuration (:meth:`frame_with`).

Every query is logged in ``queries`` as (SQL, rows returned) and the reads of the runs file
are counted in ``reads``, so a test can check that a build reads the runs once and never
materialises the traces.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow as pa

from ..errors import FedsparseError, one_line
from ..query.read import results_views, sql_ident, sql_quote
from ..results.schema import RUNS_SCHEMA, to_frame

__all__ = ["FACTS", "LONG_COLUMNS", "ReportData", "as_data"]

BATCH_ROWS = 65_536

# The runs columns left on disk (long JSON text): read for the runs that need them only.
LONG_COLUMNS = ("config_json", "client_summary")
# Facts of a run's normalised config (config_json) that pages use, as SQL computing a column.
FACTS = {
    # the simulation data's centring reading (none, the papers', by default)
    "center": "coalesce(json_extract_string(config_json, '$.dataset.center'), 'none')",
    # an image data set's source (fashion-mnist | mnist), '' when none
    "source": "coalesce(json_extract_string(config_json, '$.dataset.source'), '')",
    # clients: the partition's, else the data set's (null when neither says)
    "clients": "coalesce("
    "nullif(TRY_CAST(json_extract_string(config_json, '$.partition.clients') AS BIGINT), 0), "
    "nullif(TRY_CAST(json_extract_string(config_json, '$.dataset.clients') AS BIGINT), 0))",
    # a replay run's k sequence: the run it replays (null otherwise)
    "k_sequence_run": "json_extract_string(config_json, '$.params.k_sequence.run')",
}


class ReportData:
    """The results of one report build (see the module docstring)."""

    def __init__(self, folders: str | Path | Sequence[str | Path]):
        if isinstance(folders, str | Path):
            folders = [folders]
        self.con = duckdb.connect(":memory:")
        self.queries: list[tuple[str, int]] = []
        self.reads: Counter[str] = Counter()
        self._configs: dict[str, dict] = {}
        self.memo: dict[object, object] = {}  # what pages compute from it, once per build
        self._minima: pd.DataFrame | None = None
        try:
            self.folders = results_views(self.con, list(folders))
            self.runs_table = self._load_runs()
        except duckdb.Error as exc:
            self.close()
            where = ", ".join(map(str, folders))
            raise FedsparseError(f"reading {where}: {one_line(exc)}") from None
        except BaseException:
            self.close()
            raise

    def _load_runs(self) -> pa.Table:
        """Read the runs file once; from here on the view ``runs`` is this table. A column
        no run sets (most hyperparameters in a sweep of one family) is held as Arrow's null
        type, which takes no memory, and typed again where it is read."""
        kept = ", ".join(sql_ident(f.name) for f in RUNS_SCHEMA if f.name not in LONG_COLUMNS)
        facts = ", ".join(f"{sql} AS {sql_ident(name)}" for name, sql in FACTS.items())
        self.reads["runs"] += 1
        reader = self.con.sql(f"SELECT {kept}, {facts} FROM runs").to_arrow_reader(BATCH_ROWS)
        self.types = dict(zip(reader.schema.names, reader.schema.types, strict=True))
        chunks: dict[str, list[pa.Array]] = {name: [] for name in self.types}
        for batch in reader:  # streamed: a column of nulls is never held at its full width
            for name, col in zip(batch.schema.names, batch.columns, strict=True):
                unset = col.null_count == len(col)
                chunks[name].append(pa.nulls(len(col), pa.null()) if unset else col)
        columns = {}
        for name, parts in chunks.items():
            typ = self.types[name]
            if all(c.type == pa.null() for c in parts):
                typ = pa.null()
            else:
                parts = [pa.nulls(len(c), typ) if c.type == pa.null() else c for c in parts]
            columns[name] = pa.chunked_array(parts, typ)
        table = pa.table(columns)
        self.queries.append(("runs table", table.num_rows))
        self.con.execute("ALTER VIEW runs RENAME TO _runs_files")
        self.con.register("_runs_table", table)
        cols = ", ".join(
            f"CAST({sql_ident(n)} AS {_sql_type(self.types[n])}) AS {sql_ident(n)}"
            if table.schema.field(n).type == pa.null()
            else sql_ident(n)
            for n in table.column_names
            if n not in FACTS
        )
        self.con.execute(f"CREATE VIEW runs AS SELECT {cols} FROM _runs_table")
        return table

    # ------------------------------------------------------------------------ runs

    def run_frame(self, columns: Sequence[str] | None = None) -> pd.DataFrame:
        """The runs (``columns`` of the runs table, default all) as pandas with nullable
        integers, in the file's order: a new frame each call, so ask for what you use."""
        table = self.runs_table if columns is None else self.runs_table.select(list(columns))
        unset = self.unset_columns()
        return to_frame(
            pa.table(
                {
                    n: pa.nulls(table.num_rows, self.types[n]) if n in unset else c
                    for n, c in zip(table.column_names, table.columns, strict=True)
                }
            )
        )

    def unset_columns(self) -> set[str]:
        """The runs columns that no run sets (null everywhere)."""
        schema = self.runs_table.schema
        return {f.name for f in schema if f.type == pa.null()}

    def has(self, column: str) -> bool:
        """Whether some run sets ``column``."""
        return column not in self.unset_columns()

    def algorithms(self) -> set[str]:
        """The algorithms that have runs here."""
        return {a for a in self.runs_table.column("algorithm").unique().to_pylist() if a}

    def configs(self, run_ids: Iterable[str]) -> dict[str, dict]:
        """The normalised configs (``config_json``) of ``run_ids``, by run id ({} when a run
        has none), each parsed once per build."""
        wanted = {str(r) for r in run_ids}
        missing = sorted(wanted - self._configs.keys())
        if missing:
            ids = pa.table({"run_id": pa.array(missing, pa.string())})
            found = self._select_ids(
                "SELECT run_id, config_json FROM _runs_files WHERE run_id IN "
                "(SELECT run_id FROM _ids)",
                ids,
            )
            for rid, text in zip(found["run_id"], found["config_json"], strict=True):
                self._configs[str(rid)] = json.loads(text) if isinstance(text, str) else {}
            for rid in missing:
                self._configs.setdefault(rid, {})
        return {rid: self._configs[rid] for rid in wanted}

    def client_summaries(self) -> pd.DataFrame:
        """run_id and client_summary (JSON records) of the runs that stored one."""
        return self.frame(
            "SELECT run_id, client_summary FROM _runs_files WHERE client_summary IS NOT NULL"
        )

    def client_summaries_of(self, run_ids: Iterable[str]) -> pd.DataFrame:
        """run_id and client_summary of those of ``run_ids`` that stored one, in the runs
        file's order (as :meth:`client_summaries`, for chosen runs only)."""
        ids = pa.table({"run_id": pa.array(sorted({str(r) for r in run_ids}), pa.string())})
        return self._select_ids(
            "SELECT run_id, client_summary FROM _runs_files WHERE client_summary IS NOT NULL "
            "AND run_id IN (SELECT run_id FROM _ids)",
            ids,
        )

    # ------------------------------------------------------------------------ traces

    def run_minima(self) -> pd.DataFrame:
        """Per run with trace rows: ``objective_min``, its lowest finite objective over the
        evaluated rounds (NaN when none is finite). One scan of the traces per build."""
        if self._minima is None:
            self._minima = self.frame(
                "SELECT run_id, min(objective) FILTER (WHERE isfinite(objective)) "
                "AS objective_min FROM traces WHERE round IS NOT NULL GROUP BY run_id "
                "ORDER BY run_id"
            )
        return self._minima

    def trace_rows(
        self, run_ids: Iterable[str], columns: Sequence[str], where: str = ""
    ) -> pa.Table:
        """The trace rows of some runs, as Arrow.

        Parameters
        ----------
        run_ids
            The runs (duplicates and order do not matter).
        columns
            Trace columns to read; ``run_id`` comes first whether named or not.
        where
            An SQL condition on the trace rows (``''``: every row).

        Returns
        -------
        pyarrow.Table
            The rows ordered by run id, then round.

        Raises
        ------
        FedsparseError
            One line naming the results folders, for a query DuckDB refuses (e.g. a bad ``where``).
        """
        ids = pa.table({"run_id": pa.array(sorted({str(r) for r in run_ids}), pa.string())})
        cols = ", ".join(sql_ident(c) for c in dict.fromkeys(["run_id", *columns]))
        cond = f" AND ({where})" if where else ""
        return self._select_ids(
            f"SELECT {cols} FROM traces WHERE run_id IN (SELECT run_id FROM _ids){cond} "
            "ORDER BY run_id, round",
            ids,
            arrow=True,
        )

    # ------------------------------------------------------------------------ SQL

    def frame(self, sql: str) -> pd.DataFrame:
        """The rows of a SELECT over ``runs`` and ``traces`` as pandas (nullable integers)."""
        return to_frame(self.arrow(sql))

    def arrow(self, sql: str) -> pa.Table:
        """The rows of a SELECT over ``runs`` and ``traces`` as Arrow."""
        try:
            table = self.con.sql(sql).to_arrow_table()
        except duckdb.Error as exc:
            where = ", ".join(map(str, self.folders))
            raise FedsparseError(f"reading {where}: {one_line(exc)}") from None
        self.queries.append((sql, table.num_rows))
        return table

    def frame_with(self, sql: str, **tables: pd.DataFrame) -> pd.DataFrame:
        """The rows of a SELECT that also reads small tables a page computed (e.g. run id ->
        configuration), each registered under its keyword's name for this query only."""
        for name, table in tables.items():
            self.con.register(name, pa.Table.from_pandas(table, preserve_index=False))
        try:
            return self.frame(sql)
        finally:
            for name in tables:
                self.con.unregister(name)

    def round_means(
        self, runs: pd.DataFrame, keys: list[str], means: dict[str, str]
    ) -> pd.DataFrame:
        """Mean curves per group of runs, computed in SQL without loading the trace rows.

        Parameters
        ----------
        runs
            One row per run: ``run_id``, and the ``keys`` columns that group them.
        keys
            The grouping columns of ``runs``.
        means
            Output column name to an SQL expression over the trace row ``t`` (e.g. ``t.objective``).

        Returns
        -------
        pandas.DataFrame
            Columns ``keys``, ``round``, then one per name of ``means``: the mean of its expression
            over the group's trace rows of that round where it is not NaN; ordered by ``keys`` then
            ``round``. Empty, with those columns, for no runs.
        """
        if runs.empty:
            return pd.DataFrame(columns=[*keys, "round", *means])
        names = ", ".join(f"k.{sql_ident(c)}" for c in keys)
        avgs = ", ".join(
            f"avg({sql}) FILTER (WHERE NOT isnan({sql})) AS {sql_ident(name)}"
            for name, sql in means.items()
        )
        return self.frame_with(
            f"SELECT {names}, t.round, {avgs} FROM traces t JOIN _keys k ON t.run_id = k.run_id "
            f"WHERE {partitions_of(runs)} GROUP BY {names}, t.round ORDER BY {names}, t.round",
            _keys=runs[["run_id", *keys]],
        )

    def _select_ids(self, sql: str, ids: pa.Table, arrow: bool = False):
        self.con.register("_ids", ids)
        try:
            table = self.arrow(sql)
        finally:
            self.con.unregister("_ids")
        return table if arrow else to_frame(table)

    def close(self) -> None:
        self.con.close()

    def __enter__(self) -> ReportData:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _sql_type(typ: pa.DataType) -> str:
    if pa.types.is_integer(typ):
        return "BIGINT"
    if pa.types.is_floating(typ):
        return "DOUBLE"
    return "VARCHAR"  # the runs table's other columns are strings


def as_data(source: ReportData | str | Path) -> ReportData:
    """``source`` if it is a ReportData, else one over the results folder ``source`` (for
    callers outside a build; a build opens one and passes it everywhere)."""
    return source if isinstance(source, ReportData) else ReportData(source)


def partitions_of(runs: pd.DataFrame, alias: str = "t") -> str:
    """The SQL condition on the traces' partition columns (``alias``.dataset, .algorithm) that
    holds for the rows of ``runs`` (its dataset and algorithm columns), so DuckDB reads only
    their files; false when there are none."""
    if runs.empty:
        return "false"

    def values(column: str) -> str:
        return ", ".join(sql_quote(str(v)) for v in sorted(set(runs[column].dropna())))

    return (
        f"{alias}.dataset IN ({values('dataset')}) AND {alias}.algorithm IN ({values('algorithm')})"
    )
