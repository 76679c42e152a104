"""The sweep's progress line: runs done of the plan's, from the run store."""

from __future__ import annotations

import re

from conftest import SMALL_LINEAR

from fedsparse.progress import SweepProgress, duration, stored_ids, sweep_progress
from fedsparse.shard import store_path
from fedsparse.sweep import plan_sweep

SWEEP = {
    "sweep": "p",
    "rounds": 10,
    "seeds": [0, 1, 2],
    "datasets": {"lin": {"data": dict(SMALL_LINEAR)}},
    "algorithms": ["fedht"],
    "grid": {"stepsize": [0.1, 0.01], "sparsity": [5]},
}


def finish(store, run_ids) -> None:
    for rid in run_ids:
        path = store_path(store, rid)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"")


def test_the_line_counts_the_plans_runs_in_the_store_and_estimates_the_rest(tmp_path):
    plan = plan_sweep(SWEEP)
    ids = [r.run_id for r in plan.runs]
    store = tmp_path / "store"
    finish(store, ids[:2] + ["0123456789abcdef"])  # a run of another sweep does not count
    assert sorted(stored_ids(store)) == sorted(ids[:2] + ["0123456789abcdef"])
    lines = []
    progress = SweepProgress(plan, store, tmp_path / "data", lines.append, every=3600)
    progress.start_thread()
    # before a run finished under this process: counts only (no forecast yet)
    assert lines[-1] == "sweep p: 2/6 runs done (33 %)", lines
    progress.tick()
    assert len(lines) == 1  # no new line while the count stands
    finish(store, ids[2:5])
    progress.tick()
    assert re.fullmatch(
        r"sweep p: 5/6 runs done \(83 %\), [\d.]+ runs/min, about \w+ left", lines[-1]
    ), lines
    finish(store, ids[5:])
    progress.stop()
    assert re.fullmatch(r"sweep p: 6/6 runs done \(100 %\), [\d.]+ runs/min", lines[-1]), lines


def test_no_progress_thread_for_progress_every_zero_or_no_runs(tmp_path):
    plan = plan_sweep(SWEEP)
    assert isinstance(sweep_progress(plan, SWEEP, tmp_path, print), SweepProgress)
    silent = sweep_progress(plan, {**SWEEP, "progress_every": 0}, tmp_path, print)
    assert not isinstance(silent, SweepProgress)
    silent.start_thread()
    silent.stop()


def test_durations_read_as_a_person_would_say_them():
    assert [duration(s) for s in (4.4, 65, 3600 + 7 * 60 + 5)] == ["4s", "1m05s", "1h07m"]
