"""The conformance checks of fedsparse.testing, on every built-in algorithm, and the checks
themselves caught failing where an algorithm breaks its promise."""

from __future__ import annotations

import numpy as np
import pytest

from fedsparse import testing
from fedsparse.algorithms import ALGORITHMS
from fedsparse.algorithms.base import Hyperparameter
from fedsparse.families.hard_thresholding.algorithms import FedHT
from fedsparse.training.experiment import run_result

# values for the hyperparameters some algorithm requires
REQUIRED = {"stepsize": 0.05, "sparsity": 5, "k": 8, "cost_limit": 0.6}
MLP = {"loss": "logistic", "kind": "mlp", "hidden": [4], "activation": "tanh"}
GS = {"stepsize": 0.5, "batch_size": 10, "k": 8}
HT = {"sparsity": 5, "local_steps": 2, "batch_size": 5}
DIST = {"sparsity": 5, "batch_size": 5}
# (algorithm, each cohort member's params, model): every built-in algorithm, the fusing
# families as cohorts, the controllers of k (random streams and windows of their own)
CHECKPOINT_CASES = [
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
    ("fubtopk", [{**GS, "merge": "tree"}], None),
    ("periodick", [GS], None),
    ("sendall", [{"stepsize": 0.5}], None),
    ("ssca", [{}], MLP),
    ("ssca", [{}, {"prox_weight": 0.2}], None),
    ("ssca_constrained", [{"cost_limit": 0.5}, {"cost_limit": 0.5, "prox_weight": 0.2}], None),
    ("fedavg", [{"stepsize": 0.1, "local_steps": 2}, {"stepsize": 0.2, "local_steps": 2}], None),
    ("fedavg", [{"stepsize": 0.1, "local_steps": 2, "sampled_clients": 3}], MLP),
]


def required(algorithm: str) -> dict:
    return {h.name: REQUIRED[h.name] for h in ALGORITHMS[algorithm].hyperparameters if h.required}


def case_id(case) -> str:
    algorithm, members, model = case
    extra = members[0].get("k_control", "") or members[0].get("merge", "")
    return "-".join(p for p in (algorithm, extra, f"x{len(members)}", model and "mlp") if p)


@pytest.mark.parametrize("algorithm", sorted(ALGORITHMS))
def test_a_run_is_the_same_bits_alone_and_in_a_cohort_of_any_size(algorithm):
    testing.check_cohort_bits(algorithm, required(algorithm))


@pytest.mark.parametrize("case", CHECKPOINT_CASES, ids=[case_id(c) for c in CHECKPOINT_CASES])
def test_a_run_resumed_from_its_checkpoint_gives_the_uninterrupted_trace(case):
    algorithm, members, model = case
    testing.check_checkpoint_round_trip(algorithm, members, model)


@pytest.mark.parametrize("algorithm", sorted(ALGORITHMS))
def test_every_declared_bound_choice_and_type_is_refused_in_one_line(algorithm):
    testing.check_bad_hyperparameters(algorithm, required(algorithm))


def test_every_built_in_algorithm_is_covered():
    assert {case[0] for case in CHECKPOINT_CASES} == set(ALGORITHMS)


def test_bad_values_reach_every_bound_choice_and_type():
    h = Hyperparameter("x", float, "", low=0.0, low_open=True, high=2.0)
    assert testing.bad_values(h)[:2] == ["three", True] and 0.0 in testing.bad_values(h)
    assert 4.0 in testing.bad_values(h)
    n = Hyperparameter("n", int, "", low=1)
    assert {0, 1.5} <= set(testing.bad_values(n))
    assert testing.bad_values(Hyperparameter("m", str, "", choices=("a", "b")))[1] not in "ab"


# ---- the checks fail where an algorithm breaks its promise --------------------------------


def test_a_state_not_restored_exactly_fails_the_round_trip(monkeypatch):
    plain = FedHT.restore_state

    def restore_almost(self, state):  # the model's largest value off in its 12th digit
        plain(self, state)
        at = np.unravel_index(np.argmax(np.abs(self.model)), self.model.shape)
        self.model[at] *= 1 + 1e-12

    monkeypatch.setattr(FedHT, "restore_state", restore_almost)
    with pytest.raises(AssertionError, match="fedht: member 0's trace"):
        testing.check_checkpoint_round_trip("fedht", [{"stepsize": 0.01, **HT}])


def test_a_cohort_member_computed_otherwise_fails_the_bits(monkeypatch):
    plain = FedHT.cohort_round

    def off_by_a_bit(members, t):  # the second member's model nudged after each round
        out = plain(members, t)
        if len(members) > 1:
            members[1].model[0, 0] = np.nextafter(members[1].model[0, 0], np.inf)
        return out

    monkeypatch.setattr(FedHT, "cohort_round", staticmethod(off_by_a_bit))
    with pytest.raises(AssertionError, match="fedht: member 1 of a cohort differs"):
        testing.check_cohort_bits("fedht", {"stepsize": 0.01, **HT})


def test_a_bound_not_checked_fails_the_bad_input_check(monkeypatch):
    lenient = Hyperparameter.validate

    def accepts_zero_sparsity(self, value, where):
        return value if self.name == "sparsity" and value == 0 else lenient(self, value, where)

    monkeypatch.setattr(Hyperparameter, "validate", accepts_zero_sparsity)
    with pytest.raises(AssertionError, match="fedht: sparsity=0 was accepted"):
        testing.check_bad_hyperparameters("fedht", {"stepsize": 0.01, **HT})


def test_an_oracle_compares_every_column_it_gives():
    cfg = testing.run_config("fedht", {"stepsize": 0.01, **HT}, rounds=4)
    objective = run_result(cfg).trace.column("objective").to_pylist()
    testing.check_oracle(cfg, lambda c: {"objective": objective})
    with pytest.raises(AssertionError, match="fedht: objective"):
        testing.check_oracle(cfg, lambda c: {"objective": [v * (1 + 1e-6) for v in objective]})
    with pytest.raises(AssertionError, match="rows"):
        testing.check_oracle(cfg, lambda c: {"objective": objective[:-1]})
