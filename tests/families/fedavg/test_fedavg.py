"""FedAvg against a NumPy transcription of local SGD with model averaging.

The oracle is written from the definition (spec seed-004 §4): every participating
client starts from W_t, takes E steps W <- W - lr_t grad f_i(W) on its minibatches,
lr_t = a / t**decay (t from 1); the server sets W_{t+1} = sum_{i in S} p_i W_i / sum_S p_i.
"""

from __future__ import annotations

import numpy as np
import pytest
from conftest import LOSSES, dense, make_data, np_grad, np_loss
from network_oracle import np_loss_grad

from fedsparse import kernels as K
from fedsparse.algorithms import ALGORITHMS, FedAvg
from fedsparse.algorithms.common import server_stream
from fedsparse.errors import ConfigError
from fedsparse.objective.problem import Problem

SWISH = {"kind": "mlp", "hidden": [5], "activation": "swish", "bias": False}
TANH2 = {"kind": "mlp", "hidden": [4, 3], "activation": "tanh"}


def oracle(pb: Problem, *, steps, stepsize, decay, batch, rounds, sampled, seed):
    """Objective per round and final model; minibatches replay the clients' streams."""
    data = pb.data
    X, y, ptr = dense(data.X), data.y, data.client_ptr
    linear = pb.is_linear
    state = K.client_states(seed, data.n_clients)
    server = server_stream(seed, data.n_clients)
    perm = np.arange(data.n_samples, dtype=np.int64)

    def loss_grad(W, rows):
        if linear:
            return np_loss(X[rows], y[rows], W, pb.loss, pb.l2), np_grad(
                X[rows], y[rows], W, pb.loss, pb.l2
            )
        v, g = np_loss_grad(pb.network, W, X[rows], y[rows], pb.loss, pb.l2)
        return v, g.reshape(W.shape)

    def objective(W):
        return sum(
            pb.p[i] * loss_grad(W, np.arange(ptr[i], ptr[i + 1]))[0] for i in range(data.n_clients)
        )

    W = pb.initial_model().copy()
    trace = [objective(W)]
    for t in range(1, rounds + 1):
        lr = stepsize / t**decay
        who = range(data.n_clients)
        if sampled:
            who = np.sort(server.choice(data.n_clients, size=sampled, replace=False))
        total, weight = np.zeros_like(W), 0.0
        for i in who:
            lo, n = int(ptr[i]), int(ptr[i + 1] - ptr[i])
            b = n if batch is None else min(batch, n)
            Wi = W.copy()
            for _ in range(steps):
                if b < n:
                    K.sample_without_replacement(perm, lo, n, b, state, i)
                Wi = Wi - lr * loss_grad(Wi, perm[lo : lo + b])[1]
            total += pb.p[i] * Wi
            weight += pb.p[i]
        W = total / weight
        trace.append(objective(W))
    return np.array(trace), W


def run(pb: Problem, params: dict, rounds: int, seed: int = 0):
    algo = FedAvg(pb, FedAvg.validate_params(params), seed)
    algo.check_problem()
    algo.setup()
    got, costs = [pb.objective(algo.model)], []
    for t in range(rounds):
        costs.append(algo.round(t))
        got.append(pb.objective(algo.model))
    return np.array(got), costs, algo


@pytest.mark.parametrize("weights", ["uniform", "samples"])
@pytest.mark.parametrize("loss", LOSSES)
def test_full_batch_linear_trace_equals_transcription(loss, weights, sparse):
    data = make_data(loss, sparse=sparse, seed=21)
    pb = Problem(data, loss, 1e-3, weights)
    step = {"least_squares": 0.02, "logistic": 0.3, "softmax": 0.3}[loss]
    params = {"stepsize": step, "local_steps": 3, "batch_size": "full", "stepsize_decay": 0.5}
    got, _, _ = run(pb, params, 6)
    expected, _ = oracle(
        pb, steps=3, stepsize=step, decay=0.5, batch=None, rounds=6, sampled=0, seed=0
    )
    assert expected[-1] < expected[0]
    np.testing.assert_allclose(got, expected, rtol=1e-9)


@pytest.mark.parametrize("model", [SWISH, TANH2], ids=["swish-nobias", "tanh-bias"])
@pytest.mark.parametrize("loss", ["softmax", "least_squares"])
def test_full_batch_network_trace_equals_transcription(model, loss, sparse):
    data = make_data(loss, d=9, sparse=sparse, seed=22)
    pb = Problem(data, loss, 1e-3, "samples", model)
    params = {"stepsize": 0.05, "local_steps": 2, "batch_size": "full", "stepsize_decay": 0.3}
    got, _, algo = run(pb, params, 5)
    expected, W = oracle(
        pb, steps=2, stepsize=0.05, decay=0.3, batch=None, rounds=5, sampled=0, seed=0
    )
    assert expected[-1] < expected[0]
    np.testing.assert_allclose(got, expected, rtol=1e-9)
    np.testing.assert_allclose(algo.model, W, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("model", [{}, SWISH], ids=["linear", "mlp"])
def test_minibatches_and_sampled_clients_replay_the_streams(model):
    data = make_data("softmax", sizes=(10, 17, 25, 13, 8), d=9, seed=23)
    pb = Problem(data, "softmax", 1e-3, "samples", model)
    params = {
        "stepsize": 0.2,
        "local_steps": 2,
        "batch_size": 4,
        "sampled_clients": 3,
        "stepsize_decay": 0.5,
    }
    got, costs, algo = run(pb, params, 7, seed=4)
    expected, W = oracle(pb, steps=2, stepsize=0.2, decay=0.5, batch=4, rounds=7, sampled=3, seed=4)
    np.testing.assert_allclose(got, expected, rtol=1e-9)
    np.testing.assert_allclose(algo.model, W, rtol=1e-9, atol=1e-12)
    size = 8 * algo.model.size
    for cost in costs:  # dense both ways, participants only
        assert (cost.bytes_up, cost.bytes_down, cost.local_iterations) == (3 * size, 3 * size, 2)
    _, costs, _ = run(pb, {**params, "sampled_clients": 0}, 1)
    assert costs[0].bytes_up == costs[0].bytes_down == 5 * size


@pytest.mark.parametrize("model", [{}, SWISH], ids=["linear", "mlp"])
def test_one_local_step_is_a_full_gradient_step(model):
    data = make_data("softmax", d=9, seed=24)
    pb = Problem(data, "softmax", 1e-2, "samples", model)
    _, _, algo = run(pb, {"stepsize": 0.7, "batch_size": "full"}, 1)
    W0 = pb.initial_model()
    X, y, ptr = dense(data.X), data.y, data.client_ptr
    grad = np.zeros(W0.size)
    for i in range(data.n_clients):
        Xi, yi = X[ptr[i] : ptr[i + 1]], y[ptr[i] : ptr[i + 1]]
        if pb.is_linear:
            g = np_grad(Xi, yi, W0, "softmax", 1e-2).ravel()
        else:
            g = np_loss_grad(pb.network, W0, Xi, yi, "softmax", 1e-2)[1]
        grad += pb.p[i] * g
    np.testing.assert_allclose(algo.model.ravel(), W0.ravel() - 0.7 * grad, rtol=1e-12, atol=1e-14)


@pytest.mark.parametrize("model", [{}, SWISH], ids=["linear", "mlp"])
def test_fedht_with_sparsity_equal_dimension_is_fedavg(model, sparse):
    data = make_data("logistic", d=12, seed=25, sparse=sparse)
    pb = Problem(data, "logistic", 1e-3, "uniform", model)
    d = pb.shape[1]
    common = {"stepsize": 0.3, "local_steps": 3, "batch_size": 5}
    fedavg, _, a = run(pb, common, 6, seed=9)
    ht = ALGORITHMS["fedht"](pb, ALGORITHMS["fedht"].validate_params({**common, "sparsity": d}), 9)
    ht.setup()
    for t in range(6):
        ht.round(t)
    np.testing.assert_array_equal(ht.model, a.model)  # the same kernels, bit for bit
    assert fedavg[-1] < fedavg[0]


def test_config_errors_name_the_key():
    pb = Problem(make_data("softmax", d=9, seed=26), "softmax", 0.0)
    with pytest.raises(ConfigError, match=r"^params\.sampled_clients: 5 is more than the 4"):
        FedAvg(
            pb, FedAvg.validate_params({"stepsize": 1.0, "sampled_clients": 5}), 0
        ).check_problem()
    for key, bad in (("stepsize_decay", -0.1), ("stepsize", 0.0), ("local_steps", 0)):
        with pytest.raises(ConfigError, match=rf"^params\.{key}: must be") as err:
            FedAvg.validate_params({"stepsize": 1.0, key: bad})
        assert "\n" not in str(err.value)
    assert FedAvg.validate_params({"stepsize": 1.0}) == {
        "stepsize": 1.0,
        "local_steps": 1,
        "batch_size": 10,
        "sampled_clients": 0,
        "stepsize_decay": 0.0,
    }


@pytest.mark.parametrize("model", [{}, SWISH], ids=["linear", "mlp"])
def test_bits_and_density_count_remark_1_per_client(model):
    """Cumulative Remark 1 bits of one client (64 a non-zero + a d-bit map, at most 64 d; the
    zero initial model goes down as the map alone) and the density of W, as the flat
    baselines of the personalised family count them."""
    data = make_data("softmax", sizes=(10, 17, 25, 13, 8), d=9, seed=27)
    pb = Problem(data, "softmax", 1e-3, "samples", model)
    params = {"stepsize": 0.2, "local_steps": 2, "batch_size": 4}
    algo = FedAvg(pb, FedAvg.validate_params(params), 0)
    algo.setup()
    d, n = algo.model.size, pb.n_clients
    zero_start = not np.any(algo.model)
    assert algo.extra_metrics() == {"bits": 0.0, "density": np.count_nonzero(algo.model) / d}
    for t in range(3):
        algo.round(t)
    first_down = d if zero_start else 64 * d
    assert algo.extra_metrics()["bits"] == pytest.approx(3 * 64 * d + 2 * 64 * d + first_down)
    assert algo.extra_metrics()["density"] == 1.0
    # sampled clients: 2 of 5 send and receive each round; the mean over all 5 clients
    sampled = FedAvg(pb, FedAvg.validate_params({**params, "sampled_clients": 2}), 0)
    sampled.setup()
    sampled.W[:] = 1.0  # a dense start: every message costs 64 d
    for t in range(4):
        sampled.round(t)
    assert sampled.extra_metrics()["bits"] == pytest.approx(4 * 2 * 2 * 64 * d / n)


def test_bits_and_density_reach_the_trace():
    from fedsparse.training.config import normalize_run_config
    from fedsparse.training.experiment import run_trace

    data = make_data("softmax", sizes=(7, 9, 6, 8), d=8, seed=3)
    cfg = normalize_run_config(
        {
            "dataset": {"kind": "svmlight", "path": "unused.svm", "task": "multiclass"},
            "model": {"loss": "softmax", "l2": 1e-3},
            "algorithm": "fedavg",
            "params": {"stepsize": 0.1, "local_steps": 2, "batch_size": 3},
            "rounds": 3,
        }
    )
    tr = run_trace(cfg, data).to_pandas()
    assert tr["bits"].notna().all() and tr["bits"].is_monotonic_increasing
    assert tr["bits"].iloc[-1] > tr["bits"].iloc[0]
    assert tr["density"].iloc[-1] == 1.0
