"""A data folder knows what it holds (the digest of its spec, each file's stamp), and
nothing reads one whose digest or files differ from its run's config and its build."""

from __future__ import annotations

import copy
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from conftest import SMALL_LINEAR

from fedsparse.data import load_built
from fedsparse.data.identity import check_built, entry_digest, run_data_digest
from fedsparse.errors import DataError
from fedsparse.layout import Layout
from fedsparse.pipeline.shard_runner import run_shard
from fedsparse.pipeline.steps import make_data
from fedsparse.results.run_store import store_path
from fedsparse.sweep import plan_sweep

SWEEP = {
    "sweep": "ident",
    "rounds": 3,
    "seeds": [0],
    "embedding_sample": 0,
    "datasets": {
        "sim": {
            "data": {**SMALL_LINEAR, "alpha": 0.1},
            "partition": {"kind": "iid", "clients": 4, "seed": 0},
        }
    },
    "algorithms": ["fedht"],
    "grid": {"stepsize": [0.01], "sparsity": [5]},
}
SHARD = "sim--0000"

# one edit of each kind of input a data folder depends on
EDITS = {
    "generator": lambda c: c["datasets"]["sim"]["data"].update(alpha=0.3),
    "partition": lambda c: c["datasets"]["sim"]["partition"].update(seed=1),
    "preprocessing": lambda c: c["datasets"]["sim"]["data"].update(center="global"),
}


def edited(edit: str) -> dict:
    cfg = copy.deepcopy(SWEEP)
    EDITS[edit](cfg)
    return cfg


def build(cfg: dict, root: Path) -> Path:
    """The data set of ``cfg`` built as the workflow builds it (by its digest)."""
    plan = plan_sweep(cfg)
    folder = Layout(root).dataset_build("sim", plan.data_digest("sim"))
    make_data(cfg, "sim", folder, spec=plan.datasets["sim"])
    return folder


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_every_kind_of_data_edit_changes_the_digest_and_the_runs_agree(edit):
    before, after = plan_sweep(SWEEP), plan_sweep(edited(edit))
    assert before.data_digest("sim") != after.data_digest("sim")
    for plan in (before, after):  # a run's config names the digest of its plan's data set
        assert {run_data_digest(r.config) for r in plan.runs} == {plan.data_digest("sim")}


def test_a_data_sets_grid_or_a_loss_its_data_ignores_is_no_part_of_its_digest():
    cfg = copy.deepcopy(SWEEP)
    cfg["datasets"]["sim"]["grid"] = {"stepsize": [0.1]}
    assert plan_sweep(cfg).data_digest("sim") == plan_sweep(SWEEP).data_digest("sim")
    entry = plan_sweep(SWEEP).datasets["sim"]
    assert entry_digest({**entry, "model": {"loss": "logistic"}}) == entry_digest(entry)


def test_a_build_records_its_digest_and_links_its_name(tmp_path):
    folder = build(SWEEP, tmp_path)
    meta = json.loads((folder / "meta.json").read_text())
    assert meta["data_digest"] == plan_sweep(SWEEP).data_digest("sim")
    assert {"y.npy", "X.npy", "partition_stats.csv"} <= set(meta["files"])
    link = tmp_path / "data" / "sim"
    assert link.is_symlink() and os.readlink(link) == folder.name  # relative: copies keep it
    # an edited spec: a folder of its own; the old build stays whole, the link follows
    other = build(edited("generator"), tmp_path)
    assert other != folder and folder.is_dir() and os.readlink(link) == other.name
    check_built(folder, meta["data_digest"], "sim")


def test_a_folder_of_another_spec_is_refused_naming_both_digests(tmp_path):
    build(SWEEP, tmp_path)  # data/sim: the link to this spec's build
    want = plan_sweep(edited("generator")).data_digest("sim")  # whose build is missing
    with pytest.raises(DataError) as exc:
        load_built(tmp_path / "data", "sim", want)
    msg = str(exc.value)
    assert "\n" not in msg and "data set sim" in msg
    assert plan_sweep(SWEEP).data_digest("sim") in msg and want in msg and "snakemake" in msg


def replace_array(path: Path, same_size: bool) -> None:
    a = np.load(path)
    np.save(path, a + 1.0 if same_size else np.concatenate([a, a]))


@pytest.mark.parametrize("same_size", [True, False], ids=["same size", "other size"])
def test_an_array_replaced_by_hand_is_refused_before_any_run_reads_it(tmp_path, same_size):
    build(SWEEP, tmp_path)
    folder = Layout(tmp_path).dataset_build("sim", plan_sweep(SWEEP).data_digest("sim"))
    replace_array(folder / "y.npy", same_size)
    out = tmp_path / "shards"
    with pytest.raises(DataError, match=r"data set sim: .*y\.npy .*rebuild") as exc:
        run_shard(SWEEP, SHARD, tmp_path / "data", out / "t.parquet", out / "r.parquet")
    assert "\n" not in str(exc.value)
    run = plan_sweep(SWEEP).shards[SHARD][0]
    assert not store_path(tmp_path / "store", run.run_id).exists()  # no run computed


def test_a_folder_copied_without_its_times_is_hashed_once_and_accepted(tmp_path):
    folder = build(SWEEP, tmp_path)
    digest = plan_sweep(SWEEP).data_digest("sim")
    copied = tmp_path / "copy"
    shutil.copytree(folder, copied, copy_function=shutil.copy)  # new modification times
    meta = check_built(copied, digest, "sim")
    for name, stamp in meta["files"].items():  # the new times recorded: a stat next time
        assert stamp["mtime_ns"] == (copied / name).stat().st_mtime_ns
    assert json.loads((copied / "meta.json").read_text()) == meta


def test_a_shard_reads_its_runs_build_by_digest_whatever_the_link_points_at(tmp_path):
    build(SWEEP, tmp_path)
    build(edited("generator"), tmp_path)  # the link now points at the other spec's build
    out = tmp_path / "shards"
    run_shard(SWEEP, SHARD, tmp_path / "data", out / "t.parquet", out / "r.parquet")
    assert (out / "r.parquet").is_file()


def test_a_folder_of_an_older_fedsparse_at_the_name_is_replaced_by_the_link(tmp_path):
    legacy = tmp_path / "data" / "sim"
    make_data(SWEEP, "sim", legacy)  # built as before digests: a folder under the name
    meta = json.loads((legacy / "meta.json").read_text())
    del meta["data_digest"]
    (legacy / "meta.json").write_text(json.dumps(meta))
    digest = plan_sweep(SWEEP).data_digest("sim")
    with pytest.raises(DataError, match="unrecorded"):
        load_built(tmp_path / "data", "sim", digest)
    folder = build(SWEEP, tmp_path)
    assert legacy.is_symlink() and legacy.resolve() == folder.resolve()
    assert load_built(tmp_path / "data", "sim", digest).n_clients == 4


def test_the_report_reads_each_data_sets_latest_build_once_by_its_name(tmp_path):
    from fedsparse.report.data_section import read_partition_stats

    build(SWEEP, tmp_path)
    latest = build(edited("partition"), tmp_path)
    found = read_partition_stats([tmp_path])
    assert list(found) == ["sim"]
    assert found["sim"][0]["data_digest"] == latest.name.rsplit(".", 1)[1]


def test_where_a_registry_file_lies_is_no_part_of_the_digest_as_of_the_run_id():
    from fedsparse.data.identity import data_digest
    from fedsparse.training.config import normalize_dataset

    site = normalize_dataset({"kind": "svmlight", "source": "rcv1.binary", "file": "papers"})
    local = normalize_dataset({**site, "path": "/data/rcv1.bz2"})
    mirror = normalize_dataset({**site, "mirror": "https://my.mirror/libsvm/"})
    partition = {"kind": "iid", "clients": 4, "seed": 0}
    digests = {data_digest(d, "logistic", partition) for d in (site, local, mirror)}
    assert len(digests) == 1
    other = normalize_dataset({**site, "file": "train"})
    assert data_digest(other, "logistic", partition) not in digests


def test_fedsparse_check_lists_each_inputs_digest_and_whether_it_is_built(tmp_path, capsys):
    import yaml

    from fedsparse.cli import main

    cfg = {**copy.deepcopy(SWEEP), "results": str(tmp_path / "res")}
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(cfg))
    digest = plan_sweep(cfg).data_digest("sim")
    assert main(["check", "--digests", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    out = [out[0]] + [line for line in out if line.startswith(("data set ", "shards: "))]
    assert out[1] == (
        f"data set sim: spec digest {digest}, missing (snakemake makes it): "
        f"{tmp_path / 'res' / 'data' / f'sim.{digest}'}"
    )
    assert out[2] == f"shards: 0 of 1 present in {tmp_path / 'res' / 'shards'}"
    build(cfg, tmp_path / "res")
    assert main(["check", "--digests", str(path)]) == 0
    assert f"spec digest {digest}, present: " in capsys.readouterr().out
