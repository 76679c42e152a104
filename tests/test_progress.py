"""The sweep's progress line: runs done of the plan's, from the run store."""

from __future__ import annotations

import re

from conftest import SMALL_LINEAR

from fedsparse.layout import checkpoint_in
from fedsparse.pipeline.progress import SmoothedRate, SweepProgress, duration, sweep_progress
from fedsparse.results.checkpoint import Checkpoint, read_header
from fedsparse.results.run_store import checkpointed_rounds, store_path, stored_ids
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
    progress.failed_jobs = 1  # counted by fedsparse.pipeline.console from Snakemake's job errors
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


def checkpoint(store, run_groups, round_) -> None:
    """A checkpoint as a shard writes it (a cohort's: one file, every member's run id)."""
    first = run_groups[0][0]
    Checkpoint(checkpoint_in(store, first), run_groups, 60.0, "test").write(round_, {}, {})


def test_runs_in_progress_count_by_their_checkpoints_rounds(tmp_path):
    plan = plan_sweep(SWEEP)  # 10 rounds a run
    ids = [r.run_id for r in plan.runs]
    store = tmp_path / "store"
    lines = []
    progress = SweepProgress(plan, store, tmp_path / "data", lines.append, every=3600)
    progress.start_thread()
    checkpoint(store, [[ids[0]], [ids[1]]], 5)  # a cohort of two, half-way
    checkpoint(store, [["0123456789abcdef"], ["ffffffffffffffff"]], 9)  # another sweep's
    progress.tick()
    # progress before any run ends; no forecast from the first sight of it
    assert (
        lines[-1] == "sweep p: 0/6 runs done (0 %), 2 part-done (50 % of their rounds), 0 diverged"
    )
    progress.tick()
    assert len(lines) == 2  # no new line while the rounds stand
    checkpoint(store, [[ids[0]], [ids[1]]], 8)
    checkpoint(store, [[ids[2]]], 2)
    (checkpoint_in(store, ids[3]).parent / f".{ids[3]}.ckpt.123.tmp").write_bytes(b"torn")
    progress.tick()
    # (8 + 8 + 2) of 30 rounds; the pace since the first sight gives the time left
    assert re.fullmatch(
        r"sweep p: 0/6 runs done \(0 %\), 3 part-done \(60 % of their rounds\), about \w+ left, "
        r"0 diverged",
        lines[-1],
    ), lines
    finish(store, ids[:2])  # stored; a shard then removes the checkpoint, but a run done
    progress.tick()  # counts as done whatever checkpoint is left
    assert re.fullmatch(
        r"sweep p: 2/6 runs done \(33 %\), 1 part-done \(20 % of their rounds\), "
        r"[\d.]+ runs/min, about \w+ left, 0 diverged",
        lines[-1],
    ), lines
    assert checkpointed_rounds(store) == {
        ids[0]: 8,
        ids[1]: 8,
        ids[2]: 2,
        "0123456789abcdef": 9,
        "ffffffffffffffff": 9,
    }
    progress.stop()


def test_a_checkpoint_without_a_readable_header_is_no_progress(tmp_path):
    folder = checkpoint_in(tmp_path, "ab" * 8).parent
    folder.mkdir(parents=True)
    (folder / f"{'ab' * 8}.ckpt").write_bytes(b"fedsparse checkpoint 1\n{not json\n")
    (folder / f"{'cd' * 8}.ckpt").write_bytes(b"something else")
    assert checkpointed_rounds(tmp_path) == {}
    assert read_header(folder / f"{'ab' * 8}.ckpt") is None
