"""Models other than the plain linear one (MLPs, linear with intercept) end to end:
problem metrics and personalised evaluation against NumPy, the hard-thresholding family on
networks against a transcription of its pseudo-code, and the trace's new columns."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import dense, make_data, np_hard_threshold
from network_oracle import (
    blocks,
    np_correct,
    np_forward,
    np_loss_grad,
    np_per_row_loss,
    with_client_tests,
)

from fedsparse.algorithms import ALGORITHMS
from fedsparse.families.hard_thresholding.algorithms import FedHT
from fedsparse.objective.model import Network
from fedsparse.objective.problem import Problem
from fedsparse.training.experiment import run_trace

MODELS = [
    {"kind": "mlp", "hidden": [6], "activation": "tanh"},
    {"kind": "mlp", "hidden": [5, 4], "activation": "swish", "bias": False},
    {"kind": "mlp", "hidden": [7], "activation": "relu", "init": {"kind": "glorot", "seed": 3}},
    {"bias": True, "init": {"kind": "normal", "std": 0.1, "seed": 1}},  # linear + intercept
]


# ---- problem metrics ------------------------------------------------------------------------


@pytest.mark.parametrize("model", MODELS, ids=lambda m: Network.from_config(m, 1, 1).label)
@pytest.mark.parametrize("loss", ["least_squares", "logistic", "softmax"])
def test_network_metrics_equal_numpy(model, loss, sparse):
    data = with_client_tests(make_data(loss, d=9, sparse=sparse, seed=4))
    l2 = 0.01
    pb = Problem(data, loss, l2, "samples", model)
    theta = pb.initial_model()
    assert theta.shape == pb.shape == (1, pb.network.n_params)
    m = pb.metrics(theta)
    p = pb.p
    data_loss = [
        np_per_row_loss(np_forward(pb.network, theta, Xi)[0], yi, loss).mean()
        for Xi, yi in blocks(data)
    ]
    ridge = 0.5 * l2 * float(theta.ravel() @ theta.ravel())
    np.testing.assert_allclose(m["train_loss"], p @ data_loss, rtol=1e-12)
    np.testing.assert_allclose(m["objective"], p @ data_loss + ridge, rtol=1e-12)
    assert m["nnz"] == np.count_nonzero(theta)
    if loss != "least_squares":
        Z, _ = np_forward(pb.network, theta, data.X)
        assert m["train_accuracy"] == np_correct(Z, data.y, loss) / data.n_samples
        Zt, _ = np_forward(pb.network, theta, data.X_test)
        assert m["test_accuracy"] == np_correct(Zt, data.y_test, loss) / len(data.y_test)
    else:
        assert "train_accuracy" not in m


@pytest.mark.parametrize("model", [{}, MODELS[0], MODELS[3]], ids=["linear", "mlp", "bias"])
@pytest.mark.parametrize("loss", ["logistic", "softmax"])
def test_personal_metrics_score_each_client_on_its_own_rows(model, loss, sparse):
    data = with_client_tests(make_data(loss, d=9, sparse=sparse, seed=8))
    pb = Problem(data, loss, 0.02, "uniform", model)
    rng = np.random.default_rng(0)
    thetas = rng.normal(0.0, 0.5, (data.n_clients, *pb.shape))
    got = pb.personal_metrics(thetas)
    objective = correct = test_correct = 0.0
    tp = data.test_ptr
    for i, (Xi, yi) in enumerate(blocks(data)):
        Z, _ = np_forward(pb.network, thetas[i], Xi)
        t = thetas[i].ravel()
        objective += pb.p[i] * (np_per_row_loss(Z, yi, loss).mean() + 0.01 * t @ t)
        correct += np_correct(Z, yi, loss)
        Zt, _ = np_forward(pb.network, thetas[i], dense(data.X_test)[tp[i] : tp[i + 1]])
        test_correct += np_correct(Zt, data.y_test[tp[i] : tp[i + 1]], loss)
    np.testing.assert_allclose(got["pm_objective"], objective, rtol=1e-12)
    assert got["pm_train_accuracy"] == correct / data.n_samples
    assert got["pm_test_accuracy"] == test_correct / len(data.y_test)
    # one model for every client scores as the global model does
    same = pb.personal_metrics(np.repeat(thetas[:1], data.n_clients, axis=0))
    glob = pb.metrics(thetas[0])
    np.testing.assert_allclose(same["pm_objective"], glob["objective"], rtol=1e-12)
    assert same["pm_train_accuracy"] == glob["train_accuracy"]


def test_personal_test_accuracy_is_null_without_per_client_test_rows():
    data = make_data("softmax", d=9, seed=2)
    pb = Problem(data, "softmax", 0.0, "uniform", MODELS[0])
    got = pb.personal_metrics(np.zeros((data.n_clients, *pb.shape)))
    assert got["pm_test_accuracy"] is None and got["pm_train_accuracy"] is not None


# ---- the hard-thresholding family on networks -----------------------------------------------


def per_layer(net: Network, theta, tau):
    """H_tau applied to each layer's parameters (W_l then b_l) separately."""
    b = net.layer_bounds
    segments = zip(b[:-1], b[1:], strict=True)
    return np.concatenate([np_hard_threshold(theta[lo:hi], tau) for lo, hi in segments])


def oracle_ht_trace(pb: Problem, *, steps, stepsize, rounds, tau, local_threshold, layers=False):
    """Full-batch Fed-HT / FedIter-HT on flat parameters (spec pseudo-code), in NumPy."""
    bl = blocks(pb.data)
    theta = pb.initial_model().ravel()
    H = (lambda x, t: per_layer(pb.network, x, t)) if layers else np_hard_threshold

    def objective(th):
        return sum(
            pi * np_loss_grad(pb.network, th, Xi, yi, pb.loss, pb.l2)[0]
            for pi, (Xi, yi) in zip(pb.p, bl, strict=True)
        )

    trace = [objective(theta)]
    for _ in range(rounds):
        total = np.zeros_like(theta)
        for pi, (Xi, yi) in zip(pb.p, bl, strict=True):
            th = theta.copy()
            for _ in range(steps):
                th = th - stepsize * np_loss_grad(pb.network, th, Xi, yi, pb.loss, pb.l2)[1]
                if local_threshold:
                    th = H(th, tau)
            total += pi * th
        theta = H(total, tau)
        trace.append(objective(theta))
    return np.array(trace), theta


@pytest.mark.parametrize("name", ["fedht", "fediterht", "distiht"])
@pytest.mark.parametrize("model", [MODELS[0], MODELS[1], MODELS[3]], ids=["tanh", "swish", "bias"])
@pytest.mark.parametrize("loss", ["least_squares", "softmax"])
def test_ht_on_networks_equals_pseudo_code(name, model, loss, sparse):
    data = make_data(loss, d=9, sparse=sparse, seed=11)
    pb = Problem(data, loss, 1e-3, "samples", model)
    steps = 1 if name == "distiht" else 3
    tau = pb.network.n_params - 4  # H_tau acts every round, without undoing the progress
    params = {"stepsize": 0.05, "sparsity": tau, "batch_size": "full"}
    if name != "distiht":
        params["local_steps"] = steps
    cls = ALGORITHMS[name]
    algo = cls(pb, cls.validate_params(params), 0)
    algo.check_problem()
    algo.setup()
    got = [pb.objective(algo.model)]
    for t in range(5):
        algo.round(t)
        got.append(pb.objective(algo.model))
    expected, theta = oracle_ht_trace(
        pb, steps=steps, stepsize=0.05, rounds=5, tau=tau, local_threshold=name == "fediterht"
    )
    assert np.count_nonzero(algo.model) == tau
    assert expected[-1] < expected[0]
    np.testing.assert_allclose(got, expected, rtol=1e-9)
    np.testing.assert_allclose(algo.model.ravel(), theta, rtol=1e-9, atol=1e-12)


def test_ht_sparsity_is_bounded_by_the_parameter_count():
    from fedsparse.errors import ConfigError

    pb = Problem(make_data("softmax", d=9), "softmax", 0.0, "uniform", MODELS[0])
    n = pb.network.n_params
    algo = FedHT(pb, FedHT.validate_params({"stepsize": 0.1, "sparsity": n + 1}), 0)
    with pytest.raises(ConfigError, match=f"larger than the number of model parameters {n}"):
        algo.check_problem()


# ---- the trace ------------------------------------------------------------------------------


class _PersonalFedHT(FedHT):
    """Fed-HT whose clients' end-of-round models are read as personalised models (a test
    double for the experiment loop's personalised columns)."""

    name = "test-personal"

    @property
    def personal_models(self):
        if not hasattr(self, "rounds_done"):
            return np.repeat(self.W[None], self.problem.n_clients, axis=0)
        return self.local_models

    def round(self, t):
        self.rounds_done = t + 1
        return super().round(t)


def test_trace_has_personalised_and_train_loss_columns(monkeypatch):
    monkeypatch.setitem(ALGORITHMS, _PersonalFedHT.name, _PersonalFedHT)
    data = with_client_tests(make_data("softmax", d=9, seed=3))
    model = {"loss": "softmax", "l2": 1e-3, "weights": "uniform", **MODELS[0]}
    from fedsparse.training.config import normalize_run_config

    base = {
        "dataset": {"kind": "svmlight", "path": "unused.svm", "task": "multiclass"},
        "partition": {"kind": "iid", "clients": 4},
        "model": model,
        "params": {"stepsize": 0.1, "sparsity": 40, "local_steps": 2, "batch_size": 4},
        "rounds": 4,
        "seed": 1,
    }
    # the config names a data set; the data passed in is what runs
    cfg = normalize_run_config({**base, "algorithm": "fedht"})
    cfg_personal = {**cfg, "algorithm": _PersonalFedHT.name}
    plain = run_trace(cfg, data).to_pandas()
    personal = run_trace(cfg_personal, data).to_pandas()
    assert plain["model"].unique().tolist() == ["mlp-6-tanh"]
    assert plain[["pm_objective", "pm_train_accuracy", "pm_test_accuracy"]].isna().all().all()
    assert plain["train_loss"].notna().all()
    assert (plain["train_loss"] < plain["objective"]).all()  # l2 > 0
    # the same training: global columns agree; personalised ones are filled
    np.testing.assert_array_equal(plain["objective"], personal["objective"])
    assert personal[["pm_objective", "pm_train_accuracy", "pm_test_accuracy"]].notna().all().all()
    # row 0 scores every client at theta_0
    assert personal["pm_objective"][0] == pytest.approx(personal["objective"][0], rel=1e-12)
    # later rows: each client's own model on its own rows
    pb = Problem.from_config(data, cfg["model"])
    algo = FedHT(pb, cfg["params"], cfg["seed"])
    algo.setup()
    for t in range(4):
        algo.round(t)
    last = pb.personal_metrics(algo.local_models)
    for key, value in last.items():
        assert personal[key].iloc[-1] == pytest.approx(value, rel=1e-12)


@pytest.mark.parametrize("name", ["fedht", "fediterht"])
def test_per_layer_threshold_equals_pseudo_code(name, sparse):
    data = make_data("softmax", d=9, sparse=sparse, seed=12)
    pb = Problem(data, "softmax", 1e-3, "uniform", {"kind": "mlp", "hidden": [6, 5]})
    tau = 20  # layers of 60, 35 and 18 parameters: the last keeps all
    params = {"stepsize": 0.1, "sparsity": tau, "batch_size": "full", "local_steps": 2}
    cls = ALGORITHMS[name]
    algo = cls(pb, cls.validate_params({**params, "threshold": "per_layer"}), 0)
    algo.check_problem()
    algo.setup()
    got = [pb.objective(algo.model)]
    for t in range(4):
        algo.round(t)
        got.append(pb.objective(algo.model))
    expected, theta = oracle_ht_trace(
        pb,
        steps=2,
        stepsize=0.1,
        rounds=4,
        tau=tau,
        local_threshold=name == "fediterht",
        layers=True,
    )
    np.testing.assert_allclose(got, expected, rtol=1e-9)
    np.testing.assert_allclose(algo.model.ravel(), theta, rtol=1e-9, atol=1e-12)
    b = pb.network.layer_bounds
    counts = [np.count_nonzero(algo.model[0, lo:hi]) for lo, hi in zip(b[:-1], b[1:], strict=True)]
    assert counts == [tau, tau, 18]


def test_threshold_default_stays_out_of_the_run_config():
    from fedsparse.errors import ConfigError
    from fedsparse.training.config import normalize_run_config, run_id

    base = {
        "dataset": {"kind": "synthetic", "dim": 20, "support": 4},
        "algorithm": "fedht",
        "params": {"stepsize": 0.1, "sparsity": 4},
        "rounds": 2,
    }
    plain = normalize_run_config(base)
    spelled = normalize_run_config({**base, "params": {**base["params"], "threshold": "all"}})
    assert "threshold" not in plain["params"] and run_id(spelled) == run_id(plain)
    per = normalize_run_config({**base, "params": {**base["params"], "threshold": "per_layer"}})
    assert run_id(per) != run_id(plain)
    trace = run_trace(plain).to_pandas()
    assert trace["threshold"].unique().tolist() == ["all"]
    with pytest.raises(ConfigError, match="^params.threshold: per_layer is for networks"):
        run_trace(per)
    with pytest.raises(ConfigError, match="^params.threshold: must be one of all, per_layer"):
        normalize_run_config({**base, "params": {**base["params"], "threshold": "rows"}})
