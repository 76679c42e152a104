"""The Snakemake workflow, run for real in subprocesses on tiny sweeps."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import file_digests, kill_tree, process_tree
from snakemake_helpers import (
    ROOT,
    SNAKEMAKE,
    TINY,
    job_counts,
    read_traces_of,
    results_of,
    snakemake,
    snakemake_command,
    snakemake_messages,
    write_config,
)

pytestmark = pytest.mark.integration


def test_lint_passes():
    proc = subprocess.run(
        [*SNAKEMAKE, "--lint"], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr


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


def test_the_jobs_planned_do_not_depend_on_whether_the_results_folder_exists(tmp_path):
    """Two Snakemake processes on one results folder plan the same jobs whichever planned
    first: a job that only a process planning before the folder existed ran (for the record of
    the aggregate's inputs) put that process a Snakemake start behind the other, and it then
    reran jobs the other had finished, deleting their outputs as the other's aggregate read
    them."""
    results = tmp_path / "shared-results"
    cfg = {**yaml.safe_load(yaml.safe_dump(TINY)), "results": str(results)}
    counts = []
    for name in ("first", "second"):
        path = write_config(tmp_path / name, cfg)
        proc = snakemake(tmp_path / name, "-n", "--configfile", str(path))
        counts.append(job_counts(proc.stdout))
        results.mkdir(exist_ok=True)  # as the first process's onstart makes it
    assert counts[0] == counts[1]


def test_dry_run_of_the_default_config(tmp_path):
    proc = snakemake(tmp_path, "-n", "--configfile", str(ROOT / "config/config.yaml"))
    counts = job_counts(proc.stdout)
    assert counts["make_data"] == 6
    # 210 runs per data set, 27 per shard grown to whole cohorts (15 step sizes each): 30
    assert counts["run_shard"] == 6 * 7


def test_list_values_on_the_command_line_and_exponent_notation_are_numbers(tmp_path):
    # Snakemake leaves values inside a --config list strings ('0'), and its YAML 1.1 reader
    # leaves 1e-3 in a config file a string: both were refused as "must be an integer/number"
    sweep = dict(TINY, grid=dict(TINY["grid"], stepsize=["1e-3"]))
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(sweep).replace("'1e-3'", "1e-3"))
    proc = snakemake(tmp_path, "-n", "--configfile", str(path), "--config", "seeds=[0,1,2]")
    # 2 data sets x 5 configurations x 3 seeds = 15 runs each, at most 12 a shard
    assert job_counts(proc.stdout)["run_shard"] == 2 * 2


def mistake_lines(proc: subprocess.CompletedProcess) -> list[str]:
    """What Snakemake printed, but for the line saying it uses the project's profile."""
    out = (proc.stdout + proc.stderr).splitlines()
    return [line for line in out if line and not line.startswith("Using workflow specific")]


def _libsvm_missing(c: dict) -> None:
    c["datasets"]["lin"]["data"] = {"kind": "libsvm", "path": "no/such/file.svm"}


@pytest.mark.parametrize(
    "edit, line",
    [
        (lambda c: c.update(rounds="many"), "rounds: must be an integer, got 'many'"),
        (lambda c: c.update(roundz=c.pop("rounds")), "roundz: unknown key; did you mean rounds?"),
        (lambda c: c.update(colour="red"), "colour: unknown key (allowed: sweep, rounds,"),
        (
            lambda c: c["algorithms"].update(fediterhtt={}),
            "algorithms.fediterhtt: unknown algorithm; did you mean fediterht?",
        ),
        (lambda c: c["grid"].update(stepsize=[-1.0]), "grid.stepsize[0]: must be > 0"),
        (lambda c: c["grid"].update(stepsize=[]), "grid.stepsize: empty list"),
        (
            lambda c: c["algorithms"].update(distiht={"local_steps": []}),
            "algorithms.distiht.local_steps: empty list",
        ),
        (lambda c: c["datasets"]["lin"]["data"].update(kind="csv"), "datasets.lin.data.kind:"),
        (
            lambda c: c["grid"].update(sparsity=[400]),  # the data have 40 and 60 features
            "grid.sparsity: 400 is larger than the dimension 40 of dataset lin (",
        ),
        (
            lambda c: c["algorithms"].update(fedht={"sparsity": [50]}),
            "algorithms.fedht.sparsity: 50 is larger than the dimension 40 of dataset lin",
        ),
        (_libsvm_missing, "datasets.lin.data.path: no such file: no/such/file.svm"),
    ],
)
def test_a_mistake_is_one_line_before_anything_runs(tmp_path, edit, line):
    cfg = yaml.safe_load(yaml.safe_dump(TINY))
    edit(cfg)
    path = write_config(tmp_path, cfg)
    # (a dry run: a real run plans the same way, see the next test)
    proc = snakemake(tmp_path, "-n", "--configfile", str(path), check=False)
    assert proc.returncode != 0
    assert mistake_lines(proc) == [mistake_lines(proc)[0]], "more than one line"
    message = mistake_lines(proc)[0]
    assert message.startswith(f"fedsparse: invalid sweep config ({path}): "), message
    assert line in message, message
    assert not (tmp_path / "results").exists()


def test_bad_data_found_in_the_data_job_is_one_line_in_the_log_snakemake_names(tmp_path):
    (tmp_path / "rows.svm").write_text("1 qid:1 1:0.5\n-1 2:0.25\n")  # a row without a client
    cfg = yaml.safe_load(yaml.safe_dump(TINY))
    cfg["datasets"] = {"svm": {"data": {"kind": "libsvm", "path": "rows.svm"}}}
    cfg["grid"]["sparsity"] = [1]
    proc = snakemake(tmp_path, "--configfile", str(write_config(tmp_path, cfg)), check=False)
    assert proc.returncode != 0
    from fedsparse.sweep import plan_sweep

    # named as the data set's build, by the digest of its spec
    digest = plan_sweep(cfg).data_digest("svm")
    log = tmp_path / f"results/tiny/logs/data/svm.{digest}.log"
    assert str(log.relative_to(tmp_path)) in proc.stdout + proc.stderr  # the log it names
    errors = [line for line in log.read_text().splitlines() if " ERROR " in line]
    assert len(errors) == 1, log.read_text()
    assert "rows.svm: 1 of 2 rows have no qid:<client> field" in errors[0]
    assert "Traceback" not in log.read_text()
    assert not (tmp_path / "results/tiny/data/svm").exists()
    assert not (tmp_path / f"results/tiny/data/svm.{digest}").exists()
    assert not (tmp_path / "results/tiny/store").exists()


def test_malformed_yaml_fails_before_anything_runs(tmp_path):
    path = tmp_path / "sweep.yaml"
    path.write_text("sweep: x\nrounds: [1\n")
    proc = snakemake(tmp_path, "--configfile", str(path), check=False)
    assert proc.returncode != 0 and "not valid JSON or YAML" in proc.stderr
    assert not (tmp_path / "results").exists()
    # Snakemake reads --configfile itself, before the workflow can speak: fedsparse check
    # names the line
    check = subprocess.run(
        [sys.executable, "-m", "fedsparse.cli", "check", str(path)], capture_output=True, text=True
    )
    assert check.returncode == 2 and check.stdout == ""
    assert check.stderr.count("\n") == 1 and f"{path}, line 3" in check.stderr, check.stderr


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """The tiny sweep, run once from start to finish."""
    workdir = tmp_path_factory.mktemp("uninterrupted")
    start = time.monotonic()
    proc = snakemake(workdir, "--configfile", str(write_config(workdir, TINY)))
    (workdir / "console.txt").write_text(proc.stdout + proc.stderr)
    (workdir / "console.seconds").write_text(str(time.monotonic() - start))
    return workdir


# Snakemake's lines before a sweep's jobs run, which the workflow cannot quiet: the profile
# in use, the file system, "Building DAG of jobs...", the shell, the cores, the thread
# scaling, the conda note and the job stats table (a title, two header lines, a line per
# rule, the total, a blank line)
SNAKEMAKE_PREAMBLE = 7 + 3 + 9 + 2


def test_the_console_is_a_line_per_progress_interval_between_a_start_and_an_end(finished):
    lines = (finished / "console.txt").read_text().splitlines()
    seconds = float((finished / "console.seconds").read_text())
    first = next(i for i, line in enumerate(lines) if line.startswith("sweep tiny"))
    assert first <= SNAKEMAKE_PREAMBLE and "Job stats:" in lines[:first], lines
    ours = lines[first:]
    # no job box, shell command, job's run line or step count: the sweep's lines only
    assert all(line.startswith(("sweep tiny", "report: ")) for line in ours), ours
    start, progress, end = ours[:2], ours[2:-2], ours[-2:]
    logs = "sweep tiny: job logs in results/tiny/logs, Snakemake's messages in "
    assert start[0].startswith(logs)
    assert start[1] == "sweep tiny: 40 runs in 4 shards, 0 done before; a progress line every 30s"
    # one line per 30 s interval at most, and the final count when the runs are done
    assert 1 <= len(progress) <= seconds // 30 + 1, ours
    assert re.fullmatch(r"sweep tiny: 40/40 runs done \(100 %\), .* 0 diverged", progress[-1])
    assert re.fullmatch(r"sweep tiny done in \w+: 40 runs, 0 diverged, no job failed", end[0])
    assert end[1] == f"report: {finished / 'results/tiny/report/index.html'}"


def test_a_failing_config_leaves_another_sweeps_results_byte_identical(finished, tmp_path):
    shutil.copytree(finished, tmp_path, dirs_exist_ok=True)
    before = file_digests(tmp_path / "results")
    cfg = yaml.safe_load(yaml.safe_dump(TINY))
    cfg["grid"]["sparsity"] = [400]  # more than the data's 40 and 60 features
    proc = snakemake(tmp_path, "--configfile", str(write_config(tmp_path, cfg)), check=False)
    assert proc.returncode != 0 and "grid.sparsity: 400" in proc.stderr
    assert file_digests(tmp_path / "results") == before


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
        for p in (finished / "results/tiny/traces").rglob("*.parquet")
    }
    assert "dataset=lin/algorithm=fedht" in parts and len(parts) == 6
    report = finished / "results/tiny/report/index.html"
    assert report.is_file() and "<img" in report.with_name("runs.html").read_text()
    # every finished run stays in the run store, and no run's lock is left behind
    store = finished / "results/tiny/store"
    assert {p.stem for p in store.glob("*/*.parquet")} == set(runs.run_id)
    assert not list(store.glob("*/*.lock"))
    assert not list((finished / "results/tiny/shards").glob("*.parts"))
    (log,) = (finished / "results/tiny/logs/shards").glob("lin--0000.*.log")  # .<digest>.log
    log = log.read_text()
    (n,) = re.findall(r"shard lin--0000: (\d+) runs", log)  # cut by cost: its share of 20
    assert re.search(rf"{n}/{n} runs done .* about 0s left", log)
    # the sweep's own progress line, in runs, is in Snakemake's log
    (snakemake_log,) = (finished / ".snakemake/log").glob("*.snakemake.log")
    assert "sweep tiny: 40/40 runs done (100 %)" in snakemake_log.read_text()
    # the sweep was planned once: every shard read its runs from the plan file
    assert (finished / "results/tiny/shards/plan.parquet").is_file()
    logs = "".join(p.read_text() for p in (finished / "results/tiny/logs/shards").glob("*.log"))
    assert "planning the sweep here" not in logs


def test_rerun_of_a_finished_sweep_does_nothing(finished):
    proc = snakemake(finished, "-n", "--configfile", str(finished / "sweep.yaml"))
    assert "Nothing to be done" in proc.stdout + proc.stderr


def stored_runs(workdir: Path) -> dict[str, tuple[int, int]]:
    """run id -> (inode, mtime) of each run in the run store: a rewritten run changes both."""
    store = workdir / "results/tiny/store"
    return {p.stem: (p.stat().st_ino, p.stat().st_mtime_ns) for p in store.glob("*/*.parquet")}


def start_sweep(workdir: Path, path: Path, *args: str) -> subprocess.Popen:
    cmd = snakemake_command(workdir, "--cores", "1", "--configfile", str(path), *args)
    return subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )


def wait_for_stored_runs(workdir: Path, n: int, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while len(stored_runs(workdir)) < n:
        if time.monotonic() > deadline:
            pytest.fail(f"fewer than {n} runs finished within {timeout} s")
        time.sleep(0.02)


def resume(workdir: Path, path: Path, killed: int) -> subprocess.CompletedProcess:
    """The README's command, as a user types it again after a kill: no --unlock, and no
    --rerun-incomplete (profiles/default has it). It removes the killed Snakemake's lock."""
    cmd = snakemake_command(workdir, "--cores", "2", "--configfile", str(path))
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    removed = f"fedsparse: removed a stale Snakemake lock left by pid {killed} (killed)"
    assert removed in proc.stderr
    return proc


def test_kill_minus_nine_mid_shard_then_resume_gives_identical_results(finished, tmp_path):
    path = write_config(tmp_path, yaml.safe_load(yaml.safe_dump(TINY)))
    proc = start_sweep(tmp_path, path)
    try:
        wait_for_stored_runs(tmp_path, 3)
    finally:
        kill_tree(proc.pid)  # snakemake and every job it started, as a crash would
        proc.wait()
    before = stored_runs(tmp_path)
    shards = tmp_path / "results/tiny/shards"
    # the kill landed inside a shard: runs stored, some shard's output not written
    assert before and len(list(shards.glob("*.runs.parquet"))) < 4
    # a hard kill leaves Snakemake's lock behind (SIGINT/SIGTERM would remove it)
    assert list((tmp_path / ".snakemake/locks").glob("*.lock"))
    resume(tmp_path, path, killed=proc.pid)
    after = stored_runs(tmp_path)
    assert {k: after[k] for k in before} == before, "a finished run was computed again"
    # the resumed shard's log holds the interrupted attempt, then the rerun
    logs = [p.read_text() for p in (tmp_path / "results/tiny/logs/shards").glob("*.log")]
    resumed = [t for t in logs if "---- attempt 2 on " in t]
    assert resumed
    assert any(re.search(r"---- attempt 1 .*runs done.*---- attempt 2", t, re.S) for t in resumed)
    a_traces, a_runs = results_of(finished)
    b_traces, b_runs = results_of(tmp_path)
    pd.testing.assert_frame_equal(a_traces, b_traces)
    pd.testing.assert_frame_equal(a_runs.drop(columns="sweep"), b_runs.drop(columns="sweep"))


@pytest.mark.parametrize("orphans", ["finish first", "still run"])
def test_kill_minus_nine_of_snakemake_alone_redoes_no_finished_run(finished, tmp_path, orphans):
    """The cluster's common interruption: the main Snakemake dies, its jobs run on as
    orphans; the rerun treats their outputs as incomplete and reruns them. Resumed while an
    orphan still runs, the rerun's job waits for its shard lock, then finds its runs stored."""
    path = write_config(tmp_path, yaml.safe_load(yaml.safe_dump(TINY)))
    proc = start_sweep(tmp_path, path)
    jobs: list[int] = []
    try:
        wait_for_stored_runs(tmp_path, 3)
        jobs = process_tree(proc.pid)[1:]
        os.kill(proc.pid, signal.SIGKILL)  # Snakemake alone: its job runs on
        proc.wait()
        if orphans == "finish first":
            deadline = time.monotonic() + 300
            while any(Path(f"/proc/{pid}").exists() for pid in jobs):
                assert time.monotonic() < deadline, "the orphaned job did not finish"
                time.sleep(0.05)
        before = stored_runs(tmp_path)
        assert list((tmp_path / ".snakemake/locks").glob("*.lock"))
        still_running = [pid for pid in jobs if Path(f"/proc/{pid}").exists()]
        assert bool(still_running) == (orphans == "still run")
        resume(tmp_path, path, killed=proc.pid)
    finally:
        for pid in [proc.pid, *jobs]:
            kill_tree(pid)
    # Snakemake reran the orphan's job (its reason is in Snakemake's log, not the console)
    assert "Forced execution" in snakemake_messages(tmp_path)
    if orphans == "finish first":
        assert len(before) > 3  # the orphan went on storing runs after Snakemake died
    after = stored_runs(tmp_path)
    assert {k: after[k] for k in before} == before, "a finished run was computed again"
    logs = [p.read_text() for p in (tmp_path / "results/tiny/logs/shards").glob("*.log")]
    computed = sum(int(n) for t in logs for n in re.findall(r"computed (\d+) runs?\b", t))
    assert computed <= 40  # the orphan and the rerun never computed one run twice
    a_traces, a_runs = results_of(finished)
    b_traces, b_runs = results_of(tmp_path)
    pd.testing.assert_frame_equal(a_traces, b_traces)
    pd.testing.assert_frame_equal(a_runs.drop(columns="sweep"), b_runs.drop(columns="sweep"))


def test_a_second_snakemake_on_a_running_sweeps_folder_refuses(finished, tmp_path):
    """Two Snakemake processes really running on one working folder: the lock of the live one
    is never taken for a stale one; the second stops with Snakemake's refusal, naming the
    first, and the first finishes the sweep."""
    path = write_config(tmp_path, yaml.safe_load(yaml.safe_dump(TINY)))
    first = start_sweep(tmp_path, path)
    try:
        wait_for_stored_runs(tmp_path, 1)  # past its lock: running jobs
        locks = sorted((tmp_path / ".snakemake/locks").glob("*.lock"))
        assert locks
        cmd = snakemake_command(tmp_path, "--cores", "2", "--configfile", str(path))
        second = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        assert first.poll() is None, "the first sweep ended before the second started"
        assert sorted((tmp_path / ".snakemake/locks").glob("*.lock")) == locks
        assert first.wait(timeout=600) == 0
    finally:
        kill_tree(first.pid)
    assert second.returncode != 0
    assert "LockException" in second.stderr or "cannot be locked" in second.stderr
    hint = f"another Snakemake may hold the lock on this folder (pid {first.pid} on host"
    assert hint in second.stderr and "removed a stale" not in second.stderr
    a_traces, a_runs = results_of(finished)
    b_traces, b_runs = results_of(tmp_path)
    pd.testing.assert_frame_equal(a_traces, b_traces)
    pd.testing.assert_frame_equal(a_runs.drop(columns="sweep"), b_runs.drop(columns="sweep"))
    # the first one, gone, left no lock and no record of itself
    assert not list((tmp_path / ".snakemake").glob("locks/*.lock"))
    assert not list((tmp_path / ".snakemake").glob("fedsparse-owners/*"))


def test_two_snakemake_processes_on_one_results_folder_compute_each_run_once(finished, tmp_path):
    """Two Snakemake processes (their own working folders, so their own locks) writing one
    results folder: every run is computed by one of them, and both end with the results."""
    results = tmp_path / "shared-results"
    procs = []
    for name in ("a", "b"):
        cfg = {**yaml.safe_load(yaml.safe_dump(TINY)), "results": str(results)}
        procs.append(start_sweep(tmp_path / name, write_config(tmp_path / name, cfg)))
    for proc in procs:
        assert proc.wait(timeout=600) == 0
    logs = [p.read_text() for p in (results / "logs/shards").glob("*.log")]
    computed = sum(int(n) for t in logs for n in re.findall(r"computed (\d+) runs?\b", t))
    runs = pd.read_parquet(results / "runs.parquet")
    assert computed == len(runs) == 40 and len(list((results / "store").glob("*/*.parquet"))) == 40
    a_traces, a_runs = results_of(finished)
    b_traces = read_traces_of(results)
    pd.testing.assert_frame_equal(a_traces, b_traces)


def test_a_sweep_edit_that_moves_runs_between_shards_recomputes_none(finished, tmp_path):
    shutil.copytree(finished, tmp_path, dirs_exist_ok=True)  # results and Snakemake's records
    before = stored_runs(tmp_path)
    copied = set((tmp_path / "results/tiny/logs/shards").glob("*.log"))  # the first sweep's
    cfg = {**yaml.safe_load(yaml.safe_dump(TINY)), "shard_size": 5}  # 12 per shard before
    snakemake(tmp_path, "--configfile", str(write_config(tmp_path, cfg)))
    assert stored_runs(tmp_path) == before
    # the rerun's shards' logs (named, as their files, by the digest of their runs)
    logs = "".join(
        p.read_text() for p in set((tmp_path / "results/tiny/logs/shards").glob("*.log")) - copied
    )
    # 5 a shard, grown to 6 by whole cohorts (the 2 step sizes of a configuration and seed)
    assert "computed" not in logs and "(6 already done)" in logs
    a_traces, a_runs = results_of(finished)
    b_traces, b_runs = results_of(tmp_path)
    pd.testing.assert_frame_equal(a_traces, b_traces)
    pd.testing.assert_frame_equal(a_runs.drop(columns="sweep"), b_runs.drop(columns="sweep"))


def computed_runs(results: Path) -> int:
    """Runs the shard jobs computed, from their logs (a copied log holds the first sweep's)."""
    logs = [p.read_text() for p in (results / "logs/shards").glob("*.log")]
    return sum(int(n) for t in logs for n in re.findall(r"computed (\d+) runs?\b", t))


def test_a_copied_results_folder_without_snakemakes_records_is_complete_exactly_when_it_is(
    finished, tmp_path
):
    """Whether a sweep is done is read from its results folder. A copy of a finished
    sweep's results/ (no .snakemake/) is done for the same sweep; with one step size edited,
    exactly the edited plan's new runs are computed, and the results hold its runs only."""
    from fedsparse.sweep import plan_sweep

    shutil.copytree(finished / "results", tmp_path / "results")  # modification times kept
    path = write_config(tmp_path, yaml.safe_load(yaml.safe_dump(TINY)))
    proc = snakemake(tmp_path, "-n", "--configfile", str(path))
    assert "Nothing to be done" in proc.stdout + proc.stderr

    cfg = yaml.safe_load(yaml.safe_dump(TINY))
    cfg["grid"]["stepsize"] = [0.01, 0.002]  # was [0.01, 0.001]
    path = write_config(tmp_path, cfg)
    before, computed_before = stored_runs(tmp_path), computed_runs(tmp_path / "results/tiny")
    new = {r.run_id for r in plan_sweep(cfg).runs} - set(before)
    assert len(new) == 20  # half of the 40 runs
    counts = job_counts(snakemake(tmp_path, "-n", "--configfile", str(path)).stdout)
    assert counts["run_shard"] == 4 and counts["aggregate"] == 1
    snakemake(tmp_path, "--configfile", str(path))
    after = stored_runs(tmp_path)
    assert set(after) - set(before) == new  # the edited plan's new runs, and no other
    assert {k: after[k] for k in before} == before  # nothing computed again
    assert computed_runs(tmp_path / "results/tiny") - computed_before == len(new)
    runs = pd.read_parquet(tmp_path / "results/tiny/runs.parquet")
    assert sorted(runs.run_id) == sorted(r.run_id for r in plan_sweep(cfg).runs)
    assert set(read_traces_of(tmp_path / "results/tiny").run_id) == set(runs.run_id)
    # only the plan's shard files are left (an earlier plan's are deleted; their runs stored)
    shards = tmp_path / "results/tiny/shards"
    assert len(list(shards.glob("*--*.runs.parquet"))) == 4
    shutil.rmtree(tmp_path / ".snakemake")
    proc = snakemake(tmp_path, "-n", "--configfile", str(path))
    assert "Nothing to be done" in proc.stdout + proc.stderr


def test_snakemake_report_builds(finished):
    out = finished / "snakemake-report.zip"
    snakemake(finished, "--configfile", str(finished / "sweep.yaml"), "--report", str(out))
    assert out.is_file() and out.stat().st_size > 10_000
    shutil.rmtree(finished / ".snakemake" / "report", ignore_errors=True)
