"""The sweep and its plan: a sweep config to runs with stable ids, packed into shards, written
once as the plan file that every job reads, and what the plan will cost.

The modules: :mod:`.plan` (the planner: :func:`plan_sweep`, :class:`Plan`, :class:`Run`),
:mod:`.checks` (what can be checked before any job runs), :mod:`.sharding` (runs to shards),
:mod:`.plan_file` (the plan as one Parquet file), :mod:`.cost` (what a run costs, from its
work) at :mod:`.machine`'s rates, :mod:`.sweep_cost` (a planned sweep's total) and
:mod:`.cost_learning` (shard time limits that learn from finished runs).

The planner's names load on first use, so importing another module of this package (the cost
model, a machine's rates) does not import the planner. None of them loads a kernel at import:
a cluster job's own Snakemake reads the plan file and sizes its job with them.
"""

from __future__ import annotations

from ..lazy import lazy_names

__all__ = [
    "SWEEP_KEYS",
    "Plan",
    "Run",
    "plan_checked",
    "plan_or_exit",
    "plan_sweep",
    "retype_config",
]

__getattr__ = lazy_names(__name__, dict.fromkeys(__all__, "fedsparse.sweep.plan"))
