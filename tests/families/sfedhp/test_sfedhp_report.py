"""The sFedHP family's report page, built from a small but real results folder.

The fixture writes a toy 10-class svmlight file and runs three tiny sweeps through the
workflow's own steps (plan, make_data, run_shard, aggregate): a network on a data set named
like Fashion-MNIST with the paper's setting-1 partition (every method, two lambdas, a sparse
sFedHP run, two seeds), a linear model (Fig. 2's four methods) and a FedAvg-only data set that
belongs to another family.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fedsparse.aggregate import aggregate
from fedsparse.families.sfedhp.report import (
    FAMILY,
    build,
    config_summary,
    convex_claims,
    lambda_table,
    paper_setting,
    paper_values,
    run_scores,
    sparse_claims,
    sparse_mask,
    statement,
    table_claims,
)
from fedsparse.pipeline import make_data
from fedsparse.report.claims import NOT_MEASURED, VERDICTS, Claim
from fedsparse.report.page import Page
from fedsparse.shard import run_shard
from fedsparse.sweep import plan_sweep

SETTING_1 = {
    "kind": "label_cycle",
    "clients": 20,
    "labels_per_client": 5,
    "train_per_label": 200,
    "test_per_label": 800,
    "scope": "total",
}
MLP = {
    "kind": "mlp",
    "loss": "softmax",
    "l2": 1e-4,
    "hidden": [6],
    "activation": "relu",
    "init": {"kind": "glorot", "seed": 0},
}
GRID = {
    "stepsize": [0.05],
    "inner_stepsize": [0.05],
    "batch_size": [20],
    "local_steps": [4],
    "edge_rounds": [4],
    "inner_steps": [2],
}


def _svmlight(path: Path, rows_per_class: int = 1000, d: int = 10) -> Path:
    """Ten Gaussian classes, separable enough that a few rounds learn something."""
    rng = np.random.default_rng(0)
    centres = rng.normal(scale=2.0, size=(10, d))
    lines = []
    for c in range(10):
        X = centres[c] + rng.normal(size=(rows_per_class, d))
        lines += [f"{c} " + " ".join(f"{j + 1}:{v:.5f}" for j, v in enumerate(x)) for x in X]
    path.write_text("\n".join(lines) + "\n")
    return path


def _sweeps(svm: Path) -> list[dict]:
    data = {"kind": "svmlight", "path": str(svm), "task": "multiclass"}
    common = {"rounds": 6, "eval_every": 2, "seeds": [0, 1], "shard_size": 100, "grid": GRID}
    sparse = {
        "lambda1": [20],
        "lambda2": [20],
        "gamma1": [0.05],
        "gamma2": [0.05],
        "rho": [1e-3],
        "zero_tol": [1e-2],
    }
    network = {
        **common,
        "sweep": "toy-dnn",
        "datasets": {"fmnist-toy": {"data": data, "partition": SETTING_1, "model": MLP}},
        "algorithms": {
            "sfedhp": [
                {"lambda1": [5], "lambda2": [5]},
                {"lambda1": [20], "lambda2": [20]},
                sparse,
            ],
            "pfedme": {"lambda": [20]},
            "fedavg": {},
            "hierfavg": {"local_steps": [1]},
            "fedprox": {"mu": [0.001]},
            "heurfedamp": {"alpha_self": [0.5]},
            "perfedavg": {},
        },
    }
    linear = {
        **common,
        "sweep": "toy-mlr",
        "datasets": {
            "mlr-toy": {
                "data": data,
                "partition": SETTING_1,
                "model": {"loss": "softmax", "l2": 1e-3, "bias": True},
            }
        },
        "algorithms": {
            "sfedhp": {"lambda1": [25], "lambda2": [25]},
            "pfedme": {"lambda": [25]},
            "hierfavg": {"local_steps": [1]},
            "fedavg": {},
        },
    }
    other = {
        **common,
        "sweep": "toy-other",
        "seeds": [0],
        "datasets": {
            "other-family": {
                "data": data,
                "partition": {"kind": "iid", "clients": 4},
                "model": {"loss": "softmax"},
            }
        },
        "algorithms": {"fedavg": {}},
    }
    return [network, linear, other]


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    """A results folder made by the workflow's steps, as Snakemake runs them."""
    root = tmp_path_factory.mktemp("sfedhp-results")
    svm = _svmlight(root / "toy.svm")
    traces, runs = [], []
    for sweep in _sweeps(svm):
        plan = plan_sweep(sweep)
        for ds in plan.datasets:
            make_data({**sweep, "embedding_sample": 0}, ds, root / "data" / ds)
        for shard in plan.shards:
            t, r = root / "shards" / f"{shard}.parquet", root / "shards" / f"{shard}.runs.parquet"
            run_shard(sweep, shard, root / "data", t, r, plan_file=root / "no-plan.parquet")
            traces.append(t)
            runs.append(r)
    aggregate(traces, runs, root / "traces", root / "runs.parquet")
    return root


@pytest.fixture(scope="module")
def built(results, tmp_path_factory):
    out = tmp_path_factory.mktemp("report")
    (out / "tables").mkdir()
    page = Page(out)
    claims = build(page, results, out / "tables")
    html = page.write("sfedhp.html", FAMILY.title).read_text()
    return claims, html, out


def test_family_declaration():
    assert FAMILY.key == "sfedhp" and FAMILY.page_name() == "sfedhp.html"
    assert FAMILY.algorithms == {
        "sfedhp",
        "pfedme",
        "hierfavg",
        "fedprox",
        "perfedavg",
        "heurfedamp",
    }
    assert FAMILY.build is build


def test_data_sets_are_matched_to_the_paper_settings():
    s1, s2 = "label_cycle-l5-tr200-te800-total", "label_cycle-l5-tr900-te300-per_client"
    assert paper_setting("x", "fashion-mnist", s1, "mlp-100-relu")[0] == ("FMNIST", 1)
    assert paper_setting("x", "fashion-mnist", s2, "mlp-100-relu")[0] == ("FMNIST", 2)
    assert paper_setting("x", "mnist", s2, "mlp-100-relu")[0] == ("MNIST", 2)
    assert paper_setting("fmnist-s1", "", s1, "mlp-100-relu")[0] == ("FMNIST", 1)  # by name
    key, why = paper_setting("x", "fashion-mnist", s1, "linear+bias")
    assert key is None and "DNN" in why
    key, why = paper_setting("x", "fashion-mnist", "label_cycle-l5-tr300-te800-total", "mlp-1")
    assert key is None and "neither setting" in why
    assert paper_setting("cifar", "cifar10", s1, "mlp-1")[0] is None
    assert paper_setting("fmnist-named", "cifar10", s1, "mlp-1")[0] is None  # the source decides
    # pFedMe's generator (the authors' reading): its sizes are no setting; scored at setting 1
    from fedsparse.families.sfedhp.report import READINGS

    ac, authors = "label_cycle-l2-tr600-te200-per_client+pooled", READINGS[1].name
    assert READINGS[1].kind == "authors_code"
    assert paper_setting("x", "fashion-mnist", ac, "mlp-100-relu", authors)[0] == ("FMNIST", 1)
    assert paper_setting("x", "fashion-mnist", ac, "mlp-100-relu")[0] is None  # 2 labels, split
    s2_ac = "label_cycle-l2-tr900-te300-per_client+pooled"
    assert paper_setting("x", "mnist", s2_ac, "mlp-100-relu", authors)[0] == ("MNIST", 2)


def test_paper_rows_follow_the_hyperparameters():
    key = ("FMNIST", 1)
    row = pd.Series({"lambda1": 20.0, "lambda2": 20.0, "gamma1": 0.0, "gamma2": 0.0})
    assert paper_values(key, "sfedhp", row) == (98.42, 85.64)
    assert paper_values(key, "sfedhp", row.replace(20.0, 30.0)) == (91.94, 86.86)
    assert paper_values(key, "sfedhp", {**row, "gamma1": 0.001}) == (None, None)  # sparse
    assert paper_values(key, "sfedhp", {**row, "lambda2": 25.0}) == (None, None)
    assert paper_values(("MNIST", 2), "pfedme", {"lambda": 30.0}) == (52.08, 10.53)
    assert paper_values(key, "pfedme", {"lambda": 7.0}) == (None, None)
    assert paper_values(key, "fedprox", {"mu": 0.001}) == (None, 78.67)
    assert paper_values(key, "fedprox", {"mu": 0.1}) == (None, None)
    assert paper_values(key, "heurfedamp", {"alpha_self": 0.1}) == (95.0, None)
    assert paper_values(None, "fedavg", {}) == (None, None)


def test_statement_uses_the_two_point_rule():
    assert statement(84.0, None, 85.64, None)[0] == "agrees"
    verdict, text = statement(80.0, 97.9, 85.64, 98.42)
    assert verdict == "does not agree"
    assert "GM does not agree (5.6 pp below)" in text and "PM agrees (0.5 pp below)" in text
    assert statement(90.0, None, None, None)[0] == "no paper number"
    assert statement(float("nan"), None, 85.0, None)[0] == NOT_MEASURED


def test_table_next_to_the_paper(built, results):
    claims, html, out = built
    table = pd.read_csv(out / "tables" / "sfedhp_accuracy.csv")
    # fedavg of another family's data set stays out; the FedAvg-only data set too
    assert set(table["dataset"]) == {"fmnist-toy", "mlr-toy"}
    dnn = table[table["dataset"] == "fmnist-toy"].set_index("method")
    assert len(dnn) == 9  # 3 sFedHP + 6 baselines
    assert dnn.loc["sFedHP λ=20", "paper GM"] == "85.64 ± 0.04"
    assert dnn.loc["sFedHP λ=20", "paper PM"] == "98.42"
    assert dnn.loc["sFedHP λ=5", "paper GM"] == "84.01"
    assert dnn.loc["pFedMe λ=20", "paper PM"] == "98.81"
    assert dnn.loc["FedProx μ=0.001", "paper GM"] == "78.67 ± 0.04"
    assert dnn.loc["HeurFedAMP α=0.5", "paper PM"] == "98.28"
    sparse = [m for m in dnn.index if "γ1" in m]
    assert len(sparse) == 1 and dnn.loc[sparse[0], "verdict"] == "no paper number"
    assert (table.loc[table["dataset"] == "mlr-toy", "verdict"] == "no paper number").all()
    assert set(dnn["verdict"]) <= {"agrees", "does not agree", "no paper number"}
    # the cell is the mean ± std over seeds of each run's best round, recomputed here
    tr = pd.read_parquet(results / "traces")
    tr = tr[(tr["dataset"] == "fmnist-toy") & (tr["algorithm"] == "sfedhp")]
    tr = tr[(tr["lambda1"] == 20) & (tr["gamma1"] == 0)]
    best = 100 * tr.groupby("seed")["test_accuracy"].max()
    assert dnn.loc["sFedHP λ=20", "GM best"] == f"{best.mean():.2f} ± {best.std():.2f}"
    final = 100 * tr[tr["round"] == tr["round"].max()].groupby("seed")["pm_test_accuracy"].mean()
    assert dnn.loc["sFedHP λ=20", "PM final"] == f"{final.mean():.2f} ± {final.std():.2f}"
    assert "2 percentage points" in html


def test_claims_are_measured_where_the_runs_allow(built):
    claims, html, _ = built
    assert all(isinstance(c, Claim) and c.verdict in VERDICTS for c in claims)
    ids = set(re.findall(r'id="([^"]+)"', html))
    for c in claims:
        assert not c.anchor or c.anchor in ids, c.anchor
    by = {c.claim: c for c in claims}
    measured = [c for c in claims if c.verdict != NOT_MEASURED]

    def one(pattern: str) -> Claim:
        found = [c for c in claims if re.search(pattern, c.claim)]
        assert len(found) == 1, (pattern, [c.claim for c in claims])
        return found[0]

    lam20 = one(r"GM / PM accuracy on FMNIST setting 1 at λ = 20 \(Table IV\)")
    assert lam20.paper_value == "GM 85.64 ± 0.04 %, PM 98.42 %" and "2 seeds" in lam20.ours
    assert lam20.ours.startswith("sFedHP λ=20: GM ")  # which configuration, when several are run
    assert lam20.verdict != NOT_MEASURED and lam20.anchor == "sfedhp-fmnist-toy-table"
    one(r"at λ = 5 \(Table IV\)")
    best = one(r"best GM accuracy of all methods on FMNIST setting 1")
    assert best.verdict != NOT_MEASURED and "HierFAVG 83.55" in best.paper_value
    assert one(r"Hierarchical FedAvg beats flat FedAvg").verdict != NOT_MEASURED
    assert one(r"PM accuracy \(λ = 20\) is close to").verdict != NOT_MEASURED
    lam = one(r"GM accuracy rises with λ")
    assert lam.paper_value == "84.01 → 85.64 % (λ = 5 → 20)" and lam.verdict != NOT_MEASURED
    convex = one(r"orders sFedHP ≥ pFedMe ≥ HierFAVG")
    assert convex.where == "mlr-toy" and convex.verdict != NOT_MEASURED
    density = one(r"density falls to about 20")
    assert density.verdict != NOT_MEASURED and density.anchor == "sfedhp-fmnist-toy-sparse"
    bits = one(r"fewer cloud-link bits")
    saving = float(re.match(r"(-?[\d.]+)% fewer", bits.ours).group(1))
    assert bits.verdict == ("agrees" if saving >= 70 else "does not agree")
    assert len(measured) >= 10 and len(by) == len(claims)


def test_sparse_run_is_sparser_and_cheaper(results):
    summary = config_summary(run_scores(results))
    dnn = summary[summary["dataset"] == "fmnist-toy"].set_index("label")
    sparse = [m for m in dnn.index if "γ1" in m][0]
    assert dnn.loc[sparse, "density"] < dnn.loc["sFedHP λ=20", "density"]
    assert dnn.loc[sparse, "bits"] < dnn.loc["pFedMe λ=20", "bits"]
    # FedAvg now reports its bits: dense both ways, like pFedMe's per client
    assert dnn.loc["FedAvg", "bits"] == pytest.approx(dnn.loc["pFedMe λ=20", "bits"], rel=1e-9)


def test_claims_without_runs_are_not_measured(results):
    summary = config_summary(run_scores(results))
    claims = convex_claims(summary[summary["dataset"] == "fmnist-toy"], results)
    assert [c.verdict for c in claims] == [NOT_MEASURED, NOT_MEASURED]
    assert "config/sfedhp-convex.yaml" in claims[0].ours
    no_sparse = summary[~sparse_mask(summary)]
    assert {c.verdict for c in sparse_claims(no_sparse)} == {NOT_MEASURED}
    # a data set without sFedHP: its ordering and gap claims say so instead of failing
    baselines = summary[(summary["dataset"] == "fmnist-toy") & (summary["algorithm"] != "sfedhp")]
    found = table_claims(baselines, ("FMNIST", 1), "here", "a")
    assert [c.verdict for c in found if "sFedHP" in c.claim] == [NOT_MEASURED, NOT_MEASURED]
    assert "no runs of sFedHP" in found[0].ours
    assert lambda_table(baselines, ("FMNIST", 1)).empty


def test_figures_are_written(built):
    _, html, out = built
    names = {p.stem for p in (out / "figures").glob("*.png")}
    assert {
        "sfedhp-fmnist-toy-accuracy",
        "sfedhp-mlr-toy-accuracy",
        "sfedhp-fmnist-toy-lambda",
        "sfedhp-fmnist-toy-sparse",
    } <= names
    assert html.count("data:image/png;base64,") == len(names)


def _with_more_seeds(results: Path, dest: Path, copies: int = 2) -> Path:
    """``results`` with every run there ``copies`` more times, under new run ids and seeds (the
    same configurations, more seeds), as a results folder at ``dest``."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from fedsparse.aggregate import write_traces_dataset
    from fedsparse.results import RUNS_SCHEMA, TRACE_SCHEMA, read_results, write_parquet_atomic

    def copied(table: pa.Table) -> pa.Table:
        parts = [table]
        for k in range(1, copies + 1):
            ids = pc.binary_join_element_wise(table["run_id"], pa.scalar(f"copy{k}"), "-")
            seeds = pc.add(table["seed"], pa.scalar(100 * k, pa.int64()))
            part = table.set_column(table.schema.get_field_index("run_id"), "run_id", ids)
            parts.append(part.set_column(part.schema.get_field_index("seed"), "seed", seeds))
        return pa.concat_tables(parts)

    traces = read_results([results], "SELECT * FROM traces")
    write_traces_dataset(
        copied(traces.select(TRACE_SCHEMA.names).cast(TRACE_SCHEMA)), dest / "traces"
    )
    runs = read_results([results], "SELECT * FROM runs")
    runs = runs.select(RUNS_SCHEMA.names).cast(RUNS_SCHEMA)
    write_parquet_atomic(copied(runs), dest / "runs.parquet")
    return dest


def test_more_seeds_add_a_row_per_run_not_their_traces(results, tmp_path):
    """From the traces the page reads one row per run (its scores) and the per-round means
    over seeds that its figures draw: two more seeds of every configuration add one row per
    run to what it reads, not their trace rows."""
    from fedsparse.report.data import ReportData

    wider = _with_more_seeds(results, tmp_path / "wider")
    read, runs, rows = {}, {}, {}
    for name, folder in (("base", results), ("wider", wider)):
        out = tmp_path / f"page-{name}"
        out.mkdir()
        with ReportData(folder) as data:
            build(Page(out), data, out)
            read[name] = sum(n for sql, n in data.queries if "traces" in sql)
            runs[name] = data.runs_table.num_rows
            rows[name] = int(data.frame("SELECT count(*) AS n FROM traces")["n"].iloc[0])
    assert runs["wider"] == 3 * runs["base"] and rows["wider"] == 3 * rows["base"]
    assert read["wider"] - read["base"] == runs["wider"] - runs["base"]
    assert read["base"] < rows["base"]


# ---- the family's sweep configs --------------------------------------------------------------

ROOT = Path(__file__).resolve().parents[3]


def _plan(name: str):
    import yaml

    return plan_sweep(yaml.safe_load((ROOT / "config" / f"sfedhp-{name}.yaml").read_text())).runs


def _values(runs, algo: str, *keys) -> set:
    return {
        tuple(r.config["params"][k] for k in keys) for r in runs if r.config["algorithm"] == algo
    }


def test_paper_config_is_tables_one_to_five():
    from fedsparse.config import partition_label
    from fedsparse.families.sfedhp.report import READINGS
    from fedsparse.report.claims import reading_of

    every = _plan("paper")
    kinds = {r.run_id: reading_of(READINGS, r.config).kind for r in every}
    runs = [r for r in every if kinds[r.run_id] == "paper_text"]
    authors = [r for r in every if kinds[r.run_id] == "authors_code"]
    # the text's 4 settings, and pFedMe's generator on both data sets (sFedHP at two anchors)
    assert len(runs) == 4 * 21 * 3 and len(authors) == 2 * (21 + 5) * 3
    assert len(every) == len(runs) + len(authors) and {r.config["rounds"] for r in every} == {800}
    for r in authors:  # scored against the setting-1 tables, the generator's sizes being no setting
        label = partition_label(r.config["partition"])
        key = paper_setting("", r.config["dataset"]["source"], label, "mlp", READINGS[1].name)[0]
        assert key[1] == 1 and label.endswith("+pooled")
    assert {r.config["seed"] for r in runs} == {0, 1, 2}
    grid = {5.0, 15.0, 20.0, 25.0, 30.0}
    assert _values(runs, "sfedhp", "lambda1", "lambda2", "gamma1", "gamma2") == {
        (lam, lam, 0.0, 0.0) for lam in grid
    }
    assert {v for (v,) in _values(runs, "pfedme", "lambda")} == grid
    assert _values(runs, "fedprox", "mu") == {(0.001,), (0.01,), (0.1,), (1.0,)}
    assert _values(runs, "heurfedamp", "alpha_self") == {(0.1,), (0.5,)}
    assert _values(runs, "sfedhp", "edge_rounds", "inner_steps", "batch_size", "edges") == {
        (20, 5, 20, 4)
    }
    settings = set()
    for r in runs:
        assert r.config["model"]["hidden"] == [500, 200]
        if r.config["algorithm"] != "perfedavg":  # its stepsize is the meta step beta
            assert r.config["params"]["stepsize"] == 0.05
        source = r.config["dataset"]["source"]
        settings.add(paper_setting("", source, partition_label(r.config["partition"]), "mlp")[0])
    assert settings == {("MNIST", 1), ("MNIST", 2), ("FMNIST", 1), ("FMNIST", 2)}


def test_sparse_config_is_fig_3():
    runs = _plan("sparse")
    keys = ("gamma1", "gamma2", "density_floor", "gamma2_rounds", "lambda1", "lambda2", "rho")
    assert _values(runs, "sfedhp", *keys) == {
        (0.001, 0.001, 0.2, 100, 25.0, 25.0, 6e-5),
        (0.0, 0.0, 0.0, 0, 25.0, 25.0, 6e-5),
    }
    assert _values(runs, "pfedme", "lambda") == {(25.0,)}
    # Remark 1's network: 784-100-10 has the paper's 79,510 parameters
    assert {tuple(r.config["model"]["hidden"]) for r in runs} == {(100,)}
    assert {r.config["rounds"] for r in runs} == {800}


def test_convex_config_is_fig_2():
    runs = _plan("convex")
    assert {r.config["algorithm"] for r in runs} == {"sfedhp", "pfedme", "hierfavg", "fedavg"}
    assert all(r.config["model"].get("kind", "linear") == "linear" for r in runs)
    assert _values(runs, "sfedhp", "lambda1", "lambda2", "edge_rounds", "inner_steps") == {
        (25.0, 25.0, 20, 5)
    }
    assert _values(runs, "pfedme", "lambda", "local_steps", "inner_steps") == {(25.0, 20, 5)}
    assert {(r.config["params"]["stepsize"], r.config["params"]["batch_size"]) for r in runs} == {
        (0.05, 20)
    }


def test_quick_config_has_all_seven_methods():
    runs = _plan("quick")
    assert {r.config["algorithm"] for r in runs} == {*FAMILY.algorithms, "fedavg"}
