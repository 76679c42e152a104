"""The results' schemas (traces and runs: explicit, versioned, derived from the algorithms'
declarations), rows as typed tables, and atomic Parquet writing. Reading results folders is
:mod:`fedsparse.query.read`'s."""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..atomic import atomic_write
from ..lazy import lazy_names

if TYPE_CHECKING:  # pandas costs 0.6 s to import; a shard job never needs it
    import pandas as pd

# 2: runs' synthetic non-IID levels renamed alpha/beta -> data_alpha/data_beta (they would
#    collide with hyperparameters named beta); the model column; train_loss and pm_* columns.
# 3: runs carry their final totals (total_bytes_up, total_bytes_down, total_time) and the
#    objective values of multi-objective Optuna trials (trial_values).
SCHEMA_VERSION = 3
# Columns renamed since version 1, as {old: new}; readers rename them in old files.
RENAMED_RUNS_COLUMNS = {"alpha": "data_alpha", "beta": "data_beta"}

# Adding a column is fine; renaming or retyping one is a breaking change.
# Identity and hyperparameter columns, shared by traces and runs.
_IDENTITY = [
    ("run_id", pa.string()),
    ("sweep", pa.string()),
    ("dataset", pa.string()),
    ("partition", pa.string()),
    ("algorithm", pa.string()),
    ("loss", pa.string()),
    ("model", pa.string()),  # linear | linear+bias | mlp-<widths>-<activation>[-nobias]
    ("seed", pa.int64()),
    # the run's time_model (config.DEFAULT_TIME_MODEL unless set): the environment simulated,
    # which a sweep may vary (exchange_time), not a hyperparameter to tune
    ("step_time", pa.float64()),
    ("round_latency", pa.float64()),
    ("exchange_time", pa.float64()),
]
# The hyperparameter columns (null where an algorithm has no such parameter) and the trace
# columns an algorithm reports itself are the algorithms' declarations (Algorithm.hyperparameters
# and .trace_columns: type int/float/str -> int64/float64/string, and meaning), collected by the
# registry (fedsparse.algorithms.registry), a plugin's algorithms included. Their positions are
# part of the contract: the names below are the positions schema version 3 gave them, frozen. A
# column declared since goes after every column below, in registry order (hyperparameters first);
# a new algorithm or family edits nothing here.
_HYPERPARAMETER_POSITIONS = tuple(
    "stepsize local_steps sparsity batch_size batch_growth threshold k fill k_control "
    "k_sequence k_min k_max window expand sampled_clients stepsize_decay prox_weight "
    "rho_scale gamma_scale decay gamma_extra lambda cost_limit penalty inner_stepsize "
    "inner_steps edge_rounds lambda1 lambda2 gamma1 gamma2 rho beta edges sampled_edges "
    "anchor gamma_tiny density_floor gamma2_rounds zero_tol mu variant hvp_delta alpha_self "
    "sigma".split()
)
# A trace column is (name, type), or a bare name: a column an algorithm declares, at its position.
_TRACE_COLUMNS: list[tuple[str, pa.DataType] | str] = [
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
    # data loss of the global model without the l2 term: sum_i p_i (mean loss of client i)
    ("train_loss", pa.float64()),
    # per-client (personalised) models, each on its own rows; null for algorithms
    # without them: sum_i p_i f_i(theta_i) (l2 included), total correct / total rows
    ("pm_objective", pa.float64()),
    ("pm_train_accuracy", pa.float64()),
    ("pm_test_accuracy", pa.float64()),
    # SSCA's
    "slack",
    "constraint_value",
    "sq_norm",
    # simulated cumulative time of the run's time_model (config.DEFAULT_TIME_MODEL)
    ("time", pa.float64()),
    # gradient sparsification's
    "k_used",
    "k_aux",
    "sign",
    "min_shared",
    "idle_clients",
    # personalised, FedAvg
    "edge_bytes_up",
    "edge_bytes_down",
    "bits",
    "density",
    "pm_density",
]
# One row per run: its configuration (identity and hyperparameters), outcome, timings and
# provenance.
_RUNS_COLUMNS = [
    ("rounds", pa.int64()),
    ("eval_every", pa.int64()),
    ("dataset_kind", pa.string()),  # synthetic | libsvm
    ("dataset_task", pa.string()),  # synthetic: linear | logistic
    ("data_alpha", pa.float64()),  # synthetic non-IID levels (null otherwise)
    ("data_beta", pa.float64()),
    ("status", pa.string()),  # ok | diverged
    ("final_round", pa.int64()),
    ("final_objective", pa.float64()),
    ("best_objective", pa.float64()),
    ("train_time_s", pa.float64()),  # training only (the trace's last elapsed_s)
    # whole run (setup, training, evaluation): its share of its computation's, which its time
    # siblings and the members of its cohort share equally (the column sums to the time spent)
    ("wall_time_s", pa.float64()),
    # the trace's cumulative bytes_up, bytes_down and simulated time at the final round
    # (a front of accuracy against communication is then a query of runs alone)
    ("total_bytes_up", pa.int64()),
    ("total_bytes_down", pa.int64()),
    ("total_time", pa.float64()),
    ("config_json", pa.string()),  # the normalised run config
    # per-client totals as JSON records, for algorithms that keep them (gradient
    # sparsification: elements applied, idle rounds); null otherwise
    ("client_summary", pa.string()),
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
    # multi-objective studies: the trial's values, one per objective, as a JSON list
    # (trial_value is then the first objective's)
    ("trial_values", pa.string()),
    ("numerics", pa.string()),  # the numerics version that computed the trace (fedsparse.results.numerics)
]
_ARROW = {int: pa.int64(), float: pa.float64(), str: pa.string()}


class Schemas(NamedTuple):
    """The trace and runs schemas of a set of algorithms, and their hyperparameter columns."""

    trace: pa.Schema
    runs: pa.Schema
    hyperparameters: tuple[str, ...]


def schemas_of(algorithms: Iterable[type]) -> Schemas:
    """The schemas of ``algorithms`` (classes declaring ``name``, ``hyperparameters`` and
    ``trace_columns``): the columns above with the declared ones in their places, then the
    columns declared since. A column declared twice with two types, a hyperparameter named
    like another column, or a column placed above that no algorithm declares is a one-line
    FedsparseError naming the algorithm or the column."""
    from ..errors import FedsparseError

    hyper: dict[str, tuple[pa.DataType, str]] = {}  # name -> (type, first declaring algorithm)
    reported: dict[str, tuple[pa.DataType, str]] = {}
    for cls in algorithms:
        for kind, found in ((cls.hyperparameters, hyper), (cls.trace_columns, reported)):
            for col in kind:
                if col.kind not in _ARROW:
                    raise FedsparseError(f"{cls.name}.{col.name}: kind must be int, float or str")
                typ, first = found.setdefault(col.name, (_ARROW[col.kind], cls.name))
                if typ != _ARROW[col.kind]:
                    raise FedsparseError(
                        f"{cls.name}.{col.name}: declared {col.kind.__name__}, but {first} "
                        f"declares {col.name} as {typ}"
                    )
    in_trace = dict(c for c in [*_IDENTITY, *_TRACE_COLUMNS] if isinstance(c, tuple))
    fixed = {*in_trace, *(n for n, _ in _RUNS_COLUMNS), *_TRACE_COLUMNS}
    for name, (typ, who) in reported.items():
        if name in hyper or (name in fixed and in_trace.get(name, typ) != typ):
            raise FedsparseError(f"{who}: trace column {name} is a results column of another kind")
    for name, (_, who) in hyper.items():
        if name in fixed:
            raise FedsparseError(f"{who}: hyperparameter {name} is a results column already")

    def placed(name: str, declared: dict) -> tuple[str, pa.DataType]:
        if name not in declared:
            raise FedsparseError(f"results column {name}: no registered algorithm declares it")
        return name, declared[name][0]

    hps = [placed(n, hyper) for n in _HYPERPARAMETER_POSITIONS]
    hps_new = [(n, t) for n, (t, _) in hyper.items() if n not in _HYPERPARAMETER_POSITIONS]
    per_round = [c if isinstance(c, tuple) else placed(c, reported) for c in _TRACE_COLUMNS]
    reported_new = [(n, t) for n, (t, _) in reported.items() if n not in fixed]
    trace = pa.schema(
        [*_IDENTITY, *hps, *per_round, *hps_new, *reported_new],
        metadata={"fedsparse_trace_schema": str(SCHEMA_VERSION)},
    )
    runs = pa.schema(
        [*_IDENTITY, *hps, *_RUNS_COLUMNS, *hps_new],
        metadata={"fedsparse_runs_schema": str(SCHEMA_VERSION)},
    )
    return Schemas(trace, runs, tuple(n for n, _ in [*hps, *hps_new]))


@lru_cache(maxsize=1)
def _schemas() -> Schemas:
    from ..algorithms.registry import ALGORITHMS

    return schemas_of(ALGORITHMS.values())


def _config_columns(hyperparameters: tuple[str, ...]) -> tuple[str, ...]:
    return (
        "sweep",
        "dataset",
        "partition",
        "algorithm",
        "loss",
        "model",
        "step_time",
        "round_latency",
        "exchange_time",
        *hyperparameters,
    )


# TRACE_SCHEMA (one row per evaluated round), RUNS_SCHEMA (one row per run),
# HYPERPARAMETER_COLUMNS and CONFIG_COLUMNS (the columns that identify a configuration up to
# its seed, which is averaged over) are computed from the registry the first time one is read
# (module attributes, as they always were).
__getattr__ = lazy_names(
    __name__,
    {
        "TRACE_SCHEMA": lambda: _schemas().trace,
        "RUNS_SCHEMA": lambda: _schemas().runs,
        "HYPERPARAMETER_COLUMNS": lambda: _schemas().hyperparameters,
        "CONFIG_COLUMNS": lambda: _config_columns(_schemas().hyperparameters),
    },
)


# The runs columns that summarise a run's trace at its final round, and the trace column each
# is read from; files written before schema 3 get them from their traces where they are read
# (fedsparse.query.read).
TOTALS = {"total_bytes_up": "bytes_up", "total_bytes_down": "bytes_down", "total_time": "time"}


def trace_table(rows: list[dict]) -> pa.Table:
    """Trace rows (dicts keyed by column name; missing columns are null) as a typed table."""
    return rows_table(rows, _schemas().trace)


def upgrade(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """A traces or runs table of an older schema version in the current ``schema``: renamed
    columns get their new names, columns added since are null (``model``: 'linear', the
    only model before the model layer), and every column has the current type."""
    renames = {old: new for old, new in RENAMED_RUNS_COLUMNS.items() if new in schema.names}
    names = [
        renames.get(n, n) if renames.get(n) not in table.column_names else n
        for n in table.column_names
    ]
    table = table.rename_columns(names)
    n = table.num_rows
    columns = {}
    for field in schema:
        if field.name in table.column_names:
            columns[field.name] = table.column(field.name).cast(field.type)
        elif field.name == "model":
            columns[field.name] = pa.array(["linear"] * n, pa.string())
        else:
            columns[field.name] = pa.nulls(n, field.type)
    extra = [name for name in table.column_names if name not in columns]
    out = pa.table(columns, schema=schema)
    for name in extra:  # e.g. hive partition columns: kept as they are
        out = out.append_column(name, table.column(name))
    return out


def rows_table(rows: list[dict], schema: pa.Schema) -> pa.Table:
    """Rows as a table of ``schema`` (missing keys are null); a key the schema does not
    declare is an error, so no value is ever dropped silently."""
    names = set(schema.names)
    for row in rows:
        unknown = row.keys() - names
        if unknown:
            raise ValueError(
                f"columns not in the results schema: {', '.join(sorted(unknown))} "
                "(an algorithm declares the columns it reports in its trace_columns)"
            )
    columns = [_column([r.get(f.name) for r in rows], f.type) for f in schema]
    return pa.Table.from_arrays(columns, schema=schema)


_NUMERIC = {pa.int64(): np.int64, pa.float64(): np.float64}


def _column(values: list, type_: pa.DataType) -> pa.Array:
    """``pa.array(values, type_)`` without importing pandas (``pa.array`` on a list imports it
    to ask whether the list is a pandas object, a large share of a short run's start-up): int64,
    float64 and string columns of plain values are assembled from their buffers; anything
    else goes to ``pa.array``."""
    valid = np.array([v is not None for v in values], np.bool_)
    present = [v for v in values if v is not None]
    if type_ in _NUMERIC and all(_plain(v, type_) for v in present):
        data = np.zeros(len(values), _NUMERIC[type_])
        data[valid] = present
        buffers = [pa.py_buffer(data)]
    elif type_ == pa.string() and all(type(v) is str for v in present):
        encoded = [v.encode() if v is not None else b"" for v in values]
        ends = np.cumsum([len(b) for b in encoded], dtype=np.int64)
        if ends.size and ends[-1] >= 2**31:  # beyond a string array's int32 offsets
            return pa.array(values, type_)
        offsets = np.concatenate([[0], ends]).astype(np.int32)
        buffers = [pa.py_buffer(offsets), pa.py_buffer(b"".join(encoded))]
    else:
        return pa.array(values, type_)
    mask = None if valid.all() else pa.py_buffer(np.packbits(valid, bitorder="little"))
    return pa.Array.from_buffers(
        type_, len(values), [mask, *buffers], null_count=len(values) - len(present)
    )


# the value types _column assembles itself, per column type (bool is not an int here, as
# pa.array refuses it in an int64 column)
_PLAIN = {
    pa.int64(): (int, np.int64, np.int32),
    pa.float64(): (float, np.float64, np.float32),
}


def _plain(value: Any, type_: pa.DataType) -> bool:
    """Whether ``value`` goes into a column of ``type_`` as ``pa.array`` would put it (an int
    into float64 only where the double holds it exactly; pa.array refuses the others)."""
    if type(value) in _PLAIN[type_]:
        return True
    return type_ == pa.float64() and type(value) in (int, np.int64) and abs(value) <= 2**53


def to_frame(table: pa.Table) -> pd.DataFrame:
    """Arrow table to pandas with nullable integer columns kept as integers."""
    import pandas as pd

    return table.to_pandas(types_mapper={pa.int64(): pd.Int64Dtype()}.get)


def write_parquet_atomic(table: pa.Table, path: str | Path, **options: Any) -> None:
    """Write ``table`` to ``path`` as Parquet, atomically.

    A reader finds ``path`` absent (or its previous content) or complete, never a part
    (:func:`fedsparse.atomic.atomic_write`); missing folders are created.

    Parameters
    ----------
    table
        The rows to write.
    path
        The file written.
    **options
        pyarrow's ``write_table`` options, e.g. ``write_page_checksum``.
    """
    with atomic_write(path) as fh:
        pq.write_table(table, fh, **options)
