"""What a planned sweep will cost: core-hours, wall time, memory and disk, before it runs.

:func:`sweep_cost` sums the cost model (:mod:`fedsparse.sweep.cost`) over a plan's shard jobs at a
machine's rates; ``fedsparse check`` prints it (:func:`describe`) or its JSON form. The
numbers are the run jobs' (data builds, aggregation and the report are minutes at most).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from ..wording import counted
from .cost import (
    DataShape,
    job_memory_bytes,
    known_shape,
    run_costs,
    run_disk_bytes,
    run_seconds,
)
from .machine import Rates

DAY_S = 86_400.0
DEFAULT_NODE_CORES = 32


@dataclass
class SweepCost:
    """A sweep's estimated cost on a machine (``rates``)."""

    runs: int
    shards: int
    core_seconds: float  # the run jobs' CPU time, start-ups included
    longest_job_seconds: float
    memory_bytes: float  # the largest job's peak
    data_bytes: float
    results_bytes: float
    rates: Rates
    # (data set, algorithm) -> core-seconds, largest first
    contributors: list[tuple[str, str, float]] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)  # data sets only their build can size
    assumptions: list[str] = field(default_factory=list)

    @property
    def disk_bytes(self) -> float:
        return self.data_bytes + self.results_bytes

    def wall_seconds(self, cores: int | None = None) -> float:
        """Wall time on ``cores`` cores (this machine's by default), every core busy."""
        cores = cores or self.rates.cores
        return self.core_seconds / max(cores, 1)

    def cluster_seconds(self, nodes: int, node_cores: int = DEFAULT_NODE_CORES) -> float:
        """Wall time on ``nodes`` nodes of ``node_cores`` cores, one job a core: at least
        the longest job's time."""
        return max(self.core_seconds / (nodes * node_cores), self.longest_job_seconds)

    def as_json(self, nodes: int | None = None, node_cores: int = DEFAULT_NODE_CORES) -> dict:
        out: dict[str, Any] = {
            "runs": self.runs,
            "shards": self.shards,
            "core_seconds": round(self.core_seconds, 1),
            "core_hours": round(self.core_seconds / 3600, 2),
            "cores": self.rates.cores,
            "wall_seconds": round(self.wall_seconds(), 1),
            "longest_job_seconds": round(self.longest_job_seconds, 1),
            "memory_bytes": int(self.memory_bytes),
            "disk_bytes": int(self.disk_bytes),
            "data_bytes": int(self.data_bytes),
            "results_bytes": int(self.results_bytes),
            "contributors": [
                {"dataset": ds, "algorithm": algo, "core_seconds": round(s, 1)}
                for ds, algo, s in self.contributors
            ],
            "unknown_datasets": self.unknown,
            "assumptions": self.assumptions,
            "rates": {
                "host": self.rates.host,
                "dgemm_flops": self.rates.dgemm,
                "sgemm_flops": self.rates.sgemm,
                "bandwidth_bytes": self.rates.bandwidth,
                "job_startup_s": self.rates.startup_s,
            },
        }
        if nodes:
            out["cluster"] = {
                "nodes": nodes,
                "node_cores": node_cores,
                "wall_seconds": round(self.cluster_seconds(nodes, node_cores), 1),
            }
        return out


def sweep_cost(
    plan: Any,
    rates: Rates,
    results_dir: str | None = None,
    only: Collection[str] | None = None,
) -> SweepCost:
    """The estimated cost of ``plan``'s shard jobs (or its Optuna studies' trials).

    Parameters
    ----------
    plan
        The sweep's :class:`fedsparse.sweep.Plan`.
    rates
        The machine's rates the runs are priced at.
    results_dir
        Where a data set already built is sized from its folder (None: from its spec).
    only
        Price only the runs with these run ids (and the start-up of the shard jobs holding
        them), e.g. the runs of a sweep that were actually recorded; None: every run.
        An Optuna study's trials have no run ids before they run: they are priced whole.
    """
    from ..layout import Layout

    layout = Layout(results_dir) if results_dir else None
    shapes: dict[str, DataShape | None] = {}
    for name, spec in plan.datasets.items():
        where = layout.dataset_build(name, plan.data_digest(name)) if layout else None
        shapes[name] = known_shape(spec["data"], where, spec.get("partition", "natural"))
    by_pair: dict[tuple[str, str], float] = defaultdict(float)
    total = longest = memory = results = 0.0
    runs = 0
    if plan.studies:
        for study in plan.studies.values():
            shape = shapes.get(study.dataset)
            if shape is None:
                continue
            configs = [study.run_config(c, study.seeds[0]) for c in study.corners()]
            mean = sum(run_seconds(c, shape, rates=rates) for c in configs) / len(configs)
            trials = study.settings.n_trials
            seconds = trials * mean + study.settings.n_workers * rates.startup_s
            total += seconds
            longest = max(longest, seconds / study.settings.n_workers)
            memory = max(memory, job_memory_bytes(configs, shape))
            results += trials * run_disk_bytes(configs[0])
            runs += trials
            by_pair[(configs[0]["dataset"]["name"], configs[0]["algorithm"])] += seconds
    for runs_of_shard in plan.shards.values():
        if only is not None:
            runs_of_shard = [r for r in runs_of_shard if r.run_id in only]
            if not runs_of_shard:
                continue
        shape = shapes[runs_of_shard[0].dataset]
        runs += len(runs_of_shard)
        if shape is None:
            continue
        configs = [r.config for r in runs_of_shard]
        siblings = [r.sibling for r in runs_of_shard]
        costs = run_costs(configs, shape, None, siblings, [r.cohort for r in runs_of_shard], rates)
        for run, cost in zip(runs_of_shard, costs, strict=True):
            by_pair[(run.dataset, run.config["algorithm"])] += cost
            results += run_disk_bytes(run.config)
        seconds = rates.startup_s + sum(costs)
        total += seconds
        longest = max(longest, seconds)
        joins = [r.joins for r in runs_of_shard]
        memory = max(memory, job_memory_bytes(configs, shape, None, joins))
    contributors = sorted(((ds, algo, s) for (ds, algo), s in by_pair.items()), key=lambda x: -x[2])
    return SweepCost(
        runs=runs,
        shards=len(plan.shards),
        core_seconds=total,
        longest_job_seconds=longest,
        memory_bytes=memory,
        data_bytes=sum(s.disk_bytes for s in shapes.values() if s is not None),
        results_bytes=results,
        rates=rates,
        contributors=contributors,
        unknown=[name for name, s in shapes.items() if s is None],
        assumptions=sorted({s.assumed for s in shapes.values() if s is not None and s.assumed}),
    )


def duration(seconds: float) -> str:
    """A duration a reader takes in at a glance: 40 s, 12 min, 3.5 h, 4.2 days."""
    if seconds < 10:
        return f"{seconds:.1f} s"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * DAY_S:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / DAY_S:.1f} days"


def size(nbytes: float) -> str:
    """Bytes in a unit a reader takes in at a glance."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if nbytes >= scale:
            return f"{nbytes / scale:.1f} {unit}"
    return f"{nbytes:.0f} B"


def describe(
    cost: SweepCost, nodes: int | None = None, node_cores: int = DEFAULT_NODE_CORES
) -> list[str]:
    """The lines ``fedsparse check`` prints about a sweep's cost."""
    r = cost.rates
    cores = r.cores
    lines = [
        f"estimated cost: {cost.core_seconds / 3600:.3g} core-hours "
        f"({duration(cost.wall_seconds())} on this machine's {counted(cores, 'core')}), "
        f"at most {size(cost.memory_bytes)} of memory a job, "
        f"disk {size(cost.data_bytes)} of data and {size(cost.results_bytes)} of results",
    ]
    runs_seconds = sum(s for _, _, s in cost.contributors)
    if runs_seconds > 0:
        top = [
            f"{ds} x {algo} {100 * s / runs_seconds:.0f} %" for ds, algo, s in cost.contributors[:3]
        ]
        lines.append("  largest (of the runs' time): " + ", ".join(top))
    if cost.wall_seconds() > DAY_S:
        wanted = nodes or max(1, math.ceil(cost.core_seconds / (DAY_S * node_cores)))
        lines.append(
            f"  more than a day here: on a cluster of {counted(wanted, 'node')} x "
            f"{node_cores} cores, about {duration(cost.cluster_seconds(wanted, node_cores))} "
            "(snakemake --profile profiles/slurm)"
        )
    elif nodes:
        lines.append(
            f"  on a cluster of {counted(nodes, 'node')} x {node_cores} cores: about "
            f"{duration(cost.cluster_seconds(nodes, node_cores))}"
        )
    for name in cost.unknown:
        lines.append(f"  not counted: data set {name} (its size is known once it is built)")
    for note in cost.assumptions:
        lines.append(f"  assumed: {note}")
    lines.append(
        f"  (rates of {r.host}: DGEMM {r.dgemm / 1e9:.0f} GFLOP/s, SGEMM {r.sgemm / 1e9:.0f} "
        f"GFLOP/s, memory {r.bandwidth / 1e9:.1f} GB/s a core, job start-up {r.startup_s:.0f} s)"
    )
    return lines


def hours(seconds: float) -> str:
    """Core-hours as a table shows them: 2,324; 59; 0.86."""
    value = seconds / 3600
    return f"{value:,.0f}" if value >= 10 else f"{value:.2g}"


def cost_rows(config_files: list[str], rates: Rates) -> list[str]:
    """A Markdown table row per sweep config: its runs, core-hours, the largest job's memory
    and its longest job (docs/reproducing.md keeps the table of the papers' configs)."""
    import yaml

    from .plan import plan_sweep

    rows = []
    for path in config_files:
        with open(path) as fh:
            plan = plan_sweep(yaml.safe_load(fh))
        cost = sweep_cost(plan, rates)
        rows.append(
            f"| `{path}` | {cost.runs:,} | {hours(cost.core_seconds)} | "
            f"{size(cost.memory_bytes)} | {duration(cost.longest_job_seconds)} |"
        )
    return rows
