"""Checkpoints within a run: CSR data's active-set steps resume; a checkpoint that is not this
run's whole state by this code is ignored with one log line. (Every built-in algorithm's round
trip is a conformance check: tests/test_conformance.py.)"""

from __future__ import annotations

import logging

import pyarrow as pa
import pytest
from conftest import make_data

from fedsparse.results import checkpoint as ckpt
from fedsparse.results.checkpoint import Checkpoint
from fedsparse.training.config import normalize_run_config, run_id
from fedsparse.training.experiment import run_cohort, run_result

DATA = {
    "kind": "synthetic",
    "task": "logistic",
    "clients": 8,
    "dim": 40,
    "support": 8,
    "samples_per_client": 40,
    "positives": 15,
}
HT = {"sparsity": 5, "local_steps": 2, "batch_size": 5}
ROUNDS = 12


def config(algorithm: str, params: dict, model: dict | None, rounds: int = ROUNDS) -> dict:
    raw = {"dataset": DATA, "model": model or {"loss": "logistic"}, "algorithm": algorithm}
    raw.update(params=params, rounds=rounds, eval_every=2, seed=3)
    return normalize_run_config(raw)


class Killed(Exception):
    """Stands in for the process dying right after a checkpoint write."""


class KilledAfter(Checkpoint):
    """A checkpoint written every round, and the run stopped after the one of round ``at``."""

    def __init__(self, path, runs, at: int):
        super().__init__(path, runs, 1.0, "test")
        self.at = at

    def due(self) -> bool:
        return True

    def write(self, round_, state, shared) -> None:
        super().write(round_, state, shared)
        if round_ == self.at:
            raise Killed


def traces(results) -> list[pa.Table]:
    return [r.trace.drop_columns(["elapsed_s"]) for group in results for r in group]


@pytest.mark.parametrize("algorithm", ["fedht", "fediterht"])
def test_hard_thresholding_on_csr_data_resumes_its_active_set_steps(algorithm, tmp_path, caplog):
    data = make_data("logistic", sparse=True)
    cfg = config(algorithm, {"stepsize": 0.05, **HT}, None)
    ids = [[run_id(cfg)]]
    whole = run_result(cfg, data)
    path = tmp_path / "c.ckpt"
    with pytest.raises(Killed):
        run_result(cfg, data, checkpoint=KilledAfter(path, ids, at=7))
    caplog.set_level(logging.INFO, logger="fedsparse.results.checkpoint")
    resumed = run_result(cfg, data, checkpoint=Checkpoint(path, ids, 0.0, "again"))
    assert "again: resumed from round 7" in caplog.text
    assert traces([[resumed]]) == traces([[whole]])


def interrupted(tmp_path, at: int = 4):
    """A fedht cohort's computations, their ids, and a checkpoint of round ``at``."""
    computations = [[config("fedht", {"stepsize": s, **HT}, None)] for s in (0.01, 0.02)]
    ids = [[run_id(c) for c in group] for group in computations]
    path = tmp_path / "c.ckpt"
    with pytest.raises(Killed):
        run_cohort(computations, checkpoint=KilledAfter(path, ids, at=at))
    return computations, ids, path


def starts_over(computations, ids, path, caplog) -> str:
    """Run from ``path``'s checkpoint, which must be ignored; the one log line about it."""
    caplog.clear()
    caplog.set_level(logging.INFO, logger="fedsparse.results.checkpoint")
    got = run_cohort(computations, checkpoint=Checkpoint(path, ids, 0.0, "run"))
    assert traces(got) == traces(run_cohort(computations))
    lines = [r.getMessage() for r in caplog.records if r.name == "fedsparse.results.checkpoint"]
    assert len(lines) == 1 and "resumed" not in lines[0], lines
    assert lines[0].endswith("ignored, the run starts over")
    return lines[0]


def test_a_truncated_checkpoint_is_ignored(tmp_path, caplog):
    computations, ids, path = interrupted(tmp_path)
    raw = path.read_bytes()
    path.write_bytes(raw[: len(raw) - 100])
    assert "is not whole" in starts_over(computations, ids, path, caplog)


def test_a_damaged_checkpoint_is_ignored(tmp_path, caplog):
    computations, ids, path = interrupted(tmp_path)
    raw = bytearray(path.read_bytes())
    raw[-50] ^= 0xFF
    path.write_bytes(bytes(raw))
    assert "is not whole" in starts_over(computations, ids, path, caplog)


def test_a_checkpoint_of_another_code_version_is_ignored(tmp_path, caplog, monkeypatch):
    computations, ids, path = interrupted(tmp_path)
    monkeypatch.setattr(ckpt, "code_key", lambda: "fedsparse 0.0 source 0123456789abcdef")
    assert "was written by another version" in starts_over(computations, ids, path, caplog)


def test_a_checkpoint_of_other_runs_is_ignored(tmp_path, caplog):
    computations, ids, path = interrupted(tmp_path)
    alone = computations[:1]  # the first member alone: not the cohort that wrote it
    assert "is of other runs" in starts_over(alone, ids[:1], path, caplog)


def test_a_file_that_is_no_checkpoint_is_ignored(tmp_path, caplog):
    computations, ids, path = interrupted(tmp_path)
    path.write_bytes(b"PAR1 something else")
    assert "is not a fedsparse checkpoint" in starts_over(computations, ids, path, caplog)


def test_the_code_key_names_version_source_and_numerics():
    key = ckpt.code_key()
    assert key.startswith("fedsparse ") and " source " in key
    assert " numpy " in key and " numba " in key


def test_remove_deletes_the_checkpoint_and_torn_writes(tmp_path):
    computations, ids, path = interrupted(tmp_path)
    torn = path.with_name(f".{path.name}.abc123.tmp")
    torn.write_bytes(b"half")
    other = path.with_name("other.ckpt")
    other.write_bytes(b"x")
    Checkpoint(path, ids, 0.0, "run").remove()
    assert not path.exists() and not torn.exists() and other.exists()
