"""Accuracy against communication: the run totals in runs.parquet, the non-dominated front
(against a brute-force check), ``fedsparse best --pareto`` and the report's front page."""

from __future__ import annotations

import math
import shutil
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from conftest import run_sweep

from fedsparse.cli import main
from fedsparse.query import (
    BEST_CONFIG_COLUMNS,
    open_results,
    pareto_candidates,
    pareto_configurations,
    pareto_front,
)
from fedsparse.query.read import read_traces

# ---------------------------------------------------------------------------- the front


def brute_front(metric, cost, higher: bool) -> np.ndarray:
    """O(n^2), straight from the definition."""
    m = np.asarray(metric, float) * (1 if higher else -1)
    c = np.asarray(cost, float)
    n = len(m)
    out = np.ones(n, bool)
    for i in range(n):
        for j in range(n):
            if m[j] >= m[i] and c[j] <= c[i] and (m[j] > m[i] or c[j] < c[i]):
                out[i] = False
                break
    return out


@pytest.mark.parametrize("higher", [True, False])
def test_front_matches_brute_force_on_random_points_with_ties(higher):
    rng = np.random.default_rng(0)
    for trial in range(400):
        n = int(rng.integers(1, 30))
        if trial % 3 == 0:  # few distinct values: many ties on one axis, on both, duplicates
            m, c = rng.integers(0, 4, n).astype(float), rng.integers(0, 4, n).astype(float)
        else:
            m, c = rng.normal(size=n), rng.lognormal(size=n)
        got = pareto_front(m, c, higher)
        np.testing.assert_array_equal(got, brute_front(m, c, higher), err_msg=f"{m} {c}")
        assert got.any()  # a non-empty set always has a non-dominated point


def test_front_edge_cases():
    assert pareto_front([0.5], [10.0], True).tolist() == [True]  # one point
    assert pareto_front([], [], True).tolist() == []
    # equal on both: neither dominates the other, both stay; a third equal in cost but worse
    assert pareto_front([0.9, 0.9, 0.8], [5.0, 5.0, 5.0], True).tolist() == [True, True, False]
    # equal metric, higher cost: dominated; equal cost, worse metric: dominated
    assert pareto_front([0.9, 0.9], [5.0, 6.0], True).tolist() == [True, False]
    assert pareto_front([1.0, 2.0], [5.0, 5.0], False).tolist() == [True, False]
    # a cheaper point that is better: the dearer one is off; a cheaper worse one: both on
    assert pareto_front([0.9, 0.8], [1.0, 2.0], True).tolist() == [True, False]
    assert pareto_front([0.8, 0.9], [1.0, 2.0], True).tolist() == [True, True]
    with pytest.raises(ValueError, match="finite"):
        pareto_front([0.5, math.nan], [1.0, 2.0], True)
    with pytest.raises(ValueError, match="finite"):
        pareto_front([0.5, 0.6], [1.0, math.inf], True)


# ---------------------------------------------------------------------------- results

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
    "log": {  # a test split: test_accuracy at the last round
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
SWEEP = {
    "sweep": "p",
    "rounds": 8,
    "seeds": [0, 1],
    "embedding_sample": 0,
    "datasets": DATASETS,
    "algorithms": {"fedht": {}, "distiht": {"local_steps": [1]}},
    # sparsity changes the bytes; 1e5 diverges (and sends as few bytes as it ran rounds)
    "grid": {
        "stepsize": [0.003, 0.01, 1e5],
        "local_steps": [2, 3],
        "sparsity": [5, 10],
        "batch_size": [5],
    },
}


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    with warnings.catch_warnings():  # the diverging step size overflows, as intended
        warnings.simplefilter("ignore", RuntimeWarning)
        return run_sweep(tmp_path_factory.mktemp("pareto") / "r", SWEEP)


def last_rows(folder: Path) -> pd.DataFrame:
    t = read_traces(folder).to_pandas()
    return t.sort_values("round").groupby("run_id").tail(1).set_index("run_id")


def test_runs_carry_the_totals_of_their_final_round(folder):
    runs = pd.read_parquet(folder / "runs.parquet").set_index("run_id")
    last = last_rows(folder).loc[runs.index]
    assert (runs["final_round"] == last["round"]).all()
    assert (runs["total_bytes_up"] == last["bytes_up"]).all()
    assert (runs["total_bytes_down"] == last["bytes_down"]).all()
    np.testing.assert_array_equal(runs["total_time"], last["time"])
    assert runs["total_bytes_up"].gt(0).all() and runs["total_time"].gt(0).all()
    # the diverged runs stopped early: fewer bytes than their algorithm's full runs
    div = runs[runs.status == "diverged"]
    assert len(div) and (div.final_round < 8).all()


def test_older_runs_files_get_their_totals_from_the_traces(folder, tmp_path):
    old = tmp_path / "old"
    shutil.copytree(folder, old)
    runs = pq.read_table(old / "runs.parquet")
    pq.write_table(
        runs.drop_columns(["total_bytes_up", "total_bytes_down", "total_time"]),
        old / "runs.parquet",
    )
    sql = "SELECT run_id, total_bytes_up, total_bytes_down, total_time FROM runs ORDER BY run_id"
    with open_results([old]) as res:
        got = res.con.sql(sql).to_df()
    with open_results([folder]) as res:
        want = res.con.sql(sql).to_df()
    pd.testing.assert_frame_equal(got, want)
    assert want["total_bytes_up"].notna().all()


def pandas_front(folder: Path, metric: str, column: str, higher: bool) -> pd.DataFrame:
    """The front written with pandas and the brute-force check, from the Parquet files."""
    runs = pd.read_parquet(folder / "runs.parquet")
    last = last_rows(folder)
    if metric == "final_test_accuracy":
        runs["value"] = runs.run_id.map(last.test_accuracy).astype(float)
    else:
        runs["value"] = runs[metric].astype(float)
    if column == "total_bytes":
        runs["cost"] = (runs.total_bytes_up + runs.total_bytes_down).astype(float)
    else:
        runs["cost"] = runs[column].astype(float)
    keys = list(BEST_CONFIG_COLUMNS)
    ok = runs.status.ne("diverged") & np.isfinite(runs.value) & np.isfinite(runs.cost)
    runs = runs.assign(ok=ok)
    g = runs.groupby(keys, dropna=False)
    configs = g.agg(
        value=("value", "mean"), cost=("cost", "mean"), seeds=("seed", "nunique"), ok=("ok", "all")
    ).reset_index()
    configs = configs[configs.ok]
    fronts = []
    for _, c in configs.groupby("dataset"):
        fronts.append(c[brute_front(c.value.to_numpy(), c.cost.to_numpy(), higher)])
    return pd.concat(fronts).sort_values(["dataset", "cost"]).reset_index(drop=True)


@pytest.mark.parametrize(
    "metric, column, higher",
    [("final_objective", "total_bytes_up", False), ("final_test_accuracy", "total_bytes", True)],
)
def test_best_pareto_matches_the_brute_force_front(folder, metric, column, higher):
    with open_results([folder]) as res:
        got = pareto_configurations(res, metric, column).to_pandas()
        every = pareto_candidates(res, metric, column).to_pandas()
    want = pandas_front(folder, metric, column, higher)
    assert len(got) == len(want) >= 2
    assert set(got.dataset) == set(want.dataset)
    for col in ("dataset", "algorithm", "stepsize", "local_steps", "sparsity"):
        assert got[col].astype(object).tolist() == want[col].astype(object).tolist(), col
    np.testing.assert_allclose(got[f"mean_{metric}"], want["value"], rtol=1e-12)
    np.testing.assert_allclose(got[f"mean_{column}"], want["cost"], rtol=1e-12)
    assert got["seeds"].tolist() == want["seeds"].tolist() == [2] * len(got)
    assert got[f"mean_{column}"].is_monotonic_increasing or got.dataset.nunique() > 1
    # the diverged configurations (step size 1e5) are compared but never on the front,
    # although they sent the fewest bytes
    diverged = every[every.stepsize == 1e5]
    assert len(diverged) and not diverged.eligible.any() and not diverged.front.any()
    cheapest = every.loc[every.groupby("dataset")[f"mean_{column}"].idxmin()]
    assert (cheapest.stepsize == 1e5).all()
    assert "grid_edges" in got.columns


def test_best_pareto_command_table_and_files(folder, tmp_path, capsys):
    assert main(["best", str(folder), "--pareto", "total_bytes_up"]) == 0
    lines = capsys.readouterr().out.splitlines()
    head = lines[0].split()
    assert head[:2] == ["dataset", "algorithm"]
    assert head[-4:] == ["mean_final_objective", "mean_total_bytes_up", "seeds", "grid_edges"]
    assert "rounds" not in head and "batch_size" not in head  # the same everywhere: a note
    notes = " ".join(" ".join(lines).split())  # the notes are wrapped
    assert "no other beats on both mean final_objective (lower is better)" in notes
    assert "left out (a diverged run, or no finite value)" in notes
    assert "the same in every configuration: " in notes and "batch_size 5" in notes
    with open_results([folder]) as res:
        front = pareto_configurations(res, "final_objective", "total_bytes_up").to_pandas()
    assert f"({len(front)} rows)" in lines

    assert (
        main(["best", str(folder), "--pareto", "total_bytes_up", "-o", str(tmp_path / "f.csv")])
        == 0
    )
    csv = pd.read_csv(tmp_path / "f.csv")
    assert csv.columns.tolist() == front.columns.tolist() and len(csv) == len(front)
    assert set(BEST_CONFIG_COLUMNS) <= set(csv.columns)  # files hold every column
    out = tmp_path / "f.parquet"
    assert main(["best", str(folder), "--pareto", "total_bytes_up", "-o", str(out)]) == 0
    assert pq.read_table(out).num_rows == len(front)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--pareto", "bytes"], "best: --pareto bytes: not a cost column (one of: total_bytes_up"),
        (["--pareto", "total_bytes_up", "--metric", "acc"], "best: unknown metric 'acc'"),
        (["--pareto", "total_bytes_up", "--by", "nope"], "--by nope: not a column"),
    ],
)
def test_best_pareto_bad_input_is_one_line(folder, argv, message, capsys):
    assert main(["best", str(folder), *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err


def test_the_report_draws_each_data_sets_front(folder, tmp_path):
    """pareto.html: a front figure per data set with two algorithms, the front's table;
    tables/pareto.csv; the family page links to each front; the index lists the page."""
    from fedsparse.report import build_report

    index = build_report(folder, tmp_path / "report")
    report = index.parent
    page = (report / "pareto.html").read_text()
    for ds in ("lin", "log"):
        assert f'id="front-{ds}"' in page
        assert (report / "figures" / f"pareto_{ds}.png").stat().st_size > 10_000
    table = pd.read_csv(report / "tables" / "pareto.csv")
    assert set(table.section) == {"lin", "log"}
    assert set(table.metric) == {"final_objective", "final_test_accuracy"}  # log: a test split
    # the overall front is fedsparse best --pareto total_bytes on the section's metric
    with open_results([folder]) as res:
        for metric, ds in (("final_objective", "lin"), ("final_test_accuracy", "log")):
            want = pareto_configurations(res, metric, "total_bytes").to_pandas()
            want = want[want.dataset == ds]
            got = table[(table.section == ds) & table.overall_front]
            assert sorted(got.value) == pytest.approx(sorted(want[f"mean_{metric}"]))
    assert table.algorithm_front.all() and {"fedht", "distiht"} <= set(table.algorithm)
    assert 1e5 not in set(table.stepsize)  # diverged: on no front
    ht = (report / "ht.html").read_text()
    assert 'href="pareto.html#front-lin"' in ht and 'href="pareto.html#front-log"' in ht
    assert 'href="pareto.html"' in index.read_text()


def test_claims_about_communication_cite_the_front_of_their_data_set(tmp_path):
    from fedsparse.report.claims import AGREES, Claim, claims_frame
    from fedsparse.report.page import Page
    from fedsparse.report.verdicts import claims_section

    rows = [
        Claim("P", "80 % fewer bits than pFedMe", "80 %", "78 %", AGREES, where="fmnist-x, λ=20"),
        Claim("P", "a better loss at a fixed time", "", "yes", AGREES, where="elsewhere"),
        Claim("P", "more accurate", "", "yes", AGREES, where="fmnist-x"),
    ]
    page = Page(tmp_path)
    claims_section(page.parts, claims_frame(rows), {"fmnist": "fmnist", "fmnist-x": "fmnist-x"})
    html = "".join(page.parts)
    assert html.count('href="pareto.html#front-fmnist-x">front</a>') == 1  # the longest name
    assert html.count('href="pareto.html">front</a>') == 1  # no data set named: the page
    assert html.count(">front</a>") == 2  # not about communication: no link
    page = Page(tmp_path)
    # no fronts in the report: no link, no sentence
    claims_section(page.parts, claims_frame(rows), {})
    assert ">front</a>" not in "".join(page.parts) and "pareto.html" not in "".join(page.parts)


def test_the_budget_front_is_the_best_reached_within_each_budget(folder, tmp_path):
    """pareto_budget.csv, per data set and algorithm: at each budget, the best mean metric any
    configuration without a diverged run reached by the round its runs had sent that many
    bytes (brute force over the traces); the page's title names the metrics it plots."""
    from fedsparse.report import build_report

    report = build_report(folder, tmp_path / "report").parent
    budget = pd.read_csv(report / "tables" / "pareto_budget.csv")
    runs = pd.read_parquet(folder / "runs.parquet")
    keys = ["dataset", "algorithm", "stepsize", "local_steps", "sparsity", "batch_size"]
    runs["config"] = runs.groupby(keys).ngroup()
    bad = set(runs.loc[runs["status"] == "diverged", "config"])
    ok = runs[~runs["config"].isin(bad)][["run_id", "config", *keys]]
    assert bad and len(ok)  # the grid's 1e5 diverged: left out
    t = read_traces(folder).to_pandas().drop(columns=keys[1:], errors="ignore")
    t = t.drop(columns="dataset").merge(ok, on="run_id")
    t["bytes"] = t["bytes_up"] + t["bytes_down"]
    for ds, metric, higher in (("lin", "objective", False), ("log", "test_accuracy", True)):
        mine = t[(t["dataset"] == ds) & t[metric].notna()]
        means = mine.groupby(["algorithm", "config", "round"])[[metric, "bytes"]].mean()
        means = means.reset_index()
        for algo in ("fedht", "distiht", "overall"):
            pts = means if algo == "overall" else means[means["algorithm"] == algo]
            rows = budget[(budget["section"] == ds) & (budget["algorithm"] == algo)]
            assert len(rows) and set(rows["metric"]) == {f"final_{metric}"}
            for b, v in zip(rows["bytes"], rows["value"], strict=True):
                within = pts.loc[pts["bytes"] <= b, metric]
                assert v == pytest.approx(within.max() if higher else within.min())
            steps = np.diff(rows["value"].to_numpy())
            assert (steps > 0).all() if higher else (steps < 0).all()  # improves at each step
    lin = budget[(budget["section"] == "lin") & (budget["algorithm"] == "overall")]
    assert len(lin) > 1  # the objective falls: a staircase (the toy's accuracy may not rise)
    page = (report / "pareto.html").read_text()
    assert "<title>Objective and test accuracy against communication</title>" in page
    assert "Accuracy against communication" not in page
