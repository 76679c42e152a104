"""``fedsparse merge`` in bounded memory: under a tiny DuckDB memory limit the merge sorts
run-id range after range, and writes the same bytes as with the default limit (one range a
partition). Synthetic results folders (tens of thousands of trace rows, runs in several
folders, ok in some and diverged in others, one conflicting) keep it fast."""

from __future__ import annotations

import filecmp
import warnings
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fedsparse.errors import FedsparseError
from fedsparse.layout import Layout
from fedsparse.query import ResultsConflictWarning, merge_results
from fedsparse.query import merge as merge_module
from fedsparse.results.aggregate import write_traces_dataset
from fedsparse.results.schema import RUNS_SCHEMA, TRACE_SCHEMA, write_parquet_atomic

ROUNDS = 21
RUNS_PER_FOLDER = 700


def _results_folder(root: Path, index: int) -> Path:
    """Folder ``index`` of three: runs r<k> for k in [300 * index, +700), so neighbours share
    400 runs (and all three r0600 to r0699); from r<300 * (index + 1)> on, runs whose k is a
    multiple of 5 are diverged (a conflict where another folder has them ok), and r0451's
    objective differs between folders 0 and 1 (another)."""
    ks = np.arange(300 * index, 300 * index + RUNS_PER_FOLDER)
    ids = np.array([f"r{k:04d}" for k in ks])
    datasets = np.array(["lin", "log"])[ks % 2]
    algorithms = np.array(["fedht", "distiht", "fediterht"])[ks % 3]
    diverged = (ks % 5 == 0) & (ks >= 300 * (index + 1))
    n = len(ks)
    rounds = np.tile(np.arange(ROUNDS), n)
    objective = np.repeat(ks.astype(float), ROUNDS) + 1 / (1 + rounds)
    objective[np.repeat(ids == "r0451", ROUNDS)] += index
    status = np.where(np.repeat(diverged, ROUNDS), "diverged", "ok")
    trace = {
        "run_id": np.repeat(ids, ROUNDS),
        "sweep": [f"s{index}"] * (n * ROUNDS),
        "dataset": np.repeat(datasets, ROUNDS),
        "algorithm": np.repeat(algorithms, ROUNDS),
        "seed": np.repeat(ks % 7, ROUNDS),
        "stepsize": np.repeat(0.01 * (1 + ks % 4), ROUNDS),
        "round": rounds,
        "objective": objective,
        "elapsed_s": rounds * 0.1 + index,
        "status": status,
    }
    runs = {
        "run_id": ids,
        "sweep": [f"s{index}"] * n,
        "dataset": datasets,
        "algorithm": algorithms,
        "seed": ks % 7,
        "status": np.where(diverged, "diverged", "ok"),
        "final_objective": ks.astype(float),
        "config_json": [f'{{"run": {k}, "pad": "{"x" * 200}"}}' for k in ks],
    }
    out = Layout(root / f"f{index}")
    out.root.mkdir(parents=True)
    write_parquet_atomic(_typed(runs, n, RUNS_SCHEMA), out.runs)
    # in shards of 100 runs, each in run order (as aggregate writes them), the shards reversed
    table = _typed(trace, n * ROUNDS, TRACE_SCHEMA)
    shards = [table.slice(s * ROUNDS, 100 * ROUNDS) for s in range(0, n, 100)][::-1]
    write_traces_dataset(pa.concat_tables(shards), out.traces)
    return out.root


def _typed(columns: dict, n: int, schema: pa.Schema) -> pa.Table:
    return pa.table(
        [
            pa.array(columns[f.name], f.type) if f.name in columns else pa.nulls(n, f.type)
            for f in schema
        ],
        schema=schema,
    )


@pytest.fixture(scope="module")
def sources(tmp_path_factory) -> list[Path]:
    root = tmp_path_factory.mktemp("sources")
    return [_results_folder(root, i) for i in range(3)]


def _files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def test_a_tiny_memory_limit_merges_range_by_range_to_the_same_bytes(
    sources, tmp_path, monkeypatch
):
    cut = []
    ranges = merge_module._run_ranges

    def counted(counts, limit):
        found = list(ranges(counts, limit))
        cut.append(len(found))
        return iter(found)

    monkeypatch.setattr(merge_module, "_run_ranges", counted)
    monkeypatch.delenv(merge_module.MEMORY_ENV, raising=False)
    with pytest.warns(ResultsConflictWarning):
        wide = merge_results(sources, tmp_path / "default")
    assert cut == [6, 1]  # one range a partition (2 data sets x 3 algorithms), one of runs

    # DuckDB needs some tens of MB whatever the rows (at 32 MB it cannot sort 1,300 runs
    # rows); the ranges are cut small here too, as a larger merge cuts them
    cut.clear()
    monkeypatch.setenv(merge_module.MEMORY_ENV, "64MB")
    monkeypatch.setattr(merge_module, "SORT_BYTES_PER_TRACE_ROW", 1 << 16)
    monkeypatch.setattr(merge_module, "SORT_BYTES_PER_RUNS_ROW", 1 << 18)
    with pytest.warns(ResultsConflictWarning):
        tight = merge_results(sources, tmp_path / "tiny")
    assert cut[0] >= 6 * 2 and cut[1] >= 2  # several ranges in each partition, and of runs

    assert tight == wide and wide.runs == 1300 and wide.per_folder == [RUNS_PER_FOLDER] * 3
    ok_elsewhere = [f"r{k:04d}" for k in range(300, 900, 5)]  # r0900+: diverged in f1 and f2
    assert wide.conflicts == sorted([*ok_elsewhere, "r0451"])
    files = _files(tmp_path / "default")
    assert files == _files(tmp_path / "tiny") and len(files) == 7
    match, mismatch, errors = filecmp.cmpfiles(
        tmp_path / "default", tmp_path / "tiny", files, shallow=False
    )
    assert mismatch == [] and errors == []

    # the rule as every reader applies it: each run once, from the folder where it is ok, else
    # the first; runs by run id, each partition's rows in run and round order
    merged = Layout(tmp_path / "tiny")
    runs = pq.read_table(merged.runs, columns=["run_id", "sweep"])
    kept = dict(zip(runs["run_id"].to_pylist(), runs["sweep"].to_pylist(), strict=True))
    assert list(kept) == sorted(kept) and len(kept) == 1300
    want = {"r0300": "s1", "r0301": "s0", "r0605": "s2", "r0601": "s0", "r0451": "s0"}
    want |= {"r0905": "s1"}  # diverged wherever it is: the first folder
    assert {k: kept[k] for k in want} == want and kept["r1299"] == "s2"
    rows = 0
    for part in merged.traces.rglob("*.parquet"):
        table = pq.read_table(part, columns=["run_id", "round", "sweep"])
        keys = list(zip(table["run_id"].to_pylist(), table["round"].to_pylist(), strict=True))
        assert keys == sorted(keys) and len(set(keys)) == len(keys)
        sweeps = dict(zip(table["run_id"].to_pylist(), table["sweep"].to_pylist(), strict=True))
        assert all(kept[r] == s for r, s in sweeps.items())  # the runs row's folder
        rows += table.num_rows
    assert rows == 1300 * ROUNDS


def test_a_memory_setting_that_is_not_a_size_is_one_line(sources, tmp_path, monkeypatch):
    monkeypatch.setenv(merge_module.MEMORY_ENV, "lots")
    with warnings.catch_warnings(), pytest.raises(FedsparseError, match="memory") as err:
        warnings.simplefilter("ignore", ResultsConflictWarning)
        merge_results(sources, tmp_path / "m")
    assert "\n" not in str(err.value)
    assert not (tmp_path / "m" / "runs.parquet").exists()
