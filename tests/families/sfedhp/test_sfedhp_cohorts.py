"""Cohorts of the personalised family: runs differing only in continuous constants compute
their rounds in one kernel (each client's minibatch drawn and read once for all members), each
member as NumPy computes it alone, and every run's trace is the same bits alone or in any
cohort."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import make_data
from sfedhp_oracles import (
    TANH,
    Oracle,
    oracle_hierfavg,
    oracle_pfedme,
    oracle_sfedhp,
    weighted_problem,
)

from fedsparse import kernels as K
from fedsparse.algorithms import ALGORITHMS, HierFAVG, PFedMe, SFedHP
from fedsparse.kernels.prox import ProxConstants, prox_steps_cohort
from fedsparse.objective.problem import Problem
from fedsparse.training.cohorts import cohort_key
from fedsparse.training.config import normalize_run_config
from fedsparse.training.experiment import run_cohort, run_result


@pytest.mark.parametrize("fresh", [True, False])
@pytest.mark.parametrize("model", [None, TANH], ids=["linear", "tanh-mlp"])
def test_prox_steps_cohort_equals_numpy_for_each_member(model, fresh):
    """Each computing member takes its own proximal steps (its step, weight, smooth-l1 weight
    and rho, its anchors) on the rows drawn once for all; a member not computing is left as
    it was."""
    pb = weighted_problem(model)
    n, shape, steps, b = pb.n_clients, pb.shape, 3, 4
    rng = np.random.default_rng(5)
    C = 3
    thetas = rng.normal(0.0, 0.3, (C, n, *shape))
    anchors = rng.normal(0.0, 0.3, (C, 2, *shape))
    which = np.arange(n, dtype=np.int64) % 2
    const = {"stepsize": [0.1, 0.05, 0.2], "weight": [0.5, 0.0, 2.0], "gamma": [0.0, 0.3, 0.1]}
    const["rho"] = [1.0, 0.2, 0.05]
    members = np.array([2, 0], dtype=np.int64)
    want = thetas.copy()
    o = Oracle(pb, 9)
    for i in range(n):
        rows = o.draw(i, b)
        for s in range(steps):
            if fresh and s > 0:
                rows = o.draw(i, b)
            for m in members:
                th, a = want[m, i], anchors[m, which[i]]
                lr, mu, g, rho = (const[k][m] for k in ("stepsize", "weight", "gamma", "rho"))
                want[m, i] = th - lr * (o.grad(th, rows) + mu * (th - a) + g * np.tanh(th / rho))
    perm = np.arange(pb.data.n_samples, dtype=np.int64)
    state = K.client_states(9, n)
    data = pb.data
    prox_steps_cohort(
        data.kernel_X,
        data.y,
        data.client_ptr,
        thetas,
        anchors,
        which,
        members,
        perm,
        state,
        ProxConstants(
            steps, b, fresh, *(np.array(const[k]) for k in ("stepsize", "weight", "gamma", "rho"))
        ),
        pb.step_model,
        pb.step_work().for_batch(b),
    )
    np.testing.assert_allclose(thetas, want, rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(perm, o.perm)
    np.testing.assert_array_equal(state, o.state)


# each member's own constants (the members share the rest); sFedHP's with a smooth-l1 term
OWN = {
    SFedHP: [
        {"stepsize": 0.07, "lambda1": 6.0},
        {"stepsize": 0.03, "inner_stepsize": 0.02, "lambda2": 2.0, "gamma1": 0.01},
        {"gamma2": 0.02, "rho": 0.1, "beta": 0.6, "lambda1": 3.0},
    ],
    PFedMe: [
        {"stepsize": 0.07},
        {"stepsize": 0.03, "inner_stepsize": 0.02, "lambda": 3.0},
        {"lambda": 8.0, "beta": 0.5},
    ],
    HierFAVG: [{"stepsize": 0.1}, {"stepsize": 0.03}, {"stepsize": 0.2}],
}
SHARED = {
    SFedHP: {"inner_steps": 2, "edge_rounds": 2, "edges": 3, "batch_size": 3},
    PFedMe: {"inner_steps": 2, "local_steps": 2, "batch_size": 3},
    HierFAVG: {"local_steps": 2, "edge_rounds": 2, "edges": 3, "batch_size": 3},
}
ORACLES = {SFedHP: oracle_sfedhp, PFedMe: oracle_pfedme, HierFAVG: oracle_hierfavg}


@pytest.mark.parametrize("model", [None, TANH], ids=["linear", "tanh-mlp"])
@pytest.mark.parametrize("cls", [SFedHP, PFedMe, HierFAVG], ids=lambda c: c.name)
def test_cohort_rounds_match_each_members_pseudo_code(cls, model):
    """Three members through the fused round kernel, the first (whose streams the cohort
    shares) leaving after round 2: each member's models are its own oracle's, every round."""
    pb = weighted_problem(model) if cls is HierFAVG else _uniform(model)
    params = [cls.validate_params({**SHARED[cls], **own}) for own in OWN[cls]]
    members = [cls(pb, p, 4) for p in params]
    for m in members:
        m.check_problem()
        m.setup()
    rounds = 4
    got = [[m.model.copy()] for m in members]
    for t in range(rounds):
        active = members if t < 2 else members[1:]
        cls.cohort_round(active, t)
        for k, m in enumerate(members):
            if m in active:
                got[k].append(m.model.copy())
    for k, p in enumerate(params):
        want, _ = ORACLES[cls](pb, p, len(got[k]) - 1, seed=4)
        if cls is not HierFAVG:
            want = [w for w, _ in want]
        assert len(want) == (3 if k == 0 else rounds + 1)
        for w, w0 in zip(got[k], want, strict=True):
            np.testing.assert_allclose(w, w0, rtol=1e-9, atol=1e-12)


def _uniform(model) -> Problem:
    data = make_data("softmax", sizes=(7, 9, 6, 8, 5, 10), d=8, seed=0)
    return Problem(data, "softmax", 1e-3, "uniform", model)


# ---- traces: alone, in cohorts, with a member that diverges ----------------------------------

# per algorithm: what the members share, then each member's own values, the last diverging
# (a step far too large)
COHORTS = {
    "sfedhp": (
        {"edges": 2, "edge_rounds": 2, "inner_steps": 2, "gamma1": 1e-3, "rho": 0.01},
        [
            {"stepsize": 0.05},
            {"stepsize": 0.02, "lambda1": 3.0, "gamma2": 1e-3},
            {"inner_stepsize": 5.0},
        ],
    ),
    "pfedme": (
        {"local_steps": 2, "inner_steps": 2, "sampled_clients": 2},
        [{"lambda": 5.0}, {"stepsize": 0.02, "beta": 0.7}, {"inner_stepsize": 5.0}],
    ),
    "hierfavg": (
        {"edges": 2, "edge_rounds": 2, "local_steps": 2},
        [{"stepsize": 0.05}, {"stepsize": 0.02}, {"stepsize": 50.0}],
    ),
    "fedprox": (
        {"local_steps": 3},
        [{"mu": 0.1}, {"stepsize": 0.02, "mu": 1.0}, {"stepsize": 50.0}],
    ),
    "heurfedamp": (
        {"local_steps": 3},
        [{"lambda": 0.5}, {"stepsize": 0.02, "alpha_self": 0.3, "sigma": 2.0}, {"stepsize": 50.0}],
    ),
}


def config(name: str, params: dict) -> dict:
    return normalize_run_config(
        {
            "dataset": {"kind": "svmlight", "path": "unused.svm", "task": "regression"},
            "model": {"loss": "least_squares", "l2": 1e-3},
            "algorithm": name,
            "params": {**params, "batch_size": 3},
            "rounds": 6,
            "seed": 5,
            "eval_every": 2,
        }
    )


@pytest.mark.parametrize("name", sorted(COHORTS))
def test_traces_alone_and_in_cohorts_are_the_same_bits(name):
    data = make_data("least_squares", sizes=(7, 9, 6, 8), d=10, seed=6)
    shared, own = COHORTS[name]
    cfgs = [config(name, {**shared, **o}) for o in own]
    assert len({cohort_key(c) for c in cfgs}) == 1  # one cohort: they differ in fusables only
    alone = [run_result(c, data).trace.drop(["elapsed_s"]) for c in cfgs]
    status = [t.column("status").to_pylist()[-1] for t in alone]
    assert status == ["ok", "ok", "diverged"]  # the test needs a member that diverges
    assert alone[2].num_rows < alone[0].num_rows
    for group in ([0, 1, 2], [2, 0], [1, 2]):
        got = run_cohort([[cfgs[k]] for k in group], data)
        for k, results in zip(group, got, strict=True):
            assert results[0].trace.drop(["elapsed_s"]).equals(alone[k]), (group, k)


def test_structure_never_fuses_and_per_fedavg_runs_alone():
    a = config("sfedhp", {"edges": 2})
    assert cohort_key(a) != cohort_key(config("sfedhp", {"edges": 4}))
    assert cohort_key(a) != cohort_key(config("sfedhp", {"edges": 2, "anchor": "per_client"}))
    assert cohort_key(a) == cohort_key(config("sfedhp", {"edges": 2, "stepsize": 0.01}))
    assert ALGORITHMS["perfedavg"].fusable({}) == ()
    assert cohort_key(config("perfedavg", {})) is None
