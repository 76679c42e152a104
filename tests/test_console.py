"""The console a person reads: Snakemake's chatter filtered out, a failed job's log tail,
the end lines of a sweep, counts in words."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from snakemake_interface_logger_plugins.common import LogEvent

from fedsparse.layout import Layout
from fedsparse.pipeline.console import OWN, ConsoleFilter, SweepConsole, status_counts
from fedsparse.pipeline.steps import FAILED_TAIL_LINES, job
from fedsparse.wording import counted


def record(msg: str, level: int = logging.INFO, **extra) -> logging.LogRecord:
    rec = logging.LogRecord("snakemake.logging", level, __file__, 1, msg, None, None)
    rec.__dict__.update(extra)
    return rec


class Counter:
    failed_jobs = 0


def test_the_console_keeps_the_sweeps_lines_errors_and_failed_jobs_only():
    counter = Counter()
    keep = ConsoleFilter(counter)
    assert keep.filter(record("sweep s: 3/9 runs done", **{OWN: True}))
    assert not keep.filter(record("Select jobs to execute..."))
    assert not keep.filter(record("None", event=LogEvent.SHELLCMD))
    assert not keep.filter(record("", event=LogEvent.JOB_INFO))
    assert not keep.filter(record("", event=LogEvent.PROGRESS))
    assert keep.filter(record("disk full", logging.WARNING))
    assert keep.filter(record("", logging.ERROR, event=LogEvent.JOB_ERROR))
    assert keep.filter(record("", logging.ERROR, event=LogEvent.GROUP_ERROR))
    assert keep.failed_jobs == 2 and counter.failed_jobs == 2


def test_a_failed_job_prints_its_logs_last_lines_and_only_them(tmp_path, capfd):
    log = tmp_path / "logs/shards/a.log"
    with pytest.raises(SystemExit), job(log):
        for i in range(30):
            logging.getLogger("fedsparse.shard").info("run %d done", i)
        raise ValueError("the kernel broke")
    err = capfd.readouterr().err
    assert err.startswith(f"{log} (last lines):\n")
    assert "ValueError: the kernel broke" in err and "run 29 done" in err
    assert "run 0 done" not in err  # the tail, not the whole log
    assert len(err.splitlines()) == FAILED_TAIL_LINES + 3  # the title and two rules
    assert "run 0 done" in log.read_text()


def test_a_jobs_lines_go_to_its_log_not_the_console(tmp_path, capfd):
    log = tmp_path / "a.log"
    with job(log):
        logging.getLogger("fedsparse.shard").info("shard a: 1/2 runs done")
    assert capfd.readouterr().err == ""
    assert "shard a: 1/2 runs done" in log.read_text()


JOB = """
import logging, sys, time
from pathlib import Path
from fedsparse.pipeline.steps import job
log, name, go = sys.argv[1], sys.argv[2], Path(sys.argv[3])
deadline = time.monotonic() + 120  # never an orphan, whatever the test does
with job(log):
    logging.getLogger("fedsparse.shard").info("%s: started", name)
    while not go.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    logging.getLogger("fedsparse.shard").info("%s: computed 3 runs", name)
"""


@pytest.mark.parametrize("last", ["first", "second"])
def test_a_log_deleted_by_another_snakemake_starting_the_same_job_ends_with_both_jobs_lines(
    tmp_path, last
):
    """Two Snakemake processes on one results folder run one shard's job: the second one's
    Snakemake deletes the log the first job is writing. Whichever job ends last, the log ends
    with every line of both."""
    log = tmp_path / "logs/shards/a.log"
    go = {name: tmp_path / f"go-{name}" for name in ("first", "second")}

    def start(name):
        return subprocess.Popen([sys.executable, "-c", JOB, str(log), name, str(go[name])])

    def wait_for(line):
        deadline = time.monotonic() + 60
        while line not in (log.read_text() if log.exists() else ""):
            assert time.monotonic() < deadline, f"no {line!r} in the log"
            time.sleep(0.01)

    jobs = {"first": start("first")}
    try:
        wait_for("first: started")
        log.unlink()  # what Snakemake does before it starts a job
        jobs["second"] = start("second")
        wait_for("second: started")
        for name in ["second", "first"] if last == "first" else ["first", "second"]:
            go[name].touch()
            assert jobs[name].wait(timeout=60) == 0
    finally:
        for proc in jobs.values():
            proc.kill()
    text = log.read_text()
    assert "first: computed 3 runs" in text and "second: computed 3 runs" in text
    assert text.index("first: started") < text.index("second: started")
    assert oct(log.stat().st_mode & 0o777) == oct(
        log.with_name(".a.log.attempts").stat().st_mode & 0o777
    )


def write_runs(path, statuses) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(
        pa.table({"run_id": [str(i) for i in range(len(statuses))], "status": statuses}), path
    )


def test_the_end_of_a_sweep_names_its_report_and_counts_diverged_runs(tmp_path):
    layout = Layout(tmp_path / "results")
    write_runs(layout.runs, ["ok", "diverged", "ok", "diverged", "ok"])
    assert status_counts(layout.runs) == {"ok": 3, "diverged": 2}
    assert status_counts(tmp_path / "none.parquet") == {}
    layout.report_html.parent.mkdir(parents=True)
    layout.report_html.write_text("<html>")
    logger = logging.getLogger("test_console.end")
    lines: list[str] = []
    console = SweepConsole("s", layout, logger)
    console.say = lines.append

    class Stopped:
        def stop(self):
            lines.append("(progress stopped)")

    console.finished(Stopped())
    assert lines[0] == "(progress stopped)"
    assert lines[1].startswith("sweep s done in ")
    assert lines[1].endswith(": 5 runs, 2 diverged, no job failed")
    assert lines[2] == f"report: {os.path.abspath(layout.report_html)}"


def test_counts_are_singular_for_one():
    assert [counted(n, "shard") for n in (0, 1, 2)] == ["0 shards", "1 shard", "2 shards"]
    assert counted(1, "study", "studies") == "1 study"
    assert counted(3, "study", "studies") == "3 studies"
