"""Runs that differ only in a time model their algorithm does not read share one computation,
and each of their traces is the one the run gives alone, bit for bit."""

from __future__ import annotations

import logging
import math

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fedsparse import experiment
from fedsparse.algorithms.gradsparse import FABTopK
from fedsparse.config import normalize_run_config
from fedsparse.experiment import run_result, run_results, time_siblings_key
from fedsparse.pipeline import make_data
from fedsparse.shard import run_shard, store_path
from fedsparse.sweep import plan_sweep

DATA = {"kind": "synthetic", "task": "logistic", "clients": 6, "dim": 40, "support": 8,
        "samples_per_client": 40, "positives": 15}  # fmt: skip
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
    real = experiment._run

    def counting(cfgs, data, on_round):
        calls.append(len(cfgs))
        return real(cfgs, data, on_round)

    monkeypatch.setattr(experiment, "_run", counting)
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
