"""Aggregation: shard files streamed into traces/ and runs.parquet, deterministic and atomic."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest
from conftest import SMALL_LINEAR, file_digests, run_sweep

from fedsparse.errors import DataError
from fedsparse.pipeline.steps import aggregate_shards
from fedsparse.query.read import read_traces
from fedsparse.results import aggregate as agg
from fedsparse.results.aggregate import (
    PARTITIONING,
    ROW_GROUP_ROWS,
    aggregate,
    write_traces_dataset,
)
from fedsparse.results.schema import RUNS_SCHEMA, TRACE_SCHEMA
from fedsparse.sweep import plan_sweep

SWEEP = {
    "sweep": "agg",
    "rounds": 6,
    "seeds": [0, 1],
    "shard_size": 3,
    "embedding_sample": 0,
    "datasets": {
        "lin": {"data": dict(SMALL_LINEAR)},
        "lin2": {"data": dict(SMALL_LINEAR, seed=3)},
    },
    "algorithms": {"fedht": {}, "distiht": {"local_steps": [1]}},
    "grid": {"stepsize": [0.01, 0.001], "sparsity": [5], "local_steps": [2]},
}


@pytest.fixture(scope="module")
def shards(tmp_path_factory) -> tuple[list[Path], list[Path]]:
    root = run_sweep(tmp_path_factory.mktemp("agg"), SWEEP)
    names = list(plan_sweep(SWEEP).shards)
    return (
        [root / "shards" / f"{n}.parquet" for n in names],
        [root / "shards" / f"{n}.runs.parquet" for n in names],
    )


def test_streaming_aggregation_holds_every_row_of_the_shards_once(shards, tmp_path):
    trace_files, run_files = shards
    assert len(trace_files) > 2  # several shards per data set: rows from several files
    aggregate(trace_files, run_files, tmp_path / "traces", tmp_path / "runs.parquet")
    # what aggregation did before streaming: everything concatenated and sorted at once
    keys = [("dataset", "ascending"), ("algorithm", "ascending"), ("run_id", "ascending")]
    want = pa.concat_tables([pq.read_table(f, schema=TRACE_SCHEMA) for f in trace_files])
    want = want.sort_by([*keys, ("round", "ascending")])
    got = read_traces(tmp_path).sort_by([*keys, ("round", "ascending")])
    assert got.equals(want)
    want_runs = pa.concat_tables([pq.read_table(f, schema=RUNS_SCHEMA) for f in run_files])
    got_runs = pq.read_table(tmp_path / "runs.parquet")
    assert got_runs.schema.equals(RUNS_SCHEMA, check_metadata=True)
    assert got_runs.sort_by("run_id").equals(want_runs.sort_by("run_id"))


def test_equal_inputs_give_equal_bytes(shards, tmp_path):
    trace_files, run_files = shards
    # several times: the row order of an unordered writer varied in about 1 of 12 runs
    outs = [str(i) for i in range(12)]
    for out in outs:
        aggregate(
            trace_files, run_files, tmp_path / out / "traces", tmp_path / out / "runs.parquet"
        )
    first = file_digests(tmp_path / outs[0])
    assert all(file_digests(tmp_path / out) == first for out in outs[1:])
    assert not [p for p in tmp_path.glob("*/.*")]  # no temporary file or folder left


def test_a_run_in_two_shards_is_refused_and_nothing_is_written(shards, tmp_path):
    trace_files, run_files = shards
    with pytest.raises(ValueError, match="the same run appears in two shards"):
        aggregate(
            trace_files, [*run_files, run_files[0]], tmp_path / "traces", tmp_path / "runs.parquet"
        )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("which", ["traces", "runs"])
def test_a_torn_shard_file_is_one_line_naming_it_and_nothing_is_written(shards, tmp_path, which):
    trace_files, run_files = [list(f) for f in shards]
    files = trace_files if which == "traces" else run_files
    torn = tmp_path / "shards" / files[1].name
    torn.parent.mkdir()
    torn.write_bytes(files[1].read_bytes()[:-100])
    files[1] = torn
    out = tmp_path / "out"
    with pytest.raises(DataError) as exc:
        aggregate(trace_files, run_files, out / "traces", out / "runs.parquet")
    message = str(exc.value)
    assert message.startswith(f"{torn}: not a readable shard file (") and "\n" not in message
    assert not out.exists() or list(out.iterdir()) == []


def _copied(shards, folder: Path) -> tuple[list[Path], list[Path]]:
    folder.mkdir()
    copies = [[folder / f.name for f in files] for files in shards]
    for files, copied in zip(shards, copies, strict=True):
        for f, c in zip(files, copied, strict=True):
            shutil.copy(f, c)
    return copies[0], copies[1]


def _vanishing(monkeypatch, path: Path, back_after: float | None) -> list[int]:
    """Make ``path`` vanish once the runs table is read (as another Snakemake process deletes
    a shard's files to rerun its job), and come back ``back_after`` s later (None: never)."""
    calls, stage = [], agg.stage_traces

    def stage_then(batches, traces_dir):
        calls.append(1)
        if len(calls) == 1:
            aside = path.with_name(f".{path.name}.aside")
            os.replace(path, aside)
            if back_after is not None:
                threading.Timer(back_after, os.replace, (aside, path)).start()
        return stage(batches, traces_dir)

    monkeypatch.setattr(agg, "stage_traces", stage_then)
    return calls


def _outputs(folder: Path) -> dict[str, str]:
    return {k: v for k, v in file_digests(folder).items() if not k.startswith("shards/")}


def test_an_input_written_again_while_the_aggregate_reads_it_is_waited_for(
    shards, tmp_path, monkeypatch
):
    trace_files, run_files = _copied(shards, tmp_path / "shards")
    want = tmp_path / "want"
    aggregate(trace_files, run_files, want / "traces", want / "runs.parquet")
    calls = _vanishing(monkeypatch, trace_files[1], back_after=0.5)
    out = tmp_path / "out"
    aggregate_shards(trace_files, run_files, out / "traces", out / "runs.parquet")
    assert len(calls) == 2  # started over once the file was back
    assert _outputs(out) == _outputs(want)
    assert not list(out.glob(".*"))  # the first pass's staged files are gone


def test_an_input_gone_for_good_is_one_line_naming_it_and_nothing_is_written(
    shards, tmp_path, monkeypatch
):
    trace_files, run_files = _copied(shards, tmp_path / "shards")
    _vanishing(monkeypatch, trace_files[1], back_after=None)
    out = tmp_path / "out"
    with pytest.raises(DataError) as exc:
        aggregate_shards(
            trace_files, run_files, out / "traces", out / "runs.parquet", patience_s=0.5
        )
    message = str(exc.value)
    assert message.startswith(f"{trace_files[1]}: an input of the aggregate, gone while it read")
    assert "\n" not in message
    assert not out.exists() or list(out.iterdir()) == []


def test_kill_minus_nine_during_aggregation_leaves_the_previous_results_whole(shards, tmp_path):
    trace_files, run_files = shards
    aggregate(trace_files, run_files, tmp_path / "traces", tmp_path / "runs.parquet")
    before = {
        k: v
        for k, v in file_digests(tmp_path).items()
        if k.split("/")[0] in ("traces", "runs.parquet")
    }
    # enough input, slowly fed, for the kill to land while the new traces are being written
    (tmp_path / "inputs.json").write_text(
        json.dumps([[str(f) for f in trace_files] * 50, [str(f) for f in run_files]])
    )
    script = tmp_path / "aggregate_slowly.py"
    script.write_text(
        "import json, sys, time\n"
        "from fedsparse.results import aggregate as a\n"
        "traces, runs = json.load(open(sys.argv[1]))\n"
        "stage = a.stage_traces\n"
        "def slowly(batches):\n"
        "    for b in batches:\n"
        "        time.sleep(0.002)\n"
        "        yield b\n"
        "a.stage_traces = lambda batches, d: stage(slowly(batches), d)\n"
        "a.aggregate(traces, runs, sys.argv[2] + '/traces', sys.argv[2] + '/runs.parquet')\n"
    )
    proc = subprocess.Popen(
        [sys.executable, str(script), str(tmp_path / "inputs.json"), str(tmp_path)]
    )
    deadline = time.monotonic() + 120
    while not list(tmp_path.glob(".traces.*/dataset=*")):  # the new dataset is being written
        assert time.monotonic() < deadline and proc.poll() is None, "aggregation never started"
        time.sleep(0.005)
    proc.kill()
    proc.wait()
    after = {
        k: v
        for k, v in file_digests(tmp_path).items()
        if k.split("/")[0] in ("traces", "runs.parquet")
    }
    assert after == before


def _mixed_traces(rows: int = 200_000, null_typed: bool = False) -> pa.Table:
    """Trace rows of six partitions, in blocks and interleaved row by row, most columns null
    (null-typed, as aggregation reads a shard's empty columns, if ``null_typed``)."""
    rng = np.random.default_rng(0)
    block = np.repeat(np.arange(rows // 5000), 5000)[:rows]
    part = np.where(block % 4 == 3, rng.integers(0, 6, rows), block % 6)  # some batches mixed
    columns = {
        "run_id": pa.array([f"{i // 201:08x}" for i in range(rows)]),
        "dataset": pa.array(np.array(["a", "b c", "d/e"])[part % 3]),
        "algorithm": pa.array(np.array(["fedht", "distiht"])[part // 3]),
        "round": pa.array(np.arange(rows) % 201),
        "objective": pa.array(rng.random(rows)),
    }
    empty = {f.name: pa.nulls(rows, pa.null() if null_typed else f.type) for f in TRACE_SCHEMA}
    return pa.table({f.name: columns.get(f.name, empty[f.name]) for f in TRACE_SCHEMA})


def _cut(table: pa.Table, sizes: list[int]) -> list[pa.RecordBatch]:
    batches, start, i = [], 0, 0
    while start < table.num_rows:
        n = sizes[i % len(sizes)]
        batches.extend(table.slice(start, n).combine_chunks().to_batches())
        start, i = start + n, i + 1
    return batches


def test_the_writer_writes_what_pyarrows_dataset_writer_wrote(tmp_path):
    # aggregate and merge used pyarrow's dataset writer (whose queue grew with the sweep):
    # the same batches give the same files, byte for byte
    batches = _cut(_mixed_traces(), [1000, 70_000, 5, 32_768, 40_000, 131_073, 17])
    pads.write_dataset(
        pa.RecordBatchReader.from_batches(TRACE_SCHEMA, iter(batches)),
        tmp_path / "pyarrow",
        format="parquet",
        partitioning=PARTITIONING,
        basename_template="part-{i}.parquet",
        existing_data_behavior="overwrite_or_ignore",
        use_threads=False,
        preserve_order=True,
        min_rows_per_group=ROW_GROUP_ROWS,
        max_rows_per_group=4 * ROW_GROUP_ROWS,
    )
    write_traces_dataset(iter(batches), tmp_path / "ours")
    want = file_digests(tmp_path / "pyarrow")
    assert len(want) == 6 and file_digests(tmp_path / "ours") == want


def test_the_writer_holds_a_bounded_number_of_rows(tmp_path, monkeypatch):
    # a slow disk: reading stays at most a few row groups ahead of writing
    written = [0]
    write_group = agg._DatasetWriter._write_group

    def slowly(self, part, group):
        time.sleep(0.01)
        write_group(self, part, group)
        written[0] += sum(b.num_rows for b in group or [])

    monkeypatch.setattr(agg._DatasetWriter, "_write_group", slowly)
    # waiting in 6 partitions, row groups queued or being written (< 2 x ROW_GROUP_ROWS each
    # from batches of ROW_GROUP_ROWS), and the batch at hand
    bound = (6 + 2 * (agg.WRITES_AHEAD + 1) + 1) * ROW_GROUP_ROWS
    ahead = []

    def watched(batches):
        read = 0
        for b in batches:
            read += b.num_rows
            ahead.append(read - written[0])
            yield b

    traces = _mixed_traces(600_000, null_typed=True)
    write_traces_dataset(watched(_cut(traces, [ROW_GROUP_ROWS])), tmp_path / "traces")
    assert max(ahead) <= bound < traces.num_rows
    assert written[0] == traces.num_rows
    some = ["run_id", "round", "objective"]
    got = pq.read_table(tmp_path / "traces", columns=some)
    assert got.sort_by([("run_id", "ascending"), ("round", "ascending")]).equals(
        traces.select(some)
    )
