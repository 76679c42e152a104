"""One run: data + model + algorithm + hyperparameters + seed -> trace.

Training rounds are timed; evaluation is not. JIT compilation is paid before
the clock starts (a throw-away round on the same problem, once per process and
kernel signature), so ``elapsed_s`` is training time only.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from ..algorithms import ALGORITHMS
from ..data import FederatedData
from ..data.kinds import kind_of
from ..objective.model import DTYPES, Network
from ..objective.problem import LOSS_TASKS, Problem
from ..results.schema import to_frame, trace_table
from .cohorts import cohort_key
from .config import (
    divergence_factor,
    normalize_run_config,
    partition_label,
    read_config_file,
    run_id,
    time_model,
)

if TYPE_CHECKING:  # pandas costs 0.6 s to import; a shard job needs neither
    import pandas as pd

    from ..data.prepare import Prepared
    from ..results.checkpoint import Checkpoint

_WARM: set[tuple[str, bool, str, bool, int]] = set()
_OBJECTIVES = ("objective", "train_loss", "pm_objective")  # NaN kept: it marks a blow-up


def load_dataset(
    dataset: dict[str, Any],
    loss: str,
    partition: str | dict[str, Any] = "natural",
    cache: str | Path | None = None,
    dtype: str = "float64",
) -> FederatedData:
    """The federated data set of a normalised ``dataset`` config, cached per process.

    Parameters
    ----------
    dataset
        A normalised ``dataset`` config (its ``kind`` picks the reader).
    loss
        The model's loss; it gives the task of a LibSVM qid file's labels.
    partition
        The normalised partition: ``"natural"`` (each data set's own clients) or a spec
        that splits the rows into clients.
    cache
        The data cache of downloaded files (None: ``$FEDSPARSE_DATA_CACHE``, else
        ``~/.cache/fedsparse/data``).
    dtype
        The model's ``dtype``: ``float32`` preprocesses image rows straight to float32 (a
        float32 network's rows, :meth:`FederatedData.in_dtype`) without a float64 copy.

    Returns
    -------
    FederatedData
        The rows stacked by client. The same object again for an equal request while it is in
        the per-process cache; a LibSVM file whose size or mtime changed is read again.
    """
    if kind_of(dataset).prepared or partition != "natural":
        return _prepared(
            json.dumps(dataset, sort_keys=True),
            loss,
            json.dumps(partition, sort_keys=True),
            str(cache or ""),
            dtype,
        ).data
    return _own_clients(dataset, loss)


def prepare_dataset(
    dataset: dict[str, Any],
    loss: str,
    partition: str | dict[str, Any] = "natural",
    cache: str | Path | None = None,
    embedding_sample: int = 0,
    dtype: str = "float64",
) -> Prepared:
    """Like :func:`load_dataset`, with the partition's statistics and an optional t-SNE embedding.

    Parameters
    ----------
    dataset
        A normalised ``dataset`` config.
    loss
        The model's loss (the task of a LibSVM qid file's labels).
    partition
        ``"natural"`` or a normalised partition spec.
    cache
        The data cache of downloaded files (None: the default cache).
    embedding_sample
        Rows of a t-SNE embedding to compute (0: none).
    dtype
        As in :func:`load_dataset`.

    Returns
    -------
    Prepared
        The data, and for a partitioned set its :class:`PartitionResult` and embedding.
    """
    from ..data.prepare import Prepared, apply_partition, prepare

    if kind_of(dataset).prepared:
        return prepare(dataset, partition, cache, embedding_sample, dtype=np.dtype(dtype))
    data = _own_clients(dataset, loss)
    if partition == "natural":
        return Prepared(data)
    return apply_partition(
        data.X, data.y, data.task, data.name, partition, data.x_true, embedding_sample
    )


@lru_cache(maxsize=2)
def _prepared(key: str, loss: str, partition: str, cache: str, dtype: str) -> Prepared:
    return prepare_dataset(json.loads(key), loss, json.loads(partition), cache or None, dtype=dtype)


def _own_clients(dataset: dict[str, Any], loss: str) -> FederatedData:
    """A data set built whole with its own clients (its kind's ``build``), cached per process;
    a file edited in between is read again."""
    kind = kind_of(dataset)
    task = LOSS_TASKS[loss] if kind.labels_from_loss else None
    stamp = None
    if dataset.get("path") is not None:
        path = Path(dataset["path"])
        stamp = (path.stat().st_mtime_ns, path.stat().st_size) if path.is_file() else None
    return _built(json.dumps(dataset, sort_keys=True), task, stamp)


@lru_cache(maxsize=4)
def _built(key: str, task: str | None, stamp: tuple[int, int] | None) -> FederatedData:
    ds = json.loads(key)
    return kind_of(ds).build(ds, task)


def run_identity(cfg: dict[str, Any]) -> dict[str, Any]:
    """The identity and hyperparameter columns of a normalised run config: the first
    columns of every trace row and of the run's ``runs.parquet`` row."""
    model = cfg["model"]
    return {
        "run_id": run_id(cfg),
        "sweep": cfg["sweep"],
        "dataset": cfg["dataset"]["name"],
        "partition": partition_label(cfg["partition"]),
        "algorithm": cfg["algorithm"],
        "loss": model["loss"],
        "model": Network.from_config(model, 1, 1).label,
        "seed": cfg["seed"],
        **time_model(cfg),
        **ALGORITHMS[cfg["algorithm"]].with_defaults(cfg["params"]),
    }


@dataclass(frozen=True)
class RunResult:
    """A finished run: its trace, and the algorithm's per-client totals as of the trace's last
    row (JSON records, the run's ``client_summary`` column; None for algorithms keeping none)."""

    trace: pa.Table
    client_summary: str | None = None


def run_trace(
    cfg: dict[str, Any],
    data: FederatedData | None = None,
    on_round: Callable[[int, float], bool | None] | None = None,
) -> pa.Table:
    """The trace of :func:`run_result`, alone.

    Parameters
    ----------
    cfg
        A normalised run config.
    data
        The run's data set, already loaded (None: loaded by :func:`load_dataset`).
    on_round
        As for :func:`run_result`.

    Returns
    -------
    pyarrow.Table
        One row per evaluated round, round 0 first.
    """
    return run_result(cfg, data, on_round).trace


def run_result(
    cfg: dict[str, Any],
    data: FederatedData | None = None,
    on_round: Callable[[int, float], bool | None] | None = None,
    checkpoint: Checkpoint | None = None,
) -> RunResult:
    """Run a normalised config: its trace and its per-client totals.

    A diverged round (see :func:`is_diverged`) ends the run: its row, the last, has
    ``status = 'diverged'``.

    Parameters
    ----------
    cfg
        A normalised run config.
    data
        The run's data set, already loaded (None: loaded by :func:`load_dataset`).
    on_round
        Called as ``on_round(round, objective)`` after each evaluated round after round 0
        (e.g. an Optuna pruner's report); a true return value ends the run at that round.
    checkpoint
        Where the run keeps its state every few minutes and resumes from
        (:mod:`fedsparse.results.checkpoint`); None: none.

    Returns
    -------
    RunResult
        The trace (one row per evaluated round, round 0 first, ending at the last round, a
        diverged one or where ``on_round`` stopped it) and the per-client totals.
    """
    return _run_cohort([[cfg]], data, on_round, checkpoint)[0][0]


def time_siblings_key(cfg: dict[str, Any]) -> str | None:
    """Runs with equal keys differ in their time model only, and their algorithm does not read
    it: one computation gives all of their traces (:func:`run_results`). None: the run's
    algorithm reads its time model (a k controller charging simulated time)."""
    if ALGORITHMS[cfg["algorithm"]].reads_time_model(cfg["params"]):
        return None
    return json.dumps({**cfg, "time_model": None}, sort_keys=True)


def run_results(cfgs: list[dict[str, Any]], data: FederatedData | None = None) -> list[RunResult]:
    """The results of runs that differ in their time model only (equal
    :func:`time_siblings_key`), from one computation: each trace is the one
    :func:`run_result` gives alone, bit for bit, but for the measured ``elapsed_s``."""
    keys = {time_siblings_key(c) for c in cfgs}
    if None in keys or len(keys) != 1:
        raise ValueError("run_results: the configs must differ in a time model nobody reads")
    return _run(cfgs, data, None)


def run_cohort(
    computations: list[list[dict[str, Any]]],
    data: FederatedData | None = None,
    checkpoint: Checkpoint | None = None,
) -> list[list[RunResult]]:
    """The results of a cohort of computations, run together.

    The runs are equal but for fusable hyperparameters (equal :func:`cohort_key`); each round
    is one ``cohort_round`` of their algorithm for all members still running, and their
    evaluations share passes over the data.

    Parameters
    ----------
    computations
        Each computation's normalised run configs: a run with its time siblings (equal
        :func:`time_siblings_key`).
    data
        The runs' data set, already loaded (None: loaded by :func:`load_dataset`).
    checkpoint
        The cohort's checkpoint, written and resumed as one (None: none).

    Returns
    -------
    list of list of RunResult
        In the order of ``computations`` and of their configs. Each trace is the one
        :func:`run_result` gives alone, bit for bit, but for ``elapsed_s`` (the cohort's measured
        time, shared equally among the members computing each round).

    Raises
    ------
    ValueError
        Computations that are not one cohort, or a computation whose runs are not time siblings.
    """
    if len({cohort_key(group[0]) for group in computations}) != 1 and len(computations) > 1:
        raise ValueError("run_cohort: the runs must differ in fusable hyperparameters only")
    for group in computations:
        if len(group) > 1 and len({time_siblings_key(c) for c in group} - {None}) != 1:
            raise ValueError("run_cohort: a computation's runs must be time siblings")
    return _run_cohort(computations, data, None, checkpoint)


class _UnreadTimeModel(dict):
    """The time model an algorithm gets when one computation serves several time models: it
    declared that it does not read it (Algorithm.reads_time_model), and this holds it to that."""

    def __getitem__(self, key):
        raise RuntimeError("an algorithm that declares reads_time_model False read its time model")

    def get(self, key, default=None):
        return self[key]


def _run(cfgs: list[dict[str, Any]], data: FederatedData | None, on_round) -> list[RunResult]:
    """Run ``cfgs[0]``, charging its rounds to the time model of each config (one config, or
    several whose algorithm does not read its time model)."""
    return _run_cohort([cfgs], data, on_round)[0]


Pending = tuple[int, dict[str, Any], list[float], np.ndarray, "np.ndarray | None", Any]


class _Member:
    """One computation of a cohort: a run (and its time siblings, charged to their own time
    models), its algorithm, its totals and the rows of its trace(s) so far.

    Evaluated rounds wait in ``pending`` (copies of the global model, and of the personalised
    models of algorithms that have them) and are scored together, one pass over the data for
    many models (:meth:`Problem.metrics_many`). Rows, and the calls to ``on_round``, come out as
    if each round were scored at once; a run that ends (diverged, or stopped by ``on_round``)
    has trained at most a batch of rounds past its end, which are discarded."""

    def __init__(self, cfgs: list[dict[str, Any]], problem: Problem, on_round) -> None:
        cfg = cfgs[0]
        cls = ALGORITHMS[cfg["algorithm"]]
        self.problem = problem
        self.algorithm = cls(problem, cls.resolved_params(cfg["params"]), cfg["seed"])
        self.timings = [time_model(c) for c in cfgs]
        self.algorithm.time_model = self.timings[0] if len(cfgs) == 1 else _UnreadTimeModel()
        self.identities = [run_identity(c) for c in cfgs]
        self.rows: list[list[dict[str, Any]]] = [[] for _ in cfgs]
        self.totals = {"local_iterations": 0, "bytes_up": 0, "bytes_down": 0, "elapsed_s": 0.0}
        self.times = [0.0 for _ in cfgs]  # the simulated time under each config's time model
        self.pending: list[Pending] = []
        self.f0 = math.nan  # the round-0 objective, once scored
        self.factor = divergence_factor(cfg)
        self.clients = None  # per-client totals as of the last kept row
        self.on_round = on_round
        self.done = False

    # what a checkpoint keeps of the runner's state, beside the algorithm's own
    _CHECKPOINTED = ("rows", "totals", "times", "pending", "f0", "clients", "done")

    def checkpoint_state(self) -> dict[str, Any]:
        state = {name: getattr(self, name) for name in self._CHECKPOINTED}
        return {**state, "algorithm": self.algorithm.checkpoint_state()}

    def restore_state(self, state: dict[str, Any]) -> None:
        self.algorithm.restore_state(state["algorithm"])
        for name in self._CHECKPOINTED:
            setattr(self, name, state[name])

    def charge(self, cost, elapsed: float) -> None:
        """Add a round's cost (and its share of the measured time) to the totals."""
        totals, problem = self.totals, self.problem
        totals["elapsed_s"] += elapsed
        totals["local_iterations"] += cost.local_iterations
        totals["bytes_up"] += cost.bytes_up
        totals["bytes_down"] += cost.bytes_down
        up, down = cost.values(problem.n_clients)
        n_values = 2.0 * problem.shape[0] * problem.shape[1]  # 2 D: a full exchange up and down
        for i, timing in enumerate(self.timings):
            self.times[i] += (
                timing["step_time"] * cost.local_iterations
                + timing["round_latency"]
                + timing["exchange_time"] * (up + down) / n_values
            )

    def snapshot(self, t: int) -> np.ndarray:
        """Queue round ``t``'s models for scoring; the global model."""
        algorithm = self.algorithm
        personal, W = algorithm.personal_models, algorithm.model
        spent = {**self.totals, **algorithm.extra_metrics()}
        copy = None if personal is None else personal.copy()
        summary = algorithm.client_summary()
        self.pending.append((t, spent, list(self.times), W.copy(), copy, summary))
        return W

    def take_scores(self, scored: list[dict[str, Any]]) -> None:
        """Turn the pending rounds, scored in order, into rows; the run ends (``done``) at a
        diverged round or where ``on_round`` says so, and the rounds past it are dropped."""
        algorithm, problem = self.algorithm, self.problem
        for (t, spent, when, _, personal, summary), metrics in zip(
            self.pending, scored, strict=True
        ):
            if t == 0:
                self.f0 = metrics["objective"]
            ok = not is_diverged(metrics["objective"], self.f0, self.factor)
            metrics.update(algorithm.finish_metrics({**spent, "time": when[0], **metrics}))
            if personal is not None:
                metrics.update(problem.personal_metrics(personal))
            status = "ok" if ok else "diverged"
            for out, identity, time_ in zip(self.rows, self.identities, when, strict=True):
                row = {**identity, "round": t, **spent, "time": time_, **metrics}
                out.append({**row, "status": status})
            self.clients = summary
            on_round = self.on_round
            if t > 0 and (not ok or (on_round is not None and on_round(t, metrics["objective"]))):
                self.done = True
                break
        self.pending.clear()

    def results(self) -> list[RunResult]:
        summary = client_records(self.clients)
        results = []
        for out in self.rows:
            for row in out:  # NaN/inf objectives are stored as they are; NaN metrics as null
                for key, value in row.items():
                    if key not in _OBJECTIVES and isinstance(value, float) and math.isnan(value):
                        row[key] = None
            results.append(RunResult(trace_table(out), summary))
        return results


def _score(problem: Problem, members: list[_Member]) -> None:
    """Score the members' pending rounds, a pass over the data for up to
    ``problem.eval_models_per_pass`` models (each model's metrics are the same however many
    share its pass)."""
    entries = [(m, k) for m in members for k in range(len(m.pending))]
    if not entries:
        return
    per_pass = problem.eval_models_per_pass
    scored: list[dict[str, Any]] = []
    for lo in range(0, len(entries), per_pass):
        chunk = entries[lo : lo + per_pass]
        scored += problem.metrics_many(np.stack([m.pending[k][3] for m, k in chunk]))
    for member in members:
        mine = [s for (m, _), s in zip(entries, scored, strict=True) if m is member]
        if mine:
            member.take_scores(mine)


def _run_cohort(
    computations: list[list[dict[str, Any]]],
    data: FederatedData | None,
    on_round,
    checkpoint: Checkpoint | None = None,
) -> list[list[RunResult]]:
    """Run a cohort's computations (see :func:`run_cohort`; ``on_round``: a lone run's),
    from ``checkpoint`` where it holds their state, writing it as it falls due."""
    cfg = computations[0][0]
    model = cfg["model"]
    if data is None:
        dtype = model.get("dtype", DTYPES[0])  # rows in the network's dtype from the start
        data = load_dataset(cfg["dataset"], model["loss"], cfg["partition"], dtype=dtype)
    problem = Problem.from_config(data, model)
    cls = ALGORITHMS[cfg["algorithm"]]
    members = [_Member(cfgs, problem, on_round) for cfgs in computations]
    for member in members:
        member.algorithm.check_problem()
    _warm_up(cls, problem, cls.resolved_params(cfg["params"]), cfg["seed"])
    reached = _resume(members, problem, checkpoint) if checkpoint is not None else 0
    if not reached:
        for member in members:
            member.algorithm.setup()
            member.snapshot(0)
    if checkpoint is not None:
        checkpoint.start_clock()

    rounds, every = cfg["rounds"], cfg["eval_every"]
    cadence = problem.eval_batch  # rounds a member's models wait, at most, to be scored
    for t in range(reached + 1, rounds + 1):
        active = [m for m in members if not m.done]
        if not active:
            break
        start = time.perf_counter()
        if len(active) == 1:  # a run alone calls its own round (which a subclass may extend)
            costs = [active[0].algorithm.round(t - 1)]
        else:
            costs = cls.cohort_round([m.algorithm for m in active], t - 1)
        share = (time.perf_counter() - start) / len(active)
        for member, cost in zip(active, costs, strict=True):
            member.charge(cost, share)
        if t % every == 0 or t == rounds:
            blown = []
            for member in active:
                W = member.snapshot(t)
                if not np.isfinite(W).all():  # a non-finite model has diverged: score it now
                    blown.append(member)
            _score(problem, blown)
            waiting = [m for m in active if m.pending]
            if waiting and max(len(m.pending) for m in waiting) >= cadence:
                _score(problem, waiting)
        # (a computation with nothing left to compute is never checkpointed: an on_round stop
        # is the caller's, e.g. an Optuna pruner's, which a resumed run must not inherit)
        left = any(not m.done for m in members)
        if checkpoint is not None and left and t < rounds and checkpoint.due():
            state = [member.checkpoint_state() for member in members]
            checkpoint.write(t, state, {"problem": problem, "data": problem.data})
    _score(problem, [m for m in members if m.pending and not m.done])  # the last rounds
    return [member.results() for member in members]


def _resume(members: list[_Member], problem: Problem, checkpoint: Checkpoint) -> int:
    """Put the members' state back from ``checkpoint``; the round it reached (0: none)."""
    found = checkpoint.read({"problem": problem, "data": problem.data})
    if found is None:
        return 0
    reached, states = found
    for member, state in zip(members, states, strict=True):
        member.restore_state(state)
    checkpoint.resumed(reached)
    return reached


def client_records(columns: dict[str, np.ndarray] | None) -> str | None:
    """Per-client columns (Algorithm.client_summary) as JSON records, one per client."""
    if columns is None:
        return None
    values = [np.asarray(v).tolist() for v in columns.values()]
    return json.dumps([dict(zip(columns, row, strict=True)) for row in zip(*values, strict=True)])


def is_diverged(objective: float, start: float, factor: float) -> bool:
    """Whether a round's objective means a blow-up.

    Parameters
    ----------
    objective
        The round's objective.
    start
        The round-0 objective.
    factor
        The config's ``divergence_factor`` (> 1).

    Returns
    -------
    bool
        True for a non-finite ``objective``, or one above ``factor * start`` when ``start`` is
        finite and > 0 (losses and l2 terms are >= 0). From a start of 0, or of a negative or
        non-finite value, only a non-finite objective counts.
    """
    if not math.isfinite(objective):
        return True
    return math.isfinite(start) and start > 0 and objective > factor * start


def _warm_up(cls: type, problem: Problem, params: dict[str, Any], seed: int) -> None:
    """Compile this algorithm's kernels for this storage format and model before any timing
    (``params`` as the run's algorithm received them: a replayed k sequence resolved)."""
    # the layer table's rank tells an MLP's kernels (1-D) from a CNN's (2-D), and the network's
    # dtype float64 from float32 kernels: each compiles its own
    key = (
        cls.name,
        problem.data.is_sparse,
        problem.loss,
        problem.is_linear,
        problem.sizes.ndim,
        problem.network.dtype,
    )
    if key in _WARM:
        return
    throwaway = cls(problem, params, seed)
    throwaway.setup()
    cls.cohort_round([throwaway], 0)
    _WARM.add(key)


def run(config: dict[str, Any] | str | Path) -> pd.DataFrame:
    """Run one config (a mapping, or a YAML/JSON file path) and return its trace.

    Raises :class:`fedsparse.ConfigError` or :class:`fedsparse.DataError` on bad
    input, before any training.
    """
    raw = read_config_file(config) if isinstance(config, str | Path) else config
    cfg = normalize_run_config(raw)
    return to_frame(run_trace(cfg))
