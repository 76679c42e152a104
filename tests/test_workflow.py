"""The Snakemake workflow, run for real in subprocesses on tiny sweeps."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import SMALL_LINEAR, kill_tree

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
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, **kw)
    if check and proc.returncode != 0:
        raise AssertionError(f"snakemake failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    return proc


def write_config(workdir: Path, cfg: dict) -> Path:
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / "sweep.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def results_of(workdir: Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    from fedsparse.aggregate import read_traces

    traces = read_traces(workdir / "results").to_pandas()
    runs = pd.read_parquet(workdir / "results/runs.parquet")
    traces = traces.drop(columns=["elapsed_s"]).sort_values(["run_id", "round"])
    runs = runs.drop(columns=[c for c in TIMING if c in runs]).sort_values("run_id")
    return traces.reset_index(drop=True), runs.reset_index(drop=True)


def test_lint_passes():
    proc = subprocess.run(
        [*SNAKEMAKE, "--lint"], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


def job_counts(output: str) -> dict[str, int]:
    table = output.split("Job stats:")[1]
    return {m[1]: int(m[2]) for m in re.finditer(r"^(\w+)\s+(\d+)$", table, re.M)}


def test_dry_run_of_the_quick_config_plans_the_expected_jobs(tmp_path):
    proc = snakemake(tmp_path, "-n", "--configfile", str(ROOT / "config/quick.yaml"))
    assert not (tmp_path / "results").exists()  # a dry run writes no plan file
    counts = job_counts(proc.stdout)
    # 3 data sets x 40 runs, 40 runs per shard; data built once per data set
    assert counts == {
        "make_data": 3,
        "run_shard": 3,
        "aggregate": 1,
        "report": 1,
        "all": 1,
        "total": 9,
    }


def test_dry_run_of_the_default_config(tmp_path):
    proc = snakemake(tmp_path, "-n", "--configfile", str(ROOT / "config/config.yaml"))
    counts = job_counts(proc.stdout)
    assert counts["make_data"] == 6
    assert counts["run_shard"] == 6 * 8  # 210 runs per data set, 27 per shard


@pytest.mark.parametrize(
    "edit, needle",
    [
        (lambda c: c.update(rounds="many"), "rounds"),
        (lambda c: c.update(colour="red"), "colour"),
        (lambda c: c["grid"].update(stepsize=[-1.0]), "grid.stepsize[0]"),
        (lambda c: c["datasets"]["lin"]["data"].update(kind="csv"), "kind"),
    ],
)
def test_bad_sweep_is_refused_before_anything_runs(tmp_path, edit, needle):
    cfg = yaml.safe_load(yaml.safe_dump(TINY))
    edit(cfg)
    path = write_config(tmp_path, cfg)
    proc = snakemake(tmp_path, "-n", "--configfile", str(path), check=False)
    assert proc.returncode != 0
    assert needle in proc.stderr + proc.stdout
    assert not (tmp_path / "results").exists()


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """The tiny sweep, run once from start to finish."""
    workdir = tmp_path_factory.mktemp("uninterrupted")
    snakemake(workdir, "--configfile", str(write_config(workdir, TINY)))
    return workdir


def test_end_to_end_sweep_writes_traces_runs_and_report(finished):
    traces, runs = results_of(finished)
    n_runs = 2 * (2 * 2 * 2 + 2 * 2 * 2 + 2 * 2)
    assert len(runs) == n_runs
    assert set(runs.algorithm) == {"fedht", "fediterht", "distiht"}
    assert traces.groupby("run_id")["round"].min().eq(0).all()
    ok = runs[runs.status == "ok"]
    assert (ok.final_round == 15).all()
    # runs.parquet summarises the traces it sits next to
    last = traces.sort_values("round").groupby("run_id").tail(1).set_index("run_id")
    pd.testing.assert_series_equal(
        runs.set_index("run_id").final_objective,
        last.objective.rename("final_objective"),
        check_like=True,
    )
    assert runs.git_commit.notna().all() or runs.git_commit.isna().all()
    assert runs.numba_version.notna().all() and runs.fedsparse_version.notna().all()
    # the traces dataset is hive-partitioned by data set and algorithm
    parts = {
        p.parent.parent.name + "/" + p.parent.name
        for p in (finished / "results/traces").rglob("*.parquet")
    }
    assert "dataset=lin/algorithm=fedht" in parts and len(parts) == 6
    report = finished / "results/report/index.html"
    assert report.is_file() and "<img" in report.with_name("runs.html").read_text()
    # shards leave no work-in-progress behind
    assert not list((finished / "results/shards").glob("*.parts"))
    log = (finished / "results/logs/shards/lin--0000.log").read_text()
    assert re.search(r"12/12 runs done .* about 0s left", log)
    # the sweep was planned once: every shard read its runs from the plan file
    assert (finished / "results/shards/plan.parquet").is_file()
    logs = "".join(p.read_text() for p in (finished / "results/logs/shards").glob("*.log"))
    assert "planning the sweep here" not in logs


def test_rerun_of_a_finished_sweep_does_nothing(finished):
    proc = snakemake(finished, "-n", "--configfile", str(finished / "sweep.yaml"))
    assert "Nothing to be done" in proc.stdout + proc.stderr


def test_kill_minus_nine_mid_shard_then_resume_gives_identical_results(finished, tmp_path):
    cfg = yaml.safe_load(yaml.safe_dump(TINY))
    path = write_config(tmp_path, cfg)
    cmd = snakemake_command(tmp_path, "--cores", "1", "--configfile", str(path))
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    parts = tmp_path / "results/shards"
    deadline = time.monotonic() + 300
    try:
        while time.monotonic() < deadline:
            done = list(parts.glob("*.parts/*.parquet")) if parts.exists() else []
            if len(done) >= 3:
                break
            time.sleep(0.02)
        else:
            pytest.fail("no shard progress within 300 s")
    finally:
        kill_tree(proc.pid)  # snakemake and every job it started, as a crash would
        proc.wait()
    finished_before = {p.stem for p in parts.glob("*.parts/*.parquet")}
    assert finished_before
    # the kill landed inside a shard: runs saved, the shard's output not written
    interrupted = [d for d in parts.glob("*.parts") if any(d.iterdir())]
    assert any(not d.with_suffix("").exists() for d in interrupted)
    # a hard kill leaves Snakemake's lock behind (SIGINT/SIGTERM would remove it)
    snakemake(tmp_path, "--configfile", str(path), "--unlock")
    snakemake(tmp_path, "--configfile", str(path))
    logs = "".join(p.read_text() for p in (tmp_path / "results/logs/shards").glob("*.log"))
    resumed = [int(n) for n in re.findall(r"\((\d+) already done\)", logs)]
    assert max(resumed) >= 1, "the restarted shard recomputed runs it had finished"
    a_traces, a_runs = results_of(finished)
    b_traces, b_runs = results_of(tmp_path)
    pd.testing.assert_frame_equal(a_traces, b_traces)
    pd.testing.assert_frame_equal(a_runs.drop(columns="sweep"), b_runs.drop(columns="sweep"))


def test_snakemake_report_builds(finished):
    out = finished / "snakemake-report.zip"
    snakemake(finished, "--configfile", str(finished / "sweep.yaml"), "--report", str(out))
    assert out.is_file() and out.stat().st_size > 10_000
    shutil.rmtree(finished / ".snakemake" / "report", ignore_errors=True)
