"""Search spaces, settings and study specifications of a sweep with ``method: optuna``.

Planning only (no Optuna import): :func:`fedsparse.sweep.plan_sweep` calls
:func:`plan_studies`, and the modules of :mod:`fedsparse.tune` (a layer above the sweep,
whose package re-exports these names) run the studies it plans.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from typing import Any

from ..algorithms import ALGORITHMS
from ..defaults import sweep_default
from ..errors import ConfigError, did_you_mean
from ..layout import SHARD_DIGEST_CHARS as DIGEST_CHARS
from ..training.config import (
    DEFAULT_DIVERGENCE_FACTOR,
    as_integer,
    as_number,
    check_keys,
    divergence_factor,
    normalize_run_config,
    partition_label,
)

OPTUNA_KEYS = (
    "n_trials",
    "n_workers",
    "sampler",
    "metric",
    "objectives",
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
    "nsga2": ("seed", "population_size"),  # NSGA-II, for multi-objective studies
}
PRUNERS = {
    "none": (),
    "median": ("n_startup_trials", "n_warmup_steps", "interval_steps"),
    "hyperband": ("min_resource", "reduction_factor"),
}
METRICS = ("final_objective", "best_objective", "auc_log_objective", "rounds_to_target")
# optuna.objectives: a trial's runs' values (mean over seeds) at the final round, or METRICS;
# the bytes and times are the runs' totals (runs.parquet's total_* columns)
OBJECTIVE_METRICS = (
    *METRICS,
    "final_test_accuracy",
    "final_train_accuracy",
    "final_train_loss",
    "final_pm_test_accuracy",
    "total_bytes_up",
    "total_bytes_down",
    "total_bytes",
    "total_time",
)
DIRECTIONS = ("minimize", "maximize")
SPACE_TYPES = ("float", "int", "categorical")


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
    # multi-objective studies: [{metric, direction[, target]}, ...] instead of ``metric``
    objectives: list[dict[str, Any]] | None = None

    def directions(self) -> list[str]:
        """Optuna's study directions: one per objective (a single metric is minimised)."""
        return [o["direction"] for o in self.objectives] if self.objectives else ["minimize"]


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
    divergence_factor: float = DEFAULT_DIVERGENCE_FACTOR

    @property
    def data_digest(self) -> str:
        """The digest of its data set's spec (fedsparse.data.identity)."""
        from ..data.identity import data_digest

        return data_digest(self.data, self.model["loss"], self.partition)

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
                "divergence_factor": self.divergence_factor,
            }
        )

    def corners(self) -> list[dict[str, Any]]:
        """The searched parameters all at their lows, and all at their highs."""
        return corners(self.space)

    def identity(self) -> dict[str, Any]:
        """What a stored study must match to be resumed (budget and workers may change);
        a divergence factor only where it is not the default, so older studies resume."""
        factor = self.divergence_factor
        extra = {} if factor == DEFAULT_DIVERGENCE_FACTOR else {"divergence_factor": factor}
        return {
            **extra,
            "algorithm": self.algorithm,
            "data": self.data,
            "model": self.model,
            "partition": self.partition,
            "rounds": self.rounds,
            "eval_every": self.eval_every,
            "seeds": self.seeds,
            "fixed": self.fixed,
            "space": self.space_json(),
            "sampler": self.settings.sampler,
            # (a single-objective study's identity is as before: its stored studies resume)
            **(
                {"objectives": self.settings.objectives}
                if self.settings.objectives
                else {"metric": self.settings.metric}
            ),
        }

    @property
    def digest(self) -> str:
        """A short hash of everything a study's outputs depend on: its identity (space,
        sampler, metric, runs), its pruner, budget and held-out seeds. Its marker is named by
        it, so an edit asks for a marker the folder lacks and the study's jobs run again
        (:func:`fedsparse.tune.storage.create_study` then resumes, extends or refuses it)
        whether or not Snakemake's records are there."""
        settings = self.settings
        text = json.dumps(
            [self.identity(), settings.pruner, settings.n_trials, settings.holdout_seeds],
            sort_keys=True,
            default=str,
        )
        return hashlib.sha256(text.encode()).hexdigest()[:DIGEST_CHARS]

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
    """Validate the ``optuna`` and ``space`` sections: one study per data set x algorithm.

    Parameters
    ----------
    sweep
        The sweep config (its ``optuna``, ``space``, ``rounds``, ``eval_every`` and
        ``divergence_factor``).
    name
        The sweep's name, the first part of each study's name.
    datasets
        The plan's data sets: name to ``{data, model, partition?}``.
    algorithms
        Algorithm to its fixed hyperparameters from the config.
    seeds
        The seeds every trial runs.

    Returns
    -------
    dict
        Study name (``<sweep>--<data set>--<partition>--<algorithm>``) to its spec, by
        algorithm then data set.

    Raises
    ------
    ConfigError
        A bad ``optuna`` or ``space`` section, a sampler the space does not suit, or a corner
        of the space that makes no valid run config.
    """
    settings = parse_settings(sweep.get("optuna"), seeds)
    space = parse_space(sweep.get("space"))
    rounds = as_integer(sweep["rounds"], "rounds", low=1)
    eval_every = as_integer(sweep_default(sweep, "eval_every"), "eval_every", low=1)
    factor = divergence_factor(sweep)
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
                divergence_factor=factor,
            )
            # every corner of the space must make a valid run config
            for corner in corners(algo_space):
                try:
                    spec.run_config(corner, seeds[0])
                except ConfigError as exc:
                    raise ConfigError(f"space: {algo}: {exc}") from None
            studies[spec.name] = spec
    return studies


def _partition_label(partition: Any) -> str:
    """The partition's short label, safe in a study (and file) name."""
    if isinstance(partition, str):
        return partition
    return "".join(c if c.isalnum() or c in "._-" else "_" for c in partition_label(partition))


def parse_settings(value: Any, seeds: list[int]) -> TuneSettings:
    if not isinstance(value, dict):
        raise ConfigError("optuna: required with method optuna (a mapping with n_trials, ...)")
    check_keys(value, OPTUNA_KEYS, "optuna")
    if "n_trials" not in value:
        raise ConfigError("optuna.n_trials: required (the number of finished trials per study)")
    n_trials = as_integer(value["n_trials"], "optuna.n_trials", low=1)
    n_workers = as_integer(value.get("n_workers", 1), "optuna.n_workers", low=1)
    sampler = _named(value.get("sampler", {"name": "tpe", "seed": 0}), "optuna.sampler", SAMPLERS)
    if "seed" in sampler:
        sampler["seed"] = as_integer(sampler["seed"], "optuna.sampler.seed", low=0)
    else:
        sampler["seed"] = 0
    for key in ("n_startup_trials",):
        if key in sampler:
            sampler[key] = as_integer(sampler[key], f"optuna.sampler.{key}", low=0)
    if "population_size" in sampler:  # (NSGA-II needs two parents)
        sampler["population_size"] = as_integer(
            sampler["population_size"], "optuna.sampler.population_size", low=2
        )
    for key in ("multivariate", "constant_liar"):
        if key in sampler and not isinstance(sampler[key], bool):
            raise ConfigError(f"optuna.sampler.{key}: must be true or false")
    pruner = _named(value.get("pruner", "none"), "optuna.pruner", PRUNERS)
    for key in PRUNERS[pruner["name"]]:
        if key in pruner:
            pruner[key] = as_integer(pruner[key], f"optuna.pruner.{key}", low=0)
    objectives = None
    if "objectives" in value:
        if "metric" in value:
            raise ConfigError(
                "optuna: give metric (one objective) or objectives (several), not both"
            )
        objectives = _objectives(value["objectives"])
        if pruner["name"] != "none":
            raise ConfigError(
                "optuna.pruner: Optuna cannot prune a multi-objective study (objectives); "
                "remove the pruner or use pruner: none"
            )
        if sampler["name"] == "cmaes":
            raise ConfigError(
                "optuna.sampler.name: cmaes optimises one objective; with objectives use "
                "nsga2, tpe, random or grid"
            )
        metric = None
    else:
        metric = _named(value.get("metric", "final_objective"), "optuna.metric", None)
        if metric["name"] not in METRICS:
            raise ConfigError(
                f"optuna.metric: unknown metric {metric['name']!r} (known: {', '.join(METRICS)})"
            )
        _check_target(metric, "name", "optuna.metric")
    storage = _storage(value.get("storage", "journal"), n_workers)
    holdout = value.get("holdout_seeds", [s + 1000 for s in seeds])
    if not isinstance(holdout, list) or not holdout:
        raise ConfigError("optuna.holdout_seeds: must be a non-empty list of integers")
    holdout = [as_integer(s, f"optuna.holdout_seeds[{i}]", low=0) for i, s in enumerate(holdout)]
    reused = sorted(set(holdout) & set(seeds))
    if reused:
        raise ConfigError(
            f"optuna.holdout_seeds: must be fresh seeds, not used by the trials (seeds "
            f"{', '.join(map(str, reused))})"
        )
    interval = as_integer(value.get("heartbeat_interval", 10), "optuna.heartbeat_interval", low=1)
    grace = as_integer(value.get("grace_period", 60), "optuna.grace_period", low=1)
    if grace <= interval:
        raise ConfigError(
            f"optuna.grace_period: must exceed heartbeat_interval ({interval}), got {grace}"
        )
    return TuneSettings(
        n_trials, n_workers, sampler, metric, pruner, storage, holdout, interval, grace, objectives
    )


def _check_target(metric: dict[str, Any], key: str, where: str, allowed: tuple = ()) -> None:
    """The keys of a metric named by ``metric[key]`` (besides ``allowed``): rounds_to_target
    needs its target (a number); no other metric takes options."""
    target = metric[key] == "rounds_to_target"
    check_keys(metric, (key, *allowed, *(("target",) if target else ())), where)
    if target:
        if "target" not in metric:
            raise ConfigError(f"{where}.target: required by rounds_to_target")
        metric["target"] = as_number(metric["target"], f"{where}.target")


def _objectives(value: Any) -> list[dict[str, Any]]:
    """optuna.objectives: two or more {metric, direction} mappings, each metric once."""
    where = "optuna.objectives"
    if not isinstance(value, list) or len(value) < 2:
        raise ConfigError(
            f"{where}: must list two or more {{metric: ..., direction: minimize|maximize}} "
            "(one objective: use optuna.metric)"
        )
    out = []
    for i, item in enumerate(value):
        at = f"{where}[{i}]"
        if not isinstance(item, dict):
            raise ConfigError(f"{at}: must be a mapping {{metric: ..., direction: ...}}")
        item = dict(item)
        name = item.get("metric")
        if name not in OBJECTIVE_METRICS:
            raise ConfigError(
                f"{at}.metric: unknown metric {name!r}{did_you_mean(str(name), OBJECTIVE_METRICS)}"
                f" (known: {', '.join(OBJECTIVE_METRICS)})"
            )
        if item.get("direction") not in DIRECTIONS:
            raise ConfigError(
                f"{at}.direction: must be minimize or maximize, got {item.get('direction')!r}"
            )
        _check_target(item, "metric", at, ("direction",))
        out.append(item)
    names = [o["metric"] for o in out]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ConfigError(f"{where}: lists {twice[0]} twice")
    return out


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
        check_keys(value, ("name", *known[value["name"]]), where)
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
        check_keys(value, ("url_env",), where)
        env = value.get("url_env")
        if not isinstance(env, str) or not env:
            raise ConfigError(f"{where}.url_env: must name an environment variable")
        url = os.environ.get(env)
        if url is not None:
            check_url(url, env, n_workers)
        return {"kind": "url", "url_env": env}
    raise ConfigError(f"{where}: must be journal, sqlite or {{url_env: VARIABLE}}, got {value!r}")


def check_url(url: str, env: str, n_workers: int) -> None:
    """Refuse a database URL that is neither PostgreSQL nor (for one worker) SQLite.

    Parameters
    ----------
    url
        The URL held by the environment variable.
    env
        The variable's name, for the message (the URL itself is never shown).
    n_workers
        The study's number of workers.

    Raises
    ------
    ConfigError
        A scheme other than ``postgresql``/``postgres`` (driver suffixes allowed) or
        ``sqlite``, or SQLite with more than one worker.
    """
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
            raise ConfigError(
                f"{where}: unknown parameter{did_you_mean(key, known)} "
                f"(known: {', '.join(sorted(known))})"
            )
        if not isinstance(spec, dict) or spec.get("type") not in SPACE_TYPES:
            raise ConfigError(f"{where}.type: must be one of {', '.join(SPACE_TYPES)}")
        kind = spec["type"]
        if kind == "categorical":
            check_keys(spec, ("type", "choices"), where)
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
        check_keys(spec, ("type", "low", "high", "log", "step"), where)
        for bound in ("low", "high"):
            if bound not in spec:
                raise ConfigError(f"{where}.{bound}: required for type {kind}")
        conv = as_integer if kind == "int" else as_number
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
                f"{where}: {algo} has no such hyperparameter{did_you_mean(key, declared)} "
                f"(known: {', '.join(declared)})"
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


def corners(space: dict[str, SearchParam]) -> list[dict[str, Any]]:
    """The searched parameters all at their lows, and all at their highs."""
    lows, highs = {}, {}
    for key, p in space.items():
        if p.type == "categorical":
            lows[key], highs[key] = p.choices[0], p.choices[-1]
        else:
            lows[key], highs[key] = p.low, p.high
    return [lows, highs]
