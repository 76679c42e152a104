"""Sweep expansion: grids, overrides, run ids, shards, and errors naming the key."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from fedsparse.config import normalize_run_config, run_id
from fedsparse.errors import ConfigError
from fedsparse.sweep import plan_sweep

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
    assert cfg["grid"]["stepsize"] == [10, 1, 0.6, 0.3, 0.1, 0.06, 0.03, 0.01, 0.001]
    assert cfg["grid"]["local_steps"] == [3, 5, 8, 10]
    assert cfg["rounds"] == 200 and len(cfg["seeds"]) >= 2
    levels = {
        (d["data"]["task"], d["data"]["alpha"], d["data"]["beta"]) for d in cfg["datasets"].values()
    }
    assert levels == {(t, a, a) for t in ("linear", "logistic") for a in (0.1, 0.5, 1.0)}
    per_dataset = 9 * 4 * 2 * 2 + 9 * 2  # fedht, fediterht; distiht
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
    ],
)
def test_bad_sweeps_name_the_offending_key(edit, key):
    cfg = quick()
    edit(cfg)
    with pytest.raises(ConfigError) as err:
        plan_sweep(cfg)
    assert str(err.value).startswith(key), str(err.value)
