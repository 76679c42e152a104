"""Defaults of the sweep and run config keys, in one place.

The lowest layer of the package (it imports none of it), so the planner, the workflow's rules,
the cost model, the data step and the Optuna planner read a default from here rather than
restating it; the schema (workflow/schemas/sweep.schema.yaml) documents the same values, and
tests/test_defaults.py checks both.
"""

from __future__ import annotations

from typing import Any

# Simulated time of a round: step_time x local steps + round_latency + exchange_time x (values
# one client sends up + values sent down) / (2 D) (spec seed-003 section 2.2; an index counts as
# a value). A run config's top-level ``time_model`` (fedsparse.training.config); controllers of k
# read it.
DEFAULT_TIME_MODEL: dict[str, float] = {
    "step_time": 1.0,
    "round_latency": 0.0,
    "exchange_time": 0.0,
}

# The folder holding each sweep's results folder, results/<sweep> by default: two configs run in
# one clone (the default sweep, then config/quick.yaml) keep their own runs, traces and reports.
RESULTS_ROOT = "results"

# A sweep config's keys, where absent (fedsparse.sweep.SWEEP_KEYS lists them all).
SWEEP_DEFAULTS: dict[str, Any] = {
    "sweep": "sweep",  # the label in every result row
    "results": RESULTS_ROOT + "/{sweep}",  # the workflow's output folder; {sweep}: its name
    "seeds": (0,),
    "eval_every": 1,  # also a run config's (fedsparse.training.config)
    "shard_size": 25,  # runs per shard job
    # Past this many shards, shards grow: a million-run sweep becomes hundreds of cluster
    # jobs, each loading its data and kernels once, instead of tens of thousands.
    "max_shards": 500,
    "embedding_sample": 1000,  # rows in each partitioned data set's t-SNE figure
    "method": "grid",
    "progress_every": 30.0,  # seconds between the sweep's progress lines
    # minutes of a run's computation between its checkpoints (fedsparse.results.checkpoint); 0: none
    "checkpoint_minutes": 5.0,
    # runs differing only in hyperparameters their algorithm fuses compute as one cohort,
    # sharing their passes over the data (fedsparse.training.cohorts); false: each alone, same
    # traces
    "fuse": True,
    # A run is diverged once its objective exceeds this factor times its round-0 objective;
    # at this value the key stays out of the canonical run config (run ids unchanged).
    "divergence_factor": 1e3,
}


def sweep_default(sweep: dict[str, Any], key: str) -> Any:
    """``sweep[key]``, or the key's default (a list for ``seeds``, like the value given;
    ``results/<sweep>`` for ``results``, the sweep's name filled in)."""
    if key in sweep:
        return sweep[key]
    value = SWEEP_DEFAULTS[key]
    if key == "results":
        return value.format(sweep=sweep_default(sweep, "sweep"))
    return list(value) if isinstance(value, tuple) else value
