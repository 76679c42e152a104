"""The console of a sweep's Snakemake process: the lines a person reads.

Snakemake prints, per job, a box, its shell command (``None`` for a script), "Select jobs to
execute...", "Execute 1 jobs..." and a step count: thousands of lines on a large sweep, with
the sweep's one informative line buried. Once jobs are about to run (the workflow's
``onstart``), :class:`SweepConsole` keeps on Snakemake's console only

- its own lines: the start, the progress line (:mod:`fedsparse.pipeline.progress`) once per
  interval at most, and the end (where the report is, how many runs diverged);
- warnings and errors, among them Snakemake's note of each failed job, beside which the
  job itself prints its log's last lines (:func:`fedsparse.pipeline.steps.job`).

Snakemake's log file (``.snakemake/log/``) keeps every message: only the console's handler
is filtered. A dry run (no ``onstart``) and a cluster job's own Snakemake are untouched.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import Any

from ..layout import Layout
from ..wording import counted
from .progress import duration

__all__ = ["ConsoleFilter", "SweepConsole", "status_counts"]

OWN = "fedsparse_console"  # marks the records of the sweep's own lines
# Snakemake's console handler (snakemake.logging.LoggerManager._default_streamhandler)
SNAKEMAKE_CONSOLE = "DefaultStreamHandler"
JOB_ERRORS = {"job_error", "group_error"}  # snakemake_interface_logger_plugins LogEvent values


class ConsoleFilter(logging.Filter):
    """Passes the sweep's own lines, warnings and errors; counts failed jobs in ``counter``
    (any object with a ``failed_jobs`` attribute, the progress line's)."""

    def __init__(self, counter: Any = None):
        super().__init__()
        self.counter = counter
        self.failed_jobs = 0

    def filter(self, record: logging.LogRecord) -> bool:
        event = getattr(record, "event", None)
        if getattr(event, "value", event) in JOB_ERRORS:
            self.failed_jobs += 1
            if self.counter is not None:
                self.counter.failed_jobs = self.failed_jobs
            return True
        return record.levelno >= logging.WARNING or getattr(record, OWN, False)


class SweepConsole:
    """The workflow's console: built where the workflow is read, started in ``onstart``,
    ended in ``onsuccess`` or ``onerror`` (see the module docstring)."""

    def __init__(self, name: str, layout: Layout, logger: logging.Logger):
        self.name, self.layout, self.logger = name, layout, logger
        self.filter: ConsoleFilter | None = None
        self.started = time.monotonic()

    def say(self, line: str) -> None:
        """Log ``line`` as one of the sweep's own (it stays on the console)."""
        self.logger.info(line, extra={OWN: True})

    def start(self, progress: Any, snakemake_logs: list[str] | None = None) -> None:
        """Quiet Snakemake's console; say where the rest goes."""
        self.started = time.monotonic()
        self.filter = ConsoleFilter(progress)
        for handler in self.logger.handlers:
            if handler.get_name() == SNAKEMAKE_CONSOLE:
                handler.addFilter(self.filter)
        where = f"job logs in {self.layout.logs}"
        if snakemake_logs:
            where += f", Snakemake's messages in {', '.join(map(str, snakemake_logs))}"
        self.say(f"sweep {self.name}: {where}")

    def finished(self, progress: Any) -> None:
        """The end of a sweep whose jobs all succeeded: its runs and its report."""
        progress.stop()
        took = duration(time.monotonic() - self.started)
        self.say(f"sweep {self.name} done in {took}: {_runs_phrase(self.layout.runs)}")
        report = self.layout.report_html
        if Path(report).is_file():
            self.say(f"report: {os.path.abspath(report)}")

    def stopped(self, progress: Any) -> None:
        """The end of a sweep with failed jobs: how many, and how to go on."""
        progress.stop()
        failed = self.filter.failed_jobs if self.filter else 0
        took = duration(time.monotonic() - self.started)
        jobs = "an error (above)"
        if failed:
            logs = "its log" if failed == 1 else "their logs"
            jobs = f"{counted(failed, 'job')} failed (the last lines of {logs} above)"
        done = getattr(progress, "last", None)
        runs = f"; {done[0]} runs done, {progress.diverged} diverged" if done else ""
        self.say(f"sweep {self.name} stopped after {took}: {jobs}{runs}")
        self.say("fix the cause and run the same snakemake command: it resumes")


def status_counts(runs_path: str | Path) -> dict[str, int]:
    """Runs per status in a runs table (reads its status column only: cheap at a million
    runs); empty if there is no table."""
    if not Path(runs_path).is_file():
        return {}
    import duckdb

    with duckdb.connect() as db:
        rows = db.execute(
            "SELECT status, count(*) FROM read_parquet(?) GROUP BY status", [str(runs_path)]
        ).fetchall()
    return {str(status): int(n) for status, n in rows}


def _runs_phrase(runs_path: str | Path) -> str:
    counts = status_counts(runs_path)
    if not counts:
        return f"no runs table at {runs_path}"
    total = sum(counts.values())
    others = "".join(f", {n} {s}" for s, n in sorted(counts.items()) if s not in ("ok", "diverged"))
    return f"{counted(total, 'run')}, {counts.get('diverged', 0)} diverged{others}, no job failed"
