"""Mini-batch SSCA against NumPy: the clients' kernel, the paper's pseudo-code (spec seed-004
§3.2 and §3.4, transcribed below), the momentum identity (§3.3), the reduction to gradient
descent, value consistency, and Lemma 1 against a numerical solver in its four regimes."""

from __future__ import annotations

import math

import numba
import numpy as np
import pytest
from conftest import dense, make_data
from network_oracle import np_loss_grad
from scipy.optimize import minimize, minimize_scalar

from fedsparse import kernels as K
from fedsparse.algorithms import ALGORITHMS, SSCA, SSCAConstrained
from fedsparse.cli import main as cli_main
from fedsparse.errors import ConfigError
from fedsparse.families.ssca.algorithms import lemma1
from fedsparse.families.ssca.kernels import client_batch_grads
from fedsparse.objective.problem import Problem
from fedsparse.training.config import normalize_run_config
from fedsparse.training.experiment import run_trace

SWISH = {"kind": "mlp", "hidden": [5], "activation": "swish", "bias": False}
MODELS = [SWISH, {}]
IDS = ["swish-mlp", "linear"]


def problem(model, l2=0.0, seed=31, sizes=(10, 17, 25, 13)):
    data = make_data("softmax", sizes=sizes, d=9, seed=seed)
    return Problem(data, "softmax", l2, "samples", model)


def np_client_loss_grad(pb: Problem, w, rows):
    X, y = dense(pb.data.X), pb.data.y
    v, g = np_loss_grad(pb.network, w, X[rows], y[rows], pb.loss, pb.l2)
    return v, g


def np_F(pb: Problem, w) -> float:
    ptr = pb.data.client_ptr
    return sum(
        pb.p[i] * np_client_loss_grad(pb, w, np.arange(ptr[i], ptr[i + 1]))[0]
        for i in range(pb.n_clients)
    )


# ---- the paper's pseudo-code in NumPy ----------------------------------------------------


def oracle(pb: Problem, prm: dict, rounds: int, seed: int, constrained: bool):
    """Rows (objective, F, sq_norm, slack) of w^(1..rounds+1), transcribed from the spec's
    per-iteration procedures; minibatches replay the clients' streams."""
    tau, a1, a2, alpha, extra = (
        prm["prox_weight"],
        prm["rho_scale"],
        prm["gamma_scale"],
        prm["decay"],
        prm["gamma_extra"],
    )
    ptr = pb.data.client_ptr
    state = K.client_states(seed, pb.n_clients)
    perm = np.arange(pb.data.n_samples, dtype=np.int64)
    w = pb.initial_model().ravel().copy()
    beta = np.zeros_like(w)
    acc = np.zeros_like(w)  # (Bacc, Cacc)
    A = 0.0

    def row(w, s):
        F = np_F(pb, w)
        sq = float(w @ w)
        obj = sq if constrained else F + prm["lambda"] * sq
        return obj, F, sq, s

    rows = [row(w, None)]
    for t in range(1, rounds + 1):
        # 2-3. clients' minibatch means, combined with p_i
        g_hat, f_hat = np.zeros_like(w), 0.0
        for i in range(pb.n_clients):
            lo, n = int(ptr[i]), int(ptr[i + 1] - ptr[i])
            b = n if prm["batch_size"] is None else min(prm["batch_size"], n)
            if b < n:
                K.sample_without_replacement(perm, lo, n, b, state, i)
            v, g = np_client_loss_grad(pb, w, perm[lo : lo + b])
            g_hat += pb.p[i] * g
            f_hat += pb.p[i] * v
        # 4. schedules
        rho = a1 / t**alpha
        gamma = a2 / t ** (alpha + extra)
        # 5. recursions
        acc_new = (1 - rho) * acc + rho * (g_hat - 2 * tau * w)
        if constrained:
            A_bar = f_hat + tau * (w @ w)
            A = (1 - rho) * A + rho * (A_bar - g_hat @ w)
            acc = acc_new
            # 6. Lemma 1 (21)-(23)
            U, c = prm["cost_limit"], prm["penalty"]
            b_ = acc @ acc
            D = b_ + 4 * tau * (U - A)
            nu = min(max((np.sqrt(b_ / D) - 1) / tau, 0.0), c) if D > 0 else c
            w_bar = -nu * acc / (2 * (1 + nu * tau))
            s = max(0.0, acc @ w_bar + tau * (w_bar @ w_bar) + A - U)
        else:
            beta = (1 - rho) * beta + rho * w
            acc = acc_new
            w_bar = -(acc + 2 * prm["lambda"] * beta) / (2 * tau)  # (16)-(17)
            s = None
        # 7. update
        w = (1 - gamma) * w + gamma * w_bar
        rows.append(row(w, s))
    return rows, w


def trace_cfg(name: str, params: dict, model: dict, l2: float, rounds: int, seed: int = 0):
    raw = {
        "dataset": {"kind": "svmlight", "path": "unused.svm", "task": "multiclass"},
        "model": {"loss": "softmax", "l2": l2, "weights": "samples", **model},
        "algorithm": name,
        "params": params,
        "rounds": rounds,
        "seed": seed,
    }
    return normalize_run_config(raw)


CASES = [
    ("ssca", {"lambda": 1e-2}),
    ("ssca", {"lambda": 0.0, "rho_scale": 0.6, "gamma_scale": 0.9, "decay": 0.3}),
    ("ssca_constrained", {"cost_limit": 0.95}),  # active: F settles at U
    ("ssca_constrained", {"cost_limit": 0.2, "penalty": 3.0}),  # capped / infeasible
    ("ssca_constrained", {"cost_limit": 5.0}),  # inactive: w shrinks to 0
]


@pytest.mark.parametrize("batch", ["full", 4])
@pytest.mark.parametrize("model", MODELS, ids=IDS)
@pytest.mark.parametrize("name,over", CASES)
def test_trace_equals_pseudo_code(name, over, model, batch):
    pb = problem(model, l2=1e-3)
    params = {"prox_weight": 0.5, "batch_size": batch, **over}
    cfg = trace_cfg(name, params, model, 1e-3, rounds=8, seed=3)
    df = run_trace(cfg, pb.data).to_pandas()
    prm = ALGORITHMS[name].validate_params(params)
    rows, _ = oracle(pb, prm, 8, seed=3, constrained=name == "ssca_constrained")
    obj, F, sq, slack = (np.array(c, dtype=float) for c in zip(*rows, strict=True))
    np.testing.assert_allclose(df["objective"], obj, rtol=1e-9)
    np.testing.assert_allclose(df["sq_norm"], sq, rtol=1e-9)
    if name == "ssca_constrained":
        U = prm["cost_limit"]
        np.testing.assert_allclose(df["constraint_value"], F - U, rtol=1e-9, atol=1e-12)
        assert df["slack"].isna().tolist() == [True] + [False] * 8
        np.testing.assert_allclose(df["slack"][1:], slack[1:], rtol=1e-9, atol=1e-12)
    else:
        assert df["slack"].isna().all() and df["constraint_value"].isna().all()
        ridge = 0.5e-3 * sq
        np.testing.assert_allclose(df["train_loss"] + ridge, F, rtol=1e-9)
    assert (df["bytes_up"].diff()[1:] == 4 * 8 * (pb.n_params + (name != "ssca"))).all()
    assert (df["bytes_down"].diff()[1:] == 4 * 8 * pb.n_params).all()
    assert df["local_iterations"].tolist() == list(range(9))


def test_constrained_regimes_behave_as_the_lemma_says():
    pb = problem(SWISH)
    F0 = np_F(pb, pb.initial_model().ravel())
    got = {}
    for U in (5.0, 0.95, 0.2):
        cfg = trace_cfg(
            "ssca_constrained",
            {"cost_limit": U, "batch_size": "full", "penalty": 1e5},
            SWISH,
            0.0,
            rounds=60,
        )
        got[U] = run_trace(cfg, pb.data).to_pandas()
    # inactive (U above every cost seen): w_bar = 0, so w shrinks by (1 - gamma) each round
    assert got[5.0]["sq_norm"].iloc[-1] < 1e-3 * got[5.0]["sq_norm"].iloc[0]
    assert (got[5.0]["slack"][1:] == 0).all()
    # active: the cost settles at U with no slack (after the first rounds, where the
    # surrogate built from few rounds may be infeasible)
    assert F0 > 0.95 and abs(got[0.95]["constraint_value"].iloc[-1]) < 2e-2
    assert (got[0.95]["slack"][-40:] < 1e-9).all()
    # U below what the model can reach: the slack stays positive
    assert (got[0.2]["slack"][-10:] > 0.1).all()


# ---- the clients' kernel -------------------------------------------------------------------


@pytest.mark.parametrize("model", MODELS, ids=IDS)
def test_client_gradients_equal_numpy(model, sparse):
    data = make_data("softmax", d=9, sparse=sparse, seed=32)
    pb = Problem(data, "softmax", 1e-2, "samples", model)
    rng = np.random.default_rng(0)
    w = rng.normal(0.0, 0.5, pb.n_params)
    perm = np.arange(data.n_samples, dtype=np.int64)
    state = K.client_states(7, pb.n_clients)
    replay_perm, replay_state = perm.copy(), state.copy()
    G = np.zeros((pb.n_clients, pb.n_params))
    losses = np.zeros(pb.n_clients)
    work = K.mlp_thread_work(pb.sizes, 6)
    for _ in range(3):  # a few draws: the streams advance as the oracle's do
        client_batch_grads(
            data.kernel_X,
            data.y,
            data.client_ptr,
            w,
            perm,
            state,
            6,
            pb.kernel_model._replace(bias=False),
            G,
            losses,
            work,
        )
        ptr = data.client_ptr
        for i in range(pb.n_clients):
            lo, n = int(ptr[i]), int(ptr[i + 1] - ptr[i])
            K.sample_without_replacement(replay_perm, lo, n, min(6, n), replay_state, i)
            v, g = np_client_loss_grad(pb, w, replay_perm[lo : lo + min(6, n)])
            np.testing.assert_allclose(G[i], g, rtol=1e-10, atol=1e-13)
            np.testing.assert_allclose(losses[i], v, rtol=1e-12)
    np.testing.assert_array_equal(perm, replay_perm)
    out = np.empty(pb.n_params)
    from fedsparse.families.ssca.kernels import weighted_rows

    weighted_rows(G, pb.p, out)
    np.testing.assert_allclose(out, pb.p @ G, rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("cls", [SSCA, SSCAConstrained])
def test_thread_count_does_not_change_results(cls):
    pb = problem(SWISH, sizes=(9, 14, 11, 20, 7))
    params = cls.validate_params({"cost_limit": 0.9} if cls is SSCAConstrained else {})
    params["batch_size"] = 3
    before, models = numba.get_num_threads(), []
    try:
        for threads in (1, numba.config.NUMBA_NUM_THREADS):
            numba.set_num_threads(threads)
            algo = cls(pb, params, 5)
            algo.setup()
            for t in range(5):
                algo.round(t)
            models.append(algo.model.copy())
    finally:
        numba.set_num_threads(before)
    np.testing.assert_array_equal(models[0], models[1])


def test_fused_server_step_equals_the_numpy_expressions_bit_for_bit():
    """Algorithm 1's server in one parallel pass (several coordinate chunks, the last one
    partial) gives the very bits of the NumPy expressions it replaces, any thread count."""
    from fedsparse.families.ssca.kernels import ssca_server_step

    rng = np.random.default_rng(8)
    n, P = 7, 3 * 4096 + 123
    G, p = rng.standard_normal((n, P)), rng.dirichlet(np.ones(n))
    w0, beta0, acc0 = (rng.standard_normal(P) for _ in range(3))
    rho, gamma, tau, lam = 0.37, 0.81, 0.13, 3e-3
    g = np.zeros(P)
    for i in range(n):  # weighted_rows's order
        g += p[i] * G[i]
    beta = beta0 * (1.0 - rho)
    beta += rho * w0
    acc = acc0 * (1.0 - rho)
    acc += rho * (g - 2.0 * tau * w0)
    w_bar = (acc + 2.0 * lam * beta) / (-2.0 * tau)
    w = w0 * (1.0 - gamma)
    w += gamma * w_bar
    before = numba.get_num_threads()
    try:
        for threads in {1, numba.config.NUMBA_NUM_THREADS}:
            numba.set_num_threads(threads)
            state = [w0.copy(), beta0.copy(), acc0.copy(), np.full(P, np.nan)]
            ssca_server_step(G, p, *state, rho, gamma, tau, lam)
            for got, want in zip(state, (w, beta, acc, g), strict=True):
                np.testing.assert_array_equal(got, want)
    finally:
        numba.set_num_threads(before)


# ---- identities --------------------------------------------------------------------------


@pytest.mark.parametrize("model", MODELS, ids=IDS)
def test_momentum_identity_at_every_iteration(model):
    """w_bar = beta - (G_hat + 2 lambda beta) / (2 tau), G_hat the rho-average of the g's."""
    pb = problem(model, l2=1e-3)
    prm = SSCA.validate_params({"lambda": 0.05, "batch_size": 3, "prox_weight": 0.4})
    algo = SSCA(pb, prm, 2)
    algo.setup()
    G_hat = np.zeros(pb.n_params)
    beta = np.zeros(pb.n_params)
    tau, lam = 0.4, 0.05
    for t in range(1, 12):
        w = algo.model.ravel().copy()
        algo.round(t - 1)
        rho = 0.9 / t**0.3
        gamma = 0.9 / t**0.35
        G_hat = (1 - rho) * G_hat + rho * algo.g
        beta = (1 - rho) * beta + rho * w
        np.testing.assert_allclose(algo.beta, beta, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(algo.acc, G_hat - 2 * tau * beta, rtol=1e-10, atol=1e-13)
        w_bar = beta - (G_hat + 2 * lam * beta) / (2 * tau)
        np.testing.assert_allclose(
            algo.model.ravel(), (1 - gamma) * w + gamma * w_bar, rtol=1e-10, atol=1e-13
        )


@pytest.mark.parametrize("model", MODELS, ids=IDS)
def test_rho_gamma_one_is_gradient_descent_and_fedavg(model):
    """rho = gamma = 1: gradient descent on F + lambda ||w||^2 with step 1/(2 tau), which is
    fedavg with one local step, stepsize 1/(2 tau) and model.l2 = 2 lambda, full batch."""
    tau, lam = 0.8, 0.03
    one = {"rho_scale": 1.0, "gamma_scale": 1.0, "decay": 0.0, "gamma_extra": 0.0}
    cfg = trace_cfg(
        "ssca",
        {"prox_weight": tau, "lambda": lam, "batch_size": "full", **one},
        model,
        0.0,
        rounds=6,
    )
    pb = problem(model)
    ssca = run_trace(cfg, pb.data).to_pandas()
    avg_cfg = trace_cfg(
        "fedavg", {"stepsize": 1 / (2 * tau), "batch_size": "full"}, model, 2 * lam, rounds=6
    )
    fedavg = run_trace(avg_cfg, pb.data).to_pandas()
    # fedavg's objective is F + (2 lambda)/2 ||w||^2: the same function
    np.testing.assert_allclose(ssca["objective"], fedavg["objective"], rtol=1e-9)
    assert ssca["objective"].iloc[-1] < ssca["objective"].iloc[0]
    # and the iterates are plain gradient steps
    algo = SSCA(
        pb,
        SSCA.validate_params({"prox_weight": tau, "lambda": lam, "batch_size": "full", **one}),
        0,
    )
    algo.setup()
    ptr = pb.data.client_ptr
    for t in range(3):
        w = algo.model.ravel().copy()
        grad = sum(
            pb.p[i] * np_client_loss_grad(pb, w, np.arange(ptr[i], ptr[i + 1]))[1]
            for i in range(pb.n_clients)
        )
        algo.round(t)
        np.testing.assert_allclose(
            algo.model.ravel(), w - (grad + 2 * lam * w) / (2 * tau), rtol=1e-10, atol=1e-13
        )


def test_value_consistency_with_rho_one():
    """rho = 1: F_bar(w_t) + A = f_hat (value) and grad F_bar(w_t) = g_hat (gradient): the
    surrogate matches the minibatch cost at the expansion point, which checks A-bar's sign."""
    pb = problem(SWISH, l2=1e-3)
    params = {"cost_limit": 0.5, "rho_scale": 1.0, "decay": 0.0, "batch_size": 4}
    algo = SSCAConstrained(pb, SSCAConstrained.validate_params(params), 1)
    algo.setup()
    tau = 0.1
    for t in range(5):
        w = algo.model.ravel().copy()
        algo.round(t)
        f_hat = float(pb.p @ algo.losses)
        assert f_hat > 0
        np.testing.assert_allclose(algo.acc @ w + tau * (w @ w) + algo.A, f_hat, rtol=1e-10)
        np.testing.assert_allclose(algo.acc + 2 * tau * w, algo.g, rtol=1e-10, atol=1e-13)


# ---- Lemma 1 -------------------------------------------------------------------------------


def solve_numerically(h, A, U, tau, c) -> float:
    """min ||w||^2 + c s  s.t.  h.w + tau ||w||^2 + A - U <= s, s >= 0, numerically: the
    value V(s) of the inner problem in w (SLSQP) minimised over s by a bounded scalar search
    (V(s) + c s is convex; SLSQP on (w, s) at once fails when c is large). s ranges from the
    least slack any w allows to A - U, where w = 0 is feasible."""

    def V(s):
        cons = [
            {
                "type": "ineq",
                "fun": lambda w: s - (h @ w + tau * (w @ w) + A - U),
                "jac": lambda w: -(h + 2 * tau * w),
            }
        ]
        res = minimize(
            lambda w: w @ w,
            -h / (2 * tau),
            jac=lambda w: 2 * w,
            constraints=cons,
            method="SLSQP",
            options={"ftol": 1e-15, "maxiter": 1000},
        )
        return float(res.x @ res.x)

    lo, hi = max(0.0, A - U - (h @ h) / (4 * tau)), max(0.0, A - U)
    ends = min(V(lo) + c * lo, V(hi) + c * hi)
    if hi - lo < 1e-15:
        return ends
    res = minimize_scalar(
        lambda s: V(s) + c * s, bounds=(lo, hi), method="bounded", options={"xatol": 1e-13}
    )
    return min(float(res.fun), ends)


def regime_instances():
    rng = np.random.default_rng(0)
    out = []
    for regime in ("inactive", "active", "capped", "infeasible"):
        for _ in range(6):
            d = int(rng.integers(2, 6))
            h = rng.normal(0.0, 1.0, d)
            tau = float(rng.uniform(0.05, 1.0))
            b = h @ h
            U = float(rng.uniform(0.1, 2.0))
            if regime == "inactive":
                A, c = U - rng.uniform(0.01, 1.0), 100.0
            elif regime == "active":  # feasible surrogate, nu* < c
                A, c = U + rng.uniform(0.05, 0.8) * b / (4 * tau), 1e4
            elif regime == "capped":  # feasible surrogate, but nu* > c
                A, c = U + 0.95 * b / (4 * tau), 0.5
            else:  # even min_w of the surrogate constraint is positive
                A, c = U + b / (4 * tau) + rng.uniform(0.1, 1.0), float(rng.uniform(0.5, 5.0))
            out.append((regime, h, float(A), U, tau, c))
    return out


@pytest.mark.parametrize("regime,h,A,U,tau,c", regime_instances())
def test_lemma1_against_a_numerical_solver(regime, h, A, U, tau, c):
    w, nu, s = lemma1(h, A, U, tau, c)
    g = h @ w + tau * (w @ w) + A - U
    # KKT: stationarity, multiplier bounds, feasibility, complementary slackness
    np.testing.assert_allclose(2 * w + nu * (h + 2 * tau * w), 0.0, atol=1e-10)
    assert 0 <= nu <= c and s >= 0 and g <= s + 1e-10
    assert abs(nu * (g - s)) < 1e-8 and abs((c - nu) * s) < 1e-8 * max(1.0, c)
    expected = {
        "inactive": nu == 0,
        "active": 0 < nu < c and s == 0,
        "capped": nu == c and s > 0,
        "infeasible": nu == c and s > 0,
    }
    assert expected[regime], (regime, nu, s)
    f_num = solve_numerically(h, A, U, tau, c)
    assert abs(w @ w + c * s - f_num) <= 1e-7 * max(1.0, f_num)


def test_lemma1_degenerate_cases_stay_finite():
    h = np.zeros(3)
    assert lemma1(h, 0.5, 1.0, 0.1, 1e5)[1] == 0.0  # b = 0, feasible
    w, nu, s = lemma1(h, 2.0, 1.0, 0.1, 1e5)  # b = 0, D < 0
    assert nu == 1e5 and np.all(w == 0) and s == pytest.approx(1.0)
    w, nu, s = lemma1(np.ones(3), 1.0 + 3 / 0.4, 1.0, 0.1, 1e5)  # D = 0 exactly
    assert nu == 1e5 and math.isfinite(s)


# ---- configuration -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name,key,bad",
    [
        ("ssca", "decay", -0.1),
        ("ssca", "prox_weight", 0.0),
        ("ssca", "rho_scale", 1.5),
        ("ssca", "gamma_scale", 0.0),
        ("ssca", "lambda", -1.0),
        ("ssca_constrained", "cost_limit", 0.0),
        ("ssca_constrained", "cost_limit", -1.0),
        ("ssca_constrained", "penalty", 0.0),
        ("ssca_constrained", "prox_weight", -0.1),
    ],
)
def test_bad_schedules_are_one_line_config_errors(name, key, bad, tmp_path, capsys):
    params = {"cost_limit": 0.5} if name == "ssca_constrained" else {}
    params[key] = bad
    with pytest.raises(ConfigError, match=rf"^params\.{key}: must be") as err:
        ALGORITHMS[name].validate_params(params)
    assert "\n" not in str(err.value)
    cfg = tmp_path / "run.yaml"
    cfg.write_text(
        "dataset: {kind: synthetic, task: linear, clients: 2, samples_per_client: 5, dim: 4, "
        "support: 2}\n"
        f"algorithm: {name}\nparams: {params}\nrounds: 2\n"
    )
    code = cli_main(["run", str(cfg), "--output", str(tmp_path / "out.parquet")])
    err_text = capsys.readouterr().err.strip()
    assert code == 2 and len(err_text.splitlines()) == 1 and key in err_text


def test_defaults_and_required_cost_limit():
    assert SSCA.validate_params({}) == {
        "prox_weight": 0.1,
        "rho_scale": 0.9,
        "gamma_scale": 0.9,
        "decay": 0.3,
        "gamma_extra": 0.05,
        "lambda": 1e-5,
        "batch_size": 10,
    }
    with pytest.raises(ConfigError, match=r"^params\.cost_limit: required by ssca_constrained"):
        SSCAConstrained.validate_params({})
    assert (
        SSCAConstrained.validate_params({"cost_limit": 0.13, "batch_size": "full"})["penalty"]
        == 1e5
    )


# ---- the sweeps ----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["ssca-quick", "ssca-paper"])
def test_configs_tie_each_batch_size_to_its_schedule(name):
    """The paper's (a1, a2, alpha) per B, as override sets; the schema takes the configs."""
    from pathlib import Path

    import jsonschema
    import yaml

    from fedsparse.sweep import plan_sweep

    root = Path(__file__).resolve().parents[3]
    sweep = yaml.safe_load((root / "config" / f"{name}.yaml").read_text())
    schema = yaml.safe_load((root / "workflow" / "schemas" / "sweep.schema.yaml").read_text())
    jsonschema.validate(sweep, schema)
    table = {1: (0.4, 0.4, 0.4), 10: (0.6, 0.9, 0.3), 100: (0.9, 0.9, 0.3)}
    plan = plan_sweep(sweep)
    seen = set()
    for run in plan.runs:
        prm = run.config["params"]
        if run.config["algorithm"] in ("ssca", "ssca_constrained"):
            b = prm["batch_size"]
            assert (prm["rho_scale"], prm["gamma_scale"], prm["decay"]) == table[b]
            seen.add((run.config["algorithm"], b))
        else:
            seen.add(("fedavg", prm["batch_size"], prm["local_steps"]))
    assert {("ssca", 1), ("ssca", 10), ("ssca", 100), ("ssca_constrained", 100)} <= seen
    assert {("fedavg", b, 1) for b in (1, 10, 100)} | {("fedavg", 5, 2), ("fedavg", 50, 2)} <= seen


def test_override_sets_are_for_grids_and_must_be_mappings():
    from fedsparse.sweep import plan_sweep

    sweep = {
        "datasets": {
            "sim": {
                "data": {
                    "kind": "synthetic",
                    "task": "linear",
                    "dim": 30,
                    "support": 3,
                    "clients": 2,
                    "samples_per_client": 5,
                }
            }
        },
        "rounds": 2,
        "algorithms": {"fedavg": [{"local_steps": 1}, {"local_steps": [2, 3]}]},
        "grid": {"stepsize": [0.1]},
    }
    plan = plan_sweep(sweep)
    assert [r.config["params"]["local_steps"] for r in plan.runs] == [1, 2, 3]
    with pytest.raises(ConfigError, match=r"^algorithms\.fedavg: overrides must be a mapping"):
        plan_sweep({**sweep, "algorithms": {"fedavg": [3]}})
    with pytest.raises(ConfigError, match="same run twice"):
        plan_sweep({**sweep, "algorithms": {"fedavg": [{}, {"local_steps": 1}]}})
