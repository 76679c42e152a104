"""A shard job and the run store: finished runs are kept by run id, one writer per run."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from conftest import SMALL_LINEAR

from fedsparse.algorithms import ALGORITHMS
from fedsparse.pipeline.shard_runner import run_shard
from fedsparse.pipeline.steps import make_data
from fedsparse.results.numerics import SHARED, model_path, numerics_version
from fedsparse.results.run_store import SUMMARY_KEY, SUMMARY_SHA256_KEY, read_stored, store_path
from fedsparse.sweep import plan_sweep

LINEAR = SHARED["linear"]  # the toy sweeps' models are linear
FEDHT = ALGORITHMS["fedht"].numerics["linear"]  # the toy sweeps' algorithm's own number

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


# ----------------------------------------------------------------- store files that are no run
def truncate(path: Path, other: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def copy_other_run(path: Path, other: Path) -> None:
    shutil.copy(other, path)


def random_bytes(path: Path, other: Path) -> None:
    path.write_bytes(np.random.default_rng(0).bytes(path.stat().st_size))


def flip_data_page(path: Path, other: Path) -> None:
    """Flip the last bytes of the objective's column chunk: its data page's values, past
    the page header, the footer intact."""
    meta = pq.read_metadata(path)
    names = [meta.schema.column(j).name for j in range(meta.num_columns)]
    chunk = meta.row_group(0).column(names.index("objective"))
    start = chunk.dictionary_page_offset if chunk.has_dictionary_page else chunk.data_page_offset
    end = start + chunk.total_compressed_size
    data = bytearray(path.read_bytes())
    for i in range(end - 4, end):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))


def flip_summary(path: Path, other: Path) -> None:
    """A digit of the run summary in the footer changed, the file still readable."""
    table = pq.read_table(path)
    meta = dict(table.schema.metadata)
    meta[SUMMARY_KEY] = meta[SUMMARY_KEY].replace(b'"rounds": 3', b'"rounds": 4')
    pq.write_table(table.replace_schema_metadata(meta), path, write_page_checksum=True)


def other_numerics(path: Path, other: Path) -> None:
    """A run stored by a version whose arithmetic differed (its summary says so, checksummed)."""
    table = pq.read_table(path)
    meta = dict(table.schema.metadata)
    summary = json.loads(meta[SUMMARY_KEY])
    summary["numerics"] = "0.9"
    meta[SUMMARY_KEY] = json.dumps(summary).encode()
    meta[SUMMARY_SHA256_KEY] = hashlib.sha256(meta[SUMMARY_KEY]).hexdigest().encode()
    pq.write_table(table.replace_schema_metadata(meta), path, write_page_checksum=True)


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (other_numerics, f"was computed with numerics 0.9, not this version's {LINEAR}.{FEDHT}"),
        (truncate, "is not a whole Parquet file (Parquet magic bytes not found"),
        (copy_other_run, "holds run {other}, not {run}"),
        (random_bytes, "is not a whole Parquet file (Parquet magic bytes not found"),
        (flip_data_page, "cannot be read (could not verify page integrity, CRC checksum"),
        (flip_summary, "has a run summary that does not match its checksum"),
    ],
)
def test_a_store_file_that_is_no_finished_run_is_moved_aside_and_the_run_computed_again(
    reference, folder, caplog, damage, reason
):
    shutil.copytree(reference / "store", folder / "store")
    run, other = runs()[1], runs()[0]
    path = store_path(folder / "store", run)
    damage(path, store_path(folder / "store", other))
    damaged = path.read_bytes()
    caplog.set_level(logging.INFO, logger="fedsparse.shard")
    run_shard(SWEEP, SHARD, folder / "data", *outputs(folder))
    lines = [r.getMessage() for r in caplog.records if "moved aside" in r.getMessage()]
    assert len(lines) == 1 and "\n" not in lines[0]
    (aside,) = path.parent.glob(f"{run}.parquet.bad-*")
    why = reason.format(run=run, other=other)
    assert lines[0].startswith(f"shard {SHARD}: store file {path} {why}")
    assert lines[0].endswith(f"; moved aside to {aside.name}, the run is computed again")
    assert aside.read_bytes() == damaged
    assert "computed 1 run in" in caplog.text
    assert read_stored(path, run)[1]["run_id"] == run
    for a, b in zip(shard_outputs(reference), shard_outputs(folder), strict=True):
        pd.testing.assert_frame_equal(a, b)


def test_a_new_arithmetic_of_one_model_path_leaves_the_others_runs_finished(
    reference, folder, caplog, monkeypatch
):
    # the toy sweep's models are linear: raising the network kernels' number keeps its stored
    # runs finished; raising the linear kernels' number computes them again, to the same traces
    shutil.copytree(reference / "store", folder / "store")
    caplog.set_level(logging.INFO, logger="fedsparse.shard")
    monkeypatch.setitem(SHARED, "network", SHARED["network"] + 1)
    run_shard(SWEEP, SHARD, folder / "data", *outputs(folder))
    assert "3 runs (3 already done)" in caplog.text and "moved aside" not in caplog.text
    caplog.clear()
    monkeypatch.setitem(SHARED, "linear", LINEAR + 1)
    run_shard(SWEEP, SHARD, folder / "data", *outputs(folder))
    assert caplog.text.count(f"not this version's {LINEAR + 1}.{FEDHT}") == 3
    assert "computed 3 runs in" in caplog.text
    for run in runs():
        summary = read_stored(store_path(folder / "store", run), run)[1]
        assert summary["numerics"] == f"{LINEAR + 1}.{FEDHT}"


def test_numerics_versions_follow_the_model_path():
    # Fed-HT's own number is 2 on the linear path (its local steps' FMA lanes) and 1 on the
    # network path; sFedHP's is one number for both
    fedht = {"algorithm": "fedht", "model": {"loss": "least_squares"}}
    assert numerics_version(fedht) == f"{SHARED['linear']}.2"
    for model in ({"kind": "mlp", "hidden": [8]}, {"kind": "linear", "bias": True}):
        assert numerics_version({**fedht, "model": model}) == f"{SHARED['network']}.1"
        sfedhp = {"algorithm": "sfedhp", "model": model}
        assert numerics_version(sfedhp) == f"{SHARED['network']}.1"
    assert numerics_version({"algorithm": "sfedhp"}) == f"{SHARED['linear']}.1"
    assert numerics_version({"algorithm": "no-such-algorithm"}) is None
    assert model_path(None) == "linear"


def test_a_whole_store_file_of_the_previous_version_counts_as_finished(reference, folder, caplog):
    """Before store files were checked they had neither page checksums nor the summary's
    SHA-256: whole, they are finished runs (no sweep is computed again)."""
    shutil.copytree(reference / "store", folder / "store")
    for run in runs():
        path = store_path(folder / "store", run)
        table = pq.read_table(path)
        meta = {k: v for k, v in table.schema.metadata.items() if k != SUMMARY_SHA256_KEY}
        pq.write_table(table.replace_schema_metadata(meta), path)
    caplog.set_level(logging.INFO, logger="fedsparse.shard")
    run_shard(SWEEP, SHARD, folder / "data", *outputs(folder))
    assert "3 runs (3 already done)" in caplog.text and "computed" not in caplog.text
    for a, b in zip(shard_outputs(reference), shard_outputs(folder), strict=True):
        pd.testing.assert_frame_equal(a, b)


def test_a_shards_files_of_other_runs_are_deleted_and_other_files_kept(reference, folder, caplog):
    """The shard's files of an earlier plan (another digest) or an older fedsparse (no digest)
    go when its files for this plan are written; an older version's parts are adopted."""
    from fedsparse.layout import Layout

    L = Layout(folder)
    digest = plan_sweep(SWEEP).shard_digest(SHARD)
    stale = [L.shard_traces(SHARD, "0123456789ab"), L.shard_runs(SHARD, "0123456789ab")]
    stale += [L.shards / f"{SHARD}.parquet", L.shards / f"{SHARD}.runs.parquet"]
    kept = [L.shards / "lin--0001.0123456789ab.parquet", *outputs(folder)]
    L.shards.mkdir()
    for path in stale + kept:
        path.touch()
    parts = L.shards / f"{SHARD}.parquet.parts"  # an older version's, under its old name
    parts.mkdir()
    first = runs()[0]
    shutil.copy(store_path(reference / "store", first), parts / f"{first}.parquet")
    caplog.set_level(logging.INFO, logger="fedsparse.shard")
    mine = L.shard_traces(SHARD, digest), L.shard_runs(SHARD, digest)
    run_shard(SWEEP, SHARD, folder / "data", *mine)
    assert L.shard_outputs(SHARD) == sorted(mine)
    assert all(p.is_file() for p in kept) and not parts.exists()
    assert "3 runs (1 already done)" in caplog.text
