"""The sweep's own progress line, printed by the main Snakemake process.

Snakemake counts jobs ("4 of 57 steps"), and shards differ in cost by orders of magnitude,
so its percentage misleads. This counts runs: the plan's runs found in the run store, the
rate since the first run finished, the time left, and the runs that diverged and the jobs
that failed since the sweep started::

    sweep quick: 96/120 runs done (80 %), 41.3 runs/min, about 35s left, 2 diverged

Long runs are counted as they go: a run whose checkpoint (:mod:`fedsparse.results.checkpoint`, every
``checkpoint_minutes`` of its computation) is in the store counts as part-done by the rounds
it holds, so a sweep of a few hour-long runs says where it stands before any run ends::

    sweep gs-authors-fig4: 0/4 runs done (0 %), 2 part-done (84 % of their rounds), 0 diverged

The time left is the plan's cost model (:mod:`fedsparse.sweep.cost`) over the work not done (the
runs not done, less the part-done runs' rounds), divided by the pace of work (estimated
seconds done per wall second), smoothed exponentially over about ten progress intervals
(:class:`SmoothedRate`): runs finish in bursts and the cost model misjudges some runs, so the
last interval's pace alone swings the forecast by a factor of two.

A daemon thread of the Snakemake process scans the store every ``every`` seconds (a
directory listing: 256 folders, cheap next to the runs; each new run's status comes from
its file's footer; each checkpoint's round from its header line) and logs a line when the
count changed: one line per interval at most.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ..defaults import SWEEP_DEFAULTS, sweep_default
from ..layout import Layout, dataset_in
from ..results.run_store import checkpointed_rounds, stored_ids, unchecked_summary
from ..sweep.cost import RUN_OVERHEAD_S, known_shape, run_seconds
from ..wording import counted

__all__ = [
    "DEFAULT_EVERY",
    "SmoothedRate",
    "SweepProgress",
    "duration",
    "sweep_progress",
]

DEFAULT_EVERY = SWEEP_DEFAULTS["progress_every"]  # seconds between progress lines
SMOOTHING_INTERVALS = 10  # the pace's memory, in progress intervals


class SmoothedRate:
    """A rate of work (units per second) from cumulative readings, exponentially smoothed
    in time: a reading ``dt`` seconds after the last moves the rate towards that interval's
    rate by ``1 - exp(-dt / tau)``, so a burst or a lull of one interval moves it little
    and a lasting change of pace takes over within a few ``tau``. The first interval's rate
    is the start; :attr:`rate` is None before it."""

    def __init__(self, tau: float):
        self.tau = tau
        self.rate: float | None = None
        self._last: tuple[float, float] | None = None

    def update(self, now: float, work: float) -> float | None:
        """Take the work done by ``now`` (cumulative); return the smoothed rate."""
        if self._last is None:
            self._last = (now, work)
            return None
        then, before = self._last
        dt = now - then
        if dt <= 0:
            return self.rate
        recent = (work - before) / dt
        if self.rate is None:
            self.rate = recent
        else:
            self.rate += (1 - math.exp(-dt / self.tau)) * (recent - self.rate)
        self._last = (now, work)
        return self.rate

    def time_left(self, work_left: float) -> float | None:
        """Seconds to do ``work_left`` at the smoothed rate (None before a rate, or at 0)."""
        if not self.rate or self.rate <= 0:
            return None
        return work_left / self.rate


class SweepProgress:
    """Runs done of the plan's, from the run store; see the module docstring.

    ``plan`` is a :class:`fedsparse.sweep.Plan`; ``data_root`` the folder of the built data
    sets (their shapes refine the cost model once they exist); ``emit`` takes each line.
    """

    def __init__(
        self,
        plan: Any,
        store: str | Path,
        data_root: str | Path,
        emit: Callable[[str], None] | None = None,
        every: float = DEFAULT_EVERY,
    ):
        self.plan, self.name, self.every = plan, plan.name, every
        self.store, self.data_root = Path(store), Path(data_root)
        self.emit = emit or logging.getLogger("fedsparse.progress").info
        self.last: tuple[int, int] | None = None
        self.failed_jobs = 0  # counted by fedsparse.pipeline.console from Snakemake's job errors
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def begin(self) -> None:
        """Take the plan's run ids and costs and the store's count at the sweep's start
        (not at construction: every Snakemake process builds one, few of them run jobs)."""
        runs = self.plan.runs
        order = np.argsort([r.run_id for r in runs])
        self.ids = np.array([runs[i].run_id for i in order], dtype=str)
        self.cost = self._costs(self.plan, self.data_root)[order]
        self.rounds = np.array([max(int(runs[i].config.get("rounds", 0)), 1) for i in order])
        self.start = time.monotonic()
        self.done_at_start = self._done()
        # (when, done, work) when work was first seen done after the start
        self.first: tuple[float, np.ndarray, float] | None = None
        self.work_at_start = self._work(self.done_at_start, self._part_done(self.done_at_start))
        self.pace = SmoothedRate(SMOOTHING_INTERVALS * self.every)
        self.seen = self.done_at_start.copy()  # runs whose status was read (or done before)
        self.diverged = 0  # of the runs finished since the start

    def start_line(self) -> str:
        """What the sweep is about to do: its runs, shards and what is done already."""
        n, total = int(self.done_at_start.sum()), self.ids.size
        shards = counted(len(self.plan.shards), "shard")
        return (
            f"sweep {self.name}: {counted(total, 'run')} in {shards}, {n} done before; "
            f"a progress line every {duration(self.every)}"
        )

    @staticmethod
    def _costs(plan: Any, data_root: Path) -> np.ndarray:
        """Estimated seconds of each run, in ``plan.runs`` order; a run on a data set whose
        shape is not known yet (not built) counts as the mean of the others (as 1 s when
        no shape is known: the runs then count equally)."""
        out = []
        for shard in plan.shards.values():
            ds = shard[0].dataset
            entry = plan.datasets[ds]
            build = dataset_in(data_root, ds, plan.data_digest(ds))  # its runs' build
            shape = known_shape(entry["data"], build, entry.get("partition", "natural"))
            for run in shard:
                seconds = np.nan
                if shape is not None:  # a time sibling costs only its trace's writing
                    seconds = (  # a time sibling writes its trace; a cohort's member joins
                        RUN_OVERHEAD_S
                        if run.sibling
                        else run_seconds(run.config, shape, member=run.cohort)
                    )
                out.append(seconds)
        cost = np.array(out, dtype=np.float64)
        known = ~np.isnan(cost)
        cost[~known] = cost[known].mean() if known.any() else 1.0
        return cost

    def _done(self) -> np.ndarray:
        return np.isin(self.ids, stored_ids(self.store), assume_unique=False)

    def _part_done(self, done: np.ndarray) -> np.ndarray:
        """Each run's fraction of its rounds held by a checkpoint (0: none, or done)."""
        held = np.zeros(self.ids.size)
        found = checkpointed_rounds(self.store)
        if found:  # self.ids is sorted: find the few checkpointed ids, never loop over the plan
            keys = np.array(list(found), dtype=str)
            at = np.minimum(np.searchsorted(self.ids, keys), self.ids.size - 1)
            mine = self.ids[at] == keys  # a checkpoint of another sweep's runs does not count
            held[at[mine]] = np.array(list(found.values()), dtype=np.float64)[mine]
        fraction = np.minimum(held / self.rounds, 1.0)
        fraction[done] = 0.0
        return fraction

    def _work(self, done: np.ndarray, part: np.ndarray) -> float:
        """Work done, in the cost model's estimated seconds (its scale errors cancel out)."""
        return float(self.cost[done].sum() + (self.cost * part).sum())

    def line(self) -> str:
        """The progress line as of now."""
        done = self._done()
        now = time.monotonic()
        n, total = int(done.sum()), self.ids.size
        part = self._part_done(done)
        work = self._work(done, part)
        self._read_statuses(done)
        text = f"sweep {self.name}: {n}/{total} runs done ({100 * n / max(total, 1):.0f} %)"
        if part.any():
            share = (part * self.rounds).sum() / self.rounds[part > 0].sum()
            text += f", {(part > 0).sum()} part-done ({100 * share:.0f} % of their rounds)"
        new, elapsed = done & ~self.done_at_start, now - self.start
        if self.first is None and work > self.work_at_start:
            # the sweep's start-up (data sets built, kernels compiled) is over once runs
            # finish or checkpoint: the pace is measured from here on
            self.first = (now, done, work)
            self.pace.update(now, 0.0)
        elif self.first is not None and work > self.first[2]:
            self.pace.update(now, work - self.first[2])
        if self.first is not None and (done & ~self.first[1]).any():
            new, elapsed = done & ~self.first[1], now - self.first[0]
        if new.any() and elapsed > 0:
            text += f", {new.sum() / elapsed * 60:.1f} runs/min"
        if n < total and (new.any() or part.any()):
            left = self.pace.time_left(float(self.cost[~done].sum()) - float(self.cost @ part))
            text += f", about {duration(left)} left" if left is not None else ""
        # no time left before a pace is measured: the cost model alone is sized for cluster
        # time limits (generous by design, fedsparse.sweep.cost), not for a forecast
        text += f", {self.diverged} diverged"
        if self.failed_jobs:
            text += f", {counted(self.failed_jobs, 'job')} failed"
        return text

    def _read_statuses(self, done: np.ndarray) -> None:
        """Count the diverged among the runs stored since the last line (each file's
        footer holds its summary: one small read per new run, never the trace)."""
        for run_id in self.ids[done & ~self.seen]:
            try:
                summary = unchecked_summary(self.store, run_id)
            except (OSError, ValueError):  # an older store entry, or a truncated file
                continue
            self.diverged += summary.get("status") == "diverged"
        self.seen |= done

    def _counts(self, done: np.ndarray) -> tuple[int, int, int]:
        """What a new line must differ in: runs done, checkpointed rounds, failed jobs."""
        return int(done.sum()), sum(checkpointed_rounds(self.store).values()), self.failed_jobs

    def tick(self) -> None:
        """Log the line if the count of runs, their checkpoints' rounds or the failed jobs
        changed since the last line."""
        n = self._counts(self._done())
        if n != self.last:
            self.last = n
            self.emit(self.line())

    def start_thread(self) -> None:
        def loop():
            while not self._stop.wait(self.every):
                try:
                    self.tick()
                except OSError:  # a store folder vanished mid-scan: try again next time
                    pass

        self.begin()
        self.emit(self.start_line())  # says the count: the next line is the first change
        self.last = self._counts(self.done_at_start)
        self._thread = threading.Thread(target=loop, name="fedsparse-progress", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread; log the final count if it changed since the last line."""
        if self._thread is not None:
            self._stop.set()
            self.tick()


class _Silent:
    """The progress of a sweep without grid runs (an Optuna sweep, or progress_every: 0)."""

    failed_jobs = 0

    def start_thread(self) -> None:
        pass

    def stop(self) -> None:
        pass


def sweep_progress(
    plan: Any, sweep: dict[str, Any], results: str | Path, emit: Callable[[str], None]
) -> SweepProgress | _Silent:
    """The workflow's progress reporter for a sweep's results folder.

    Built lazily: nothing is scanned until its thread starts.

    Parameters
    ----------
    plan
        The sweep's :class:`fedsparse.sweep.Plan` (or one read from its plan file).
    sweep
        The sweep config; its ``progress_every`` (seconds, default 30; 0: none) sets the pace.
    results
        The results folder; its run store is counted, its built data sets refine the estimates.
    emit
        Called with each progress line.

    Returns
    -------
    SweepProgress or _Silent
        A silent reporter (whose ``start_thread`` and ``stop`` do nothing) where the plan has
        no shards (an Optuna sweep) or ``progress_every`` is 0.
    """
    every = float(sweep_default(sweep, "progress_every"))
    if not plan.shards or every <= 0:
        return _Silent()
    layout = Layout(results)
    return SweepProgress(plan, layout.store, layout.data, emit, every)


def duration(seconds: float) -> str:
    """``42s``, ``3m05s``, ``2h07m``."""
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m"
