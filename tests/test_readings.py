"""Readings of the simulation data (issue 20, item 4): ``dataset.center`` none | global |
per_client, a deviation from the papers' text that is off by default and labelled in names, run
ids and the report.

The sweep at the end is real (make_data, run_shard, aggregate, as the workflow runs it): a tiny
Simulation I read three ways, whose report gets the "Readings of the simulation data" table.
"""

from __future__ import annotations

import copy
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import run_sweep

from fedsparse.cli import main
from fedsparse.config import normalize_dataset, normalize_run_config, run_id
from fedsparse.data.synthetic import simulation
from fedsparse.errors import ConfigError
from fedsparse.report import build_report

SMALL = {"clients": 5, "samples_per_client": 12, "dim": 30, "support": 6, "alpha": 1.0}


@pytest.mark.parametrize("task", ["linear", "logistic"])
def test_centring_subtracts_the_means_and_leaves_the_responses(task):
    extra = {"positives": 3} if task == "logistic" else {}
    raw = simulation(task=task, **SMALL, **extra)
    n = SMALL["samples_per_client"]
    per = simulation(task=task, center="per_client", **SMALL, **extra)
    glob = simulation(task=task, center="global", **SMALL, **extra)
    blocks = raw.X.reshape(SMALL["clients"], n, -1)
    want = (blocks - blocks.mean(axis=1, keepdims=True)).reshape(raw.X.shape)
    np.testing.assert_allclose(per.X, want, rtol=0, atol=1e-12)
    np.testing.assert_allclose(glob.X, raw.X - raw.X.mean(axis=0), rtol=0, atol=1e-12)
    for data in (per, glob):
        np.testing.assert_array_equal(data.y, raw.y)  # drawn before the centring
        np.testing.assert_array_equal(data.x_true, raw.x_true)
    assert np.abs(per.X.reshape(SMALL["clients"], n, -1).mean(axis=1)).max() < 1e-12
    assert raw.name == f"sim-{task}-a1-b0.1"
    assert per.name == f"sim-{task}-a1-b0.1-center-per_client"


def test_none_is_the_papers_reading_and_keeps_names_and_run_ids():
    base = {
        "dataset": {"kind": "synthetic", **SMALL},
        "algorithm": "fedht",
        "rounds": 3,
        "params": {"stepsize": 0.01, "local_steps": 2, "sparsity": 5, "batch_size": 4},
    }
    explicit = copy.deepcopy(base)
    explicit["dataset"]["center"] = "none"
    a, b = normalize_run_config(base), normalize_run_config(explicit)
    assert "center" not in a["dataset"] and run_id(a) == run_id(b)
    ids = {run_id(a)}
    for how in ("global", "per_client"):
        cfg = copy.deepcopy(base)
        cfg["dataset"]["center"] = how
        norm = normalize_run_config(cfg)
        assert norm["dataset"]["name"].endswith(f"-center-{how}")
        ids.add(run_id(norm))
    assert len(ids) == 3


@pytest.mark.parametrize("bad", ["mean", True, None, 1])
def test_a_bad_reading_is_one_line_naming_the_key(bad, tmp_path, capsys):
    with pytest.raises(ConfigError, match=r"^dataset\.center: must be one of none, global"):
        normalize_dataset({"kind": "synthetic", "center": bad})
    run = tmp_path / "run.yaml"
    run.write_text(
        f"dataset: {{kind: synthetic, center: {bad!r}}}\nalgorithm: fedht\nrounds: 2\n"
        "params: {stepsize: 0.01, local_steps: 2, sparsity: 5, batch_size: 4}\n"
    )
    assert main(["run", str(run), "-o", str(tmp_path / "t.parquet")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "dataset.center" in err
    assert not (tmp_path / "t.parquet").exists()


DATA = {"kind": "synthetic", "task": "linear", **SMALL, "samples_per_client": 20, "alpha": 0.1}
SWEEP = {
    "sweep": "readings",
    "rounds": 15,
    "seeds": [0],
    "embedding_sample": 0,
    "datasets": {
        f"sim{'' if how == 'none' else '-' + how}": {
            "data": {**DATA, "center": how},
            "model": {"loss": "least_squares"},
        }
        for how in ("none", "global", "per_client")
    },
    "algorithms": {"fedht": {}, "fediterht": {}, "distiht": {"local_steps": [1]}},
    "grid": {"stepsize": [0.003, 0.01], "local_steps": [3], "sparsity": [8], "batch_size": [5]},
}


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return run_sweep(tmp_path_factory.mktemp("readings"), SWEEP)


def test_report_shows_each_reading_with_its_level_and_verdict(results, tmp_path):
    page = build_report(results, tmp_path / "report").with_name("ht.html").read_text()
    assert "Readings of the simulation data" in page
    table = pd.read_csv(tmp_path / "report" / "tables" / "readings.csv")
    assert set(table["center"]) == {"none", "global", "per_client"}
    assert len(table) == 3 * 3  # readings x algorithms
    runs = pd.read_parquet(results / "runs.parquet")
    for row in table.itertuples():  # the level reached is the best configuration's mean
        name = "sim" if row.center == "none" else f"sim-{row.center}"
        mine = runs[(runs["dataset"] == name) & (runs["algorithm"] == row.algorithm)]
        assert row.final_objective == pytest.approx(mine["final_objective"].min())
    claimed = table[table["claimed_ratio"].notna()]  # Simulation I: Fed-HT and FedIter-HT
    assert set(claimed["algorithm"]) == {"fedht", "fediterht"} and len(claimed) == 6
    assert set(claimed["agreement"]) <= {"agrees", "does not agree", "not measured here"}
    claims = pd.read_csv(tmp_path / "report" / "tables" / "claims.csv")
    claims = claims[claims["paper"].str.contains("Fed-HT")].reset_index(drop=True)
    deviating = claims[claims["where"] != "sim"]
    assert len(deviating) == 2 * 4  # in rounds and in wall-clock time, 2 algorithms, 2 readings
    # each row names its reading, recognised from the runs' configs; the papers' reading first
    assert (deviating["reading_kind"] == "variation").all()
    assert set(deviating["reading"]) == {"center = global", "center = per_client"}
    assert (deviating["reading_description"].str.contains("which the papers do not do")).all()
    papers = claims[claims["where"] == "sim"]
    assert len(papers) == 4 and set(papers["reading"]) == {"center = none"}
    assert (papers["reading_kind"] == "paper_text").all() and list(papers.index) == [0, 1, 2, 3]
    noniid = pd.read_csv(tmp_path / "report" / "tables" / "noniid.csv")
    assert set(noniid["section"]) == {"sim"}  # the non-IID trend uses the papers' reading only


def test_readings_statements_say_what_each_reading_reproduces():
    from fedsparse.report.ht_section import readings_statements

    row = {"task": "linear", "loss": "least_squares", "alpha": 0.1, "beta": 0.1}
    table = pd.DataFrame(
        [
            {**row, "center": "none", "algorithm": "fediterht", "final_objective": 5.0,
             "claimed_ratio": 5.0, "agreement": "does not agree"},
            {**row, "center": "per_client", "algorithm": "fediterht", "final_objective": 182.6,
             "claimed_ratio": 5.0, "agreement": "agrees"},
        ]
    )  # fmt: skip
    none, per = readings_statements(table)
    assert none.endswith("center = none: reproduces none of the papers' speed-up claims.")
    assert "center = per_client: reproduces the claim for FedIter-HT" in per
    assert "best level reached 182.6 against 5 as generated" in per
