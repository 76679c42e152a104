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

from fedsparse.families.sfedhp import settings
from fedsparse.families.sfedhp.analysis import (
    config_summary,
    convex_claims,
    lambda_table,
    paper_table,
    paper_values,
    run_scores,
    sparse_claims,
    sparse_mask,
    table_claims,
)
from fedsparse.families.sfedhp.report import FAMILY, build
from fedsparse.pipeline.shard_runner import run_shard
from fedsparse.pipeline.steps import make_data
from fedsparse.report.claims import (
    DERIVED,
    NOT_AT_SETTING,
    NOT_MEASURED,
    PAPER_CLAIM,
    SCORED,
    STAND_IN,
    VERDICTS,
    Claim,
    require_evidence,
)
from fedsparse.report.page import Page
from fedsparse.results.aggregate import aggregate
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


def _config(source, partition, model, kind="idx"):
    return {"dataset": {"kind": kind, "source": source}, "partition": partition, "model": model}


def _table_of(source, partition, model=None, kind="idx"):
    config = _config(source, partition, model or {"kind": "mlp", "hidden": [100]}, kind)
    return paper_table(settings.data_of(config), settings.model_of(config))


def test_data_sets_are_shown_against_their_data_s_table():
    s2 = {**SETTING_1, "train_per_label": 900, "test_per_label": 300, "scope": "per_client"}
    assert _table_of("fashion-mnist", SETTING_1)[0] == ("FMNIST", 1)
    assert _table_of("fashion-mnist", s2) == (("FMNIST", 2), "FMNIST setting 2 (Table V)")
    assert _table_of("mnist", s2)[0] == ("MNIST", 2)
    key, why = _table_of("fashion-mnist", SETTING_1, {"loss": "softmax", "bias": True})
    assert key is None and "the tables are the network's" in why
    assert _table_of("cifar10", SETTING_1)[0] is None
    # the name decides only where there is no source
    by_name = {"kind": "svmlight", "name": "fmnist-toy"}
    data = settings.data_of({"dataset": by_name, "partition": SETTING_1})
    assert data["data"] == "FMNIST" and settings.data_name("cifar10", "fmnist-x") == "cifar10"
    # a partition that is no setting (pFedMe's generator: 2 labels, pooled) is shown against
    # setting 1 for reference; its claims are not at the paper's setting (test below)
    ac = {
        **SETTING_1,
        "labels_per_client": 2,
        "train_per_label": 600,
        "test_per_label": 200,
        "test_pool": "pooled",
    }
    key, why = _table_of("fashion-mnist", ac)
    assert key == ("FMNIST", 1) and "no setting of the paper" in why and "pooled" in why
    odd = {**SETTING_1, "train_per_label": 300}
    assert "no setting of the paper" in _table_of("mnist", odd)[1]
    # the networks as the settings name them
    mlp = {"kind": "mlp", "hidden": [500, 200]}
    assert settings.model_of(_config("mnist", SETTING_1, mlp)) == settings.PAPER_MODEL
    small = _config("mnist", SETTING_1, {**mlp, "hidden": [100]})
    assert settings.model_of(small) == settings.MODEL_STAND_IN[0] == "784-100-10"
    linear = _config("mnist", SETTING_1, {"loss": "softmax"})
    assert settings.model_of(linear) == settings.MLR_MODEL
    assert settings.model_of(_config(None, SETTING_1, mlp, "svmlight")) == "d-500-200-k"


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


def test_every_claim_declares_the_paper_s_setting():
    """Per claim: the data and partition of its table or figure, 800 rounds, 3 seeds (the
    paper's "at least 3 times"), the protocol's hyperparameters, the methods it names; the
    784-100-10 network and (for the MNIST-only figures) Fashion-MNIST as declared stand-ins."""
    found = settings.claim_settings()
    assert len(found) == 4 * (2 * 5 + 3) + 5
    for text, s in found:
        assert s.rounds == 800 and s.seeds == 3, text
        assert {"η1": 0.05, "|D|": 20, "R": 20}.items() <= s.hyper.items(), text
        assert s.methods, text
        if "Fig. 2" in text:
            assert s.model == "MLR 784-10" and "model" not in s.stand_ins
        else:
            assert s.model == "784-500-200-10"
            assert s.stand_ins["model"][0] == "784-100-10"
        if text.startswith(("Convex", "Sparse")):  # Figs. 2-3, MNIST's only: FMNIST stands in
            assert s.data["data"] == "MNIST" and s.stand_ins["data"][0] == "FMNIST"
            assert s.data["train/test split"] == "75/25"
        else:  # each table is its own data set's: no data stand-in
            assert "data" not in s.stand_ins and s.data["labels per client"] == 5
            assert s.data["test rows"] == "from the test file"
    by = dict(found)
    row = by["sFedHP's GM accuracy on FMNIST setting 1 at λ = 20 (Table IV)"]
    assert row.data["data"] == "FMNIST" and row.data["train/test images per label"] == "200/800"
    assert row.hyper["λ1 = λ2"] == 20 and row.hyper["γ1 = γ2"] == 0 and row.hyper["K"] == 5
    assert row.methods == ("sFedHP",)
    assert "800 rounds" in row.describe() and "3 seeds" in row.describe()
    best = by["sFedHP has the best GM accuracy of all methods on MNIST setting 2 (Table I)"]
    assert best.data["train/test images per label"] == "900/300"
    assert set(best.methods) == {"sFedHP", "pFedMe", "FedAvg", "HierFAVG", "FedProx"}
    hier = by["Hierarchical FedAvg beats flat FedAvg in GM accuracy on FMNIST setting 2 (Table I)"]
    assert hier.methods == ("HierFAVG", "FedAvg") and "K" not in hier.hyper
    trend = by["sFedHP's GM accuracy rises with λ (Tables II–V, Fig. 4), on FMNIST setting 1"]
    assert (trend.hyper["λ from"], trend.hyper["λ to"]) == (5, 30)
    bits = by["Sparse sFedHP needs about 80 % fewer cloud-link bits than pFedMe (Fig. 3c)"]
    assert bits.methods == ("sFedHP (sparse)", "pFedMe") and bits.hyper["density floor"] == 0.2
    assert bits.hyper["γ1 = γ2"] == 0.001 and bits.hyper["λ1 = λ2"] == 25


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
    # a toy run never yields a paper verdict: every paper number is not at its setting,
    # and the row says why
    numbered = dnn[dnn["verdict"] != "no paper number"]
    assert len(numbered) == 8
    for method, r in numbered.iterrows():
        parts = r["verdict"].split("; ")
        assert all(p.endswith(NOT_AT_SETTING) for p in parts), (method, r["verdict"])
        assert "needs 800 rounds, ran 6" in r["unmet"] and "3 seeds, ran 2" in r["unmet"]
        assert "model 784-500-200-10, ran d-6-k" in r["unmet"]
    assert dnn.loc["sFedHP λ=20", "verdict"] == f"GM {NOT_AT_SETTING}; PM {NOT_AT_SETTING}"
    assert "K 5, ran 2" in dnn.loc["sFedHP λ=20", "unmet"]
    assert "K " not in dnn.loc["FedAvg", "unmet"]  # FedAvg has no K
    # the cell is the mean ± std over seeds of each run's best round, recomputed here
    tr = pd.read_parquet(results / "traces")
    tr = tr[(tr["dataset"] == "fmnist-toy") & (tr["algorithm"] == "sfedhp")]
    tr = tr[(tr["lambda1"] == 20) & (tr["gamma1"] == 0)]
    best = 100 * tr.groupby("seed")["test_accuracy"].max()
    assert dnn.loc["sFedHP λ=20", "GM best"] == f"{best.mean():.2f} ± {best.std():.2f}"
    final = 100 * tr[tr["round"] == tr["round"].max()].groupby("seed")["pm_test_accuracy"].mean()
    assert dnn.loc["sFedHP λ=20", "PM final"] == f"{final.mean():.2f} ± {final.std():.2f}"
    assert "lies within ± 1 points of the" in html


def _one(claims, pattern: str) -> Claim:
    found = [c for c in claims if re.search(pattern, c.claim)]
    assert len(found) == 1, (pattern, [c.claim for c in claims])
    return found[0]


def test_toy_runs_are_not_at_the_paper_s_setting(built):
    """The toy fixture (a 6-unit network, 6 rounds, 2 seeds, K = 2, R = 4) scores no paper
    claim: each row is not at the paper's setting and lists what is unmet; the derived
    expectations of ours are scored with their interval."""
    claims, html, _ = built
    assert all(isinstance(c, Claim) and c.verdict in VERDICTS for c in claims)
    ids = set(re.findall(r'id="([^"]+)"', html))
    for c in claims:
        assert not c.anchor or c.anchor in ids, c.anchor
    checked = require_evidence(claims)
    assert checked == claims  # every scored paper claim went through judge
    paper = [c for c in claims if c.claim_kind == PAPER_CLAIM]
    assert not [c for c in paper if c.verdict in SCORED]
    for c in paper:
        assert c.needs, c.claim  # the setting in words, also where nothing was measured
        assert c.verdict in (NOT_AT_SETTING, NOT_MEASURED), c.claim
        if c.verdict == NOT_AT_SETTING:
            assert c.unmet and c.seeds == 2, c.claim
    lam20 = _one(claims, r"sFedHP's GM accuracy on FMNIST setting 1 at λ = 20 \(Table IV\)")
    assert lam20.paper_value == "GM 85.64 ± 0.04 %" and "2 seeds" in lam20.ours
    assert lam20.ours.startswith("sFedHP λ=20: GM ")  # which configuration, when several are run
    assert lam20.anchor == "sfedhp-fmnist-toy-table" and lam20.interval.endswith("t over 2 seeds)")
    # Table I's ± 0.04 is the spread of the paper's runs: the shared ± 1 point is the band
    assert lam20.tolerance == "85.64 ± 1 points: [84.64, 86.64]"
    pm20 = _one(claims, r"sFedHP's PM accuracy on FMNIST setting 1 at λ = 20")
    assert pm20.tolerance.startswith("98.42 ± 1 points")  # no ± in the paper: the shared band
    for unmet in ("needs 800 rounds, ran 6", "3 seeds, ran 2", "K 5, ran 2", "R 20, ran 4"):
        assert unmet in lam20.unmet
    _one(claims, r"GM accuracy on FMNIST setting 1 at λ = 5 \(Table IV\)")
    best = _one(claims, r"best GM accuracy of all methods on FMNIST setting 1")
    assert best.verdict == NOT_AT_SETTING and "HierFAVG 83.55" in best.paper_value
    assert best.tolerance == "sFedHP's GM minus the best other method's GM (pp) > 0"
    assert "bootstrap over 2 seeds" in best.interval
    hier = _one(claims, r"Hierarchical FedAvg beats flat FedAvg")
    assert hier.verdict == NOT_AT_SETTING and "E " not in hier.unmet  # E = 4 is met
    gap = _one(claims, r"PM accuracy \(λ = 20\) is close to")
    assert gap.claim_kind == DERIVED and gap.verdict in SCORED and gap.seeds == 2
    assert gap.interval and not gap.needs  # ours: not gated, but with its interval
    lam = _one(claims, r"GM accuracy rises with λ")
    assert lam.paper_value == "84.01 → 86.86 % (λ = 5 → 30)" and lam.verdict == NOT_AT_SETTING
    assert "λ to 30, ran 20" in lam.unmet and "λ from" not in lam.unmet
    falls = _one(claims, r"PM accuracy falls as λ grows")
    assert falls.claim_kind == DERIVED and falls.seeds == 2
    convex = _one(claims, r"orders sFedHP ≥ pFedMe ≥ HierFAVG")
    assert convex.where == "mlr-toy" and convex.verdict == NOT_AT_SETTING
    assert (
        "data MNIST, ran mlr-toy" in convex.unmet
        and "model MLR 784-10, ran MLR d-k" in convex.unmet
    )
    density = _one(claims, r"density falls to about 20")
    assert density.verdict == NOT_AT_SETTING and density.anchor == "sfedhp-fmnist-toy-sparse"
    assert "γ1 = γ2 0.001, ran 0.05" in density.unmet and "sFedHP (sparse)" not in density.unmet
    assert density.tolerance.startswith("≈0.2x within a factor 1.5")
    bits = _one(claims, r"fewer cloud-link bits")
    assert bits.verdict == NOT_AT_SETTING and bits.tolerance.startswith("≈5x")
    assert "FMNIST for MNIST" in bits.stand_in and bits.reading_kind == STAND_IN
    assert _one(claims, r"GM accuracy is similar to pFedMe").tolerance.startswith("the difference")
    # the page says what is unmet
    assert "unmet: " in html and "needs 800 rounds, ran 6" in html


@pytest.fixture
def toy_setting(monkeypatch):
    """The paper's settings shrunk to the toy fixture's scale (its network, 6 rounds, 2 seeds,
    K = 2, R = 4, λ from 5 to 20, and Fig. 3's γ schedule as the toy's sparse run has it):
    runs that meet a setting, at a small scale."""
    monkeypatch.setattr(settings, "PAPER_MODEL", "d-6-k")
    monkeypatch.setattr(settings, "ROUNDS", 6)
    monkeypatch.setattr(settings, "SEEDS", 2)
    monkeypatch.setattr(settings, "PROTOCOL", {**settings.PROTOCOL, "K": 2, "R": 4})
    monkeypatch.setattr(settings, "LAMBDA_SPAN", (5.0, 20.0))
    monkeypatch.setattr(settings, "FIGURE_LAMBDA", 20.0)
    sparse = {"γ1 = γ2": 0.05, "density floor": 0, "γ2 off after round": 0, "ρ": 1e-3}
    monkeypatch.setattr(settings, "SPARSE_HYPER", sparse)
    figure = {"data": "MNIST", "clients": 20, "labels per client": 5, "train/test split": "20/80"}
    monkeypatch.setattr(settings, "_figure_data", lambda: dict(figure))


def test_runs_at_a_claim_s_setting_are_scored(results, tmp_path, toy_setting):
    """Where the runs meet a claim's (here: shrunk) setting, the claim is scored: agrees, does
    not agree or inconclusive, with a 95 % interval over the seeds it needs; a run of a declared
    stand-in (Fashion-MNIST for Fig. 3's MNIST) is scored as the stand-in reading."""
    claims = require_evidence(build(Page(tmp_path), results, tmp_path))
    paper = [c for c in claims if c.claim_kind == PAPER_CLAIM]
    scored = [c for c in paper if c.verdict in SCORED]
    for c in scored:
        assert c.seeds >= 2 and c.interval and "over 2 seeds" in c.interval, c.claim
        assert c.tolerance and c.needs and not c.unmet, c.claim
    texts = {c.claim for c in scored}
    for pattern in (
        r"sFedHP's GM accuracy on FMNIST setting 1 at λ = 20",
        r"sFedHP's PM accuracy on FMNIST setting 1 at λ = 5",
        r"best GM accuracy of all methods on FMNIST setting 1",
        r"Hierarchical FedAvg beats flat FedAvg",
        r"GM accuracy rises with λ",
        r"density falls to about 20",
        r"fewer cloud-link bits",
        r"GM accuracy is similar to pFedMe",
    ):
        assert any(re.search(pattern, t) for t in texts), pattern
    lam20 = _one(scored, r"sFedHP's GM accuracy on FMNIST setting 1 at λ = 20")
    assert lam20.reading_kind == "paper_text" and not lam20.stand_in  # the toy's own network
    interval = re.match(r"\[(-?[\d.]+), (-?[\d.]+)\]", lam20.interval)
    lo, hi = float(interval.group(1)), float(interval.group(2))
    assert lo <= hi and (hi < 85.6 or lo > 85.68 or lam20.verdict != "does not agree")
    bits = _one(scored, r"fewer cloud-link bits")
    assert bits.reading_kind == STAND_IN and "FMNIST for MNIST" in bits.stand_in
    # the linear data set's name is no data set of the paper's: Fig. 2 stays unscored
    convex = _one(claims, r"orders sFedHP ≥ pFedMe ≥ HierFAVG")
    assert convex.verdict == NOT_AT_SETTING and "data MNIST, ran mlr-toy" in convex.unmet


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
    claims = convex_claims(summary[summary["dataset"] == "fmnist-toy"])
    assert [c.verdict for c in claims] == [NOT_MEASURED, NOT_MEASURED]
    assert "config/sfedhp-convex.yaml" in claims[0].ours
    assert "model MLR 784-10" in claims[0].needs  # what would measure it
    no_sparse = summary[~sparse_mask(summary)]
    missing = sparse_claims(no_sparse)
    assert {c.verdict for c in missing} == {NOT_MEASURED} and all(c.needs for c in missing)
    # a data set without sFedHP: its ordering and gap claims say so instead of failing
    baselines = summary[(summary["dataset"] == "fmnist-toy") & (summary["algorithm"] != "sfedhp")]
    found = table_claims(baselines, ("FMNIST", 1), "here", "a")
    assert [c.verdict for c in found if "sFedHP" in c.claim] == [NOT_MEASURED, NOT_MEASURED]
    assert "sFedHP missing" in found[0].unmet
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

    from fedsparse.query.read import read_results
    from fedsparse.results.aggregate import write_traces_dataset
    from fedsparse.results.schema import RUNS_SCHEMA, TRACE_SCHEMA, write_parquet_atomic

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
    from fedsparse.families.sfedhp.report import READINGS
    from fedsparse.report.claims import reading_of
    from fedsparse.training.config import partition_label

    every = _plan("paper")
    kinds = {r.run_id: reading_of(READINGS, r.config).kind for r in every}
    runs = [r for r in every if kinds[r.run_id] == "paper_text"]
    authors = [r for r in every if kinds[r.run_id] == "authors_code"]
    # the text's 4 settings, and pFedMe's generator on both data sets (sFedHP at two anchors)
    assert len(runs) == 4 * 21 * 3 and len(authors) == 2 * (21 + 5) * 3
    assert len(every) == len(runs) + len(authors) and {r.config["rounds"] for r in every} == {800}
    for r in authors:  # shown against setting 1 for reference: the generator's is no setting
        label = partition_label(r.config["partition"])
        key, why = paper_table(settings.data_of(r.config), settings.model_of(r.config))
        assert key[1] == 1 and label.endswith("+pooled") and "no setting" in why
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
    keys = set()
    for r in runs:
        assert r.config["model"]["hidden"] == [500, 200]
        if r.config["algorithm"] != "perfedavg":  # its stepsize is the meta step beta
            assert r.config["params"]["stepsize"] == 0.05
        keys.add(paper_table(settings.data_of(r.config), settings.model_of(r.config))[0])
    assert keys == {("MNIST", 1), ("MNIST", 2), ("FMNIST", 1), ("FMNIST", 2)}


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


def _planned(name: str) -> pd.DataFrame:
    """A config's planned runs as the page's configuration summary has them (one row per
    data set and configuration: its hyperparameters, ``evidence``, ``net``, ``covered`` (the
    planned rounds) and ``seeds``): what its runs would be, in the settings' terms."""
    rows = {}
    for r in _plan(name):
        c = r.config
        key = (c["dataset"]["name"], c["algorithm"], repr(sorted(c["params"].items())))
        row = rows.setdefault(
            key,
            {
                **c["params"],
                "dataset": c["dataset"]["name"],
                "algorithm": c["algorithm"],
                "evidence": settings.data_of(c),
                "net": settings.model_of(c),
                "covered": c["rounds"],
                "seeds": 0,
            },
        )
        row["seeds"] += 1
    return pd.DataFrame(list(rows.values()))


def _gaps(setting, rows: pd.DataFrame, label=None, extra=None):
    from fedsparse.report.evidence import unmet

    return unmet(setting, settings.ran_of(rows, setting, label, extra))


def test_which_configs_meet_which_settings():
    """sfedhp-paper meets every table claim on the paper's own network; sfedhp-sparse meets
    Fig. 3 on its stand-ins (Fashion-MNIST, 784-100-10); sfedhp-convex needs 800 rounds (it
    runs 200); sfedhp-quick meets none (784-100-10 stand-in, 100 rounds, 1 seed, 1 λ)."""
    paper = _planned("paper")
    text = paper[paper["dataset"].isin(["mnist-s1", "mnist-s2", "fmnist-s1", "fmnist-s2"])]
    for ds, rows in text.groupby("dataset"):
        key = paper_table(rows.iloc[0]["evidence"], rows.iloc[0]["net"])[0]
        for _, r in rows[rows["algorithm"] == "sfedhp"].iterrows():
            assert _gaps(settings.row_setting(key, "sfedhp", r), pd.DataFrame([r])) == ([], [])
        best = rows[rows["algorithm"].isin(["sfedhp", "pfedme", "fedavg", "hierfavg", "fedprox"])]
        best = best[(best["algorithm"] != "sfedhp") | (best["lambda1"] == 20)]
        best = best.groupby("algorithm").head(1)
        assert _gaps(settings.best_gm_setting(key), best) == ([], []), ds
        sf = rows[rows["algorithm"] == "sfedhp"]
        span = {"λ from": sf["lambda1"].min(), "λ to": sf["lambda1"].max()}
        assert _gaps(settings.lambda_setting(key), sf.head(1), extra=span) == ([], [])
    authors = paper[paper["dataset"] == "fmnist-ac"]
    pfedme = authors[(authors["algorithm"] == "pfedme") & (authors["lambda"] == 20)]
    gaps, _ = _gaps(settings.row_setting(("FMNIST", 1), "pfedme", {"lambda": 20}), pfedme)
    assert gaps == [
        "labels per client 5, ran 2",
        "train/test images per label 200/800, ran 600/200",
        "test rows from the test file, ran pooled with the train rows",
    ]

    from fedsparse.families.sfedhp.analysis import _label_of

    sparse = _planned("sparse")
    fig3 = sparse[sparse["dataset"] == "fmnist-fig3"]
    on = fig3[(fig3["algorithm"] == "sfedhp") & (fig3["gamma1"] > 0)]
    pair = pd.concat([on, fig3[fig3["algorithm"] == "pfedme"]])
    gaps, stand = _gaps(settings.sparse_setting(), pair, _label_of)
    assert gaps == [] and len(stand) == 2  # Fashion-MNIST and 784-100-10 stand in
    convex = _planned("convex")
    three = convex[(convex["dataset"] == "fmnist-mlr") & (convex["algorithm"] != "fedavg")]
    gaps, stand = _gaps(settings.convex_setting(), three)
    assert gaps == ["needs 800 rounds, ran 200"] and len(stand) == 1

    quick = _planned("quick")
    s1 = quick[quick["dataset"] == "fmnist-s1"]
    gaps, stand = _gaps(
        settings.row_setting(("FMNIST", 1), "sfedhp", {"lambda1": 20}),
        s1[s1["algorithm"] == "sfedhp"],
    )
    assert gaps == ["needs 800 rounds, ran 100", "3 seeds, ran 1"] and len(stand) == 1
