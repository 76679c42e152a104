"""scripts/report-screenshot, the README's image of the report's index: the verdict counts it
records beside the image are those the rendered index shows and those the report's claims.csv
holds (each measurement once), and it refuses to write an image when they disagree."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from conftest import run_sweep

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "report-screenshot"


def _dataset(task: str, a: float) -> dict:
    ds = {"kind": "synthetic", "task": task, "clients": 4, "dim": 20, "support": 4}
    ds |= {"alpha": a, "beta": a, "seed": 0}
    ds |= {"samples_per_client": 20} if task == "linear" else {"samples_per_client": 30}
    return ds | ({"positives": 8} if task == "logistic" else {})


# Simulation I at the papers' (α, β) and Simulation II at (1, 1), whose claims the
# standard-deviations reading shares (one measurement in two readings)
SWEEP = {
    "sweep": "shot",
    "rounds": 6,
    "seeds": [0],
    "datasets": {
        "sim-linear-a0.1-b0.1": {
            "data": _dataset("linear", 0.1),
            "model": {"loss": "least_squares"},
        },
        "sim-logistic-a1-b1": {"data": _dataset("logistic", 1.0), "model": {"loss": "logistic"}},
    },
    "algorithms": {"fedht": {}, "fediterht": {}, "distiht": {"local_steps": [1]}},
    "grid": {"stepsize": [0.01, 0.003], "local_steps": [2], "sparsity": [8], "batch_size": [5]},
}


def _counts(claims: pd.DataFrame) -> dict[str, dict[str, int]]:
    own = claims[(claims["claim_kind"] == "paper") & (claims["reading_kind"] != "variation")]
    once = own[own["same_runs_as"].isna()]
    return {p: dict(r["verdict"].value_counts()) for p, r in once.groupby("paper", sort=False)}


def _shoot(results: Path, out: Path, *extra: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, SCRIPT, results, "-o", out, *extra]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    from fedsparse.report import build_report

    if not (shutil.which("chromium") or shutil.which("chromium-browser")):
        pytest.skip("chromium not installed: apt-get install chromium")
    results = run_sweep(tmp_path_factory.mktemp("shot") / "results", SWEEP)
    build_report(results)
    return results


def test_the_screenshot_counts_are_the_reports(toy, tmp_path):
    out = tmp_path / "docs" / "shot.png"
    done = _shoot(toy, out)
    assert done.returncode == 0, done.stderr[-2000:]
    facts = json.loads(out.with_suffix(".json").read_text())
    claims = pd.read_csv(toy / "report" / "tables" / "claims.csv")
    assert facts["verdicts"] == _counts(claims)
    ht = next(v for p, v in facts["verdicts"].items() if "Fed-HT" in p)
    reused = claims["same_runs_as"].notna().sum()
    assert reused > 0  # the toy has a measurement two readings share: counted once
    assert sum(ht.values()) == (claims["paper"].str.contains("Fed-HT")).sum() - reused
    assert facts["png_sha256"] == hashlib.sha256(out.read_bytes()).hexdigest()
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and facts["index_height_px"] > 500


def test_an_index_whose_counts_disagree_with_its_claims_writes_no_image(toy, tmp_path):
    report = tmp_path / "report"
    shutil.copytree(toy / "report", report)
    claims = pd.read_csv(report / "tables" / "claims.csv")
    first = claims.index[claims["same_runs_as"].isna() & (claims["claim_kind"] == "paper")][0]
    claims.loc[first, "verdict"] = (
        "agrees" if claims.loc[first, "verdict"] != "agrees" else "does not agree"
    )
    claims.to_csv(report / "tables" / "claims.csv", index=False)  # the index unchanged
    out = tmp_path / "shot.png"
    done = _shoot(toy, out, "--report", str(report))
    assert done.returncode == 1 and "claims.csv counts" in done.stderr
    assert not out.exists() and not out.with_suffix(".json").exists()


def test_the_committed_screenshot_and_its_counts_belong_together():
    """The README's image is the one whose counts were checked: its sha256 is the one recorded
    beside it, and its papers are named as the report names them now."""
    from fedsparse.report import families

    png = ROOT / "docs" / "report-screenshot.png"
    facts = json.loads(png.with_suffix(".json").read_text())
    assert facts["png_sha256"] == hashlib.sha256(png.read_bytes()).hexdigest()
    assert set(facts["verdicts"]) <= {f.paper for f in families()}
    assert "scripts/report-screenshot" in (ROOT / "README.md").read_text()
