"""A shard job and the run store: finished runs are kept by run id, one writer per run."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from conftest import SMALL_LINEAR

from fedsparse.pipeline import make_data
from fedsparse.shard import run_shard, store_path
from fedsparse.sweep import plan_sweep

SWEEP = {
    "sweep": "store",
    "rounds": 3,
    "seeds": [0, 1, 2],
    "shard_size": 50,
    "embedding_sample": 0,
    "datasets": {"lin": {"data": dict(SMALL_LINEAR)}},
    "algorithms": ["fedht"],
    "grid": {"stepsize": [0.01], "sparsity": [5]},
}
SHARD = "lin--0000"


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    """The shard run once from start to finish: its data, store and outputs."""
    root = tmp_path_factory.mktemp("reference")
    make_data(SWEEP, "lin", root / "data" / "lin")
    out = root / "shards"
    run_shard(SWEEP, SHARD, root / "data", out / "t.parquet", out / "r.parquet")
    return root


@pytest.fixture
def folder(reference, tmp_path) -> Path:
    """A results folder with the reference's data and nothing else."""
    shutil.copytree(reference / "data", tmp_path / "data")
    return tmp_path


def runs() -> list[str]:
    return [r.run_id for r in plan_sweep(SWEEP).shards[SHARD]]


def hold_lock(store: Path, run_id: str, then: str) -> subprocess.Popen:
    """Another process holding ``run_id``'s lock for 2 s, then running ``then``
    (Python, with ``part`` the run's store path) before it lets go."""
    part = store_path(store, run_id)
    part.parent.mkdir(parents=True, exist_ok=True)
    code = (
        "import fcntl, sys, time, shutil\n"
        f"part = {str(part)!r}\n"
        f"f = open({str(part.with_suffix('.lock'))!r}, 'a')\n"
        "fcntl.flock(f, fcntl.LOCK_EX); print('locked', flush=True); time.sleep(2)\n"
        f"{then}\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "locked"
    return proc


def outputs(root: Path) -> tuple[Path, Path]:
    return root / "shards/t.parquet", root / "shards/r.parquet"


def shard_outputs(root: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    timings = ["train_time_s", "wall_time_s", "finished_at", "host"]
    traces = pd.read_parquet(root / "shards/t.parquet").drop(columns="elapsed_s")
    summary = pd.read_parquet(root / "shards/r.parquet")
    return traces, summary.drop(columns=[c for c in timings if c in summary])


def test_a_run_another_process_computes_is_left_for_last_and_not_computed_again(
    reference, folder, caplog
):
    first = runs()[0]
    finished = store_path(reference / "store", first)
    holder = hold_lock(folder / "store", first, f"shutil.copy({str(finished)!r}, part)")
    caplog.set_level(logging.INFO, logger="fedsparse.shard")
    run_shard(SWEEP, SHARD, folder / "data", *outputs(folder))
    holder.wait()
    assert f"run {first} is being computed elsewhere; left for last" in caplog.text
    # the holder's copy is the stored run: this process waited and took it
    assert store_path(folder / "store", first).read_bytes() == finished.read_bytes()
    assert "computed 2 runs" in caplog.text
    assert not list((folder / "store").glob("*/*.lock"))
    for a, b in zip(shard_outputs(reference), shard_outputs(folder), strict=True):
        pd.testing.assert_frame_equal(a, b)


def test_a_run_whose_other_process_died_unfinished_is_computed_here(reference, folder, caplog):
    first = runs()[0]
    holder = hold_lock(folder / "store", first, "sys.exit(0)")  # lets go without the run
    caplog.set_level(logging.INFO, logger="fedsparse.shard")
    run_shard(SWEEP, SHARD, folder / "data", *outputs(folder))
    holder.wait()
    assert "left for last" in caplog.text and "computed 3 runs" in caplog.text
    assert {p.stem for p in (folder / "store").glob("*/*.parquet")} == set(runs())
    for a, b in zip(shard_outputs(reference), shard_outputs(folder), strict=True):
        pd.testing.assert_frame_equal(a, b)


def test_a_rerun_takes_every_run_from_the_store_and_rewrites_only_the_outputs(reference, caplog):
    before = {p: p.stat().st_mtime_ns for p in (reference / "store").glob("*/*.parquet")}
    (reference / "shards/r.parquet").unlink()  # as Snakemake does before it reruns a job
    caplog.set_level(logging.INFO, logger="fedsparse.shard")
    out = reference / "shards"
    run_shard(SWEEP, SHARD, reference / "data", out / "t.parquet", out / "r.parquet")
    assert "3 runs (3 already done)" in caplog.text and "computed" not in caplog.text
    assert {p: p.stat().st_mtime_ns for p in (reference / "store").glob("*/*.parquet")} == before
    assert (out / "r.parquet").is_file()


def test_an_interrupted_shard_of_an_older_version_keeps_its_finished_runs(reference, folder):
    """Before the run store, a shard kept its finished runs in ``<traces>.parts/``."""
    parts = folder / "shards/t.parquet.parts"
    parts.mkdir(parents=True)
    first = runs()[0]
    shutil.copy(store_path(reference / "store", first), parts / f"{first}.parquet")
    inode = os.stat(parts / f"{first}.parquet").st_ino
    run_shard(SWEEP, SHARD, folder / "data", *outputs(folder))
    assert not parts.exists()
    assert os.stat(store_path(folder / "store", first)).st_ino == inode  # moved, not recomputed
    for a, b in zip(shard_outputs(reference), shard_outputs(folder), strict=True):
        pd.testing.assert_frame_equal(a, b)
