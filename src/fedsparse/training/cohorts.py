"""Cohorts: runs that differ only in hyperparameters their algorithm can fuse share their
computation's passes over the data.

A grid of 15 step sizes reads the same rows 15 times when its runs compute one by one: a
run's minibatches depend on its seed and client, never on its step size. The planner puts the
runs of equal :func:`cohort_key` side by side (at most :data:`MAX_MEMBERS` computations a
cohort, never split between shards) and flags each member after the first
(``Run.cohort``); a shard computes a cohort with one ``cohort_round`` of the algorithm per
round for all of its members (:func:`fedsparse.training.experiment.run_cohort`). A run's trace is
the same bits in any cohort, or alone: the sweep key ``fuse: false`` plans every run alone.
"""

from __future__ import annotations

import json
from typing import Any

# Computations a cohort holds at most: its memory is its members' own state (models, clients'
# copies, work spaces), and a grid of thousands of step sizes must not hold them all at once.
MAX_MEMBERS = 64


def cohort_key(cfg: dict[str, Any]) -> str | None:
    """Runs with equal keys can compute as one cohort: they differ only in hyperparameters
    their algorithm declares fusable (``Algorithm.fusable``), and in a time model it does not
    read. None: the run computes alone (its algorithm fuses nothing)."""
    from ..algorithms import ALGORITHMS

    cls = ALGORITHMS[cfg["algorithm"]]
    params = cfg["params"]
    fusable = cls.fusable(params)
    if not fusable:
        return None
    reads = cls.reads_time_model(params)
    return json.dumps(
        {
            **cfg,
            "params": {k: v for k, v in params.items() if k not in fusable},
            "fusable": list(fusable),
            "time_model": cfg.get("time_model") if reads else None,
            "seed": cfg["seed"],
        },
        sort_keys=True,
    )
