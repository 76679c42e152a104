"""Grid-edge warnings: a best configuration whose hyperparameter sits at the edge of what was
searched may be better still beyond it, so the verdict drawn from it is only provisional.

A hyperparameter is *at the lower (upper) edge* when at least two values of it were searched
and the best configuration's value is the smallest (largest) of them. Only numeric
hyperparameters have edges (a null, e.g. ``batch_size`` = full batch, is not a value).
One wording everywhere: ``fedsparse best`` (its ``grid_edges`` column, built in SQL with
:func:`edge_phrase`), the report and the Optuna section and held-out re-runs.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import pyarrow as pa

from ..results.schema import HYPERPARAMETER_COLUMNS, RUNS_SCHEMA

EXTEND = "extend it"
# The hyperparameters that can sit at an edge: the numeric ones.
EDGE_COLUMNS = tuple(
    c
    for c in HYPERPARAMETER_COLUMNS
    if pa.types.is_integer(RUNS_SCHEMA.field(c).type)
    or pa.types.is_floating(RUNS_SCHEMA.field(c).type)
)


def edge_phrase(name: str, side: str) -> str:
    """'stepsize at the lower edge of the grid' (``side``: lower | upper)."""
    return f"{name} at the {side} edge of the grid"


def grid_edges(best: Mapping[str, Any], searched: Mapping[str, Iterable[Any]]) -> list[str]:
    """The edge phrases of ``best`` (hyperparameter -> value) against ``searched``
    (hyperparameter -> the values searched), in the order of ``searched``."""
    flags = []
    for name, values in searched.items():
        value = _number(best.get(name))
        seen = {v for v in map(_number, values) if v is not None}
        if value is None or len(seen) < 2:
            continue
        if value <= min(seen):
            flags.append(edge_phrase(name, "lower"))
        elif value >= max(seen):
            flags.append(edge_phrase(name, "upper"))
    return flags


def edges_text(flags: Iterable[str]) -> str:
    """The ``grid_edges`` cell: phrases joined by '; ' ('' when there are none)."""
    return "; ".join(flags)


def edge_warning(flags: Iterable[str]) -> str:
    """'stepsize at the lower edge of the grid: extend it' (several joined by '; ')."""
    return "; ".join(f"{f}: {EXTEND}" for f in flags)


def _number(v: Any) -> float | None:
    if isinstance(v, bool) or not isinstance(v, int | float):
        try:  # numpy scalars
            v = float(v)
        except (TypeError, ValueError):
            return None
    v = float(v)
    return v if math.isfinite(v) else None
