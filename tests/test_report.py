"""The comparison report, built from a small but real results folder.

The fixture runs ~80 short configurations with ``fedsparse.run`` (two Simulation I
non-IID levels and one Simulation II data set; the three algorithms; step sizes
including one that diverges; two seeds) and writes them as the sweep would:
``traces/`` hive-partitioned by data set and algorithm, plus ``runs.parquet``.
"""

from __future__ import annotations

import base64
import datetime as dt
import html
import json
import math
import re
import shutil
import socket
import subprocess
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import fedsparse
from fedsparse.report import build_report
from fedsparse.report.analysis import best_per_group
from fedsparse.results.schema import HYPERPARAMETER_COLUMNS, RUNS_SCHEMA, TRACE_SCHEMA, rows_table

HP = list(HYPERPARAMETER_COLUMNS)
PNG = b"\x89PNG\r\n\x1a\n"
LINEAR = ["sim-linear-a0.1-b0.1", "sim-linear-a1-b1"]
LOGISTIC = "sim-logistic-a1-b1"
DIVERGING = 1e5  # this step size overflows within a few rounds on the linear data


def _configs():
    def dataset(task, a, b):
        ds = {
            "kind": "synthetic",
            "task": task,
            "clients": 5,
            "dim": 30,
            "support": 5,
            "alpha": a,
            "beta": b,
        }
        ds.update(
            {"samples_per_client": 20}
            if task == "linear"
            else {"samples_per_client": 40, "positives": 10}
        )
        return ds

    plans = [
        (dataset("linear", 0.1, 0.1), [0.001, 0.005, DIVERGING], 12, "least_squares"),
        (dataset("linear", 1, 1), [0.001, 0.005, DIVERGING], 12, "least_squares"),
        (dataset("logistic", 1, 1), [0.02, 0.1], 20, "logistic"),
    ]
    for ds, steps, rounds, loss in plans:
        for alg in ("fedht", "fediterht", "distiht"):
            for step in steps:
                if alg == "distiht" and step == DIVERGING:
                    continue
                for k in [1] if alg == "distiht" else [3, 5]:
                    for seed in (0, 1):
                        yield {
                            "sweep": "test-sweep",
                            "dataset": ds,
                            "model": {"loss": loss},
                            "algorithm": alg,
                            "rounds": rounds,
                            "seed": seed,
                            "params": {
                                "stepsize": step,
                                "local_steps": k,
                                "sparsity": 10,
                                "batch_size": 5,
                            },
                        }


def _run_row(cfg: dict, trace: pd.DataFrame) -> dict:
    last = trace.iloc[-1]
    obj = trace["objective"]
    ds = cfg["dataset"]
    return {
        **{
            c: None if pd.isna(last[c]) else last[c]  # null hyperparameters of other families
            for c in (
                "run_id",
                "sweep",
                "dataset",
                "partition",
                "algorithm",
                "loss",
                "model",
                "seed",
                *HP,
            )
        },
        "rounds": cfg["rounds"],
        "eval_every": 1,
        "dataset_kind": ds["kind"],
        "dataset_task": ds["task"],
        "data_alpha": float(ds["alpha"]),
        "data_beta": float(ds["beta"]),
        "status": last["status"],
        "final_round": last["round"],
        "final_objective": last["objective"],
        "best_objective": float(obj[np.isfinite(obj)].min()),
        "train_time_s": last["elapsed_s"],
        "wall_time_s": last["elapsed_s"] + 0.01,
        "config_json": json.dumps(cfg, sort_keys=True),
        "shard": "0",
        "fedsparse_version": fedsparse.__version__,
        "git_commit": "0123456789abcdef",
        "python_version": "3.11",
        "numpy_version": np.__version__,
        "numba_version": "x",
        "host": socket.gethostname(),
        "finished_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
    }


def write_results(root: Path, traces: pd.DataFrame, runs: list[dict] | pd.DataFrame) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    table = pa.Table.from_pandas(traces, schema=TRACE_SCHEMA, preserve_index=False)
    pq.write_to_dataset(table, root / "traces", partition_cols=["dataset", "algorithm"])
    if isinstance(runs, pd.DataFrame):
        runs = runs.astype(object).where(runs.notna(), None).to_dict("records")
    pq.write_table(rows_table(runs, RUNS_SCHEMA), root / "runs.parquet")
    return root


@pytest.fixture(scope="module")
def sweep(tmp_path_factory):
    """(results folder, traces frame, runs frame) of the real mini sweep."""
    traces, runs = [], []
    with warnings.catch_warnings():  # the diverging step size overflows, as intended
        warnings.simplefilter("ignore", RuntimeWarning)
        for cfg in _configs():
            t = fedsparse.run(cfg)
            traces.append(t)
            runs.append(_run_row(cfg, t))
    traces = pd.concat(traces, ignore_index=True)
    root = write_results(tmp_path_factory.mktemp("results"), traces, runs)
    return root, traces, pd.read_parquet(root / "runs.parquet")


@pytest.fixture(scope="module")
def report(sweep):
    root = sweep[0]
    index = build_report(root)
    return index.parent


TEXT_READING, STD_READING = "text: α, β variances", "text: α, β standard deviations"


def _sections(claims: pd.DataFrame) -> pd.Series:
    """The data set of each HT claim row (its ``where`` also names Distributed-IHT's step)."""
    return claims["where"].str.split("; ").str[0]


def _tables(report_dir: Path, name: str) -> pd.DataFrame:
    return pd.read_csv(report_dir / "tables" / f"{name}.csv")


def _all_pages(report_dir: Path) -> str:
    return "\n".join(p.read_text() for p in sorted(report_dir.glob("*.html")))


# ----------------------------------------------------------------------- basic outputs


def test_sweep_fixture_has_diverged_runs(sweep):
    _, _, runs = sweep
    assert set(runs["dataset"]) == {*LINEAR, LOGISTIC}
    div = runs[runs["status"] == "diverged"]
    assert len(div) > 0 and set(div["stepsize"]) == {DIVERGING}


def test_the_analysis_does_not_depend_on_when_runs_finished(sweep, tmp_path):
    # two sweeps of the same runs finish in different orders (parallel shards): the report's
    # statistics, best configurations and their order must be the same to the last bit
    from fedsparse.report.analysis import analyse

    root, traces, runs = sweep
    later = runs.copy()
    stamps = pd.date_range("2026-01-01", periods=len(later), freq="s", tz="UTC")
    later["finished_at"] = [s.isoformat() for s in stamps[::-1]]  # the reverse finish order
    other = write_results(tmp_path / "other", traces, later.sample(frac=1.0, random_state=3))
    a, b = analyse(root), analyse(other)
    pd.testing.assert_frame_equal(a.configs, b.configs, check_exact=True)
    pd.testing.assert_frame_equal(a.best, b.best, check_exact=True)


def test_report_layout_and_figures(report):
    assert report.name == "report" and (report / "index.html").is_file()
    figures = sorted(p.name for p in (report / "figures").iterdir())
    expected = {f"objective_{d}.png" for d in [*LINEAR, LOGISTIC]}
    # one heatmap per algorithm: each stays readable at the page's width
    expected |= {
        f"heatmap_{d}_{a}.png" for d in [*LINEAR, LOGISTIC] for a in ("fedht", "fediterht")
    }
    expected |= {"noniid_linear_least_squares.png", "noniid_logistic_logistic.png"}
    expected |= {f"pareto_{d}.png" for d in [*LINEAR, LOGISTIC]}  # three algorithms each
    assert set(figures) == expected
    for name in figures:
        assert (report / "figures" / name).read_bytes()[:8] == PNG
    for name in expected - {f"objective_{d}.png" for d in [*LINEAR, LOGISTIC]}:
        width = int.from_bytes((report / "figures" / name).read_bytes()[16:20], "big")
        assert width <= 1100, f"{name}: {width} px, wider than the page"
    # atomic write: nothing left over next to or inside the report
    leftovers = [p.name for p in report.parent.iterdir() if p.name.startswith(".report.")]
    assert leftovers == []
    pages = {"index.html", "ht.html", "runs.html", "pareto.html"}  # no data.html: synthetic
    assert {p.name for p in report.iterdir()} == {*pages, "figures", "tables"}


def test_html_is_self_contained(report):
    pages = {p.name: p.read_text() for p in report.glob("*.html")}
    figures = list((report / "figures").glob("*.png"))
    embedded = set()
    for name, page in pages.items():
        imgs = re.findall(r"<img [^>]*>", page)
        srcs = re.findall(r'src="([^"]*)"', page)
        assert len(srcs) == len(imgs), name
        assert all(s.startswith("data:image/png;base64,") for s in srcs), name
        embedded |= {base64.b64decode(s.split(",", 1)[1]) for s in srcs}
        assert not re.search(r"https?://", page), name
        assert "<script" not in page and "<link" not in page, name
        ids = {name: set(re.findall(r'id="([^"]*)"', p)) for name, p in pages.items()}
        for href in re.findall(r'href="([^"]*)"', page):  # links stay inside the report
            target, _, anchor = href.partition("#")
            target = target or name
            assert target in pages, f"{name}: link to {href}"
            assert not anchor or anchor in ids[target], f"{name}: no #{anchor} in {target}"
    assert embedded == {p.read_bytes() for p in figures}  # the same figures as the files
    index, ht = pages["index.html"], pages["ht.html"]
    for text in (
        "test-sweep",
        fedsparse.__version__,
        "0123456789abcdef",
        socket.gethostname(),
        "Paper claims and our measurements",
        '<a href="ht.html">',
        "<table>",
    ):
        assert text in index
    for text in ("Rounds to reach Distributed-IHT", "Effect of the non-IID level"):
        assert text in ht
    assert f"{len(pd.read_csv(report / 'tables' / 'configs.csv'))} configurations" in index


def test_claims_table_feeds_the_index_from_the_family(report):
    """One claim per (data set, algorithm) the papers claim a speed-up for; its verdict is the
    rounds-to-target table's, and each row links to the section that measured it."""
    every = _tables(report, "claims")
    ht = every[every["paper"].str.contains("Fed-HT") & (every["reading"] == TEXT_READING)]
    claims = ht[ht["claim"].str.contains("needs fewer rounds")].reset_index(drop=True)
    r2t = _tables(report, "rounds_to_target")
    claimed = r2t[r2t["claimed_ratio"].notna()]
    assert len(claims) == len(claimed) == 5  # 2 algorithms x 2 Sim I levels, FedIter-HT Sim II
    assert claims["verdict"].tolist() == claimed["agreement"].tolist()
    assert _sections(claims).tolist() == claimed["section"].tolist()
    # Distributed-IHT was not run at 0.01 here: one scoring, at its own best step
    assert claims["where"].str.contains("; Distributed-IHT at its best step (γ=", regex=False).all()
    assert all(link.startswith("ht.html#r2t-") for link in claims["link"])
    for row, ratio in zip(claims.itertuples(), claimed["claimed_ratio"], strict=True):
        assert f"≈{ratio:g}x fewer rounds" in row.paper_value and "2 seeds" in row.ours
    index = (report / "index.html").read_text()
    for row in every.itertuples():
        if isinstance(row.link, str):
            assert f'href="{row.link}"' in index
        verdict = re.escape(html.escape(row.verdict))
        assert re.search(f'<td class="[a-z]+">{verdict}(</td>|<br><small>unmet: )', index)


def test_tables_parse_and_cover_everything(report, sweep):
    _, _, runs = sweep
    summary = _tables(report, "summary")
    assert set(summary["section"]) == {*LINEAR, LOGISTIC}
    assert set(summary["algorithm"]) == {"fedht", "fediterht", "distiht"}
    assert len(summary) == 9
    counts = runs.groupby(["dataset", "algorithm"]).size()
    div = runs.assign(d=runs["status"].eq("diverged")).groupby(["dataset", "algorithm"])["d"].sum()
    s = summary.set_index(["section", "algorithm"])
    assert (s["runs"] == counts.reindex(s.index).to_numpy()).all()
    assert (s["diverged_runs"] == div.reindex(s.index).to_numpy()).all()
    assert s.loc[(LINEAR[0], "fedht"), "diverged_runs"] == 4
    for name in ("rounds_to_target", "heatmap", "noniid", "datasets", "configs"):
        assert len(_tables(report, name)) > 0
    noniid = _tables(report, "noniid")
    lin = noniid[noniid["task"] == "linear"].sort_values("alpha")
    assert lin[["alpha", "beta"]].to_numpy().tolist() == [[0.1, 0.1], [1.0, 1.0]]
    assert {"fedht", "fediterht", "distiht"} <= set(noniid.columns)


def test_wallclock_model_times_the_rounds_to_target(report):
    """The papers' wall-clock model (150 ms per round, 20 µs per local step) applied to the
    rounds-to-target table, and its "at least 1.6x faster" claim for each claimed speed-up."""
    clock = _tables(report, "wallclock")
    r2t = _tables(report, "rounds_to_target")
    assert len(clock) == len(r2t)
    reached = clock[clock["seconds"].notna()]
    assert len(reached) == int(r2t["reached"].sum()) > 0
    want = reached["rounds"] * 0.15 + reached["local_steps_per_client"] * 2e-5
    np.testing.assert_allclose(reached["seconds"], want)
    for _, t in reached.groupby("section"):
        base = t.loc[t["algorithm"] == "distiht", "seconds"]
        if len(base):
            np.testing.assert_allclose(t["speedup"], base.iloc[0] / t["seconds"])
    claims = _tables(report, "claims")
    claims = claims.assign(where=_sections(claims))
    wall = claims[claims["claim"].str.contains("wall-clock")]
    text = wall[wall["reading"] == TEXT_READING]
    assert len(text) == int(r2t["claimed_ratio"].notna().sum())
    for row in wall.itertuples():  # the standard-deviations reading: Simulation II's again
        mine = clock[clock["section"] == row.where].set_index("algorithm")
        name = "fedht" if row.claim.startswith("Fed-HT") else "fediterht"
        speedup = mine.loc[name, "speedup"]
        # a toy sweep: never the papers' verdict, and the row says why
        assert row.verdict == "not at the paper's setting"
        assert "d 1000, ran 30" in row.unmet and "5 seeds, ran 2" in row.unmet
        if row.where == LINEAR[1]:  # the papers state it at Simulation I's (0.1, 0.1) only
            assert "α 0.1, ran 1" in row.unmet
        assert row.link.startswith("ht.html#clock-") and "at least 1.6x" in row.paper_value
        assert row.tolerance == "≥1.6x within a factor 1.5: ≥ 1.07" and row.seeds == 2
        if pd.notna(speedup):  # the interval: a bootstrap over the 2 seeds of the same computation
            lo, hi = (math.inf if v == "∞" else float(v) for v in _bounds(row.interval))
            assert lo <= speedup * 1.005 and speedup <= hi * 1.005  # 3 significant digits
            assert "bootstrap over 2 seeds" in row.interval


def _bounds(interval: str) -> list[str]:
    """The two bounds of a claims row's interval text ("[1.2, ∞] (95 %, …)")."""
    return interval[1 : interval.index("]")].split(", ")


def _best(runs: pd.DataFrame, dataset: str, algorithm: str) -> pd.DataFrame:
    """The best configuration's runs, computed directly."""
    r = runs[(runs["dataset"] == dataset) & (runs["algorithm"] == algorithm)]
    r = r.assign(
        fin=r["final_objective"].where(np.isfinite(r["final_objective"])),
        div=r["status"].eq("diverged"),
    )
    g = r.groupby(HP, dropna=False)
    stats = pd.DataFrame({"div": g["div"].any(), "mean": g["fin"].mean()}).reset_index()
    best = stats[~stats["div"]].sort_values("mean").iloc[0]
    keep = np.ones(len(r), bool)
    for c in HP:
        keep &= (r[c].isna() & pd.isna(best[c])).to_numpy() | (r[c] == best[c]).fillna(False)
    return r[keep]


def test_rounds_to_target_matches_direct_computation(report, sweep):
    _, traces, runs = sweep
    table = _tables(report, "rounds_to_target")
    assert set(table["section"]) == {*LINEAR, LOGISTIC}
    for dataset in [*LINEAR, LOGISTIC]:
        curve = {}
        for alg in ("distiht", "fedht", "fediterht"):
            ids = _best(runs, dataset, alg)["run_id"]
            curve[alg] = traces[traces["run_id"].isin(ids)].groupby("round")["objective"].mean()
        r = min(200 if dataset == LOGISTIC else 100, int(curve["distiht"].index.max()))
        assert r == (20 if dataset == LOGISTIC else 12)
        target = curve["distiht"].loc[r]
        for alg, c in curve.items():
            row = table[(table["section"] == dataset) & (table["algorithm"] == alg)].iloc[0]
            assert row["R"] == r and row["target"] == pytest.approx(target, rel=1e-12)
            hit = c[c <= target]
            if len(hit):
                assert row["reached"] and row["rounds_to_target"] == hit.index.min()
                assert row["ratio"] == pytest.approx(r / hit.index.min())
            else:
                assert not row["reached"] and pd.isna(row["rounds_to_target"])
                assert "does not reach" in row["verdict"]
    claims = table.set_index(["section", "algorithm"])["claimed_ratio"]
    assert claims[(LINEAR[0], "fedht")] == 1.7 and claims[(LINEAR[1], "fediterht")] == 5.0
    assert claims[(LOGISTIC, "fediterht")] == 4.0 and pd.isna(claims[(LOGISTIC, "fedht")])
    for row in table[table["claimed_ratio"].notna()].itertuples():
        # a toy sweep: the measurement is shown, never scored as the papers' claim
        assert row.agreement == "not at the paper's setting"
        assert "Not scored: not at the papers' setting (" in row.verdict
        assert "needs 100 rounds" in row.unmet or "needs 200 rounds" in row.unmet
        if row.section == LINEAR[1]:  # Simulation I's claims are the papers' at (0.1, 0.1)
            assert "α 0.1, ran 1; β 0.1, ran 1" in row.unmet
    assert (
        table.loc[(table["section"] == LOGISTIC) & (table["algorithm"] == "fedht"), "verdict"]
        .str.contains("no claim")
        .all()
    )


def test_heatmap_marks_diverged_configs(report, sweep):
    cells = _tables(report, "heatmap")
    assert set(cells["algorithm"]) == {"fedht", "fediterht"}
    div = cells[cells["stepsize"] == DIVERGING]
    assert len(div) == 2 * 2 * 2  # 2 data sets x 2 algorithms x 2 local-step values
    assert (div["cell"] == "div").all()
    ok = cells[cells["stepsize"] != DIVERGING]
    assert (ok["cell"] != "div").all() and np.isfinite(ok["best_final"]).all()
    page = (report / "ht.html").read_text()
    assert "<td>div</td>" in page


def test_best_config_excludes_diverged_and_averages_seeds(report, sweep):
    _, _, runs = sweep
    summary = _tables(report, "summary").set_index(["section", "algorithm"])
    for dataset in [*LINEAR, LOGISTIC]:
        for alg in ("fedht", "fediterht", "distiht"):
            best = _best(runs, dataset, alg)
            row = summary.loc[(dataset, alg)]
            assert row["mean_final"] == pytest.approx(best["final_objective"].mean())
            assert row["sd_final"] == pytest.approx(best["final_objective"].std())
            assert row["best_seeds"] == 2
            assert f"γ={best['stepsize'].iloc[0]:g}" in row["best_config"]


# ----------------------------------------------------------------------- readings, verdicts


def test_best_per_group_picks_by_one_rule():
    """The one rule every page picks a best configuration by: the best score wins, a missing
    score never does, a tie goes to the configuration listed first, each end of the scale."""
    configs = pd.DataFrame(
        {
            "algorithm": ["a", "a", "a", "b", "b", "c"],
            "step": [1, 2, 3, 1, 2, 1],
            "score": [0.5, 0.2, 0.2, np.nan, 0.9, np.nan],
        }
    )
    lower = best_per_group(configs, ["algorithm"], "score", "lower")
    assert lower[["algorithm", "step"]].values.tolist() == [["a", 2], ["b", 2]]
    higher = best_per_group(configs, ["algorithm"], "score", "higher")
    assert higher[["algorithm", "step"]].values.tolist() == [["b", 2], ["a", 1]]
    assert list(higher.index) == [4, 0]  # rows of configs, best first
    with pytest.raises(ValueError, match="better"):
        best_per_group(configs, ["algorithm"], "score", "smaller")


def test_claims_table_names_reading_and_claim_kind(report):
    """Every row says which reading it was measured in and whether the paper makes the claim;
    Simulation I's claims are scored at the papers' (α, β) only, and the families without runs
    here still list their papers' claims, naming the config that measures them."""
    from fedsparse.report.claims import COLUMNS

    claims = _tables(report, "claims")
    assert list(claims.columns) == COLUMNS
    ht = claims[claims["paper"].str.contains("Fed-HT")]
    assert set(ht["reading_kind"]) == {"paper_text"} and set(ht["claim_kind"]) == {"paper"}
    # at α = β = 1 the standard-deviations reading has the variances reading's data: Simulation
    # II's claims (made there) are that reading's too; Simulation I's at (1, 1) are no claim
    std = ht[ht["reading"] == STD_READING]
    assert set(_sections(std)) == {LOGISTIC} and len(std) == 2
    ht = ht[ht["reading"] == TEXT_READING].assign(where=_sections(ht))
    other_level = ht[ht["where"] == LINEAR[1]]
    assert len(other_level) == 4 and set(other_level["verdict"]) == {"not at the paper's setting"}
    assert other_level["paper_value"].str.contains(r"Simulation I, \(α, β\) = \(0.1, 0.1\)").all()
    assert other_level["unmet"].str.contains("α 0.1, ran 1", regex=False).all()
    at_level = ht[ht["where"].isin([LINEAR[0], LOGISTIC])]
    assert len(at_level) == 6  # at the papers' (α, β), but a toy size, 2 seeds: not scored
    assert set(at_level["verdict"]) == {"not at the paper's setting"}
    assert at_level["unmet"].str.contains("d 1000, ran 30; clients 100, ran 5").all()
    assert not at_level["unmet"].str.contains("α").any()
    assert at_level["needs"].str.contains("τ = 200; methods ").all()
    configs = {
        "sFedHP": "config/sfedhp-quick.yaml",
        "Gradient Sparsification": "config/gs-quick.yaml",
        "SSCA": "config/ssca-quick.yaml",
    }
    for paper, config in configs.items():
        rows = claims[claims["paper"].str.contains(paper)]
        assert len(rows) >= 3 and set(rows["verdict"]) == {"not measured here"}, paper
        assert rows["ours"].str.contains(config, regex=False).all(), paper
        assert (rows["reading_kind"] != "variation").all() and rows["link"].isna().all()
    ssca = claims[claims["paper"].str.contains("SSCA")].set_index("claim")["claim_kind"]
    assert ssca[ssca.index.str.startswith("Algorithm 2: the training cost settles")].tolist() == [
        "derived"
    ]
    index = html.unescape((report / "index.html").read_text())
    rounds, clock = (ht[ht["claim"].str.contains(w)] for w in ("fewer rounds", "wall-clock"))
    assert len(rounds) == 5 and len(clock) == 5
    counts = ht["verdict"].value_counts()
    words = {"not at the paper's setting": "not at the paper's setting"}
    said = ", ".join(f"{counts[v]} {w}" for v, w in words.items() if counts.get(v, 0))
    assert said == "10 not at the paper's setting"
    # the headline counts each measurement once: the standard-deviations rows are the
    # variances reading's runs, so they add nothing to it
    opening = re.search(
        r"Federated Nonconvex Sparse Learning[^<]*?: in the paper's readings, ([^(<]*) \("
        r"text: α, β variances \(paper_text\): ([^;<]*);",
        index,
    )
    assert opening and opening.group(1).startswith(said or "")
    assert opening.group(2).startswith(said or "")
    assert "agree" not in opening.group(1).replace("not at the paper's setting", "")
    assert "(paper_text): 2 " in index and "on the runs of text: α, β variances" in index
    assert "derived expectations of ours (not the paper's claims): 1 not measured here" in index


def test_the_index_shows_each_measurement_once_scored_rows_first(report):
    """The index's table has one row per measurement (a reading that reuses another's runs
    joins that row), the scored rows outside any fold, the no-claim rows folded under one
    line, and papers named by their titles, not the project's spec numbers."""
    from fedsparse.report.verdicts import measurements

    claims = _tables(report, "claims")
    index = html.unescape((report / "index.html").read_text())
    reused = claims[claims["same_runs_as"].fillna("") != ""]
    assert len(reused) == 2 and set(reused["same_runs_as"]) == {TEXT_READING}
    unique = measurements(claims)
    assert len(unique) == len(claims) - len(reused)
    joined = unique[unique["readings"].str.contains(STD_READING, regex=False)]
    assert len(joined) == 2 and joined["readings"].str.startswith(TEXT_READING).all()
    section = index[index.index('id="claims"') : index.index('id="pages"')]
    verdict_cells = re.findall(r'<td class="(agree|disagree|unmeasured)">', section)
    assert len(verdict_cells) == len(unique)  # every measurement shown once, none twice
    ht = unique[unique["paper"].str.contains("Fed-HT")]
    unmet = (ht["verdict"] == "not at the paper's setting").sum()
    fold = f"<details><summary>{unmet} measurements not at the paper's setting"
    assert unmet == len(ht) and fold in section  # a toy sweep scores none of the claims
    folded = section.split("<h3", 2)[1].split(fold)[0]  # the paper's rows before the fold
    assert not re.findall(r'<td class="(agree|disagree)">', folded)
    assert "not at the paper's setting<br>" not in folded
    assert not re.search(r"seeds? 00\d", index)
    assert "Sparse Federated Learning with Hierarchical Personalization Models" in index
    assert "Pages" in index and index.index('id="claims"') < index.index('id="provenance"')
    ht = (report / "ht.html").read_text()
    assert "LibSVM" not in ht  # synthetic data only: the generator's reading notes


def test_a_derived_claim_never_counts_as_the_papers():
    from fedsparse.report.claims import (
        AGREES,
        DERIVED,
        DISAGREES,
        PAPER_TEXT,
        Claim,
        Reading,
        claims_frame,
        in_reading,
    )
    from fedsparse.report.verdicts import paper_verdicts

    own = Reading("as written", PAPER_TEXT, "The paper's text.", lambda c: True)
    found = in_reading(
        [
            Claim("P", "the paper's claim", "1", "2", DISAGREES),
            Claim("P", "our expectation", "", "3", AGREES, claim_kind=DERIVED),
        ],
        own,
    )
    (sentence,) = paper_verdicts(claims_frame(found))
    head, derived = sentence.split("; derived expectations of ours")
    assert head == "P: in the paper's reading (as written): 1 do not agree"
    assert "agree" not in head.replace("do not agree", "")
    assert derived == " (not the paper's claims): 1 agree."
    with pytest.raises(ValueError, match="claim kind"):
        Claim("P", "c", "", "", AGREES, claim_kind="ours")


def test_a_claim_measured_only_in_a_variation_says_so_in_the_papers_reading():
    from fedsparse.report.build import only_in_variations
    from fedsparse.report.claims import (
        AGREES,
        DERIVED,
        NOT_MEASURED,
        PAPER_TEXT,
        VARIATION,
        Claim,
        Family,
        Reading,
        claims_frame,
        in_reading,
        require_evidence,
    )
    from fedsparse.report.verdicts import paper_verdicts

    own = Reading("as written", PAPER_TEXT, "The paper's text.", lambda c: False)
    ours = Reading("ours", VARIATION, "Another model.", lambda c: True)
    fam = Family("f", "F", "P", frozenset(), lambda *a: [], (own, ours), (), "config/f.yaml")
    judged = "a declared setting"  # as evidence.judge leaves a claim it scored
    found = in_reading([Claim("P", "both", "", "1", AGREES, needs=judged)], own) + in_reading(
        [
            Claim("P", "both", "", "2", AGREES, needs=judged),
            Claim("P", "variation only", "", "3", AGREES, anchor="x", needs=judged),
            Claim("P", "derived", "", "4", AGREES, claim_kind=DERIVED),
        ],
        ours,
    )
    rows = claims_frame(only_in_variations(fam, require_evidence(found)), fam)
    assert rows.loc[rows["reading"] == "ours", "claim_kind"].tolist() == [
        "variation",
        "variation",
        "derived",
    ]
    extra = rows[rows["ours"].str.startswith("measured only in a variation")]
    assert extra["claim"].tolist() == ["variation only"]
    assert extra["verdict"].tolist() == [NOT_MEASURED] and extra["reading"].tolist() == [own.name]
    assert "config/f.yaml" in extra["ours"].iloc[0] and extra["link"].iloc[0] == "f.html#x"
    assert rows["reading_kind"].tolist()[:2] == [PAPER_TEXT, PAPER_TEXT]  # the paper's first
    (sentence,) = paper_verdicts(rows)
    assert sentence.startswith("P: in the paper's reading (as written): 1 agree, 1 not measured")
    assert "in our variations (ours): 2 agree" in sentence
    assert sentence.endswith("Measured only in a variation: 1 claim.")


def test_stand_in_readings_are_named_once_each_part():
    from fedsparse.report.claims import (
        AGREES,
        DISAGREES,
        PAPER_TEXT,
        Claim,
        Reading,
        claims_frame,
        in_reading,
    )
    from fedsparse.report.verdicts import paper_verdicts

    text = Reading("5 labels (a; b)", PAPER_TEXT, "The paper's text.", lambda c: True)
    found = in_reading(
        [
            Claim("P", "one", "", "1", AGREES, stand_in="small net (cheaper; 6x)"),
            Claim("P", "two", "", "2", DISAGREES, stand_in="FMNIST for MNIST"),
            Claim(
                "P", "three", "", "3", AGREES, stand_in="FMNIST for MNIST; small net (cheaper; 6x)"
            ),
        ],
        text,
    )
    (sentence,) = paper_verdicts(claims_frame(found))
    assert sentence == (
        "P: in the paper's own reading: none; on its stand-ins (5 labels (a; b); stand-ins: small "
        "net (cheaper; 6x); FMNIST for MNIST): 2 agree, 1 do not agree."
    )


def test_readings_are_recognised_from_the_runs_configs():
    """No label in the configs: each family's predicates read what a run did."""
    import math

    from fedsparse.families.gradient_sparsification import report as gs_section
    from fedsparse.families.sfedhp import report as sfedhp_section
    from fedsparse.families.ssca import report as ssca_section
    from fedsparse.report.claims import reading_of
    from fedsparse.training.config import normalize_run_config

    fmnist = {"kind": "idx", "source": "fashion-mnist"}
    mlp = {"kind": "mlp", "loss": "softmax", "hidden": [100], "weights": "samples"}

    def cfg(partition, model, algorithm="fedavg", **params):
        base = {"stepsize": 0.01, "batch_size": 32, **params}
        return normalize_run_config(
            {
                "dataset": fmnist,
                "partition": partition,
                "model": model,
                "algorithm": algorithm,
                "params": base,
                "rounds": 2,
            }
        )

    def kind(readings, config):
        return reading_of(readings, config).kind

    cycle = {"kind": "label_cycle", "clients": 20, "scope": "per_client"}
    pooled = {
        **cycle,
        "labels_per_client": 2,
        "train_per_label": 600,
        "test_per_label": 200,
        "test_pool": "pooled",
    }
    text = {**cycle, "labels_per_client": 5, "train_per_label": 200, "test_per_label": 800}
    R = sfedhp_section.READINGS
    assert kind(R, cfg(pooled, mlp)) == "authors_code"
    assert kind(R, cfg(text, mlp)) == "paper_text"
    assert kind(R, cfg({**pooled, "test_pool": "split"}, mlp)) == "variation"
    assert kind(R, cfg({"kind": "iid", "clients": 20}, mlp)) == "variation"

    # Remark 1's 784-100-10 network: D = 79,510; the paper's k/D = 0.225 % is k = 179
    dirichlet = {"kind": "dirichlet", "alpha": 0.3, "clients": 156}
    assert gs_section.n_params(cfg(dirichlet, mlp)) == 79_510
    k = math.ceil(0.00225 * 79_510)
    G = gs_section.READINGS
    assert kind(G, cfg(dirichlet, mlp, "fabtopk", k=k)) == "paper_text"
    assert kind(G, cfg(dirichlet, mlp)) == "paper_text"  # FedAvg has no k
    assert kind(G, cfg(dirichlet, mlp, "fabtopk", k=1000)) == "variation"  # k/D = 1.3 %
    uniform = {**mlp, "weights": "uniform"}
    assert kind(G, cfg(dirichlet, uniform, "fabtopk", k=k)) == "variation"
    linear = {"loss": "softmax", "weights": "samples"}
    assert gs_section.n_params(cfg(dirichlet, linear)) == 7_840
    assert kind(G, cfg(dirichlet, linear, "fabtopk", k=18)) == "variation"
    assert kind(G, cfg({"kind": "one_class", "clients": 10}, mlp, "fabtopk", k=k)) == "variation"

    S = ssca_section.READINGS
    small = {**mlp, "init": {"kind": "normal", "std": 0.01}}
    assert kind(S, cfg({"kind": "iid", "clients": 10}, small)) == "paper_text"
    assert kind(S, cfg({"kind": "iid", "clients": 10}, mlp)) == "variation"  # Glorot
    wide = {**mlp, "init": {"kind": "normal", "std": 0.1}}
    assert kind(S, cfg({"kind": "iid", "clients": 10}, wide)) == "variation"


def test_ht_page_defects_of_issue_25(report, tmp_path):
    """Unreached targets read "not reached"; the page says why the reference can touch its
    own target before R; f̂ is named for what it is."""
    from types import SimpleNamespace

    from fedsparse.families.hard_thresholding import report as ht_section
    from fedsparse.report.page import Page

    page = Page(tmp_path)
    clock = pd.DataFrame(
        {
            "section": ["s", "s"],
            "algorithm": ["distiht", "fedht"],
            "rounds": [12, None],
            "local_steps_per_client": [12.0, None],
            "seconds": [1.8, None],
            "speedup": [1.0, None],
        }
    )
    clock["rounds"] = clock["rounds"].astype("Int64")
    ht_section._wallclock(page, SimpleNamespace(slug="s"), clock)
    doc = page.write("x.html", "x").read_text()
    row = re.search(r"<tr><td>Fed-HT</td>(.*?)</tr>", doc).group(1)
    assert "not reached" in row and "<td></td>" not in row
    ht = (report / "ht.html").read_text()
    assert "need not fall monotonically" in ht and "averaged over seeds" in ht
    assert "an estimate of f*, not the optimum" in (report / "index.html").read_text()


# ----------------------------------------------------------------------- edge cases


@pytest.fixture(scope="module")
def edge_report(sweep, tmp_path_factory):
    """No Distributed-IHT on one data set (with an unsafe name), all Fed-HT configs diverged
    on another, a single seed on the third, and NaN objectives."""
    _, traces, runs = sweep
    odd = "odd name/with:chars*?"
    keep_t, keep_r = [], []
    # 1. no distiht, unsafe name
    r = runs[(runs["dataset"] == LINEAR[1]) & (runs["algorithm"] != "distiht")]
    keep_r.append(r.assign(dataset=odd))
    keep_t.append(traces[traces["run_id"].isin(r["run_id"])].assign(dataset=odd))
    # 2. every fedht configuration diverged
    r = runs[runs["dataset"] == LINEAR[0]]
    r = r[(r["algorithm"] != "fedht") | (r["stepsize"] == DIVERGING)]
    keep_r.append(r)
    keep_t.append(traces[traces["run_id"].isin(r["run_id"])])
    # 3. single seed, and a NaN objective in one run
    r = runs[(runs["dataset"] == LOGISTIC) & (runs["seed"] == 0)].copy()
    nan_run = r["run_id"].iloc[0]
    r.loc[r["run_id"] == nan_run, "final_objective"] = np.nan
    keep_r.append(r)
    t = traces[traces["run_id"].isin(r["run_id"])].copy()
    t.loc[(t["run_id"] == nan_run) & (t["round"] == 3), "objective"] = np.nan
    keep_t.append(t)
    root = write_results(
        tmp_path_factory.mktemp("edge"), pd.concat(keep_t), pd.concat(keep_r, ignore_index=True)
    )
    out = root / "elsewhere" / "rep"
    return build_report(root, out).parent, odd


def test_edge_cases(edge_report):
    report, odd = edge_report
    page = _all_pages(report)
    for f in (report / "figures").iterdir():
        assert re.fullmatch(r"[A-Za-z0-9._-]+\.png", f.name), f.name
    assert (report / "figures" / "objective_odd_name_with_chars.png").exists()
    assert "odd name/with:chars*?" in page
    assert "Distributed-IHT was not run on this data set" in page
    assert "Every configuration of Fed-HT diverged" in page
    assert "single seed per configuration: no min-max band" in page
    summary = _tables(report, "summary").set_index(["section", "algorithm"])
    assert summary.loc[(LINEAR[0], "fedht"), "best_config"] == "all configurations diverged"
    assert np.isfinite(summary["mean_final"].drop((LINEAR[0], "fedht"))).all()
    r2t = _tables(report, "rounds_to_target")
    assert odd not in set(r2t["section"])
    assert "fedht" not in set(r2t.loc[r2t["section"] == LINEAR[0], "algorithm"])
    assert set(r2t.loc[r2t["section"] == LOGISTIC, "algorithm"]) == {
        "distiht",
        "fedht",
        "fediterht",
    }
    assert not any(p.name.startswith(".rep.") for p in report.parent.iterdir())


def test_rebuild_replaces_atomically_and_crash_keeps_old(sweep, tmp_path, monkeypatch):
    import fedsparse.report.build as rep
    from fedsparse.families.hard_thresholding import report as ht_section

    monkeypatch.setattr(rep, "objective_figure", lambda *args, **kwargs: None)  # plotting is slow
    for name in ("heatmap_figure", "noniid_figure"):
        monkeypatch.setattr(ht_section, name, lambda *args, **kwargs: None)
    root = sweep[0]
    out = tmp_path / "rep"
    out.mkdir()
    (out / "stale.txt").write_text("old")
    build_report(root, out)
    assert not (out / "stale.txt").exists() and (out / "index.html").exists()
    before = (out / "index.html").read_bytes()

    def boom(*args, **kwargs):
        raise RuntimeError("crash while plotting")

    monkeypatch.setattr(ht_section, "heatmap_figure", boom)
    with pytest.raises(RuntimeError, match="crash while plotting"):
        build_report(root, out)
    assert (out / "index.html").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rep"]


def test_missing_runs_table_is_a_clear_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="runs.parquet"):
        build_report(tmp_path)
    assert list(tmp_path.iterdir()) == []


# ----------------------------------------------------------------------- in a browser

CHECK = """<script>
window.addEventListener('load', function () {
  var broken = [], links = [];
  for (var i = 0; i < document.images.length; i++) {
    var im = document.images[i];
    if (!im.complete || im.naturalWidth === 0) broken.push(i);
  }
  var folder = location.href.slice(0, location.href.lastIndexOf('/') + 1);
  document.querySelectorAll('[href]').forEach(function (a) {
    if (a.href.indexOf(folder) !== 0) links.push(a.getAttribute('href'));  // leaves the report
  });
  var p = document.createElement('pre');
  p.textContent = 'FEDSPARSE-CHECK images=' + document.images.length + ' broken=' +
    broken.join(',') + ' links=' + links.join(',') + ' END';
  document.body.appendChild(p);
});
</script>"""


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


def test_report_renders_in_headless_chromium(report, tmp_path):
    """Every page opens in a real browser: all its images decode, no link leaves the report."""
    browser = _chromium()
    if browser is None:
        pytest.skip("chromium not installed: apt-get install chromium")
    copy = tmp_path / "report"
    shutil.copytree(report, copy)
    for page_path in sorted(copy.glob("*.html")):
        images = len(re.findall(r"<img ", page_path.read_text()))
        probe = copy / f"probe-{page_path.name}"
        probe.write_text(page_path.read_text().replace("</body>", CHECK + "</body>"))
        out = _dump_dom(browser, probe, tmp_path)
        m = re.search(r"FEDSPARSE-CHECK images=(\d+) broken=(.*?) links=(.*?) END", out.stdout)
        assert m, f"{page_path.name}: no check marker in chromium output: {out.stderr[-2000:]}"
        assert int(m.group(1)) == images, page_path.name
        assert m.group(2) == "", f"{page_path.name}: broken images: {m.group(2)}"
        assert m.group(3) == "", f"{page_path.name}: links out of the report: {m.group(3)}"


def _dump_dom(browser: str, page: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    cmd = [
        browser,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={tmp_path / 'profile'}",
        "--run-all-compositor-stages-before-draw",
        "--virtual-time-budget=10000",
        "--dump-dom",
        page.as_uri(),
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


# ----------------------------------------------------------------------- reading once


def test_a_build_reads_the_runs_once_and_never_the_whole_traces(sweep, tmp_path, monkeypatch):
    """Every page reads through the build's one ReportData: the runs file is loaded once, no
    page opens the folder again, and what comes back from the traces is what a table or
    figure shows (per-run minima, the best configurations' rows), never the traces whole."""
    import sys

    import fedsparse.query
    import fedsparse.query.read
    from fedsparse.report import data as report_data

    root, traces, runs = sweep
    opened = []
    real_init = report_data.ReportData.__init__

    def counted(self, *args, **kwargs):
        real_init(self, *args, **kwargs)
        opened.append(self)

    def refuse(*args, **kwargs):
        raise AssertionError("the report read the results folder outside its ReportData")

    monkeypatch.setattr(report_data.ReportData, "__init__", counted)
    monkeypatch.setattr(pq, "read_table", refuse)
    monkeypatch.setattr(pd, "read_parquet", refuse)
    for name, module in list(sys.modules.items()):
        if name.startswith(("fedsparse.report", "fedsparse.query")):
            for attr in ("read_results", "open_results"):
                if hasattr(module, attr):
                    monkeypatch.setattr(module, attr, refuse)
    assert fedsparse.query.read.read_results is refuse and fedsparse.query.open_results is refuse

    build_report(root, tmp_path / "report")
    assert len(opened) == 1
    data = opened[0]
    assert data.reads["runs"] == 1
    runs_loads = [n for sql, n in data.queries if sql == "runs table"]
    assert runs_loads == [len(runs)]
    from_traces = [n for sql, n in data.queries if "traces" in sql]
    assert from_traces, "the curves come from the traces"
    # one row per run at most, or the best configurations' rows: each a small share
    assert max(from_traces) <= max(len(runs), len(traces) // 3)
    assert sum(from_traces) < len(traces)


def test_config_facts_are_columns_read_once(tmp_path):
    """The facts pages used to re-parse from config_json (centring, data source, client count,
    a replayed k sequence) are columns of the runs table, as the JSON says."""
    from fedsparse.report.data import ReportData
    from fedsparse.results.schema import trace_table

    configs = {
        "a": {"dataset": {"kind": "synthetic", "center": "global", "clients": 7}, "params": {}},
        "b": {
            "dataset": {"kind": "idx", "source": "mnist"},
            "partition": {"kind": "dirichlet", "clients": 100},
            "params": {"k_sequence": {"run": "a", "metric": "k_used"}},
        },
        "c": {
            "dataset": {"kind": "libsvm", "clients": 0},
            "partition": "natural",
            "params": {"k_sequence": "a"},
        },
    }
    runs = [
        {"run_id": rid, "dataset": "d", "algorithm": "fedht", "config_json": json.dumps(cfg)}
        for rid, cfg in configs.items()
    ] + [{"run_id": "none", "dataset": "d", "algorithm": "fedht"}]
    rows = [{"run_id": "a", "dataset": "d", "algorithm": "fedht", "round": 0, "objective": 1.0}]
    root = write_results(tmp_path / "r", trace_table(rows).to_pandas(), runs)
    with ReportData(root) as data:
        facts = data.run_frame(["run_id", "center", "source", "clients", "k_sequence_run"])
        got = facts.astype(object).where(facts.notna(), None).set_index("run_id").T.to_dict()
        assert got == {
            "a": {"center": "global", "source": "", "clients": 7, "k_sequence_run": None},
            "b": {"center": "none", "source": "mnist", "clients": 100, "k_sequence_run": "a"},
            "c": {"center": "none", "source": "", "clients": None, "k_sequence_run": None},
            "none": {"center": "none", "source": "", "clients": None, "k_sequence_run": None},
        }
        assert data.configs(["b", "none"]) == {"b": configs["b"], "none": {}}
        assert "config_json" not in data.runs_table.column_names  # read per run, when asked
        assert data.reads["runs"] == 1
