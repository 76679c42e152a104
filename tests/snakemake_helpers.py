"""Running the Snakemake workflow from tests: a tiny sweep, the command, its results read back.

Shared by the workflow, cluster, real-data and data-edit tests (a helper module, not a test
module: no test imports another)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pandas as pd
import yaml
from conftest import SMALL_LINEAR

ROOT = Path(__file__).resolve().parents[1]
SNAKEMAKE = [sys.executable, "-m", "snakemake"]
# columns that legitimately differ between two executions of the same run
TIMING = ["elapsed_s", "train_time_s", "wall_time_s", "finished_at", "shard", "host"]

TINY = {
    "sweep": "tiny",
    "rounds": 15,
    "seeds": [0, 1],
    "shard_size": 12,
    "datasets": {
        "lin": {"data": dict(SMALL_LINEAR)},
        "log": {
            "data": {
                "kind": "synthetic",
                "task": "logistic",
                "clients": 6,
                "samples_per_client": 30,
                "dim": 40,
                "support": 5,
                "positives": 5,
            },
            "model": {"loss": "logistic"},
        },
    },
    "algorithms": {"fedht": {}, "fediterht": {}, "distiht": {"local_steps": [1]}},
    "grid": {"stepsize": [0.01, 0.001], "local_steps": [2, 4], "sparsity": [10], "batch_size": [5]},
}


def snakemake_command(workdir: Path, *args: str) -> list[str]:
    return [*SNAKEMAKE, "-s", str(ROOT / "Snakefile"), "--directory", str(workdir), *args]


def snakemake(workdir: Path, *args: str, check: bool = True, **kw) -> subprocess.CompletedProcess:
    cmd = snakemake_command(workdir, "--cores", "2", "--rerun-incomplete", *args)
    proc = subprocess.run(cmd, capture_output=True, text=True, **{"timeout": 600, **kw})
    if check and proc.returncode != 0:
        raise AssertionError(f"snakemake failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    return proc


def snakemake_messages(workdir: Path) -> str:
    """Snakemake's log of its latest run in ``workdir``: every message, the job boxes and
    executor notes too, which the console leaves out once jobs run (fedsparse.pipeline.console)."""
    logs = sorted((workdir / ".snakemake/log").glob("*.snakemake.log"))
    return logs[-1].read_text()


def write_config(workdir: Path, cfg: dict) -> Path:
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / "sweep.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def read_traces_of(results: Path) -> pd.DataFrame:
    from fedsparse.query.read import read_traces

    traces = read_traces(results).to_pandas().drop(columns=["elapsed_s"])
    return traces.sort_values(["run_id", "round"]).reset_index(drop=True)


def results_dir(workdir: Path) -> Path:
    """The results folder of the sweep config ``workdir/sweep.yaml``: ``results/<sweep>``
    (TINY's: ``results/tiny``), unless it names one."""
    from fedsparse.layout import Layout

    return workdir / Layout.of_sweep(yaml.safe_load((workdir / "sweep.yaml").read_text())).root


def results_of(workdir: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    from fedsparse.query.read import read_traces

    results = results_dir(workdir)
    traces = read_traces(results).to_pandas()
    runs = pd.read_parquet(results / "runs.parquet")
    traces = traces.drop(columns=["elapsed_s"]).sort_values(["run_id", "round"])
    runs = runs.drop(columns=[c for c in TIMING if c in runs]).sort_values("run_id")
    return traces.reset_index(drop=True), runs.reset_index(drop=True)


def job_counts(output: str) -> dict[str, int]:
    table = output.split("Job stats:")[1]
    return {m[1]: int(m[2]) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.M)}


# A small Optuna sweep: 10 random trials of Fed-HT on a linear data set, two workers.
TUNE = {
    "sweep": "t",
    "method": "optuna",
    "rounds": 30,
    "seeds": [0],
    "datasets": {"lin": {"data": dict(SMALL_LINEAR)}},
    "algorithms": {"fedht": {"batch_size": 5}},
    "optuna": {
        "n_trials": 10,
        "n_workers": 2,
        "sampler": {"name": "random", "seed": 0},
        "storage": "journal",
        "holdout_seeds": [7],
    },
    "space": {
        "stepsize": {"type": "float", "low": 1e-3, "high": 1e-2, "log": True},
        "local_steps": {"type": "int", "low": 1, "high": 3},
        "sparsity": {"type": "categorical", "choices": [5, 10]},
    },
}
