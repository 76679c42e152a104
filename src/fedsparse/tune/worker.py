"""Workers: reserve exactly n_trials under the study lock, run trials, fail stale ones."""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import os
import signal
import threading
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from ..algorithms import ALGORITHMS
from ..defaults import sweep_default
from ..errors import ConfigError
from ..layout import Layout
from ..results.schema import TOTALS, TRACE_SCHEMA, write_parquet_atomic
from ..sweep.studies import METRICS, StudySpec
from ..training.config import run_id
from .spec import HOST, MAX_ERRORS, TuneError, study_spec, write_json
from .storage import check_identity, load_study, make_sampler, open_storage, study_lock

if TYPE_CHECKING:
    from ..results.checkpoint import Checkpoint

log = logging.getLogger("fedsparse.tune")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _is_stale(t, now: float, grace: int) -> bool:
    who = t.user_attrs.get("fedsparse_worker") or {}
    if who.get("host") == HOST and (who.get("pid") == os.getpid() or not _alive(who["pid"])):
        return True  # (a reserving worker runs no trial itself, so its own pid is a leftover)
    beat = t.user_attrs.get("fedsparse_heartbeat")
    if beat is None:
        start = t.datetime_start
        beat = start.timestamp() if start is not None else now
    return now - float(beat) > grace


def recorded_outcome(parts: Path, number: int) -> tuple[str, float | list[float]] | None:
    """The (state, value) a trial's saved part records (value: the list of values of a
    multi-objective trial), or None when it has no part. A part is written just before the
    study is told, so a worker killed in between leaves one behind."""
    import pyarrow.parquet as pq

    path = parts / f"{number:06d}.parquet"
    if not path.exists():
        return None
    meta = json.loads(pq.read_schema(path).metadata[b"fedsparse_trial"])
    if "values" in meta:
        return meta["state"], [float(v) for v in meta["values"]]
    return meta["state"], float(meta["value"])


def _reserve(study, spec: StudySpec, storage, parts: Path):
    """Under the study lock: finish stale trials whose results were saved, fail the other
    stale ones, re-queue failed ones, then ask or decline.

    Returns a new trial, ``"wait"`` (the budget is held by running trials) or ``"done"``.
    """
    import optuna
    from optuna.trial import TrialState

    trials = study.get_trials(deepcopy=False)
    now = time.time()
    for t in trials:
        if t.state == TrialState.RUNNING and _is_stale(t, now, spec.settings.grace_period):
            saved = recorded_outcome(parts, t.number)
            with contextlib.suppress(optuna.exceptions.UpdateFinishedTrialError):
                if saved is not None:  # its worker stopped between saving and telling
                    state, value = saved
                    values = (
                        None if state == "PRUNED" else value if isinstance(value, list) else [value]
                    )
                    storage.set_trial_state_values(t._trial_id, TrialState[state], values)
                    log.info(
                        "study %s: trial %d was saved, not told; %s",
                        spec.name,
                        t.number,
                        state.lower(),
                    )
                else:
                    storage.set_trial_state_values(t._trial_id, TrialState.FAIL)
                    log.info("study %s: trial %d was abandoned; failed", spec.name, t.number)
    # Optuna's own heartbeat check (RDB storage; a no-op for the journal) after ours: ours
    # finishes a stale trial whose part was saved, where Optuna's would fail it and its work be
    # done again (the fedsparse heartbeat is written just before Optuna's, so ours is never
    # later to call a trial stale)
    with warnings.catch_warnings():  # (experimental in Optuna)
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        optuna.storages.fail_stale_trials(study)
    trials = study.get_trials(deepcopy=False)
    retried = {t.user_attrs.get("fedsparse_retry_of") for t in trials}
    for t in trials:
        if t.state != TrialState.FAIL or t.number in retried:
            continue
        errors = t.user_attrs.get("fedsparse_errors", 0) + ("fedsparse_error" in t.user_attrs)
        if errors >= MAX_ERRORS:
            raise TuneError(
                f"study {spec.name}: trial {t.number} failed {errors} times (last error: "
                f"{t.user_attrs.get('fedsparse_error')}); fix the cause and rerun"
            )
        study.enqueue_trial(
            t.params,
            user_attrs={"fedsparse_retry_of": t.number, "fedsparse_errors": errors},
            skip_if_exists=False,
        )
        log.info("study %s: trial %d re-queued", spec.name, t.number)
    trials = study.get_trials(deepcopy=False)
    states = [t.state for t in trials]
    finished = sum(s in (TrialState.COMPLETE, TrialState.PRUNED) for s in states)
    running = states.count(TrialState.RUNNING)
    if finished >= spec.settings.n_trials:
        return "done"
    if finished + running >= spec.settings.n_trials:
        return "wait"
    study.sampler = make_sampler(spec, offset=len(trials))
    with warnings.catch_warnings():  # heartbeats with ask/tell: we send them ourselves
        warnings.simplefilter("ignore", UserWarning)
        trial = study.ask(spec.distributions())
    tid = trial._trial_id
    storage.set_trial_user_attr(tid, "fedsparse_worker", {"host": HOST, "pid": os.getpid()})
    storage.set_trial_user_attr(tid, "fedsparse_heartbeat", time.time())
    return trial


class _Heartbeat:
    """Records a trial's heartbeat every ``interval`` seconds in a thread."""

    def __init__(self, storage, trial_id: int, interval: int):
        self.storage, self.trial_id, self.interval = storage, trial_id, interval
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.wait(self.interval):
            try:
                self.storage.set_trial_user_attr(self.trial_id, "fedsparse_heartbeat", time.time())
                if hasattr(self.storage, "record_heartbeat"):
                    self.storage.record_heartbeat(self.trial_id)
            except Exception as exc:  # a finished trial, a lost connection: try again later
                log.debug("heartbeat of trial %d: %s", self.trial_id, exc)

    def __enter__(self):
        if hasattr(self.storage, "record_heartbeat"):
            self.storage.record_heartbeat(self.trial_id)
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop.set()
        self.thread.join()


@dataclass(frozen=True)
class Checkpoints:
    """Where a study's trial runs checkpoint, and how often (``every_s``; 0: never)."""

    layout: Layout
    study: str
    every_s: float

    def of(self, cfg: dict[str, Any], label: str) -> Checkpoint:
        """The checkpoint of a trial's run of ``cfg`` (``label``: the trial, for its log)."""
        from ..results.checkpoint import Checkpoint

        config_id = run_id(cfg)
        path = self.layout.study_checkpoint(self.study, config_id)
        return Checkpoint(path, [[config_id]], self.every_s, f"{label} run {config_id}")


def _reported(objective: float | None) -> float:
    """What a trial reports of a round's objective (a blow-up: +inf)."""
    return objective if objective is not None and math.isfinite(objective) else math.inf


def trial_run_id(cfg: dict[str, Any], study: str, number: int) -> str:
    """A trial run's id: its config's run id, qualified by study and trial.

    A configuration may be tried twice, and a pruned trial is a partial run.

    Parameters
    ----------
    cfg
        The run's normalised config.
    study
        The study's name.
    number
        The trial's number.

    Returns
    -------
    str
        16 hex characters of a SHA-256; equal arguments give equal ids.
    """
    text = json.dumps([run_id(cfg), study, number])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def metric_value(trace: pa.Table, metric: dict[str, Any], rounds: int) -> float:
    """A study's metric of one run's trace (lower is better).

    Parameters
    ----------
    trace
        The run's trace, round 0 first.
    metric
        The study's metric: ``{name[, target]}``, ``name`` one of :data:`METRICS`.
    rounds
        The run's configured rounds.

    Returns
    -------
    float
        ``best_objective``: the lowest finite objective (+inf if none).
        ``rounds_to_target``: the first round whose objective is at most ``target``, else
        ``rounds + 1``. Otherwise a diverged run (or a non-finite last objective) scores +inf;
        ``final_objective``: the last objective; ``auc_log_objective``: the mean over rounds
        of log10 of the objective (trapezoids, values floored at 1e-300).
    """
    r = np.asarray(trace.column("round").to_pylist(), dtype=float)
    obj = np.asarray(trace.column("objective").to_pylist(), dtype=float)
    diverged = trace.column("status")[-1].as_py() == "diverged" or not np.isfinite(obj[-1])
    name = metric["name"]
    if name == "best_objective":
        finite = obj[np.isfinite(obj)]
        return float(finite.min()) if finite.size else math.inf
    if name == "rounds_to_target":
        hit = np.flatnonzero(np.isfinite(obj) & (obj <= metric["target"]))
        return float(r[hit[0]]) if hit.size else float(rounds + 1)  # not reached: rounds + 1
    if diverged:
        return math.inf
    if name == "final_objective":
        return float(obj[-1])
    if len(r) < 2:
        return float(np.log10(max(obj[0], 1e-300)))
    logs = np.log10(np.maximum(obj, 1e-300))
    return float(np.sum((logs[1:] + logs[:-1]) / 2 * np.diff(r)) / (r[-1] - r[0]))


def objective_value(trace: pa.Table, objective: dict[str, Any], rounds: int) -> float:
    """One objective of one run's trace, for a multi-objective study.

    Parameters
    ----------
    trace
        The run's trace.
    objective
        ``{metric, direction[, target]}`` of ``optuna.objectives``.
    rounds
        The run's configured rounds.

    Returns
    -------
    float
        :func:`metric_value` for a metric of :data:`METRICS`, else the last row's value of the
        column (``total_bytes``: bytes up plus down). A diverged run, or one whose last
        objective is not finite, scores the worst value for the direction (+inf or -inf): it
        stopped early, so its bytes and time alone would look best.

    Raises
    ------
    ConfigError
        The runs have no value of that column (e.g. no test split).
    """
    worst = math.inf if objective["direction"] == "minimize" else -math.inf
    obj = trace.column("objective")[-1].as_py()
    if trace.column("status")[-1].as_py() == "diverged" or obj is None or not math.isfinite(obj):
        return worst
    name = objective["metric"]
    if name in METRICS:
        return metric_value(trace, {"name": name, **objective}, rounds)
    columns = {"total_bytes": ("bytes_up", "bytes_down")}.get(
        name, (TOTALS.get(name) or name.removeprefix("final_"),)
    )
    values = [trace.column(c)[-1].as_py() for c in columns]
    if any(v is None or (isinstance(v, float) and math.isnan(v)) for v in values):
        raise ConfigError(
            f"optuna.objectives: {name}: the runs have no {' or '.join(columns)} "
            "(e.g. no test split without a partition test_fraction)"
        )
    return float(sum(values))


def _run_trial(
    study, trial, spec: StudySpec, data, storage, parts: Path, checkpoints: Checkpoints
) -> str:
    """Run one trial's runs, save them, then tell the study; returns the final state name.
    Each run checkpoints as a shard's does and resumes from its checkpoint (a killed trial
    is retried with the same configuration, under another number)."""
    from optuna.trial import TrialState

    from ..pipeline.shard_runner import run_summary
    from ..sweep.plan import Run
    from ..training.experiment import run_result

    params = trial.params
    prune = spec.settings.pruner["name"] != "none"  # (never with objectives: sweep/studies.py)
    objectives = spec.settings.objectives
    tables, summaries, values, pruned, used = [], [], [], False, []
    for k, seed in enumerate(spec.seeds):
        cfg = spec.run_config(params, seed)
        stopped, reported = [], set()

        def on_round(t: int, objective: float, k=k, stopped=stopped, reported=reported) -> bool:
            trial.report(_reported(objective), k * (spec.rounds + 1) + t)
            reported.add(t)
            if trial.should_prune():
                stopped.append(t)
                return True
            return False

        t0 = time.perf_counter()
        checkpoint = checkpoints.of(cfg, f"study {spec.name}: trial {trial.number}")
        used.append(checkpoint)
        result = run_result(cfg, data, on_round if prune else None, checkpoint)
        if prune:  # a resumed run's rounds before its checkpoint: reported as uninterrupted
            rounds = result.trace.column("round").to_pylist()
            objective = result.trace.column("objective").to_pylist()
            for t, value in zip(rounds, objective, strict=True):
                if t > 0 and t not in reported:
                    trial.report(_reported(value), k * (spec.rounds + 1) + t)
        rid = trial_run_id(cfg, spec.name, trial.number)
        trace = with_study_columns(result.trace, rid, spec, trial.number, "RUNNING")
        wall = time.perf_counter() - t0
        summary = run_summary(Run(rid, cfg), trace, wall, spec.name, result.client_summary)
        tables.append(trace)
        summaries.append(summary)
        if objectives:
            values.append([objective_value(trace, o, spec.rounds) for o in objectives])
        else:
            values.append(metric_value(trace, spec.settings.metric, spec.rounds))
        if stopped:
            pruned = True
            break
    state = "PRUNED" if pruned else "COMPLETE"
    if objectives:  # per objective, the mean over seeds (a diverged seed's worst dominates)
        told = [float(np.mean(v)) for v in zip(*values, strict=True)]
        outcome = {"value": told[0], "values": told, "state": state}
    else:
        value = math.inf if any(math.isinf(v) for v in values) else float(np.mean(values))
        told, outcome = value, {"value": value, "state": state}
    meta = {
        b"fedsparse_run_summaries": json.dumps(summaries).encode(),
        b"fedsparse_trial": json.dumps(outcome).encode(),
    }
    table = pa.concat_tables(tables)
    write_parquet_atomic(
        table.replace_schema_metadata({**TRACE_SCHEMA.metadata, **meta}),
        parts / f"{trial.number:06d}.parquet",
    )
    for checkpoint in used:  # saved: the runs are not computed again
        checkpoint.remove()
    if pruned:
        study.tell(trial, state=TrialState.PRUNED)
    else:
        study.tell(trial, told)
    return state


def with_study_columns(
    trace: pa.Table, rid: str, spec: StudySpec, number: int | None, state: str
) -> pa.Table:
    """``trace`` with the run id and the study's columns set on every row.

    Parameters
    ----------
    trace
        The run's trace, with the trace schema's columns.
    rid
        The run id written (:func:`trial_run_id`, or a held-out run's config id).
    spec
        The study's spec (its name and sampler).
    number
        The trial's number; None: null.
    state
        The ``trial_state`` written (e.g. ``RUNNING``, ``HOLDOUT``).

    Returns
    -------
    pyarrow.Table
        A new table; ``trace`` is not changed.
    """
    n = trace.num_rows
    values = {
        "run_id": pa.array([rid] * n, pa.string()),
        "study": pa.array([spec.name] * n, pa.string()),
        "trial_number": pa.array([number] * n, pa.int64()),
        "trial_state": pa.array([state] * n, pa.string()),
        "sampler": pa.array([spec.sampler_json()] * n, pa.string()),
    }
    for name, col in values.items():
        trace = trace.set_column(trace.schema.get_field_index(name), name, col)
    return trace


def check_space_on_data(spec: StudySpec, data) -> None:
    """Fail before any trial if a corner of the space cannot run on this data set."""
    from ..objective.problem import Problem

    problem = Problem.from_config(data, spec.model)
    for corner in spec.corners():
        cfg = spec.run_config(corner, spec.seeds[0])
        try:
            params = ALGORITHMS[spec.algorithm].resolved_params(cfg["params"])
            ALGORITHMS[spec.algorithm](problem, params, 0).check_problem()
        except ConfigError as exc:
            raise ConfigError(f"space: {spec.algorithm} on {spec.dataset}: {exc}") from None


def run_worker(
    sweep: dict[str, Any],
    study: str,
    data_root: str | Path,
    results_dir: str | Path,
    done: str | Path | None = None,
    poll: float = 0.5,
) -> int:
    """Run trials of ``study`` until it holds exactly ``n_trials`` finished trials.

    Safe to run in any number of processes at once, on any machines sharing the storage:
    trials are reserved under the study lock. A trial that fails is logged and marked failed
    (unless its outcome was saved), and the worker goes on. SIGTERM is turned into
    KeyboardInterrupt while it runs (in the main thread).

    Parameters
    ----------
    sweep
        The sweep config.
    study
        The study's name in the sweep's plan.
    data_root
        The folder of the built data sets.
    results_dir
        The results folder holding the study's storage, lock and trial traces.
    done
        A JSON marker written (atomically) once the study is complete; None: none.
    poll
        Seconds to wait before asking again while no trial can be reserved.

    Returns
    -------
    int
        The number of trials this worker ran.

    Raises
    ------
    ConfigError
        The sweep has no such study, a corner of the space cannot run on the data, or the
        stored study was created with other settings.
    DataError
        The built data set is missing or not the spec's.
    """
    from ..data import load_built

    spec = study_spec(sweep, study)
    data = load_built(data_root, spec.dataset, spec.data_digest)
    check_space_on_data(spec, data)
    storage = open_storage(spec, results_dir)
    s = load_study(spec, storage)
    check_identity(s, spec, results_dir)  # a study of other settings gets no trial of these
    parts = Layout(results_dir).study_trial_parts(spec.name)
    parts.mkdir(parents=True, exist_ok=True)
    minutes = float(sweep_default(sweep, "checkpoint_minutes"))
    checkpoints = Checkpoints(Layout(results_dir), spec.name, 60.0 * minutes)
    previous = signal.getsignal(signal.SIGTERM)
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _interrupt)
    ran = 0
    try:
        while True:
            with study_lock(storage, spec, results_dir):
                trial = _reserve(s, spec, storage, parts)
            if trial == "done":
                break
            if trial == "wait":
                time.sleep(poll)
                continue
            ran += 1
            log.info("study %s: trial %d %s", spec.name, trial.number, trial.params)
            try:
                with _Heartbeat(storage, trial._trial_id, spec.settings.heartbeat_interval):
                    state = _run_trial(s, trial, spec, data, storage, parts, checkpoints)
            except BaseException as exc:
                if isinstance(exc, Exception):
                    log.exception("study %s: trial %d failed", spec.name, trial.number)
                    with contextlib.suppress(Exception):  # (unless already failed as stale)
                        storage.set_trial_user_attr(trial._trial_id, "fedsparse_error", repr(exc))
                if recorded_outcome(parts, trial.number) is None:
                    _tell_failed(s, trial)
                # else: saved but not told; left running, the next reservation finishes it
                if not isinstance(exc, Exception):
                    raise
                continue
            log.info("study %s: trial %d %s", spec.name, trial.number, state)
    finally:
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, previous)
    log.info("study %s: this worker ran %d trials; the study is complete", spec.name, ran)
    if done is not None:
        write_json(done, {"study": spec.name, "trials_run": ran, "host": HOST})
    return ran


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def _tell_failed(study, trial) -> None:
    from optuna.trial import TrialState

    with contextlib.suppress(Exception):
        study.tell(trial, state=TrialState.FAIL)
