"""A claim is scored only where its runs carry it: each paper claim declares its Setting (data,
model, the horizon its subject covers within the time budget, hyperparameters, methods, seeds),
a toy run never yields a paper verdict and its rows say what is unmet, and runs that meet a
(small, declared) setting are scored with a 95 % interval over their seeds."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pytest
import yaml
from gs_helpers import FIXED, base, config, write_folder

from fedsparse.families.gradient_sparsification import analysis as gs_analysis
from fedsparse.families.gradient_sparsification import paper_claims as pc
from fedsparse.families.gradient_sparsification import report as gs_section
from fedsparse.report.claims import (
    AUTHORS_CODE,
    NOT_AT_SETTING,
    NOT_MEASURED,
    PAPER_CLAIM,
    PAPER_TEXT,
    SCORED,
    Reading,
    require_evidence,
)
from fedsparse.report.evidence import Ran, unmet
from fedsparse.report.page import Page

ROOT = Path(__file__).resolve().parents[3]
FASHION = Path("/usr/share/datasets/fashion-mnist")
SEEDS = (0, 1, 2)
ONLINE = (
    ("fabtopk", base(k_control="online_extended", window=5)),
    ("fabtopk", base(k_control="exp3")),
    ("fabtopk", base(k_control="value_ogd")),
    ("fabtopk", base(k_control="bandit")),
)


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """D = 40, k = 8, 6 clients, 40 rounds at beta = 10, every Fig. 4 method and the Fig. 5
    controllers, 3 seeds each."""
    root = tmp_path_factory.mktemp("evidence")
    write_folder(root, [config(a, p, 10.0, seed=s) for s in SEEDS for a, p in FIXED + ONLINE])
    return root


@pytest.fixture(scope="module")
def fig4_alone(tmp_path_factory):
    """config/gs-authors-fig4.yaml's shape at toy size: FAB-top-k and periodic-k, one seed."""
    root = tmp_path_factory.mktemp("fig4-alone")
    write_folder(root, [config(a, p, 10.0) for a, p in FIXED if a in ("fabtopk", "periodick")])
    return root


def build(folder, tmp_path):
    tables = tmp_path / "tables"
    tables.mkdir(exist_ok=True)
    return require_evidence(gs_section.build(Page(tmp_path), folder, tables))


def row(claims, key):
    return next(c for c in claims if c.claim == pc.CLAIMS[key].text)


def toy_setting(rounds: int, seeds: int = 3):
    """The paper's settings cut to the toy runs: their data and model, no stand-ins, the
    paper's methods and beta, ``rounds`` (where the claim has a horizon) and ``seeds``."""
    toy = pc.run_facts(config("fabtopk", base(), 10.0))

    def setting(claim, kind, data):
        s = claim.setting(kind, data)
        reading = pc.READING_NAMES.get(kind, pc.OURS)
        return replace(
            s,
            data={"reading": reading, **{k: toy[k] for k in pc.FACTS}},
            model=toy["model"],
            rounds=rounds if s.rounds else None,
            hyper={k: v for k, v in s.hyper.items() if k == "β"},
            seeds=seeds,
            stand_ins={},
        )

    return setting


def test_toy_runs_yield_no_paper_verdict_and_say_what_is_unmet(folder, tmp_path):
    claims = build(folder, tmp_path)
    paper = [c for c in claims if c.claim_kind == PAPER_CLAIM]
    assert paper and not [c for c in paper if c.verdict in SCORED]
    assert all(c.needs for c in claims)
    fig4 = row(claims, "fig4_loss")
    assert fig4.verdict == NOT_AT_SETTING and fig4.seeds == 3 and fig4.interval
    for gap in (
        "data FEMNIST, ran synthetic (toy)",
        "clients 156, ran 6",
        "model the CNN of Wang et al. (JSAC 2019), ran linear logistic",
        "k/D 0.225 %, ran 20 %",
        "η 0.01, ran 0.5",
        "5 seeds, ran 3",
    ):
        assert gap in fig4.unmet, gap
    assert re.search(r"needs 5,780 rounds, ran \d+;", fig4.unmet)
    assert "methods FAB-top-k, U-top-k, periodic-k, FedAvg, always-send-all" in fig4.needs
    assert "β = 10" in fig4.needs and "τ_F = ⌊D/2k⌋" in fig4.needs
    fig5 = row(claims, "fig5_loss")
    assert fig5.verdict == NOT_AT_SETTING and "M_u 20, ran 5" in fig5.unmet
    headline = row(claims, "headline")
    assert headline.verdict == NOT_AT_SETTING and "none of the" in headline.ours
    assert row(claims, "fig7_cross").verdict == NOT_MEASURED


def at_paper_reading(monkeypatch, rounds: int, seeds: int = 3) -> None:
    """The toy runs read as the paper's text, held to the toy setting."""
    toy = Reading("the toy as the paper", PAPER_TEXT, "everything here", lambda c: True)
    monkeypatch.setattr(gs_analysis, "READINGS", (toy,))
    monkeypatch.setattr(gs_analysis, "setting_of", toy_setting(rounds, seeds))


def test_runs_at_a_declared_small_setting_are_scored(folder, tmp_path, monkeypatch):
    at_paper_reading(monkeypatch, rounds=1)
    claims = build(folder, tmp_path)
    for key in ("fig4_loss", "fig4_accuracy", "fig4_fedavg", "fub_similar", "fab_fair"):
        c = row(claims, key)
        assert c.claim_kind == PAPER_CLAIM and c.reading_kind == PAPER_TEXT
        assert c.verdict in SCORED and not c.unmet, (key, c.unmet)
        assert c.seeds >= 3 and re.search(r"\(95 %, (bootstrap|t) over 3 seeds\)$", c.interval)
        assert c.tolerance and c.needs
    fair = row(claims, "fab_fair")  # k = 8 >= N = 6: every client, every round, by design
    assert fair.verdict == "agrees" and fair.interval.startswith("[0, 0]")
    assert row(claims, "fig5_loss").verdict in SCORED
    headline = row(claims, "headline")
    assert headline.verdict in SCORED and "%" in headline.interval


def test_the_horizon_is_the_settings_rounds(folder, tmp_path, monkeypatch):
    """One mechanism: a claim whose subject covers too few rounds within the budget is not at
    the paper's setting, and says how many it needs and ran; a claim without a horizon (FAB's
    guarantee) is scored."""
    at_paper_reading(monkeypatch, rounds=1000)
    claims = build(folder, tmp_path)
    for key in ("fig4_loss", "fig5_loss"):
        c = row(claims, key)
        assert c.verdict == NOT_AT_SETTING and re.fullmatch(r"needs 1,000 rounds, ran \d+", c.unmet)
        assert c.interval  # the measurement stays on the row
    assert row(claims, "fab_fair").verdict in SCORED


def test_too_few_seeds_and_missing_methods_are_unmet(fig4_alone, tmp_path, monkeypatch):
    """config/gs-authors-fig4.yaml's shape: Fig. 4 against periodic-k alone, one seed."""
    at_paper_reading(monkeypatch, rounds=1, seeds=5)
    fig4 = row(build(fig4_alone, tmp_path), "fig4_loss")
    assert fig4.verdict == NOT_AT_SETTING
    assert fig4.unmet == "U-top-k, FedAvg and always-send-all missing; 5 seeds, ran 1"
    assert fig4.seeds == 1 and fig4.interval == ""  # no interval from one seed


def test_the_authors_reading_names_fubtopk_the_codes_u_top_k(folder, tmp_path, monkeypatch):
    authors = Reading("the authors' code", AUTHORS_CODE, "everything here", lambda c: True)
    monkeypatch.setattr(gs_analysis, "READINGS", (authors,))
    claims = build(folder, tmp_path)
    fig4 = row(claims, "fig4_loss")
    assert fig4.reading_kind == AUTHORS_CODE and "(fubtopk: the code's U_top_K)" in fig4.ours
    values = fig4.ours.split(" (fubtopk:")[0]
    assert "fubtopk" in values and "utopk" not in values
    assert "reading the authors' code" in fig4.needs and "partition the code's writer mix" in (
        fig4.needs
    )
    fub = row(claims, "fub_similar")
    assert fub.verdict == NOT_MEASURED and "tree" in fub.ours
    # the code's FUB_top_K is not run: fubtopk's idle clients are its U_top_K's, not scored
    idle = row(claims, "fub_idle")
    assert idle.verdict == NOT_MEASURED and idle.interval == "" and "tree" in idle.ours
    assert re.search(r"; fubtopk, the code's U_top_K: up to \d+ idle clients", idle.ours)
    assert "merge: tree" in idle.ours and "FUB-top-k missing" in idle.unmet


@pytest.fixture(scope="module")
def with_tree(tmp_path_factory):
    """FAB-top-k, fubtopk (the code's U_top_K) and fubtopk's tree merge (its FUB_top_K)."""
    root = tmp_path_factory.mktemp("tree")
    methods = [("fabtopk", base()), ("fubtopk", base()), ("fubtopk", base(merge="tree"))]
    write_folder(root, [config(a, p, 10.0, seed=s) for s in SEEDS for a, p in methods])
    return root


def test_the_authors_reading_scores_fub_top_k_on_the_tree_merge(with_tree, tmp_path, monkeypatch):
    """With fubtopk's tree merge in the results, the authors' reading scores FUB-top-k's
    claims on it, and the code's U_top_K (fubtopk) stays Fig. 4's U-top-k."""
    authors = Reading("the authors' code", AUTHORS_CODE, "everything here", lambda c: True)
    monkeypatch.setattr(gs_analysis, "READINGS", (authors,))
    monkeypatch.setattr(gs_analysis, "setting_of", toy_setting(rounds=1))
    claims = build(with_tree, tmp_path)
    fub = row(claims, "fub_similar")
    assert fub.verdict in SCORED and fub.ours.startswith("FUB/FAB loss ratio") and fub.interval
    assert "methods FAB-top-k, FUB-top-k" in fub.needs and not fub.unmet
    idle = row(claims, "fub_idle")
    assert idle.verdict in SCORED and re.fullmatch(r"up to \d+ idle clients in a round", idle.ours)
    fig4 = row(claims, "fig4_loss")
    assert "(fubtopk: the code's U_top_K)" in fig4.ours and "merge=tree" not in fig4.ours
    runs = gs_analysis.gs_runs(with_tree)
    labels = dict(zip(runs["method"], runs["method_label"], strict=False))
    want = {"fabtopk": "FAB-top-k", "fubtopk": "U-top-k", "fubtopk merge=tree": "FUB-top-k"}
    assert labels == want


CONFIG_FACTS = [
    ("config/gs-quick.yaml", "fmnist-writers", "paper_text", {"data", "partition", "model"}),
    ("config/gs-paper.yaml", "fmnist-writers", "paper_text", {"data", "partition", "model"}),
    ("config/gs-paper-cnn.yaml", "fmnist-writers-cnn", "paper_text", {"data", "partition"}),
    ("config/gs-authors.yaml", "fmnist-writer-mix", "authors_code", {"data", "model"}),
    ("config/gs-cifar10.yaml", "cifar10-one-class", "paper_text", set()),
]


@pytest.mark.parametrize(("config_file", "dataset", "kind", "stand_ins"), CONFIG_FACTS)
def test_the_paper_configs_meet_the_data_and_model_by_their_stand_ins(
    config_file, dataset, kind, stand_ins
):
    """The configs that run the paper's setting meet Fig. 4's (Fig. 8's on CIFAR-10) data and
    model, with the stand-ins they declare; what is left is the horizon, the seeds and the
    methods of the runs actually made."""
    from fedsparse.sweep import plan_sweep

    plan = plan_sweep(yaml.safe_load((ROOT / config_file).read_text()))
    run = next(r for r in plan.runs if r.config["dataset"]["name"] == dataset)
    facts = pc.run_facts(run.config)
    ran = Ran(
        data={"reading": pc.READING_NAMES[kind], **{k: facts[k] for k in pc.FACTS}},
        model=facts["model"],
    )
    claim = pc.CLAIMS["fig7_k" if "cifar" in dataset else "fig4_loss"]
    setting = replace(
        claim.setting(kind, facts["data"]), rounds=None, hyper={}, methods=(), seeds=0
    )
    gaps, stand = unmet(setting, ran)
    assert gaps == []
    assert {s.split(" for ")[0] for s in stand} == {str(pc.STAND_INS[k][0]) for k in stand_ins}


def test_the_one_class_variation_of_gs_quick_is_not_the_papers_setting():
    from fedsparse.sweep import plan_sweep

    plan = plan_sweep(yaml.safe_load((ROOT / "config/gs-quick.yaml").read_text()))
    run = next(r for r in plan.runs if r.config["dataset"]["name"] == "fmnist-one-class")
    facts = pc.run_facts(run.config)
    ran = Ran(data={k: facts[k] for k in pc.FACTS}, model=facts["model"])
    setting = replace(pc.CLAIMS["fig4_loss"].setting(), rounds=None, hyper={}, methods=())
    gaps, _ = unmet(replace(setting, data={k: setting.data[k] for k in pc.FACTS}, seeds=0), ran)
    assert gaps == [
        "clients 156, ran 10",
        "partition a client per writer, ran one class a client",
        "aggregation weights C_i/C, ran uniform",
        "model the CNN of Wang et al. (JSAC 2019), ran linear softmax",
    ]


def test_the_horizon_covers_three_periodic_k_cycles_at_the_papers_k_over_d():
    assert pc.HORIZON_ROUNDS == 5780 >= pc.CYCLES * -(-pc.PAPER_D // pc.PAPER_K) == 1335
    assert all(c.rounds in (None, pc.HORIZON_ROUNDS) for c in pc.CLAIMS.values())
    assert all(c.setting().seeds == 5 for c in pc.CLAIMS.values())  # no repeats stated


def test_every_claim_declares_its_setting():
    """Each claim's Setting names its methods (the paper's labels) and the beta it is stated
    at; Fig. 4's names every baseline of its text."""
    fig4 = pc.CLAIMS["fig4_loss"].setting()
    assert fig4.methods == ("FAB-top-k", "U-top-k", "periodic-k", "FedAvg", "always-send-all")
    assert fig4.hyper["β"] == 10.0 and fig4.rounds == 5780
    assert pc.CLAIMS["fig6"].setting().hyper["β"] == 100.0
    assert pc.CLAIMS["fig7_k"].setting().hyper["β"] == "0.1, 1, 10, 100"
    cifar = pc.CLAIMS["fig7_cross"].setting(data="CIFAR-10")
    assert cifar.data["data"] == "CIFAR-10" and not cifar.stand_ins
    assert pc.CLAIMS["fig4_loss"].setting(data="CIFAR-10").data["data"] == "FEMNIST"
    assert pc.method_label("fubtopk", authors=True) == "U-top-k"
    assert pc.method_label("fabtopk online_extended") == "Algorithm 3"
    assert pc.method_label("fedavg (tau=222)") == "FedAvg"


def test_nothing_ran_lists_nothing_unmet(tmp_path):
    claims = gs_analysis.ClaimRows()
    c = claims.judge(pc.CLAIMS["fig7_cross"], "none", "toy", "a", Ran(), None)
    assert c.verdict == NOT_MEASURED and c.unmet == "" and c.needs


@pytest.mark.skipif(not FASHION.exists(), reason="Fashion-MNIST is not installed")
def test_gs_quick_at_toy_size_yields_no_paper_verdict(tmp_path):
    """config/gs-quick.yaml's paper reading cut to 3 rounds and one seed at beta = 10 (its
    fixed-k methods): every paper row is not at the paper's setting, on the declared
    stand-ins, and says what is unmet."""
    from fedsparse.sweep import plan_sweep

    plan = plan_sweep(yaml.safe_load((ROOT / "config/gs-quick.yaml").read_text()))
    configs = [
        {**r.config, "rounds": 3, "eval_every": 3}
        for r in plan.runs
        if r.config["dataset"]["name"] == "fmnist-writers"
        and r.config["seed"] == 0
        and r.config["time_model"]["exchange_time"] == 10
        and "k_control" not in r.config["params"]
    ]
    assert {c["algorithm"] for c in configs} == {"fabtopk", "utopk", "periodick", "sendall"}
    write_folder(tmp_path / "results", configs)
    claims = build(tmp_path / "results", tmp_path)
    paper = [c for c in claims if c.claim_kind == PAPER_CLAIM]
    assert paper and not [c for c in paper if c.verdict in SCORED]
    fig4 = row(claims, "fig4_loss")
    assert fig4.verdict == NOT_AT_SETTING and fig4.reading_kind == "stand_in"
    assert re.fullmatch(r"needs 5,780 rounds, ran \d; FedAvg missing; 5 seeds, ran 1", fig4.unmet)
    assert fig4.stand_in.startswith("Fashion-MNIST for FEMNIST")
    assert "MLP 784-100-10 for the CNN of Wang et al. (JSAC 2019)" in fig4.stand_in
