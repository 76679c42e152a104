"""fedsparse.pipeline.snakemake_lock: a killed Snakemake's lock goes, one a live one may hold
stays."""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from fedsparse.pipeline.snakemake_lock import (
    LOCKS,
    OWNERS,
    Owner,
    record_owner,
    remove_stale_locks,
    resume_after_kill,
)

LOCK_FILES = ("0.input.lock", "0.output.lock")


def locked_folder(tmp_path: Path, *owners: Owner) -> Path:
    """A .snakemake folder as a Snakemake run by ``owners`` leaves it: its locks and records."""
    snakemake_dir = tmp_path / ".snakemake"
    (snakemake_dir / LOCKS).mkdir(parents=True)
    for name in LOCK_FILES:
        (snakemake_dir / LOCKS / name).write_text("results/runs.parquet\n")
    for owner in owners:
        record_owner(snakemake_dir, owner)
    return snakemake_dir


def dead_pid() -> int:
    proc = subprocess.Popen(["sleep", "30"])
    proc.kill()
    proc.wait()  # reaped: the pid names no process now
    return proc.pid


def lock_files(snakemake_dir: Path) -> list[str]:
    return sorted(p.name for p in (snakemake_dir / LOCKS).glob("*.lock"))


def test_a_lock_whose_owner_was_killed_is_removed_with_one_line(tmp_path):
    pid = dead_pid()
    owner = dataclasses.replace(Owner.this_process("results"), pid=pid)
    snakemake_dir = locked_folder(tmp_path, owner)
    lines: list[str] = []
    assert remove_stale_locks(snakemake_dir, lines.append)
    assert lock_files(snakemake_dir) == [] and not list((snakemake_dir / OWNERS).iterdir())
    assert lines == [f"fedsparse: removed a stale Snakemake lock left by pid {pid} (killed)"]


def test_a_lock_a_live_owner_may_hold_stays_and_the_hint_names_it(tmp_path):
    me = Owner.this_process("results")
    snakemake_dir = locked_folder(tmp_path, me)
    lines: list[str] = []
    assert not remove_stale_locks(snakemake_dir, lines.append)
    assert lock_files(snakemake_dir) == sorted(LOCK_FILES)
    (line,) = lines
    assert f"pid {os.getpid()} on host {me.host}" in line and "wait for it or stop it" in line


def test_a_live_owner_keeps_the_lock_even_beside_a_dead_one(tmp_path):
    dead = dataclasses.replace(Owner.this_process(), pid=dead_pid())
    snakemake_dir = locked_folder(tmp_path, dead, Owner.this_process())
    assert not remove_stale_locks(snakemake_dir, lambda line: None)
    assert lock_files(snakemake_dir) == sorted(LOCK_FILES)
    # the dead one's record stays too: once the live one is gone, its lock can still be explained
    assert len(list((snakemake_dir / OWNERS).iterdir())) == 2


def test_an_owner_on_another_host_cannot_be_checked_so_its_lock_stays(tmp_path):
    other = dataclasses.replace(Owner.this_process(), host="another-node", pid=dead_pid())
    assert other.is_alive() is None
    snakemake_dir = locked_folder(tmp_path, other)
    lines: list[str] = []
    assert not remove_stale_locks(snakemake_dir, lines.append)
    assert lock_files(snakemake_dir) == sorted(LOCK_FILES) and "another-node" in lines[0]


def test_a_lock_no_record_explains_stays_silently(tmp_path):
    snakemake_dir = locked_folder(tmp_path)
    lines: list[str] = []
    assert not remove_stale_locks(snakemake_dir, lines.append)
    assert lock_files(snakemake_dir) == sorted(LOCK_FILES) and lines == []


def test_an_unreadable_record_counts_as_a_live_owner(tmp_path):
    snakemake_dir = locked_folder(tmp_path)
    (snakemake_dir / OWNERS).mkdir()
    (snakemake_dir / OWNERS / "x-1.json").write_text("{not json")
    lines: list[str] = []
    assert not remove_stale_locks(snakemake_dir, lines.append)
    assert lock_files(snakemake_dir) == sorted(LOCK_FILES) and "unreadable record" in lines[0]


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")
def test_a_reused_pid_or_a_reboot_is_not_taken_for_the_owner():
    me = Owner.this_process()
    assert me.is_alive() and me.start_ticks is not None
    assert dataclasses.replace(me, start_ticks=me.start_ticks + 1).is_alive() is False
    assert dataclasses.replace(me, boot_id="another-boot").is_alive() is False


def test_no_lock_only_dead_records_are_cleared(tmp_path):
    snakemake_dir = tmp_path / ".snakemake"
    record_owner(snakemake_dir, dataclasses.replace(Owner.this_process(), pid=dead_pid()))
    lines: list[str] = []
    assert not remove_stale_locks(snakemake_dir, lines.append)
    assert not list((snakemake_dir / OWNERS).iterdir()) and lines == []


CHILD = """
import os, sys, time
from fedsparse.pipeline.snakemake_lock import resume_after_kill
resume_after_kill(sys.argv[1], "results", print)
print("recorded", flush=True)
if sys.argv[2] == "wait":
    time.sleep(60)
"""


def test_the_record_goes_at_exit_and_stays_after_kill_minus_nine(tmp_path):
    snakemake_dir = tmp_path / ".snakemake"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    subprocess.run([sys.executable, "-c", CHILD, str(snakemake_dir), "exit"], env=env, check=True)
    assert not list((snakemake_dir / OWNERS).iterdir())  # a normal exit deletes its record
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(snakemake_dir), "wait"],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout.readline() == "recorded\n"
    (record,) = (snakemake_dir / OWNERS).iterdir()
    assert json.loads(record.read_text())["pid"] == child.pid
    (snakemake_dir / LOCKS).mkdir()
    (snakemake_dir / LOCKS / "0.output.lock").write_text("results/runs.parquet\n")
    lines: list[str] = []
    assert not remove_stale_locks(snakemake_dir, lines.append)  # it runs: the lock stays
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    child.stdout.close()
    assert record.exists()  # kill -9 runs no exit handler
    resume_after_kill(snakemake_dir, "results", lines.append)
    assert lines[-1] == (
        f"fedsparse: removed a stale Snakemake lock left by pid {child.pid} (killed)"
    )
    assert lock_files(snakemake_dir) == []
    # this process is now the recorded owner
    (record,) = (snakemake_dir / OWNERS).iterdir()
    assert json.loads(record.read_text())["pid"] == os.getpid()


def test_the_record_goes_at_exit_even_from_another_working_folder(tmp_path):
    """Snakemake changes back to the folder it was started in before it exits."""
    code = (
        "import os, sys; from fedsparse.pipeline.snakemake_lock import resume_after_kill; "
        "os.chdir(sys.argv[1]); resume_after_kill('.snakemake', 'results', print); os.chdir('/')"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    subprocess.run([sys.executable, "-c", code, str(tmp_path)], env=env, check=True)
    assert not list((tmp_path / ".snakemake" / OWNERS).iterdir())
