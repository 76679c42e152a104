"""Cohorts: runs that differ only in hyperparameters their algorithm fuses compute together,
and each trace is the one the run gives alone, bit for bit (elapsed_s aside), in any cohort,
and with fusion off. (Every built-in algorithm alone and in cohorts is a conformance check:
tests/test_conformance.py.)"""

from __future__ import annotations

import pytest
from cohort_helpers import stored_traces, without_elapsed

from fedsparse.errors import ConfigError
from fedsparse.families.hard_thresholding.algorithms import FedHT
from fedsparse.sweep import plan_sweep
from fedsparse.training.cohorts import MAX_MEMBERS, cohort_key
from fedsparse.training.config import normalize_run_config
from fedsparse.training.experiment import load_dataset, run_cohort, run_result

DATA = {
    "kind": "synthetic",
    "task": "logistic",
    "clients": 8,
    "dim": 40,
    "support": 8,
    "samples_per_client": 40,
    "positives": 15,
}
LINEAR = {**{k: v for k, v in DATA.items() if k != "positives"}, "task": "linear"}


def config(
    algorithm: str, params: dict, seed: int = 0, rounds: int = 9, linear: bool = False
) -> dict:
    return normalize_run_config(
        {
            "dataset": LINEAR if linear else DATA,
            "model": {"loss": "least_squares" if linear else "logistic"},
            "algorithm": algorithm,
            "params": params,
            "rounds": rounds,
            "eval_every": 2,
            "seed": seed,
        }
    )


def test_a_diverging_member_stops_alone_and_leaves_the_others_unchanged():
    params = {"sparsity": 5, "local_steps": 3, "batch_size": 5}
    steps = [1.0, 0.01, 0.003]
    cfgs = [config("fediterht", {**params, "stepsize": s}, rounds=30, linear=True) for s in steps]
    data = load_dataset(cfgs[0]["dataset"], "least_squares")
    together = [r[0].trace for r in run_cohort([[c] for c in cfgs], data)]
    status = [t.column("status").to_pylist() for t in together]
    assert status[0][-1] == "diverged" and len(status[0]) < len(status[1])
    assert status[1] == status[2] == ["ok"] * 16  # rounds 0, 2, ..., 30
    for cfg, got in zip(cfgs, together, strict=True):
        assert without_elapsed(got).equals(without_elapsed(run_result(cfg, data).trace))


def test_time_siblings_compute_once_inside_a_cohort():
    params = {"sparsity": 5, "local_steps": 2, "batch_size": 5}
    betas = [0.1, 10.0]
    groups = [
        [
            normalize_run_config({**config("fedht", {**params, "stepsize": s}), "time_model": t})
            for t in ({"exchange_time": b} for b in betas)
        ]
        for s in (0.05, 0.01)
    ]
    data = load_dataset(DATA, "logistic")
    results = run_cohort(groups, data)
    for group, found in zip(groups, results, strict=True):
        for cfg, result in zip(group, found, strict=True):
            alone = run_result(cfg, data).trace
            assert without_elapsed(result.trace).equals(without_elapsed(alone))
        times = [r.trace.column("time").to_pylist()[-1] for r in found]
        assert times[0] != times[1]  # each charged to its own time model


def test_run_cohort_refuses_runs_that_differ_in_more_than_fusable_hyperparameters():
    a = config("fedht", {"stepsize": 0.1, "sparsity": 5})
    b = config("fedht", {"stepsize": 0.1, "sparsity": 6})
    with pytest.raises(ValueError, match="fusable"):
        run_cohort([[a], [b]])


SWEEP = {
    "sweep": "cohorts",
    "rounds": 6,
    "eval_every": 2,
    "seeds": [0, 1],
    "shard_size": 4,
    "datasets": {"toy": {"data": LINEAR, "model": {"loss": "least_squares"}}},
    "algorithms": {"fedht": {}, "fediterht": {}, "distiht": {"local_steps": [1]}, "fedavg": {}},
    "grid": {
        "stepsize": [3.0, 0.05, 0.01],
        "sparsity": [5],
        "local_steps": [1, 3],
        "batch_size": [5],
    },
}


def cohorts_of(plan) -> list[list[tuple[str, object]]]:
    """The plan's cohorts: the runs that join the one before them, with their shard."""
    out: list[list[tuple[str, object]]] = []
    for shard, runs in plan.shards.items():
        for run in runs:
            if run.cohort:
                out[-1].append((shard, run))
            else:
                out.append([(shard, run)])
    return out


@pytest.mark.parametrize("packing", [{"shard_size": 4}, {"shard_size": 1}, {"shard_minutes": 1e-4}])
def test_the_planner_keeps_a_cohort_in_one_shard(packing):
    plan = plan_sweep({**SWEEP, **packing})
    solo = plan_sweep({**SWEEP, **packing, "fuse": False})
    assert sorted(r.run_id for r in plan.runs) == sorted(r.run_id for r in solo.runs)
    assert not any(r.cohort for r in solo.runs)
    cohorts = cohorts_of(plan)
    # (fedht, fediterht) x K in {1, 3} + distiht + fedavg's 2 K, per seed: 3 step sizes each
    assert sorted(len(c) for c in cohorts) == [3] * (2 * 2 + 1 + 2) * 2
    for cohort in cohorts:
        assert len({shard for shard, _ in cohort}) == 1  # never split between shards
        assert len({cohort_key(run.config) for _, run in cohort}) == 1
    assert len(plan.shards) > 2  # the packing did cut, between cohorts


def test_a_cohort_holds_at_most_max_members(monkeypatch):
    monkeypatch.setattr("fedsparse.sweep.plan.MAX_MEMBERS", 2)
    plan = plan_sweep(SWEEP)
    assert max(len(c) for c in cohorts_of(plan)) == 2
    assert MAX_MEMBERS >= 15  # a default sweep's 15 step sizes make one cohort


def test_fuse_must_be_a_boolean():
    with pytest.raises(ConfigError, match="^fuse: must be true or false"):
        plan_sweep({**SWEEP, "fuse": "yes"})
    # --config fuse=false on Snakemake's command line arrives as a string
    assert not any(r.cohort for r in plan_sweep({**SWEEP, "fuse": "false"}).runs)
    assert any(r.cohort for r in plan_sweep({**SWEEP, "fuse": "True"}).runs)


def test_a_sweep_stores_the_same_traces_fused_and_with_fuse_false(tmp_path):
    fused = stored_traces({**SWEEP, "shard_size": 9}, tmp_path / "fused")
    solo = stored_traces({**SWEEP, "shard_size": 9, "fuse": False}, tmp_path / "solo")
    assert fused.keys() == solo.keys() and len(fused) == 2 * 7 * 3
    diverged = 0
    for run_id, table in fused.items():
        assert table.equals(solo[run_id]), run_id
        diverged += table.column("status").to_pylist()[-1] == "diverged"
    assert diverged > 0  # the cohorts had members that left them


def test_an_algorithm_declaring_nothing_fusable_sweeps_alone(monkeypatch, tmp_path):
    monkeypatch.setattr(FedHT, "fusable", classmethod(lambda cls, params: ()))
    sweep = {**SWEEP, "algorithms": {"fedht": {}}, "seeds": [0]}
    plan = plan_sweep(sweep)
    assert not any(r.cohort for r in plan.runs) and len(plan.runs) == 6
    traces = stored_traces(sweep, tmp_path)
    assert len(traces) == 6
