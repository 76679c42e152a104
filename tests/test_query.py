"""``fedsparse query``, ``best``, ``merge`` and the report over several results folders.

Two real tiny sweeps are run through the library (make_data, run_shard, aggregate, as the
workflow does): ``a`` and ``b`` share some runs (same configs and seeds, different sweep
labels) and each has runs of its own. Results are checked against pandas on the same Parquet
files; bad input goes through the real command in a subprocess.
"""

from __future__ import annotations

import math
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from conftest import run_sweep

from fedsparse.cli import main
from fedsparse.query import (
    BEST_CONFIG_COLUMNS,
    ResultsConflictWarning,
    best_configurations,
    merge_results,
    open_results,
    run_query,
)
from fedsparse.query.read import read_traces
from fedsparse.results.schema import RUNS_SCHEMA, TRACE_SCHEMA

DATASETS = {
    "lin": {
        "data": {
            "kind": "synthetic",
            "task": "linear",
            "clients": 4,
            "samples_per_client": 10,
            "dim": 20,
            "support": 4,
            "alpha": 0.5,
            "beta": 0.5,
        },
        "model": {"loss": "least_squares"},
    },
    "log": {  # a partition with a test split: test_accuracy in the traces, data/ statistics
        "data": {
            "kind": "synthetic",
            "task": "logistic",
            "clients": 4,
            "samples_per_client": 20,
            "dim": 20,
            "support": 4,
            "positives": 5,
            "alpha": 1,
            "beta": 1,
        },
        "model": {"loss": "logistic"},
        "partition": {"kind": "iid", "clients": 4, "test_fraction": 0.25},
    },
}


def sweep(name: str, seeds: list[int], stepsizes: list[float]) -> dict:
    return {
        "sweep": name,
        "rounds": 8,
        "seeds": seeds,
        "embedding_sample": 0,  # no t-SNE: it is slow and not what is tested
        "datasets": DATASETS,
        "algorithms": {"fedht": {}, "distiht": {"local_steps": [1]}},
        "grid": {"stepsize": stepsizes, "local_steps": [2, 3], "sparsity": [5], "batch_size": [5]},
    }


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> tuple[Path, Path]:
    """``a``: step sizes 0.001, 0.01 and a diverging 1e5, seeds 0, 1; ``b``: 0.01 and 0.003,
    seeds 1, 2. Shared: step size 0.01 with seed 1."""
    tmp = tmp_path_factory.mktemp("sweeps")
    with warnings.catch_warnings():  # the diverging step size overflows, as intended
        warnings.simplefilter("ignore", RuntimeWarning)
        a = run_sweep(tmp / "a", sweep("a", [0, 1], [0.001, 0.01, 1e5]))
        b = run_sweep(tmp / "b", sweep("b", [1, 2], [0.01, 0.003]))
    return a, b


def runs_of(*folders: Path) -> pd.DataFrame:
    return pd.concat([pd.read_parquet(f / "runs.parquet") for f in folders], ignore_index=True)


def traces_of(folder: Path) -> pd.DataFrame:
    return read_traces(folder).to_pandas()


def query(folders: list[Path], sql: str) -> pd.DataFrame:
    with open_results(folders) as res:
        return run_query(res, sql).read_all().to_pandas()


def shared_ids(a: Path, b: Path) -> list[str]:
    ids = set(runs_of(a).run_id) & set(runs_of(b).run_id)
    return sorted(ids)


def edit_run(src: Path, dest: Path, run_id: str, status: str | None = None) -> Path:
    """A copy of ``src`` where ``run_id``'s objectives differ in the last bits (as on another
    CPU), and optionally its status."""
    shutil.copytree(src, dest)
    for f in (dest / "traces").rglob("*.parquet"):
        t = pq.read_table(f)
        hit = pc.equal(t["run_id"], run_id)
        obj = pc.if_else(hit, pc.multiply(t["objective"], 1 + 1e-12), t["objective"])
        pq.write_table(t.set_column(t.schema.get_field_index("objective"), "objective", obj), f)
    if status is not None:
        r = pq.read_table(dest / "runs.parquet")
        col = pc.if_else(pc.equal(r["run_id"], run_id), status, r["status"])
        pq.write_table(
            r.set_column(r.schema.get_field_index("status"), "status", col), dest / "runs.parquet"
        )
    return dest


# ---------------------------------------------------------------------------- query


def test_views_have_the_schemas_and_string_partition_columns(folders):
    a, _ = folders
    cols = query([a], "DESCRIBE traces")
    assert cols["column_name"].tolist() == TRACE_SCHEMA.names
    types = dict(zip(cols["column_name"], cols["column_type"], strict=True))
    assert types["dataset"] == types["algorithm"] == "VARCHAR"
    assert query([a], "DESCRIBE runs")["column_name"].tolist() == RUNS_SCHEMA.names


def test_query_matches_pandas(folders):
    a, _ = folders
    runs, traces = runs_of(a), traces_of(a)
    got = query(
        [a],
        """SELECT algorithm, dataset, count(*) AS n, avg(final_objective) AS mean
                        FROM runs WHERE status = 'ok' GROUP BY ALL ORDER BY ALL""",
    )
    ok = runs[runs.status == "ok"]
    want = ok.groupby(["algorithm", "dataset"]).final_objective.agg(["size", "mean"]).reset_index()
    assert (
        got[["algorithm", "dataset"]].values.tolist()
        == want[["algorithm", "dataset"]].values.tolist()
    )
    assert got["n"].tolist() == want["size"].tolist()
    np.testing.assert_allclose(got["mean"], want["mean"], rtol=1e-12)

    # rounds to reach a target objective, per run (NULL: never reached)
    got = query(
        [a],
        """SELECT run_id, min(round) FILTER (WHERE objective <= 1.0) AS r
                        FROM traces GROUP BY run_id ORDER BY run_id""",
    )
    want = traces[traces.objective <= 1.0].groupby("run_id")["round"].min()
    want = want.reindex(sorted(traces.run_id.unique()))
    assert got["run_id"].tolist() == want.index.tolist()
    assert got["r"].astype("Float64").tolist() == want.astype("Float64").tolist()

    got = query([a], "SELECT count(*) AS n, sum(bytes_up) AS up FROM traces WHERE dataset = 'log'")
    sel = traces[traces.dataset == "log"]
    assert (got["n"][0], int(got["up"][0])) == (len(sel), sel.bytes_up.sum())  # up: a HUGEINT


def test_same_folder_twice_reads_once(folders):
    a, _ = folders
    assert query([a, a], "SELECT count(*) AS n FROM runs")["n"][0] == len(runs_of(a))


def test_older_results_without_some_columns_read_as_nulls(folders, tmp_path):
    a, _ = folders
    old = tmp_path / "old"
    shutil.copytree(a, old)
    for f in (old / "traces").rglob("*.parquet"):
        pq.write_table(pq.read_table(f).drop_columns(["test_accuracy", "study"]), f)
    pq.write_table(
        pq.read_table(old / "runs.parquet").drop_columns(["search_space"]), old / "runs.parquet"
    )
    got = query([old], "SELECT count(test_accuracy) AS t, count(*) AS n FROM traces")
    assert got["t"][0] == 0 and got["n"][0] == len(traces_of(a))
    assert query([old], "SELECT count(search_space) AS s FROM runs")["s"][0] == 0


def test_outputs_round_trip(folders, tmp_path, capsys):
    a, _ = folders
    sql = "SELECT * FROM traces WHERE round = 8 ORDER BY run_id"
    want = query([a], sql)
    assert main(["query", sql, str(a), "-o", str(tmp_path / "q.csv")]) == 0
    assert main(["query", sql, str(a), "--format", "parquet", "-o", str(tmp_path / "q.pq")]) == 0
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "q.pq"), want)
    csv = pd.read_csv(tmp_path / "q.csv")
    assert csv.columns.tolist() == want.columns.tolist() and len(csv) == len(want)
    np.testing.assert_array_equal(csv["objective"], want["objective"])  # floats exactly
    assert csv["run_id"].tolist() == want["run_id"].tolist()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["q.csv", "q.pq"]  # no temp files

    capsys.readouterr()
    assert (
        main(
            [
                "query",
                "SELECT run_id, objective FROM traces ORDER BY run_id, round",
                str(a),
                "--limit",
                "5",
            ]
        )
        == 0
    )
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["run_id", "objective"] and set(lines[1]) <= {"-", " "}
    assert len(lines) == 2 + 5 + 1
    # runs reaching round 8 have 9 rows; the blow-ups end (diverged) at round 1 with 2
    total = len(want) * 9 + 2 * int(runs_of(a).status.eq("diverged").sum())
    assert (runs_of(a).final_round[runs_of(a).status.eq("diverged")] == 1).all()
    assert lines[-1] == f"... {total - 5} more rows not shown ({total} in all; --limit 0 shows all)"


def test_csv_on_stdout_via_the_command(folders):
    a, _ = folders
    sql = "SELECT dataset, algorithm, count(*) AS n FROM runs GROUP BY ALL ORDER BY ALL"
    out = subprocess.run(
        [sys.executable, "-m", "fedsparse.cli", "query", sql, str(a), "--format", "csv"],
        capture_output=True,
        text=True,
        check=True,
    )
    from io import StringIO

    pd.testing.assert_frame_equal(pd.read_csv(StringIO(out.stdout)), query([a], sql))


# ---------------------------------------------------------------------------- best


def pandas_best(runs: pd.DataFrame, score: pd.Series, better: str, by=()) -> pd.DataFrame:
    """The rule written with pandas: diverged runs score the worst; mean over seeds."""
    worst = math.inf if better == "lower" else -math.inf
    runs = runs.assign(value=score, score=score.where(runs.status != "diverged", worst))
    runs = runs[runs.trial_state.isna() | (runs.trial_state == "HOLDOUT")]
    groups = [*by, "dataset", "algorithm"]
    runs = runs[runs.groupby(groups)["value"].transform("count") > 0]  # the metric applies
    keys = list(dict.fromkeys([*by, *BEST_CONFIG_COLUMNS]))
    g = runs.groupby(keys, dropna=False)
    configs = g.agg(
        mean=("score", "mean"),
        seeds=("seed", "nunique"),
        diverged=("status", lambda s: int((s == "diverged").sum())),
    ).reset_index()
    pick = configs.groupby(groups)["mean"]
    best = configs.loc[pick.idxmin() if better == "lower" else pick.idxmax()]
    return best.sort_values([*by, "dataset", "algorithm"]).reset_index(drop=True)


def best(folders: list[Path], metric: str, by=()) -> pd.DataFrame:
    with open_results(folders) as res:
        return best_configurations(res, metric, by).read_all().to_pandas()


def check_same_best(got: pd.DataFrame, want: pd.DataFrame, metric: str, by=()) -> None:
    def cells(frame, col):  # nulls compare equal (a column no run has is null on both sides)
        values = frame[col].astype(object)
        return values.where(frame[col].notna(), None).tolist()

    for col in [*by, *BEST_CONFIG_COLUMNS]:
        assert cells(got, col) == cells(want, col), col
    np.testing.assert_allclose(got[f"mean_{metric}"], want["mean"], rtol=1e-12)
    assert got["seeds"].tolist() == want["seeds"].tolist()
    assert got["diverged"].tolist() == want["diverged"].tolist()


def test_best_matches_pandas(folders):
    a, b = folders
    runs = runs_of(a)
    assert (runs.status == "diverged").any()  # the diverged runs must lose
    want = pandas_best(runs, runs.final_objective, "lower")
    got = best([a], "final_objective")
    check_same_best(got, want, "final_objective")
    assert len(got) == 4 and (got["diverged"] == 0).all()

    want = pandas_best(runs, runs.best_objective, "lower", by=["partition"])
    check_same_best(
        best([a], "best_objective", ["partition"]), want, "best_objective", ["partition"]
    )

    # a trace metric: test accuracy at the last round (only the data set with a test split)
    traces = traces_of(a)
    last = traces.sort_values("round").groupby("run_id").tail(1).set_index("run_id")
    acc = runs.run_id.map(last.test_accuracy).astype(float)
    got = best([a], "final_test_accuracy")
    check_same_best(got, pandas_best(runs, acc, "higher"), "final_test_accuracy")
    assert set(got.dataset) == {"log"}

    # two folders: the union, each run once
    union = runs_of(a, b).drop_duplicates("run_id")
    check_same_best(
        best([a, b], "final_objective"),
        pandas_best(union, union.final_objective, "lower"),
        "final_objective",
    )


def test_best_command_prints_the_columns_that_differ(folders, capsys, tmp_path):
    """The table: groups, the configuration columns with two or more values, the metric,
    seeds and flags, in lines a terminal shows; the columns with one value are named under
    it. --all-columns prints every column; files hold every column either way."""
    a, _ = folders
    assert main(["best", str(a), "--by", "partition"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    shown = ["partition", "dataset", "algorithm", "loss", "stepsize", "local_steps"]
    flags = ["mean_final_objective", "seeds", "diverged", "grid_edges"]
    assert lines[0].split() == shown + flags
    assert "(4 rows)" in lines
    notes = " ".join(lines[lines.index("(4 rows)") + 1 :])
    assert "the same in every configuration: model linear, rounds 8," in notes
    assert "sparsity 5, batch_size 5" in notes and "--all-columns shows every column" in notes
    assert max(map(len, lines)) <= 130, max(lines, key=len)  # --all-columns: over 600

    # the same rows as the full table; grid_edges shortened
    full = best([a], "final_objective", ["partition"])
    rows = [line.split(None, len(shown) + 3) for line in lines[2:6]]
    assert [r[:3] for r in rows] == full[["partition", "dataset", "algorithm"]].values.tolist()
    assert [float(r[4]) for r in rows] == full["stepsize"].tolist()
    assert [r[7] for r in rows] == full["seeds"].astype(str).tolist()
    short = [
        ", ".join(
            f.replace(" at the ", " ").removesuffix(" edge of the grid") for f in e.split("; ")
        )
        if e
        else ""
        for e in full["grid_edges"]
    ]
    assert [r[9] if len(r) > 9 else "" for r in rows] == short
    assert any(short)  # the data have a flag to shorten

    assert main(["best", str(a), "--by", "partition", "--all-columns"]) == 0
    lines = capsys.readouterr().out.splitlines()
    everything = ["partition", *[c for c in BEST_CONFIG_COLUMNS if c != "partition"], *flags]
    assert lines[0].split() == everything and lines[-1] == "(4 rows)"
    assert max(map(len, lines)) > 600

    for extra in ([], ["--all-columns"]):  # a script gets the same columns from any results
        assert main(["best", str(a), "-o", str(tmp_path / "b.csv"), *extra]) == 0
        csv = pd.read_csv(tmp_path / "b.csv", keep_default_na=False)
        assert csv.columns.tolist() == everything[1:3] + ["partition"] + everything[3:]
        assert "local_steps at the upper edge of the grid" in csv.grid_edges.tolist()


def test_best_shows_a_hyperparameter_set_for_one_algorithm_only(tmp_path, capsys):
    """k set for fabtopk and null for fedht takes two values: shown; sparsity the same
    everywhere: named under the table; local_steps set by no run: left out."""
    from fedsparse.results.aggregate import write_traces_dataset
    from fedsparse.results.schema import rows_table, trace_table, write_parquet_atomic

    runs = [
        {
            "run_id": f"{alg}-{lr}",
            "dataset": "d",
            "algorithm": alg,
            "seed": 0,
            "status": "ok",
            "stepsize": lr,
            "sparsity": 3,
            "k": k,
            "final_objective": obj,
        }
        for alg, k in (("fedht", None), ("fabtopk", 5))
        for lr, obj in ((0.1, 2.0), (0.2, 1.0))
    ]
    write_parquet_atomic(rows_table(runs, RUNS_SCHEMA), tmp_path / "r" / "runs.parquet")
    trace = [{**{c: r[c] for c in ("run_id", "dataset", "algorithm")}, "round": 0} for r in runs]
    write_traces_dataset(trace_table(trace), tmp_path / "r" / "traces")
    assert main(["best", str(tmp_path / "r")]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == [
        "dataset",
        "algorithm",
        "stepsize",
        "k",
        "mean_final_objective",
        "seeds",
        "diverged",
        "grid_edges",
    ]
    assert lines[2].split()[:4] == ["d", "fabtopk", "0.2", "5"]
    assert lines[3].split() == ["d", "fedht", "0.2", "NULL", "1", "1", "0", "stepsize", "upper"]
    assert "the same in every configuration: partition" not in " ".join(lines)  # null: unset
    assert any(line.startswith("the same in every configuration: sparsity 3") for line in lines)


# ---------------------------------------------------------------------------- merge


def test_merge_writes_the_union_once(folders, tmp_path):
    a, b = folders
    shared = shared_ids(a, b)
    assert len(shared) == 6  # 0.01 with seed 1: 3 configurations on 2 data sets
    with warnings.catch_warnings():
        warnings.simplefilter("error", ResultsConflictWarning)  # identical rows: no conflict
        summary = merge_results([a, b], tmp_path / "m")
    runs_a, runs_b = runs_of(a), runs_of(b)
    assert summary.per_folder == [len(runs_a), len(runs_b)]
    assert summary.runs == len(runs_a) + len(runs_b) - len(shared) and summary.conflicts == []

    merged = pd.read_parquet(tmp_path / "m" / "runs.parquet")
    assert pq.read_schema(tmp_path / "m" / "runs.parquet").names == RUNS_SCHEMA.names
    assert merged.run_id.is_unique and set(merged.run_id) == set(runs_a.run_id) | set(runs_b.run_id)
    assert set(merged[merged.run_id.isin(shared)].sweep) == {"a"}  # the first folder's copy

    # traces: a's runs from a, the others from b, row for row
    got = traces_of(tmp_path / "m").sort_values(["run_id", "round"]).reset_index(drop=True)
    ta, tb = traces_of(a), traces_of(b)
    want = pd.concat([ta, tb[~tb.run_id.isin(ta.run_id)]]).sort_values(["run_id", "round"])
    pd.testing.assert_frame_equal(got, want.reset_index(drop=True))

    merge_results([a, b], tmp_path / "again")  # deterministic
    for rel in ["traces/dataset=lin/algorithm=fedht/part-0.parquet"]:
        assert pq.read_table(tmp_path / "m" / rel).equals(pq.read_table(tmp_path / "again" / rel))


def test_merge_conflicts_keep_ok_then_first(folders, tmp_path):
    a, b = folders
    x = shared_ids(a, b)[0]
    ta, tb = traces_of(a), traces_of(b)

    def objective(folder: Path) -> list[float]:
        t = traces_of(folder)
        return t[t.run_id == x].sort_values("round").objective.tolist()

    edited = edit_run(a, tmp_path / "a-cpu2", x)  # ok in both, rows differ: first given wins
    with pytest.warns(ResultsConflictWarning, match="1 run"):
        s = merge_results([edited, b], tmp_path / "m1")
    assert s.conflicts == [x] and objective(tmp_path / "m1") == objective(edited)
    with pytest.warns(ResultsConflictWarning):
        merge_results([b, edited], tmp_path / "m2")
    assert objective(tmp_path / "m2") == tb[tb.run_id == x].sort_values("round").objective.tolist()

    diverged = edit_run(a, tmp_path / "a-div", x, status="diverged")  # ok beats first
    with pytest.warns(ResultsConflictWarning):
        merge_results([diverged, b], tmp_path / "m3")
    runs = pd.read_parquet(tmp_path / "m3" / "runs.parquet").set_index("run_id")
    assert runs.loc[x, "status"] == "ok" and runs.loc[x, "sweep"] == "b"
    assert objective(tmp_path / "m3") == objective(b)
    assert len(runs) == len(set(ta.run_id) | set(tb.run_id))


def test_merge_command_warns_in_one_line(folders, tmp_path):
    a, b = folders
    edited = edit_run(a, tmp_path / "a-cpu2", shared_ids(a, b)[0])
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "fedsparse.cli",
            "merge",
            str(edited),
            str(b),
            "-o",
            str(tmp_path / "m"),
        ],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stderr
    assert out.stderr.count("\n") == 1 and out.stderr.startswith("fedsparse: warning: 1 run(s)")
    assert out.stdout.startswith("merged ") and (tmp_path / "m" / "runs.parquet").is_file()


# ---------------------------------------------------------------------------- report


@pytest.fixture
def fast_figures(monkeypatch):
    import fedsparse.report.build as rep
    from fedsparse.families.hard_thresholding import report as ht_section

    monkeypatch.setattr(rep, "objective_figure", lambda *args, **kwargs: None)  # plotting is slow
    for name in ("heatmap_figure", "noniid_figure"):
        monkeypatch.setattr(ht_section, name, lambda *args, **kwargs: None)


def test_report_from_a_merged_folder_and_from_two_folders(
    folders, tmp_path, monkeypatch, fast_figures
):
    from fedsparse.report import build_report

    a, b = folders
    n = len(set(runs_of(a).run_id) | set(runs_of(b).run_id))
    merge_results([a, b], tmp_path / "m")  # runs.parquet and traces/ only
    assert sorted(p.name for p in (tmp_path / "m").iterdir()) == ["runs.parquet", "traces"]
    index = build_report(tmp_path / "m")
    assert f"{n} runs (" in index.read_text()
    assert pd.read_csv(index.parent / "tables" / "configs.csv")["runs"].sum() == n
    assert not (index.parent / "tables" / "partitions.csv").exists()  # no data/ folder

    monkeypatch.chdir(tmp_path)
    assert main(["report", str(a), str(b)]) == 0  # into ./report
    html = (tmp_path / "report" / "index.html").read_text()
    assert f"{n} runs (" in html
    assert (tmp_path / "report" / "tables" / "partitions.csv").is_file()  # from a's data/
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m", "report"]  # no merged leftovers


# ---------------------------------------------------------------------------- bad input


BAD = {  # argv, what the error line must say
    "syntax": (["query", "SELEC count(*) FROM runs", "{a}"], "syntax error"),
    "unknown table": (["query", "SELECT * FROM trace", "{a}"], 'Did you mean "traces"'),
    "unknown column": (["query", "SELECT nope FROM runs", "{a}"], "nope"),
    "copy": (["query", "COPY runs TO 'x.csv'", "{a}"], "not COPY"),
    "create": (["query", "CREATE TABLE t AS SELECT 1", "{a}"], "not CREATE"),
    "insert": (["query", "INSERT INTO runs SELECT * FROM runs", "{a}"], "not INSERT"),
    "attach": (["query", "ATTACH 'x.db' AS x", "{a}"], "not ATTACH"),
    "two statements": (["query", "SELECT 1; SELECT 2", "{a}"], "one SQL statement, got 2"),
    "read elsewhere": (["query", "FROM read_csv('/etc/passwd')", "{a}"], "Permission Error"),
    "no folder": (["query", "SELECT 1", "{tmp}/nowhere"], "nowhere: no such results folder"),
    "no runs": (["best", "{tmp}/empty"], "empty: no runs.parquet here"),
    "parquet on stdout": (["query", "SELECT 1", "{a}", "--format", "parquet"], "needs -o FILE"),
    "unknown metric": (["best", "{a}", "--metric", "accuracy"], "unknown metric 'accuracy'"),
    "metric not in the results": (
        ["best", "{a}", "--metric", "final_pm_test_accuracy"],
        "--metric final_pm_test_accuracy: no grid or held-out run in these results has one "
        "(these results have: final_objective, best_objective, final_train_accuracy, "
        "final_test_accuracy, final_dist_to_truth, final_train_loss)",
    ),
    "merge onto results": (["merge", "{a}", "-o", "{b}"], "already holds results"),
}


@pytest.mark.parametrize("case", BAD, ids=list(BAD))
def test_bad_input_is_one_line_exit_2_and_no_file(case, folders, tmp_path):
    a, b = folders
    (tmp_path / "empty").mkdir()
    argv, message = BAD[case]
    argv = [arg.format(tmp=tmp_path, a=a, b=b) for arg in argv]
    if argv[0] != "merge" and "--format" not in argv:
        argv += ["-o", str(tmp_path / "out.csv")]
    before = sorted(p.name for p in b.iterdir())
    out = subprocess.run(
        [sys.executable, "-m", "fedsparse.cli", *argv], capture_output=True, text=True, cwd=tmp_path
    )
    assert out.returncode == 2, (out.stdout, out.stderr)
    assert out.stderr.count("\n") == 1 and out.stderr.startswith("fedsparse: error: ")
    assert message in out.stderr and out.stdout == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["empty"]  # no out.csv, x.csv, x.db
    assert sorted(p.name for p in b.iterdir()) == before


# ---------------------------------------------------------------------------- the one rule


def test_every_reader_keeps_a_run_of_several_folders_once_by_one_rule(tmp_path):
    """ok in the second folder only: from the second; ok in neither: from the first; ok in
    both: from the first. Runs row and trace rows alike, for query, merge and the report."""
    from fedsparse.query.read import read_results
    from fedsparse.report.analysis import read_runs, read_traces
    from fedsparse.results.aggregate import write_traces_dataset
    from fedsparse.results.schema import rows_table, trace_table, write_parquet_atomic

    status = {
        "first": {"ok-in-second": "diverged", "ok-in-neither": "diverged", "ok-in-both": "ok"},
        "second": {"ok-in-second": "ok", "ok-in-neither": "diverged", "ok-in-both": "ok"},
    }
    for name, runs in status.items():
        ids = {"sweep": name, "dataset": "d", "algorithm": "fedht"}
        rows = [{"run_id": r, **ids, "status": s} for r, s in runs.items()]
        write_parquet_atomic(rows_table(rows, RUNS_SCHEMA), tmp_path / name / "runs.parquet")
        trace = [
            {"run_id": r, **ids, "round": k, "objective": 1.0 + k, "status": s}
            for r, s in runs.items()
            for k in range(3)
        ]
        write_traces_dataset(trace_table(trace), tmp_path / name / "traces")
    folders = [tmp_path / "first", tmp_path / "second"]
    want = {"ok-in-second": "second", "ok-in-neither": "first", "ok-in-both": "first"}

    def kept(table) -> dict[str, str]:
        frame = table.to_pandas() if hasattr(table, "to_pandas") else table
        assert frame.groupby("run_id").sweep.nunique().eq(1).all()  # one folder per run
        return dict(zip(frame.run_id, frame.sweep, strict=True))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResultsConflictWarning)  # their rows differ: statuses
        assert kept(read_results(folders, "SELECT run_id, sweep FROM runs")) == want
        traces = read_results(folders, "SELECT run_id, sweep, round FROM traces")
        assert traces.num_rows == 3 * 3 and kept(traces) == want
        assert kept(query(folders, "SELECT run_id, sweep FROM runs")) == want
        assert kept(query(folders, "SELECT run_id, sweep FROM traces")) == want
        merge_results(folders, tmp_path / "merged")
    merged = tmp_path / "merged"
    assert kept(read_runs(merged)) == want  # the report reads the merged union
    assert kept(read_traces_sweep(merged)) == want
    assert len(read_traces(merged, read_runs(merged).run_id)) == 3 * 3


def read_traces_sweep(folder: Path) -> pd.DataFrame:
    return traces_of(folder)[["run_id", "sweep"]].drop_duplicates()
