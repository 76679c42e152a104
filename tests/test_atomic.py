"""fedsparse.atomic: a reader sees the old file or directory or the complete new one."""

from __future__ import annotations

import os
import stat
import sys

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


def swaps_while_read(tmp_path, monkeypatch, exchange: bool) -> int:
    """How often a reader polling a folder found it missing while it was swapped 300 times."""
    import threading

    from fedsparse import atomic

    if not exchange:
        monkeypatch.setattr(atomic, "_RENAMEAT2", None)
    path = tmp_path / "traces"
    path.mkdir()
    missing, done = [0], threading.Event()

    def read():
        while not done.is_set():
            missing[0] += not path.is_dir()

    reader = threading.Thread(target=read)
    reader.start()
    try:
        for i in range(300):
            new = tmp_path / f".new{i}"
            new.mkdir()
            (new / "n").write_text(str(i))
            atomic.swap_in_directory(new, path)
    finally:
        done.set()
        reader.join()
    assert (path / "n").read_text() == "299" and sorted(os.listdir(tmp_path)) == ["traces"]
    return missing[0]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="renameat2 is Linux's")
def test_a_swapped_directory_is_never_missing_where_the_system_exchanges(tmp_path, monkeypatch):
    from fedsparse import atomic

    assert atomic._RENAMEAT2 is not None  # glibc 2.28+: the exchange is used
    assert swaps_while_read(tmp_path, monkeypatch, exchange=True) == 0


def test_without_the_exchange_the_swap_falls_back_to_two_renames(tmp_path, monkeypatch):
    swaps_while_read(tmp_path, monkeypatch, exchange=False)  # same result, old one deleted
