"""Through the workflow: a data set edited in place (its name kept) is rebuilt whatever
Snakemake remembers, so no run is computed on data its config does not describe; a data folder
changed by hand is refused before any run reads it."""

from __future__ import annotations

import copy
import os
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from conftest import SMALL_LINEAR
from snakemake_helpers import read_traces_of, snakemake, write_config

from fedsparse.data.identity import check_built
from fedsparse.layout import Layout
from fedsparse.results.run_store import read_stored, store_path
from fedsparse.sweep import plan_sweep

pytestmark = pytest.mark.integration

BASE = {
    "sweep": "edits",
    "rounds": 5,
    "seeds": [0],
    "embedding_sample": 0,
    "datasets": {
        "sim": {
            "data": {**SMALL_LINEAR, "alpha": 0.1},
            "partition": {"kind": "iid", "clients": 4, "seed": 0},
        }
    },
    "algorithms": {"fedht": {}},
    "grid": {"stepsize": [0.01, 0.001], "sparsity": [5], "local_steps": [2], "batch_size": [5]},
}
# one edit of each kind of input a data folder depends on, the data set's name kept
EDITS = {
    "generator": lambda c: c["datasets"]["sim"]["data"].update(alpha=0.3),
    "partition": lambda c: c["datasets"]["sim"]["partition"].update(seed=1),
    "preprocessing": lambda c: c["datasets"]["sim"]["data"].update(center="global"),
}


def edited(edit: str) -> dict:
    cfg = copy.deepcopy(BASE)
    EDITS[edit](cfg)
    return cfg


def results(workdir: Path) -> Layout:
    return Layout(workdir / "results" / "edits")


def stored_runs(workdir: Path) -> dict[str, tuple[int, int]]:
    """run id -> (inode, mtime) of each run in the run store: a rewritten run changes both."""
    store = results(workdir).store
    return {p.stem: (p.stat().st_ino, p.stat().st_mtime_ns) for p in store.glob("*/*.parquet")}


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    """The base sweep, finished."""
    workdir = tmp_path_factory.mktemp("base")
    snakemake(workdir, "--configfile", str(write_config(workdir, BASE)))
    return workdir


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
    """The traces of each edited config, run in an empty folder (once per edit)."""
    done: dict[str, pd.DataFrame] = {}

    def traces_of(edit: str) -> pd.DataFrame:
        if edit not in done:
            workdir = tmp_path_factory.mktemp(f"fresh-{edit}")
            snakemake(workdir, "--configfile", str(write_config(workdir, edited(edit))))
            done[edit] = read_traces_of(results(workdir).root)
        return done[edit]

    return traces_of


@pytest.mark.parametrize("records", ["copied", "in place"])
@pytest.mark.parametrize("edit", sorted(EDITS))
def test_an_edited_data_set_is_rebuilt_and_its_runs_computed_on_it(
    base, fresh, tmp_path, edit, records
):
    """copied: results/ alone in a fresh folder (no .snakemake/ records, as after moving a
    results folder); in place: the folder with Snakemake's records."""
    if records == "copied":
        shutil.copytree(base / "results", tmp_path / "results", symlinks=True)
    else:
        shutil.copytree(base, tmp_path, symlinks=True, dirs_exist_ok=True)
    old_digest = plan_sweep(BASE).data_digest("sim")
    old_ids = [r.run_id for r in plan_sweep(BASE).runs]
    before = stored_runs(tmp_path)
    assert sorted(before) == sorted(old_ids)
    cfg = edited(edit)
    snakemake(tmp_path, "--configfile", str(write_config(tmp_path, cfg)))

    L = results(tmp_path)
    new_digest = plan_sweep(cfg).data_digest("sim")
    new, old = L.dataset_build("sim", new_digest), L.dataset_build("sim", old_digest)
    assert os.readlink(L.dataset("sim")) == new.name  # the name: the latest build
    if edit == "generator":  # alpha changes the clients' models, so y and x_true
        for name in ("y.npy", "x_true.npy"):
            assert not np.array_equal(np.load(new / name), np.load(old / name))
    # the rerun's traces are those of the edited config run in an empty folder
    pd.testing.assert_frame_equal(read_traces_of(L.root), fresh(edit))
    # the old data set's build and runs stay, whole and readable
    check_built(old, old_digest, "sim")
    after = stored_runs(tmp_path)
    assert {k: after[k] for k in before} == before  # kept, not computed again
    assert sorted(set(after) - set(before)) == sorted(r.run_id for r in plan_sweep(cfg).runs)
    for run_id in old_ids:
        read_stored(store_path(L.store, run_id), run_id)
    # and the edited sweep is done, with or without Snakemake's records
    shutil.rmtree(tmp_path / ".snakemake")
    proc = snakemake(tmp_path, "-n", "--configfile", str(tmp_path / "sweep.yaml"))
    assert "Nothing to be done" in proc.stdout + proc.stderr


def test_a_data_folder_changed_by_hand_is_refused_before_any_run_reads_it(base, tmp_path):
    shutil.copytree(base / "results", tmp_path / "results", symlinks=True)
    L = results(tmp_path)
    folder = L.dataset_build("sim", plan_sweep(BASE).data_digest("sim"))
    y = np.load(folder / "y.npy")
    np.save(folder / "y.npy", y + 1.0)  # its array replaced, the same size
    cfg = yaml.safe_load(yaml.safe_dump(BASE))
    cfg["grid"]["stepsize"].append(0.003)  # new runs on the same data
    before = stored_runs(tmp_path)
    assert len(before) == 2
    proc = snakemake(tmp_path, "--configfile", str(write_config(tmp_path, cfg)), check=False)
    assert proc.returncode != 0
    logs = "".join(p.read_text() for p in (L.logs / "shards").glob("*.log"))
    errors = [line for line in logs.splitlines() if " ERROR " in line]
    assert len(errors) == 1 and "data set sim: " in errors[0] and "y.npy" in errors[0]
    assert "SHA-256" in errors[0] and "rebuild" in errors[0]
    assert stored_runs(tmp_path) == before  # no run computed on it
    # as the line says: the folder deleted, the sweep rebuilds it and finishes
    shutil.rmtree(folder)
    snakemake(tmp_path, "--configfile", str(tmp_path / "sweep.yaml"))
    assert len(stored_runs(tmp_path)) == len(before) + 1


def test_a_target_naming_the_runs_table_directly_sees_an_edited_data_set(base, fresh, tmp_path):
    """The aggregate's marker is named by its inputs: asked for by the runs table alone (not
    the sweep's target), an edited data set still reaches it, without Snakemake's records."""
    shutil.copytree(base / "results", tmp_path / "results", symlinks=True)
    path = write_config(tmp_path, edited("generator"))
    snakemake(tmp_path, "results/edits/runs.parquet", "--configfile", str(path))
    pd.testing.assert_frame_equal(read_traces_of(results(tmp_path).root), fresh("generator"))
