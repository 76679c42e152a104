"""Query results folders with DuckDB SQL; best configurations; merge folders from several machines.

``open_results(folders)`` gives a DuckDB connection with two views:

* ``traces``: the hive-partitioned ``RESULTS/traces/`` dataset, exactly the TRACE_SCHEMA columns;
* ``runs``: ``RESULTS/runs.parquet``, exactly the RUNS_SCHEMA columns.

Several folders read as their union. A run (one ``run_id``, i.e. one normalised config)
found in several folders is kept once, from the folder where its status is ``ok``, else the
first one given. If its trace rows differ between folders (timings and the sweep label aside,
e.g. a different CPU changed the last bits) that is a *conflict*, reported as a
:class:`ResultsConflictWarning`. The views and the rule are
:func:`fedsparse.results.results_views`, which every reader of results folders uses.

The connection can read only the results folders (DuckDB's external access is switched off and
the configuration locked once the views exist), and :func:`run_query` accepts one SELECT only,
so a query can neither write files nor read anything else.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from .aggregate import ROW_GROUP_ROWS, install, stage_traces
from .atomic import atomic_write
from .edges import EDGE_COLUMNS, edge_phrase
from .errors import FedsparseError, FedsparseWarning
from .layout import Layout
from .results import (
    HYPERPARAMETER_COLUMNS,
    RUNS_SCHEMA,
    TRACE_SCHEMA,
    conflicting_runs,
    one_line,
    results_views,
    runs_per_folder,
    sql_ident,
    sql_quote,
)

FORMATS = ("table", "csv", "parquet")
DEFAULT_LIMIT = 40
BATCH_ROWS = 65_536

# best: metric -> (better, source, meaning). A diverged run scores the worst value (+inf when
# lower is better, -inf when higher is), so a configuration with any diverged seed ranks last.
METRICS = {
    "final_objective": ("lower", "runs", "training objective at the last round"),
    "best_objective": ("lower", "runs", "lowest training objective over the rounds"),
    "final_train_accuracy": ("higher", "traces", "training accuracy at the last round"),
    "final_test_accuracy": ("higher", "traces", "accuracy on the test split at the last round"),
    "final_dist_to_truth": ("lower", "traces", "distance to the true model (synthetic data)"),
    "final_train_loss": ("lower", "traces", "data loss of the global model at the last round"),
    "final_pm_test_accuracy": (
        "higher",
        "traces",
        "personalised models' accuracy on their clients' test rows at the last round",
    ),
}
# A configuration: everything that defines a run except its seed (and the sweep label, which
# is not part of the run id either).
BEST_CONFIG_COLUMNS = (
    "dataset",
    "algorithm",
    "partition",
    "loss",
    "model",
    "rounds",
    "step_time",
    "round_latency",
    "exchange_time",
    *HYPERPARAMETER_COLUMNS,
)


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
        _warn_conflicts(conflicts, stacklevel=4)
        yield Results(con, paths, conflicts)
    finally:
        con.close()


# ------------------------------------------------------------------------------ query / best


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
    return _execute(results, sql)


def best_configurations(
    results: Results, metric: str = "final_objective", by: Sequence[str] = ()
) -> pa.RecordBatchReader:
    """Per (``by``..., dataset, algorithm): the configuration with the best mean ``metric``
    over its seeds, with its number of seeds and of diverged runs, and ``grid_edges``: its
    hyperparameters at an edge of the values searched (fedsparse.edges; '' when none).

    Optuna trials are searches (pruned ones stop early), so as in the report only grid runs
    and the held-out re-runs of Optuna's best trials (trial_state HOLDOUT) are compared.
    """
    return _best_reader(results, _best_query(results, metric, by))


def _edges_sql(table: str) -> str:
    """The grid_edges cell of a configuration of ``table`` joined with its ``span`` row."""
    flags = [
        f"CASE WHEN {sql_ident('_n_' + c)} >= 2 AND {table}.{sql_ident(c)} = "
        f"{sql_ident(f'_{end}_' + c)} THEN {sql_quote(edge_phrase(c, side))} END"
        for c in EDGE_COLUMNS
        for end, side in (("lo", "lower"), ("hi", "upper"))
    ]
    return f"concat_ws('; ', {', '.join(flags)})"


def _span_sql(keys: str) -> str:
    """The CTE ``span``: per ``keys``, the values searched of each edge column (every run of
    the group, Optuna trials included)."""
    bounds = ", ".join(
        f"min({sql_ident(c)}) AS {sql_ident('_lo_' + c)}, "
        f"max({sql_ident(c)}) AS {sql_ident('_hi_' + c)}, "
        f"count(DISTINCT {sql_ident(c)}) AS {sql_ident('_n_' + c)}"
        for c in EDGE_COLUMNS
    )
    return f"span AS (SELECT {keys}, {bounds} FROM runs GROUP BY {keys})"


def _best_reader(results: Results, q: _BestQuery) -> pa.RecordBatchReader:
    edges = _edges_sql("ranked")
    on = " AND ".join(  # null-safe: a --by column may be null (e.g. study of a grid run)
        f"ranked.{sql_ident(c)} IS NOT DISTINCT FROM span.{sql_ident(c)}" for c in q.groups
    )
    return _execute(
        results,
        f"""{q.ctes}
        -- a group where no run has a value: the metric does not apply (e.g. no test split)
        SELECT ranked.* EXCLUDE (_n, _group_n, _rank), {edges} AS grid_edges
        FROM ranked JOIN span ON {on} WHERE _rank = 1 AND _group_n > 0
        ORDER BY {q.keys}""",
    )


@dataclass
class BestView:
    """What ``fedsparse best`` prints by default: the best configurations with only the
    columns that tell them apart, and notes on what was left out."""

    table: pa.Table
    notes: list[str]


def best_view(
    results: Results, metric: str = "final_objective", by: Sequence[str] = ()
) -> BestView:
    """:func:`best_configurations` for reading: the ``by`` columns, dataset and algorithm, the
    configuration columns that take two or more values (null counts as one: set for one
    algorithm, unset for another) among the configurations compared, the mean metric, seeds,
    diverged and grid_edges (short: ``stepsize lower``). A configuration column with one value
    everywhere is named in a note instead; one that no run sets is left out. Files keep every
    column: scripts get the same schema whatever the results hold.
    """
    q = _best_query(results, metric, by)
    config = [c for c in q.config if c not in q.groups]
    counts = ", ".join(  # distinct values, null counted as a value of its own
        f"count(DISTINCT {sql_ident(c)}) + (count(*) > count({sql_ident(c)}))::INT" for c in config
    )
    values = ", ".join(f"any_value({sql_ident(c)})" for c in config)
    row = _scalar_row(
        results.con, f"{q.ctes} SELECT {counts}, {values} FROM ranked WHERE _group_n > 0"
    )
    n, one = row[: len(config)], row[len(config) :]
    return _compact(_best_reader(results, q).read_all(), config, n, one)


def _compact(
    table: pa.Table,
    config: list[str],
    n: Sequence[int],
    one: Sequence,
    edges_note: str = "grid_edges: the best value is at the lower/upper edge of those "
    "searched; extend the grid there",
) -> BestView:
    """``table`` without the ``config`` columns that take one value (``n``: distinct values
    of each among the configurations compared, ``one``: a value of each), grid_edges short,
    and the notes saying what was left out."""
    varying = {c for c, k in zip(config, n, strict=True) if k > 1}
    shown = [c for c in table.column_names if c not in config or c in varying]
    table = table.select(shown)
    short = {
        edge_phrase(c, side): f"{c} {side}" for c in EDGE_COLUMNS for side in ("lower", "upper")
    }
    edges = [
        ", ".join(short.get(f, f) for f in cell.split("; ") if f)
        for cell in table["grid_edges"].to_pylist()
    ]
    table = table.set_column(table.num_columns - 1, "grid_edges", pa.array(edges, pa.string()))
    notes = []
    single = [(c, v) for c, k, v in zip(config, n, one, strict=True) if k == 1]
    same = [f"{c} {_cell(v)}" for c, v in single if v is not None]
    if same:
        notes.append("the same in every configuration: " + ", ".join(same))
    if any(edges):
        notes.append(edges_note)
    unset = len(single) - len(same)
    unset_note = f"not shown: {unset} columns no run sets; " if unset else ""
    notes.append(f"{unset_note}--all-columns shows every column")
    return BestView(table, notes)


@dataclass
class _BestQuery:
    ctes: str  # WITH span, scored, configs, ranked
    groups: list[str]  # the by columns, dataset, algorithm
    config: list[str]  # the columns that define a configuration (groups first)
    keys: str  # groups as SQL


def _best_query(results: Results, metric: str, by: Sequence[str]) -> _BestQuery:
    """The common table expressions of :func:`best_configurations`, after checking the metric
    and the ``by`` columns against these results."""
    _check_arguments(results, metric, by)
    better = METRICS[metric][0]
    value, join = _metric_value(metric)
    worst = "'inf'::DOUBLE" if better == "lower" else "'-inf'::DOUBLE"
    groups = [*dict.fromkeys([*by, "dataset", "algorithm"])]
    config = [*dict.fromkeys([*groups, *BEST_CONFIG_COLUMNS])]
    mean = sql_ident(f"mean_{metric}")
    order = "ASC" if better == "lower" else "DESC"
    cols, keys = ", ".join(map(sql_ident, config)), ", ".join(map(sql_ident, groups))
    tiebreak = ", ".join(f"{sql_ident(c)} NULLS FIRST" for c in config)  # deterministic ties
    ctes = f"""
        WITH {_span_sql(keys)},
        scored AS (  -- helper names start with _: a hyperparameter may be called k or n
          SELECT r.*, {value} AS _value,
                 CASE WHEN r.status = 'diverged' THEN {worst} ELSE {value} END AS _score
          FROM runs r {join}
          WHERE {_COMPARED}),
        configs AS (
          SELECT {cols}, avg(_score) AS {mean}, count(DISTINCT seed) AS seeds,
                 count(*) FILTER (WHERE status = 'diverged') AS diverged, count(_value) AS _n
          FROM scored GROUP BY {cols}),
        ranked AS (
          SELECT *, max(_n) OVER (PARTITION BY {keys}) AS _group_n, row_number() OVER (
            PARTITION BY {keys} ORDER BY {mean} {order} NULLS LAST, {tiebreak}) AS _rank
          FROM configs)"""
    return _BestQuery(ctes, groups, config, keys)


def _check_arguments(results: Results, metric: str, by: Sequence[str]) -> None:
    """One-line errors for an unknown metric, one these results lack, or a bad --by."""
    if metric not in METRICS:
        raise FedsparseError(f"best: unknown metric {metric!r} (known: {', '.join(METRICS)})")
    unknown = [c for c in by if c not in RUNS_SCHEMA.names]
    if unknown:
        raise FedsparseError(f"best: --by {unknown[0]}: not a column of runs.parquet")
    value, join = _metric_value(metric)
    valued = f"SELECT count(*) FROM runs r {join} WHERE ({_COMPARED}) AND {value} IS NOT NULL"
    if not _scalar(results.con, valued):
        have = ", ".join(available_metrics(results)) or "none"
        raise FedsparseError(
            f"best: --metric {metric}: no grid or held-out run in these results has one "
            f"(these results have: {have})"
        )


# Grid runs and the held-out re-runs of Optuna's best trials; other trials are searches.
_COMPARED = "r.trial_state IS NULL OR r.trial_state = 'HOLDOUT'"


def _metric_value(metric: str) -> tuple[str, str]:
    """The SQL value of ``metric`` for a run ``r`` and the join it needs."""
    if METRICS[metric][1] == "runs":
        return f"r.{metric}", ""
    column = metric.removeprefix("final_")  # the value at the run's last evaluated round
    return "t.value", (
        f"LEFT JOIN (SELECT run_id, arg_max({column}, round) AS value FROM traces "
        "GROUP BY run_id) t USING (run_id)"
    )


def available_metrics(results: Results) -> list[str]:
    """The metrics of :data:`METRICS` that some grid or held-out run of ``results`` has."""
    last = [m.removeprefix("final_") for m, (_, src, _) in METRICS.items() if src == "traces"]
    values = ", ".join(f"arg_max({sql_ident(c)}, round) AS {sql_ident(c)}" for c in last)
    counts = ", ".join(
        f"count(r.{m})" if src == "runs" else f"count(t.{sql_ident(m.removeprefix('final_'))})"
        for m, (_, src, _) in METRICS.items()
    )
    row = _scalar_row(
        results.con,
        f"SELECT {counts} FROM runs r LEFT JOIN (SELECT run_id, {values} FROM traces "
        f"GROUP BY run_id) t USING (run_id) WHERE {_COMPARED}",
    )
    return [m for m, n in zip(METRICS, row, strict=True) if n]


# ------------------------------------------------------------------------------ best --pareto

# What a front trades the metric against (lower is better): runs columns, as SQL over ``r``.
PARETO_COLUMNS = {
    "total_bytes_up": ("r.total_bytes_up", "bytes the clients sent over the run"),
    "total_bytes_down": ("r.total_bytes_down", "bytes the server sent over the run"),
    "total_bytes": ("r.total_bytes_up + r.total_bytes_down", "bytes sent up and down"),
    "total_time": ("r.total_time", "simulated time of the run's time_model"),
    "train_time_s": ("r.train_time_s", "training wall-clock seconds"),
}


def pareto_front(metric: Sequence[float], cost: Sequence[float], higher: bool) -> np.ndarray:
    """Which points are on the front: no other point is at least as good on both the metric
    (``higher``: higher is better) and the cost (lower is better) and strictly better on one.
    Points equal on both do not dominate each other, so all of them are kept. Every value must
    be finite (the callers leave out the others)."""
    m = np.asarray(metric, dtype=float)
    m = m if higher else -m  # from here on: higher metric, lower cost
    c = np.asarray(cost, dtype=float)
    if not (np.isfinite(m).all() and np.isfinite(c).all()):
        raise ValueError("pareto_front: every value must be finite")
    on = np.zeros(len(m), dtype=bool)
    order = np.lexsort((-m, c))  # cost ascending, the best metric first within a cost
    best_cheaper = -np.inf  # the best metric of the points strictly cheaper than this cost
    i = 0
    while i < len(order):
        j = i
        while j < len(order) and c[order[j]] == c[order[i]]:
            j += 1
        group = order[i:j]
        top = m[group[0]]
        # at this cost only the group's best are undominated, and only if nothing cheaper is
        # as good
        if top > best_cheaper:
            on[group[m[group] == top]] = True
        best_cheaper = max(best_cheaper, top)
        i = j
    return on


@dataclass
class _Pareto:
    table: pa.Table  # every configuration; _eligible and _front say which are on the front
    config: list[str]  # the configuration columns other than the front's groups
    groups: list[str]  # the by columns and dataset: one front each
    metric: str
    column: str


def _pareto(results: Results, metric: str, column: str, by: Sequence[str]) -> _Pareto:
    """Every configuration (mean over seeds) with its mean metric and column, seeds, grid
    edges and whether it is eligible (no diverged run, every run with a finite metric and
    column) and on its group's front."""
    if column not in PARETO_COLUMNS:
        raise FedsparseError(
            f"best: --pareto {column}: not a cost column (one of: {', '.join(PARETO_COLUMNS)})"
        )
    _check_arguments(results, metric, by)
    cost = PARETO_COLUMNS[column][0]
    if not _scalar(results.con, f"SELECT count({cost}) FROM runs r WHERE {_COMPARED}"):
        raise FedsparseError(
            f"best: --pareto {column}: no grid or held-out run in these results has one"
        )
    value, join = _metric_value(metric)
    groups = [*dict.fromkeys([*by, "dataset"])]
    span_keys = [*dict.fromkeys([*groups, "algorithm"])]  # the values each algorithm searched
    config = [*dict.fromkeys([*span_keys, *BEST_CONFIG_COLUMNS])]
    cols, keys = ", ".join(map(sql_ident, config)), ", ".join(map(sql_ident, span_keys))
    on = " AND ".join(
        f"configs.{sql_ident(c)} IS NOT DISTINCT FROM span.{sql_ident(c)}" for c in span_keys
    )
    mean_m, mean_c = sql_ident(f"mean_{metric}"), sql_ident(f"mean_{column}")
    table = _execute(
        results,
        f"""WITH {_span_sql(keys)},
        scored AS (
          SELECT r.*, CAST({value} AS DOUBLE) AS _value, CAST({cost} AS DOUBLE) AS _cost
          FROM runs r {join} WHERE {_COMPARED}),
        configs AS (
          SELECT {cols}, avg(_value) AS {mean_m}, avg(_cost) AS {mean_c},
                 count(DISTINCT seed) AS seeds,
                 -- a diverged run, or one without a finite value, keeps its configuration off
                 -- the front (a diverged run's tiny byte count would otherwise win there)
                 count(*) FILTER (WHERE status = 'diverged') = 0 AND count(*) = count(*) FILTER (
                   WHERE isfinite(_value) AND isfinite(_cost)) AS _eligible,
                 count(_value) AS _n
          FROM scored GROUP BY {cols})
        -- a data set where no run has a value: the metric does not apply (e.g. no test split)
        SELECT * EXCLUDE (_n, _group_n) FROM (
          SELECT configs.*, {_edges_sql("configs")} AS grid_edges,
                 sum(_n) OVER (PARTITION BY {", ".join(f"configs.{sql_ident(g)}" for g in groups)})
                   AS _group_n
          FROM configs JOIN span ON {on})
        WHERE _group_n > 0
        ORDER BY {", ".join(f"{sql_ident(c)} NULLS FIRST" for c in config)}""",
    ).read_all()
    eligible = np.asarray(table["_eligible"].to_pylist(), dtype=bool)
    front = np.zeros(table.num_rows, dtype=bool)
    members: dict[tuple, list[int]] = {}
    for i, key in enumerate(zip(*(table[g].to_pylist() for g in groups), strict=True)):
        if eligible[i]:
            members.setdefault(key, []).append(i)
    m, c = table[f"mean_{metric}"].to_numpy(), table[f"mean_{column}"].to_numpy()
    higher = METRICS[metric][0] == "higher"
    for idx in members.values():
        front[idx] = pareto_front(m[idx], c[idx], higher)
    table = table.append_column("_front", pa.array(front))
    return _Pareto(table, [c for c in config if c not in groups], groups, metric, column)


def pareto_candidates(
    results: Results, metric: str, column: str, by: Sequence[str] = ()
) -> pa.Table:
    """Every configuration compared for the fronts of :func:`pareto_configurations`, with
    ``eligible`` (no diverged run; every run has a finite metric and column) and ``front``."""
    p = _pareto(results, metric, column, by)
    return p.table.rename_columns(
        [{"_eligible": "eligible", "_front": "front"}.get(n, n) for n in p.table.column_names]
    )


def pareto_configurations(
    results: Results,
    metric: str = "final_objective",
    column: str = "total_bytes_up",
    by: Sequence[str] = (),
) -> pa.Table:
    """Per (``by``..., dataset): the configurations (mean over seeds) that no other one beats
    on both the metric and ``column`` (lower is better; :data:`PARETO_COLUMNS`), cheapest
    first, with both means, seeds and grid_edges. A configuration with a diverged run, or a
    run without a finite metric or column, is left out; configurations equal on both are all
    kept. Compared, as in :func:`best_configurations`: grid runs and held-out re-runs."""
    return _front_rows(_pareto(results, metric, column, by))


def _front_rows(p: _Pareto) -> pa.Table:
    t = p.table.filter(pc.field("_front")).drop_columns(["_eligible", "_front"])
    better = "descending" if METRICS[p.metric][0] == "higher" else "ascending"
    keys = [(g, "ascending") for g in p.groups]
    keys += [
        (f"mean_{p.column}", "ascending"),
        (f"mean_{p.metric}", better),
        ("algorithm", "ascending"),
    ]
    return t.sort_by(keys)


def pareto_view(
    results: Results,
    metric: str = "final_objective",
    column: str = "total_bytes_up",
    by: Sequence[str] = (),
) -> BestView:
    """:func:`pareto_configurations` for reading, as :func:`best_view` shows the best: the
    configuration columns that differ among the configurations compared, and notes."""
    p = _pareto(results, metric, column, by)
    compared = p.table.filter(pc.field("_eligible"))
    n, one = [], []
    for c in p.config:  # distinct values, null counted as a value of its own
        values = compared[c].to_pylist()
        n.append(len(set(values)))
        one.append(next((v for v in values if v is not None), None))
    view = _compact(
        _front_rows(p),
        p.config,
        n,
        one,
        "grid_edges: a front configuration's value is at the lower/upper edge of those its "
        "algorithm searched; the front may extend beyond the grid there",
    )
    left_out = p.table.num_rows - compared.num_rows
    better = METRICS[p.metric][0]
    view.notes.insert(
        0,
        f"the front per data set: the configurations no other beats on both mean {p.metric} "
        f"({better} is better) and mean {p.column} (lower is better); ties on both are all "
        f"kept; {compared.num_rows} configurations compared"
        + (f"; {left_out} more left out (a diverged run, or no finite value)" if left_out else ""),
    )
    return view


def _execute(results: Results, sql: str) -> pa.RecordBatchReader:
    try:
        return results.con.sql(sql).to_arrow_reader(BATCH_ROWS)
    except duckdb.Error as exc:
        raise FedsparseError(f"query: {one_line(exc)}") from None


# ------------------------------------------------------------------------------ output


def output_format(fmt: str | None, output: str | Path | None) -> str:
    """The output format: ``fmt``, else from ``output``'s suffix, else table. Checked before
    any query runs, so a wrong combination costs nothing and writes nothing."""
    if fmt is None:
        if output is None:
            return "table"
        suffix = Path(output).suffix.lower()
        if suffix in (".csv", ".parquet"):
            return suffix[1:]
        raise FedsparseError(f"-o {output}: give --format csv or parquet (or a .csv/.parquet name)")
    if fmt not in FORMATS:
        raise FedsparseError(f"--format {fmt}: must be one of {', '.join(FORMATS)}")
    if fmt == "table" and output is not None:
        raise FedsparseError("--format table prints to the terminal; use csv or parquet with -o")
    if fmt == "parquet" and output is None:
        raise FedsparseError("--format parquet needs -o FILE")
    return fmt


def write_rows(
    reader: pa.RecordBatchReader,
    fmt: str,
    output: str | Path | None = None,
    limit: int = DEFAULT_LIMIT,
    stdout: TextIO | None = None,
) -> int:
    """Write the rows as a table (at most ``limit`` rows, 0 = all), CSV or Parquet; files
    atomically. Return the number of rows."""
    stdout = stdout or sys.stdout
    try:
        if fmt == "table":
            return _print_table(reader, limit, stdout)
        if output is None:  # csv on stdout
            stdout.flush()
            return _write_batches(reader, pacsv.CSVWriter(stdout.buffer, reader.schema))
        with atomic_write(output) as fh:
            writer = pacsv.CSVWriter if fmt == "csv" else pq.ParquetWriter
            return _write_batches(reader, writer(fh, reader.schema))
    except duckdb.Error as exc:  # errors raised while the rows are computed
        raise FedsparseError(f"query: {one_line(exc)}") from None


def _write_batches(reader: pa.RecordBatchReader, writer) -> int:
    """Stream ``reader`` into a pyarrow CSV or Parquet writer; return the number of rows."""
    rows = 0
    with writer:
        for batch in reader:
            writer.write_batch(batch)
            rows += batch.num_rows
    return rows


def _print_table(reader: pa.RecordBatchReader, limit: int, out: TextIO) -> int:
    shown: list[pa.RecordBatch] = []
    kept = total = 0
    for batch in reader:
        if limit <= 0 or kept < limit:
            take = batch.num_rows if limit <= 0 else min(batch.num_rows, limit - kept)
            shown.append(batch.slice(0, take))
            kept += take
        total += batch.num_rows
    out.write(format_table(pa.Table.from_batches(shown, schema=reader.schema)))
    if total > kept:
        out.write(f"... {total - kept} more rows not shown ({total} in all; --limit 0 shows all)\n")
    else:
        out.write(f"({total} row{'s' if total != 1 else ''})\n")
    return total


def format_table(table: pa.Table) -> str:
    """An aligned plain-text table: numbers right-aligned, nulls shown as NULL."""
    names = table.column_names
    numeric = [
        pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)
        for t in table.schema.types
    ]
    cells = [[_cell(v) for v in col.to_pylist()] for col in table.columns]
    widths = [max([len(n), *map(len, c)]) for n, c in zip(names, cells, strict=True)]

    def line(values: list[str]) -> str:
        parts = [
            v.rjust(w) if num else v.ljust(w)
            for v, w, num in zip(values, widths, numeric, strict=True)
        ]
        return "  ".join(parts).rstrip() + "\n"

    text = line(names) + line(["-" * w for w in widths])
    for i in range(table.num_rows):
        text += line([c[i] for c in cells])
    return text


def _cell(v: object) -> str:
    if v is None:
        return "NULL"
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v).replace("\n", "\\n")


# ------------------------------------------------------------------------------ merge


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
                _warn_conflicts(conflicts)
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
            n_runs = _scalar(con, "SELECT count(*) FROM runs")
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


def _warn_conflicts(conflicts: list[str], stacklevel: int = 3) -> None:
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


# ------------------------------------------------------------------------------ helpers


def _scalar(con: duckdb.DuckDBPyConnection, sql: str) -> object:
    return _scalar_row(con, sql)[0]


def _scalar_row(con: duckdb.DuckDBPyConnection, sql: str) -> tuple:
    try:  # fetch all: DuckDB refuses unfinished results
        return con.execute(sql).fetchall()[0]
    except duckdb.Error as exc:
        raise FedsparseError(f"query: {one_line(exc)}") from None
