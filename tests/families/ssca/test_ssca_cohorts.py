"""SSCA cohorts: runs differing only in the server's constants compute their clients in one
kernel, and every run's trace is the same bits alone or in any cohort."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import dense, make_data
from network_oracle import np_loss_grad

from fedsparse import kernels as K
from fedsparse.algorithms import ALGORITHMS
from fedsparse.families.ssca.kernels import client_batch_grads_cohort
from fedsparse.objective.problem import Problem
from fedsparse.training.cohorts import cohort_key
from fedsparse.training.config import normalize_run_config
from fedsparse.training.experiment import run_cohort, run_result

SWISH = {"kind": "mlp", "hidden": [5], "activation": "swish", "bias": False}


@pytest.mark.parametrize("model", [SWISH, {}], ids=["swish-mlp", "linear"])
def test_cohort_kernel_equals_numpy_for_each_member(model, sparse):
    """Each computing member's gradients and losses are NumPy's at its own parameters, on the
    rows its clients draw (once for all); a member not computing is left as it was."""
    data = make_data("softmax", d=9, sparse=sparse, seed=33)
    pb = Problem(data, "softmax", 1e-2, "samples", model)
    rng = np.random.default_rng(1)
    C, n, P, b = 3, pb.n_clients, pb.n_params, 6
    thetas = rng.normal(0.0, 0.5, (C, P))
    perm = np.arange(data.n_samples, dtype=np.int64)
    state = K.client_states(7, n)
    replay_perm, replay_state = perm.copy(), state.copy()
    G, losses = np.full((C, n, P), 7.0), np.full((C, n), 7.0)
    members = np.array([2, 0], dtype=np.int64)
    work = K.mlp_thread_work(pb.sizes, b)
    X, y, ptr = dense(data.X), data.y, data.client_ptr
    for _ in range(3):  # the streams advance once a round, not once a member
        client_batch_grads_cohort(
            data.kernel_X,
            y,
            ptr,
            thetas,
            members,
            perm,
            state,
            b,
            pb.kernel_model,
            G,
            losses,
            work,
        )
        for i in range(n):
            lo, size = int(ptr[i]), int(ptr[i + 1] - ptr[i])
            K.sample_without_replacement(replay_perm, lo, size, min(b, size), replay_state, i)
            rows = replay_perm[lo : lo + min(b, size)]
            for m in members:
                v, g = np_loss_grad(pb.network, thetas[m], X[rows], y[rows], pb.loss, pb.l2)
                np.testing.assert_allclose(G[m, i], g, rtol=1e-10, atol=1e-13)
                np.testing.assert_allclose(losses[m, i], v, rtol=1e-12)
    np.testing.assert_array_equal(perm, replay_perm)
    np.testing.assert_array_equal(state, replay_state)
    assert (G[1] == 7.0).all() and (losses[1] == 7.0).all()


def config(name: str, params: dict, model: dict, rounds: int = 6, **extra) -> dict:
    return normalize_run_config(
        {
            **extra,
            "dataset": {"kind": "svmlight", "path": "unused.svm", "task": "multiclass"},
            "model": {"loss": "softmax", "l2": 1e-3, **model},
            "algorithm": name,
            "params": params,
            "rounds": rounds,
            "seed": 4,
            "eval_every": 2,
        }
    )


def trace_bits(result) -> object:
    return result.trace.drop(["elapsed_s"])


# per algorithm: the config's extra keys, what the members share, then each member's own
# values, the last diverging (ssca: a proximal weight this small makes the surrogate's
# minimiser blow up; ssca_constrained stays bounded, Lemma 1 caps the multiplier, so its
# cohort counts a rise of the cost by 1 % as divergence, which an unreachable U with a small
# tau gives)
COHORTS = {
    "ssca": (
        {},
        {"batch_size": 4},
        [
            {"prox_weight": 0.5, "lambda": 1e-2},
            {"prox_weight": 0.3, "rho_scale": 0.6, "gamma_scale": 0.8, "decay": 0.2},
            {"prox_weight": 1e-9},
        ],
    ),
    "ssca_constrained": (
        {"divergence_factor": 1.01},
        {"batch_size": 4},
        [
            {"cost_limit": 0.9},
            {"cost_limit": 0.5, "penalty": 3.0, "prox_weight": 0.4, "gamma_extra": 0.1},
            {"cost_limit": 1e-3, "prox_weight": 1e-3},
        ],
    ),
}


@pytest.mark.parametrize("model", [{}, SWISH], ids=["linear", "swish-mlp"])
@pytest.mark.parametrize("name", sorted(COHORTS))
def test_traces_alone_and_in_cohorts_are_the_same_bits(name, model):
    data = make_data("softmax", d=11, seed=34)
    extra, shared, own = COHORTS[name]
    cfgs = [config(name, {**shared, **o}, model, **extra) for o in own]
    assert len({cohort_key(c) for c in cfgs}) == 1  # one cohort: they differ in fusables only
    alone = [trace_bits(run_result(c, data)) for c in cfgs]
    status = [t.column("status").to_pylist()[-1] for t in alone]
    assert status == ["ok", "ok", "diverged"]  # the test needs a member that diverges
    assert alone[2].num_rows < alone[0].num_rows
    for group in ([0, 1, 2], [2, 0], [1, 2]):
        got = run_cohort([[cfgs[k]] for k in group], data)
        for k, results in zip(group, got, strict=True):
            assert trace_bits(results[0]).equals(alone[k]), (group, k)


def test_only_server_constants_fuse():
    for name, cls in (("ssca", ALGORITHMS["ssca"]), ("sscac", ALGORITHMS["ssca_constrained"])):
        fusable = cls.fusable({})
        assert "batch_size" not in fusable and "prox_weight" in fusable, name
    a = config("ssca", {"batch_size": 4}, {})
    b = config("ssca", {"batch_size": 5}, {})
    assert cohort_key(a) != cohort_key(b)
