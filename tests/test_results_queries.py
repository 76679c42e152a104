"""docs/results.md's queries mean what they say : the documented "rounds to reach
objective 0.5" query, run as written, leaves diverged runs out (one that passed 0.5 on its way up
used to rank first), and `fedsparse best --metric final_dist_to_truth` says where that distance
measures recovery."""

from __future__ import annotations

import io
import re
import shlex
import shutil
import warnings
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
from conftest import run_sweep

from fedsparse.cli import main
from fedsparse.query.read import read_traces

DOCS = Path(__file__).resolve().parents[1] / "docs" / "results.md"
SWEEP = {
    "sweep": "q",
    "rounds": 25,
    "seeds": [0],
    "embedding_sample": 0,
    "datasets": {
        "sim-logistic-a1-b1": {
            "data": {
                "kind": "synthetic",
                "task": "logistic",
                "clients": 4,
                "samples_per_client": 40,
                "dim": 20,
                "support": 4,
                "positives": 6,
                "alpha": 1,
                "beta": 1,
            },
            "model": {"loss": "logistic"},
        },
    },
    "algorithms": {"fedht": {}, "distiht": {"local_steps": [1]}},
    "grid": {"stepsize": [0.3, 0.1, 0.01], "local_steps": [3], "sparsity": [8], "batch_size": [10]},
}


def documented_query() -> tuple[str, list[str]]:
    """The "rounds to reach objective 0.5" command of docs/results.md: its SQL and options."""
    text = DOCS.read_text()
    block = re.search(r"# rounds each run .*?\n(fedsparse query .*?)\n(?:#|```)", text, re.S)
    argv = shlex.split(block.group(1))
    assert argv[:2] == ["fedsparse", "query"] and "objective <= 0.5" in argv[2]
    return argv[2], argv[3:]


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return run_sweep(tmp_path_factory.mktemp("queries") / "r", SWEEP)


def _rounds(folder: Path, capsys) -> pd.DataFrame:
    sql, options = documented_query()
    assert main(["query", sql, str(folder), *options, "--format", "csv"]) == 0
    return pd.read_csv(io.StringIO(capsys.readouterr().out))


def test_the_rounds_to_objective_query_leaves_diverged_runs_out(results, tmp_path, capsys):
    traces = read_traces(results).to_pandas()
    reached = traces[traces["objective"] <= 0.5].groupby("run_id")["round"].min().sort_values()
    assert len(reached) >= 2  # the toy reaches 0.5 in some runs: the query has rows to rank
    got = _rounds(results, capsys)
    assert got["run_id"].iloc[0] == reached.index[0]
    # the run that reaches 0.5 first is marked diverged, as a run that blows up after it is
    copy = tmp_path / "r"
    shutil.copytree(results, copy)
    runs = pq.read_table(copy / "runs.parquet")
    status = [
        "diverged" if r == reached.index[0] else s
        for r, s in zip(runs["run_id"].to_pylist(), runs["status"].to_pylist(), strict=True)
    ]
    i = runs.schema.get_field_index("status")
    pq.write_table(runs.set_column(i, runs.schema.field(i), [status]), copy / "runs.parquet")
    got = _rounds(copy, capsys)
    assert reached.index[0] not in set(got["run_id"])
    assert got["run_id"].iloc[0] == reached.index[1]
    assert got["rounds"].iloc[0] == reached.iloc[1]


def test_best_by_distance_to_truth_says_where_it_means_something(results, capsys):
    assert main(["best", str(results), "--metric", "final_dist_to_truth"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # notes are wrapped
    assert "a true model only for linear data with shared_model: true" in out
    assert main(["best", str(results)]) == 0
    assert "shared_model" not in capsys.readouterr().out
