"""The trace schema (explicit and versioned) and atomic Parquet writing."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

SCHEMA_VERSION = 1

# Adding a column is fine; renaming or retyping one is a breaking change.
TRACE_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("sweep", pa.string()),
        ("dataset", pa.string()),
        ("partition", pa.string()),
        ("algorithm", pa.string()),
        ("loss", pa.string()),
        ("seed", pa.int64()),
        # hyperparameters (null where an algorithm has no such parameter)
        ("stepsize", pa.float64()),
        ("local_steps", pa.int64()),
        ("sparsity", pa.int64()),
        ("batch_size", pa.int64()),  # null = full batch
        ("batch_growth", pa.float64()),
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
    ],
    metadata={"fedsparse_trace_schema": str(SCHEMA_VERSION)},
)
HYPERPARAMETER_COLUMNS = ("stepsize", "local_steps", "sparsity", "batch_size", "batch_growth")


def trace_table(rows: list[dict]) -> pa.Table:
    """Rows (dicts keyed by column name; missing columns are null) as a typed table."""
    columns = {f.name: [r.get(f.name) for r in rows] for f in TRACE_SCHEMA}
    return pa.Table.from_pydict(columns, schema=TRACE_SCHEMA)


def to_frame(table: pa.Table) -> pd.DataFrame:
    """Arrow table to pandas with nullable integer columns kept as integers."""
    return table.to_pandas(types_mapper={pa.int64(): pd.Int64Dtype()}.get)


def write_parquet_atomic(table: pa.Table, path: str | Path) -> None:
    """Write ``table`` to ``path`` so that ``path`` is either absent or complete.

    The file is written under a temporary name in the same directory, flushed to
    disk, then renamed over ``path`` (atomic on POSIX file systems).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            pq.write_table(table, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
