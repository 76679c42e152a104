"""``fedsparse best``: the best configuration per data set and algorithm (mean over seeds)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pyarrow as pa

from ..errors import FedsparseError
from ..results.schema import HYPERPARAMETER_COLUMNS, RUNS_SCHEMA
from .grid_edges import EDGE_COLUMNS, edge_phrase
from .printing import cell
from .read import sql_ident, sql_quote
from .views import Results, execute, scalar, scalar_row

# best: metric -> (better, source, meaning). A diverged run scores the worst value (+inf when
# lower is better, -inf when higher is), so a configuration with any diverged seed ranks last.
METRICS = {
    "final_objective": ("lower", "runs", "training objective at the last round"),
    "best_objective": ("lower", "runs", "lowest training objective over the rounds"),
    "final_train_accuracy": ("higher", "traces", "training accuracy at the last round"),
    "final_test_accuracy": ("higher", "traces", "accuracy on the test split at the last round"),
    "final_dist_to_truth": (
        "lower",
        "traces",
        "distance to the generator's mean client model (a true model only for linear data with "
        "shared_model: true)",
    ),
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


def best_configurations(
    results: Results, metric: str = "final_objective", by: Sequence[str] = ()
) -> pa.RecordBatchReader:
    """The best configuration, by mean ``metric`` over its seeds, per group.

    Only grid runs and the held-out re-runs of Optuna's best trials (``trial_state``
    ``HOLDOUT``) are compared: other trials are searches (pruned ones stop early). A diverged
    run scores the worst value, so a configuration with any diverged seed ranks last.

    Parameters
    ----------
    results
        The open results views (:func:`open_results`).
    metric
        A key of :data:`METRICS`.
    by
        Runs columns that split the groups further, before ``dataset`` and ``algorithm``.

    Returns
    -------
    pyarrow.RecordBatchReader
        One row per (``by``..., dataset, algorithm) where some run has a value of ``metric``,
        in that order: the configuration columns, ``mean_<metric>``, ``seeds``, ``diverged``
        (runs) and ``grid_edges`` (the hyperparameters at an edge of the values searched,
        :mod:`fedsparse.query.grid_edges`; ``''`` when none). Ties go to the first configuration by
        its columns, nulls first.

    Raises
    ------
    FedsparseError
        As :func:`check_arguments` raises.
    """
    return _best_reader(results, _best_query(results, metric, by))


def edges_sql(table: str) -> str:
    """The grid_edges cell of a configuration of ``table`` joined with its ``span`` row."""
    flags = [
        f"CASE WHEN {sql_ident('_n_' + c)} >= 2 AND {table}.{sql_ident(c)} = "
        f"{sql_ident(f'_{end}_' + c)} THEN {sql_quote(edge_phrase(c, side))} END"
        for c in EDGE_COLUMNS
        for end, side in (("lo", "lower"), ("hi", "upper"))
    ]
    return f"concat_ws('; ', {', '.join(flags)})"


def span_sql(keys: str) -> str:
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
    edges = edges_sql("ranked")
    on = " AND ".join(  # null-safe: a --by column may be null (e.g. study of a grid run)
        f"ranked.{sql_ident(c)} IS NOT DISTINCT FROM span.{sql_ident(c)}" for c in q.groups
    )
    return execute(
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
    """:func:`best_configurations` for reading: only the columns that tell configurations apart.

    Files keep every column instead, so that scripts get the same schema whatever the results
    hold.

    Parameters
    ----------
    results
        The open results views.
    metric
        A key of :data:`METRICS`.
    by
        Runs columns that split the groups further.

    Returns
    -------
    BestView
        The ``by`` columns, dataset and algorithm, the configuration columns that take two or
        more values among the configurations compared (null counts as a value), the mean
        metric, seeds, diverged and a short ``grid_edges`` (``stepsize lower``); notes name the
        columns of one value everywhere and count those no run sets.

    Raises
    ------
    FedsparseError
        As :func:`check_arguments` raises.
    """
    q = _best_query(results, metric, by)
    config = [c for c in q.config if c not in q.groups]
    counts = ", ".join(  # distinct values, null counted as a value of its own
        f"count(DISTINCT {sql_ident(c)}) + (count(*) > count({sql_ident(c)}))::INT" for c in config
    )
    values = ", ".join(f"any_value({sql_ident(c)})" for c in config)
    row = scalar_row(
        results.con, f"{q.ctes} SELECT {counts}, {values} FROM ranked WHERE _group_n > 0"
    )
    n, one = row[: len(config)], row[len(config) :]
    view = compact(_best_reader(results, q).read_all(), config, n, one)
    if metric == "final_dist_to_truth":
        view.notes.insert(0, DIST_TO_TRUTH_NOTE)
    return view


def compact(
    table: pa.Table,
    config: list[str],
    n: Sequence[int],
    one: Sequence,
    edges_note: str = "grid_edges: the best value is at the lower/upper edge of those "
    "searched; extend the grid there",
) -> BestView:
    """``table`` without the configuration columns that take one value, and notes saying so.

    Parameters
    ----------
    table
        Configurations, ``grid_edges`` its last column (long phrases, ``'; '``-separated).
    config
        The configuration columns that may be dropped.
    n
        The number of distinct values of each of ``config`` among the configurations compared.
    one
        A value of each of ``config`` (shown in the note where it is the only one).
    edges_note
        The note added when some configuration is at a grid edge.

    Returns
    -------
    BestView
        The table with the columns of ``config`` that take one value dropped and ``grid_edges``
        shortened (``stepsize lower``), and the notes: the shared values, ``edges_note`` if
        any, and how many columns no run sets.
    """
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
    same = [f"{c} {cell(v)}" for c, v in single if v is not None]
    if same:
        notes.append("the same in every configuration: " + ", ".join(same))
    if any(edges):
        notes.append(edges_note)
    unset = len(single) - len(same)
    unset_note = f"not shown: {unset} columns no run sets; " if unset else ""
    notes.append(f"{unset_note}--all-columns shows every column")
    return BestView(table, notes)


# under a table ranked by final_dist_to_truth: where it measures recovery and where it does not
DIST_TO_TRUTH_NOTE = (
    "final_dist_to_truth is the distance to the mean of the generator's client models: a true "
    "model only for linear data with shared_model: true. With per-client models it grows as "
    "training fits the data (the smallest step ranks best), and logistic data do not identify a "
    "model's scale; rank by the objective there (docs/results.md, The best configurations)"
)


@dataclass
class _BestQuery:
    ctes: str  # WITH span, scored, configs, ranked
    groups: list[str]  # the by columns, dataset, algorithm
    config: list[str]  # the columns that define a configuration (groups first)
    keys: str  # groups as SQL


def _best_query(results: Results, metric: str, by: Sequence[str]) -> _BestQuery:
    """The common table expressions of :func:`best_configurations`, after checking the metric
    and the ``by`` columns against these results."""
    check_arguments(results, metric, by)
    better = METRICS[metric][0]
    value, join = metric_value(metric)
    worst = "'inf'::DOUBLE" if better == "lower" else "'-inf'::DOUBLE"
    groups = [*dict.fromkeys([*by, "dataset", "algorithm"])]
    config = [*dict.fromkeys([*groups, *BEST_CONFIG_COLUMNS])]
    mean = sql_ident(f"mean_{metric}")
    order = "ASC" if better == "lower" else "DESC"
    cols, keys = ", ".join(map(sql_ident, config)), ", ".join(map(sql_ident, groups))
    tiebreak = ", ".join(f"{sql_ident(c)} NULLS FIRST" for c in config)  # deterministic ties
    ctes = f"""
        WITH {span_sql(keys)},
        scored AS (  -- helper names start with _: a hyperparameter may be called k or n
          SELECT r.*, {value} AS _value,
                 CASE WHEN r.status = 'diverged' THEN {worst} ELSE {value} END AS _score
          FROM runs r {join}
          WHERE {COMPARED}),
        configs AS (
          SELECT {cols}, avg(_score) AS {mean}, count(DISTINCT seed) AS seeds,
                 count(*) FILTER (WHERE status = 'diverged') AS diverged, count(_value) AS _n
          FROM scored GROUP BY {cols}),
        ranked AS (
          SELECT *, max(_n) OVER (PARTITION BY {keys}) AS _group_n, row_number() OVER (
            PARTITION BY {keys} ORDER BY {mean} {order} NULLS LAST, {tiebreak}) AS _rank
          FROM configs)"""
    return _BestQuery(ctes, groups, config, keys)


def check_arguments(results: Results, metric: str, by: Sequence[str]) -> None:
    """Check a query's metric and ``--by`` columns against these results.

    Parameters
    ----------
    results
        The open results views.
    metric
        The metric asked for.
    by
        The ``--by`` columns asked for.

    Raises
    ------
    FedsparseError
        One line: an unknown metric, a ``by`` that is not a runs column, or a metric no grid
        or held-out run of these results has (naming those they have).
    """
    if metric not in METRICS:
        raise FedsparseError(f"best: unknown metric {metric!r} (known: {', '.join(METRICS)})")
    unknown = [c for c in by if c not in RUNS_SCHEMA.names]
    if unknown:
        raise FedsparseError(f"best: --by {unknown[0]}: not a column of runs.parquet")
    value, join = metric_value(metric)
    valued = f"SELECT count(*) FROM runs r {join} WHERE ({COMPARED}) AND {value} IS NOT NULL"
    if not scalar(results.con, valued):
        have = ", ".join(available_metrics(results)) or "none"
        raise FedsparseError(
            f"best: --metric {metric}: no grid or held-out run in these results has one "
            f"(these results have: {have})"
        )


# Grid runs and the held-out re-runs of Optuna's best trials; other trials are searches.
COMPARED = "r.trial_state IS NULL OR r.trial_state = 'HOLDOUT'"


def metric_value(metric: str) -> tuple[str, str]:
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
    row = scalar_row(
        results.con,
        f"SELECT {counts} FROM runs r LEFT JOIN (SELECT run_id, {values} FROM traces "
        f"GROUP BY run_id) t USING (run_id) WHERE {COMPARED}",
    )
    return [m for m, n in zip(METRICS, row, strict=True) if n]
