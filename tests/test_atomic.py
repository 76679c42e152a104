"""fedsparse.atomic: a reader sees the old file or directory or the complete new one."""

from __future__ import annotations

import os
import stat

import pytest

from fedsparse.atomic import atomic_directory, atomic_write


def test_atomic_write_replaces_and_leaves_nothing_on_error(tmp_path):
    path = tmp_path / "sub" / "f.bin"
    with atomic_write(path) as fh:
        fh.write(b"new")
    assert path.read_bytes() == b"new"
    with pytest.raises(RuntimeError), atomic_write(path) as fh:
        fh.write(b"half")
        raise RuntimeError("crash")
    assert path.read_bytes() == b"new" and os.listdir(path.parent) == ["f.bin"]


def test_atomic_directory_swaps_in_whole(tmp_path):
    path = tmp_path / "sub" / "d"
    with atomic_directory(path) as tmp:
        (tmp / "a").write_text("1")
        assert not path.exists()  # nothing visible while it is written
    assert sorted(os.listdir(path)) == ["a"]
    assert stat.S_IMODE(path.stat().st_mode) == 0o700  # mkdtemp's
    with atomic_directory(path, mode=0o755) as tmp:
        (tmp / "b").write_text("2")
        assert (path / "a").exists()  # the old one stays readable meanwhile
    assert sorted(os.listdir(path)) == ["b"] and stat.S_IMODE(path.stat().st_mode) == 0o755
    assert os.listdir(path.parent) == ["d"]  # the old one and the temporary are gone


def test_atomic_directory_keeps_the_old_one_on_error(tmp_path):
    path = tmp_path / "d"
    with atomic_directory(path) as tmp:
        (tmp / "a").write_text("1")
    with pytest.raises(RuntimeError), atomic_directory(path) as tmp:
        (tmp / "b").write_text("2")
        raise RuntimeError("crash")
    assert sorted(os.listdir(path)) == ["a"] and os.listdir(tmp_path) == ["d"]
