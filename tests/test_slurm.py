"""The workflow on a real (single-node) SLURM cluster through profiles/slurm.

The cluster is the one ``scripts/local-slurm`` starts on this machine (munge,
MariaDB, slurmdbd, slurmctld, slurmd; the node is this host at 127.0.0.1).
`.ci/run` installs its Debian packages; elsewhere these tests skip with the
reason. Every SLURM job costs tens of seconds of submission and status
polling, so the sweeps here are a handful of jobs each.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml
from conftest import kill_tree
from snakemake_helpers import (
    ROOT,
    TINY,
    results_dir,
    results_of,
    snakemake,
    snakemake_command,
    snakemake_messages,
    write_config,
)

pytestmark = pytest.mark.integration

LOCAL_SLURM = ROOT / "scripts" / "local-slurm"
SLURM_CONF = Path("/etc/slurm/slurm.conf")
# profiles/slurm, polling sooner than its cluster-friendly defaults: the test cluster is idle
SLURM_PROFILE = [
    "--profile",
    str(ROOT / "profiles" / "slurm"),
    "--slurm-init-seconds-before-status-checks",
    "2",
    "--seconds-between-status-checks",
    "3",
]


def _local_slurm(action: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(LOCAL_SLURM), action], capture_output=True, text=True, timeout=180)


@pytest.fixture(scope="module")
def slurm() -> None:
    """A running local SLURM cluster, started if needed; skip with the reason otherwise."""
    if shutil.which("sbatch") is None or shutil.which("slurmctld") is None:
        pytest.skip(
            "SLURM is not installed (apt-get install slurm-wlm slurmdbd munge mariadb-server; "
            ".ci/run does)"
        )
    if SLURM_CONF.exists() and "scripts/local-slurm" not in SLURM_CONF.read_text()[:200]:
        pytest.skip(f"{SLURM_CONF} belongs to another cluster; not submitting test jobs to it")
    if _local_slurm("status").returncode != 0:
        started = _local_slurm("start")
        if started.returncode != 0:
            reason = (started.stderr.strip().splitlines() or ["no output"])[-1]
            pytest.skip(f"could not start a local SLURM cluster: {reason}")


def snakemake_slurm(
    workdir: Path, *args: str, check: bool = True, **kw
) -> subprocess.CompletedProcess:
    proc = snakemake(workdir, *SLURM_PROFILE, *args, check=False, **kw)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"snakemake on SLURM failed ({proc.returncode}):\n{proc.stderr[-4000:]}"
            f"\n{_slurm_logs(workdir)}"
        )
    return proc


def _slurm_logs(workdir: Path) -> str:
    logs = sorted((workdir / ".snakemake" / "slurm_logs").rglob("*.log"))
    return "\n".join(f"--- {p}\n{p.read_text()[-1500:]}" for p in logs[-4:])


def _sacct_states(since: str) -> list[str]:
    out = subprocess.run(
        ["sacct", "-n", "-X", "-P", "-S", since, "-o", "JobName,State"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [line for line in out.splitlines() if line]


def test_quick_sweep_on_slurm_equals_a_local_run_bit_for_bit(slurm, tmp_path):
    since = time.strftime("%Y-%m-%dT%H:%M:%S")
    quick = yaml.safe_load((ROOT / "config" / "quick.yaml").read_text())
    on_cluster = tmp_path / "cluster"
    local = tmp_path / "local"
    snakemake_slurm(on_cluster, "--configfile", str(write_config(on_cluster, quick)))
    snakemake(local, "--configfile", str(write_config(local, quick)))

    # every data set and shard really went through SLURM, and finished there
    jobs = _sacct_states(since)
    n_jobs = len(quick["datasets"]) + len(
        list((results_dir(on_cluster) / "logs/shards").glob("*.log"))
    )
    assert len(jobs) == n_jobs, jobs
    assert all(j.endswith("|COMPLETED") for j in jobs), jobs
    c_traces, c_runs = results_of(on_cluster)
    l_traces, l_runs = results_of(local)
    assert len(c_runs) == 120
    pd.testing.assert_frame_equal(c_traces, l_traces)  # bit for bit: no tolerance
    pd.testing.assert_frame_equal(c_runs, l_runs)
    assert (results_dir(on_cluster) / "report/index.html").is_file()
    # the jobs cached their compiled kernels on node-local disk, not in the home directory
    node_local = Path(os.environ.get("TMPDIR", "/tmp")) / f"fedsparse-numba-{os.getuid()}"
    assert list(node_local.rglob("*.nbi")), f"no numba cache under {node_local}"


# Shards of about ten seconds (runs of one to two seconds), to be caught mid-run.
RESUME = {
    **TINY,
    "sweep": "resume",
    "rounds": 400,
    "shard_size": 8,
    "datasets": {
        "lin": {
            "data": {
                "kind": "synthetic",
                "task": "linear",
                "clients": 20,
                "samples_per_client": 50,
                "dim": 400,
                "support": 20,
            }
        }
    },
    "grid": {**TINY["grid"], "sparsity": [40], "batch_size": [10]},
}


def _running_jobs() -> dict[str, str]:
    """SLURM job id -> the plugin's job comment (``rule_<rule>_wildcards_<wildcards>``)."""
    out = subprocess.run(
        ["squeue", "-h", "-t", "RUNNING", "-o", "%i %k"], capture_output=True, text=True, check=True
    ).stdout
    return dict(line.split(" ", 1) for line in out.splitlines() if " " in line)


def test_killed_snakemake_and_cancelled_job_resume_to_identical_results(slurm, tmp_path):
    workdir = tmp_path / "cluster"
    path = write_config(workdir, RESUME)
    cmd = snakemake_command(workdir, *SLURM_PROFILE, "--configfile", str(path))
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    logs = results_dir(workdir) / "logs/shards"
    deadline = time.monotonic() + 300
    victim = None
    try:
        while time.monotonic() < deadline and victim is None:
            for log in logs.glob("*.log") if logs.exists() else []:
                if len(re.findall(r"runs done \|", log.read_text())) >= 2:
                    victim = log.stem  # a shard with two runs in the store
                    break
            time.sleep(0.1)
        if victim is None:
            pytest.fail(f"no shard progress on SLURM within 300 s\n{_slurm_logs(workdir)}")
    finally:
        kill_tree(proc.pid)  # the login-node process dies; its SLURM jobs run on
        proc.wait()
    # the plugin's comment holds the job's wildcards: the shard's name and digest (the log's)
    shard, digest = victim.rsplit(".", 1)
    job = [i for i, c in _running_jobs().items() if shard in c and c.endswith(digest)]
    assert job, f"the job of shard {victim} was not running when snakemake was killed"
    subprocess.run(["scancel", job[0]], check=True)
    finished_before = len(re.findall(r"runs done \|", (logs / f"{victim}.log").read_text()))

    snakemake(workdir, "--configfile", str(path), "--unlock")
    snakemake_slurm(workdir, "--configfile", str(path))  # the profile has --rerun-incomplete

    reference = tmp_path / "local"
    snakemake(reference, "--configfile", str(write_config(reference, RESUME)))
    a_traces, a_runs = results_of(reference)
    b_traces, b_runs = results_of(workdir)
    assert b_runs.run_id.is_unique and len(b_runs) == len(a_runs)  # nothing duplicated or lost
    pd.testing.assert_frame_equal(a_traces, b_traces)
    pd.testing.assert_frame_equal(a_runs, b_runs)
    # the cancelled shard's rerun (the last attempt in its log) kept the runs it had finished
    log = (results_dir(workdir) / f"logs/shards/{victim}.log").read_text()
    resumed = int(re.findall(r"\((\d+) already done\)", log)[-1])
    assert resumed >= finished_before >= 2, log


def test_optuna_workers_run_as_separate_jobs_and_reach_exactly_n_trials(slurm, tmp_path):
    from snakemake_helpers import TUNE

    cfg = {**TUNE, "optuna": {**TUNE["optuna"], "n_trials": 8, "n_workers": 2}}
    since = time.strftime("%Y-%m-%dT%H:%M:%S")
    snakemake_slurm(tmp_path, "--configfile", str(write_config(tmp_path, cfg)))
    jobs = _sacct_states(since)
    # make_data, two workers and the held-out re-runs were SLURM jobs; the study's creation
    # and export are local rules
    assert len(jobs) == 4 and all(j.endswith("|COMPLETED") for j in jobs), jobs
    # the executor's notes are in Snakemake's log (the console is the sweep's own lines)
    messages = snakemake_messages(tmp_path)
    submitted = re.findall(r"submitted with SLURM jobid \d+ \(log: \S*/rule_(\w+)/", messages)
    assert sorted(submitted) == ["make_data", "optuna_holdout", "optuna_worker", "optuna_worker"]
    runs = pd.read_parquet(results_dir(tmp_path) / "runs.parquet")
    trials = runs[runs.trial_state.isin(["COMPLETE", "PRUNED"])]
    assert trials.trial_number.nunique() == 8 and trials.run_id.is_unique
    # both workers took trials from the shared journal storage
    logs = sorted((results_dir(tmp_path) / "logs/optuna").rglob("worker-*.log"))
    assert len(logs) == 2 and all("trial" in p.read_text() for p in logs)


# One shard of sixteen runs of 3-8 s each on an idle core (minutes on a loaded machine):
# longer than the one-minute limit FEDSPARSE_RUNTIME_SCALE forces on its first attempt (SLURM
# ends a job 60-90 s after its start: slurmctld checks limits every 30 s), short enough that
# the profile's three retries (limits of 2, 3 and 4 minutes) finish it.
OVERTIME = {
    **RESUME,
    "sweep": "overtime",
    "rounds": 40000,
    "seeds": list(range(8)),
    "shard_size": 16,
    "algorithms": {"fedht": {}},
    "grid": {**RESUME["grid"], "stepsize": [0.001], "local_steps": [2, 4]},
}


def _shard_jobs(since: str) -> list[tuple[str, int]]:
    """(state, time limit in minutes) of the shard jobs submitted since ``since``, in order."""
    out = subprocess.run(
        ["sacct", "-n", "-X", "-P", "-S", since, "-o", "JobID,State,TimelimitRaw,SubmitLine"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rows = [line.split("|", 3) for line in out.splitlines() if "rule_run_shard" in line]
    return [
        (state.split()[0], int(limit))
        for _, state, limit, _ in sorted(rows, key=lambda r: int(r[0]))
    ]


def test_a_shard_past_its_time_limit_finishes_through_retries_with_the_identical_trace(
    slurm, tmp_path
):
    from fedsparse.sweep.cost_learning import RUNTIME_SCALE_ENV

    since = time.strftime("%Y-%m-%dT%H:%M:%S")
    workdir = tmp_path / "cluster"
    path = write_config(workdir, OVERTIME)
    reference = tmp_path / "local"
    # the uninterrupted run on the other core meanwhile (no time limit, no SLURM)
    local = subprocess.Popen(
        snakemake_command(
            reference, "--cores", "1", "--configfile", str(write_config(reference, OVERTIME))
        ),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    # the cost model's estimate (a few seconds: 10 minutes, its floor) scaled to SLURM's
    # smallest limit, 1 minute; retries get 2, 3 and 4 minutes
    env = {**os.environ, RUNTIME_SCALE_ENV: "0.01"}
    snakemake_slurm(workdir, "--configfile", str(path), env=env, timeout=1800)
    _, err = local.communicate(timeout=900)
    assert local.returncode == 0, err[-4000:]

    jobs = _shard_jobs(since)
    states = [state for state, _ in jobs]
    assert states[0] == "TIMEOUT" and states[-1] == "COMPLETED", jobs
    assert set(states[:-1]) == {"TIMEOUT"}, jobs
    limits = [limit for _, limit in jobs]
    assert limits == list(range(1, len(jobs) + 1)), jobs  # 1 minute, then x attempt
    # the retry computed only the runs the store lacked
    (log,) = (results_dir(workdir) / "logs/shards").glob("*.log")
    resumed = [int(n) for n in re.findall(r"\((\d+) already done\)", log.read_text())]
    assert resumed[0] == 0 and resumed[-1] > 0, resumed
    a_traces, a_runs = results_of(reference)
    b_traces, b_runs = results_of(workdir)
    assert len(b_runs) == 16 and b_runs.run_id.is_unique
    pd.testing.assert_frame_equal(a_traces, b_traces)  # bit for bit
    pd.testing.assert_frame_equal(a_runs, b_runs)
