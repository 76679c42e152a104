"""Checkpoints within a run: every built-in algorithm (and a cohort of each fusing family)
checkpointed at a round, restored into fresh instances and finished gives the trace of the run
never interrupted, bit for bit but for elapsed_s; a checkpoint that is not this run's whole
state by this code is ignored with one log line."""

from __future__ import annotations

import logging

import pyarrow as pa
import pytest
from conftest import make_data

from fedsparse.algorithms import ALGORITHMS
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
MLP = {"loss": "logistic", "kind": "mlp", "hidden": [4], "activation": "tanh"}
GS = {"stepsize": 0.5, "batch_size": 10, "k": 8}
HT = {"sparsity": 5, "local_steps": 2, "batch_size": 5}
DIST = {"sparsity": 5, "batch_size": 5}
# (algorithm, each cohort member's params, model): every built-in algorithm, the fusing
# families as cohorts, the controllers of k (random streams and windows of their own)
CASES = [
    ("fedht", [{"stepsize": 0.01, **HT}, {"stepsize": 0.03, **HT}], None),
    ("fediterht", [{"stepsize": 0.01, **HT}], None),
    ("distiht", [{"stepsize": 0.01, **DIST}, {"stepsize": 0.02, **DIST}], MLP),
    ("sfedhp", [{}, {"stepsize": 0.05}], None),
    ("pfedme", [{}, {"stepsize": 0.05}], None),
    ("hierfavg", [{}, {"stepsize": 0.05}], None),
    ("fedprox", [{}, {"stepsize": 0.05}], None),
    ("perfedavg", [{}], None),
    ("heurfedamp", [{}, {"stepsize": 0.05}], None),
    ("fabtopk", [GS], None),
    ("fabtopk", [{**GS, "k_control": "online_extended", "window": 3}], None),
    ("fabtopk", [{**GS, "k_control": "exp3"}], None),
    ("fabtopk", [{**GS, "k_control": "bandit"}], None),
    ("fabtopk", [{**GS, "k_control": "value_ogd"}], None),
    ("utopk", [GS], None),
    ("fubtopk", [GS], None),
    ("periodick", [GS], None),
    ("sendall", [{"stepsize": 0.5}], None),
    ("ssca", [{}], MLP),
    ("ssca", [{}, {"prox_weight": 0.2}], None),
    ("ssca_constrained", [{"cost_limit": 0.5}, {"cost_limit": 0.5, "prox_weight": 0.2}], None),
    ("fedavg", [{"stepsize": 0.1, "local_steps": 2}, {"stepsize": 0.2, "local_steps": 2}], None),
    ("fedavg", [{"stepsize": 0.1, "local_steps": 2, "sampled_clients": 3}], MLP),
]
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


def summaries(results) -> list[str | None]:
    return [r.client_summary for group in results for r in group]


def case_id(case) -> str:
    algorithm, members, model = case
    extra = members[0].get("k_control", "")
    return "-".join(p for p in (algorithm, extra, f"x{len(members)}", model and "mlp") if p)


@pytest.mark.parametrize("case", CASES, ids=[case_id(c) for c in CASES])
def test_a_run_resumed_from_its_checkpoint_gives_the_uninterrupted_trace(case, tmp_path, caplog):
    algorithm, members, model = case
    computations = [[config(algorithm, params, model)] for params in members]
    ids = [[run_id(c) for c in group] for group in computations]
    whole = run_cohort(computations)
    path = tmp_path / "c.ckpt"
    with pytest.raises(Killed):
        run_cohort(computations, checkpoint=KilledAfter(path, ids, at=5))
    assert path.is_file()
    caplog.set_level(logging.INFO, logger="fedsparse.results.checkpoint")
    resumed = run_cohort(computations, checkpoint=Checkpoint(path, ids, 0.0, "again"))
    assert "again: resumed from round 5" in caplog.text
    assert traces(resumed) == traces(whole)
    assert summaries(resumed) == summaries(whole)
    assert [t.num_rows for t in traces(whole)] == [1 + ROUNDS // 2] * len(members)


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


def test_every_built_in_algorithm_is_covered():
    assert {case[0] for case in CASES} == set(ALGORITHMS)


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
