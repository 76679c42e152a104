"""Optuna studies over a sweep's hyperparameters: search spaces, workers, export.

A sweep with ``method: optuna`` names a search space instead of a grid::

    method: optuna
    optuna:
      n_trials: 20                 # the study ends with exactly this many finished trials
      n_workers: 2                 # worker processes (Snakemake jobs) sharing the study
      sampler: {name: tpe, seed: 0}          # tpe | random | grid | cmaes | nsga2
      metric: final_objective      # | best_objective | auc_log_objective
                                   # | {name: rounds_to_target, target: 0.5}
      pruner: {name: median}       # none | median | hyperband
      storage: journal             # | sqlite (one worker) | {url_env: FEDSPARSE_OPTUNA_URL}
      holdout_seeds: [100, 101]    # the best configuration is re-run on these seeds
    space:
      stepsize: {type: float, low: 1.0e-4, high: 0.1, log: true}
      local_steps: {type: int, low: 1, high: 10}
      sparsity: {type: categorical, choices: [100, 200]}

Several objectives instead of ``metric`` (one or the other) make a multi-objective study,
e.g. accuracy against communication with NSGA-II (``sampler: {name: nsga2, seed: 0,
population_size: 20}``)::

      objectives:
        - {metric: final_test_accuracy, direction: maximize}
        - {metric: total_bytes_up, direction: minimize}

An objective is a metric above or a run's value at its last round (final_test_accuracy,
final_train_accuracy, final_train_loss, final_pm_test_accuracy, total_bytes_up,
total_bytes_down, total_bytes, total_time), averaged over the seeds; a diverged run scores the
worst value on every objective. Its Pareto set (Optuna's ``best_trials``) is re-run on the
hold-out seeds. Optuna cannot prune such a study, so a pruner is refused.

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

The package's own names are the plan of the studies (:mod:`fedsparse.sweep.studies`, which
:func:`fedsparse.sweep.plan_sweep` uses). The runners are imported from their modules:
:mod:`.storage` (``create_study``, ``open_storage``, ``load_study``), :mod:`.worker`
(``run_worker``), :mod:`.export` (``export_study``, ``run_holdout``, ``study_status``) and
:mod:`.spec` (``study_spec``, ``TuneError``); importing this package loads none of them.
"""

from __future__ import annotations

from ..sweep.studies import (
    METRICS,
    SAMPLERS,
    SearchParam,
    StudySpec,
    TuneSettings,
    parse_settings,
    parse_space,
    plan_studies,
)

__all__ = [
    "METRICS",
    "SAMPLERS",
    "SearchParam",
    "StudySpec",
    "TuneSettings",
    "parse_settings",
    "parse_space",
    "plan_studies",
]
