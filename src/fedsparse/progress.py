"""The sweep's own progress line, printed by the main Snakemake process.

Snakemake counts jobs ("4 of 57 steps"), and shards differ in cost by orders of magnitude,
so its percentage misleads. This counts runs: the plan's runs found in the run store, the
rate since the sweep started, and the time left from the plan's cost model
(:mod:`fedsparse.cost`), calibrated by the runs this process has seen finish::

    sweep quick: 96/120 runs done (80 %), 41.3 runs/min, about 35s left

A daemon thread of the Snakemake process scans the store every ``every`` seconds (a
directory listing: 256 folders, cheap next to the runs) and logs a line when the count
changed.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from .cost import RUN_OVERHEAD_S, known_shape, run_seconds
from .defaults import SWEEP_DEFAULTS, sweep_default
from .layout import Layout

__all__ = ["DEFAULT_EVERY", "SweepProgress", "duration", "stored_ids", "sweep_progress"]

DEFAULT_EVERY = SWEEP_DEFAULTS["progress_every"]  # seconds between progress lines


def stored_ids(store: str | Path) -> np.ndarray:
    """The run ids in a run store (``store/<id[:2]>/<run_id>.parquet``), unsorted."""
    ids = []
    try:
        folders = list(os.scandir(store))
    except FileNotFoundError:
        return np.array([], dtype=str)
    for folder in folders:
        if folder.is_dir():
            ids += [e.name[:-8] for e in os.scandir(folder.path) if e.name.endswith(".parquet")]
    return np.array(ids, dtype=str)


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
        self.last: int | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def begin(self) -> None:
        """Take the plan's run ids and costs and the store's count at the sweep's start
        (not at construction: every Snakemake process builds one, few of them run jobs)."""
        runs = self.plan.runs
        order = np.argsort([r.run_id for r in runs])
        self.ids = np.array([runs[i].run_id for i in order], dtype=str)
        self.cost = self._costs(self.plan, self.data_root)[order]
        self.start = time.monotonic()
        self.done_at_start = self._done()
        self.first: tuple[float, np.ndarray] | None = None  # (when, done) at the first finish

    @staticmethod
    def _costs(plan: Any, data_root: Path) -> np.ndarray:
        """Estimated seconds of each run, in ``plan.runs`` order; a run on a data set whose
        shape is not known yet (not built) counts as the mean of the others (as 1 s when
        no shape is known: the runs then count equally)."""
        out = []
        for shard in plan.shards.values():
            ds = shard[0].dataset
            shape = known_shape(plan.datasets[ds]["data"], data_root / ds)
            for run in shard:
                seconds = np.nan
                if shape is not None:  # a time sibling costs only its trace's writing
                    seconds = RUN_OVERHEAD_S if run.sibling else run_seconds(run.config, shape)
                out.append(seconds)
        cost = np.array(out, dtype=np.float64)
        known = ~np.isnan(cost)
        cost[~known] = cost[known].mean() if known.any() else 1.0
        return cost

    def _done(self) -> np.ndarray:
        return np.isin(self.ids, stored_ids(self.store), assume_unique=False)

    def line(self) -> str:
        """The progress line as of now."""
        done = self._done()
        n, total = int(done.sum()), self.ids.size
        elapsed = time.monotonic() - self.start
        new = done & ~self.done_at_start
        text = f"sweep {self.name}: {n}/{total} runs done ({100 * n / max(total, 1):.0f} %)"
        if new.any() and self.first is None:
            # the sweep's start-up (data sets built, kernels compiled) is over once runs
            # finish: the pace is measured from here on, when runs have finished since
            self.first = (time.monotonic(), done)
        if self.first is not None and (done & ~self.first[1]).any():
            new, elapsed = done & ~self.first[1], time.monotonic() - self.first[0]
        if new.any() and elapsed > 0:
            text += f", {new.sum() / elapsed * 60:.1f} runs/min"
            # seconds of wall time per estimated second, from the runs finished meanwhile
            pace = elapsed / self.cost[new].sum()
            left = self.cost[~done].sum() * pace
            text += f", about {duration(left)} left" if n < total else ""
        # no time left before a run has finished here: the cost model alone is sized for
        # cluster time limits (generous by design, fedsparse.cost), not for a forecast
        return text

    def tick(self) -> None:
        """Log the line if the count changed since the last one."""
        n = int(self._done().sum())
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
        self.tick()
        self._thread = threading.Thread(target=loop, name="fedsparse-progress", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread; log the final count if it changed since the last line."""
        if self._thread is not None:
            self._stop.set()
            self.tick()


class _Silent:
    """The progress of a sweep without grid runs (an Optuna sweep, or progress_every: 0)."""

    def start_thread(self) -> None:
        pass

    def stop(self) -> None:
        pass


def sweep_progress(
    plan: Any, sweep: dict[str, Any], results: str | Path, emit: Callable[[str], None]
) -> SweepProgress | _Silent:
    """The workflow's progress reporter: over ``results``/store, every ``progress_every``
    seconds of the sweep config (default 30; 0: none). Built lazily: nothing is scanned
    until the thread starts."""
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
