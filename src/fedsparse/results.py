"""The trace schema (explicit and versioned) and atomic Parquet writing."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.parquet as pq

from .atomic import atomic_write

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
_HYPERPARAMETERS = [  # null where an algorithm has no such parameter
    ("stepsize", pa.float64()),
    ("local_steps", pa.int64()),
    ("sparsity", pa.int64()),
    ("batch_size", pa.int64()),  # null = full batch
    ("batch_growth", pa.float64()),
    ("threshold", pa.string()),  # hard thresholding on networks: all | per_layer
    ("k", pa.int64()),  # gradient sparsification: elements per message (fixed or initial)
    ("fill", pa.string()),  # fabtopk's fill rule: client | aggregate
    ("k_control", pa.string()),  # fixed | online | online_extended | value_ogd | exp3 | ...
    ("k_sequence", pa.string()),  # k_control sequence: the replayed run's id
    ("k_min", pa.int64()),  # online k: the search interval (0: the defaults 0.002 D and D)
    ("k_max", pa.int64()),
    ("window", pa.int64()),  # online_extended: M_u
    ("expand", pa.float64()),  # online_extended: alpha
    ("sampled_clients", pa.int64()),  # fedavg: clients per round (0 = all)
    ("stepsize_decay", pa.float64()),  # fedavg: step stepsize / t**stepsize_decay
    ("prox_weight", pa.float64()),  # ssca: tau of the proximal term
    ("rho_scale", pa.float64()),  # ssca: a1 of rho_t = a1 / t**decay
    ("gamma_scale", pa.float64()),  # ssca: a2 of gamma_t = a2 / t**(decay + gamma_extra)
    ("decay", pa.float64()),
    ("gamma_extra", pa.float64()),
    ("lambda", pa.float64()),  # ssca: weight of lambda ||w||^2
    ("cost_limit", pa.float64()),  # ssca_constrained: U in F(w) <= U
    ("penalty", pa.float64()),  # ssca_constrained: c, the slack's penalty
    # personalised/hierarchical family (sfedhp, pfedme, hierfavg, fedprox, perfedavg, heurfedamp)
    ("inner_stepsize", pa.float64()),  # sfedhp/pfedme: the theta step; perfedavg: alpha
    ("inner_steps", pa.int64()),  # K: theta steps per edge/local round
    ("edge_rounds", pa.int64()),  # sfedhp: R; hierfavg: kappa2
    ("lambda1", pa.float64()),  # sfedhp: theta-phi weight
    ("lambda2", pa.float64()),  # sfedhp: phi-w weight
    ("gamma1", pa.float64()),  # sfedhp: smooth-l1 weight on theta
    ("gamma2", pa.float64()),  # sfedhp: smooth-l1 weight on w_i
    ("rho", pa.float64()),  # sfedhp: smoothing of the l1 norm
    ("beta", pa.float64()),  # sfedhp/pfedme: cloud relaxation
    ("edges", pa.int64()),  # sfedhp/hierfavg: edge servers
    ("sampled_edges", pa.int64()),  # sfedhp: edges aggregated per round (0 = all)
    ("anchor", pa.string()),  # sfedhp: edge_avg | per_client
    ("gamma_tiny", pa.float64()),  # sfedhp: gamma after a schedule switch
    ("density_floor", pa.float64()),  # sfedhp: gamma1 switch below this theta density
    ("gamma2_rounds", pa.int64()),  # sfedhp: gamma2 switch after these rounds
    ("zero_tol", pa.float64()),  # sfedhp: |x| <= zero_tol counts as zero
    ("mu", pa.float64()),  # fedprox: proximal weight
    ("variant", pa.string()),  # perfedavg: fo | hf
    ("hvp_delta", pa.float64()),  # perfedavg hf: finite-difference width
    ("alpha_self", pa.float64()),  # heurfedamp: own weight of the cloud model
    ("sigma", pa.float64()),  # heurfedamp: cosine-similarity temperature
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
        # data loss of the global model without the l2 term: sum_i p_i (mean loss of client i)
        ("train_loss", pa.float64()),
        # per-client (personalised) models, each on its own rows; null for algorithms
        # without them: sum_i p_i f_i(theta_i) (l2 included), total correct / total rows
        ("pm_objective", pa.float64()),
        ("pm_train_accuracy", pa.float64()),
        ("pm_test_accuracy", pa.float64()),
        # constrained methods (ssca_constrained): the server problem's slack s in the round
        # that produced the row's model (null in round 0) and F(w) - U at the row's model;
        # sq_norm = ||w||^2 (ssca, ssca_constrained)
        ("slack", pa.float64()),
        ("constraint_value", pa.float64()),
        ("sq_norm", pa.float64()),
        # simulated cumulative time of the run's time_model (config.DEFAULT_TIME_MODEL)
        ("time", pa.float64()),
        # gradient sparsification: the k used in this round (D for sendall; null in row 0)
        ("k_used", pa.int64()),
        # online k: this round's k'_m (the auxiliary k of the sign estimate) and the estimated
        # sign of d tau / dk (+1, -1, 0; null when the losses did not both decrease)
        ("k_aux", pa.int64()),
        ("sign", pa.int64()),
        # gradient sparsification's fairness view of the round: min over clients of |J ∩ J_i|
        # (the elements of client i's offer that were applied) and the clients with none
        ("min_shared", pa.int64()),
        ("idle_clients", pa.int64()),
        # hierarchical methods: cumulative client<->edge bytes (bytes_up/bytes_down are then
        # the cloud link); bits: cumulative Remark-1 bits of one edge (sfedhp) or one client
        # (flat methods), up and down; density of w and mean density of the clients' models
        ("edge_bytes_up", pa.int64()),
        ("edge_bytes_down", pa.int64()),
        ("bits", pa.float64()),
        ("density", pa.float64()),
        ("pm_density", pa.float64()),
    ],
    metadata={"fedsparse_trace_schema": str(SCHEMA_VERSION)},
)
HYPERPARAMETER_COLUMNS = tuple(name for name, _ in _HYPERPARAMETERS)
# Columns that identify a configuration up to its seed (seeds are averaged over).
CONFIG_COLUMNS = (
    "sweep",
    "dataset",
    "partition",
    "algorithm",
    "loss",
    "model",
    "step_time",
    "round_latency",
    "exchange_time",
    *HYPERPARAMETER_COLUMNS,
)

# One row per run: its configuration, outcome, timings and provenance.
RUNS_SCHEMA = pa.schema(
    [
        *_IDENTITY,
        *_HYPERPARAMETERS,
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
        ("wall_time_s", pa.float64()),  # whole run: setup, training, evaluation
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
    ],
    metadata={"fedsparse_runs_schema": str(SCHEMA_VERSION)},
)


# The runs columns that summarise a run's trace at its final round, and the trace column each
# is read from; files written before schema 3 get them from their traces (_runs_source).
TOTALS = {"total_bytes_up": "bytes_up", "total_bytes_down": "bytes_down", "total_time": "time"}


def trace_table(rows: list[dict]) -> pa.Table:
    """Trace rows (dicts keyed by column name; missing columns are null) as a typed table."""
    return rows_table(rows, TRACE_SCHEMA)


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
                "(declare them in fedsparse.results)"
            )
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


# ---------------------------------------------------------------------------- reading results
# The one reader of results folders (RESULTS/runs.parquet and the hive-partitioned
# RESULTS/traces/): `fedsparse query`, `best` and `merge`, the report and read_traces all see
# the rows of results_views, which applies the one rule for a run found more than once:
#
#   A run (one run_id) found in several folders is kept once: from the folder where it
#   finished ok, else from the first one given; its runs row and its trace rows both come
#   from that folder.
#
# Within one folder a run is there once (aggregate refuses a run found in two shards, merge
# writes the union once), so a single folder is read as it is. Files of older schema versions
# read as the current schema, as upgrade() makes them (renamed columns under their new names,
# added columns filled as upgrade() fills them).

_SQL_TYPES = {pa.string(): "VARCHAR", pa.int64(): "BIGINT", pa.float64(): "DOUBLE"}


def check_results_folder(folder: str | Path) -> Path:
    """``folder`` as an absolute path, or a MissingResultsError naming what is missing."""
    from .errors import MissingResultsError

    folder = Path(folder)
    if not folder.is_dir():
        raise MissingResultsError(f"{folder}: no such results folder")
    for part in ("runs.parquet", "traces/"):
        if not (folder / part.rstrip("/")).exists():
            raise MissingResultsError(f"{folder}: no {part} here (not a results folder?)")
    return folder.absolute()


def results_views(con, folders: list[str | Path]) -> list[Path]:
    """Create the views ``runs`` (RUNS_SCHEMA columns) and ``traces`` (TRACE_SCHEMA columns,
    partition columns as strings) of ``folders`` in the DuckDB connection ``con``.

    Several folders read as their union under the rule above. Returns the folders read:
    checked, absolute, each once. Errors are FedsparseErrors of one line naming the folder.
    """
    import duckdb

    from .errors import FedsparseError

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


def runs_per_folder(con, n_folders: int) -> list[int]:
    """How many runs each folder of ``results_views`` holds (before the rule keeps one)."""
    if n_folders < 2:
        return [con.execute("SELECT count(*) FROM runs").fetchall()[0][0]]
    found = dict(con.execute("SELECT _folder, count(*) FROM _runs_all GROUP BY 1").fetchall())
    return [found.get(i, 0) for i in range(n_folders)]


def read_results(folders: list[str | Path], sql: str) -> pa.Table:
    """The rows of ``sql`` (a SELECT over the views ``runs`` and ``traces``) on ``folders``."""
    import duckdb

    from .errors import FedsparseError

    con = duckdb.connect(":memory:")
    try:
        results_views(con, folders)
        return con.sql(sql).to_arrow_table()
    except duckdb.Error as exc:
        raise FedsparseError(f"reading {', '.join(map(str, folders))}: {one_line(exc)}") from None
    finally:
        con.close()


def sql_quote(text: str) -> str:
    """``text`` as a SQL string literal."""
    return "'" + text.replace("'", "''") + "'"


def sql_ident(name: str) -> str:
    """``name`` as a quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'


def one_line(exc: BaseException) -> str:
    """DuckDB's message without the LINE/caret excerpt, on one line."""
    lines = []
    for raw in str(exc).splitlines():
        if raw.startswith("LINE "):
            break
        if raw.strip():
            lines.append(raw.strip())
    return " ".join(lines) or type(exc).__name__


def _runs_source(con, folder: Path) -> str:
    source = f"read_parquet({sql_quote(str(folder / 'runs.parquet'))})"
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
    if not any((folder / "traces").rglob("*.parquet")):  # a folder without runs
        return _conformed(con, "(SELECT 1 WHERE false)", TRACE_SCHEMA)
    glob = sql_quote(str(folder / "traces" / "**" / "*.parquet"))
    # one folder's files share a schema (aggregate writes them together), so no union_by_name,
    # which would read every file's footer each time a view is bound
    source = (
        f"read_parquet({glob}, hive_partitioning = true, "
        "hive_types = {'dataset': VARCHAR, 'algorithm': VARCHAR})"
    )
    return _conformed(con, source, TRACE_SCHEMA)


def _conformed(con, source: str, schema: pa.Schema) -> str:
    """SELECT of ``schema``'s columns, typed and in order, from files of any schema version:
    a renamed column under its new name, a column the files lack as upgrade() fills it."""
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
        """CREATE VIEW _kept AS SELECT run_id, _folder FROM (
             SELECT run_id, _folder, row_number() OVER (
               PARTITION BY run_id ORDER BY coalesce(status = 'ok', false) DESC, _folder) AS k
             FROM _runs_all) WHERE k = 1"""
    )
    for name in ("runs", "traces"):
        con.execute(
            f"CREATE VIEW {name} AS SELECT * EXCLUDE (_folder) FROM _{name}_all "
            "SEMI JOIN _kept USING (run_id, _folder)"
        )
