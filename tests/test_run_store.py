"""The run store's files, without a shard: their names, checks, locks and listing
(tests/test_shard_runner.py runs shards on it)."""

from __future__ import annotations

import logging

import pyarrow as pa
import pytest

from fedsparse.layout import checkpoint_in
from fedsparse.results.run_store import (
    BadStoreFile,
    check_footer,
    holds_finished,
    is_stored,
    lock_path,
    read_stored,
    run_lock,
    store_path,
    stored_ids,
    stored_summary,
    unchecked_summary,
    write_stored,
)

RUN = "3fa0" + "0" * 12
OTHER = "77ab" + "1" * 12


def trace(run_id: str) -> pa.Table:
    return pa.table({"run_id": [run_id, run_id], "round": [0, 1]})


def test_a_run_is_stored_under_its_ids_first_two_characters(tmp_path):
    assert store_path(tmp_path, RUN) == tmp_path / "3f" / f"{RUN}.parquet"
    assert lock_path(tmp_path, RUN) == tmp_path / "3f" / f"{RUN}.lock"


def test_a_written_run_reads_back_checked(tmp_path):
    summary = {"run_id": RUN, "status": "ok"}
    write_stored(tmp_path, RUN, trace(RUN), summary)
    assert check_footer(store_path(tmp_path, RUN), RUN) == summary
    table, read = read_stored(store_path(tmp_path, RUN), RUN)
    assert read == summary and table.column("round").to_pylist() == [0, 1]
    assert stored_summary(tmp_path, RUN) == summary and is_stored(tmp_path, RUN)
    assert unchecked_summary(tmp_path, RUN) == summary
    assert [p.name for p in tmp_path.rglob("*")] == ["3f", f"{RUN}.parquet"]  # no temporary


def test_a_file_that_is_no_finished_run_is_not_stored_and_moved_aside_by_the_locks_holder(
    tmp_path, caplog
):
    write_stored(tmp_path, RUN, trace(RUN), {"run_id": RUN})
    store_path(tmp_path, OTHER).parent.mkdir()
    store_path(tmp_path, RUN).rename(store_path(tmp_path, OTHER))  # another run's file
    with pytest.raises(BadStoreFile, match=f"holds run {RUN}, not {OTHER}"):
        check_footer(store_path(tmp_path, OTHER), OTHER)
    assert stored_summary(tmp_path, OTHER) is None and not is_stored(tmp_path, OTHER)
    assert store_path(tmp_path, OTHER).exists()  # a look leaves it in place
    with caplog.at_level(logging.WARNING):
        assert not holds_finished(tmp_path, OTHER, "lin--0000")
    assert not store_path(tmp_path, OTHER).exists()
    (aside,) = store_path(tmp_path, OTHER).parent.glob(f"{OTHER}.parquet.bad-*")
    assert f"shard lin--0000: store file {store_path(tmp_path, OTHER)} holds run" in caplog.text
    assert caplog.text.rstrip().endswith(f"moved aside to {aside.name}, the run is computed again")
    assert not holds_finished(tmp_path, RUN, "lin--0000")  # none there: nothing to move


def test_a_torn_file_is_no_finished_run(tmp_path):
    write_stored(tmp_path, RUN, trace(RUN), {"run_id": RUN})
    path = store_path(tmp_path, RUN)
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(BadStoreFile, match="is not a whole Parquet file"):
        check_footer(path, RUN)
    with pytest.raises(FileNotFoundError):
        check_footer(store_path(tmp_path, OTHER), OTHER)


def test_a_runs_lock_is_one_processs_and_goes_once_the_run_is_stored(tmp_path):
    with run_lock(tmp_path, RUN, wait=False) as mine:
        assert mine and lock_path(tmp_path, RUN).exists()
        with run_lock(tmp_path, RUN, wait=False) as also:  # another open file: another holder
            assert not also
    assert lock_path(tmp_path, RUN).exists()  # not stored: the lock file stays
    with run_lock(tmp_path, RUN, wait=True) as mine:
        assert mine
        write_stored(tmp_path, RUN, trace(RUN), {"run_id": RUN})
    assert not lock_path(tmp_path, RUN).exists()


def test_the_listing_names_the_run_files_only(tmp_path):
    write_stored(tmp_path, RUN, trace(RUN), {"run_id": RUN})
    write_stored(tmp_path, OTHER, trace(OTHER), {"run_id": RUN})  # bad, listed all the same
    lock_path(tmp_path, RUN).touch()
    store_path(tmp_path, RUN).with_name(f"{RUN}.parquet.bad-20260101T000000.000000Z").touch()
    checkpoint_in(tmp_path, RUN).parent.mkdir()
    checkpoint_in(tmp_path, RUN).touch()
    assert sorted(stored_ids(tmp_path)) == [RUN, OTHER]
    assert stored_ids(tmp_path / "none").size == 0
