"""A shard process killed mid-run (kill -9, at measured times and inside a checkpoint write)
loses only the rounds since its last checkpoint: the rerun resumes from it, says from which
round, and writes the traces of a shard never interrupted."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
from conftest import SMALL_LINEAR

from fedsparse.pipeline.shard_runner import run_shard
from fedsparse.pipeline.steps import make_data
from fedsparse.results.checkpoint import KILL_IN_WRITE

pytestmark = pytest.mark.integration

ROUNDS = 300
SWEEP = {
    "sweep": "ckpt",
    "rounds": ROUNDS,
    "eval_every": 10,
    "seeds": [0, 1],
    "shard_size": 50,
    "embedding_sample": 0,
    "datasets": {"lin": {"data": dict(SMALL_LINEAR)}},
    "algorithms": ["fedht"],
    "grid": {"stepsize": [0.01, 0.02], "sparsity": [5], "local_steps": [2]},
    # every round or so (60 µs of computation): the kills land mid-run however fast the machine
    "checkpoint_minutes": 1e-6,
}
SHARD = "lin--0000"


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> Path:
    """The shard computed from start to finish, without checkpoints."""
    root = tmp_path_factory.mktemp("reference")
    make_data(SWEEP, "lin", root / "data" / "lin")
    run_shard({**SWEEP, "checkpoint_minutes": 0}, SHARD, root / "data", *outputs(root))
    assert not (root / "store" / "checkpoints").exists()
    return root


@pytest.fixture
def folder(reference, tmp_path) -> Path:
    shutil.copytree(reference / "data", tmp_path / "data")
    return tmp_path


def outputs(root: Path) -> tuple[Path, Path]:
    return root / "shards/t.parquet", root / "shards/r.parquet"


def traces(root: Path) -> pd.DataFrame:
    return pd.read_parquet(outputs(root)[0]).drop(columns="elapsed_s")


def shard_process(root: Path, env: dict[str, str] | None = None) -> subprocess.Popen:
    """The shard in a process of its own, logging to stderr."""
    code = (
        "import json, logging, sys\n"
        "from fedsparse.pipeline.shard_runner import run_shard\n"
        "logging.basicConfig(level=logging.INFO, format='%(name)s %(message)s')\n"
        f"run_shard(json.loads({json.dumps(SWEEP)!r}), {SHARD!r}, {str(root / 'data')!r},"
        f" {str(outputs(root)[0])!r}, {str(outputs(root)[1])!r})\n"
    )
    return subprocess.Popen(
        [sys.executable, "-c", code],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
    )


def rerun(root: Path) -> str:
    """Run the shard to its end in a process of its own; its log."""
    proc = shard_process(root)
    _, log = proc.communicate(timeout=600)
    assert proc.returncode == 0, log
    return log


def resumed_from(log: str) -> list[int]:
    return [
        int(line.split("resumed from round ")[1].split()[0])
        for line in log.splitlines()
        if "resumed from round" in line
    ]


def checkpoint_lines(log: str) -> list[str]:
    return [line for line in log.splitlines() if line.startswith("fedsparse.results.checkpoint ")]


def assert_finished_as_never_interrupted(reference: Path, folder: Path) -> None:
    pd.testing.assert_frame_equal(traces(reference), traces(folder))
    assert not list((folder / "store" / "checkpoints").iterdir())  # removed, torn writes too


@pytest.mark.parametrize("write", [1, 3])
def test_a_shard_killed_inside_a_checkpoint_write_resumes_from_the_last_whole_one(
    reference, folder, write
):
    proc = shard_process(folder, {KILL_IN_WRITE: str(write)})
    _, log = proc.communicate(timeout=600)
    assert proc.returncode == -signal.SIGKILL, log
    torn = list((folder / "store" / "checkpoints").glob(".*.tmp"))
    assert len(torn) == 1  # the write it died in
    log = rerun(folder)
    if write == 1:  # no whole checkpoint yet: the run starts over, silently
        assert checkpoint_lines(log) == []
    else:
        [round_] = resumed_from(log)
        assert 0 < round_ < ROUNDS
        assert "ignored" not in log
    assert_finished_as_never_interrupted(reference, folder)


@pytest.mark.parametrize("checkpoints", [1, 4])
def test_a_shard_killed_mid_run_resumes_from_its_checkpoint(reference, folder, checkpoints):
    proc = shard_process(folder)
    found = folder / "store" / "checkpoints"
    seen: set[int] = set()
    deadline = time.monotonic() + 300
    while len(seen) < checkpoints and proc.poll() is None and time.monotonic() < deadline:
        for path in found.glob("*.ckpt") if found.is_dir() else ():
            try:
                seen.add(path.stat().st_mtime_ns)
            except FileNotFoundError:
                pass
        time.sleep(0.01)
    os.kill(proc.pid, signal.SIGKILL)
    _, log = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL, log
    log = rerun(folder)
    [round_] = resumed_from(log)  # the first computation resumed; later ones had not started
    assert 0 < round_ < ROUNDS
    assert_finished_as_never_interrupted(reference, folder)


def test_a_checkpoint_of_another_version_makes_the_run_start_over(reference, folder):
    proc = shard_process(folder, {KILL_IN_WRITE: "3"})
    proc.communicate(timeout=600)
    [path] = (folder / "store" / "checkpoints").glob("*.ckpt")
    raw = path.read_bytes()
    path.write_bytes(raw.replace(b'"key": "fedsparse ', b'"key": "fedsparse 0.0.0-', 1))
    log = rerun(folder)
    assert resumed_from(log) == []
    lines = checkpoint_lines(log)
    assert len(lines) == 1 and "was written by another version" in lines[0], lines
    assert_finished_as_never_interrupted(reference, folder)
