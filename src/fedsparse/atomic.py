"""Atomic writes: a reader sees the old file or directory, or the complete new one, never a part."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import shutil
import sys
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
    on error it is deleted (:func:`swap_in_directory`: a reader finds the old directory or the
    new one). ``mode``: the new directory's permissions (mkdtemp's 0o700 when None)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.tmp-", dir=path.parent))
    try:
        yield tmp
        if mode is not None:
            os.chmod(tmp, mode)
        swap_in_directory(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def swap_in_directory(new: str | Path, path: str | Path) -> None:
    """Put the directory ``new`` at ``path`` and delete the one there before (if any).

    Where the system can exchange two paths in one step (Linux's ``renameat2`` with
    ``RENAME_EXCHANGE``, on the local file systems that support it), a reader finds the old
    directory or the new one at every instant. Elsewhere the old one is renamed aside and the
    new one renamed in (put back if that fails): ``path`` is missing for the moment between
    the two renames, never partly written.
    """
    new, path = Path(new), Path(path)
    if not path.exists():
        os.replace(new, path)
        return
    if _exchange(new, path):
        shutil.rmtree(new, ignore_errors=True)  # the old directory, now at new's name
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


_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


def _renameat2():
    """libc's ``renameat2`` (glibc 2.28 and later), or None."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


_RENAMEAT2 = _renameat2()


def _exchange(a: Path, b: Path) -> bool:
    """Swap the paths ``a`` and ``b`` in one step; False where the system cannot (nothing
    changed then)."""
    if _RENAMEAT2 is None:
        return False
    a_b, b_b = os.fsencode(a), os.fsencode(b)
    if _RENAMEAT2(_AT_FDCWD, a_b, _AT_FDCWD, b_b, _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (22, 38, 95):  # EINVAL, ENOSYS, EOPNOTSUPP: not on this file system or kernel
        return False
    raise OSError(err, os.strerror(err), str(a), None, str(b))
