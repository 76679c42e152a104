"""Fed-HT, FedIter-HT and Distributed-IHT against a NumPy transcription of the papers.

The oracle below is written from the pseudo-code (spec section 2), not from the
implementation: x_0 = 0; every client starts from x_t and takes K gradient steps
on its own mean loss (FedIter-HT: H_tau after each step); the server sets
x_{t+1} = H_tau(sum_i p_i x_i), per row for softmax.
"""

from __future__ import annotations

import math
import warnings

import numba
import numpy as np
import pandas as pd
import pytest
from conftest import LOSSES, dense, make_data, np_grad, np_hard_threshold_rows, np_loss

import fedsparse
from fedsparse import kernels as K
from fedsparse.algorithms import ALGORITHMS, DistributedIHT, FedHT, FedIterHT
from fedsparse.errors import ConfigError
from fedsparse.objective.problem import Problem
from fedsparse.results.schema import to_frame
from fedsparse.training.config import normalize_run_config
from fedsparse.training.experiment import load_dataset, run_trace

RTOL = 1e-9
STEPS = {"least_squares": 0.02, "logistic": 0.3, "softmax": 0.3}


# ---- oracle ----------------------------------------------------------------------------


def client_blocks(data):
    Xd, ptr = dense(data.X), data.client_ptr
    return [(Xd[ptr[i] : ptr[i + 1]], data.y[ptr[i] : ptr[i + 1]]) for i in range(data.n_clients)]


def weights_of(data, weights: str) -> np.ndarray:
    sizes = np.diff(data.client_ptr).astype(float)
    if weights == "uniform":
        return np.full(data.n_clients, 1.0 / data.n_clients)
    return sizes / sizes.sum()


def np_objective(blocks, p, W, loss, l2) -> float:
    pairs = zip(p, blocks, strict=True)
    return float(sum(pi * np_loss(Xi, yi, W, loss, l2) for pi, (Xi, yi) in pairs))


def oracle_trace(
    data,
    loss,
    l2,
    weights,
    *,
    steps,
    stepsize,
    rounds,
    tau=None,
    local_threshold=False,
    n_outputs=1,
):
    """Objective f(x_t) for t = 0..rounds of full-batch Fed-HT / FedIter-HT (tau=None: FedAvg)."""
    blocks = client_blocks(data)
    p = weights_of(data, weights)
    H = (lambda W: W) if tau is None else (lambda W: np_hard_threshold_rows(W, tau))
    W = np.zeros((n_outputs, data.n_features))
    trace = [np_objective(blocks, p, W, loss, l2)]
    for _ in range(rounds):
        total = np.zeros_like(W)
        for pi, (Xi, yi) in zip(p, blocks, strict=True):
            Wi = W.copy()
            for _ in range(steps):
                Wi = Wi - stepsize * np_grad(Xi, yi, Wi, loss, l2)
                if local_threshold:
                    Wi = H(Wi)
            total += pi * Wi
        W = H(total)
        trace.append(np_objective(blocks, p, W, loss, l2))
    return np.array(trace), W


def run_direct(data, loss, l2, weights, name, params, seed=0, rounds=5):
    """Drive an algorithm object round by round; return objectives, costs, models and it."""
    problem = Problem(data, loss, l2, weights)
    cls = ALGORITHMS[name]
    algo = cls(problem, cls.validate_params(params), seed)
    algo.check_problem()
    algo.setup()
    objectives = [problem.objective(algo.model)]
    costs, locals_, models = [], [], [algo.model.copy()]
    for t in range(rounds):
        costs.append(algo.round(t))
        locals_.append(algo.local_models.copy())
        models.append(algo.model.copy())
        objectives.append(problem.objective(algo.model))
    return np.array(objectives), costs, locals_, models, algo


def n_outputs_for(loss: str, data) -> int:
    return data.n_classes if loss == "softmax" else 1


# ---- full-batch traces equal the pseudo-code --------------------------------------------


@pytest.mark.parametrize("weights", ["uniform", "samples"])
@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.parametrize("name", ["fedht", "fediterht", "distiht"])
def test_full_batch_trace_equals_pseudo_code(name, loss, weights, sparse):
    data = make_data(loss, sparse=sparse, seed=11)
    l2 = 1e-3 if loss != "least_squares" else 0.0
    steps = 1 if name == "distiht" else 3
    tau = 8
    params = {"stepsize": STEPS[loss], "sparsity": tau, "batch_size": None}
    if name != "distiht":
        params["local_steps"] = steps
    got, *_ = run_direct(data, loss, l2, weights, name, params, rounds=6)
    expected, W_last = oracle_trace(
        data,
        loss,
        l2,
        weights,
        steps=steps,
        stepsize=STEPS[loss],
        rounds=6,
        tau=tau,
        local_threshold=(name == "fediterht"),
        n_outputs=n_outputs_for(loss, data),
    )
    assert np.all(np.count_nonzero(W_last, axis=1) == tau)
    assert expected[-1] < expected[0]  # the oracle does make progress
    np.testing.assert_allclose(got, expected, rtol=RTOL)


@pytest.mark.parametrize(
    "name,loss,task", [("fedht", "least_squares", "linear"), ("fediterht", "logistic", "logistic")]
)
def test_run_objective_column_equals_pseudo_code(name, loss, task):
    cfg = {
        "dataset": {
            "kind": "synthetic",
            "task": task,
            "clients": 4,
            "samples_per_client": 20,
            "dim": 30,
            "support": 5,
            "positives": 6,
            "seed": 3,
        },
        "model": {"loss": loss},
        "algorithm": name,
        "params": {
            "stepsize": 0.01 if loss == "least_squares" else 0.1,
            "sparsity": 6,
            "local_steps": 3,
            "batch_size": None,
        },
        "rounds": 5,
        "seed": 0,
    }
    df = fedsparse.run(cfg)
    assert list(df["round"]) == [0, 1, 2, 3, 4, 5]
    norm = normalize_run_config(cfg)
    data = load_dataset(norm["dataset"], loss)
    expected, _ = oracle_trace(
        data,
        loss,
        norm["model"]["l2"],
        "uniform",
        steps=3,
        stepsize=cfg["params"]["stepsize"],
        rounds=5,
        tau=6,
        local_threshold=(name == "fediterht"),
    )
    assert expected[-1] < expected[0]
    np.testing.assert_allclose(df["objective"].to_numpy(float), expected, rtol=RTOL)
    assert list(df["local_iterations"]) == [0, 3, 6, 9, 12, 15]
    assert set(df["status"]) == {"ok"}


@pytest.mark.parametrize("loss", LOSSES)
def test_fedht_with_sparsity_equal_dim_is_fedavg(loss, sparse):
    data = make_data(loss, sparse=sparse, seed=12, d=20)
    l2 = 1e-3
    d = data.n_features
    params = {"stepsize": STEPS[loss], "sparsity": d, "local_steps": 4, "batch_size": None}
    got, _, _, models, _ = run_direct(data, loss, l2, "uniform", "fedht", params, rounds=5)
    expected, W_last = oracle_trace(
        data,
        loss,
        l2,
        "uniform",
        steps=4,
        stepsize=STEPS[loss],
        rounds=5,
        tau=None,
        n_outputs=n_outputs_for(loss, data),
    )
    np.testing.assert_allclose(got, expected, rtol=RTOL)
    np.testing.assert_allclose(models[-1], W_last, rtol=1e-9, atol=1e-12)
    assert np.count_nonzero(models[-1]) == models[-1].size  # nothing thresholded away


# ---- minibatches: exact replay with the library's own RNG ---------------------------------


def minibatch_oracle(data, loss, l2, *, steps, stepsize, batch, growth, rounds, tau, seed):
    """Fed-HT whose minibatches replay the per-client streams; batch b_t = ceil(b g^t)."""
    X, y, ptr = dense(data.X), data.y, data.client_ptr
    state = K.client_states(seed, data.n_clients)
    perm = np.arange(data.n_samples, dtype=np.int64)
    p = np.full(data.n_clients, 1.0 / data.n_clients)
    blocks = client_blocks(data)
    W = np.zeros((1, data.n_features))
    trace = [np_objective(blocks, p, W, loss, l2)]
    used = []
    for t in range(rounds):
        b_t = math.ceil(batch * growth**t)
        total = np.zeros_like(W)
        for i in range(data.n_clients):
            lo, n = int(ptr[i]), int(ptr[i + 1] - ptr[i])
            b = min(b_t, n)
            used.append((t, i, b))
            Wi = W.copy()
            for _ in range(steps):
                if b < n:
                    K.sample_without_replacement(perm, lo, n, b, state, i)
                rows = perm[lo : lo + b]
                Wi = Wi - stepsize * np_grad(X[rows], y[rows], Wi, loss, l2)
            total += p[i] * Wi
        W = np_hard_threshold_rows(total, tau)
        trace.append(np_objective(blocks, p, W, loss, l2))
    return np.array(trace), used


@pytest.mark.parametrize("growth", [1.0, 1.6])
def test_minibatch_trace_and_batch_growth(growth):
    data = make_data("least_squares", sizes=(12, 20, 16), d=20, seed=13)
    params = {
        "stepsize": 0.02,
        "sparsity": 6,
        "local_steps": 2,
        "batch_size": 3,
        "batch_growth": growth,
    }
    got, _, _, _, algo = run_direct(
        data, "least_squares", 0.0, "uniform", "fedht", params, seed=5, rounds=8
    )
    expected, used = minibatch_oracle(
        data,
        "least_squares",
        0.0,
        steps=2,
        stepsize=0.02,
        batch=3,
        growth=growth,
        rounds=8,
        tau=6,
        seed=5,
    )
    np.testing.assert_allclose(got, expected, rtol=RTOL)
    sizes = {(t, i): b for t, i, b in used}
    if growth == 1.0:
        assert all(b == 3 for b in sizes.values())
    else:
        # 3, 5, 8, 13, 21, ... capped at each client's size: the batch does grow
        assert [sizes[(t, 1)] for t in range(8)] == [3, 5, 8, 13, 20, 20, 20, 20]
        # once every client is at full batch, the run is the deterministic full-batch one
        for t in range(5, 8):
            assert algo.batch_at(t) >= 20


def test_batch_growth_overflow_is_full_batch():
    """A grown batch beyond any float/int64 range is simply the full batch (no crash)."""
    data = make_data("least_squares", sizes=(10, 12), d=20, seed=14)
    params = {
        "stepsize": 0.02,
        "sparsity": 5,
        "local_steps": 1,
        "batch_size": 10,
        "batch_growth": 10.0,
    }
    problem = Problem(data, "least_squares", 0.0)
    algo = FedHT(problem, FedHT.validate_params(params), 0)
    algo.setup()
    for t, effective in ((0, 10), (1, 12), (19, 12), (30, 12), (400, 12), (5000, 12)):
        b = algo.batch_at(t)
        assert isinstance(b, int) and 0 < b < 2**63  # fits the kernel's int64
        assert min(b, 12) == effective
    # 10 * 10**19 > 2**63: this used to raise OverflowError in round 19
    got, *_ = run_direct(data, "least_squares", 0.0, "uniform", "fedht", params, rounds=25)
    expected, _ = oracle_trace(
        data, "least_squares", 0.0, "uniform", steps=1, stepsize=0.02, rounds=25, tau=5
    )
    # round 0 draws a minibatch for client 1 (10 of 12 rows), every later round is full batch
    assert np.all(np.isfinite(got)) and got[1] != expected[1]


# ---- equivalences and determinism ----------------------------------------------------------


def synth_cfg(**over):
    cfg = {
        "dataset": {
            "kind": "synthetic",
            "clients": 4,
            "samples_per_client": 20,
            "dim": 30,
            "support": 5,
            "seed": 2,
        },
        "algorithm": "fedht",
        "params": {"stepsize": 0.01, "sparsity": 6, "local_steps": 1, "batch_size": 3},
        "rounds": 8,
        "seed": 7,
    }
    for key, value in over.items():
        if isinstance(value, dict) and key in cfg:
            cfg[key] = {**cfg[key], **value}
        else:
            cfg[key] = value
    return cfg


def without_timing(df: pd.DataFrame) -> pd.DataFrame:
    return df.drop(columns=["elapsed_s", "run_id", "algorithm", "local_steps"])


def test_distiht_equals_fedht_with_one_local_step():
    fed = fedsparse.run(synth_cfg())
    dist = fedsparse.run(
        synth_cfg(algorithm="distiht", params={"stepsize": 0.01, "sparsity": 6, "batch_size": 3})
    )
    np.testing.assert_array_equal(
        fed["objective"].to_numpy(float), dist["objective"].to_numpy(float)
    )
    pd.testing.assert_frame_equal(without_timing(fed), without_timing(dist))
    assert fed["objective"].iloc[-1] < fed["objective"].iloc[0]


def test_distiht_has_exactly_one_local_step():
    assert DistributedIHT.validate_params({"stepsize": 1.0, "sparsity": 2})["local_steps"] == 1
    with pytest.raises(ConfigError, match="local_steps"):
        DistributedIHT.validate_params({"stepsize": 1.0, "sparsity": 2, "local_steps": 2})


def test_same_seed_is_deterministic_and_seeds_differ():
    cfg = synth_cfg(params={"local_steps": 3})
    a, b = fedsparse.run(cfg), fedsparse.run(cfg)
    pd.testing.assert_frame_equal(a.drop(columns="elapsed_s"), b.drop(columns="elapsed_s"))
    c = fedsparse.run(synth_cfg(params={"local_steps": 3}, seed=8))
    assert not np.array_equal(a["objective"].to_numpy(float), c["objective"].to_numpy(float))


def test_thread_count_does_not_change_results():
    data = make_data("logistic", sizes=(15, 22, 18, 30, 12), d=25, seed=15)
    params = {"stepsize": 0.3, "sparsity": 7, "local_steps": 3, "batch_size": 4}
    before = numba.get_num_threads()
    runs = []
    try:
        for threads in (1, numba.config.NUMBA_NUM_THREADS):
            numba.set_num_threads(threads)
            for name in ("fedht", "fediterht"):
                got, _, locals_, _, _ = run_direct(
                    data, "logistic", 1e-3, "uniform", name, params, seed=3, rounds=6
                )
                runs.append((threads, name, got, np.stack(locals_)))
    finally:
        numba.set_num_threads(before)
    (_, _, f1, l1), (_, _, i1, li1), (_, _, f2, l2), (_, _, i2, li2) = runs
    np.testing.assert_array_equal(f1, f2)
    np.testing.assert_array_equal(l1, l2)
    np.testing.assert_array_equal(i1, i2)
    np.testing.assert_array_equal(li1, li2)


@pytest.mark.parametrize("batch", [1, 3, 16])
@pytest.mark.parametrize(
    "case",
    [
        dict(rounds=20, eval_every=3),  # the last round is off the eval_every grid
        dict(rounds=60, params={"stepsize": 1e6, "local_steps": 5}),  # diverges
        dict(rounds=20, stop_at=7),  # ended by on_round, as the Optuna pruner does
    ],
    ids=["eval_every", "diverges", "on_round"],
)
def test_trace_does_not_depend_on_how_many_rounds_are_scored_together(case, batch, monkeypatch):
    case = dict(case)
    stop_at = case.pop("stop_at", None)
    cfg = normalize_run_config(synth_cfg(**case))

    def trace(n: int) -> tuple[pd.DataFrame, list]:
        calls = []

        def on_round(t: int, objective: float) -> bool:
            calls.append((t, objective))
            return t == stop_at

        monkeypatch.setattr(Problem, "eval_batch", property(lambda self: n))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            df = to_frame(run_trace(cfg, on_round=on_round))
        return df.drop(columns="elapsed_s"), calls

    one, calls_one = trace(1)
    got, calls = trace(batch)
    pd.testing.assert_frame_equal(got, one)
    assert calls == calls_one
    if stop_at is not None:
        assert one["round"].iloc[-1] == stop_at and calls[-1][0] == stop_at
    if "eval_every" in case:
        assert one["round"].tolist() == [0, 3, 6, 9, 12, 15, 18, 20]
    if case.get("params"):
        assert one["status"].iloc[-1] == "diverged" and one["round"].iloc[-1] < 60


# ---- communication accounting ----------------------------------------------------------


@pytest.mark.parametrize("loss", LOSSES)
@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
def test_fediterht_uplink_is_sparse(loss, sparse):
    """CSR data: the clients' compact models (active-set kernel), read back as dense ones."""
    data = make_data(loss, sparse=sparse, seed=16)
    tau = 5
    params = {"stepsize": STEPS[loss], "sparsity": tau, "local_steps": 3, "batch_size": 6}
    _, costs, locals_, models, algo = run_direct(
        data, loss, 1e-3, "uniform", "fediterht", params, rounds=5
    )
    assert algo.active_set == sparse
    n = data.n_clients
    for t, (cost, W_local) in enumerate(zip(costs, locals_, strict=True)):
        per_row = np.count_nonzero(W_local, axis=2)  # (clients, outputs)
        assert np.all(per_row <= tau) and np.all(per_row == tau)
        assert cost.bytes_up == 12 * int(np.count_nonzero(W_local))
        assert cost.bytes_down == n * 12 * int(np.count_nonzero(models[t]))
        assert cost.local_iterations == 3
    assert costs[0].bytes_down == 0  # x_0 = 0


@pytest.mark.parametrize("name", ["fedht", "distiht"])
@pytest.mark.parametrize("loss", ["least_squares", "softmax"])
def test_fedht_dense_uplink_sparse_downlink(name, loss):
    data = make_data(loss, seed=17)
    tau = 4
    params = {"stepsize": STEPS[loss], "sparsity": tau, "batch_size": 5}
    if name == "fedht":
        params["local_steps"] = 2
    _, costs, _, models, _ = run_direct(data, loss, 0.0, "uniform", name, params, rounds=4)
    n, d = data.n_clients, data.n_features
    c = n_outputs_for(loss, data)
    for t, cost in enumerate(costs):
        assert cost.bytes_up == n * 8 * d * c
        assert cost.bytes_down == n * 12 * int(np.count_nonzero(models[t]))
    assert costs[0].bytes_down == 0
    assert costs[1].bytes_down == n * 12 * tau * c
    for W in models[1:]:
        assert np.all(np.count_nonzero(W, axis=1) == tau)  # per-class sparsity


def test_trace_bytes_are_cumulative():
    df = fedsparse.run(
        synth_cfg(algorithm="fediterht", params={"local_steps": 2, "sparsity": 4}, rounds=4)
    )
    up, down = df["bytes_up"].to_numpy(int), df["bytes_down"].to_numpy(int)
    assert up[0] == 0 and down[0] == 0
    per_up, per_down = np.diff(up), np.diff(down)
    assert np.all(per_up == per_up[0]) and per_up[0] == 4 * 12 * 4  # 4 clients x tau x 12 B
    assert per_down[0] == 0 and np.all(per_down[1:] == 4 * 12 * 4)


# ---- divergence, support recovery, problem ------------------------------------------------


def test_huge_step_size_diverges_without_exception():
    cfg = synth_cfg(params={"stepsize": 1e6, "local_steps": 5}, rounds=60)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        df = fedsparse.run({**cfg, "divergence_factor": 1e300})  # only an overflow ends it
        early = fedsparse.run(cfg)
    assert df["status"].iloc[-1] == "diverged"
    assert not np.isfinite(df["objective"].iloc[-1])
    assert set(df["status"].iloc[:-1]) == {"ok"}
    assert df["round"].iloc[-1] < 60  # the run stopped at the first non-finite objective
    # the default rule ends it sooner: at the first round past 1000 x the round-0 objective
    f0 = df["objective"].iloc[0]
    last = early["round"].iloc[-1]
    assert early["status"].tolist() == ["ok"] * last + ["diverged"]
    assert np.isfinite(early["objective"].iloc[-1]) and last < df["round"].iloc[-1]
    assert (df["objective"].iloc[:last] <= 1e3 * f0).all() and df["objective"][last] > 1e3 * f0


@pytest.mark.parametrize("name,seed", [("fedht", 1), ("fedht", 2), ("distiht", 3)])
def test_noiseless_support_recovery(name, seed):
    params = {"stepsize": 0.1, "sparsity": 10, "batch_size": "full"}
    if name == "fedht":
        params["local_steps"] = 1
    df = fedsparse.run(
        {
            "dataset": {
                "kind": "synthetic",
                "task": "linear",
                "clients": 100,
                "samples_per_client": 4,
                "dim": 50,
                "support": 10,
                "shared_model": True,
                "noise_std": 0.0,
                "alpha": 0.0,
                "beta": 0.0,
                "seed": seed,
            },
            "algorithm": name,
            "params": params,
            "rounds": 200,
            "eval_every": 50,
        }
    )
    last = df.iloc[-1]
    assert last["status"] == "ok" and np.isfinite(last["objective"])
    assert last["support_recall"] == 1.0 and last["support_precision"] == 1.0
    assert last["nnz"] == 10
    assert last["objective"] < 1e-12 and last["dist_to_truth"] < 1e-6


def test_problem_weights_and_objective():
    data = make_data("least_squares", sizes=(10, 30), d=20, seed=18)
    W = np.random.default_rng(0).standard_normal((1, 20))
    blocks = client_blocks(data)
    for weights, p in (("uniform", [0.5, 0.5]), ("samples", [0.25, 0.75])):
        pb = Problem(data, "least_squares", 0.1, weights)
        np.testing.assert_allclose(pb.p, p, rtol=1e-15)
        np.testing.assert_allclose(
            pb.objective(W), np_objective(blocks, p, W, "least_squares", 0.1), rtol=1e-12
        )
    with pytest.raises(ConfigError, match="loss"):
        Problem(data, "logistic", 0.0)


def test_support_metrics_of_a_diverged_model_are_null():
    data = fedsparse.data.simulation(
        "linear", clients=2, samples_per_client=10, dim=20, support=5, seed=0
    )
    pb = Problem(data, "least_squares", 0.0)
    W = np.zeros((1, 20))
    W[0, :5] = np.nan  # what H_tau leaves of an all-NaN iterate: the lowest indices
    m = pb.metrics(W)
    assert not np.isfinite(m["objective"])
    assert m["support_recall"] is None and m["support_precision"] is None
    W[0, :5] = data.x_true[:5]
    m = pb.metrics(W)
    assert m["support_recall"] == 1.0 and m["support_precision"] == 1.0
    assert m["dist_to_truth"] == 0.0
    W[0, 3:5] = 0.0  # three of the five true coordinates, plus four false ones
    W[0, [7, 11, 12, 19]] = 1.0
    m = pb.metrics(W)
    assert m["support_recall"] == 3 / 5 and m["support_precision"] == 3 / 7


def test_eval_batch_bounds_memory_and_is_one_for_sparse_data():
    small = Problem(make_data("logistic", d=20, seed=19), "logistic", 0.0)
    assert small.eval_batch == 16
    sparse = Problem(make_data("logistic", d=20, sparse=True, seed=19), "logistic", 0.0)
    assert sparse.eval_batch == 1  # CSC evaluation shares no reads between models
    wide = fedsparse.data.simulation("linear", clients=2, samples_per_client=5, dim=1_000_000)
    assert Problem(wide, "least_squares", 0.0).eval_batch == 4  # 8 MB per model copy


def test_check_problem_rejects_sparsity_above_dimension():
    data = make_data("least_squares", d=20, seed=19)
    pb = Problem(data, "least_squares", 0.0)
    for cls in (FedHT, FedIterHT, DistributedIHT):
        cls(pb, cls.validate_params({"stepsize": 1.0, "sparsity": 20}), 0).check_problem()
        with pytest.raises(ConfigError, match="sparsity"):
            cls(pb, cls.validate_params({"stepsize": 1.0, "sparsity": 21}), 0).check_problem()


@pytest.mark.parametrize("bad", [float("inf"), float("-inf"), float("nan"), 2.5, True, "ten"])
def test_integer_hyperparameters_reject_non_integers(bad):
    with pytest.raises(ConfigError, match="sparsity"):
        FedHT.validate_params({"stepsize": 1.0, "sparsity": bad})


def test_float_hyperparameters_reject_non_finite():
    for bad in (float("inf"), float("nan"), 10**400):
        with pytest.raises(ConfigError, match="stepsize"):
            FedHT.validate_params({"stepsize": bad, "sparsity": 3})
    assert FedHT.validate_params({"stepsize": 1, "sparsity": 3.0})["sparsity"] == 3
