"""The reproduction ledgers (reproductions/<family>/): each stored claims table is what a
report of its stored runs gives, and recording, rebuilding and re-running work on a toy sweep."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from conftest import run_sweep

from fedsparse.report import ledger
from fedsparse.report.build import families

ROOT = Path(__file__).resolve().parents[1]
LEDGERS = ROOT / "reproductions"
FAMILIES = {ledger.family_folder(f): f for f in families()}
RECORDED = sorted(n for n in FAMILIES if (LEDGERS / n / "runs.parquet").is_file())


def test_every_ledger_is_named_after_a_family_and_complete():
    assert "hard_thresholding" in RECORDED
    for folder in LEDGERS.iterdir():
        if folder.name.startswith("."):
            continue
        assert folder.name in FAMILIES, folder
        for name in ("claims.csv", "provenance.json", "runs.parquet", "traces"):
            assert (folder / name).exists(), folder / name
        prov = json.loads((folder / "provenance.json").read_text())
        for config in prov["configs"]:
            assert (ROOT / config).is_file(), config
        size = sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())
        assert size < 8e6, f"{folder}: {size / 1e6:.1f} MB, too large for the repository"


@pytest.mark.parametrize("name", RECORDED)
def test_the_stored_claims_table_is_what_its_runs_give(name, tmp_path):
    """A scoring change that changes a published verdict fails here until the ledger is
    regenerated on purpose (`fedsparse ledger rebuild NAME`)."""
    copy = tmp_path / name
    shutil.copytree(LEDGERS / name, copy)
    stored = (copy / "claims.csv").read_text()
    rebuilt = ledger.rebuilt_claims(copy, FAMILIES[name]).to_csv(index=False)
    assert rebuilt == stored, f"run `fedsparse ledger rebuild {name}` and review the diff"


HT_TOY = {
    "sweep": "ledger-toy",
    "rounds": 6,
    "seeds": [0, 1],
    "datasets": {
        "toy": {
            "data": {
                "kind": "synthetic",
                "task": "linear",
                "clients": 3,
                "dim": 20,
                "samples_per_client": 15,
                "support": 4,
            }
        }
    },
    "algorithms": {"fedht": {"local_steps": [2]}, "distiht": {}},
    "grid": {"stepsize": [0.01], "sparsity": [4]},
}


@pytest.fixture(scope="module")
def toy_results(tmp_path_factory):
    root = tmp_path_factory.mktemp("toy") / "ledger-toy"
    return run_sweep(root, HT_TOY)


def test_record_then_rebuild_round_trip(toy_results, tmp_path):
    config = tmp_path / "toy.yaml"
    config.write_text(json.dumps(HT_TOY))
    family = FAMILIES["hard_thresholding"]
    out = tmp_path / "reproductions"
    folder = ledger.record([toy_results], family, [str(config)], out)
    assert folder == out / "hard_thresholding"
    claims = ledger.read_claims(folder / "claims.csv")
    assert len(claims) and set(claims["paper"]) == {family.paper}
    # the toy is far from the papers' setting: no verdict but "not at the paper's setting"
    assert not claims["verdict"].isin(["agrees", "does not agree"]).any()
    runs = pd.read_parquet(folder / "runs.parquet")
    assert len(runs) == len(pd.read_parquet(toy_results / "runs.parquet")) == 4
    prov = json.loads((folder / "provenance.json").read_text())
    assert prov["configs"] == [str(config)] and prov["runs"] == 4
    assert prov["sweeps"] == ["ledger-toy"] and prov["estimated_core_seconds"] > 0
    # every run of the config is recorded: the estimate of those is the config's
    assert prov["estimated_core_seconds"] == prov["configs_estimated_core_seconds"]
    assert prov["span"][0] <= prov["span"][1]

    assert ledger.rebuild(family, out, check=True)
    (folder / "claims.csv").write_text(claims.iloc[:1].to_csv(index=False))
    assert not ledger.rebuild(family, out, check=True)  # a changed table is found...
    assert len(ledger.read_claims(folder / "claims.csv")) == 1  # ...and left alone
    pages = tmp_path / "pages"
    assert not ledger.rebuild(family, out, pages=pages)  # rewritten, pages kept
    assert (pages / "index.html").is_file()
    assert ledger.read_claims(folder / "claims.csv").equals(claims)

    commands = ledger.rerun_commands(family, tmp_path / "again", out, ["--cores", "1"])
    assert commands == [
        (
            [
                "snakemake",
                "--cores",
                "1",
                "--configfile",
                str(config),
                "--config",
                f"results={tmp_path / 'again' / 'ledger-toy'}",
            ],
            (str(config), tmp_path / "again" / "ledger-toy"),
        )
    ]


def test_a_ledger_extends_as_a_source_and_keeps_its_shard_time(toy_results, tmp_path):
    """A sweep too long for one session is recorded in parts: the ledger so far is a source of
    the next recording, its runs, claims and measured shard time carried over."""
    config = tmp_path / "toy.yaml"
    config.write_text(json.dumps(HT_TOY))
    family = FAMILIES["hard_thresholding"]
    results = tmp_path / "ledger-toy"
    shutil.copytree(toy_results, results)
    bench = results / "benchmarks" / "shards"  # as Snakemake's benchmark directive writes them
    bench.mkdir(parents=True, exist_ok=True)
    for shard, cpu in (("a", 1.5), ("b", 2.5)):
        (bench / f"{shard}.tsv").write_text(f"s\tcpu_time\n3.0\t{cpu}\n")
    first = ledger.record([results], family, [str(config)], tmp_path / "first")
    again = ledger.record([first], family, [str(config)], tmp_path / "again")
    before = json.loads((first / "provenance.json").read_text())
    after = json.loads((again / "provenance.json").read_text())
    assert before["shard_cpu_seconds"] == 4.0
    assert after["shard_cpu_seconds"] == 4.0
    assert after["runs"] == before["runs"] == 4
    assert (again / "claims.csv").read_text() == (first / "claims.csv").read_text()


def _cli(*args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "fedsparse", "ledger", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
    )


def test_the_command_line_names_bad_input(toy_results, tmp_path):
    r = _cli("record", str(toy_results), "--family", "nope", "--config", "c.yaml", cwd=tmp_path)
    assert r.returncode != 0 and "nope is not a family" in r.stderr
    r = _cli(
        "record", str(tmp_path), "--family", "hard_thresholding", "--config", "c.yaml", cwd=tmp_path
    )
    assert r.returncode != 0 and "is not a results folder" in r.stderr
    r = _cli("record", str(toy_results), "--family", "ssca", "--config", "c.yaml", cwd=tmp_path)
    assert r.returncode != 0 and "hold no run of" in r.stderr
    assert not (tmp_path / "reproductions" / "ssca").exists()
    r = _cli("rebuild", "hard_thresholding", cwd=tmp_path)
    assert r.returncode != 0 and "holds no runs table" in r.stderr
    assert not (tmp_path / "reproductions" / "hard_thresholding" / "claims.csv").exists()
    r = _cli("rerun", "hard_thresholding", cwd=tmp_path)
    assert r.returncode != 0 and "record the ledger first" in r.stderr


def test_a_ledgers_line_says_which_verdicts_are_on_stand_ins():
    from fedsparse.report.claims import (
        AGREES,
        DISAGREES,
        PAPER_TEXT,
        Claim,
        Reading,
        claims_frame,
        in_reading,
    )
    from fedsparse.report.ledger import _brief

    text = Reading("as written", PAPER_TEXT, "The paper's text.", lambda c: True)
    stand_in = [Claim("P", "one", "", "1", AGREES, seeds=3, stand_in="FMNIST for MNIST")]
    own = [Claim("P", "two", "", "2", DISAGREES, seeds=3)]
    only = claims_frame(in_reading(stand_in, text))
    assert _brief(only, None, "here") == "- P: 1 agree on its stand-ins (3 seeds; here).\n"
    both = claims_frame(in_reading(own + stand_in, text))
    assert _brief(both, None, "here") == (
        "- P: 1 do not agree in the paper's readings; 1 agree on its stand-ins (3 seeds; here).\n"
    )
