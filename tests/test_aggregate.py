"""Aggregation: shard files streamed into traces/ and runs.parquet, deterministic and atomic."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import SMALL_LINEAR, file_digests, run_sweep

from fedsparse.aggregate import aggregate, read_traces
from fedsparse.results import RUNS_SCHEMA, TRACE_SCHEMA
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
        "from fedsparse import aggregate as a\n"
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
