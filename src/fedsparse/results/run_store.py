"""The run store: one Parquet file per finished run, kept by run id.

A results folder's store is :attr:`fedsparse.layout.Layout.store` (a shard run by hand may be
given another folder). This module names the files in it, and no other module writes, checks,
reads, locks, moves or lists the run files:

- ``<run_id[:2]>/<run_id>.parquet``: a finished run's trace, with its run summary (the runs
  table's row, JSON) and that summary's SHA-256 in the file metadata (:func:`store_path`: a
  two-character fan-out, so a million runs make 256 folders of ~4,000 files);
- ``<run_id[:2]>/<run_id>.lock``: the lock of the process computing the run (:func:`run_lock`);
- ``<run_id[:2]>/<run_id>.parquet.bad-<UTC time>``: a file that was found to be no finished
  run, moved aside (:func:`bad_store_path`); no reader takes it for a run, they read
  ``*.parquet``;
- ``checkpoints/<run_id>.ckpt``: the checkpoint of a run in progress (its path is
  :func:`fedsparse.layout.checkpoint_in`, its format :mod:`fedsparse.results.checkpoint`), deleted by
  the shard once the run is stored; :func:`checkpointed_rounds` says how far each one is.

What the store guarantees, to the processes that go through this module:

- A run's file appears whole or not at all: it is written beside its name and renamed over
  it (:func:`write_stored`), so a reader finds no file or a complete one; each of its pages
  is written with its CRC-32.
- Nothing deletes a run's file: a shard writes a run only where the store holds no file of
  it (checked holding the run's lock; only :func:`adopt_parts`, moving in the runs an older
  fedsparse kept elsewhere, replaces a file of the same run), and a file found to be no
  finished run is renamed aside, never deleted (:func:`move_aside`, one log line saying why),
  and its run computed again.
- A file counts as its run finished only when it is whole and is that run's, computed with
  this version's numerics: its footer reads as Parquet and holds a summary naming its run id,
  matching the summary's checksum where the file has one, and recording the numerics version
  its algorithm computes with today (:func:`check_footer`, a read of the last few KB: what a
  shard checks before it takes a run as done); its pages pass their checksums and its rows are
  that run's (:func:`read_stored`, the whole file: what a shard checks when it reads the run
  for its outputs). :func:`check_footer` says what the checks do not catch.
- A run whose file passes these checks is never computed again, by whichever attempt, shard or
  sweep config asks for it: a run's id hashes its config, not the sweep's label, and a shard
  computes only the runs the store does not hold.
- One process at a time computes a run: whoever holds the run's lock checks the store before
  computing it, and the lock file is deleted only once the run is stored, so a process that
  took the lock of a deleted lock file finds the run stored (:func:`run_lock`). The locks are
  ``flock`` locks of the processes sharing the folder.

What the progress line reads is cheaper and unchecked: :func:`stored_ids` lists every
``*.parquet`` file by its name, and :func:`unchecked_summary` reads a footer's summary as it
is (a file found bad later is moved aside, and so no longer listed).

Like a checkpoint, a store file is trusted as the folder is: only a results folder's own runs
write it.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import hashlib
import json
import logging
import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .checkpoint import read_header
from ..errors import one_line
from ..layout import CHECKPOINTS
from .numerics import UNRECORDED, numerics_version
from .schema import write_parquet_atomic

log = logging.getLogger("fedsparse.results.run_store")

RUN_SUFFIX = ".parquet"  # a finished run's file: <run_id[:2]>/<run_id>.parquet
LOCK_SUFFIX = ".lock"  # the lock of the process computing it, beside it
FAN_OUT = 2  # characters of the run id naming its folder

# A store file's metadata: its run's summary (the runs.parquet row, JSON) and, since
# store files are checked, the SHA-256 of those bytes (files of earlier versions lack it).
SUMMARY_KEY = b"fedsparse_run_summary"
SUMMARY_SHA256_KEY = b"fedsparse_run_summary_sha256"


# ---------------------------------------------------------------------------- names
def store_path(store: str | Path, run_id: str) -> Path:
    """Where the run store ``store`` keeps the finished run ``run_id``."""
    return Path(store) / run_id[:FAN_OUT] / f"{run_id}{RUN_SUFFIX}"


def lock_path(store: str | Path, run_id: str) -> Path:
    """The lock file of the process computing ``run_id`` (:func:`run_lock`)."""
    return store_path(store, run_id).with_suffix(LOCK_SUFFIX)


def bad_store_path(path: Path, when: dt.datetime) -> Path:
    """Where a store file that is no finished run is moved aside (beside it, under a name
    no reader of the store takes for a run: they read ``*.parquet``)."""
    return path.with_name(f"{path.name}.bad-{when:%Y%m%dT%H%M%S.%fZ}")


# ---------------------------------------------------------------------------- writing
def write_stored(store: str | Path, run_id: str, trace: pa.Table, summary: dict[str, Any]) -> None:
    """Put a finished run's trace in the store, atomically.

    The file's metadata holds ``summary`` (JSON) and its SHA-256, and each page is written with
    its CRC-32 (checked by :func:`read_stored`). An existing file of the run is replaced.

    Parameters
    ----------
    store
        The run store's folder.
    run_id
        The run's id; the file is :func:`store_path` ``(store, run_id)``.
    trace
        The run's trace rows (the trace schema's metadata is added to its own).
    summary
        The run's row of the runs table, JSON-serialisable.
    """
    # (built from the algorithm registry: imported where a run is written, so that the
    # store's readers, the Snakemake process's progress line among them, load no algorithm)
    from .schema import TRACE_SCHEMA

    raw = json.dumps(summary).encode()
    meta = {SUMMARY_KEY: raw, SUMMARY_SHA256_KEY: hashlib.sha256(raw).hexdigest().encode()}
    table = trace.replace_schema_metadata({**TRACE_SCHEMA.metadata, **meta})
    write_parquet_atomic(table, store_path(store, run_id), write_page_checksum=True)


def adopt_parts(parts: Path, store: Path) -> None:
    """Move the finished runs of an interrupted shard of an older fedsparse (which kept them
    in ``<traces output>.parts/``) into the store (checked as any store file when read)."""
    if not parts.is_dir():
        return
    for part in parts.glob(f"*{RUN_SUFFIX}"):
        target = store_path(store, part.stem)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(part, target)
    shutil.rmtree(parts, ignore_errors=True)


# ---------------------------------------------------------------------------- checking, reading
class BadStoreFile(Exception):
    """A store file that is not its run's finished trace; the message says why."""


def check_footer(path: Path, run_id: str) -> dict[str, Any]:
    """The run summary of the store file ``path`` of ``run_id``, from its footer alone (a
    read of its last few KB), or BadStoreFile; FileNotFoundError if there is none.

    Catches: a torn (truncated) file or one that is not Parquet (no footer), a file of
    another run (copied or renamed: the summary's run id), a summary whose bytes changed
    (its SHA-256, in files written since the check exists), a run computed with other
    numerics than its algorithm's today (:mod:`fedsparse.results.numerics`). Not caught here: damage
    to the data pages (caught by their checksums when the file is read whole, see
    :func:`read_stored`), or to the footer's other fields that leaves it readable.
    """
    try:
        meta = pq.read_metadata(path)
    except FileNotFoundError:
        raise
    except (pa.ArrowException, OSError) as exc:
        raise BadStoreFile(f"is not a whole Parquet file ({one_line(exc)})") from None
    return _checked_summary(meta.metadata or {}, run_id)


def read_stored(path: Path, run_id: str) -> tuple[pa.Table, dict[str, Any]]:
    """The trace and summary of the store file ``path`` of ``run_id``, read whole and
    checked (:func:`check_footer`, then each page's CRC-32 where the file has them: files
    of earlier versions do not, and damage to their pages is caught only where it makes
    them unreadable), or BadStoreFile; FileNotFoundError if there is none. One thread: a
    run's file is small, and after reading damaged pages without checksums pyarrow's
    threaded reader was seen, rarely, to abort the process at its exit."""
    try:
        table = pq.read_table(path, page_checksum_verification=True, use_threads=False)
    except FileNotFoundError:
        raise
    except (pa.ArrowException, OSError) as exc:
        raise BadStoreFile(f"cannot be read ({one_line(exc)})") from None
    summary = _checked_summary(table.schema.metadata or {}, run_id)
    ids = table.column("run_id").unique().to_pylist() if "run_id" in table.column_names else []
    if ids != [run_id]:
        raise BadStoreFile(f"holds the trace rows of runs {ids[:3]}, not of {run_id}")
    return table, summary


def _checked_summary(metadata: dict[bytes, bytes], run_id: str) -> dict[str, Any]:
    raw = metadata.get(SUMMARY_KEY)
    if raw is None:
        raise BadStoreFile("has no run summary in its metadata")
    digest = metadata.get(SUMMARY_SHA256_KEY)
    if digest is not None and hashlib.sha256(raw).hexdigest().encode() != digest:
        raise BadStoreFile("has a run summary that does not match its checksum")
    try:
        summary = json.loads(raw)
    except ValueError:
        raise BadStoreFile("has a run summary that is not JSON") from None
    stored = summary.get("run_id") if isinstance(summary, dict) else None
    if stored != run_id:
        raise BadStoreFile(f"holds run {stored}, not {run_id}")
    found, wanted = (
        summary.get("numerics") or UNRECORDED,
        numerics_version(_stored_config(summary)),
    )
    if wanted is not None and found != wanted:
        raise BadStoreFile(f"was computed with numerics {found}, not this version's {wanted}")
    return summary


def _stored_config(summary: dict[str, Any]) -> dict[str, Any]:
    """The run config a stored run's summary records (its algorithm alone if that is lost)."""
    try:
        cfg = json.loads(summary.get("config_json") or "")
    except (TypeError, ValueError):
        cfg = None
    return cfg if isinstance(cfg, dict) else {"algorithm": summary.get("algorithm")}


def unchecked_summary(store: str | Path, run_id: str) -> Any:
    """The summary the footer of ``run_id``'s file holds, unchecked (``{}`` if it holds
    none): a cheap read for who only counts, the progress line. OSError for a file that is
    not there or not Parquet, ValueError for one whose summary is not JSON."""
    meta = pq.read_schema(store_path(store, run_id)).metadata or {}
    return json.loads(meta.get(SUMMARY_KEY, b"{}"))


def stored_summary(store: str | Path, run_id: str) -> dict[str, Any] | None:
    """The summary of ``run_id`` if the store holds it finished, by its footer
    (:func:`check_footer`); None if it holds no file of it or one that is not (left in place:
    moving it aside is for the holder of the run's lock, :func:`holds_finished`)."""
    try:
        return check_footer(store_path(store, run_id), run_id)
    except (BadStoreFile, FileNotFoundError):
        return None


def is_stored(store: str | Path, run_id: str) -> bool:
    """Whether the store holds ``run_id`` finished, by its footer (:func:`stored_summary`)."""
    return stored_summary(store, run_id) is not None


def holds_finished(store: Path, run_id: str, shard: str) -> bool:
    """Whether the store holds ``run_id`` finished; a file there that is not is moved aside.

    Call it holding the run's lock (:func:`run_lock`), so that no other process writes the
    file meanwhile.

    Parameters
    ----------
    store
        The run store's folder.
    run_id
        The run's id.
    shard
        The shard asking, named by the log line of a file moved aside.

    Returns
    -------
    bool
        True if the run's file passes :func:`check_footer`; False if there is none, or there
        was one that did not (then renamed by :func:`move_aside`, never deleted).
    """
    path = store_path(store, run_id)
    try:
        check_footer(path, run_id)
    except FileNotFoundError:
        return False
    except BadStoreFile as exc:
        move_aside(path, exc, shard)
        return False
    return True


def move_aside(path: Path, why: BadStoreFile, shard: str) -> None:
    """Rename a store file that is no finished run to its :func:`bad_store_path`, kept.

    Logs one warning naming ``shard``, the file, ``why`` and the new name; does nothing if the
    file is gone meanwhile.

    Parameters
    ----------
    path
        The store file.
    why
        What is wrong with it (its message is logged).
    shard
        The shard that found it.
    """
    target = bad_store_path(path, dt.datetime.now(dt.UTC))
    try:
        os.replace(path, target)
    except FileNotFoundError:  # gone meanwhile: nothing to keep
        return
    log.warning(
        "shard %s: store file %s %s; moved aside to %s, the run is computed again",
        shard,
        path,
        why,
        target.name,
    )


# ---------------------------------------------------------------------------- locks
@contextlib.contextmanager
def run_lock(store: Path, run_id: str, wait: bool) -> Iterator[bool]:
    """Hold ``run_id``'s lock (an exclusive ``flock`` on its lock file) for the ``with`` block.

    Whoever holds it checks the store before computing the run; the lock file is deleted on
    leaving only if the run's file is then in the store, so a process that locked a deleted
    lock file finds the run stored and never computes it a second time.

    Parameters
    ----------
    store
        The run store's folder.
    run_id
        The run's id; the lock file is :func:`lock_path` ``(store, run_id)`` (its folder is
        created).
    wait
        Block until the lock is free; false: give up at once if another process holds it.

    Yields
    ------
    bool
        True holding the lock; False (not held) if another process holds it and ``wait`` is
        false.
    """
    path = lock_path(store, run_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            if store_path(store, run_id).exists():
                path.unlink(missing_ok=True)


# ---------------------------------------------------------------------------- listing
def stored_ids(store: str | Path) -> np.ndarray:
    """The run ids of the store's run files (by name, unchecked), unsorted."""
    ids = []
    try:
        folders = list(os.scandir(store))
    except FileNotFoundError:
        return np.array([], dtype=str)
    for folder in folders:
        if folder.is_dir():
            ids += [
                e.name[: -len(RUN_SUFFIX)]
                for e in os.scandir(folder.path)
                if e.name.endswith(RUN_SUFFIX)
            ]
    return np.array(ids, dtype=str)


def checkpointed_rounds(store: str | Path) -> dict[str, int]:
    """Each run id held by a checkpoint in the run store, with the round it holds (a cohort's
    checkpoint holds every member's, at one round). A run's checkpoint goes once the run is
    stored; one of a killed run stays until its rerun, its rounds kept."""
    rounds: dict[str, int] = {}
    try:
        entries = list(os.scandir(Path(store) / CHECKPOINTS))
    except FileNotFoundError:
        return rounds
    for entry in entries:
        if not entry.name.endswith(".ckpt"):  # e.g. a write's temporary file
            continue
        header = read_header(entry.path)
        try:
            round_ = int(header["round"])
            for group in header["runs"]:
                for run_id in group:
                    rounds[str(run_id)] = round_
        except (TypeError, KeyError, ValueError):  # no header (being replaced): next time
            continue
    return rounds
