"""Sweep expansion: grids, overrides, run ids, shards, and errors naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from conftest import SMALL_LINEAR

from fedsparse.errors import ConfigError
from fedsparse.sweep import plan_sweep
from fedsparse.training.config import normalize_run_config, run_id

ROOT = Path(__file__).resolve().parents[1]


def quick() -> dict:
    return yaml.safe_load((ROOT / "config/quick.yaml").read_text())


def test_quick_sweep_expands_to_the_cartesian_product_with_overrides():
    plan = plan_sweep(quick())
    runs = plan.runs
    # per data set: fedht and fediterht 4 step sizes x 2 K x 2 seeds, distiht 4 x 1 x 2
    assert len(runs) == 3 * (16 + 16 + 8)
    assert len({r.run_id for r in runs}) == len(runs)
    distiht = [r for r in runs if r.config["algorithm"] == "distiht"]
    assert {r.config["params"]["local_steps"] for r in distiht} == {1}
    fedht = [r for r in runs if r.config["algorithm"] == "fedht"]
    assert {r.config["params"]["local_steps"] for r in fedht} == {3, 5}
    # every shard holds runs of one data set, at most shard_size of them
    for shard, members in plan.shards.items():
        assert len({r.dataset for r in members}) == 1
        assert shard.startswith(members[0].dataset + "--")
        assert len(members) <= quick()["shard_size"]


def test_run_ids_are_stable_and_equal_to_a_single_run_config():
    a, b = plan_sweep(quick()), plan_sweep(quick())
    assert [r.run_id for r in a.runs] == [r.run_id for r in b.runs]
    run = a.runs[0]
    # the same run written by hand as a single-run config has the same id
    assert run_id(normalize_run_config(run.config)) == run.run_id
    relabelled = quick()
    relabelled["sweep"] = "another-label"
    assert [r.run_id for r in plan_sweep(relabelled).runs] == [r.run_id for r in a.runs]


def test_the_default_config_is_the_papers_simulation_study():
    cfg = yaml.safe_load((ROOT / "config/config.yaml").read_text())
    plan = plan_sweep(cfg)
    steps = cfg["grid"]["stepsize"]
    # the papers' nine step sizes, and more below and between them down to 1e-4
    assert set(steps) >= {10, 1, 0.6, 0.3, 0.1, 0.06, 0.03, 0.01, 0.001} and min(steps) <= 1e-4
    assert len(steps) == 15 and steps == sorted(steps, reverse=True)
    assert cfg["grid"]["local_steps"] == [3, 5, 10]  # the papers' K = 8 left out for time
    assert cfg["rounds"] == 200 and len(cfg["seeds"]) >= 2
    levels = {
        (d["data"]["task"], d["data"]["alpha"], d["data"]["beta"]) for d in cfg["datasets"].values()
    }
    assert levels == {(t, a, a) for t in ("linear", "logistic") for a in (0.1, 0.5, 1.0)}
    per_dataset = 15 * 3 * 2 * 2 + 15 * 2  # fedht, fediterht; distiht
    assert len(plan.runs) == 6 * per_dataset
    assert {r.config["params"]["sparsity"] for r in plan.runs} == {200}


@pytest.mark.parametrize(
    "edit, key",
    [
        (lambda c: c.update(rounds=0), "rounds"),
        (lambda c: c.update(colour="red"), "colour"),
        (lambda c: c["grid"].update(stepsize=[0.1, -1]), "grid.stepsize[1]"),
        (lambda c: c["grid"].update(sparsity=[0]), "grid.sparsity[0]"),
        (lambda c: c["grid"].update(momentum=[0.9]), "grid.momentum"),
        (lambda c: c["algorithms"].update(sgd={}), "algorithms.sgd"),
        (
            lambda c: c["algorithms"].update(distiht={"local_steps": [2]}),
            "algorithms.distiht.local_steps[0]",
        ),
        (
            lambda c: c["datasets"]["sim-linear-a1-b1"]["data"].update(alpha=-1),
            "datasets.sim-linear-a1-b1.data.alpha",
        ),
        (
            lambda c: c["datasets"]["sim-linear-a1-b1"]["data"].update(kind="csv"),
            "datasets.sim-linear-a1-b1.data.kind",
        ),
        (
            lambda c: c["datasets"]["sim-linear-a1-b1"].update(model={"loss": "hinge"}),
            "datasets.sim-linear-a1-b1.model.loss",
        ),
        (lambda c: c.update(seeds=[]), "seeds"),
        (lambda c: c.update(sweep="has space"), "sweep"),
        (lambda c: c.update(checkpoint_minutes=-1), "checkpoint_minutes: must be >= 0"),
        (lambda c: c.update(checkpoint_minutes="5m"), "checkpoint_minutes: must be a finite"),
    ],
)
def test_bad_sweeps_name_the_offending_key(edit, key):
    cfg = quick()
    edit(cfg)
    with pytest.raises(ConfigError) as err:
        plan_sweep(cfg)
    assert str(err.value).startswith(key), str(err.value)


# ---------------------------------------------------------------------------- the schema


def test_the_schema_leaves_algorithm_names_to_the_package():
    # a plugin registers algorithms (entry points, fedsparse.algorithms.registry): no list in
    # the schema can name them, so the package checks names, with a did-you-mean
    schema = yaml.safe_load((ROOT / "workflow/schemas/sweep.schema.yaml").read_text())
    assert schema["$defs"]["algorithm"]["type"] == "string"
    assert "enum" not in schema["$defs"]["algorithm"]


@pytest.mark.parametrize("form", ["list", "mapping"])
def test_the_schema_takes_any_algorithm_name_and_the_package_refuses_unknown_ones(form):
    import jsonschema

    schema = yaml.safe_load((ROOT / "workflow/schemas/sweep.schema.yaml").read_text())
    cfg = quick()
    if form == "list":
        cfg["algorithms"] = list(cfg["algorithms"])
    jsonschema.Draft202012Validator(schema).validate(cfg)
    cfg["algorithms"] = (
        ["fedht", "fedhtt"] if form == "list" else {**cfg["algorithms"], "fedhtt": {}}
    )
    jsonschema.Draft202012Validator(schema).validate(cfg)  # a plugin's name would be valid
    with pytest.raises(ConfigError, match=r"^algorithms.fedhtt: unknown algorithm; did you mean"):
        plan_sweep(cfg)


# ---------------------------------------------------------------------------- the plan file


def test_plan_file_gives_each_shard_its_runs_and_is_rewritten_only_on_change(tmp_path):
    from fedsparse.sweep.plan_file import read_plan_shard, write_plan_file

    cfg, path = quick(), tmp_path / "plan.parquet"
    plan = plan_sweep(cfg)
    assert write_plan_file(plan, cfg, path)
    for shard, runs in plan.shards.items():
        got = read_plan_shard(path, shard, cfg)
        assert [(r.run_id, r.config) for r in got] == [(r.run_id, r.config) for r in runs]
        assert [list(r.config) for r in got] == [list(r.config) for r in runs]  # key order
    mtime = path.stat().st_mtime_ns
    assert not write_plan_file(plan_sweep(cfg), cfg, path)  # the same plan: left alone
    assert path.stat().st_mtime_ns == mtime
    cfg["seeds"] = [0, 1, 2]
    other = plan_sweep(cfg)
    assert write_plan_file(other, cfg, path)  # another plan: rewritten
    shard = next(iter(other.shards))
    assert [r.run_id for r in read_plan_shard(path, shard, cfg)] == [
        r.run_id for r in other.shards[shard]
    ]
    assert len(other.runs) == 3 * len(plan.runs) / 2


def test_a_plan_read_from_its_file_equals_the_plan(tmp_path):
    from fedsparse.sweep.plan_file import read_plan, write_plan_file

    cfg, path = quick(), tmp_path / "plan.parquet"
    plan = plan_sweep(cfg)
    write_plan_file(plan, cfg, path)
    read = read_plan(path, cfg)
    assert (read.name, read.datasets, list(read.shards)) == (
        plan.name,
        plan.datasets,
        list(plan.shards),
    )
    shard = list(plan.shards)[1]
    assert read.shard_dataset(shard) == plan.shard_dataset(shard)
    assert [(r.run_id, r.config) for r in read.shards[shard]] == [
        (r.run_id, r.config) for r in plan.shards[shard]
    ]
    assert read.shard_priority(shard) == plan.shard_priority(shard)
    # each shard's digest, from the file's metadata (a job's Snakemake names every shard's files)
    read = read_plan(path, cfg)
    assert {s: read.shard_digest(s) for s in read.shards} == {
        s: plan.shard_digest(s) for s in plan.shards
    }
    assert all(dict.__getitem__(read.shards, s) is None for s in read.shards)  # no runs read


def test_a_shards_digest_changes_with_its_runs_and_the_sweeps_label_only():
    cfg = quick()
    digests = {s: plan_sweep(cfg).shard_digest(s) for s in plan_sweep(cfg).shards}
    assert all(len(d) == 12 and int(d, 16) >= 0 for d in digests.values())
    assert len(set(digests.values())) == len(digests)
    assert {s: plan_sweep(quick()).shard_digest(s) for s in digests} == digests  # stable
    cfg["rounds"] += 1  # every run changes
    edited = plan_sweep(cfg)
    assert not {s: edited.shard_digest(s) for s in edited.shards}.items() & digests.items()
    cfg = quick()
    cfg["sweep"] = "renamed"  # the same run ids, another label in every row
    renamed = plan_sweep(cfg)
    assert not {s: renamed.shard_digest(s) for s in renamed.shards}.items() & digests.items()


def test_the_seeds_of_a_configuration_hash_as_their_own_configs_would():
    from fedsparse.training.config import run_ids

    cfg = normalize_run_config(
        {
            "dataset": dict(SMALL_LINEAR, seed=7),
            "algorithm": "fedht",
            "rounds": 3,
            "params": {"stepsize": 0.1, "sparsity": 5},
            "partition": {"kind": "iid", "clients": 3, "seed": 5},
        }
    )
    seeds = [0, 1, 7, 5, 123456]  # also the values of nested seeds
    assert run_ids(cfg, seeds) == [run_id({**cfg, "seed": s}) for s in seeds]


def test_a_cluster_jobs_snakemake_reads_the_plan_and_never_plans(tmp_path):
    """A plan that would fail if made again (its data file is gone) still gives the job
    its DAG: the job's Snakemake (--mode remote) read the plan file."""
    import subprocess
    import sys

    from fedsparse.layout import Layout
    from fedsparse.sweep import plan_checked
    from fedsparse.sweep.plan_file import write_plan_file

    (tmp_path / "rows.svm").write_text(
        "".join(f"{i % 2 * 2 - 1} qid:{i % 3} 1:{i}\n" for i in range(30))
    )
    cfg = {
        "sweep": "remote",
        "rounds": 2,
        "datasets": {
            "svm": {
                "data": {"kind": "libsvm", "path": "rows.svm"},
                "model": {"loss": "least_squares"},
            }
        },
        "algorithms": ["fedht"],
        "grid": {"stepsize": [0.1], "sparsity": [1]},
    }
    (tmp_path / "sweep.yaml").write_text(yaml.safe_dump(cfg))
    cfg = yaml.safe_load((tmp_path / "sweep.yaml").read_text())  # as Snakemake reads it
    root = Path(__file__).resolve().parents[1]
    (tmp_path / "rows.svm").rename(tmp_path / "elsewhere.svm")
    snakemake = [
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        str(root / "Snakefile"),
        "--directory",
        str(tmp_path),
        "--configfile",
        str(tmp_path / "sweep.yaml"),
        "-n",
    ]
    proc = subprocess.run(snakemake, capture_output=True, text=True)
    assert proc.returncode == 1 and "datasets.svm.data.path: no such file" in proc.stderr
    (tmp_path / "elsewhere.svm").rename(tmp_path / "rows.svm")
    import os

    here = os.getcwd()
    os.chdir(tmp_path)
    try:
        plan = plan_checked(cfg)
        write_plan_file(plan, cfg, Layout.of_sweep(cfg).plan_file)  # cwd: tmp_path
    finally:
        os.chdir(here)
    (tmp_path / "rows.svm").unlink()
    target = f"run_shard:shard=svm--0000,digest={plan.shard_digest('svm--0000')}"
    job = ["--mode", "remote", "--target-jobs", target, "--quiet"]
    proc = subprocess.run(snakemake + job, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    # a file of the shard named for other runs is no job of this plan
    job[3] = "run_shard:shard=svm--0000,digest=0123456789ab"
    proc = subprocess.run(snakemake + job, capture_output=True, text=True)
    assert proc.returncode != 0 and "have digest" in proc.stdout + proc.stderr


def test_a_data_job_builds_its_data_set_without_planning(tmp_path, monkeypatch):
    from fedsparse.pipeline import steps

    cfg = quick()
    spec = plan_sweep(cfg).datasets["sim-linear-a0.1-b0.1"]
    monkeypatch.setattr(steps, "plan_sweep", lambda sweep: pytest.fail("planned the sweep"))
    steps.make_data(cfg, "sim-linear-a0.1-b0.1", tmp_path / "d", spec=spec)
    assert (tmp_path / "d/meta.json").is_file()


@pytest.mark.parametrize("case", ["missing", "stale", "no such shard", "not parquet"])
def test_an_unusable_plan_file_is_one_line_naming_it(tmp_path, case):
    from fedsparse.sweep.plan_file import PlanFileError, read_plan_shard, write_plan_file

    cfg, path = quick(), tmp_path / "plan.parquet"
    shard = next(iter(plan_sweep(cfg).shards))
    if case != "missing":
        write_plan_file(plan_sweep(cfg), cfg, path)
    if case == "stale":
        cfg["rounds"] += 1
    if case == "no such shard":
        shard = "nope--0000"
    if case == "not parquet":
        path.write_text("sweep: quick\n")
    with pytest.raises(PlanFileError) as err:
        read_plan_shard(path, shard, cfg)
    message = str(err.value)
    assert message.startswith(f"{path}: ") and "\n" not in message
    want = {"missing": "no plan file", "stale": "another sweep config", "not parquet": "cannot"}
    assert want.get(case, "nope--0000") in message


def test_a_shard_reads_its_part_and_plans_itself_only_without_a_valid_plan(
    tmp_path, monkeypatch, caplog
):
    import logging

    import pandas as pd

    import fedsparse.pipeline.shard_runner as shard_module
    from fedsparse.layout import Layout
    from fedsparse.pipeline.steps import make_data
    from fedsparse.sweep.plan_file import write_plan_file

    cfg = {
        "sweep": "p",
        "rounds": 3,
        "seeds": [0, 1],
        "shard_size": 2,
        "embedding_sample": 0,
        "datasets": {"lin": {"data": dict(SMALL_LINEAR)}},
        "algorithms": ["fedht"],
        "grid": {"stepsize": [0.01], "sparsity": [5]},
    }
    make_data(cfg, "lin", tmp_path / "data" / "lin")
    shards = Layout(tmp_path).shards
    write_plan_file(plan_sweep(cfg), cfg, Layout(tmp_path).plan_file)

    def outputs(name: str) -> tuple[pd.DataFrame, pd.DataFrame]:
        traces, runs = shards / f"{name}.parquet", shards / f"{name}.runs.parquet"
        shard_module.run_shard(cfg, "lin--0000", tmp_path / "data", traces, runs)
        timings = ["train_time_s", "wall_time_s", "finished_at"]
        return (
            pd.read_parquet(traces).drop(columns="elapsed_s"),
            pd.read_parquet(runs).drop(columns=timings),
        )

    with monkeypatch.context() as m:  # the plan file is used: planning would fail
        m.setattr(shard_module, "plan_sweep", lambda sweep: pytest.fail("planned the sweep"))
        from_file = outputs("a")
    caplog.set_level(logging.INFO, logger="fedsparse.shard")
    cfg["sweep"] = "q"  # another config than the plan file's: the shard plans it itself
    stale = outputs("b")
    assert "lin--0000: planning the sweep here: " in caplog.text
    assert "another sweep config" in caplog.text
    for a, b in zip(from_file, stale, strict=True):  # the only difference: the sweep label
        label = [c for c in ("sweep", "config_json") if c in a]
        pd.testing.assert_frame_equal(a.drop(columns=label), b.drop(columns=label))
    assert set(stale[1].sweep) == {"q"}  # the shard's own config, as before plan files


def test_command_line_values_and_exponent_notation_are_read_as_numbers():
    from snakemake.cli import parse_config

    from fedsparse.sweep import retype_config

    config = {"seeds": [0], "results": "r", "grid": {"stepsize": [0.1], "sparsity": [5]}}
    overrides = parse_config(["seeds=[0,1,2]", "results=/tmp/a b", "grid={stepsize: [0.5, 1]}"])
    assert overrides["seeds"] == ["0", "1", "2"]  # what Snakemake gives
    merged = {**config, **overrides, "grid": {**config["grid"], **overrides["grid"]}}
    merged["alpha"] = ["1e-3", "2E+5", "1e3x", "0.1"]  # as Snakemake's YAML 1.1 reader left them
    retype_config(merged, overrides)
    assert merged == {
        "seeds": [0, 1, 2],
        "results": "/tmp/a b",
        "grid": {"stepsize": [0.5, 1], "sparsity": [5]},
        "alpha": [1e-3, 2e5, "1e3x", "0.1"],
    }


def test_config_files_read_exponent_notation_as_numbers(tmp_path):
    from fedsparse.training.config import read_config_file

    path = tmp_path / "c.yaml"
    path.write_text("grid: {stepsize: [1e-3, 1.0e-4, -3e+2, .5e-1, 0.1]}\nsweep: 1e3x\n")
    assert read_config_file(path) == {
        "grid": {"stepsize": [1e-3, 1e-4, -300.0, 0.05, 0.1]},
        "sweep": "1e3x",
    }


def test_a_config_normalised_like_another_is_its_own_normalisation():
    """The planner normalises a data set's configurations of one algorithm from the first:
    the params alone are normalised and checked, the rest is taken from it."""
    raw = {
        "dataset": dict(SMALL_LINEAR, clients=6),
        "algorithm": "sfedhp",
        "rounds": 3,
        "params": {"edges": 2, "stepsize": 0.1},
        "time_model": {"exchange_time": 10},
    }
    first = normalize_run_config(raw)
    for params in ({"edges": 3, "stepsize": 0.01}, {"edges": 6, "sampled_edges": 2}):
        alone = normalize_run_config({**raw, "params": params})
        like = normalize_run_config({**raw, "params": params}, first)
        assert like == alone and list(like) == list(alone)  # key order: the plan file's text
        assert like["dataset"] is first["dataset"] and like["params"] is not first["params"]
    for params in ({"edges": 4}, {"edges": 2, "stepsize": -1}):  # 4 edges, 6 clients
        with pytest.raises(ConfigError) as alone:
            normalize_run_config({**raw, "params": params})
        with pytest.raises(ConfigError) as like:
            normalize_run_config({**raw, "params": params}, first)
        assert str(like.value) == str(alone.value)


@pytest.mark.parametrize("fuse", [True, False])
def test_a_bad_configuration_among_good_ones_fails_the_check_whatever_its_seeds_share(fuse):
    """check_plan checks each configuration once, though its seeds share its params and it
    shares its data set's parts with the configurations before it."""
    from fedsparse.sweep import plan_checked

    cfg = {
        "sweep": "later",
        "rounds": 2,
        "seeds": [0, 1, 2],
        "fuse": fuse,
        "datasets": {"d": {"data": dict(SMALL_LINEAR)}},
        "algorithms": {"fedht": {}, "fediterht": {"sparsity": [5, 10_000]}},
        "grid": {"stepsize": [0.1, 0.01], "local_steps": [1, 2], "sparsity": [5]},
    }
    plan = plan_sweep(cfg)
    bad = [r for r in plan.runs if r.config["params"]["sparsity"] == 10_000]
    assert len(bad) == 4 * 3 and len({id(r.config["params"]) for r in bad}) == 4
    with pytest.raises(ConfigError, match=r"^algorithms\.fediterht\.sparsity: 10000 is larger"):
        plan_checked(cfg)
