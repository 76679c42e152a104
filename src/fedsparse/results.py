"""The trace schema (explicit and versioned) and atomic Parquet writing."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

from .atomic import atomic_write

if TYPE_CHECKING:  # pandas costs 0.6 s to import; a shard job never needs it
    import pandas as pd

SCHEMA_VERSION = 1

# Adding a column is fine; renaming or retyping one is a breaking change.
# Identity and hyperparameter columns, shared by traces and runs.
_IDENTITY = [
    ("run_id", pa.string()),
    ("sweep", pa.string()),
    ("dataset", pa.string()),
    ("partition", pa.string()),
    ("algorithm", pa.string()),
    ("loss", pa.string()),
    ("seed", pa.int64()),
]
_HYPERPARAMETERS = [  # null where an algorithm has no such parameter
    ("stepsize", pa.float64()),
    ("local_steps", pa.int64()),
    ("sparsity", pa.int64()),
    ("batch_size", pa.int64()),  # null = full batch
    ("batch_growth", pa.float64()),
]

TRACE_SCHEMA = pa.schema(
    [
        *_IDENTITY,
        *_HYPERPARAMETERS,
        # per evaluated round
        ("round", pa.int64()),
        ("local_iterations", pa.int64()),
        ("objective", pa.float64()),
        ("bytes_up", pa.int64()),
        ("bytes_down", pa.int64()),
        ("elapsed_s", pa.float64()),
        ("status", pa.string()),
        ("nnz", pa.int64()),
        ("train_accuracy", pa.float64()),
        ("support_precision", pa.float64()),
        ("support_recall", pa.float64()),
        ("dist_to_truth", pa.float64()),
        # Optuna studies (null for grid runs): the study, its trial, the trial's final state
        # (COMPLETE | PRUNED, or HOLDOUT for re-runs of the best trial on fresh seeds) and
        # the sampler settings as JSON
        ("study", pa.string()),
        ("trial_number", pa.int64()),
        ("trial_state", pa.string()),
        ("sampler", pa.string()),
        # accuracy on the held-out test split (classification with a partition test_fraction)
        ("test_accuracy", pa.float64()),
    ],
    metadata={"fedsparse_trace_schema": str(SCHEMA_VERSION)},
)
HYPERPARAMETER_COLUMNS = tuple(name for name, _ in _HYPERPARAMETERS)
# Columns that identify a configuration up to its seed (seeds are averaged over).
CONFIG_COLUMNS = ("sweep", "dataset", "partition", "algorithm", "loss", *HYPERPARAMETER_COLUMNS)

# One row per run: its configuration, outcome, timings and provenance.
RUNS_SCHEMA = pa.schema(
    [
        *_IDENTITY,
        *_HYPERPARAMETERS,
        ("rounds", pa.int64()),
        ("eval_every", pa.int64()),
        ("dataset_kind", pa.string()),  # synthetic | libsvm
        ("dataset_task", pa.string()),  # synthetic: linear | logistic
        ("alpha", pa.float64()),  # synthetic non-IID levels (null otherwise)
        ("beta", pa.float64()),
        ("status", pa.string()),  # ok | diverged
        ("final_round", pa.int64()),
        ("final_objective", pa.float64()),
        ("best_objective", pa.float64()),
        ("train_time_s", pa.float64()),  # training only (the trace's last elapsed_s)
        ("wall_time_s", pa.float64()),  # whole run: setup, training, evaluation
        ("config_json", pa.string()),  # the normalised run config
        ("shard", pa.string()),
        ("fedsparse_version", pa.string()),
        ("git_commit", pa.string()),
        ("python_version", pa.string()),
        ("numpy_version", pa.string()),
        ("numba_version", pa.string()),
        ("host", pa.string()),
        ("finished_at", pa.string()),  # ISO 8601, UTC
        # Optuna studies (null for grid runs), as in TRACE_SCHEMA, plus the trial's metric
        # value and the study's search space (JSON)
        ("study", pa.string()),
        ("trial_number", pa.int64()),
        ("trial_state", pa.string()),
        ("sampler", pa.string()),
        ("trial_value", pa.float64()),
        ("search_space", pa.string()),
    ],
    metadata={"fedsparse_runs_schema": str(SCHEMA_VERSION)},
)


def trace_table(rows: list[dict]) -> pa.Table:
    """Trace rows (dicts keyed by column name; missing columns are null) as a typed table."""
    return rows_table(rows, TRACE_SCHEMA)


def rows_table(rows: list[dict], schema: pa.Schema) -> pa.Table:
    """Rows as a table of ``schema``; keys not in the schema are ignored."""
    columns = {f.name: [r.get(f.name) for r in rows] for f in schema}
    return pa.Table.from_pydict(columns, schema=schema)


def to_frame(table: pa.Table) -> pd.DataFrame:
    """Arrow table to pandas with nullable integer columns kept as integers."""
    import pandas as pd

    return table.to_pandas(types_mapper={pa.int64(): pd.Int64Dtype()}.get)


def write_parquet_atomic(table: pa.Table, path: str | Path) -> None:
    """Write ``table`` to ``path`` so that ``path`` is either absent or complete."""
    with atomic_write(path) as fh:
        pq.write_table(table, fh)
