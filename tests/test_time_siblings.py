"""Runs that differ only in a time model their algorithm does not read share one computation,
and each of their traces is the one the run gives alone, bit for bit."""

from __future__ import annotations

import logging
import math

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fedsparse.families.gradient_sparsification.algorithms import FABTopK
from fedsparse.pipeline.shard_runner import run_shard
from fedsparse.pipeline.steps import make_data
from fedsparse.results.run_store import store_path
from fedsparse.sweep import plan_sweep
from fedsparse.sweep.cost import RUN_OVERHEAD_S, known_shape, shard_seconds
from fedsparse.sweep.plan_file import read_plan, write_plan_file
from fedsparse.training import experiment
from fedsparse.training.config import normalize_run_config
from fedsparse.training.experiment import run_result, run_results, time_siblings_key

DATA = {
    "kind": "synthetic",
    "task": "logistic",
    "clients": 6,
    "dim": 40,
    "support": 8,
    "samples_per_client": 40,
    "positives": 15,
}
BETAS = [0.1, 1.0, 10.0]


def config(algorithm: str, params: dict, beta: float, seed: int = 0) -> dict:
    return normalize_run_config(
        {
            "dataset": DATA,
            "model": {"loss": "logistic"},
            "algorithm": algorithm,
            "params": params,
            "rounds": 12,
            "eval_every": 2,
            "seed": seed,
            "time_model": {"exchange_time": beta, "round_latency": 0.5},
        }
    )


def without_elapsed(table: pa.Table) -> pa.Table:
    return table.drop_columns(["elapsed_s"])


@pytest.mark.parametrize(
    ("algorithm", "params"),
    [
        ("fabtopk", {"stepsize": 0.5, "batch_size": 10, "k": 8}),
        ("utopk", {"stepsize": 0.5, "batch_size": 10, "k": 8}),
        ("fedht", {"stepsize": 0.01, "sparsity": 5, "local_steps": 2, "batch_size": 5}),
        ("fedavg", {"stepsize": 0.1, "local_steps": 2}),
    ],
)
def test_one_computation_gives_each_runs_own_trace(algorithm, params):
    cfgs = [config(algorithm, params, b) for b in BETAS]
    assert len({time_siblings_key(c) for c in cfgs}) == 1
    together = run_results(cfgs)
    for cfg, got in zip(cfgs, together, strict=True):
        alone = run_result(cfg)
        assert without_elapsed(got.trace).equals(without_elapsed(alone.trace))
        assert got.client_summary == alone.client_summary
    times = [r.trace.column("time").to_pylist()[-1] for r in together]
    assert times[0] < times[1] < times[2]  # each run charged at its own exchange time
    assert len({r.trace.column("run_id")[0].as_py() for r in together}) == 3


def test_a_controller_that_reads_the_time_model_is_computed_alone():
    params = {"stepsize": 0.5, "batch_size": 10, "k": 8, "k_control": "online_extended"}
    cfgs = [config("fabtopk", params, b) for b in BETAS]
    assert time_siblings_key(cfgs[0]) is None
    with pytest.raises(ValueError, match="time model"):
        run_results(cfgs)
    # and other seeds are not siblings
    fixed = {"stepsize": 0.5, "batch_size": 10, "k": 8}
    assert time_siblings_key(config("fabtopk", fixed, 1.0)) != time_siblings_key(
        config("fabtopk", fixed, 1.0, seed=1)
    )


def test_an_algorithm_reading_a_time_model_it_declares_unread_is_stopped(monkeypatch):
    params = {"stepsize": 0.5, "batch_size": 10, "k": 8, "k_control": "online_extended"}
    monkeypatch.setattr(FABTopK, "reads_time_model", classmethod(lambda cls, p: False))
    with pytest.raises(RuntimeError, match="reads_time_model"):
        run_results([config("fabtopk", params, b) for b in BETAS])


SWEEP = {
    "sweep": "siblings",
    "rounds": 6,
    "seeds": [0, 1],
    "shard_size": 100,
    "embedding_sample": 0,
    "time_model": {"exchange_time": BETAS},
    "datasets": {"toy": {"data": DATA, "model": {"loss": "logistic"}}},
    "algorithms": {
        "fabtopk": {"k_control": ["fixed", "online_extended"]},
        "utopk": {},
    },
    "grid": {"stepsize": [0.5], "batch_size": [10], "k": [8]},
}


def test_a_shard_computes_time_siblings_once(tmp_path, monkeypatch, caplog):
    plan = plan_sweep(SWEEP)
    (shard,) = plan.shards
    runs = plan.shards[shard]
    assert len(runs) == 3 * 2 * 3  # (fab fixed, fab online, utopk) x 2 seeds x 3 betas
    make_data(SWEEP, "toy", tmp_path / "data" / "toy")
    calls = []
    real = experiment._run_cohort

    def counting(computations, data, on_round, checkpoint=None):
        calls.extend(len(cfgs) for cfgs in computations)  # each computation's runs
        return real(computations, data, on_round, checkpoint)

    monkeypatch.setattr(experiment, "_run_cohort", counting)
    caplog.set_level(logging.INFO, logger="fedsparse.shard")
    out = tmp_path / "shards"
    run_shard(SWEEP, shard, tmp_path / "data", out / "t.parquet", out / "r.parquet")
    # fixed k: one computation per seed for the three betas; the online controller: one a run
    assert sorted(calls) == [1] * 6 + [3] * 4
    assert "computed 18 runs" in caplog.text
    for run in runs:  # each stored run is the run computed alone
        alone = run_result(run.config)
        got = pq.read_table(store_path(tmp_path / "store", run.run_id))
        got = got.replace_schema_metadata(alone.trace.schema.metadata)
        assert without_elapsed(got).equals(without_elapsed(alone.trace)), run.config["algorithm"]
    assert math.isfinite(pq.read_table(out / "r.parquet").column("final_objective").to_pylist()[0])


def sibling_groups(plan) -> dict[str, set[str]]:
    """time_siblings_key -> the shards holding its runs (time siblings only)."""
    groups: dict[str, set[str]] = {}
    for shard, runs in plan.shards.items():
        for run in runs:
            key = time_siblings_key(run.config)
            if key is not None:
                groups.setdefault(key, set()).add(shard)
    return groups


@pytest.mark.parametrize("packing", [{"shard_size": 4}, {"shard_size": 1}, {"shard_minutes": 1e-4}])
def test_shards_never_split_time_siblings_and_flag_the_shared_runs(packing, tmp_path):
    sweep = {**SWEEP, **packing}
    plan = plan_sweep(sweep)
    groups = sibling_groups(plan)
    assert len(groups) == 2 * 2  # (fab fixed, utopk) x 2 seeds, 3 betas each
    assert all(len(shards) == 1 for shards in groups.values())
    assert len(plan.shards) > 2  # and the packing did cut elsewhere
    for runs in plan.shards.values():
        assert not runs[0].sibling
        for before, run in zip(runs, runs[1:], strict=False):
            # a flagged run shares the computation of the run before it
            same = time_siblings_key(run.config) == time_siblings_key(before.config) is not None
            assert run.sibling == (same and run.config["algorithm"] == before.config["algorithm"])
    assert sum(r.sibling for r in plan.runs) == 2 * 2 * 2  # each group's two later betas
    # the plan file keeps the flags (a cluster job sizes its shard from them)
    path = tmp_path / "plan.parquet"
    write_plan_file(plan, sweep, path)
    from_file = read_plan(path, sweep)
    assert {s: r for s, r in from_file.shards.items()} == plan.shards


def test_time_siblings_cost_one_computation():
    plan = plan_sweep({**SWEEP, "algorithms": {"utopk": {}}, "seeds": [0]})
    (runs,) = plan.shards.values()
    assert [r.sibling for r in runs] == [False, True, True]
    shape = known_shape(DATA, None)
    configs, siblings = [r.config for r in runs], [r.sibling for r in runs]
    one = shard_seconds(configs[:1], shape)
    # the same sum in another order: equal to rounding
    shared = one + 2 * RUN_OVERHEAD_S
    assert shard_seconds(configs, shape, siblings=siblings) == pytest.approx(shared, rel=1e-12)
    assert shard_seconds(configs, shape) > shard_seconds(configs, shape, siblings=siblings)
    assert plan.shard_priority(next(iter(plan.shards))) == round(one + 2 * RUN_OVERHEAD_S)
