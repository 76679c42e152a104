"""``fedsparse best --pareto``: per data set, the configurations no other beats on both the
metric and a cost column."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import FedsparseError
from .best import (
    BEST_CONFIG_COLUMNS,
    COMPARED,
    METRICS,
    BestView,
    check_arguments,
    compact,
    edges_sql,
    metric_value,
    span_sql,
)
from .read import sql_ident
from .views import Results, execute, scalar

# What a front trades the metric against (lower is better): runs columns, as SQL over ``r``.
PARETO_COLUMNS = {
    "total_bytes_up": ("r.total_bytes_up", "bytes the clients sent over the run"),
    "total_bytes_down": ("r.total_bytes_down", "bytes the server sent over the run"),
    "total_bytes": ("r.total_bytes_up + r.total_bytes_down", "bytes sent up and down"),
    "total_time": ("r.total_time", "simulated time of the run's time_model"),
    "train_time_s": ("r.train_time_s", "training wall-clock seconds"),
}


def pareto_front(metric: Sequence[float], cost: Sequence[float], higher: bool) -> np.ndarray:
    """Which points are on the Pareto front of a metric against a cost (lower is better).

    A point is on it when no other point is at least as good on both and strictly better on
    one; points equal on both do not dominate each other, so all of them are kept.

    Parameters
    ----------
    metric
        Each point's metric, finite.
    cost
        Each point's cost, finite.
    higher
        Higher metric is better (else lower).

    Returns
    -------
    numpy.ndarray
        A boolean mask, one per point, in the order given.

    Raises
    ------
    ValueError
        A value is not finite.
    """
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
    check_arguments(results, metric, by)
    cost = PARETO_COLUMNS[column][0]
    if not scalar(results.con, f"SELECT count({cost}) FROM runs r WHERE {COMPARED}"):
        raise FedsparseError(
            f"best: --pareto {column}: no grid or held-out run in these results has one"
        )
    value, join = metric_value(metric)
    groups = [*dict.fromkeys([*by, "dataset"])]
    span_keys = [*dict.fromkeys([*groups, "algorithm"])]  # the values each algorithm searched
    config = [*dict.fromkeys([*span_keys, *BEST_CONFIG_COLUMNS])]
    cols, keys = ", ".join(map(sql_ident, config)), ", ".join(map(sql_ident, span_keys))
    on = " AND ".join(
        f"configs.{sql_ident(c)} IS NOT DISTINCT FROM span.{sql_ident(c)}" for c in span_keys
    )
    mean_m, mean_c = sql_ident(f"mean_{metric}"), sql_ident(f"mean_{column}")
    table = execute(
        results,
        f"""WITH {span_sql(keys)},
        scored AS (
          SELECT r.*, CAST({value} AS DOUBLE) AS _value, CAST({cost} AS DOUBLE) AS _cost
          FROM runs r {join} WHERE {COMPARED}),
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
          SELECT configs.*, {edges_sql("configs")} AS grid_edges,
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
    """Every configuration compared for the fronts of :func:`pareto_configurations`.

    Parameters
    ----------
    results
        The open results views.
    metric
        A key of :data:`METRICS`.
    column
        A key of :data:`PARETO_COLUMNS`: the cost.
    by
        Runs columns that split the fronts further, before ``dataset``.

    Returns
    -------
    pyarrow.Table
        One row per configuration (mean over seeds), ordered by its columns (nulls first):
        the means of the metric and of ``column``, seeds, grid_edges, ``eligible`` (no
        diverged run; every run has a finite metric and column) and ``front``.

    Raises
    ------
    FedsparseError
        ``column`` is not a cost column or no compared run has one, or as
        :func:`check_arguments` raises.
    """
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
    """The configurations on each group's front of mean ``metric`` against mean ``column``.

    Compared, as in :func:`best_configurations`: grid runs and held-out re-runs. A
    configuration with a diverged run, or a run without a finite metric or column, is left
    out; configurations equal on both are all kept.

    Parameters
    ----------
    results
        The open results views.
    metric
        A key of :data:`METRICS`.
    column
        A key of :data:`PARETO_COLUMNS` (lower is better).
    by
        Runs columns that split the fronts further, before ``dataset``.

    Returns
    -------
    pyarrow.Table
        The front configurations with both means, seeds and grid_edges, sorted by group, then
        cheapest first, then best metric, then algorithm.

    Raises
    ------
    FedsparseError
        As :func:`pareto_candidates` raises.
    """
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
    """:func:`pareto_configurations` for reading, as :func:`best_view` shows the best.

    Parameters
    ----------
    results
        The open results views.
    metric
        A key of :data:`METRICS`.
    column
        A key of :data:`PARETO_COLUMNS`.
    by
        Runs columns that split the fronts further.

    Returns
    -------
    BestView
        The front rows with the configuration columns that differ among the eligible
        configurations, and notes (what the front is, how many were compared and left out).

    Raises
    ------
    FedsparseError
        As :func:`pareto_candidates` raises.
    """
    p = _pareto(results, metric, column, by)
    compared = p.table.filter(pc.field("_eligible"))
    n, one = [], []
    for c in p.config:  # distinct values, null counted as a value of its own
        values = compared[c].to_pylist()
        n.append(len(set(values)))
        one.append(next((v for v in values if v is not None), None))
    view = compact(
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
