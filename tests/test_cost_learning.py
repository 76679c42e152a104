"""Shard time limits that learn from a sweep's finished runs and grow on retries
(fedsparse.sweep.cost_learning)."""

from __future__ import annotations

import hashlib
import json
import math

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fedsparse.errors import ConfigError
from fedsparse.layout import Layout
from fedsparse.results.run_store import SUMMARY_KEY, SUMMARY_SHA256_KEY, store_path
from fedsparse.sweep import cost, plan_sweep
from fedsparse.sweep.cost_learning import (
    RUNTIME_SCALE_ENV,
    ShardRuntimes,
    limit_minutes,
    median_ratios,
    runtime_scale,
    scaled_seconds,
)
from fedsparse.sweep.machine import NOMINAL

# big enough that a shard's estimate passes the cost model's 10-minute floor (no data is
# built: a synthetic data set's shape is known from its spec)
DATA = {
    "kind": "synthetic",
    "task": "linear",
    "clients": 20,
    "samples_per_client": 500,
    "dim": 2000,
    "support": 20,
}
SWEEP = {
    "sweep": "learn",
    "rounds": 100_000,
    "seeds": [0, 1],
    "shard_size": 3,
    "datasets": {"lin": {"data": DATA}},
    "algorithms": {"fedht": {}, "distiht": {"local_steps": [1]}},
    "grid": {"stepsize": [0.01], "local_steps": [2, 4], "sparsity": [10], "batch_size": [50]},
}


@pytest.fixture
def plan():
    plan = plan_sweep(SWEEP)
    # shards: fedht K=2 (2 seeds) and K=4 seed 0; fedht K=4 seed 1 and distiht (2 seeds)
    assert len(plan.shards) == 2, {s: len(r) for s, r in plan.shards.items()}
    return plan


def _estimate(run, plan, member: bool = False) -> float:
    shape = cost.known_shape(plan.datasets[run.dataset]["data"], None)
    return cost.run_seconds(run.config, shape, member=member)


def _write_runs_table(layout: Layout, plan, shard: str, factor: dict[str, float]) -> None:
    """A finished shard's runs table whose runs took ``factor[algorithm]`` x their estimate."""
    runs = plan.shards[shard]
    table = pa.table(
        {
            "run_id": [r.run_id for r in runs],
            "algorithm": [r.config["algorithm"] for r in runs],
            "wall_time_s": [factor[r.config["algorithm"]] * _estimate(r, plan) for r in runs],
            "final_round": [r.config["rounds"] for r in runs],
            "rounds": [r.config["rounds"] for r in runs],
        }
    )
    path = layout.shard_runs(shard, plan.shard_digest(shard))
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)


def _store_run(layout: Layout, run, wall_time_s: float, final_round: int | None = None) -> None:
    """A finished run in the store as the shard writes it: its summary in the footer."""
    rounds = run.config["rounds"]
    summary = {
        "run_id": run.run_id,
        "wall_time_s": wall_time_s,
        "rounds": rounds,
        "final_round": rounds if final_round is None else final_round,
    }
    raw = json.dumps(summary).encode()
    meta = {SUMMARY_KEY: raw, SUMMARY_SHA256_KEY: hashlib.sha256(raw).hexdigest().encode()}
    table = pa.table({"run_id": [run.run_id], "round": [rounds]}).replace_schema_metadata(meta)
    path = store_path(layout.store, run.run_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path)


def test_runtime_scale_reads_the_environment_and_names_a_bad_value():
    assert runtime_scale({}) == 1.0
    assert runtime_scale({RUNTIME_SCALE_ENV: " 0.25 "}) == 0.25
    for bad in ("0", "-1", "fast", "inf", "nan"):
        with pytest.raises(ConfigError, match=f"^{RUNTIME_SCALE_ENV}: must be a number > 0"):
            runtime_scale({RUNTIME_SCALE_ENV: bad})


def test_median_ratios_per_algorithm_skip_samples_without_an_estimate():
    samples = [
        ("a", 2.0, 1.0),
        ("a", 9.0, 3.0),
        ("a", 40.0, 10.0),  # median of 2, 3, 4
        ("b", 1.0, 2.0),
        ("b", 5.0, 0.0),  # no estimate
        ("c", math.nan, 1.0),  # no measurement
    ]
    assert median_ratios(samples) == {"a": 3.0, "b": 0.5}


def test_limit_minutes_keeps_the_floor_then_scales_then_multiplies_by_the_attempt():
    assert limit_minutes(30) == cost.MIN_RUNTIME_MIN  # the cost model's floor
    assert limit_minutes(3600) == 180  # x3 safety
    assert limit_minutes(3600, attempt=3) == 540
    assert limit_minutes(3600, scale=0.5) == 90
    assert limit_minutes(30, scale=0.01) == 1  # SLURM's smallest limit
    assert limit_minutes(30, attempt=2, scale=0.01) == 2  # then grown by the retry


def test_without_evidence_the_limit_is_the_cost_models(plan, tmp_path):
    runtimes = ShardRuntimes(plan, Layout(tmp_path))
    for shard in plan.shards:
        expected = plan.shard_resources(shard, tmp_path / "absent")["runtime"]
        assert expected > cost.MIN_RUNTIME_MIN  # above the floor: a scaled limit shows
        assert runtimes(shard, tmp_path / "absent") == expected
        assert runtimes(shard, tmp_path / "absent", attempt=3) == 3 * expected


def test_scaled_seconds_scales_each_algorithms_runs_by_its_ratio(plan):
    runs = [r for shard in plan.shards.values() for r in shard]
    shape = cost.known_shape(plan.datasets["lin"]["data"], None)
    by_algo = {
        a: sum(_estimate(r, plan) for r in runs if r.config["algorithm"] == a)
        for a in ("fedht", "distiht")
    }
    got = scaled_seconds(runs, shape, None, {"fedht": 3.0, "distiht": 0.5})
    assert got == pytest.approx(
        NOMINAL.startup_s + 3.0 * by_algo["fedht"] + 0.5 * by_algo["distiht"]
    )
    # no ratios: the cost model's own estimate
    configs = [r.config for r in runs]
    assert scaled_seconds(runs, shape, None, {}) == pytest.approx(
        cost.shard_seconds(configs, shape)
    )


def test_finished_shards_teach_the_limit_of_the_next_ones(plan, tmp_path):
    layout = Layout(tmp_path)
    first, second = plan.shards
    runtimes = ShardRuntimes(plan, layout)
    before = runtimes(second, tmp_path / "absent")
    # the first shard finished: its fedht runs took 3x their estimate
    _write_runs_table(layout, plan, first, {"fedht": 3.0, "distiht": 3.0})
    assert runtimes.ratios() == pytest.approx({"fedht": 3.0})
    shape = cost.known_shape(plan.datasets["lin"]["data"], None)
    expected = limit_minutes(scaled_seconds(plan.shards[second], shape, None, {"fedht": 3.0}))
    after = runtimes(second, tmp_path / "absent")
    assert after == expected > before
    # a runs table of another digest (an earlier plan's shard) is no evidence
    other = ShardRuntimes(plan, layout)
    layout.shard_runs(first, plan.shard_digest(first)).rename(layout.shard_runs(first, "0" * 12))
    assert other.ratios() == {}


def test_runs_that_stopped_early_are_no_evidence(plan, tmp_path):
    layout = Layout(tmp_path)
    first, _ = plan.shards
    _write_runs_table(layout, plan, first, {"fedht": 3.0, "distiht": 3.0})
    path = layout.shard_runs(first, plan.shard_digest(first))
    table = pq.read_table(path)
    column = table.schema.get_field_index("final_round")
    pq.write_table(table.set_column(column, "final_round", pa.array([7] * table.num_rows)), path)
    assert ShardRuntimes(plan, layout).ratios() == {}


def test_a_retry_times_only_the_runs_the_store_lacks_at_their_measured_pace(plan, tmp_path):
    layout = Layout(tmp_path)
    _, second = plan.shards
    runs = plan.shards[second]
    shape = cost.known_shape(plan.datasets["lin"]["data"], None)
    # the killed first attempt finished two runs, at 5x their estimate
    for run in runs[:2]:
        _store_run(layout, run, 5.0 * _estimate(run, plan))
    runtimes = ShardRuntimes(plan, layout)
    # the first attempt does not read the store (planning a million runs reads no store file)
    assert runtimes(second, tmp_path / "absent") == plan.shard_resources(second, "x")["runtime"]
    ratios = {"fedht": 5.0, "distiht": 5.0}  # one run of each
    assert [r.config["algorithm"] for r in runs] == ["fedht", "distiht", "distiht"]
    expected = limit_minutes(scaled_seconds(runs[2:], shape, None, ratios), attempt=2)
    assert runtimes(second, tmp_path / "absent", attempt=2) == expected
    # a cluster job's own Snakemake reads no evidence: the model's estimate, times the attempt
    blind = ShardRuntimes(plan, layout, learn=False)
    assert blind(second, tmp_path / "absent", attempt=2) == 2 * runtimes(second, "x")


def test_the_environment_scale_applies_to_every_limit(plan, tmp_path, monkeypatch):
    monkeypatch.setenv(RUNTIME_SCALE_ENV, "0.001")
    runtimes = ShardRuntimes(plan, Layout(tmp_path))
    shard = next(iter(plan.shards))
    assert [runtimes(shard, "x", attempt=a) for a in (1, 2, 3)] == [1, 2, 3]
    monkeypatch.setenv(RUNTIME_SCALE_ENV, "slow")
    with pytest.raises(ConfigError, match=RUNTIME_SCALE_ENV):
        ShardRuntimes(plan, Layout(tmp_path))


def test_the_evidence_columns_are_columns_of_every_runs_table():
    from fedsparse.results.schema import RUNS_SCHEMA
    from fedsparse.sweep.cost_learning import EVIDENCE_COLUMNS

    assert set(EVIDENCE_COLUMNS) <= set(RUNS_SCHEMA.names)


def test_a_cohort_is_one_sample_its_members_shares_against_its_estimate(tmp_path):
    sweep = {**SWEEP, "grid": {**SWEEP["grid"], "stepsize": [0.1, 0.01, 0.001]}, "shard_size": 6}
    sweep["algorithms"] = {"fedht": {}}
    plan = plan_sweep(sweep)
    first = next(iter(plan.shards))
    runs = plan.shards[first]
    assert [r.cohort for r in runs[:3]] == [False, True, True]  # the 3 step sizes of one seed
    # the cohort took twice its estimate (the first member in full, the others as members),
    # each run's wall_time_s its share of that
    estimate = _estimate(runs[0], plan) + 2 * _estimate(runs[1], plan, member=True)
    share = 2.0 * estimate / 3
    layout = Layout(tmp_path)
    path = layout.shard_runs(first, plan.shard_digest(first))
    path.parent.mkdir(parents=True, exist_ok=True)
    cohort = runs[:3]
    table = {
        "run_id": [r.run_id for r in cohort],
        "algorithm": ["fedht"] * 3,
        "wall_time_s": [share] * 3,
        "final_round": [r.config["rounds"] for r in cohort],
        "rounds": [r.config["rounds"] for r in cohort],
    }
    pq.write_table(pa.table(table), path)
    assert ShardRuntimes(plan, layout).ratios() == pytest.approx({"fedht": 2.0})
