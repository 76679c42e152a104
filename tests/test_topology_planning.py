"""Hyperparameters that depend on the client count are checked while planning wherever the
config fixes that count (edges must divide the clients), so a sweep fails in one line
before any job starts instead of in every run."""

from __future__ import annotations

import pytest

from fedsparse.errors import ConfigError
from fedsparse.sweep import plan_sweep
from fedsparse.training.config import known_clients, normalize_run_config

SIM = {"kind": "synthetic", "clients": 6, "samples_per_client": 5, "dim": 8, "support": 2}


def sweep(algorithm: str, edges: list[int], **dataset) -> dict:
    return {
        "sweep": "topology",
        "rounds": 2,
        "datasets": {"d": {"data": {**SIM, **dataset.pop("data", {})}, **dataset}},
        "algorithms": {algorithm: {"edges": edges}},
    }


@pytest.mark.parametrize("algorithm", ["sfedhp", "hierfavg"])
def test_edges_not_dividing_the_clients_fail_the_plan(algorithm):
    assert len(plan_sweep(sweep(algorithm, [1, 2, 3, 6])).runs) == 4
    with pytest.raises(ConfigError) as err:
        plan_sweep(sweep(algorithm, [2, 4]))
    assert "params.edges: 4 edges do not divide the 6 clients evenly" in str(err.value)
    assert "\n" not in str(err.value)


def test_a_partitioner_fixes_the_count_and_the_data_otherwise():
    part = {"kind": "iid", "clients": 10}
    with pytest.raises(ConfigError, match="do not divide the 10 clients"):
        plan_sweep(sweep("sfedhp", [3], partition=part))
    ds = {"kind": "svmlight", "path": "some.svm", "task": "binary"}
    cfg = {"dataset": ds, "algorithm": "sfedhp", "rounds": 1, "params": {"edges": 3}}
    norm = normalize_run_config(cfg)  # the count comes with the data: checked at run start
    assert known_clients(norm["dataset"], norm["partition"]) is None


def test_known_clients():
    cfg = {"dataset": SIM, "algorithm": "sfedhp", "rounds": 1, "params": {"edges": 3}}
    norm = normalize_run_config(cfg)
    assert known_clients(norm["dataset"], norm["partition"]) == 6
    assert known_clients(norm["dataset"], {"kind": "iid", "clients": 7}) == 7
