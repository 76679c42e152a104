"""Stale Snakemake locks: a sweep killed with ``kill -9`` resumes with a plain ``snakemake``.

Snakemake (its default file persistence) locks a working folder by writing
``.snakemake/locks/<n>.input.lock`` and ``<n>.output.lock``: the files its DAG reads and writes.
A second Snakemake whose files overlap them refuses to start (``LockException``). Snakemake
deletes its locks when it exits, even on Ctrl-C or SIGTERM, but ``kill -9`` or a lost node
leaves them behind, and every later ``snakemake`` then refuses until ``--unlock``.

Snakemake records no owner of a lock, so the workflow does: the Snakefile, read by the main
Snakemake process before it takes its lock, calls :func:`resume_after_kill`, which writes
``.snakemake/fedsparse-owners/<host>-<pid>.json`` (host, pid, boot, the process's start time)
and deletes it when the process exits. A record still there whose process is gone was left by
a kill. Locks are removed only when every recorded owner is such a dead process on this host:

- an owner alive on this host (the same pid with the same start time, so a reused pid is not
  taken for it) may hold the lock: left alone, and Snakemake's refusal stands;
- an owner on another host (a shared file system) cannot be checked from here: left alone;
- a lock with no record at all (an older fedsparse, another workflow) is left alone.

The jobs of a killed Snakemake may still run as orphans; they hold no Snakemake lock, and
the rerun's job waits for the shard lock beside their outputs
(:mod:`fedsparse.pipeline.shard_runner`).
"""

from __future__ import annotations

import atexit
import json
import os
import socket
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path

from ..atomic import atomic_write

LOCKS = "locks"  # Snakemake's, inside .snakemake/
OWNERS = "fedsparse-owners"  # ours, beside it


def _boot_id() -> str | None:
    try:  # Linux: changes at every boot, when every process of the last one is gone
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return None


def _start_ticks(pid: int) -> int | None:
    """The start time of process ``pid`` since boot (Linux /proc), None where unknown."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # field 22 (starttime); the command name before ")" may hold spaces
    return int(stat.rsplit(")", 1)[1].split()[19])


def _pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


@dataclass(frozen=True)
class Owner:
    """The Snakemake process that runs the workflow in a working folder."""

    host: str
    pid: int
    started_at: str  # ISO time, for people
    boot_id: str | None = None
    start_ticks: int | None = None
    results: str | None = None  # the sweep's results folder, for people

    @classmethod
    def this_process(cls, results: str | Path | None = None) -> Owner:
        pid = os.getpid()
        return cls(
            host=socket.gethostname(),
            pid=pid,
            started_at=datetime.now().astimezone().isoformat(timespec="seconds"),
            boot_id=_boot_id(),
            start_ticks=_start_ticks(pid),
            results=None if results is None else str(results),
        )

    def is_alive(self) -> bool | None:
        """Whether the process still runs: None on another host (it cannot be checked)."""
        if self.host != socket.gethostname():
            return None
        if self.boot_id is not None and self.boot_id != _boot_id():
            return False  # the machine rebooted since
        if not _pid_exists(self.pid):
            return False
        ticks = _start_ticks(self.pid)
        # a pid that runs again but started at another time is a later process's
        return self.start_ticks is None or ticks is None or ticks == self.start_ticks

    def describe(self) -> str:
        where = f" on {self.results}" if self.results else ""
        return f"pid {self.pid} on host {self.host}, started {self.started_at}{where}"


def read_owners(snakemake_dir: Path) -> dict[Path, Owner | None]:
    """Every owner record in ``snakemake_dir``: None for one that cannot be read."""
    owners: dict[Path, Owner | None] = {}
    for path in sorted((snakemake_dir / OWNERS).glob("*.json")):
        try:
            owners[path] = Owner(**json.loads(path.read_text()))
        except FileNotFoundError:  # its process just exited
            continue
        except (OSError, ValueError, TypeError):
            owners[path] = None
    return owners


def remove_stale_locks(snakemake_dir: Path, log: Callable[[str], None]) -> bool:
    """Remove Snakemake's locks in ``snakemake_dir`` if every recorded owner is a dead process
    of this host (see the module's docstring), with their records; else leave them and log who
    may hold them. True if locks were removed."""
    locks = sorted((snakemake_dir / LOCKS).glob("*.lock"))
    owners = read_owners(snakemake_dir)
    alive = {path: o is None or o.is_alive() is not False for path, o in owners.items()}
    dead = [o for path, o in owners.items() if o is not None and not alive[path]]
    if any(alive.values()):
        # one of them may hold the lock: Snakemake refuses below if its files overlap
        if locks:
            for path, owner in owners.items():
                if alive[path]:
                    who = owner.describe() if owner else f"unreadable record {path}"
                    log(
                        f"fedsparse: another Snakemake may hold the lock on this folder "
                        f"({who}); if Snakemake refuses to start, wait for it or stop it"
                    )
        return False
    if locks and not dead:
        return False  # no record of who locked: Snakemake's own message (--unlock) stands
    for lock in locks:
        lock.unlink(missing_ok=True)
    for path in owners:
        path.unlink(missing_ok=True)
    if locks:
        pids = ", ".join(str(o.pid) for o in dead)
        log(f"fedsparse: removed a stale Snakemake lock left by pid {pids} (killed)")
    return bool(locks)


def record_owner(snakemake_dir: Path, owner: Owner) -> Path:
    """Write ``owner``'s record (atomically) and delete it when this process exits normally,
    which Snakemake's own exits do; a ``kill -9`` leaves it, as it leaves the lock."""
    # absolute: Snakemake changes back to the folder it was started in before it exits
    path = (snakemake_dir / OWNERS / f"{owner.host}-{owner.pid}.json").absolute()
    with atomic_write(path) as fh:
        fh.write(json.dumps(asdict(owner), indent=1).encode())
    atexit.register(path.unlink, missing_ok=True)
    return path


def resume_after_kill(
    snakemake_dir: str | Path, results: str | Path, log: Callable[[str], None]
) -> None:
    """In the main Snakemake process, before it locks the folder: remove a lock that a killed
    run left behind, then record this process as the folder's owner."""
    snakemake_dir = Path(snakemake_dir)
    remove_stale_locks(snakemake_dir, log)
    record_owner(snakemake_dir, Owner.this_process(results))
