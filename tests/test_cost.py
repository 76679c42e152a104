"""Cluster job sizing: resource estimates, shard packing of huge sweeps, one process per shard."""

from __future__ import annotations

import subprocess
import sys
import time

import pyarrow.parquet as pq
import pytest
from conftest import SMALL_LINEAR

from fedsparse import cost
from fedsparse.errors import ConfigError
from fedsparse.pipeline import make_data
from fedsparse.sweep import plan_sweep

LIN = dict(SMALL_LINEAR)


def sweep(**extra) -> dict:
    return {
        "sweep": "cost",
        "rounds": 10,
        "seeds": [0, 1],
        "datasets": {"lin": {"data": dict(LIN)}},
        "algorithms": {"fedht": {}, "distiht": {"local_steps": [1]}},
        "grid": {"stepsize": [0.01, 0.001], "local_steps": [2, 4], "sparsity": [10]},
        **extra,
    }


def test_shape_of_a_generated_data_folder_matches_the_spec(tmp_path):
    cfg = sweep()
    make_data(cfg, "lin", tmp_path / "lin")
    spec = plan_sweep(cfg).datasets["lin"]["data"]
    on_disk = cost.data_shape(tmp_path / "lin")
    predicted = cost.synthetic_shape(spec)
    assert (on_disk.rows, on_disk.cols, on_disk.nnz, on_disk.clients, on_disk.sparse) == (
        120,
        40,
        120 * 40,
        6,
        False,
    )
    assert (predicted.rows, predicted.cols, predicted.nnz, predicted.clients) == (120, 40, 4800, 6)
    # the folder holds X, its column copy and small vectors: a bit above the prediction
    assert predicted.disk_bytes <= on_disk.disk_bytes < 1.5 * predicted.disk_bytes + 20_000


def test_run_bytes_counts_minibatch_rows_and_tau_column_evaluations():
    shape = cost.DataShape(
        rows=1000, cols=200, nnz=200_000, sparse=False, clients=10, n_classes=0, disk_bytes=0
    )
    params = {"stepsize": 0.1, "sparsity": 20, "local_steps": 3, "batch_size": 5}
    config = {"params": params, "rounds": 4, "eval_every": 2}
    local = 10 * 3 * 5 * 200 * 8  # clients x K x batch rows x row bytes
    evaluation = 1000 * 20 * 8  # every row at the tau columns
    assert cost.run_bytes(config, shape) == 4 * local + 3 * evaluation  # rounds 0, 2, 4
    full = {**config, "params": {**params, "batch_size": None}}
    assert cost.run_bytes(full, shape) == 4 * 10 * 3 * 100 * 200 * 8 + 3 * evaluation
    csr = cost.DataShape(1000, 200, 5000, True, 10, 0, 0)
    assert cost.run_bytes(config, csr) == 4 * 10 * 3 * 5 * 5 * 12 + 3 * 5000 * 12


def test_shard_resources_grow_with_the_runs_and_the_data(tmp_path):
    plan = plan_sweep(sweep(rounds=10_000_000, shard_size=2))
    first, *_ = plan.shards
    small = plan.shard_resources(first, tmp_path / "absent")  # from the synthetic spec
    assert small["runtime"] >= cost.MIN_RUNTIME_MIN and small["mem_mb"] >= cost.BASE_MEM_MB
    bigger = plan_sweep(sweep(rounds=10_000_000, shard_size=4))
    assert bigger.shard_resources(first, tmp_path / "absent")["runtime"] > small["runtime"]
    real = {"kind": "svmlight", "source": "rcv1.binary"}
    assert cost.job_resources([], real, tmp_path / "absent") == {
        "runtime": cost.UNKNOWN_RUNTIME_MIN,
        "mem_mb": cost.UNKNOWN_MEM_MB,
    }
    wide = dict(LIN, dim=100_000)
    assert cost.job_resources([], wide, tmp_path)["mem_mb"] > 1.25 * 2 * 120 * 100_000 * 8 / 2**20


def test_a_huge_sweep_is_packed_into_at_most_about_max_shards_shards():
    grid = {
        "stepsize": [0.1, 0.01, 0.001, 0.0001],
        "local_steps": list(range(1, 11)),
        "sparsity": list(range(1, 26)),
    }
    start = time.perf_counter()
    plan = plan_sweep(sweep(grid=grid, seeds=list(range(10)), shard_size=5, max_shards=40))
    elapsed = time.perf_counter() - start
    runs = [r.run_id for r in plan.runs]
    assert len(runs) == 2 * 4 * 10 * 25 * 10 - 4 * 9 * 25 * 10  # distiht: K = 1 only
    assert len(set(runs)) == len(runs)
    assert len(plan.shards) <= 40
    sizes = [len(s) for s in plan.shards.values()]
    assert max(sizes) == -(-len(runs) // 40) and min(sizes) > 0
    assert elapsed < 30
    # below the cap the shard size is exactly as asked
    assert {len(s) for s in plan_sweep(sweep(shard_size=3)).shards.values()} <= {3, 2, 1}


@pytest.mark.parametrize("bad", [0, -1, "many"])
def test_bad_max_shards_is_refused(bad):
    with pytest.raises(ConfigError, match="max_shards"):
        plan_sweep(sweep(max_shards=bad))


def test_a_second_process_on_the_same_shard_waits_for_the_first(tmp_path):
    from fedsparse.shard import run_shard

    cfg = sweep(shard_size=50)
    make_data(cfg, "lin", tmp_path / "data" / "lin")
    out = tmp_path / "shards"
    out.mkdir()
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import fcntl, sys, time; f = open(sys.argv[1], 'a'); "
            "fcntl.flock(f, fcntl.LOCK_EX); print('locked', flush=True); time.sleep(2)",
            str(out / ".lin--0000.lock"),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert holder.stdout.readline().strip() == "locked"
    start = time.monotonic()
    run_shard(cfg, "lin--0000", tmp_path / "data", out / "t.parquet", out / "r.parquet")
    assert time.monotonic() - start > 1.0  # it waited for the holder
    holder.wait()
    assert (out / "t.parquet").is_file() and (out / "r.parquet").is_file()
    # the runs it computed went to the run store beside the shards' folder
    stored = {p.stem for p in (tmp_path / "store").glob("*/*.parquet")}
    assert stored == set(pq.read_table(out / "r.parquet").column("run_id").to_pylist())


def test_costlier_shards_get_higher_scheduling_priority():
    cfg = sweep(shard_size=5, rounds=100_000)  # 12 runs per data set: shards of 5, 5, 2
    cfg["datasets"]["wide"] = {"data": dict(LIN, dim=4000)}
    cfg["datasets"]["real"] = {"data": {"kind": "svmlight", "source": "rcv1.binary"}}
    cfg["datasets"]["real"]["partition"] = {"kind": "iid", "clients": 4}
    plan = plan_sweep(cfg)
    small, wide = plan.shard_priority("lin--0000"), plan.shard_priority("wide--0000")
    assert wide > small > 0
    assert plan.shard_priority("lin--0000") > plan.shard_priority("lin--0002")  # 5 runs vs 2
    assert plan.shard_priority("real--0000") == 0  # not downloaded: unknown, no preference
