"""sFedHP and pFedMe against plain NumPy transcriptions of their pseudo-code (spec seed-002
§2.3 and §3), the §7.2 properties, the bit accounting and the hyperparameter checks.

The oracles replay the clients' minibatch draws from the same per-client streams
(``kernels.client_states`` + ``sample_without_replacement``: one draw per client and
edge/local round, reused for the K inner steps) and the server's edge/client sampling.
"""

from __future__ import annotations

import numba
import numpy as np
import pytest
from conftest import make_data, np_loss
from network_oracle import np_loss_grad, with_client_tests
from sfedhp_oracles import (
    TANH,
    Oracle,
    oracle_hierfavg,
    oracle_pfedme,
    oracle_sfedhp,
    weighted_problem,
)

from fedsparse.algorithms import (
    ALGORITHMS,
    FedProx,
    HeurFedAMP,
    HierFAVG,
    PerFedAvg,
    PFedMe,
    SFedHP,
)
from fedsparse.algorithms.base import vector_bits, vector_bytes
from fedsparse.data import FederatedData
from fedsparse.errors import ConfigError
from fedsparse.families.sfedhp.kernels import smooth_l1
from fedsparse.objective.problem import Problem

RELU2 = {"kind": "mlp", "hidden": [4, 3], "activation": "relu", "bias": False}


def problem(model=None, sizes=(7, 9, 6, 8, 5, 10), seed=0, l2=1e-3) -> Problem:
    data = make_data("softmax", sizes=sizes, d=8, seed=seed)
    return Problem(data, "softmax", l2, "uniform", model)


def run(cls, pb: Problem, params: dict, rounds: int, seed: int = 0):
    algo = cls(pb, cls.validate_params(params), seed)
    algo.check_problem()
    algo.setup()
    out, costs = [(algo.model.copy(), algo.personal_models.copy())], []
    for t in range(rounds):
        costs.append(algo.round(t))
        out.append((algo.model.copy(), algo.personal_models.copy()))
    return out, costs, algo


def assert_same(pb: Problem, got, want, o: Oracle):
    for (w, th), (w0, th0) in zip(got, want, strict=True):
        np.testing.assert_allclose(w, w0, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(th, th0, rtol=1e-9, atol=1e-12)
        # GM and PM objectives of the trace against the oracle's
        assert pb.objective(w) == pytest.approx(o.objective(w0), rel=1e-9)
        pm = sum(pb.p[i] * o.objective_i(th0[i], i) for i in range(pb.n_clients))
        assert pb.personal_metrics(th)["pm_objective"] == pytest.approx(pm, rel=1e-9)


def _objective_i(self, W, i):
    lo, hi = self.ptr[i], self.ptr[i + 1]
    if self.pb.is_linear:
        return np_loss(self.X[lo:hi], self.y[lo:hi], W, self.pb.loss, self.pb.l2)
    return np_loss_grad(self.pb.network, W, self.X[lo:hi], self.y[lo:hi], self.pb.loss, self.pb.l2)[
        0
    ]


Oracle.objective_i = _objective_i

SFEDHP_BASE = {
    "stepsize": 0.07,
    "inner_stepsize": 0.05,
    "inner_steps": 3,
    "edge_rounds": 4,
    "lambda1": 6.0,
    "lambda2": 4.0,
    "edges": 3,
    "batch_size": "full",
}


@pytest.mark.parametrize(
    "model, extra",
    [
        (None, {}),
        (None, {"anchor": "per_client"}),
        (None, {"batch_size": 3, "gamma1": 0.01, "gamma2": 0.02, "rho": 0.05}),
        (None, {"batch_size": 4, "sampled_edges": 2, "beta": 0.7, "edges": 3}),
        (None, {"edges": 1, "anchor": "per_client", "batch_size": 2}),
        (TANH, {}),
        (TANH, {"batch_size": 3, "gamma1": 0.003, "gamma2": 0.01, "rho": 0.02, "edges": 2}),
        (RELU2, {"anchor": "per_client", "batch_size": 5}),
    ],
)
def test_sfedhp_matches_the_pseudo_code(model, extra):
    pb = problem(model)
    params = {**SFEDHP_BASE, **extra}
    got, costs, _ = run(SFedHP, pb, params, rounds=3, seed=4)
    want, o = oracle_sfedhp(pb, SFedHP.validate_params(params), 3, seed=4)
    assert_same(pb, got, want, o)
    assert all(c.local_iterations == params["edge_rounds"] * params["inner_steps"] for c in costs)


@pytest.mark.parametrize(
    "model, extra",
    [
        (None, {}),
        (None, {"batch_size": 3, "sampled_clients": 4, "beta": 1.5}),
        (TANH, {"batch_size": 4}),
    ],
)
def test_pfedme_matches_the_pseudo_code(model, extra):
    pb = problem(model)
    params = {
        "stepsize": 0.05,
        "inner_stepsize": 0.04,
        "inner_steps": 3,
        "local_steps": 4,
        "lambda": 7.0,
        "batch_size": "full",
        **extra,
    }
    got, _, _ = run(PFedMe, pb, params, rounds=3, seed=2)
    want, o = oracle_pfedme(pb, PFedMe.validate_params(params), 3, seed=2)
    assert_same(pb, got, want, o)


# ---- §7.2 properties ----------------------------------------------------------------------


def naive_smooth_l1(x, rho):
    return rho * np.sum(np.log(np.cosh(x / rho)))


def test_smooth_l1_is_stable_and_matches_log_cosh():
    rho = 6e-5
    assert smooth_l1(np.zeros(5), rho) == 0.0
    x = np.random.default_rng(0).standard_normal(50) * 1e-4  # |x|/rho up to ~5: cosh finite
    assert smooth_l1(x, rho) == pytest.approx(naive_smooth_l1(x, rho), rel=1e-12, abs=1e-18)
    big = np.array([1.0, -3.0, 0.2])  # cosh(x/rho) overflows
    with np.errstate(over="ignore"):
        assert not np.isfinite(naive_smooth_l1(big, rho))
    v = smooth_l1(big, rho)
    l1, d = np.abs(big).sum(), big.size
    assert l1 - d * rho * np.log(2) - 1e-15 <= v <= l1
    assert np.isfinite(smooth_l1(np.array([1e8 * rho, -1e8 * rho]), rho))
    # gradient tanh(x/rho) by central differences at moderate x/rho, and |grad| < 1
    r = 0.3
    z = np.linspace(-1.0, 1.0, 9)
    h = 1e-6
    fd = [(smooth_l1(np.array([a + h]), r) - smooth_l1(np.array([a - h]), r)) / (2 * h) for a in z]
    np.testing.assert_allclose(fd, np.tanh(z / r), atol=1e-8)
    assert np.all(np.abs(np.tanh(z / r)) < 1)
    hess = (1 - np.tanh(z / r) ** 2) / r
    assert np.all((hess >= 0) & (hess <= 1 / r))


def local_edge_model(theta, w, lambda1, lambda2):
    """Eq. 10, Algorithm 1 line 13."""
    return (lambda1 * theta + lambda2 * w) / (lambda1 + lambda2)


def edge_step(w, phi, eta1, lambda2, gamma2, rho):
    """Eq. 11, Algorithm 1 line 16 (the algorithm is checked against it by the oracle tests)."""
    return w - eta1 * (lambda2 * (w - phi) + gamma2 * np.tanh(w / rho))


def test_closed_form_phi_and_the_edge_step_identity():
    rng = np.random.default_rng(1)
    theta, w = rng.standard_normal((2, 4, 6))
    l1, l2, eta, g2, rho = 3.0, 5.0, 0.07, 0.02, 0.1
    phi = local_edge_model(theta, w, l1, l2)
    np.testing.assert_allclose(l1 * (phi - theta) + l2 * (phi - w), 0.0, atol=1e-13)
    # edge step through the edge mean of phi_ij = the compact form with lambda_bar (§2.2)
    thetas = rng.standard_normal((5, 4, 6))
    phi_i = local_edge_model(thetas, w, l1, l2).mean(axis=0)
    lam_bar = l1 * l2 / (l1 + l2)
    compact = w - eta * (lam_bar * (w - thetas.mean(axis=0)) + g2 * np.tanh(w / rho))
    np.testing.assert_allclose(edge_step(w, phi_i, eta, l2, g2, rho), compact, rtol=1e-13)


def test_beta_zero_freezes_w():
    pb = problem(TANH)
    got, _, _ = run(SFedHP, pb, {**SFEDHP_BASE, "beta": 0.0, "batch_size": 3}, rounds=2)
    assert all(np.array_equal(w, got[0][0]) for w, _ in got)
    assert not np.array_equal(got[-1][1], got[0][1])  # the personal models did move
    got, _, _ = run(PFedMe, pb, {"beta": 0.0, "local_steps": 2}, rounds=2)
    assert all(np.array_equal(w, got[0][0]) for w, _ in got)


def quadratic_problem(centres: np.ndarray, s: float) -> Problem:
    """Client i's loss (1/d) sum_k (s w_k - s c_ik)^2 = (a/2)||w - c_i||^2, a = 2 s^2 / d."""
    n, d = centres.shape
    X = np.tile(s * np.eye(d), (n, 1))
    y = (s * centres).ravel()
    ptr = np.arange(n + 1, dtype=np.int64) * d
    data = FederatedData(name="quad", task="regression", X=X, y=y, client_ptr=ptr)
    return Problem(data, "least_squares", 0.0, "uniform")


@pytest.mark.parametrize("N, J, R", [(3, 4, 7), (2, 3, 1), (1, 5, 3), (6, 1, 2)])
@pytest.mark.parametrize("anchor", ["edge_avg", "per_client"])
def test_quadratic_fixed_point_is_the_grand_mean(N, J, R, anchor):
    rng = np.random.default_rng(N * 10 + J)
    d = 5
    centres = rng.standard_normal((N * J, d))
    pb = quadratic_problem(centres, s=2.0)  # a = 8/5
    params = {
        "edges": N,
        "edge_rounds": R,
        "inner_steps": 4,
        "batch_size": "full",
        "lambda1": 3.0,
        "lambda2": 2.0,
        "stepsize": 0.2,
        "inner_stepsize": 0.15,
        "anchor": anchor,
    }
    got, _, _ = run(SFedHP, pb, params, rounds=300)
    errors = [np.abs(w[0] - centres.mean(axis=0)).max() for w, _ in got]
    assert errors[-1] < 1e-10
    # monotone (linear) decrease of the distance to the grand mean
    assert all(b <= a * (1 + 1e-12) + 1e-15 for a, b in zip(errors[:-1], errors[1:], strict=True))


def test_pfedme_quadratic_fixed_point_is_the_grand_mean():
    rng = np.random.default_rng(7)
    centres = rng.standard_normal((5, 4))
    pb = quadratic_problem(centres, s=1.5)
    params = {
        "batch_size": "full",
        "lambda": 4.0,
        "local_steps": 3,
        "inner_steps": 20,
        "stepsize": 0.1,
        "inner_stepsize": 0.1,
    }
    got, _, _ = run(PFedMe, pb, params, rounds=300)
    np.testing.assert_allclose(got[-1][0][0], centres.mean(axis=0), atol=1e-10)


def test_gamma_zero_means_rho_has_no_effect():
    pb = problem()
    a, _, _ = run(SFedHP, pb, {**SFEDHP_BASE, "rho": 1e-3}, rounds=2)
    b, _, _ = run(SFedHP, pb, {**SFEDHP_BASE, "rho": 7.0}, rounds=2)
    for (w, th), (w0, th0) in zip(a, b, strict=True):
        assert np.array_equal(w, w0) and np.array_equal(th, th0)


def test_gamma_schedule_switches():
    pb = problem()
    params = {
        **SFEDHP_BASE,
        "gamma1": 0.05,
        "gamma2": 0.05,
        "rho": 1e-3,
        "gamma_tiny": 1e-6,
        "density_floor": 0.99,
        "gamma2_rounds": 2,
        "zero_tol": 1e-3,
    }
    algo = SFedHP(pb, SFedHP.validate_params(params), 0)
    algo.setup()
    assert algo.current_gammas(0) == (0.05, 0.05)
    algo.round(0)
    assert algo.current_gammas(1) == (1e-6, 0.05)  # the thetas' density fell below 0.99
    assert algo.current_gammas(2) == (1e-6, 1e-6)
    off = SFedHP(pb, SFedHP.validate_params({**SFEDHP_BASE, "gamma1": 0.05, "gamma2": 0.05}), 0)
    off.setup()
    off.round(0)
    assert off.current_gammas(5) == (0.05, 0.05)  # no schedule keys: constant gammas


def test_sparsity_terms_make_w_sparser():
    pb = problem()
    base = {**SFEDHP_BASE, "rho": 1e-4, "zero_tol": 1e-3}
    dense_run = run(SFedHP, pb, base, rounds=3)[2]
    sparse_run = run(SFedHP, pb, {**base, "gamma1": 0.02, "gamma2": 0.05}, rounds=3)[2]
    assert sparse_run.extra_metrics()["density"] < dense_run.extra_metrics()["density"]
    assert sparse_run.extra_metrics()["pm_density"] < dense_run.extra_metrics()["pm_density"]


# ---- accounting ---------------------------------------------------------------------------


def test_bits_arithmetic():
    d = 79_510
    assert vector_bits(d, d) == 64 * d
    assert vector_bits(100, d) == 64 * 100 + d
    assert vector_bits(int(0.2 * d), d) / (64 * d) == pytest.approx((64 * 0.2 + 1) / 64)  # 21.6%
    assert vector_bytes(d, d) == 8 * d and vector_bytes(10, d) == 12 * 10


def test_round_costs_and_cumulative_bits():
    pb = problem()
    n, D = pb.n_clients, pb.shape[0] * pb.shape[1]
    T, R, N = 3, SFEDHP_BASE["edge_rounds"], SFEDHP_BASE["edges"]
    params = {**SFEDHP_BASE, "zero_tol": 0.0}
    _, costs, algo = run(SFedHP, pb, params, rounds=T)
    # cloud link: one model up per edge, one down per edge (dense), but w^0 = 0 goes down
    # as an empty sparse vector
    assert [(c.bytes_up, c.bytes_down) for c in costs] == [(N * 8 * D, 0)] + [
        (N * 8 * D, N * 8 * D)
    ] * (T - 1)
    m = algo.extra_metrics()
    # the initial model is zero: the first anchors go down sparse (nothing but the map)
    assert m["edge_bytes_up"] == T * R * n * 8 * D
    assert m["edge_bytes_down"] == (T * R - 1) * n * 8 * D
    assert m["bits"] == pytest.approx(T * 2 * 64 * D - (64 * D - D))  # round 1 w^0 = 0 down
    _, costs, algo = run(PFedMe, pb, {"sampled_clients": 2, "local_steps": 2}, rounds=T)
    assert all(c.bytes_up == 2 * 8 * D for c in costs)
    assert "edge_bytes_up" not in algo.extra_metrics()


def test_results_do_not_depend_on_the_thread_count():
    pb = problem(TANH)
    params = {**SFEDHP_BASE, "batch_size": 3, "gamma1": 0.01, "rho": 0.01}
    before = numba.get_num_threads()
    try:
        numba.set_num_threads(1)
        one = run(SFedHP, pb, params, rounds=2)[0]
        numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
        many = run(SFedHP, pb, params, rounds=2)[0]
    finally:
        numba.set_num_threads(before)
    for (w, th), (w0, th0) in zip(one, many, strict=True):
        assert np.array_equal(w, w0) and np.array_equal(th, th0)


def test_trace_columns():
    from fedsparse.training.config import normalize_run_config
    from fedsparse.training.experiment import run_trace

    data = with_client_tests(make_data("softmax", sizes=(7, 9, 6, 8), d=8, seed=3))
    cfg = normalize_run_config(
        {
            "dataset": {"kind": "svmlight", "path": "unused.svm", "task": "multiclass"},
            "partition": {"kind": "iid", "clients": 4},
            "model": {"loss": "softmax", "l2": 1e-3, **TANH},
            "algorithm": "sfedhp",
            "params": {**SFEDHP_BASE, "edges": 2},
            "rounds": 3,
        }
    )
    tr = run_trace(cfg, data).to_pandas()
    cols = [
        "pm_objective",
        "pm_train_accuracy",
        "pm_test_accuracy",
        "edge_bytes_up",
        "edge_bytes_down",
        "bits",
        "density",
        "pm_density",
    ]
    assert tr[cols].notna().all().all()
    assert tr["pm_objective"][0] == pytest.approx(tr["objective"][0], rel=1e-12)  # theta = w0
    assert tr["edge_bytes_up"][0] == 0 and tr["edge_bytes_up"].is_monotonic_increasing
    assert tr["pm_objective"].iloc[-1] < tr["pm_objective"][0]
    assert tr["lambda1"].unique().tolist() == [6.0] and tr["anchor"][0] == "edge_avg"


# ---- configuration errors -----------------------------------------------------------------


@pytest.mark.parametrize(
    "name, params, key",
    [
        ("sfedhp", {"lambda1": 0}, "params.lambda1"),
        ("sfedhp", {"lambda2": -1.0}, "params.lambda2"),
        ("sfedhp", {"rho": 0.0}, "params.rho"),
        ("sfedhp", {"gamma1": -0.1}, "params.gamma1"),
        ("sfedhp", {"anchor": "edge"}, "params.anchor"),
        ("sfedhp", {"batch_size": 0}, "params.batch_size"),
        ("sfedhp", {"edge_rounds": 0}, "params.edge_rounds"),
        ("sfedhp", {"density_floor": 1.5}, "params.density_floor"),
        ("sfedhp", {"beta": -1}, "params.beta"),
        ("pfedme", {"lambda": 0.0}, "params.lambda"),
        ("pfedme", {"inner_steps": 0}, "params.inner_steps"),
        ("pfedme", {"edges": 2}, "params.edges"),
    ],
)
def test_bad_hyperparameters_are_one_line_errors(name, params, key):
    with pytest.raises(ConfigError) as err:
        ALGORITHMS[name].validate_params(params)
    assert str(err.value).startswith(key) and "\n" not in str(err.value)


def test_edges_must_divide_the_clients():
    pb = problem()  # 6 clients
    for params, key in [
        ({"edges": 4}, "params.edges"),
        ({"edges": 3, "sampled_edges": 4}, "params.sampled_edges"),
    ]:
        algo = SFedHP(pb, SFedHP.validate_params(params), 0)
        with pytest.raises(ConfigError) as err:
            algo.check_problem()
        assert str(err.value).startswith(key) and "\n" not in str(err.value)


# ---- the baselines ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "model, extra",
    [(None, {}), (None, {"batch_size": 3, "local_steps": 2}), (TANH, {"batch_size": 4})],
)
def test_hierfavg_matches_the_pseudo_code(model, extra):
    pb = weighted_problem(model)
    params = {
        "stepsize": 0.1,
        "local_steps": 1,
        "edge_rounds": 3,
        "edges": 3,
        "batch_size": "full",
        **extra,
    }
    got, _, algo = run_gm(HierFAVG, pb, params, rounds=3, seed=3)
    want, o = oracle_hierfavg(pb, HierFAVG.validate_params(params), 3, seed=3)
    for w, w0 in zip(got, want, strict=True):
        np.testing.assert_allclose(w, w0, rtol=1e-9, atol=1e-12)
        assert pb.objective(w) == pytest.approx(o.objective(w0), rel=1e-9)
    n, D = pb.n_clients, pb.shape[0] * pb.shape[1]
    m = algo.extra_metrics()
    assert m["edge_bytes_down"] == 3 * params["edge_rounds"] * n * 8 * D


def run_gm(cls, pb, params, rounds, seed=0):
    algo = cls(pb, cls.validate_params(params), seed)
    algo.check_problem()
    algo.setup()
    out, costs = [algo.model.copy()], []
    for t in range(rounds):
        costs.append(algo.round(t))
        out.append(algo.model.copy())
    return out, costs, algo


@pytest.mark.parametrize("model", [None, TANH])
def test_hierfavg_with_one_edge_is_fedavg(model):
    pb = weighted_problem(model)
    hier, _, _ = run_gm(
        HierFAVG,
        pb,
        {"stepsize": 0.1, "local_steps": 2, "edge_rounds": 3, "edges": 1, "batch_size": 3},
        rounds=2,
        seed=5,
    )
    flat, _, _ = run_gm(
        ALGORITHMS["fedavg"],
        pb,
        {"stepsize": 0.1, "local_steps": 2, "batch_size": 3},
        rounds=6,
        seed=5,
    )
    for t in range(3):
        np.testing.assert_allclose(hier[t], flat[3 * t], rtol=1e-12, atol=1e-15)


def test_fedavg_one_local_step_full_batch_is_a_gradient_step():
    pb = weighted_problem()
    o = Oracle(pb, 0)
    got, _, _ = run_gm(
        FedProx, pb, {"stepsize": 0.2, "local_steps": 1, "batch_size": "full", "mu": 0.0}, rounds=1
    )
    w0 = pb.initial_model()
    full = sum(pb.p[i] * o.grad(w0, np.arange(o.ptr[i], o.ptr[i + 1])) for i in range(6))
    np.testing.assert_allclose(got[1], w0 - 0.2 * full, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("model", [None, TANH])
def test_fedprox_with_mu_zero_is_fedavg_and_matches_the_pseudo_code(model):
    pb = weighted_problem(model)
    base = {"stepsize": 0.1, "local_steps": 3, "batch_size": 3}
    prox0, _, _ = run_gm(FedProx, pb, {**base, "mu": 0.0}, rounds=3, seed=1)
    flat, _, _ = run_gm(ALGORITHMS["fedavg"], pb, base, rounds=3, seed=1)
    for a, b in zip(prox0, flat, strict=True):  # the MLP kernel of FedAvg rounds differently
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-15)
    # mu > 0 against the transcription: w <- w - lr (grad f_i(w; D) + mu (w - w^t))
    got, _, _ = run_gm(FedProx, pb, {**base, "mu": 0.7}, rounds=3, seed=1)
    o = Oracle(pb, 1)
    w = pb.initial_model().copy()
    for t in range(3):
        total = np.zeros_like(w)
        for i in range(pb.n_clients):
            wi = w.copy()
            for _ in range(3):
                wi = wi - 0.1 * (o.grad(wi, o.draw(i, 3)) + 0.7 * (wi - w))
            total += pb.p[i] * wi
        w = total
        np.testing.assert_allclose(got[t + 1], w, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize(
    "model, variant, batch",
    [(None, "fo", 3), (None, "hf", 4), (TANH, "fo", None), (TANH, "hf", 3)],
)
def test_perfedavg_matches_the_pseudo_code(model, variant, batch):
    pb = weighted_problem(model)
    params = {
        "stepsize": 0.07,
        "inner_stepsize": 0.05,
        "local_steps": 2,
        "variant": variant,
        "batch_size": "full" if batch is None else batch,
        "hvp_delta": 1e-4,
    }
    got, _, _ = run(PerFedAvg, pb, params, rounds=2, seed=6)
    o = Oracle(pb, 6)
    w = pb.initial_model().copy()
    alpha, beta = 0.05, 0.07
    for t in range(2):
        total = np.zeros_like(w)
        for i in range(pb.n_clients):
            wi = w.copy()
            for _ in range(2):
                temp = wi - alpha * o.grad(wi, o.draw(i, batch))
                g = o.grad(temp, o.draw(i, batch))
                if variant == "hf":
                    D3 = o.draw(i, batch)
                    hv = (o.grad(wi + 1e-4 * g, D3) - o.grad(wi - 1e-4 * g, D3)) / 2e-4
                    g = g - alpha * hv
                wi = wi - beta * g
            total += pb.p[i] * wi
        w = total
        thetas = np.stack([w - alpha * o.grad(w, o.draw(i, batch)) for i in range(pb.n_clients)])
        np.testing.assert_allclose(got[t + 1][0], w, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(got[t + 1][1], thetas, rtol=1e-9, atol=1e-12)


def test_perfedavg_hessian_free_uses_the_hessian():
    """A quadratic's Hessian is exact under central differences: hf = the exact MAML step."""
    rng = np.random.default_rng(2)
    centres = rng.standard_normal((2, 3))
    pb = quadratic_problem(centres, s=1.0)  # a = 2/3, H = a I
    params = {
        "stepsize": 0.1,
        "inner_stepsize": 0.3,
        "local_steps": 1,
        "variant": "hf",
        "batch_size": "full",
    }
    got, _, _ = run(PerFedAvg, pb, params, rounds=1)
    a, w = 2.0 / 3.0, np.zeros(3)
    # grad of f(w - alpha grad f(w)) = (1 - alpha a) a (w - alpha a (w - c) - c)
    step = [(1 - 0.3 * a) * a * (w - 0.3 * a * (w - c) - c) for c in centres]
    np.testing.assert_allclose(got[1][0][0], w - 0.1 * np.mean(step, axis=0), rtol=1e-7)


@pytest.mark.parametrize("model", [None, TANH])
def test_heurfedamp_matches_the_pseudo_code(model):
    pb = weighted_problem(model)
    params = {
        "stepsize": 0.1,
        "local_steps": 2,
        "batch_size": 3,
        "alpha_self": 0.3,
        "sigma": 2.0,
        "lambda": 0.5,
    }
    got, _, _ = run(HeurFedAMP, pb, params, rounds=3, seed=8)
    o = Oracle(pb, 8)
    n = pb.n_clients
    models = [pb.initial_model().copy() for _ in range(n)]
    for t in range(3):
        flat = np.stack([m.ravel() for m in models])
        U = []
        for i in range(n):
            sims = []
            for j in range(n):
                ni, nj = np.linalg.norm(flat[i]), np.linalg.norm(flat[j])
                sims.append(0.0 if ni == 0 or nj == 0 else flat[i] @ flat[j] / (ni * nj))
            others = [j for j in range(n) if j != i]
            e = np.exp([2.0 * sims[j] for j in others])
            u = 0.3 * models[i] + sum(
                0.7 * e[k] / e.sum() * models[j] for k, j in enumerate(others)
            )
            U.append(u)
        for i in range(n):
            wi = U[i].copy()
            for _ in range(2):
                wi = wi - 0.1 * (o.grad(wi, o.draw(i, 3)) + 0.5 * (wi - U[i]))
            models[i] = wi
        np.testing.assert_allclose(got[t + 1][1], np.stack(models), rtol=1e-9, atol=1e-12)
        gm = sum(pb.p[i] * models[i] for i in range(n))
        np.testing.assert_allclose(got[t + 1][0], gm, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize(
    "name, params, key",
    [
        ("hierfavg", {"edge_rounds": 0}, "params.edge_rounds"),
        ("fedprox", {"mu": -1.0}, "params.mu"),
        ("perfedavg", {"variant": "so"}, "params.variant"),
        ("perfedavg", {"inner_stepsize": 0.0}, "params.inner_stepsize"),
        ("heurfedamp", {"alpha_self": 1.5}, "params.alpha_self"),
        ("heurfedamp", {"sigma": -1.0}, "params.sigma"),
    ],
)
def test_bad_baseline_hyperparameters_are_one_line_errors(name, params, key):
    with pytest.raises(ConfigError) as err:
        ALGORITHMS[name].validate_params(params)
    assert str(err.value).startswith(key) and "\n" not in str(err.value)


def test_hierfavg_edges_must_divide_the_clients():
    algo = HierFAVG(problem(), HierFAVG.validate_params({"edges": 4}), 0)
    with pytest.raises(ConfigError, match=r"^params\.edges: 4 edges do not divide the 6 clients"):
        algo.check_problem()


TOY = {
    "sfedhp": {"edges": 2, "edge_rounds": 2, "inner_steps": 2},
    "pfedme": {"local_steps": 2, "inner_steps": 2},
    "hierfavg": {"edges": 2, "edge_rounds": 2},
    "fedprox": {"local_steps": 2},
    "perfedavg": {"local_steps": 2, "variant": "hf"},
    "heurfedamp": {"local_steps": 2},
}


@pytest.mark.parametrize("name", list(TOY))
def test_every_method_writes_a_full_trace(name):
    from fedsparse.sweep.cost import run_work
    from fedsparse.training.config import normalize_run_config
    from fedsparse.training.experiment import run_trace

    data = with_client_tests(make_data("softmax", sizes=(7, 9, 6, 8), d=8, seed=3))
    cfg = normalize_run_config(
        {
            "dataset": {"kind": "svmlight", "path": "unused.svm", "task": "multiclass"},
            "partition": {"kind": "iid", "clients": 4},
            "model": {"loss": "softmax", "l2": 1e-3, **TANH},
            "algorithm": name,
            "params": {**TOY[name], "batch_size": 3},
            "rounds": 3,
        }
    )
    tr = run_trace(cfg, data).to_pandas()
    assert tr["round"].tolist() == [0, 1, 2, 3] and (tr["status"] == "ok").all()
    assert tr["objective"].iloc[-1] < tr["objective"][0]
    assert tr["bits"].is_monotonic_increasing and tr["bits"][0] == 0
    personal = name not in ("hierfavg", "fedprox")
    assert tr["pm_test_accuracy"].notna().all() == personal
    assert tr["edge_bytes_up"].notna().all() == (name in ("sfedhp", "hierfavg"))
    steps = ALGORITHMS[name].steps_per_round(cfg["params"])
    assert tr["local_iterations"].iloc[-1] == 3 * steps
    # the cost model charges what the trace shows: every minibatch gradient, and a second
    # forward pass an evaluation where personal models are scored
    work = run_work(cfg)
    assert (work.steps, work.evaluations) == (steps, 2 if personal else 1)
