"""Optuna studies over a sweep's hyperparameters: search spaces, workers, export.

A sweep with ``method: optuna`` names a search space instead of a grid::

    method: optuna
    optuna:
      n_trials: 20                 # the study ends with exactly this many finished trials
      n_workers: 2                 # worker processes (Snakemake jobs) sharing the study
      sampler: {name: tpe, seed: 0}          # tpe | random | grid | cmaes
      metric: final_objective      # | best_objective | auc_log_objective
                                   # | {name: rounds_to_target, target: 0.5}
      pruner: {name: median}       # none | median | hyperband
      storage: journal             # | sqlite (one worker) | {url_env: FEDSPARSE_OPTUNA_URL}
      holdout_seeds: [100, 101]    # the best configuration is re-run on these seeds
    space:
      stepsize: {type: float, low: 1.0e-4, high: 0.1, log: true}
      local_steps: {type: int, low: 1, high: 10}
      sparsity: {type: categorical, choices: [100, 200]}

There is one study per (data set, partition, algorithm). A trial is one ordinary
run per seed of ``seeds`` (the metric is their mean); its per-round objective is
reported to the pruner (step = seed index x (rounds + 1) + round).

Exactly ``n_trials`` finished trials: a worker reserves a trial under a lock held
on the study (an exclusive ``flock`` on a file next to a journal or SQLite file,
a transaction-level advisory lock on PostgreSQL) and only while
``finished + running < n_trials``. Finished means COMPLETE or PRUNED. A running
trial either finishes (the count is kept) or fails; a failed trial is re-queued
with the same parameters (a WAITING trial, which ``ask`` takes before sampling
anything new), so the count can neither overshoot nor stay short. A worker that
finds the budget reserved by running trials waits for them. Running trials of a
dead worker (same host and its process gone, or no heartbeat for
``grace_period`` seconds; on PostgreSQL also Optuna's own heartbeats) are
failed and re-queued by the next worker that takes the lock, so an interrupted
study resumes where it stopped.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import hashlib
import json
import logging
import math
import os
import signal
import socket
import threading
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .algorithms import ALGORITHMS
from .config import _integer, _known, _number, normalize_run_config, run_id
from .errors import ConfigError, FedsparseError
from .results import RUNS_SCHEMA, TRACE_SCHEMA, rows_table, write_parquet_atomic

log = logging.getLogger("fedsparse.tune")

OPTUNA_KEYS = (
    "n_trials",
    "n_workers",
    "sampler",
    "metric",
    "pruner",
    "storage",
    "holdout_seeds",
    "heartbeat_interval",
    "grace_period",
)
SAMPLERS = {
    "tpe": ("seed", "n_startup_trials", "multivariate", "constant_liar"),
    "random": ("seed",),
    "grid": ("seed",),
    "cmaes": ("seed", "n_startup_trials"),
}
PRUNERS = {
    "none": (),
    "median": ("n_startup_trials", "n_warmup_steps", "interval_steps"),
    "hyperband": ("min_resource", "reduction_factor"),
}
METRICS = ("final_objective", "best_objective", "auc_log_objective", "rounds_to_target")
SPACE_TYPES = ("float", "int", "categorical")
HOST = socket.gethostname()
MAX_ERRORS = 3  # a trial whose objective raised this many times stops the study


class TuneError(FedsparseError):
    """A study cannot go on (e.g. a trial keeps failing); the message says why."""


# ---------------------------------------------------------------------------- the plan


@dataclass(frozen=True)
class SearchParam:
    """One hyperparameter's search range."""

    name: str
    type: str  # float | int | categorical
    low: float | int | None = None
    high: float | int | None = None
    log: bool = False
    step: float | int | None = None
    choices: tuple[Any, ...] | None = None

    def to_json(self) -> dict[str, Any]:
        if self.type == "categorical":
            return {"type": "categorical", "choices": list(self.choices or ())}
        out = {"type": self.type, "low": self.low, "high": self.high, "log": self.log}
        if self.step is not None:
            out["step"] = self.step
        return out

    def distribution(self):
        import optuna.distributions as od

        if self.type == "categorical":
            return od.CategoricalDistribution(list(self.choices or ()))
        if self.type == "int":
            return od.IntDistribution(self.low, self.high, log=self.log, step=self.step or 1)
        return od.FloatDistribution(self.low, self.high, log=self.log, step=self.step)

    def grid_values(self) -> list[Any] | None:
        if self.type == "categorical":
            return list(self.choices or ())
        if self.type == "int":
            return list(range(int(self.low), int(self.high) + 1, int(self.step or 1)))
        return None


@dataclass
class TuneSettings:
    n_trials: int
    n_workers: int
    sampler: dict[str, Any]
    metric: dict[str, Any]
    pruner: dict[str, Any]
    storage: dict[str, Any]  # {"kind": journal | sqlite | url, "url_env": ...}
    holdout_seeds: list[int]
    heartbeat_interval: int
    grace_period: int


@dataclass
class StudySpec:
    """Everything one study needs: a fixed run config but for the searched parameters."""

    name: str
    sweep: str
    dataset: str
    data: dict[str, Any]
    model: dict[str, Any]
    partition: Any  # the data set's partition config ("natural" or a mapping)
    algorithm: str
    rounds: int
    eval_every: int
    seeds: list[int]
    fixed: dict[str, Any]
    space: dict[str, SearchParam]
    settings: TuneSettings = field(repr=False)

    def run_config(self, params: dict[str, Any], seed: int) -> dict[str, Any]:
        """The normalised run config of ``params`` (searched and fixed) on ``seed``."""
        return normalize_run_config(
            {
                "sweep": self.sweep,
                "dataset": self.data,
                "partition": self.partition,
                "model": self.model,
                "algorithm": self.algorithm,
                "params": {**self.fixed, **params},
                "rounds": self.rounds,
                "seed": seed,
                "eval_every": self.eval_every,
            }
        )

    def identity(self) -> dict[str, Any]:
        """What a stored study must match to be resumed (budget and workers may change)."""
        return {
            "algorithm": self.algorithm,
            "data": self.data,
            "model": self.model,
            "partition": self.partition,
            "rounds": self.rounds,
            "eval_every": self.eval_every,
            "seeds": self.seeds,
            "fixed": self.fixed,
            "space": self.space_json(),
            "metric": self.settings.metric,
        }

    def space_json(self) -> dict[str, Any]:
        return {k: p.to_json() for k, p in self.space.items()}

    def distributions(self) -> dict[str, Any]:
        return {k: p.distribution() for k, p in self.space.items()}

    def sampler_json(self) -> str:
        return json.dumps(self.settings.sampler, sort_keys=True)


def plan_studies(
    sweep: dict[str, Any],
    name: str,
    datasets: dict[str, dict[str, Any]],
    algorithms: dict[str, dict[str, Any]],
    seeds: list[int],
) -> dict[str, StudySpec]:
    """Validate the ``optuna`` and ``space`` sections; one study per data set x algorithm."""
    settings = parse_settings(sweep.get("optuna"), seeds)
    space = parse_space(sweep.get("space"))
    rounds = _integer(sweep["rounds"], "rounds", low=1)
    eval_every = _integer(sweep.get("eval_every", 1), "eval_every", low=1)
    studies = {}
    for algo, overrides in algorithms.items():
        fixed, algo_space = _algorithm_space(algo, space, overrides)
        _check_sampler_space(settings, algo_space, algo)
        for ds_name, ds in datasets.items():
            partition = ds.get("partition", "natural")
            spec = StudySpec(
                name=f"{name}--{ds_name}--{_partition_label(partition)}--{algo}",
                sweep=name,
                dataset=ds_name,
                data=ds["data"],
                model=ds["model"],
                partition=partition,
                algorithm=algo,
                rounds=rounds,
                eval_every=eval_every,
                seeds=seeds,
                fixed=fixed,
                space=algo_space,
                settings=settings,
            )
            # every corner of the space must make a valid run config
            for corner in _corners(algo_space):
                try:
                    spec.run_config(corner, seeds[0])
                except ConfigError as exc:
                    raise ConfigError(f"space: {algo}: {exc}") from None
            studies[spec.name] = spec
    return studies


def _partition_label(partition: Any) -> str:
    if isinstance(partition, str):
        return partition
    from . import config

    label = getattr(config, "partition_label", None)  # (partitioners: a short label)
    text = label(partition) if label else str(partition.get("kind", "partition"))
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in text)


def parse_settings(value: Any, seeds: list[int]) -> TuneSettings:
    if not isinstance(value, dict):
        raise ConfigError("optuna: required with method optuna (a mapping with n_trials, ...)")
    _known(value, OPTUNA_KEYS, "optuna")
    if "n_trials" not in value:
        raise ConfigError("optuna.n_trials: required (the number of finished trials per study)")
    n_trials = _integer(value["n_trials"], "optuna.n_trials", low=1)
    n_workers = _integer(value.get("n_workers", 1), "optuna.n_workers", low=1)
    sampler = _named(value.get("sampler", {"name": "tpe", "seed": 0}), "optuna.sampler", SAMPLERS)
    if "seed" in sampler:
        sampler["seed"] = _integer(sampler["seed"], "optuna.sampler.seed", low=0)
    else:
        sampler["seed"] = 0
    for key in ("n_startup_trials",):
        if key in sampler:
            sampler[key] = _integer(sampler[key], f"optuna.sampler.{key}", low=0)
    for key in ("multivariate", "constant_liar"):
        if key in sampler and not isinstance(sampler[key], bool):
            raise ConfigError(f"optuna.sampler.{key}: must be true or false")
    pruner = _named(value.get("pruner", "none"), "optuna.pruner", PRUNERS)
    for key in PRUNERS[pruner["name"]]:
        if key in pruner:
            pruner[key] = _integer(pruner[key], f"optuna.pruner.{key}", low=0)
    metric = _named(value.get("metric", "final_objective"), "optuna.metric", None)
    if metric["name"] not in METRICS:
        raise ConfigError(
            f"optuna.metric: unknown metric {metric['name']!r} (known: {', '.join(METRICS)})"
        )
    if metric["name"] == "rounds_to_target":
        _known(metric, ("name", "target"), "optuna.metric")
        if "target" not in metric:
            raise ConfigError("optuna.metric.target: required by rounds_to_target")
        metric["target"] = _number(metric["target"], "optuna.metric.target")
    else:
        _known(metric, ("name",), "optuna.metric")
    storage = _storage(value.get("storage", "journal"), n_workers)
    holdout = value.get("holdout_seeds", [s + 1000 for s in seeds])
    if not isinstance(holdout, list) or not holdout:
        raise ConfigError("optuna.holdout_seeds: must be a non-empty list of integers")
    holdout = [_integer(s, f"optuna.holdout_seeds[{i}]", low=0) for i, s in enumerate(holdout)]
    reused = sorted(set(holdout) & set(seeds))
    if reused:
        raise ConfigError(
            f"optuna.holdout_seeds: must be fresh seeds, not used by the trials (seeds "
            f"{', '.join(map(str, reused))})"
        )
    interval = _integer(value.get("heartbeat_interval", 10), "optuna.heartbeat_interval", low=1)
    grace = _integer(value.get("grace_period", 60), "optuna.grace_period", low=1)
    if grace <= interval:
        raise ConfigError(
            f"optuna.grace_period: must exceed heartbeat_interval ({interval}), got {grace}"
        )
    return TuneSettings(
        n_trials, n_workers, sampler, metric, pruner, storage, holdout, interval, grace
    )


def _named(value: Any, where: str, known: dict[str, tuple] | None) -> dict[str, Any]:
    if isinstance(value, str):
        value = {"name": value}
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        raise ConfigError(f"{where}: must be a name or a mapping with a 'name'")
    value = dict(value)
    if known is not None:
        if value["name"] not in known:
            raise ConfigError(
                f"{where}.name: unknown {where.split('.')[-1]} {value['name']!r} "
                f"(known: {', '.join(known)})"
            )
        _known(value, ("name", *known[value["name"]]), where)
    return value


def _storage(value: Any, n_workers: int) -> dict[str, Any]:
    where = "optuna.storage"
    if value in ("journal", "sqlite"):
        if value == "sqlite" and n_workers > 1:
            raise ConfigError(
                f"{where}: SQLite allows only one worker, but n_workers is {n_workers}; use "
                "journal (several workers on one machine) or a PostgreSQL URL (url_env)"
            )
        return {"kind": value}
    if isinstance(value, dict):
        if "url" in value:
            raise ConfigError(
                f"{where}.url: database URLs hold credentials and never go in a config file; "
                "put the URL in an environment variable and name it with url_env"
            )
        _known(value, ("url_env",), where)
        env = value.get("url_env")
        if not isinstance(env, str) or not env:
            raise ConfigError(f"{where}.url_env: must name an environment variable")
        url = os.environ.get(env)
        if url is not None:
            _check_url(url, env, n_workers)
        return {"kind": "url", "url_env": env}
    raise ConfigError(f"{where}: must be journal, sqlite or {{url_env: VARIABLE}}, got {value!r}")


def _check_url(url: str, env: str, n_workers: int) -> None:
    scheme = url.split(":", 1)[0].split("+", 1)[0]
    if scheme == "sqlite":
        if n_workers > 1:
            raise ConfigError(
                f"optuna.storage.url_env: {env} is a SQLite URL, which allows only one worker, "
                f"but n_workers is {n_workers}; use a PostgreSQL URL or journal"
            )
    elif scheme not in ("postgresql", "postgres"):
        raise ConfigError(
            f"optuna.storage.url_env: {env} must hold a postgresql:// (or sqlite://) URL, "
            f"got a {scheme}:// URL"
        )


def parse_space(value: Any) -> dict[str, SearchParam]:
    if not isinstance(value, dict) or not value:
        raise ConfigError(
            "space: required with method optuna: maps hyperparameters to "
            "{type: float|int|categorical, ...}"
        )
    known = {h.name for cls in ALGORITHMS.values() for h in cls.hyperparameters}
    out = {}
    for key, spec in value.items():
        where = f"space.{key}"
        if key not in known:
            raise ConfigError(f"{where}: unknown parameter (known: {', '.join(sorted(known))})")
        if not isinstance(spec, dict) or spec.get("type") not in SPACE_TYPES:
            raise ConfigError(f"{where}.type: must be one of {', '.join(SPACE_TYPES)}")
        kind = spec["type"]
        if kind == "categorical":
            _known(spec, ("type", "choices"), where)
            choices = spec.get("choices")
            if not isinstance(choices, list) or not choices:
                raise ConfigError(f"{where}.choices: must be a non-empty list")
            for i, c in enumerate(choices):
                if not isinstance(c, str | int | float | bool) or c is None:
                    raise ConfigError(f"{where}.choices[{i}]: must be a number or a string")
            if len(set(map(repr, choices))) != len(choices):
                raise ConfigError(f"{where}.choices: lists a value twice")
            out[key] = SearchParam(key, kind, choices=tuple(choices))
            continue
        _known(spec, ("type", "low", "high", "log", "step"), where)
        for bound in ("low", "high"):
            if bound not in spec:
                raise ConfigError(f"{where}.{bound}: required for type {kind}")
        conv = _integer if kind == "int" else _number
        low = conv(spec["low"], f"{where}.low")
        high = conv(spec["high"], f"{where}.high")
        log_scale = spec.get("log", False)
        if not isinstance(log_scale, bool):
            raise ConfigError(f"{where}.log: must be true or false")
        if low > high:
            raise ConfigError(f"{where}: low ({low:g}) > high ({high:g})")
        if log_scale and low <= 0:
            raise ConfigError(f"{where}.low: a log scale needs low > 0, got {low:g}")
        step = spec.get("step")
        if step is not None:
            step = conv(step, f"{where}.step")
            if step <= 0:
                raise ConfigError(f"{where}.step: must be > 0, got {step:g}")
            if log_scale:
                raise ConfigError(f"{where}.step: cannot be used with a log scale")
        out[key] = SearchParam(key, kind, low, high, log_scale, step)
    return out


def _algorithm_space(
    algo: str, space: dict[str, SearchParam], overrides: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, SearchParam]]:
    """An algorithm's fixed values (its overrides) and the part of the space it declares."""
    declared = {h.name: h for h in ALGORITHMS[algo].hyperparameters}
    fixed = {}
    for key, value in overrides.items():
        where = f"algorithms.{algo}.{key}"
        if key not in declared:
            raise ConfigError(
                f"{where}: {algo} has no such hyperparameter (known: {', '.join(declared)})"
            )
        if isinstance(value, list):
            if len(value) != 1:
                raise ConfigError(f"{where}: with method optuna, fix one value (or search it)")
            value = value[0]
        fixed[key] = declared[key].validate(value, where)
    out = {}
    for key, p in space.items():
        if key not in declared or key in fixed:
            continue
        h, where = declared[key], f"space.{key}"
        if p.type == "categorical":
            for i, c in enumerate(p.choices or ()):
                h.validate(c, f"{where}.choices[{i}]")
        else:
            if h.kind is str or (h.kind is int and p.type == "float"):
                raise ConfigError(
                    f"{where}.type: {key} takes {h.kind.__name__} values; use "
                    f"{'int or ' if h.kind is int else ''}categorical"
                )
            h.validate(p.low, f"{where}.low")
            h.validate(p.high, f"{where}.high")
        out[key] = p
    for key, h in declared.items():
        if h.required and key not in out and key not in fixed:
            raise ConfigError(
                f"space.{key}: required by {algo} (search it here or fix it under "
                f"algorithms.{algo})"
            )
    if not out:
        raise ConfigError(f"space: nothing left to search for {algo} (all values fixed)")
    return fixed, out


def _check_sampler_space(settings: TuneSettings, space: dict[str, SearchParam], algo: str):
    if settings.sampler["name"] != "grid":
        return
    size = 1
    for key, p in space.items():
        values = p.grid_values()
        if values is None:
            raise ConfigError(
                f"space.{key}: the grid sampler needs categorical choices or an int range, "
                "not a float range"
            )
        size *= len(values)
    if settings.n_trials > size:
        raise ConfigError(
            f"optuna.n_trials: {settings.n_trials} exceeds the {size} points of {algo}'s grid"
        )


def _corners(space: dict[str, SearchParam]) -> list[dict[str, Any]]:
    lows, highs = {}, {}
    for key, p in space.items():
        if p.type == "categorical":
            lows[key], highs[key] = p.choices[0], p.choices[-1]
        else:
            lows[key], highs[key] = p.low, p.high
    return [lows, highs]


def study_spec(sweep: dict[str, Any], study: str) -> StudySpec:
    from .sweep import plan_sweep

    plan = plan_sweep(sweep)
    if study not in plan.studies:
        known = ", ".join(plan.studies) or "none: not an optuna sweep"
        raise ConfigError(f"study {study!r}: not in this sweep (studies: {known})")
    return plan.studies[study]


# ---------------------------------------------------------------------------- storage


def study_dir(results_dir: str | Path, study: str) -> Path:
    return Path(results_dir) / "optuna" / study


def open_storage(spec: StudySpec, results_dir: str | Path):
    """The study's Optuna storage (journal file, SQLite file or the URL in the environment)."""
    import optuna

    st, settings = spec.settings.storage, spec.settings
    folder = study_dir(results_dir, spec.name)
    folder.mkdir(parents=True, exist_ok=True)
    if st["kind"] == "journal":
        from optuna.storages.journal import JournalFileBackend, JournalStorage

        path = (folder / "journal.log").absolute()
        lock = _FlockJournalLock(f"{path}.flock")
        return JournalStorage(JournalFileBackend(str(path), lock_obj=lock))
    if st["kind"] == "sqlite":
        url = f"sqlite:///{(folder / 'study.db').absolute()}"
    else:
        url = os.environ.get(st["url_env"])
        if not url:
            raise ConfigError(
                f"optuna.storage.url_env: environment variable {st['url_env']} is not set "
                "(it must hold the database URL)"
            )
        _check_url(url, st["url_env"], settings.n_workers)
    sqlite = url.startswith("sqlite")
    with warnings.catch_warnings():  # heartbeat_interval is experimental in Optuna
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return optuna.storages.RDBStorage(
            url,
            engine_kwargs=None if sqlite else {"pool_pre_ping": True},
            # (SQLite: one worker; its own staleness check is enough)
            heartbeat_interval=None if sqlite else settings.heartbeat_interval,
            grace_period=None if sqlite else settings.grace_period,
        )


def _FlockJournalLock(path: str):
    """A journal file lock held with ``flock``: the kernel releases it when its process dies,
    so a worker killed while writing never leaves a stale lock behind (Optuna's own file
    locks wait out a grace period, or spin forever on a relative path)."""
    from optuna.storages.journal._file import BaseJournalFileLock  # (not re-exported)

    class FlockLock(BaseJournalFileLock):
        def __init__(self) -> None:
            self._local = threading.local()

        def acquire(self) -> bool:
            fh = open(path, "a")  # noqa: SIM115 (closed in release)
            fcntl.flock(fh, fcntl.LOCK_EX)
            self._local.fh = fh
            return True

        def release(self) -> None:
            fh = getattr(self._local, "fh", None)
            if fh is not None:
                self._local.fh = None
                fcntl.flock(fh, fcntl.LOCK_UN)
                fh.close()

    return FlockLock()


@contextlib.contextmanager
def study_lock(storage, spec: StudySpec, results_dir: str | Path) -> Iterator[None]:
    """Serialise trial reservation among all workers of a study."""
    engine = getattr(storage, "engine", None)
    if engine is not None and engine.dialect.name == "postgresql":
        from sqlalchemy import text

        key = int.from_bytes(hashlib.sha256(spec.name.encode()).digest()[:8], "big", signed=True)
        with engine.begin() as conn:  # released when the transaction ends, or the session dies
            conn.execute(text("SELECT pg_advisory_xact_lock(:k)"), {"k": key})
            yield
        return
    path = study_dir(results_dir, spec.name) / "reserve.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def make_sampler(spec: StudySpec, offset: int = 0):
    """The configured sampler, seeded with seed + ``offset`` (the next trial's number)."""
    import optuna

    s = dict(spec.settings.sampler)
    name, seed = s.pop("name"), s.pop("seed") + offset
    if name == "tpe":
        return optuna.samplers.TPESampler(seed=seed, **s)
    if name == "random":
        return optuna.samplers.RandomSampler(seed=seed)
    if name == "grid":
        grid = {k: p.grid_values() for k, p in spec.space.items()}
        return optuna.samplers.GridSampler(grid, seed=seed)
    return optuna.samplers.CmaEsSampler(seed=seed, warn_independent_sampling=False, **s)


def make_pruner(spec: StudySpec):
    import optuna

    p = dict(spec.settings.pruner)
    name = p.pop("name")
    if name == "median":
        return optuna.pruners.MedianPruner(**p)
    if name == "hyperband":
        total = len(spec.seeds) * (spec.rounds + 1)
        return optuna.pruners.HyperbandPruner(
            min_resource=p.get("min_resource", max(1, spec.eval_every)),
            max_resource=total,
            reduction_factor=p.get("reduction_factor", 3),
        )
    return optuna.pruners.NopPruner()


def load_study(spec: StudySpec, storage, offset: int = 0):
    import optuna

    return optuna.load_study(
        study_name=spec.name,
        storage=storage,
        sampler=make_sampler(spec, offset),
        pruner=make_pruner(spec),
    )


def create_study(sweep: dict[str, Any], study: str, results_dir: str | Path, marker=None):
    """Create the study (or check that the stored one matches the config); write ``marker``."""
    import optuna

    spec = study_spec(sweep, study)
    storage = open_storage(spec, results_dir)
    identity = spec.identity()
    with study_lock(storage, spec, results_dir):
        try:
            s = optuna.load_study(study_name=spec.name, storage=storage)
        except KeyError:
            s = optuna.create_study(study_name=spec.name, storage=storage, direction="minimize")
            s.set_user_attr("fedsparse", identity)
            log.info("study %s: created (%s storage)", spec.name, spec.settings.storage["kind"])
        else:
            stored = s.user_attrs.get("fedsparse")
            if json.dumps(stored, sort_keys=True) != json.dumps(identity, sort_keys=True):
                raise ConfigError(
                    f"study {spec.name}: the stored study has a different search space, "
                    "metric or run settings; give the sweep a new name (or delete the study) "
                    "to start over"
                )
            log.info("study %s: resuming (%d trials stored)", spec.name, len(s.trials))
    if marker is not None:
        _write_json(marker, {"study": spec.name, "storage": spec.settings.storage})
    return s


# ---------------------------------------------------------------------------- workers


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


def _reserve(study, spec: StudySpec, storage):
    """Under the study lock: fail stale trials, re-queue failed ones, then ask or decline.

    Returns a new trial, ``"wait"`` (the budget is held by running trials) or ``"done"``.
    """
    import optuna
    from optuna.trial import TrialState

    with warnings.catch_warnings():  # (experimental in Optuna)
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        optuna.storages.fail_stale_trials(study)  # RDB heartbeats (no-op for the journal)
    trials = study.get_trials(deepcopy=False)
    now = time.time()
    for t in trials:
        if t.state == TrialState.RUNNING and _is_stale(t, now, spec.settings.grace_period):
            with contextlib.suppress(optuna.exceptions.UpdateFinishedTrialError):
                storage.set_trial_state_values(t._trial_id, TrialState.FAIL)
                log.info("study %s: trial %d was abandoned; failed", spec.name, t.number)
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


def trial_run_id(cfg: dict[str, Any], study: str, number: int) -> str:
    """A trial run's id: its config's run id, qualified by study and trial (a configuration
    may be tried twice, and a pruned trial is a partial run)."""
    text = json.dumps([run_id(cfg), study, number])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def metric_value(trace: pa.Table, metric: dict[str, Any], rounds: int) -> float:
    """The metric of one run's trace (lower is better); a diverged run scores +inf."""
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


def _run_trial(study, trial, spec: StudySpec, data, storage, parts: Path) -> str:
    """Run one trial's runs, save them, then tell the study; returns the final state name."""
    from optuna.trial import TrialState

    from .experiment import run_trace
    from .shard import run_summary
    from .sweep import Run

    params = trial.params
    prune = spec.settings.pruner["name"] != "none"
    tables, summaries, values, pruned = [], [], [], False
    for k, seed in enumerate(spec.seeds):
        cfg = spec.run_config(params, seed)
        stopped = []

        def on_round(t: int, objective: float, k=k, stopped=stopped) -> bool:
            value = objective if math.isfinite(objective) else math.inf
            trial.report(value, k * (spec.rounds + 1) + t)
            if trial.should_prune():
                stopped.append(t)
                return True
            return False

        t0 = time.perf_counter()
        trace = run_trace(cfg, data, on_round=on_round if prune else None)
        rid = trial_run_id(cfg, spec.name, trial.number)
        trace = _with_study_columns(trace, rid, spec, trial.number, "RUNNING")
        summary = run_summary(Run(rid, cfg), trace, time.perf_counter() - t0, spec.name)
        tables.append(trace)
        summaries.append(summary)
        values.append(metric_value(trace, spec.settings.metric, spec.rounds))
        if stopped:
            pruned = True
            break
    value = math.inf if any(math.isinf(v) for v in values) else float(np.mean(values))
    state = "PRUNED" if pruned else "COMPLETE"
    meta = {
        b"fedsparse_run_summaries": json.dumps(summaries).encode(),
        b"fedsparse_trial": json.dumps({"value": value, "state": state}).encode(),
    }
    table = pa.concat_tables(tables)
    write_parquet_atomic(
        table.replace_schema_metadata({**TRACE_SCHEMA.metadata, **meta}),
        parts / f"{trial.number:06d}.parquet",
    )
    if pruned:
        study.tell(trial, state=TrialState.PRUNED)
    else:
        study.tell(trial, value)
    return state


def _with_study_columns(
    trace: pa.Table, rid: str, spec: StudySpec, number: int | None, state: str
) -> pa.Table:
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
    from .problem import Problem

    model = spec.model
    problem = Problem(data, model["loss"], model["l2"], model["weights"])
    for corner in _corners(spec.space):
        cfg = spec.run_config(corner, spec.seeds[0])
        try:
            ALGORITHMS[spec.algorithm](problem, cfg["params"], 0).check_problem()
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

    Returns the number of trials this worker ran. Safe to run in any number of
    processes at once, on any machines sharing the storage.
    """
    from .data import load_dataset_dir

    spec = study_spec(sweep, study)
    data = load_dataset_dir(Path(data_root) / spec.dataset)
    check_space_on_data(spec, data)
    storage = open_storage(spec, results_dir)
    s = load_study(spec, storage)
    parts = study_dir(results_dir, spec.name) / "trials"
    parts.mkdir(parents=True, exist_ok=True)
    previous = signal.getsignal(signal.SIGTERM)
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _interrupt)
    ran = 0
    try:
        while True:
            with study_lock(storage, spec, results_dir):
                trial = _reserve(s, spec, storage)
            if trial == "done":
                break
            if trial == "wait":
                time.sleep(poll)
                continue
            ran += 1
            log.info("study %s: trial %d %s", spec.name, trial.number, trial.params)
            try:
                with _Heartbeat(storage, trial._trial_id, spec.settings.heartbeat_interval):
                    state = _run_trial(s, trial, spec, data, storage, parts)
            except BaseException as exc:
                if isinstance(exc, Exception):
                    log.exception("study %s: trial %d failed", spec.name, trial.number)
                    with contextlib.suppress(Exception):  # (unless already failed as stale)
                        storage.set_trial_user_attr(trial._trial_id, "fedsparse_error", repr(exc))
                _tell_failed(s, trial)
                if not isinstance(exc, Exception):
                    raise
                continue
            log.info("study %s: trial %d %s", spec.name, trial.number, state)
    finally:
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, previous)
    log.info("study %s: this worker ran %d trials; the study is complete", spec.name, ran)
    if done is not None:
        _write_json(done, {"study": spec.name, "trials_run": ran, "host": HOST})
    return ran


def _interrupt(signum, frame):
    raise KeyboardInterrupt


def _tell_failed(study, trial) -> None:
    from optuna.trial import TrialState

    with contextlib.suppress(Exception):
        study.tell(trial, state=TrialState.FAIL)


# ---------------------------------------------------------------------------- results


def finished_trials(study) -> list:
    from optuna.trial import TrialState

    return sorted(
        study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.PRUNED)),
        key=lambda t: t.number,
    )


def export_study(
    sweep: dict[str, Any], study: str, results_dir: str | Path, traces_out, runs_out
) -> None:
    """Write the finished trials' traces and run rows (trial number, state, sampler)."""
    spec = study_spec(sweep, study)
    s = load_study(spec, open_storage(spec, results_dir))
    trials = finished_trials(s)
    if len(trials) != spec.settings.n_trials:
        raise TuneError(
            f"study {spec.name}: {len(trials)} finished trials, expected "
            f"{spec.settings.n_trials}; run the workers first"
        )
    parts = study_dir(results_dir, spec.name) / "trials"
    tables, rows = [], []
    space = json.dumps(spec.space_json(), sort_keys=True)
    for t in trials:
        path = parts / f"{t.number:06d}.parquet"
        if not path.is_file():
            raise TuneError(f"{path}: trace of finished trial {t.number} is missing")
        table = pq.read_table(path)
        summaries = json.loads(table.schema.metadata[b"fedsparse_run_summaries"])
        table = table.replace_schema_metadata(TRACE_SCHEMA.metadata)
        state = t.state.name
        idx = table.schema.get_field_index("trial_state")
        table = table.set_column(idx, "trial_state", pa.array([state] * table.num_rows))
        tables.append(_conform(table, TRACE_SCHEMA))
        for row in summaries:
            row.update(
                study=spec.name,
                trial_number=t.number,
                trial_state=state,
                sampler=spec.sampler_json(),
                trial_value=_finite_or_none(t.value),
                search_space=space,
            )
            rows.append(row)
    write_parquet_atomic(rows_table(rows, RUNS_SCHEMA), runs_out)
    write_parquet_atomic(pa.concat_tables(tables), traces_out)
    log.info("study %s: exported %d trials (%d runs)", spec.name, len(trials), len(rows))


def run_holdout(
    sweep: dict[str, Any],
    study: str,
    data_root: str | Path,
    results_dir: str | Path,
    traces_out,
    runs_out,
) -> None:
    """Re-run the study's best configuration on the fresh ``holdout_seeds``."""
    from .data import load_dataset_dir
    from .experiment import run_trace
    from .shard import run_summary
    from .sweep import Run

    spec = study_spec(sweep, study)
    s = load_study(spec, open_storage(spec, results_dir))
    try:
        best = s.best_trial
    except ValueError:
        raise TuneError(
            f"study {spec.name}: no completed trial (all pruned or failed): nothing to re-run"
        ) from None
    data = load_dataset_dir(Path(data_root) / spec.dataset)
    tables, rows = [], []
    for seed in spec.settings.holdout_seeds:
        cfg = spec.run_config(best.params, seed)
        rid = run_id(cfg)
        t0 = time.perf_counter()
        trace = _with_study_columns(run_trace(cfg, data), rid, spec, best.number, "HOLDOUT")
        row = run_summary(Run(rid, cfg), trace, time.perf_counter() - t0, spec.name)
        row.update(
            study=spec.name,
            trial_number=best.number,
            trial_state="HOLDOUT",
            sampler=spec.sampler_json(),
            trial_value=_finite_or_none(best.value),
            search_space=json.dumps(spec.space_json(), sort_keys=True),
        )
        tables.append(trace)
        rows.append(row)
        log.info(
            "study %s: held-out seed %d of trial %d: %s, final objective %.6g",
            spec.name,
            seed,
            best.number,
            row["status"],
            row["final_objective"],
        )
    write_parquet_atomic(rows_table(rows, RUNS_SCHEMA), runs_out)
    write_parquet_atomic(pa.concat_tables(tables), traces_out)


def study_status(sweep: dict[str, Any], results_dir: str | Path) -> list[dict[str, Any]]:
    """Per study: trials by state (for ``fedsparse tune status``)."""
    import optuna

    from .sweep import plan_sweep

    out = []
    for name, spec in plan_sweep(sweep).studies.items():
        row = {"study": name, "n_trials": spec.settings.n_trials}
        try:
            s = load_study(spec, open_storage(spec, results_dir))
        except KeyError:
            row["created"] = False
            out.append(row)
            continue
        row["created"] = True
        for state in optuna.trial.TrialState:
            row[state.name.lower()] = sum(t.state == state for t in s.get_trials(deepcopy=False))
        try:
            row["best_value"], row["best_params"] = s.best_value, s.best_params
        except ValueError:
            pass
        out.append(row)
    return out


def _conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` with ``schema``'s columns in its order (columns it lacks are null)."""
    cols = [
        table.column(f.name).cast(f.type)
        if f.name in table.column_names
        else pa.nulls(table.num_rows, f.type)
        for f in schema
    ]
    return pa.Table.from_arrays(cols, schema=schema)


def _finite_or_none(v: float | None) -> float | None:
    return float(v) if v is not None and not math.isnan(v) else None


def _write_json(path: str | Path, obj: dict[str, Any]) -> None:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    obj = {**obj, "written_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds")}
    tmp.write_text(json.dumps(obj, indent=1, sort_keys=True, default=str) + "\n")
    os.replace(tmp, path)
