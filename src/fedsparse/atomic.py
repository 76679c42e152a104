"""Atomic writes: a reader sees the old file or directory, or the complete new one, never a part."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO


@contextmanager
def atomic_write(path: str | Path) -> Iterator[BinaryIO]:
    """Open a temporary file next to ``path`` for binary writing; on success flush it to
    disk and rename it over ``path`` (atomic on POSIX file systems), on error delete it."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


@contextmanager
def atomic_directory(path: str | Path, mode: int | None = None) -> Iterator[Path]:
    """A temporary directory next to ``path`` to fill; on success it replaces ``path`` whole,
    on error it is deleted. A previous ``path`` is renamed aside, the new one renamed in (put
    back if that fails) and the old one then deleted, so a reader finds the old directory or
    the new one. ``mode``: the new directory's permissions (mkdtemp's 0o700 when None)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.tmp-", dir=path.parent))
    try:
        yield tmp
        if mode is not None:
            os.chmod(tmp, mode)
        _swap_in(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _swap_in(new: Path, path: Path) -> None:
    if not path.exists():
        os.replace(new, path)
        return
    old = Path(tempfile.mkdtemp(prefix=f".{path.name}.old-", dir=path.parent))
    os.rmdir(old)  # keep the unique name, free it for the rename
    os.replace(path, old)
    try:
        os.replace(new, path)
    except BaseException:
        os.replace(old, path)
        raise
    shutil.rmtree(old, ignore_errors=True)
