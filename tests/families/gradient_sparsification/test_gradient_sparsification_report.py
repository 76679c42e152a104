"""The gradient-sparsification report section, built from a toy results folder written with
the project's own run, summary and aggregation functions: every method at fixed k, the k
controllers at two exchange times, and replays of the learned sequences."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from gs_helpers import DATA, FIXED, base, config, write_folder

from fedsparse.families.gradient_sparsification import analysis as gs_analysis
from fedsparse.families.gradient_sparsification import report as gs_section
from fedsparse.report.claims import NOT_AT_SETTING, SCORED, VERDICTS, Claim, require_evidence
from fedsparse.report.page import Page
from fedsparse.results.aggregate import write_traces_dataset
from fedsparse.results.schema import RUNS_SCHEMA, rows_table, write_parquet_atomic
from fedsparse.training.experiment import run_result

OTHER = {**DATA, "name": "fedavg-only", "seed": 3}


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    root = tmp_path_factory.mktemp("gs")
    fixed = [config(a, p, 10.0) for a, p in FIXED]
    fixed.append(config("fedavg", {"stepsize": 0.5, "local_steps": 2}, 10.0, data=OTHER))
    learned = [
        config(
            "fabtopk",
            base(k_control=control, window=5)
            if control == "online_extended"
            else base(k_control=control),
            beta,
        )
        for beta in (1.0, 10.0)
        for control in ("online", "online_extended", "value_ogd", "exp3", "bandit")
    ]
    stage1 = write_folder(root / "stage1", fixed + learned)
    # stage1 and six more configurations at fixed k (another step size): test_the_page_reads...
    wider = [config(a, {**p, "stepsize": 0.25}, 10.0) for a, p in FIXED]
    write_folder(root / "wider", wider, stage1)
    alg3 = [t for t, _ in stage1 if t["k_control"][0].as_py() == "online_extended"]
    replays = [
        config(
            "fabtopk",
            base(k_control="sequence", k_sequence=f"{root / 'stage1'}#{t['run_id'][0].as_py()}"),
            beta,
        )
        for t in alg3
        for beta in (1.0, 10.0)
    ]
    write_folder(root / "all", replays, stage1)
    return root


def test_build_writes_the_page_and_states_each_claim(results, tmp_path):
    page, tables = Page(tmp_path), tmp_path / "tables"
    tables.mkdir()
    claims = gs_section.build(page, results / "all", tables)
    assert claims and all(isinstance(c, Claim) and c.verdict in VERDICTS for c in claims)
    html = "\n".join(page.parts)
    texts = {c.claim for c in claims}
    for fig in ("4", "5", "7"):
        assert any(f"(Fig. {fig})" in t for t in texts)
    assert any(t.startswith("Up to 40 %") for t in texts)
    headline = next(c for c in claims if c.claim.startswith("Up to 40 %"))
    assert headline.paper_value == "40 %" and "largest gain" in headline.ours
    assert 'id="gs-toy"' in html and 'id="gs-toy-cross"' in html and "fedavg-only" not in html
    assert {"gs-toy-fixed-10", "gs-toy-k", "gs-toy-online-1", "gs-toy-online-10"} <= set(
        page.figures
    )
    assert all(name.startswith("gs-") for name in page.figures)
    matrix = pd.read_csv(tables / "gs_cross_toy.csv", index_col=0)
    assert matrix.shape == (2, 2) and matrix.notna().all().all()
    fair = pd.read_csv(tables / "gs_fair_toy_10.csv").set_index("method")
    # FAB's guarantee: with k = 8 and N = 6 every client has at least one element applied
    assert fair.loc["fabtopk", "floor k/N"] == 1 and fair.loc["fabtopk", "min |J ∩ J_i|"] >= 1
    # a toy run is never the paper's setting: the row keeps the measurement and says why
    fab_fair = next(c for c in claims if c.claim.startswith("FAB-top-k: every client"))
    assert fab_fair.verdict == NOT_AT_SETTING and fab_fair.ours.startswith("min |J ∩ J_i| = 1")
    assert "data FEMNIST, ran synthetic (toy)" in fab_fair.unmet and fab_fair.needs
    assert not [c for c in require_evidence(claims) if c.verdict in SCORED]
    saved = pd.read_csv(tables / "gs_claims.csv")
    assert len(saved) == len(claims)
    for c in claims:  # every claim links to an element of the page
        assert f'id="{c.anchor}"' in html, c.claim
    per_client = pd.read_csv(tables / "gs_clients_toy_10.csv").set_index("client")
    assert list(per_client.index) == list(range(6)) and "Per-client contributions" in html
    assert (per_client["fabtopk: idle rounds"] == 0).all()  # k = 8 >= N = 6: nobody left out


def test_each_run_stores_its_per_client_contributions(results):
    """runs.parquet's client_summary: one record per client; the k indices applied each round
    all come from some client's offer, so the clients' applied elements sum to at least k per
    round; FedAvg (another family) stores none."""
    runs = pd.read_parquet(results / "all" / "runs.parquet").set_index("run_id")
    for _, row in runs.iterrows():
        if row["algorithm"] == "fedavg":
            assert pd.isna(row["client_summary"])
            continue
        table = pd.DataFrame(json.loads(row["client_summary"]))
        assert list(table["client"]) == list(range(6))
        rounds = row["final_round"]
        assert np.allclose(table["applied_per_round"] * rounds, table["applied"])
        assert table["idle_rounds"].between(0, rounds).all()
        if row["algorithm"] == "fabtopk" and row["k_control"] in (None, "fixed"):
            assert table["applied"].sum() >= 8 * rounds
        if row["algorithm"] == "sendall":  # every parameter of every client, every round
            assert (table["applied_per_round"] == DATA["dim"]).all()


def test_without_replays_the_cross_application_is_not_measured(results, tmp_path):
    claims = gs_section.build(Page(tmp_path), results / "stage1", tmp_path)
    cross = [c for c in claims if c.claim.startswith("The k sequence learned at beta")]
    assert [c.verdict for c in cross] == ["not measured here"]
    assert not (tmp_path / "gs_cross_toy.csv").exists()


def test_cross_matrix_and_its_claim_from_known_losses():
    """A cell is the mean over a cell's replays (NaN-skipping) at the column's budget."""
    loss = {
        (1.0, 1.0): [0.1, 0.3],
        (10.0, 1.0): [0.3, float("nan")],
        (1.0, 10.0): [0.5],
        (10.0, 10.0): [0.4],
    }
    replays = pd.DataFrame(
        [
            {
                "run_id": f"r{learned}-{beta}-{k}",
                "exchange_time": beta,
                "learned_at": learned,
                "loss": value,
            }
            for (learned, beta), values in loss.items()
            for k, value in enumerate(values)
        ]
        + [{"run_id": "lost", "exchange_time": 1.0, "learned_at": None, "loss": 0.0}]
    )
    matrix = gs_analysis.cross_matrix(replays)
    assert matrix.loc[1.0, 1.0] == pytest.approx(0.2)
    assert matrix.loc[10.0, 1.0] == pytest.approx(0.3)  # the replay without a value is skipped
    assert gs_analysis.diagonal_wins(matrix) == (2, 2)
    matrix.loc[10.0, 10.0] = 0.9
    assert gs_analysis.diagonal_wins(matrix) == (1, 2)


def test_values_at_the_budget_are_np_interp_over_the_known_rows(tmp_path):
    """The SQL interpolation gives np.interp's numbers over the rows where the value is known
    (the loss: train_loss, else the objective), and NaN past the run's last such row."""
    from fedsparse.report.data import ReportData
    from fedsparse.results.schema import trace_table

    time = [0.0, 0.7, 2.1, 4.0]
    loss = [1.0, None, 0.45, 0.3]  # round 1 has only its objective
    objective = [1.1, 0.8, 0.5, 0.35]
    accuracy = [0.1, None, 0.6, 0.65]
    budgets = [-1.0, 0.0, 0.3, 0.7, 1.9, 2.1, 3.3, 4.0, 4.0 + 5e-10, 4.0 + 2e-9, 9.0]
    rows, runs = [], []
    for k in range(len(budgets)):
        rid = f"r{k}"
        runs.append({"run_id": rid, "dataset": "toy", "algorithm": "fabtopk", "status": "ok"})
        for r, t in enumerate(time):
            rows.append(
                {
                    "run_id": rid,
                    "dataset": "toy",
                    "algorithm": "fabtopk",
                    "round": r,
                    "time": t,
                    "train_loss": loss[r],
                    "objective": objective[r],
                    "test_accuracy": accuracy[r],
                }
            )
    write_traces_dataset(trace_table(rows), tmp_path / "traces")
    write_parquet_atomic(rows_table(runs, RUNS_SCHEMA), tmp_path / "runs.parquet")
    frame = pd.DataFrame(runs).assign(budget=budgets, test_rows=3)
    with ReportData(tmp_path) as data:
        got = gs_analysis.GsTraces(data, frame).at_budget(frame).set_index("run_id")
    seen_loss = [v if v is not None else o for v, o in zip(loss, objective, strict=True)]
    acc_time = [t for t, a in zip(time, accuracy, strict=True) if a is not None]
    acc = [a for a in accuracy if a is not None]
    for k, budget in enumerate(budgets):
        past = budget > time[-1] + 1e-9
        want_loss = np.nan if past else np.interp(budget, time, seen_loss)
        want_acc = np.nan if past else np.interp(budget, acc_time, acc)
        for column, want in (("loss", want_loss), ("accuracy", want_acc)):
            value = got.loc[f"r{k}", column]
            assert (pd.isna(value) and past) or value == want, (budget, column, value, want)
    assert got.loc["r2", "loss"] == np.interp(0.3, time, seen_loss) != 1.0  # interpolated
    assert pd.isna(got.loc["r9", "loss"]) and got.loc["r8", "loss"] == 0.3  # 1e-9 past: last


def test_more_configurations_add_a_row_per_run_not_their_traces(results, tmp_path):
    """The page reads one row per run from the traces (its last time, its values at the
    budget) and the rows its figures draw (each method's best configuration, the k_m runs,
    the fairness view per method and round): six more configurations at fixed k add at most
    two rows per run to what it reads, not their trace rows. (In this toy every run is its
    method's only configuration, so the figures draw every run's rows.)"""
    from fedsparse.report.data import ReportData

    read, runs, rows = {}, {}, {}
    for name in ("stage1", "wider"):
        out = tmp_path / name
        (out / "tables").mkdir(parents=True)
        with ReportData(results / name) as data:
            claims = gs_section.build(Page(out), data, out / "tables")
            read[name] = sum(n for sql, n in data.queries if "traces" in sql)
            runs[name] = data.runs_table.num_rows
            rows[name] = int(data.frame("SELECT count(*) AS n FROM traces")["n"].iloc[0])
        assert claims
    extra = runs["wider"] - runs["stage1"]
    assert extra == 6
    assert read["wider"] - read["stage1"] <= 2 * extra
    assert rows["wider"] - rows["stage1"] == 6 * 41  # what loading the traces would have added


def test_an_empty_folder_gives_no_claims(tmp_path):
    folder = tmp_path / "empty"
    write_folder(folder, [config("fedavg", {"stepsize": 0.5, "local_steps": 2}, 1.0, rounds=2)])
    page = Page(tmp_path)
    assert gs_section.build(page, folder, tmp_path) == []


def test_a_run_that_diverges_keeps_totals_as_of_its_last_row():
    """Rounds trained past the last kept row (scored together, then discarded) are not in the
    per-client totals."""
    cfg = config("fabtopk", base(stepsize=1e6), 10.0, rounds=30)
    result = run_result(cfg)
    table = result.trace
    assert table["status"][-1].as_py() == "diverged"
    last = table["round"][-1].as_py()
    assert last < 30
    totals = pd.DataFrame(json.loads(result.client_summary))
    assert np.allclose(totals["applied_per_round"] * last, totals["applied"])
    assert totals["applied"].sum() >= 8 * last and (totals["idle_rounds"] <= last).all()


def test_without_replays_every_claim_anchor_exists(results, tmp_path):
    page = Page(tmp_path)
    claims = gs_section.build(page, results / "stage1", tmp_path)
    html = "\n".join(page.parts)
    assert all(f'id="{c.anchor}"' in html for c in claims)


def fairness_runs(shared, idle, ks=(100, 1000), seeds=(0, 1), method="fabtopk"):
    """The frame ``judge_fairness`` reads: one fixed-k run per k and seed, with its smallest
    |J ∩ J_i| and most idle clients (``shared``, ``idle``: per seed)."""
    facts = {f"ran_{k}": v for k, v in {"data": "toy", "clients": 10, "model": "m"}.items()}
    facts.update({"ran_partition": "none", "ran_aggregation weights": "uniform"})
    return pd.DataFrame(
        [
            {
                "run_id": f"{method}-{k}-{s}",
                "method": method,
                "algorithm": method,
                "method_label": "FAB-top-k" if method == "fabtopk" else "FUB-top-k",
                "k": float(k),
                "k_control": None,
                "seed": s,
                "exchange_time": 10.0,
                "stepsize": 0.01,
                "batch_size": 32,
                "D": 444_062,
                "shared_min": shared[i],
                "idle_max": idle[i],
                **facts,
            }
            for k in ks
            for i, s in enumerate(seeds)
        ]
    )


def test_fairness_claims_per_k_from_per_seed_values():
    """A sweep over k gives FAB's fairness claim once per k (it crashed), each with the seeds'
    interval of floor(k/N) - min |J ∩ J_i|; the toy setting is not the paper's."""
    claims = gs_analysis.ClaimRows()
    gs_analysis.judge_fairness(fairness_runs([10, 12], [0, 0]), 10, claims, "toy", "a")
    fab = [c for c in claims.rows if c.claim.startswith("FAB-top-k: every client")]
    assert [c.where for c in fab] == ["toy (k = 100)", "toy (k = 1000)"]
    assert fab[0].ours == "min |J ∩ J_i| = 10 (floor 10), max idle clients 0"
    assert fab[0].seeds == 2 and fab[0].interval.endswith("(95 %, t over 2 seeds)")
    assert fab[0].verdict == NOT_AT_SETTING and "5 seeds, ran 2" in fab[0].unmet
    assert "k/D 0.225 %, ran 0.0225 %" in fab[0].unmet and "data FEMNIST, ran toy" in fab[0].unmet
    fub = gs_analysis.ClaimRows()
    gs_analysis.judge_fairness(
        fairness_runs([0, 0], [2, 3], (100,), method="fubtopk"), 10, fub, "toy", "a"
    )
    assert [c.ours for c in fub.rows] == ["up to 3 idle clients in a round"]


def test_a_missing_value_is_not_measured():
    """A comparison with a missing accuracy is not measured (it said 'does not agree'), and
    gives no interval."""
    best = pd.DataFrame({"method": ["fabtopk", "sendall"], "accuracy": [0.8, float("nan")]})
    ok, text = gs_analysis._compare(best, "fabtopk", ["sendall"], "accuracy")
    assert ok is None and "no accuracy" in text
    from fedsparse.families.gradient_sparsification.paper_claims import margin_interval

    assert margin_interval([0.8, 0.7], [[float("nan")]], lower_is_better=False) is None


@pytest.mark.parametrize(
    ("config_file", "dimension", "reading"),
    [
        ("config/gs-paper-cnn.yaml", 430_698, "the paper's setting and CNN"),
        ("config/gs-paper.yaml", 79_510, "the paper's setting, MLP for the CNN"),
        ("config/gs-cifar10.yaml", 555_178, "the paper's setting and CNN"),
    ],
)
def test_the_paper_configs_are_read_as_the_papers_setting(config_file, dimension, reading):
    from pathlib import Path

    import yaml

    from fedsparse.families.gradient_sparsification.paper_claims import n_params
    from fedsparse.report.claims import reading_of
    from fedsparse.sweep import plan_sweep

    root = Path(__file__).resolve().parents[3]
    plan = plan_sweep(yaml.safe_load((root / config_file).read_text()))
    for run in plan.runs:
        assert n_params(run.config) == dimension
        assert reading_of(gs_analysis.READINGS, run.config).name == reading, run.config["params"]
    k = plan.runs[0].config["params"]["k"]
    if "cifar" not in config_file:  # FEMNIST's k/D (CIFAR-10: k_1 = 1000 of 555,178)
        assert abs(k / dimension - 1000 / 444_062) < 1e-5
