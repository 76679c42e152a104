"""The sweep's progress line: runs done of the plan's, from the run store."""

from __future__ import annotations

import re

from conftest import SMALL_LINEAR

from fedsparse.progress import SmoothedRate, SweepProgress, duration, stored_ids, sweep_progress
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
    # the start: what the sweep holds; no count line until the count changes
    assert lines == ["sweep p: 6 runs in 1 shard, 2 done before; a progress line every 1h00m"]
    progress.tick()
    assert len(lines) == 1  # no new line while the count stands
    finish(store, ids[2:4])
    progress.tick()
    # the first runs finished here: a rate, no forecast before a pace is measured
    assert re.fullmatch(r"sweep p: 4/6 runs done \(67 %\), [\d.]+ runs/min, 0 diverged", lines[-1])
    finish(store, ids[4:5])
    progress.failed_jobs = 1  # counted by fedsparse.console from Snakemake's job errors
    progress.tick()
    assert re.fullmatch(
        r"sweep p: 5/6 runs done \(83 %\), [\d.]+ runs/min, about \w+ left, 0 diverged, "
        r"1 job failed",
        lines[-1],
    ), lines
    finish(store, ids[5:])
    progress.stop()
    assert re.fullmatch(
        r"sweep p: 6/6 runs done \(100 %\), [\d.]+ runs/min, 0 diverged, 1 job failed", lines[-1]
    ), lines


def test_no_progress_thread_for_progress_every_zero_or_no_runs(tmp_path):
    plan = plan_sweep(SWEEP)
    assert isinstance(sweep_progress(plan, SWEEP, tmp_path, print), SweepProgress)
    silent = sweep_progress(plan, {**SWEEP, "progress_every": 0}, tmp_path, print)
    assert not isinstance(silent, SweepProgress)
    silent.start_thread()
    silent.stop()


def test_durations_read_as_a_person_would_say_them():
    assert [duration(s) for s in (4.4, 65, 3600 + 7 * 60 + 5)] == ["4s", "1m05s", "1h07m"]


def test_the_smoothed_pace_rides_out_bursts_and_follows_a_lasting_change():
    # one unit of work a second, finished in bursts: every third 30 s interval does 90
    pace, work, interval_rates = SmoothedRate(tau=300), 0.0, []
    for i in range(1, 61):
        burst = 90.0 if i % 3 == 0 else 0.0
        work += burst
        pace.update(30.0 * i, work)
        interval_rates.append(burst / 30)
        if i >= 20:  # past the start, whose one interval is its first rate
            assert 0.75 < pace.rate < 1.3, (i, pace.rate)
    assert min(interval_rates) == 0 and max(interval_rates) == 3  # the last interval's swing
    # the time left for 1,800 units: half an hour, give or take a quarter
    assert 0.75 * 1800 < pace.time_left(1800) < 1.3 * 1800
    # the runs get twice as fast, for good: after 3 tau the pace is within 10 % of it
    t = 30.0 * 60
    for i in range(1, 31):
        work += 60.0
        pace.update(t + 30.0 * i, work)
    assert abs(pace.rate - 2.0) < 0.2, pace.rate


def test_no_time_left_before_a_pace():
    pace = SmoothedRate(tau=300)
    assert pace.time_left(100) is None
    assert pace.update(0.0, 0.0) is None and pace.time_left(100) is None
    assert pace.update(10.0, 0.0) == 0.0 and pace.time_left(100) is None  # nothing done yet
    assert pace.update(10.0, 5.0) == 0.0  # no time passed: the same rate
    assert pace.update(20.0, 10.0) > 0 and pace.time_left(100) > 0
