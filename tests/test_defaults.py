"""The sweep keys' defaults live in one table (fedsparse.defaults): the schema states the same
values, and every place that needs a default reads it there rather than restating it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from conftest import SMALL_LINEAR

from fedsparse import defaults
from fedsparse.defaults import DEFAULT_TIME_MODEL, SWEEP_DEFAULTS
from fedsparse.layout import Layout
from fedsparse.pipeline import progress, steps
from fedsparse.sweep import SWEEP_KEYS, cost, plan_sweep
from fedsparse.training import config

ROOT = Path(__file__).resolve().parents[1]
SCHEMA = ROOT / "workflow" / "schemas" / "sweep.schema.yaml"


def sweep(**extra) -> dict:
    return {
        "rounds": 10,
        "datasets": {"lin": {"data": dict(SMALL_LINEAR)}},
        "algorithms": {"fedht": {}},
        "grid": {"stepsize": [0.01, 0.001], "local_steps": [2], "sparsity": [10]},
        **extra,
    }


def test_the_schema_states_the_tables_defaults():
    props = yaml.safe_load(SCHEMA.read_text())["properties"]
    assert set(SWEEP_DEFAULTS) <= set(SWEEP_KEYS)
    for key, value in SWEEP_DEFAULTS.items():
        value = list(value) if isinstance(value, tuple) else value
        if "default" in props[key]:
            assert props[key]["default"] == value, key
        else:  # no schema default on purpose (the text says why), the value in words
            words = f"{value:g}" if isinstance(value, float) else str(value)
            pattern = rf"\bdefault {words}\b|\b{words} when absent"
            assert re.search(pattern, props[key]["description"]), key
    told = re.search(r"defaults ([\d.]+), ([\d.]+), ([\d.]+)", props["time_model"]["description"])
    assert [float(v) for v in told.groups()] == list(DEFAULT_TIME_MODEL.values())


def test_every_place_takes_its_default_from_the_table(monkeypatch, tmp_path):
    for key, value in {
        "sweep": "zz",
        "seeds": (4, 5),
        "eval_every": 3,
        "shard_size": 2,
        "progress_every": 7.0,
        "embedding_sample": 11,
    }.items():
        monkeypatch.setitem(SWEEP_DEFAULTS, key, value)
    plan = plan_sweep(sweep())
    assert plan.name == "zz"
    assert Layout.of_sweep(sweep()).root == Path("results/zz")  # the default name's folder
    assert {(r.config["seed"], r.config["eval_every"]) for r in plan.runs} == {(4, 3), (5, 3)}
    assert [len(runs) for runs in plan.shards.values()] == [2, 2]
    raw = {"dataset": dict(SMALL_LINEAR), "algorithm": "fedht", "rounds": 10}
    raw["params"] = {"stepsize": 0.1, "sparsity": 5}
    assert config.normalize_run_config(raw)["eval_every"] == 3
    run = plan.runs[0].config
    shape = cost.synthetic_shape(run["dataset"])
    implicit = {k: v for k, v in run.items() if k != "eval_every"}
    assert cost.run_seconds(implicit, shape) == cost.run_seconds(run, shape)
    assert progress.sweep_progress(plan, {}, tmp_path, print).every == 7.0

    seen = {}

    def prepare(*args, embedding_sample, **kwargs):
        seen["embedding_sample"] = embedding_sample
        raise RuntimeError("stop")

    monkeypatch.setattr(steps, "prepare_dataset", prepare)
    spec = {"data": plan.datasets["lin"]["data"], "model": {"loss": "least_squares"}}
    spec["partition"] = {"kind": "iid", "clients": 4}
    with pytest.raises(RuntimeError, match="stop"):
        steps.make_data(sweep(), "lin", tmp_path / "lin", spec=spec)
    assert seen == {"embedding_sample": 11}


def test_the_named_constants_are_the_tables_values():
    assert config.DEFAULT_DIVERGENCE_FACTOR == SWEEP_DEFAULTS["divergence_factor"]
    assert progress.DEFAULT_EVERY == SWEEP_DEFAULTS["progress_every"]
    assert defaults.sweep_default({}, "seeds") == [0]  # a list, like a value given
