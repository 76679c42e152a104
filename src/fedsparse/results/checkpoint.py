"""Checkpoints within a run: a computation's whole state, written every few minutes of it.

A run (or a cohort, which checkpoints as one) writes, every ``checkpoint_minutes`` of its
computation, each member's algorithm state (:meth:`Algorithm.checkpoint_state`), the runner's
per-member state (trace rows so far, totals, simulated times, rounds waiting to be scored, the
round-0 objective, client totals, whether it ended) and the round reached, to one file, atomically
(:func:`fedsparse.atomic.atomic_write`). A run that finds its checkpoint continues from that
round, and its trace is the one it gives uninterrupted, bit for bit but for ``elapsed_s``.

The file: a magic line, a JSON header line (the code key, the run ids of each computation, the
round, the payload's length and SHA-256), then the payload, a pickle of every member's state in
one (objects the members share, e.g. a cohort's random streams, stay shared). The problem is
written by reference and bound again to the resuming run's. A file written by another code or
numerics version (:func:`code_key`), of other runs, or not whole is ignored with one log line, and
the run starts over; the header is checked before anything is unpickled.

A checkpoint is a pickle: like the run store, it is trusted as the folder is (only a results
folder's own runs write it, and only they read it).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import io
import json
import logging
import os
import pickle
import signal
import time
from functools import lru_cache
from pathlib import Path
from typing import Any

from .. import __version__
from ..atomic import atomic_write

log = logging.getLogger("fedsparse.results.checkpoint")

MAGIC = b"fedsparse checkpoint 1\n"
# test hook: "N" kills the process (SIGKILL) inside its Nth checkpoint write, half the payload
# written (tests/test_checkpoint.py proves a torn write costs nothing but the rounds since the last)
KILL_IN_WRITE = "FEDSPARSE_TEST_KILL_IN_CHECKPOINT_WRITE"
HEADER_LIMIT = 1 << 24  # bytes of a header line read_header reads at most (a cohort's run ids)


@lru_cache(maxsize=1)
def code_key() -> str:
    """What a checkpoint must have been written by to be resumed: this fedsparse version, the
    digest of its source (every module, the families' kernels included, as the numba cache's
    key digests the kernels: a checkpoint never outlives an edit) and numpy's and numba's
    versions (the numerics, and the random streams' pickled form)."""
    package = Path(__file__).resolve().parents[1]  # fedsparse, not this sub-package
    digest = hashlib.sha256()
    for source in sorted(package.rglob("*.py")):
        digest.update(str(source.relative_to(package)).encode() + b"\0" + source.read_bytes())
    versions = " ".join(f"{name} {importlib.metadata.version(name)}" for name in ("numpy", "numba"))
    return f"fedsparse {__version__} source {digest.hexdigest()[:16]} {versions}"


def read_header(path: str | Path) -> dict[str, Any] | None:
    """A checkpoint file's header (its ``runs`` and ``round``, see :meth:`Checkpoint.write`)
    without reading its payload, or None for a file that has none readable (e.g. one being
    replaced). For who asks how far a run in progress is: the sweep's progress line."""
    try:
        with open(path, "rb") as fh:
            if fh.read(len(MAGIC)) != MAGIC:
                return None
            header = json.loads(fh.readline(HEADER_LIMIT))
        return header if isinstance(header, dict) else None
    except (OSError, ValueError):
        return None


class _Pickler(pickle.Pickler):
    """Writes the ``shared`` objects (e.g. the problem, which holds the data) by name."""

    def __init__(self, file, shared: dict[str, Any]):
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.names = {id(obj): name for name, obj in shared.items()}

    def persistent_id(self, obj: Any) -> str | None:
        return self.names.get(id(obj))


class _Unpickler(pickle.Unpickler):
    def __init__(self, file, shared: dict[str, Any]):
        super().__init__(file)
        self.shared = shared

    def persistent_load(self, pid: str) -> Any:
        return self.shared[pid]


class Checkpoint:
    """The checkpoint of one computation (a run, or a cohort): where it lies, the run ids of
    each of its computations (a run with its time siblings), and how often it is written.

    ``every_s``: seconds of computation between writes (0: none written; one found is still
    resumed from). ``label``: how log lines name the computation (e.g. ``shard s001: run 3fa…``).
    """

    def __init__(self, path: str | Path, runs: list[list[str]], every_s: float, label: str):
        self.path = Path(path)
        self.runs = [list(group) for group in runs]
        self.every_s = float(every_s)
        self.label = label
        self.last = time.monotonic()
        self.writes = 0

    def start_clock(self) -> None:
        """Count the computation's time from now (after its kernels compiled and it set up)."""
        self.last = time.monotonic()

    def due(self) -> bool:
        return self.every_s > 0 and time.monotonic() - self.last >= self.every_s

    def write(self, round_: int, state: Any, shared: dict[str, Any]) -> None:
        """Write ``state`` as of round ``round_``, atomically (``atomic_write``).

        Parameters
        ----------
        round_
            The last round the state includes; a resumed run continues after it.
        state
            What to pickle: every member's state, in one (objects they share stay shared).
        shared
            Objects written by reference under their names (e.g. ``problem``, ``data``);
            :meth:`read` binds the resuming run's objects of those names in their place.
        """
        buffer = io.BytesIO()
        _Pickler(buffer, shared).dump(state)
        payload = buffer.getvalue()
        header = {
            "key": code_key(),
            "runs": self.runs,
            "round": round_,
            "bytes": len(payload),
            "sha256": hashlib.sha256(payload).hexdigest(),
        }
        self.writes += 1
        kill_at = os.environ.get(KILL_IN_WRITE)
        with atomic_write(self.path) as fh:
            fh.write(MAGIC + json.dumps(header).encode() + b"\n")
            if kill_at is not None and int(kill_at) == self.writes:
                fh.write(payload[: len(payload) // 2])
                fh.flush()
                os.kill(os.getpid(), signal.SIGKILL)
            fh.write(payload)
        self.last = time.monotonic()

    def read(self, shared: dict[str, Any]) -> tuple[int, Any] | None:
        """(round, state) of the checkpoint found, or None: none, or one that is not this
        computation's whole checkpoint by this code (one log line says why, the run starts
        over). ``shared``: the objects :meth:`write` wrote by name."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return None
        except OSError as exc:
            return self._ignored(f"cannot be read ({exc})")
        if not raw.startswith(MAGIC):
            return self._ignored("is not a fedsparse checkpoint")
        line, _, payload = raw[len(MAGIC) :].partition(b"\n")
        try:
            header = json.loads(line)
            key, runs, round_ = header["key"], header["runs"], int(header["round"])
            size, digest = int(header["bytes"]), header["sha256"]
        except (ValueError, KeyError, TypeError):
            return self._ignored("has no readable header")
        if key != code_key():
            return self._ignored(f"was written by another version ({key}; this is {code_key()})")
        if runs != self.runs:
            return self._ignored("is of other runs")
        if len(payload) != size or hashlib.sha256(payload).hexdigest() != digest:
            return self._ignored(f"is not whole ({len(payload)} of {size} bytes, or damaged)")
        try:
            state = _Unpickler(io.BytesIO(payload), shared).load()
        except Exception as exc:  # whatever a pickle that does not read back raises
            return self._ignored(f"does not read back ({type(exc).__name__}: {exc})")
        return round_, state

    def resumed(self, round_: int) -> None:
        log.info("%s: resumed from round %d (checkpoint %s)", self.label, round_, self.path)

    def _ignored(self, why: str) -> None:
        log.warning(
            "%s: checkpoint %s %s; ignored, the run starts over", self.label, self.path, why
        )
        return None

    def remove(self) -> None:
        """Delete the checkpoint, and the temporary files of writes that were killed."""
        self.path.unlink(missing_ok=True)
        for torn in self.path.parent.glob(f".{self.path.name}.*.tmp"):
            torn.unlink(missing_ok=True)
