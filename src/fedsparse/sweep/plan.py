"""Sweeps: expand a sweep config into runs with stable ids and pack them into shards.

A sweep config names data sets, algorithms (each optionally overriding grid
values), a hyperparameter grid, seeds, rounds and ``eval_every``::

    sweep: paper-simulations
    rounds: 200
    eval_every: 1
    divergence_factor: 1000   # a run whose objective passes 1000 x its round-0 one diverged
    seeds: [0, 1]
    shard_size: 25        # runs per shard (one process, one cluster job)
    max_shards: 500       # larger sweeps get larger shards
    shard_minutes: 20     # or: shards of ~20 estimated minutes of runs (fedsparse.sweep.sharding)
    datasets:
      sim1-a0.1-b0.1:
        data: {kind: synthetic, task: linear, alpha: 0.1, beta: 0.1}
        model: {loss: least_squares}
    algorithms:
      fedht: {}
      distiht: {local_steps: [1]}
    grid:
      stepsize: [0.001, 0.0003]
      local_steps: [3, 5]
      sparsity: [200]

Runs are the cartesian product data set x algorithm x grid (with the
algorithm's overrides) x seed. A shard holds runs of one data set, so one
process (one cluster job) loads one data set and its kernels once.
"""

from __future__ import annotations

import gc
import itertools
import math
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..defaults import sweep_default
from ..errors import ConfigError, FedsparseError, did_you_mean
from ..training.cohorts import MAX_MEMBERS, cohort_key

# Light at import (no algorithms, no kernels): a cluster job's own Snakemake imports this module
# to read the plan file; the algorithms and the studies are imported where a sweep is planned.
from ..training.config import (
    as_integer,
    as_number,
    check_keys,
    divergence_factor,
    normalize_dataset,
    normalize_model,
    normalize_partition,
    normalize_run_config,
    run_ids,
    time_model,
    with_default_loss,
    yaml12_numbers,
)
from .cost import (
    RUN_OVERHEAD_S,
    RunWork,
    job_resources,
    known_shape,
    run_seconds,
    shard_seconds,
)
from .sharding import pack, shard_digest

SWEEP_KEYS = (
    "sweep",
    "rounds",
    "eval_every",
    "seeds",
    "shard_size",
    "max_shards",
    # estimated minutes of runs a shard (fedsparse.sweep.sharding); absent: shard_size
    "shard_minutes",
    "datasets",
    "algorithms",
    "grid",
    "results",
    "data_cache",  # where downloaded real data is cached (default $FEDSPARSE_DATA_CACHE)
    "embedding_sample",  # rows in each data set's t-SNE figure (0: none)
    "method",  # grid (default) | optuna (fedsparse.tune: the optuna and space sections)
    # every run's (fedsparse.training.config.DEFAULT_DIVERGENCE_FACTOR if absent)
    "divergence_factor",
    # every run's simulated time; a key given a list is swept (fedsparse.training.config)
    "time_model",
    "optuna",
    "space",
    "progress_every",  # seconds between the sweep's progress lines (fedsparse.pipeline.progress)
    "fuse",  # false: every run computes alone, no cohorts (fedsparse.training.cohorts)
    "checkpoint_minutes",  # minutes of a run's computation between checkpoints (0: none)
)  # results: the workflow's output folder, not part of any run
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass(slots=True)
class Run:
    """One run of a sweep: its normalised config and id."""

    run_id: str
    config: dict[str, Any]
    # its trace comes from the computation of the run before it: a time sibling, the same run
    # under a time model its algorithm does not read (fedsparse.training.experiment.run_results)
    sibling: bool = False
    # it joins the cohort of the runs before it: their computations share passes over the
    # data (fedsparse.training.cohorts); its own computation starts here
    cohort: bool = False

    @property
    def joins(self) -> bool:
        """Whether it computes with the run before it (a time sibling or a cohort member):
        the two are never parted between shards."""
        return self.sibling or self.cohort

    @property
    def dataset(self) -> str:
        return self.config["dataset"]["name"]


@dataclass
class Plan:
    """A sweep expanded into runs and packed into named shards (insertion-ordered)."""

    name: str
    datasets: dict[str, dict[str, Any]]  # name -> {"data": ..., "model": ...}
    shards: dict[str, list[Run]] = field(default_factory=dict)
    studies: dict[str, Any] = field(default_factory=dict)  # method optuna: name -> StudySpec
    # shard -> its runs' cost.RunWork (the cost model's input from the algorithms), where read
    # from a plan file; None: computed from the runs' configs
    shard_work: Callable[[str], list[RunWork]] | None = field(default=None, repr=False)
    # shard -> its digest (read from a plan file, else computed from its runs when asked for)
    digests: dict[str, str] = field(default_factory=dict, repr=False)
    # data set -> the digest of its spec (computed when first asked for)
    data_digests: dict[str, str] = field(default_factory=dict, repr=False)

    @property
    def runs(self) -> list[Run]:
        return [r for shard in self.shards.values() for r in shard]

    def shard_digest(self, shard: str) -> str:
        """The digest of the runs ``shard`` holds (fedsparse.sweep.sharding.shard_digest), which its
        output files carry in their names."""
        if shard not in self.digests:
            run_ids = [r.run_id for r in self.shards[shard]]
            self.digests[shard] = shard_digest(self.name, run_ids)
        return self.digests[shard]

    def shard_dataset(self, shard: str) -> str:
        return self.shards[shard][0].dataset

    def data_digest(self, dataset: str) -> str:
        """The digest of the data set's spec (fedsparse.data.identity), which names its
        built folder: an edited spec asks for a folder the results lack."""
        if dataset not in self.data_digests:
            from ..data.identity import entry_digest

            self.data_digests[dataset] = entry_digest(self.datasets[dataset])
        return self.data_digests[dataset]

    def shard_resources(self, shard: str, data_dir: str | Path) -> dict[str, int]:
        """SLURM ``runtime`` (minutes) and ``mem_mb`` for one shard job."""
        runs = self.shards[shard]
        entry = self.datasets[runs[0].dataset]
        configs, siblings = [r.config for r in runs], [r.sibling for r in runs]
        cohorts = [r.cohort for r in runs]
        return job_resources(
            configs,
            entry["data"],
            data_dir,
            self._work(shard),
            siblings,
            cohorts,
            entry.get("partition", "natural"),
        )

    def shard_priority(self, shard: str) -> int:
        """Estimated seconds of a shard (0 if its data's shape is not known yet): the
        scheduler starts costly shards first, so no long shard is left running alone at the
        end."""
        runs = self.shards[shard]
        entry = self.datasets[runs[0].dataset]
        shape = known_shape(entry["data"], None, entry.get("partition", "natural"))
        if shape is None:
            return 0
        configs, siblings = [r.config for r in runs], [r.sibling for r in runs]
        cohorts = [r.cohort for r in runs]
        return round(shard_seconds(configs, shape, self._work(shard), siblings, cohorts))

    def _work(self, shard: str) -> list[RunWork] | None:
        return None if self.shard_work is None else self.shard_work(shard)

    def worker_resources(self, study: str, data_dir: str | Path) -> dict[str, int]:
        """The same for one Optuna worker: its share of the trials at the costliest corner."""
        spec = self.studies[study]
        trials = math.ceil(spec.settings.n_trials / spec.settings.n_workers) + 1  # + a re-queue
        configs = [spec.run_config(c, spec.seeds[0]) for c in spec.corners()]
        part = spec.partition

        def runtime(c: dict[str, Any]) -> int:
            return job_resources([c], spec.data, data_dir, partition=part)["runtime"]

        costly = max(configs, key=runtime)
        return job_resources([costly] * trials, spec.data, data_dir, partition=part)


@contextmanager
def _no_cyclic_gc() -> Iterator[None]:
    """The cyclic garbage collector off while a plan is made and checked: a million runs are
    millions of new objects, none in a reference cycle, and each of its passes over them
    costs seconds and frees nothing."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def plan_sweep(sweep: dict[str, Any]) -> Plan:
    """Validate ``sweep`` and expand it; ConfigError names the offending key."""
    with _no_cyclic_gc():
        return _plan_sweep(sweep)


def _plan_sweep(sweep: dict[str, Any]) -> Plan:
    if not isinstance(sweep, dict):
        raise ConfigError("sweep config: must be a mapping")
    check_keys(sweep, SWEEP_KEYS, "config")
    for key in ("datasets", "algorithms", "rounds"):
        if key not in sweep:
            raise ConfigError(f"{key}: required in a sweep config")
    name = sweep_default(sweep, "sweep")
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise ConfigError(
            f"sweep: must be a name of letters, digits, '.', '_' or '-', got {name!r}"
        )
    seeds = sweep_default(sweep, "seeds")
    if not isinstance(seeds, list) or not seeds:
        raise ConfigError("seeds: must be a non-empty list of integers")
    seeds = [as_integer(s, f"seeds[{i}]", low=0) for i, s in enumerate(seeds)]
    shard_size = as_integer(sweep_default(sweep, "shard_size"), "shard_size", low=1)
    max_shards = as_integer(sweep_default(sweep, "max_shards"), "max_shards", low=1)
    shard_minutes = _shard_minutes(sweep)
    as_integer(sweep_default(sweep, "embedding_sample"), "embedding_sample", low=0)
    divergence_factor(sweep)  # checked once, before any run is planned
    as_number(sweep_default(sweep, "progress_every"), "progress_every", low=0.0)
    as_number(sweep_default(sweep, "checkpoint_minutes"), "checkpoint_minutes", low=0.0)
    if not isinstance(sweep.get("data_cache", ""), str):
        raise ConfigError("data_cache: must be a folder path")
    datasets = _datasets(sweep["datasets"])
    algorithms = _algorithms(sweep["algorithms"])
    method = sweep_default(sweep, "method")
    if method not in ("grid", "optuna"):
        raise ConfigError(f"method: must be grid or optuna, got {method!r}")
    timings = _time_models(sweep)
    if method == "optuna":
        if "time_model" in sweep:
            raise ConfigError("time_model: not supported with method optuna yet (use a grid)")
        if "grid" in sweep:
            raise ConfigError("grid: not used with method optuna (give a space instead)")
        for algo, entry in algorithms.items():
            if isinstance(entry, list):
                raise ConfigError(f"algorithms.{algo}: a list of override sets is for method grid")
        from .studies import plan_studies

        plan = Plan(name=name, datasets=datasets)
        plan.studies = plan_studies(sweep, name, datasets, algorithms, seeds)
        return plan
    for key in ("optuna", "space"):
        if key in sweep:
            raise ConfigError(f"{key}: only used with method: optuna")
    grid = sweep.get("grid", {})
    if not isinstance(grid, dict):
        raise ConfigError("grid: must be a mapping of hyperparameter -> list of values")

    fuse = sweep_default(sweep, "fuse")
    # Snakemake's --config reads True/False as booleans but leaves true/false strings
    fuse = {"true": True, "false": False}.get(fuse.lower(), fuse) if isinstance(fuse, str) else fuse
    if not isinstance(fuse, bool):
        raise ConfigError(f"fuse: must be true or false, got {fuse!r}")
    plan = Plan(name=name, datasets=datasets)
    runs_of: dict[str, list[Run]] = {}
    # each run's estimated seconds where the data's shape is known already: shards of about
    # equal cost (fedsparse.sweep.sharding.pack)
    costs_of: dict[str, list[float] | None] = {}
    joins_of: dict[str, list[bool]] = {}  # each run's Run.joins
    run_count, distinct_ids = 0, set()
    for ds_name, ds in datasets.items():
        shape = known_shape(ds["data"], None, ds.get("partition", "natural"))
        # each configuration: its cohort key (None: alone), its computation (a run and its
        # time siblings: per time model its normalised config and its seeds' run ids) and
        # that computation's runs' estimated seconds
        configurations: list[_Configuration] = []
        # per algorithm and time model, its first configuration's normalised config: the
        # others differ from it in their params alone, and share the rest
        first: dict[tuple[str, int], dict[str, Any]] = {}
        for algo, overrides in _override_sets(algorithms):
            axes = _axes(algo, {**grid, **ds.get("grid", {})}, overrides)
            for values in itertools.product(*axes.values()):
                params = dict(zip(axes, values, strict=True))
                block = []  # per time model: its normalised config and its seeds' run ids
                for t, timing in enumerate(timings):
                    raw = {
                        "sweep": name,
                        "dataset": ds["data"],
                        "model": ds["model"],
                        "partition": ds.get("partition", "natural"),
                        "algorithm": algo,
                        "params": params,
                        "rounds": sweep["rounds"],
                        "seed": seeds[0],
                        "eval_every": sweep_default(sweep, "eval_every"),
                    }
                    if "divergence_factor" in sweep:
                        raw["divergence_factor"] = sweep["divergence_factor"]
                    if timing is not None:
                        raw["time_model"] = timing
                    # normalised once: the seeds' configs differ in the seed alone, and share
                    # the rest (a million-run plan holds one config's parts per 50 seeds)
                    cfg = normalize_run_config(raw, first.get((algo, t)))
                    first.setdefault((algo, t), cfg)
                    rids = run_ids(cfg, seeds)
                    block.append((cfg, rids))
                    distinct_ids.update(rids)
                    run_count += len(rids)
                seconds = [None if shape is None else run_seconds(c, shape) for c, _ in block]
                if len(block) > 1 and not _reads_time_model(algo, block[0][0]["params"]):
                    # time siblings: one computation per seed (never split between shards)
                    key = cohort_key(block[0][0]) if fuse else None
                    costs = (
                        None
                        if shape is None
                        else [seconds[0]] + [RUN_OVERHEAD_S] * (len(block) - 1)
                    )
                    member = _member_seconds(block[0][0], shape, key)
                    configurations.append((key, block, costs, member))
                    continue
                for (cfg, rids), cost in zip(block, seconds, strict=True):
                    key = cohort_key(cfg) if fuse else None
                    member = _member_seconds(cfg, shape, key)
                    configurations.append((key, [(cfg, rids)], [cost], member))
        runs_of[ds_name], costs_of[ds_name], joins_of[ds_name] = _in_cohorts(
            configurations, seeds, shape is not None
        )
    target_s = None if shard_minutes is None else 60 * shard_minutes
    plan.shards = pack(runs_of, costs_of, shard_size, max_shards, target_s, joins_of)
    if len(distinct_ids) != run_count:
        raise ConfigError("grid: the sweep lists the same run twice (duplicate values?)")
    return plan


def plan_checked(sweep: dict[str, Any]) -> Plan:
    """:func:`plan_sweep`, then every check of the runs against their data that the config
    allows before the data is built (:mod:`fedsparse.sweep.checks`): the workflow's planning."""
    from .checks import check_plan

    with _no_cyclic_gc():
        plan = plan_sweep(sweep)
        check_plan(plan, sweep)
    return plan


def plan_or_exit(sweep: dict[str, Any], config_files: list[str]) -> Plan:
    """:func:`plan_checked` for the Snakefile: a mistake ends Snakemake with one line naming
    the config file and the key, exit status 1, before anything is written."""
    import sys

    with _no_cyclic_gc():
        try:
            plan = plan_checked(sweep)
        except FedsparseError as exc:
            where = ", ".join(str(f) for f in config_files) or "--config"
            sys.exit(f"fedsparse: invalid sweep config ({where}): {exc}")
        # The plan lives as long as the Snakemake process: its objects leave the collector's
        # generations for good (gc.freeze), or every later pass (the job graph's, the exit's)
        # would walk them again, seconds each for a million runs.
        gc.freeze()
    return plan


def _datasets(value: Any) -> dict[str, dict[str, Any]]:
    if not isinstance(value, dict) or not value:
        raise ConfigError("datasets: must map data set names to {data: ..., model: ...}")
    out = {}
    for name, entry in value.items():
        where = f"datasets.{name}"
        if not isinstance(name, str) or not NAME_RE.match(name):
            raise ConfigError(f"{where}: a data set name may hold letters, digits, '.', '_', '-'")
        if not isinstance(entry, dict) or "data" not in entry:
            raise ConfigError(f"{where}: must be a mapping with 'data' (and optional 'model')")
        check_keys(entry, ("data", "model", "partition", "grid"), where)
        if not isinstance(entry.get("grid", {}), dict):
            raise ConfigError(f"{where}.grid: must map hyperparameters to lists of values")
        try:
            data = normalize_dataset(
                {**entry["data"], "name": name}
                if isinstance(entry["data"], dict)
                else entry["data"]
            )
            model = normalize_model(with_default_loss(entry.get("model", {}), data))
            partition = normalize_partition(entry.get("partition"), data)
        except ConfigError as exc:
            msg = str(exc)
            if msg.startswith("dataset."):
                msg = f"{where}.data.{msg[len('dataset.') :]}"
            elif msg.startswith(("model.", "partition")):
                msg = f"{where}.{msg}"
            else:
                msg = f"{where}: {msg}"
            raise ConfigError(msg) from None
        out[name] = {"data": data, "model": model}
        if partition != "natural":  # (absent = natural: older plans stay unchanged)
            out[name]["partition"] = partition
        if entry.get("grid"):  # this data set's grid values, over the sweep's grid
            out[name]["grid"] = entry["grid"]
    return out


def _shard_minutes(sweep: dict[str, Any]) -> float | None:
    """The sweep's ``shard_minutes``, validated (None where absent: as many shards as
    ``shard_size`` makes)."""
    if "shard_minutes" not in sweep:
        return None
    value = sweep["shard_minutes"]
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
        raise ConfigError(
            f"shard_minutes: must be a number of minutes > 0 (estimated run time a shard job "
            f"aims at), got {value!r}"
        )
    return float(value)


def _time_models(sweep: dict[str, Any]) -> list[dict[str, Any] | None]:
    """The runs' time models: the sweep's ``time_model`` with every key given a list of values
    expanded (``exchange_time: [0.1, 1, 10, 100]`` is four time models); [None] without one."""
    if "time_model" not in sweep:
        return [None]
    value = sweep["time_model"]
    if not isinstance(value, dict):
        raise ConfigError("time_model: must be a mapping such as {exchange_time: [1, 10]}")
    axes = {key: v if isinstance(v, list) else [v] for key, v in value.items()}
    for key, values in axes.items():
        if not values:
            raise ConfigError(f"time_model.{key}: empty list")
    out = [dict(zip(axes, vals, strict=True)) for vals in itertools.product(*axes.values())]
    for timing in out:
        time_model({"time_model": timing})  # one-line ConfigError naming the key
    return out


def _algorithms(value: Any) -> dict[str, dict[str, Any] | list[dict[str, Any]]]:
    """Each algorithm's grid overrides: a mapping, or a list of mappings (override sets), each
    expanded on its own; values that belong together (a batch size and the step-size schedule
    tuned for it) are one set: ``ssca: [{batch_size: 1, decay: 0.4}, {batch_size: 10, ...}]``."""
    from ..algorithms import ALGORITHMS

    if isinstance(value, list):
        value = {name: {} for name in value}
    if not isinstance(value, dict) or not value:
        raise ConfigError("algorithms: must list algorithm names or map them to grid overrides")
    for name, overrides in value.items():
        if name not in ALGORITHMS:
            raise ConfigError(
                f"algorithms.{name}: unknown algorithm{did_you_mean(name, ALGORITHMS)} "
                f"(known: {', '.join(ALGORITHMS)})"
            )
        sets = overrides if isinstance(overrides, list) else [overrides]
        if not sets or not all(s is None or isinstance(s, dict) for s in sets):
            raise ConfigError(
                f"algorithms.{name}: overrides must be a mapping or a non-empty list of mappings"
            )
    return {
        name: [s or {} for s in overrides] if isinstance(overrides, list) else overrides or {}
        for name, overrides in value.items()
    }


def _override_sets(algorithms: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(algorithm, overrides) for every override set, in order."""
    return [
        (name, s)
        for name, entry in algorithms.items()
        for s in (entry if isinstance(entry, list) else [entry])
    ]


# A configuration of a data set's plan: its cohort key (None: it computes alone), its
# computation (per time model its normalised config and its seeds' run ids: a run and its
# time siblings), that computation's runs' estimated seconds and its first run's as a
# cohort's member (None: not known).
_Configuration = tuple[
    str | None, list[tuple[dict[str, Any], list[str]]], list[float] | None, float | None
]


def _member_seconds(config: dict[str, Any], shape: Any, key: str | None) -> float | None:
    """The estimated seconds ``config``'s run adds as a cohort's member (None: it computes
    alone, or its data's shape is not known)."""
    return None if shape is None or key is None else run_seconds(config, shape, member=True)


def _in_cohorts(
    configurations: list[_Configuration], seeds: list[int], costed: bool
) -> tuple[list[Run], list[float] | None, list[bool]]:
    """The runs of a data set in plan order, each configuration's seeds one after another,
    and each cohort's computations side by side: a cohort is one seed's computations of one
    key (at most cohorts.MAX_MEMBERS a cohort, in the order of the configurations), a key's
    cohorts go in seed order where its first configuration is, its members after the first
    flagged ``cohort`` and charged as members (:func:`fedsparse.sweep.cost.run_seconds`). With the
    runs, their estimated seconds (None: not ``costed``) and their :attr:`Run.joins` flags."""
    keyed: dict[str, list[_Configuration]] = {}
    order: list[list[_Configuration]] = []  # a configuration alone, or a key's configurations
    for configuration in configurations:
        key = configuration[0]
        if key is None:
            order.append([configuration])
        elif key in keyed:
            keyed[key].append(configuration)
        else:
            keyed[key] = [configuration]
            order.append(keyed[key])
    out: list[Run] = []
    out_costs: list[float] | None = [] if costed else None
    out_joins: list[bool] = []
    for members in order:
        joining = [k % MAX_MEMBERS > 0 for k in range(len(members))]
        if any(len(block) > 1 for _, block, _, _ in members):  # time siblings
            for s, seed in enumerate(seeds):
                for (_, block, costs, member), joins in zip(members, joining, strict=True):
                    for t, (cfg, rids) in enumerate(block):
                        out.append(Run(rids[s], {**cfg, "seed": seed}, t > 0, joins and t == 0))
                        out_joins.append(joins or t > 0)
                    if out_costs is not None:
                        out_costs.append(member if joins else costs[0])
                        out_costs += costs[1:]
        elif len(members) == 1:  # one run per seed, alone
            (_, [(cfg, rids)], costs, _) = members[0]
            out += [Run(rid, {**cfg, "seed": seed}) for seed, rid in zip(seeds, rids, strict=True)]
            out_joins += [False] * len(seeds)
            if out_costs is not None:
                out_costs += [costs[0]] * len(seeds)
        else:  # one run per seed and configuration: each seed's cohort(s)
            firsts = [block[0] for _, block, _, _ in members]
            for s, seed in enumerate(seeds):
                out += [
                    Run(rids[s], {**cfg, "seed": seed}, False, joins)
                    for (cfg, rids), joins in zip(firsts, joining, strict=True)
                ]
                out_joins += joining
                if out_costs is not None:
                    out_costs += [
                        member if joins else costs[0]
                        for (_, _, costs, member), joins in zip(members, joining, strict=True)
                    ]
    return out, out_costs, out_joins


def _reads_time_model(algo: str, params: dict[str, Any]) -> bool:
    from ..algorithms import ALGORITHMS

    return ALGORITHMS[algo].reads_time_model(params)


def _axes(algo: str, grid: dict[str, Any], overrides: dict[str, Any]) -> dict[str, list[Any]]:
    """The value lists of each hyperparameter ``algo`` declares, validated."""
    from ..algorithms import ALGORITHMS

    declared = {h.name: h for h in ALGORITHMS[algo].hyperparameters}
    for key in overrides:
        if key not in declared:
            raise ConfigError(
                f"algorithms.{algo}.{key}: {algo} has no such hyperparameter"
                f"{did_you_mean(key, declared)} "
                f"(known: {', '.join(declared)})"
            )
    for key in grid:
        if not any(key in {h.name for h in cls.hyperparameters} for cls in ALGORITHMS.values()):
            known = sorted({h.name for cls in ALGORITHMS.values() for h in cls.hyperparameters})
            raise ConfigError(
                f"grid.{key}: no algorithm has this hyperparameter{did_you_mean(key, known)}"
            )
    axes = {}
    for key, h in declared.items():
        where = f"algorithms.{algo}.{key}" if key in overrides else f"grid.{key}"
        values = overrides.get(key, grid.get(key))
        if values is None:
            if h.required:
                raise ConfigError(f"grid.{key}: required by {algo}")
            continue
        if not isinstance(values, list):
            values = [values]
        if not values:
            raise ConfigError(f"{where}: empty list")
        axes[key] = [h.validate(v, f"{where}[{i}]") for i, v in enumerate(values)]
    return axes


def retype_config(config: dict[str, Any], overrides: dict[str, Any]) -> None:
    """Read the values of a config Snakemake loaded as a user means them, in place.

    Snakemake reads ``--config seeds=[0,1,2]`` with YAML's base loader, which leaves every
    nested value a string ('0'): those get their YAML types (``overrides`` is the ``--config``
    mapping, merged into ``config`` already; top-level values keep Snakemake's own parsing).
    And its YAML 1.1 reader leaves 1e-3 a string: every such value becomes the number.
    """
    import yaml

    def scalar(text: str) -> Any:
        try:
            value = yaml.safe_load(text)
        except yaml.YAMLError:
            return text
        return text if isinstance(value, dict | list) or value is None else value

    def retyped(value: Any) -> Any:
        if isinstance(value, str):
            return scalar(value)
        if isinstance(value, list):
            return [retyped(v) for v in value]
        if isinstance(value, dict):
            return {k: retyped(v) for k, v in value.items()}
        return value

    def merge(target: dict[str, Any], override: dict[str, Any], nested: bool) -> None:
        for key, value in override.items():
            if isinstance(value, dict) and isinstance(target.get(key), dict):
                merge(target[key], value, True)  # merged key by key into the file's mapping
            elif nested or isinstance(value, dict | list):
                target[key] = retyped(value)

    merge(config, overrides, False)
    config.update(yaml12_numbers(config))
