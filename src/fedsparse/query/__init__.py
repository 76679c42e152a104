"""Query results folders with DuckDB SQL; best configurations; merge folders from several machines.

``open_results(folders)`` gives a DuckDB connection with two views:

* ``traces``: the hive-partitioned ``RESULTS/traces/`` dataset, exactly the TRACE_SCHEMA columns;
* ``runs``: ``RESULTS/runs.parquet``, exactly the RUNS_SCHEMA columns.

Several folders read as their union. A run (one ``run_id``, i.e. one normalised config)
found in several folders is kept once, from the folder where its status is ``ok``, else the
first one given. If its trace rows differ between folders (timings and the sweep label aside,
e.g. a different CPU changed the last bits) that is a *conflict*, reported as a
:class:`ResultsConflictWarning`. The views and the rule are
:func:`fedsparse.query.read.results_views`, which every reader of results folders uses.

The connection can read only the results folders (DuckDB's external access is switched off and
the configuration locked once the views exist), and :func:`run_query` accepts one SELECT only,
so a query can neither write files nor read anything else.

The modules: :mod:`.read` (the views and their rule, the SQL quoting, one SELECT's rows; the
report and the families' pages read through it too), :mod:`.views` (the locked connection,
:func:`run_query`), :mod:`.best` (with :mod:`.grid_edges`: a best value at the edge of what was
searched), :mod:`.pareto`, :mod:`.printing` (table, CSV, Parquet out) and :mod:`.merge`.
"""

from __future__ import annotations

from .best import (
    BEST_CONFIG_COLUMNS,
    METRICS,
    BestView,
    available_metrics,
    best_configurations,
    best_view,
)
from .merge import MERGE_DUCKDB_CONFIG, MergeSummary, merge_results
from .pareto import (
    PARETO_COLUMNS,
    pareto_candidates,
    pareto_configurations,
    pareto_front,
    pareto_view,
)
from .printing import DEFAULT_LIMIT, FORMATS, format_table, output_format, write_rows
from .views import BATCH_ROWS, Results, ResultsConflictWarning, open_results, run_query

__all__ = [
    "BATCH_ROWS",
    "BEST_CONFIG_COLUMNS",
    "BestView",
    "DEFAULT_LIMIT",
    "FORMATS",
    "MERGE_DUCKDB_CONFIG",
    "METRICS",
    "MergeSummary",
    "PARETO_COLUMNS",
    "Results",
    "ResultsConflictWarning",
    "available_metrics",
    "best_configurations",
    "best_view",
    "format_table",
    "merge_results",
    "open_results",
    "output_format",
    "pareto_candidates",
    "pareto_configurations",
    "pareto_front",
    "pareto_view",
    "run_query",
    "write_rows",
]
