"""Every built-in family's quick sweep stores the same traces with cohorts and with
``fuse: false``: each quick config's own algorithms and hyperparameters, at toy
size (one small data set, a few rounds, one seed, three step sizes)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml
from cohort_helpers import stored_traces

from fedsparse.sweep import plan_sweep

CONFIGS = Path(__file__).resolve().parents[1] / "config"
# each family's quick config, and whether its grid forms cohorts (the gradient-sparsification
# family declares nothing fusable: its runs compute alone either way)
QUICK = {
    "quick.yaml": True,
    "sfedhp-quick.yaml": True,
    "ssca-quick.yaml": True,
    "gs-quick.yaml": False,
}
STEPSIZES = [3.0, 0.1, 0.01]  # a large one, whose members may leave their cohorts early


def toy_svmlight(path: Path) -> Path:
    """240 rows of 12 features in 3 classes, classes apart enough to learn."""
    rng = np.random.default_rng(5)
    labels = rng.integers(0, 3, 240)
    X = rng.normal(0.0, 1.0, (240, 12)) + 1.5 * np.eye(3, 12)[labels]
    lines = (
        f"{y} " + " ".join(f"{j + 1}:{v:.6g}" for j, v in enumerate(row))
        for y, row in zip(labels, X, strict=True)
    )
    path.write_text("\n".join(lines) + "\n")
    return path


def small_model(model: dict) -> dict:
    """The family's own model at toy width (hidden layers of 5)."""
    if "hidden" in model:
        model = {**model, "hidden": [5] * len(model["hidden"])}
    return model


def toy_sweep(name: str, data_file: Path) -> dict:
    sweep = yaml.safe_load((CONFIGS / name).read_text())
    spec = next(iter(sweep["datasets"].values()))  # the first data set's model and grid
    multiclass = spec["model"]["loss"] == "softmax"
    dataset = {
        "data": (
            {"kind": "svmlight", "path": str(data_file), "task": "multiclass"}
            if multiclass
            else spec["data"]
        ),
        "model": small_model(spec["model"]),
    }
    if multiclass:
        dataset["partition"] = {"kind": "iid", "clients": 8}
    grid = {k: v for k, v in spec.get("grid", {}).items() if k != "stepsize"}
    if "k" in grid:  # coordinates sent a round: within the toy model's size
        grid["k"] = [8]
    if grid:
        dataset["grid"] = grid
    sweep.update(
        sweep=f"toy-{sweep['sweep']}",
        rounds=4,
        eval_every=2,
        seeds=[0],
        shard_size=6,
        datasets={"toy": dataset},
    )
    sweep["grid"] = {**sweep.get("grid", {}), "stepsize": STEPSIZES}
    return sweep


@pytest.mark.integration
@pytest.mark.parametrize("name", QUICK)
def test_a_family_quick_sweep_stores_the_same_traces_fused_and_alone(name, tmp_path):
    """The quick config's algorithms and their grids, run fused and with ``fuse: false``:
    the same run ids, the same bits (elapsed_s aside)."""
    sweep = toy_sweep(name, toy_svmlight(tmp_path / "toy.svm"))
    fused = stored_traces(sweep, tmp_path / "fused")
    alone = stored_traces({**sweep, "fuse": False}, tmp_path / "alone")
    assert not any(r.cohort for r in plan_sweep({**sweep, "fuse": False}).runs)
    assert fused.keys() == alone.keys()
    for run_id, table in fused.items():
        assert table.equals(alone[run_id]), (name, run_id)
    assert any(r.cohort for r in plan_sweep(sweep).runs) == QUICK[name]


def test_the_runs_table_keeps_the_beta_hyperparameter(tmp_path):
    """sFedHP's and pFedMe's β is a hyperparameter column of runs.parquet, apart from the
    synthetic data's level (data_beta): storing a run's summary must not rename one into the
    other (the rename is for summaries stored by an older version, which lack data_beta)."""
    import pyarrow.parquet as pq
    from conftest import run_sweep

    from fedsparse.pipeline.shard_runner import _current_names

    sweep = toy_sweep("sfedhp-quick.yaml", toy_svmlight(tmp_path / "toy.svm"))
    sweep["grid"]["stepsize"] = [0.01]
    runs = pq.read_table(run_sweep(tmp_path / "results", sweep) / "runs.parquet").to_pandas()
    with_beta = runs[runs["algorithm"].isin(["sfedhp", "pfedme"])]
    assert len(with_beta) and with_beta["beta"].notna().all()
    assert runs["data_beta"].isna().all()  # svmlight data: no synthetic level
    old = {"alpha": 0.1, "beta": 0.5, "stepsize": 0.01}  # a summary from before the rename
    assert _current_names(old) == {"data_alpha": 0.1, "data_beta": 0.5, "stepsize": 0.01}
    new = {"data_alpha": None, "data_beta": None, "beta": 1.0}
    assert _current_names(new) == new
