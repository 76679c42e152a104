"""Results a researcher can trust.

* A run is diverged at the first evaluated round whose objective is not finite or exceeds
  ``divergence_factor`` x its round-0 objective: a finite blow-up ends there, and ranks last
  in ``fedsparse best`` and in the report like a non-finite one.
* A best configuration whose hyperparameter is the smallest or largest value searched is
  flagged wherever it is chosen: ``fedsparse best`` (``grid_edges``), the report's table and text.

The sweep below is real (make_data, run_shard, aggregate, as the workflow runs it), 12 rounds
on a tiny linear data set: Fed-HT's largest step size and both of FedIter-HT's blow up to
finite objectives (10^4 to 10^6, far above 1000 x f0 = 7.6e3, far below overflow), and
Distributed-IHT's best step size is the larger of its two.
"""

from __future__ import annotations

import math
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import run_sweep

import fedsparse
from fedsparse.cli import main
from fedsparse.errors import ConfigError
from fedsparse.families.hard_thresholding import analysis as ht
from fedsparse.query import best_configurations, open_results
from fedsparse.query.grid_edges import edge_warning, grid_edges
from fedsparse.report import analysis as an
from fedsparse.report import build_report
from fedsparse.report.figures import objective_figure, plt
from fedsparse.sweep import plan_sweep
from fedsparse.training.config import normalize_run_config, run_id
from fedsparse.training.experiment import is_diverged

DATA = {
    "kind": "synthetic",
    "task": "linear",
    "clients": 4,
    "samples_per_client": 10,
    "dim": 20,
    "support": 4,
    "alpha": 0.5,
    "beta": 0.5,
}
PARAMS = {"local_steps": 3, "sparsity": 5, "batch_size": 5}
BLOW_UP = 0.05  # Fed-HT's objective grows ~10x a round from here, staying finite for 30 rounds
SWEEP = {
    "sweep": "trust",
    "rounds": 12,
    "seeds": [0, 1],
    "embedding_sample": 0,
    "datasets": {"lin": {"data": DATA, "model": {"loss": "least_squares"}}},
    "algorithms": {
        "fedht": {"stepsize": [0.01, 0.03, BLOW_UP]},
        "fediterht": {"stepsize": [0.06, 0.08]},
        "distiht": {"stepsize": [0.001, 0.003], "local_steps": [1]},
    },
    "grid": {"local_steps": [3], "sparsity": [5], "batch_size": [5]},
}


def run_cfg(**extra) -> dict:
    return {
        "dataset": DATA,
        "algorithm": "fedht",
        "rounds": 30,
        "params": {"stepsize": BLOW_UP, **PARAMS},
        **extra,
    }


# ---------------------------------------------------------------------------- the rule


def test_a_finite_blow_up_ends_at_the_first_round_past_the_factor():
    free = fedsparse.run(run_cfg(divergence_factor=1e300))  # the whole trajectory
    obj = free["objective"].to_numpy(float)
    assert np.isfinite(obj).all() and (free["status"] == "ok").all() and len(free) == 31
    for factor in (1e3, 10.0):
        past = int(np.flatnonzero(obj > factor * obj[0])[0])
        assert 1 < past < 30 and obj[past - 1] <= factor * obj[0]
        kw = {} if factor == 1e3 else {"divergence_factor": factor}
        trace = fedsparse.run(run_cfg(**kw))
        # the rows up to and including that round, the last one marked diverged
        assert trace["round"].tolist() == list(range(past + 1))
        assert trace["status"].tolist() == ["ok"] * past + ["diverged"]
        np.testing.assert_allclose(trace["objective"], obj[: past + 1], rtol=1e-12)


def test_runs_that_do_not_blow_up_are_unchanged():
    cfg = run_cfg(params={"stepsize": 0.01, **PARAMS})
    a, b = fedsparse.run(cfg), fedsparse.run({**cfg, "divergence_factor": 1e300})
    assert len(a) == 31 and (a["status"] == "ok").all()
    pd.testing.assert_series_equal(a["objective"], b["objective"])


def test_is_diverged_compares_with_a_positive_start_only():
    assert is_diverged(math.inf, 1.0, 1e3) and is_diverged(math.nan, 1.0, 1e3)
    assert is_diverged(1000.5, 1.0, 1e3) and not is_diverged(1000.0, 1.0, 1e3)
    # a start of 0, below 0 or not finite gives no scale: only non-finite objectives count
    for start in (0.0, -2.0, math.nan):
        assert not is_diverged(1e200, start, 1e3)
        assert is_diverged(math.inf, start, 1e3)


def test_the_default_factor_keeps_run_ids_and_other_factors_change_them():
    plain = normalize_run_config(run_cfg())
    assert "divergence_factor" not in plain
    assert run_id(normalize_run_config(run_cfg(divergence_factor=1000))) == run_id(plain)
    ten = normalize_run_config(run_cfg(divergence_factor=10))
    assert ten["divergence_factor"] == 10.0 and run_id(ten) != run_id(plain)
    assert normalize_run_config(ten) == ten  # the canonical form normalises to itself
    plan = plan_sweep({**SWEEP, "divergence_factor": 10})
    assert {r.config["divergence_factor"] for r in plan.runs} == {10.0}
    assert all("divergence_factor" not in r.config for r in plan_sweep(SWEEP).runs)


@pytest.mark.parametrize("bad", [1, 0.5, -3, "big", math.inf, True])
def test_a_bad_divergence_factor_is_one_line_naming_the_key(bad):
    for check in (
        lambda: normalize_run_config(run_cfg(divergence_factor=bad)),
        lambda: plan_sweep({**SWEEP, "divergence_factor": bad}),
    ):
        with pytest.raises(ConfigError, match=r"^divergence_factor: must be") as exc:
            check()
        assert "\n" not in str(exc.value)


def test_grid_edges():
    searched = {"stepsize": [0.001, 0.003, 0.01], "local_steps": [1, 3], "sparsity": [5]}
    assert grid_edges({"stepsize": 0.001, "local_steps": 3, "sparsity": 5}, searched) == [
        "stepsize at the lower edge of the grid",
        "local_steps at the upper edge of the grid",
    ]
    assert grid_edges({"stepsize": 0.003, "local_steps": None, "sparsity": 5}, searched) == []
    # a null (batch_size = full batch) is not a searched value
    assert grid_edges({"batch_size": 5}, {"batch_size": [5, None]}) == []
    assert edge_warning(["stepsize at the lower edge of the grid"]) == (
        "stepsize at the lower edge of the grid: extend it"
    )


# ---------------------------------------------------------------------------- a real sweep


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> Path:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return run_sweep(tmp_path_factory.mktemp("trust"), SWEEP)


def test_the_sweep_blows_up_finitely_where_expected(results):
    runs = pd.read_parquet(results / "runs.parquet")
    div = runs[runs["status"] == "diverged"]
    blown = runs["stepsize"].eq(BLOW_UP) | runs["algorithm"].eq("fediterht")
    assert set(div["run_id"]) == set(runs.loc[blown, "run_id"]) and len(div) == 6
    # finite (so the old rule called them ok), above 1000 x the round-0 objective
    traces = pd.read_parquet(results / "traces")
    f0 = traces[traces["round"] == 0].set_index("run_id")["objective"]
    assert np.isfinite(div["final_objective"]).all()
    assert (div["final_objective"].to_numpy() > 1e3 * f0[div["run_id"]].to_numpy()).all()


def test_best_ranks_finite_blow_ups_last_and_flags_edges(results, capsys):
    with open_results([results]) as res:
        got = best_configurations(res).read_all().to_pandas().set_index("algorithm")
    assert got.loc["fedht", "stepsize"] == 0.03 and got.loc["fedht", "diverged"] == 0
    assert got.loc["fedht", "grid_edges"] == ""  # 0.05 was searched, diverged or not
    assert got.loc["fediterht", "diverged"] == 2  # every configuration diverged
    assert got.loc["fediterht", "mean_final_objective"] == math.inf
    assert got.loc["distiht", "stepsize"] == 0.003
    assert got.loc["distiht", "grid_edges"] == "stepsize at the upper edge of the grid"

    assert main(["best", str(results), "--limit", "0", "--all-columns"]) == 0  # full phrases
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[-1] == "grid_edges"
    (row,) = [ln for ln in lines if ln.split()[1:2] == ["distiht"]]
    assert row.endswith("stepsize at the upper edge of the grid")


def test_report_excludes_finite_blow_ups_and_flags_edges(results, tmp_path):
    a = an.analyse(results)
    best = a.best.set_index("algorithm")
    assert set(best.index) == {"fedht", "distiht"}  # FedIter-HT: all diverged
    assert best.loc["fedht", "stepsize"] == 0.03 and best.loc["fedht", "grid_edges"] == ""
    assert best.loc["distiht", "grid_edges"] == "stepsize at the upper edge of the grid"

    # the figure's y-axis spans the non-diverged curves, not the blow-ups
    fig = objective_figure(a.curves, {}, float(a.fstar["lin"]), "lin")
    top = fig.axes[0].get_ylim()[1]
    plt.close(fig)
    assert top < 20 < a.runs.loc[a.runs["status"] == "diverged", "final_objective"].min()

    page = build_report(results, tmp_path / "report").with_name("runs.html").read_text()
    summary = pd.read_csv(tmp_path / "report" / "tables" / "summary.csv").set_index("algorithm")
    assert summary.loc["fediterht", "best_config"] == "all configurations diverged"
    assert summary.loc["fedht", "diverged_runs"] == 2
    assert summary.loc["distiht", "grid_edges"] == "stepsize at the upper edge of the grid"
    assert pd.isna(summary.loc["fedht", "grid_edges"])  # empty cell
    assert "Distributed-IHT: stepsize at the upper edge of the grid: extend it." in page
    assert "Every configuration of FedIter-HT diverged" in page
    r2t = pd.read_csv(tmp_path / "report" / "tables" / "rounds_to_target.csv")
    verdicts = r2t.set_index("algorithm")["verdict"]
    caveat = "Provisional: in Distributed-IHT's best configuration, stepsize at the upper edge"
    assert caveat in verdicts["distiht"]
    assert "Provisional" not in verdicts["fedht"]


def test_optuna_best_table_flags_a_parameter_at_the_edge_of_the_trials():
    from fedsparse.report.tune_section import best_table, trials_table

    space = '{"local_steps": {"type": "int", "low": 1, "high": 9}, "stepsize": {"type": "float"}}'
    runs = pd.DataFrame(
        {
            "study": "s",
            "dataset": "lin",
            "algorithm": "fedht",
            "seed": 0,
            "trial_number": [0, 1, 2],
            "trial_state": "COMPLETE",
            "trial_value": [1.0, 2.0, 3.0],
            "stepsize": [0.001, 0.01, 0.1],
            "local_steps": [5, 9, 1],
            "search_space": space,
            "final_objective": 1.0,
            "status": "ok",
        }
    )
    row = best_table(runs, trials_table(runs)).iloc[0]
    assert row["best_trial"] == 0 and row["grid_edges"] == "stepsize at the lower edge of the grid"


def test_optuna_scores_a_finite_blow_up_as_diverged():
    from fedsparse.training.experiment import run_trace
    from fedsparse.tune.worker import metric_value

    for name in ("final_objective", "auc_log_objective"):
        metric = {"name": name}
        blown = run_trace(normalize_run_config(run_cfg()))
        free = run_trace(normalize_run_config(run_cfg(divergence_factor=1e300)))
        assert metric_value(blown, metric, 30) == math.inf
        assert math.isfinite(metric_value(free, metric, 30))  # the old rule's verdict


def test_report_gives_the_verdicts_at_the_papers_grid_and_at_ours(results, tmp_path):
    page = build_report(results, tmp_path / "report").with_name("ht.html").read_text()
    assert "How the verdicts depend on the step-size grid" in page
    sens = pd.read_csv(tmp_path / "report" / "tables" / "grid_sensitivity.csv")
    assert sens.groupby("algorithm").size().to_dict() == {"distiht": 2, "fedht": 2}
    dist = sens[sens["algorithm"] == "distiht"].set_index("grid")
    papers, ours = dist.index  # the papers' grid first
    assert papers.startswith("papers' (4 step sizes, 0.001 to 0.06)")
    assert ours.startswith("ours (7 step sizes, 0.001 to 0.08)")
    # Distributed-IHT's only papers' step size here is 0.001; ours adds the better 0.003
    assert "γ=0.001" in dist.loc[papers, "best_config"]
    assert "γ=0.003" in dist.loc[ours, "best_config"]
    assert "reference" in dist.loc[papers, "verdict"] and "reference" in dist.loc[ours, "verdict"]


def test_an_algorithm_that_diverged_everywhere_on_the_papers_grid_says_so(monkeypatch):
    """Its best configuration exists only on the finer grid: the papers' row says every
    configuration diverged there (instead of silently missing); a section without a target
    at the papers' grid gives its note instead, not a false "diverged"."""
    runs = pd.DataFrame({"stepsize": [0.001, 0.0003]})  # 0.001 is the papers', 0.0003 ours
    configs = pd.DataFrame(
        {
            "section": ["s", "s", "t"],
            "algorithm": ["distiht", "fedht", "fedht"],
            "valid": [True, False, True],
        }
    )
    best = pd.DataFrame(
        {"section": ["s", "t"], "algorithm": ["distiht", "fedht"], "config": ["γ=0.001", "γ=0.001"]}
    )
    small = an.Analysis(runs, pd.DataFrame(), configs, best, pd.DataFrame(), pd.Series())
    r2t = pd.DataFrame(
        {
            "section": ["s", "s", "t", "t"],
            "algorithm": ["distiht", "fedht", "distiht", "fedht"],
            "best_config": ["γ=0.001", "γ=0.0003", "γ=0.0003", "γ=0.0003"],
            "rounds_to_target": [100, None, 100, None],
            "agreement": ["", "does not agree", "", "does not agree"],
            "verdict": ["ref", "no", "ref", "no"],
        }
    )
    note = "No rounds-to-target table: every Distributed-IHT configuration diverged."
    monkeypatch.setattr(an, "analyse", lambda results_dir, stepsizes=None: small)
    monkeypatch.setattr(
        ht, "rounds_to_target", lambda _: (r2t[r2t["section"] == "s"].head(1), {"t": note})
    )
    sens = ht.grid_sensitivity("unused", small, r2t)
    fedht = sens[(sens["section"] == "s") & (sens["algorithm"] == "fedht")]
    fedht = fedht.reset_index(drop=True)
    assert len(fedht) == 2 and fedht.loc[0, "grid"].startswith("papers'")
    assert fedht.loc[0, "best_config"] == "all configurations diverged"
    assert "diverged" in fedht.loc[0, "verdict"] and fedht.loc[1, "best_config"] == "γ=0.0003"
    t = sens[(sens["section"] == "t") & sens["grid"].str.startswith("papers'")]
    t = t.set_index("algorithm")
    assert t.loc["fedht", "verdict"] == note and t.loc["fedht", "best_config"] == "γ=0.001"
