"""Gradient sparsification (FAB-top-k and its baselines, spec seed-003) against NumPy.

The oracles are written from the spec, not from the kernels: a client's offer is its top-k
by |a_ij| (lower index first among ties); FAB-Select is the literal search for the largest
kappa with |union of top-kappa| <= k plus the fill; the traces are a transcription of
Algorithm 1 and the baselines of section 4.1 with full-batch gradients.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import make_data, np_grad, np_loss
from gs_helpers import blocks_of, drive, params_for, run_cfg
from hypothesis import given, settings
from hypothesis import strategies as st
from network_oracle import np_loss_grad

from fedsparse.algorithms import ALGORITHMS
from fedsparse.errors import ConfigError
from fedsparse.families.gradient_sparsification import controllers as GSCtrl
from fedsparse.families.gradient_sparsification import kernels as GS
from fedsparse.families.gradient_sparsification.algorithms import PeriodicIndices
from fedsparse.objective.problem import Problem
from fedsparse.results.schema import to_frame
from fedsparse.training.config import normalize_run_config, run_id
from fedsparse.training.experiment import run_result, run_trace

RTOL = 1e-9
GS_NAMES = ["fabtopk", "fubtopk", "utopk", "periodick", "sendall"]


# ---- NumPy oracles -----------------------------------------------------------------------


def np_topk(a, k):
    """Ranked top-k: |a| descending, the lower index first among equal magnitudes."""
    return np.lexsort((np.arange(a.size), -np.abs(a)))[:k]


def np_offers(A, k):
    idx = np.array([np_topk(a, k) for a in A])
    return idx, np.take_along_axis(A, idx, axis=1)


def np_aggregate(idx, val, p, D):
    b = np.zeros(D)
    for i in range(idx.shape[0]):
        b[idx[i]] += p[i] * val[i]
    return b


def np_fab(idx, val, b, k, fill="client"):
    """FAB-Select by a linear scan over kappa (spec S.1-S.8); returns (J as a set, kappa)."""
    N = idx.shape[0]

    def U(kappa):
        return set(idx[:, :kappa].ravel().tolist())

    kappa = max(q for q in range(k // N, k + 1) if len(U(q)) <= k)
    J = U(kappa)
    if len(J) < k:
        cand = [(int(idx[i, kappa]), float(val[i, kappa])) for i in range(N)]
        if fill == "aggregate":
            cand = [(j, b[j]) for j, _ in cand]
        for j, _ in sorted(cand, key=lambda c: (-abs(c[1]), c[0])):
            if len(J) == k:
                break
            J.add(j)
    return J, kappa


def np_rank_sweep(idx, val, k):
    """The authors' rank sweep: at rank r = 1, 2, ... add every client's r-th offer in
    descending |a_ij| (lower index first), skipping indices in J, until |J| = k."""
    J: list[int] = []
    for r in range(idx.shape[1]):
        for j, _ in sorted(
            zip(idx[:, r], val[:, r], strict=True), key=lambda c: (-abs(c[1]), c[0])
        ):
            if len(J) < k and int(j) not in J:
                J.append(int(j))
    return set(J)


def np_fub(idx, b, k):
    union = np.unique(idx)
    order = np.lexsort((union, -np.abs(b[union])))
    return set(union[order[:k]].tolist())


def kernel_offers(A, k):
    idx = np.zeros((A.shape[0], k), np.int64)
    val = np.zeros((A.shape[0], k))
    for i, a in enumerate(A):
        sel, counts = GS.topk_scratch(a.size)
        GS.top_k(np.ascontiguousarray(a), k, sel, counts, idx[i])
        val[i] = a[idx[i]]
    return idx, val


def kernel_fab(idx, val, p, D, k, fill="client"):
    agg, in_J, J = np.zeros(D), np.zeros(D, bool), np.zeros(k, np.int64)
    GS.aggregate_offers(idx, val, p, agg)
    kappa = GS.fab_select(idx, val, agg, k, fill == "aggregate", in_J, J)
    assert set(np.flatnonzero(in_J)) == set(J.tolist())
    return J, kappa, agg


# ---- selection kernels -------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(6))
def test_top_k_equals_numpy_with_ties(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 300))
    a = rng.integers(-4, 5, n).astype(float) * (1.0 if seed % 2 else rng.random(n))
    a[rng.random(n) < 0.2] = -0.0
    for k in {1, n // 3 + 1, n}:
        out = np.zeros(k, np.int64)
        sel, counts = GS.topk_scratch(n)
        GS.top_k(a.copy(), k, sel, counts, out)
        np.testing.assert_array_equal(out, np_topk(a, k))


@pytest.mark.parametrize("spread", [0.0, 1.0, 40.0])
def test_top_k_of_a_long_residual_equals_numpy(spread):
    """A client's residual (about 80,000 entries): magnitudes over many binades or few, a run
    of zeros and of ties; k from one to past the bins of the first pass."""
    rng = np.random.default_rng(int(spread))
    n = 79_510
    a = rng.standard_normal(n) * np.exp(spread * rng.standard_normal(n))
    a[rng.random(n) < 0.3] = 0.0
    a[rng.random(n) < 0.01] = 2.5
    sel, counts = GS.topk_scratch(n)
    for k in (1, 179, 5_000, 60_000, n):
        out = np.zeros(k, np.int64)
        GS.top_k(a.copy(), k, sel, counts, out)
        np.testing.assert_array_equal(out, np_topk(a, k))


def test_top_k_rejects_bad_k():
    sel, counts = GS.topk_scratch(3)
    with pytest.raises(ValueError):
        GS.top_k(np.ones(3), 4, sel, counts, np.zeros(4, np.int64))


def test_worked_example_both_fill_readings_and_fub():
    """Spec section 9.3: N = 3, D = 8, k = 4, uniform weights."""
    A = np.array(
        [
            [9, 5, 1, 0.5, 0, 0, 0, 0],
            [0, 0, 0, 6, 8, 2, 1.5, 0],
            [0, 4, 2.5, 0, 0, 0, 3, 7],
        ]
    )
    p = np.full(3, 1 / 3)
    idx, val = kernel_offers(A, 4)
    np.testing.assert_array_equal(idx, [[0, 1, 2, 3], [4, 3, 5, 6], [7, 1, 6, 2]])
    J, kappa, agg = kernel_fab(idx, val, p, 8, 4)
    assert kappa == 1 and set(J.tolist()) == {0, 3, 4, 7}
    np.testing.assert_allclose(agg[[0, 3, 4, 7]], [9 / 3, 6.5 / 3, 8 / 3, 7 / 3], rtol=1e-15)
    in_J = np.zeros(8, bool)
    in_J[J] = True
    res = A.copy()
    GS.reset_sent(res, idx, in_J, False)
    assert set(np.flatnonzero(A[0] != res[0])) == {0, 3}
    assert set(np.flatnonzero(A[1] != res[1])) == {3, 4}
    assert set(np.flatnonzero(A[2] != res[2])) == {7}
    shared = np.zeros(3, np.int64)
    GS.count_shared(idx, in_J, shared)
    np.testing.assert_array_equal(shared, [2, 2, 1])
    J, kappa, _ = kernel_fab(idx, val, p, 8, 4, "aggregate")
    assert kappa == 1 and set(J.tolist()) == {0, 1, 4, 7}
    Jf, in_J = np.zeros(4, np.int64), np.zeros(8, bool)
    GS.fub_select(idx, agg, 4, in_J, Jf)
    assert set(Jf.tolist()) == {0, 1, 4, 7}
    GS.count_shared(idx, in_J, shared)
    np.testing.assert_array_equal(shared, [2, 1, 2])


def test_fub_can_starve_a_client_fab_cannot():
    """Spec section 9.2: a_1 = [10, 9, 0, ...], a_2 = [0, 0, 1, 0.5, 0, 0], k = 2."""
    A = np.array([[10, 9, 0, 0, 0, 0], [0, 0, 1, 0.5, 0, 0]], float)
    p = np.full(2, 0.5)
    idx, val = kernel_offers(A, 2)
    J, kappa, agg = kernel_fab(idx, val, p, 6, 2)
    assert kappa == 1 and set(J.tolist()) == {0, 2}
    Jf, in_J = np.zeros(2, np.int64), np.zeros(6, bool)
    GS.fub_select(idx, agg, 2, in_J, Jf)
    assert set(Jf.tolist()) == {0, 1}
    shared = np.zeros(2, np.int64)
    GS.count_shared(idx, in_J, shared)
    np.testing.assert_array_equal(shared, [2, 0])
    # the same through the algorithms: one full-batch round from residuals set to a_i
    for name, want in [("fubtopk", (0, 1)), ("fabtopk", (1, 0))]:
        pb = Problem(make_data("least_squares", sizes=(3, 3), d=6), "least_squares", 0.0)
        cls = ALGORITHMS[name]
        algo = cls(pb, cls.validate_params(params_for(name, 2, stepsize=1e-300)), 0)
        algo.setup()
        algo.A[:] = A * 1e300  # gradients at w = 0 are negligible beside these
        algo.round(0)
        row = algo.extra_metrics()
        assert (row["min_shared"], row["idle_clients"]) == want


@settings(max_examples=150, deadline=None)
@given(
    N=st.integers(1, 6),
    D=st.integers(1, 40),
    frac=st.floats(0.0, 1.0),
    seed=st.integers(0, 2**31),
    levels=st.sampled_from([3, 1000]),
    fill=st.sampled_from(["client", "aggregate"]),
)
def test_fab_select_properties_on_random_inputs(N, D, frac, seed, levels, fill):
    """|J| = k exactly, J inside the union, every top-kappa inside J, kappa maximal and at
    least k // N (the fairness floor), the same J as the oracle and (fill a) the rank sweep."""
    rng = np.random.default_rng(seed)
    k = max(1, int(round(frac * D)))
    A = rng.integers(-levels, levels + 1, (N, D)).astype(float)  # levels = 3: many ties
    p = rng.random(N)
    p /= p.sum()
    idx, val = kernel_offers(A, k)
    np.testing.assert_array_equal(idx, np_offers(A, k)[0])
    J, kappa, agg = kernel_fab(idx, val, p, D, k, fill)
    Jset = set(J.tolist())
    assert len(J) == k == len(Jset)
    assert Jset <= set(idx.ravel().tolist())
    assert set(idx[:, :kappa].ravel().tolist()) <= Jset
    assert kappa >= k // N
    assert len(set(idx[:, :kappa].ravel().tolist())) <= k
    assert kappa == k or len(set(idx[:, : kappa + 1].ravel().tolist())) > k
    for i in range(N):
        assert len(Jset & set(idx[i].tolist())) >= k // N
    b = np_aggregate(idx, val, p, D)
    np.testing.assert_allclose(agg[list(Jset)], b[list(Jset)], rtol=1e-14, atol=1e-300)
    assert (Jset, kappa) == np_fab(idx, val, b, k, fill)
    if fill == "client":
        assert Jset == np_rank_sweep(idx, val, k)
    Jf, in_J = np.zeros(k, np.int64), np.zeros(D, bool)
    GS.fub_select(idx, agg, k, in_J, Jf)
    assert set(Jf.tolist()) == np_fub(idx, agg, k) and len(set(Jf.tolist())) == k


def test_periodic_indices_cover_every_coordinate_once_per_cycle():
    gen = PeriodicIndices(7, 10)
    seen = [gen.next(3) for _ in range(3)]
    assert all(len(set(J.tolist())) == 3 for J in seen)
    first = np.concatenate(seen)
    assert len(set(first.tolist())) == 9  # no coordinate twice within a cycle
    (left,) = set(range(10)) - set(first.tolist())
    last = gen.next(3)  # one coordinate left: it, plus two others
    assert len(set(last.tolist())) == 3 and last[0] == left
    nxt = np.concatenate([gen.next(3) for _ in range(3)])  # a new cycle
    assert len(set(nxt.tolist())) == 9
    again = PeriodicIndices(7, 10)
    np.testing.assert_array_equal(again.next(3), seen[0])


# ---- traces against a transcription of the pseudo-code -------------------------------------


def oracle_gs(name, grad, w0, p, *, k, stepsize, rounds, fill="client", seed=0):
    """Full-batch Algorithm 1 (and the section 4.1 baselines): the models w(0..rounds), the
    residuals after each round and the values (up, down) one client sends each round."""
    N, D = len(p), w0.size
    w, A = w0.copy(), np.zeros((N, D))
    periodic = PeriodicIndices(seed, D) if name == "periodick" else None
    models, residuals, values = [w.copy()], [], []
    for _ in range(rounds):
        A = A + np.array([grad(i, w) for i in range(N)])
        if name == "sendall":
            w = w - stepsize * (p @ A)
            A[:] = 0.0
            values.append((D, D))
        elif name == "periodick":
            J = periodic.next(k)
            w[J] -= stepsize * (p @ A[:, J])
            A[:, J] = 0.0
            values.append((k, k))
        else:
            idx, val = np_offers(A, k)
            b = np_aggregate(idx, val, p, D)
            if name == "utopk":
                J = np.unique(idx)
                values.append((2 * k, 2 * J.size))
                for i in range(N):
                    A[i, idx[i]] = 0.0
            else:
                J = np.array(
                    sorted(
                        np_fab(idx, val, b, k, fill)[0] if name == "fabtopk" else np_fub(idx, b, k)
                    )
                )
                values.append((2 * k, 2 * k))
                for i in range(N):
                    both = np.intersect1d(J, idx[i])
                    A[i, both] = 0.0
            w[J] -= stepsize * b[J]
        models.append(w.copy())
        residuals.append(A.copy())
    return models, residuals, values


@pytest.mark.parametrize("name", GS_NAMES)
@pytest.mark.parametrize("weights", ["uniform", "samples"])
@pytest.mark.parametrize(
    "case", [("softmax", False, 9), ("logistic", True, 4), ("softmax", False, 1)]
)
def test_linear_full_batch_traces_equal_pseudo_code(name, weights, case):
    loss, sparse, k = case
    data = make_data(loss, sparse=sparse)
    pb = Problem(data, loss, 1e-2, weights)
    blocks = blocks_of(data)
    shape = pb.shape

    def grad(i, w):
        X, y = blocks[i]
        return np_grad(X, y, w.reshape(shape), loss, 1e-2).ravel()

    for fill in ["client", "aggregate"] if name == "fabtopk" else ["client"]:
        models, residuals, costs, _ = drive(pb, name, params_for(name, k, fill=fill), 6)
        w_o, a_o, v_o = oracle_gs(
            name, grad, np.zeros(pb.shape).ravel(), pb.p, k=k, stepsize=0.3, rounds=6, fill=fill
        )
        for m in range(7):
            np.testing.assert_allclose(models[m].ravel(), w_o[m], rtol=RTOL, atol=1e-12)
        for m in range(6):
            np.testing.assert_allclose(residuals[m], a_o[m], rtol=RTOL, atol=1e-12)
            assert (costs[m].values_up, costs[m].values_down) == v_o[m]
            assert costs[m].local_iterations == 1
        objective = [
            sum(
                pi * np_loss(X, y, w.reshape(shape), loss, 1e-2)
                for pi, (X, y) in zip(pb.p, blocks, strict=True)
            )
            for w in w_o
        ]
        np.testing.assert_allclose([pb.objective(W) for W in models], objective, rtol=RTOL)


MLP = {"kind": "mlp", "hidden": [5], "activation": "tanh", "init": {"kind": "glorot", "seed": 2}}


@pytest.mark.parametrize("name", GS_NAMES)
def test_mlp_full_batch_traces_equal_pseudo_code(name):
    data = make_data("softmax")
    pb = Problem(data, "softmax", 1e-3, "samples", MLP)
    blocks = blocks_of(data)
    D = pb.n_params
    assert pb.shape == (1, D)

    def grad(i, w):
        X, y = blocks[i]
        return np_loss_grad(pb.network, w, X, y, "softmax", 1e-3)[1]

    models, residuals, costs, _ = drive(pb, name, params_for(name, 17, stepsize=0.2), 5)
    w_o, a_o, v_o = oracle_gs(
        name, grad, pb.initial_model().ravel(), pb.p, k=17, stepsize=0.2, rounds=5
    )
    for m in range(6):
        np.testing.assert_allclose(models[m].ravel(), w_o[m], rtol=RTOL, atol=1e-12)
    for m in range(5):
        np.testing.assert_allclose(residuals[m], a_o[m], rtol=RTOL, atol=1e-12)
        assert (costs[m].values_up, costs[m].values_down) == v_o[m]


@pytest.mark.parametrize("name", ["fabtopk", "fubtopk", "utopk", "periodick", "sendall"])
def test_error_feedback_loses_nothing(name):
    """w(m) - eta sum_i p_i a_i(m) = w(0) - eta sum_{r<=m} sum_i p_i g_i(r) (minibatches)."""
    data = make_data("softmax", sizes=(30, 41, 25))
    pb = Problem(data, "softmax", 1e-2, "samples")
    cls = ALGORITHMS[name]
    prm = params_for(name, 5, stepsize=0.2)
    prm["batch_size"] = 4
    algo = cls(pb, cls.validate_params(prm), 3)
    algo.setup()
    eta, total = 0.2, np.zeros(algo.n_params)
    for t in range(8):
        before = algo.residuals.copy()
        w_prev = algo.model.ravel().copy()
        algo.round(t)
        applied = (w_prev - algo.model.ravel()) / eta
        # what the clients added: (residual after + applied share) - residual before
        total += pb.p @ algo.residuals + applied - pb.p @ before
        lhs = algo.model.ravel() - eta * (pb.p @ algo.residuals)
        np.testing.assert_allclose(lhs, -eta * total, atol=1e-12)
    # the accounting is not vacuous: the added gradients are the clients' minibatch gradients
    assert np.linalg.norm(total) > 0


def test_conservation_with_gradients_from_numpy():
    """The same identity with the full-batch gradients computed by NumPy."""
    data = make_data("softmax")
    pb = Problem(data, "softmax", 1e-2, "uniform")
    blocks = blocks_of(data)
    for name in ["fabtopk", "fubtopk", "utopk", "periodick"]:
        models, residuals, _, _ = drive(pb, name, params_for(name, 6), 5)
        g_sum = np.zeros(pb.n_params)
        for m in range(5):
            W = models[m]
            g_sum += sum(
                pi * np_grad(X, y, W, "softmax", 1e-2).ravel()
                for pi, (X, y) in zip(pb.p, blocks, strict=True)
            )
            lhs = models[m + 1].ravel() - 0.3 * (pb.p @ residuals[m])
            np.testing.assert_allclose(lhs, -0.3 * g_sum, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("name", ["fabtopk", "fubtopk", "utopk"])
def test_k_equal_d_is_send_all(name):
    data = make_data("softmax")
    pb = Problem(data, "softmax", 1e-2, "samples")
    D = pb.n_params
    mk, rk, ck, _ = drive(pb, name, params_for(name, D), 4)
    ms, _, cs, _ = drive(pb, "sendall", params_for("sendall", D), 4)
    for a, b in zip(mk, ms, strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-14)
    assert all(not r.any() for r in rk)
    assert ck[0].values_up == 2 * D and cs[0].values_up == D  # FAB still sends the indices


def test_sendall_is_synchronous_sgd():
    data = make_data("least_squares")
    pb = Problem(data, "least_squares", 0.0, "samples")
    blocks = blocks_of(data)
    models, _, costs, _ = drive(pb, "sendall", params_for("sendall", 0, stepsize=0.01), 3)
    W = np.zeros(pb.shape)
    for m in range(3):
        W = W - 0.01 * sum(
            pi * np_grad(X, y, W, "least_squares", 0.0)
            for pi, (X, y) in zip(pb.p, blocks, strict=True)
        )
        np.testing.assert_allclose(models[m + 1], W, rtol=RTOL)
    D, N = pb.n_params, pb.n_clients
    assert (costs[0].bytes_up, costs[0].bytes_down) == (8 * D * N, 8 * D * N)


def test_message_counts_and_fairness_view():
    data = make_data("softmax", sizes=(10, 17, 25, 13))
    pb = Problem(data, "softmax", 1e-2, "uniform")
    N, k = pb.n_clients, 9
    for name in ["fabtopk", "fubtopk", "utopk", "periodick"]:
        _, _, costs, algo = drive(pb, name, params_for(name, k), 3)
        c = costs[-1]
        if name == "periodick":
            assert (c.values_up, c.values_down, c.bytes_up) == (k, k, N * 8 * k)
        elif name == "utopk":
            union = np.unique(algo.idx)
            assert (c.values_up, c.values_down) == (2 * k, 2 * union.size)
            assert c.bytes_down == N * 12 * union.size
        else:
            assert (c.values_up, c.values_down, c.bytes_up, c.bytes_down) == (
                2 * k,
                2 * k,
                N * 12 * k,
                N * 12 * k,
            )
        if name == "fabtopk":
            assert algo.shared.min() >= k // N


# ---- runs: trace columns, time model, configs ---------------------------------------------


@pytest.mark.parametrize("name", GS_NAMES)
def test_trace_time_and_k_used_columns(name):
    timing = {"step_time": 2.0, "round_latency": 0.5, "exchange_time": 10.0}
    df = to_frame(run_trace(normalize_run_config(run_cfg(name, time_model=timing))))
    D = 12
    assert df["k_used"].isna().iloc[0] and df["time"].iloc[0] == 0.0
    k = D if name == "sendall" else 5
    assert (df["k_used"].iloc[1:] == k).all()
    values = {"fabtopk": 4 * k, "fubtopk": 4 * k, "periodick": 2 * k, "sendall": 2 * D}
    if name in values:
        per_round = 2.0 + 0.5 + 10.0 * values[name] / (2 * D)
        np.testing.assert_allclose(df["time"], per_round * np.arange(5), rtol=1e-12)
    else:  # utopk: k up, the union down, which varies
        steps = np.diff(df["time"].to_numpy())
        assert (steps >= 2.5 + 10.0 * (2 * k + 2 * k) / (2 * D) - 1e-12).all()
    if name == "fabtopk":
        assert df["fill"].iloc[0] == "client"
    assert df[["min_shared", "idle_clients"]].iloc[0].isna().all()
    fair = df.iloc[1:]
    if name == "fabtopk":  # every client has at least k // N elements applied
        assert (fair["min_shared"] >= 5 // 4).all() and (fair["idle_clients"] == 0).all()
    elif name in ("utopk", "periodick", "sendall"):  # everything offered is applied
        assert (fair["min_shared"] == k).all() and (fair["idle_clients"] == 0).all()
    else:
        assert ((fair["min_shared"] >= 0) & (fair["min_shared"] <= k)).all()
    if name == "sendall":
        assert df["k"].isna().all()
    else:
        assert (df["k"] == 5).all()


def test_time_column_of_hard_thresholding_counts_indices():
    cfg = run_cfg(
        "fedht",
        params={"stepsize": 0.1, "sparsity": 3, "local_steps": 4, "batch_size": "full"},
        time_model={"exchange_time": 1.0, "step_time": 0.25},
    )
    df = to_frame(run_trace(normalize_run_config(cfg)))
    nnz = df["nnz"].to_numpy()
    # round r: 4 local steps, D dense values up, 2 nnz(x_{r-1}) down (value + index)
    expected = np.concatenate([[0.0], np.cumsum(4 * 0.25 + (12 + 2 * nnz[:-1]) / 24)])
    np.testing.assert_allclose(df["time"], expected, rtol=1e-12)


def test_time_model_default_stays_out_of_the_run_config():
    plain = normalize_run_config(run_cfg("fabtopk"))
    assert "time_model" not in plain
    same = normalize_run_config(run_cfg("fabtopk", time_model={"step_time": 1}))
    assert same == plain
    other = normalize_run_config(run_cfg("fabtopk", time_model={"exchange_time": 10}))
    assert other["time_model"] == {"step_time": 1.0, "round_latency": 0.0, "exchange_time": 10.0}
    df = to_frame(run_trace(plain))
    np.testing.assert_allclose(df["time"], np.arange(5.0))  # one step per round


@pytest.mark.parametrize(
    ("name", "params", "message"),
    [
        ("fabtopk", {"stepsize": 0.1, "k": 0}, "params.k: must be >= 1"),
        ("fabtopk", {"stepsize": 0.1}, "params.k: required by fabtopk"),
        ("utopk", {"stepsize": 0.1, "k": 2, "fill": "client"}, "params.fill: unknown"),
        ("fabtopk", {"stepsize": 0.1, "k": 2, "fill": "best"}, "params.fill: must be one of"),
        ("sendall", {"stepsize": 0.1, "k": 2}, "params.k: unknown hyperparameter for sendall"),
        ("periodick", {"stepsize": 0, "k": 2}, "params.stepsize: must be > 0"),
        ("fubtopk", {"stepsize": 0.1, "k": 2.5}, "params.k: must be an integer"),
    ],
)
def test_bad_hyperparameters_are_one_line(name, params, message):
    with pytest.raises(ConfigError) as err:
        normalize_run_config(run_cfg(name, params=params))
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_k_above_the_parameter_count_is_one_line():
    cfg = normalize_run_config(run_cfg("fabtopk", params={"stepsize": 0.1, "k": 13}))
    with pytest.raises(ConfigError) as err:
        run_trace(cfg)
    msg = str(err.value)
    assert msg.startswith("params.k: 13 is larger than the number of model parameters D = 12")
    assert "\n" not in msg


@pytest.mark.parametrize(
    ("timing", "message"),
    [
        ({"exchange": 1}, "time_model.exchange: unknown key"),
        ({"exchange_time": -1}, "time_model.exchange_time: must be >= 0"),
        ({"step_time": "x"}, "time_model.step_time: must be a finite number"),
        ([1, 2], "time_model: must be a mapping"),
    ],
)
def test_bad_time_model_is_one_line(timing, message):
    with pytest.raises(ConfigError) as err:
        normalize_run_config(run_cfg("sendall", time_model=timing))
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_minibatch_runs_are_deterministic_per_seed():
    a = to_frame(
        run_trace(
            normalize_run_config(
                run_cfg("fabtopk", params={"stepsize": 0.1, "k": 3, "batch_size": 5})
            )
        )
    )
    b = to_frame(
        run_trace(
            normalize_run_config(
                run_cfg("fabtopk", params={"stepsize": 0.1, "k": 3, "batch_size": 5})
            )
        )
    )
    c = to_frame(
        run_trace(
            normalize_run_config(
                run_cfg("fabtopk", seed=1, params={"stepsize": 0.1, "k": 3, "batch_size": 5})
            )
        )
    )
    np.testing.assert_array_equal(a["objective"], b["objective"])
    assert not np.array_equal(a["objective"], c["objective"])


def sweep_of(**over):
    sweep = {
        "datasets": {"s": {"data": run_cfg("sendall")["dataset"], "model": {"loss": "logistic"}}},
        "algorithms": ["fabtopk", "sendall"],
        "grid": {"stepsize": [0.1], "k": [3]},
        "rounds": 2,
    }
    sweep.update(over)
    return sweep


def test_sweep_sets_the_time_model_once_and_sweeps_exchange_time():
    from fedsparse.sweep import plan_sweep

    plain = plan_sweep(sweep_of()).runs
    assert len(plain) == 2 and all("time_model" not in r.config for r in plain)
    runs = plan_sweep(
        sweep_of(time_model={"round_latency": 2, "exchange_time": [0.1, 1, 10, 100]})
    ).runs
    assert len(runs) == 8 and len({r.run_id for r in runs}) == 8
    assert sorted({r.config["time_model"]["exchange_time"] for r in runs}) == [0.1, 1, 10, 100]
    assert {r.config["time_model"]["round_latency"] for r in runs} == {2.0}
    df = to_frame(run_trace(runs[-1].config))
    assert df["exchange_time"].iloc[0] == runs[-1].config["time_model"]["exchange_time"]
    with pytest.raises(ConfigError, match=r"^time_model.exchange_time: must be >= 0"):
        plan_sweep(sweep_of(time_model={"exchange_time": [1, -2]}))
    with pytest.raises(ConfigError, match=r"^time_model.beta: unknown key"):
        plan_sweep(sweep_of(time_model={"beta": 1}))


# ---- online choice of k (Algorithms 2 and 3) ----------------------------------------------


def run_controller(ctrl, sign_of, rounds):
    ks = []
    for m in range(1, rounds + 1):
        ctrl.update(m, sign_of(ctrl.k))
        assert ctrl.k_min0 <= ctrl.lo <= ctrl.k <= ctrl.hi <= ctrl.k_max0
        ks.append(ctrl.k)
    return np.array(ks)


def synthetic_cost(D, beta, p=0.5, rho0=0.5):
    """Spec section 9.2: time per unit log-loss decrease theta(k) / -ln(1 - rho(k))."""

    def cost(k):
        return (1 + 2 * beta * k / D) / -np.log1p(-rho0 * (k / D) ** p)

    return cost


@pytest.mark.parametrize("extended", [False, True])
def test_algorithm_2_and_3_with_the_exact_sign_find_the_minimiser(extended):
    D, beta = 10_000, 10.0
    cost = synthetic_cost(D, beta)
    grid = np.arange(20, D + 1)
    k_star = grid[np.argmin(cost(grid))]
    assert abs(k_star - 500) < 0.2 * 500  # ~ p D / (2 beta (1 - p)) in the small-rho limit

    def sign_of(k):
        return int(np.sign(cost(k + 1e-3) - cost(k - 1e-3)))

    ctrl = GSCtrl.OnlineK(5000, 20, D, extended=extended, window=20, expand=1.5)
    ks = run_controller(ctrl, sign_of, 4000)
    assert abs(ks[-200:].mean() - k_star) < 0.05 * k_star
    assert np.abs(ks[-200:] - k_star).max() <= 2 * ctrl.delta(4000) + 1
    if extended:
        assert ctrl.B < (np.sqrt(2) - 1) * (D - 20) and ctrl.lo <= k_star <= ctrl.hi
    # a convex cost with a known minimiser: c(k) = (k - 1234)^2
    ctrl = GSCtrl.OnlineK(20, 20, D, extended=extended)
    ks = run_controller(ctrl, lambda k: int(np.sign(k - 1234)), 3000)
    assert abs(ks[-100:].mean() - 1234) < 0.01 * 1234


def test_boundary_minimiser_and_beta_monotonicity():
    D = 10_000
    late = []
    for beta in [0.1, 1, 10, 100]:
        cost = synthetic_cost(D, beta)
        ctrl = GSCtrl.OnlineK(1000, 20, D, extended=True)
        ks = run_controller(ctrl, lambda k, c=cost: int(np.sign(c(k + 1e-3) - c(k - 1e-3))), 3000)
        late.append(ks[-500:].mean())
    assert late[0] > 0.95 * D  # beta = 0.1: the minimiser lies beyond k_max
    assert all(a >= b for a, b in zip(late, late[1:], strict=False))


def test_unavailable_sign_keeps_k_and_never_restarts():
    ctrl = GSCtrl.OnlineK(300, 10, 1000, extended=True, window=5)
    ks = run_controller(ctrl, lambda k: None, 200)
    assert (ks == 300).all() and ctrl.B == 990 and ctrl.m0 == 0


def test_restart_rule_needs_a_narrow_window_and_a_long_enough_instance():
    ctrl = GSCtrl.OnlineK(500, 10, 1000, extended=True, window=4, expand=1.0)
    signs = iter([1, -1, 1, -1] * 3)
    for m in range(1, 5):
        ctrl.update(m, next(signs))
    # window of 4 over [k range]: delta_m = 990 / sqrt(2m) swings k widely, no restart
    assert ctrl.B == 990
    ctrl = GSCtrl.OnlineK(500, 10, 1000, extended=True, window=2, expand=1.0)
    ctrl.update(1, 0)
    ctrl.update(2, 0)  # k stays 500: window [500, 500], B' = 0 < 0.414 B and M'' = 2 >= 0
    assert (ctrl.lo, ctrl.hi, ctrl.B, ctrl.m0, ctrl.M_prev) == (500, 500, 0, 2, 2)
    assert ctrl.delta(3) == 0.0


def online_oracle(pb, blocks, name, trace, *, stepsize, l2, loss):
    """Full-batch round m with the recorded k_m, k'_m and rows h: w(m), w'(m) and the sign."""
    N, D = pb.n_clients, pb.n_params
    shape = pb.shape
    w, A = np.zeros(D), np.zeros((N, D))
    out = []
    for k, k_aux, rows in trace:
        A = A + np.array([np_grad(X, y, w.reshape(shape), loss, l2).ravel() for X, y in blocks])
        idx, val = np_offers(A, k)
        b = np_aggregate(idx, val, pb.p, D)
        ia, va = idx[:, :k_aux], val[:, :k_aux]
        ba = np_aggregate(ia, va, pb.p, D)
        if name == "fabtopk":
            J, Ja = np_fab(idx, val, b, k)[0], np_fab(ia, va, ba, k_aux)[0]
        elif name == "fubtopk":
            J, Ja = np_fub(idx, b, k), np_fub(ia, ba, k_aux)
        else:
            J, Ja = set(np.unique(idx).tolist()), set(np.unique(ia).tolist())
        J, Ja = np.array(sorted(J)), np.array(sorted(Ja))
        w_aux = w.copy()
        w_aux[Ja] -= stepsize * ba[Ja]
        w_prev = w.copy()
        w[J] -= stepsize * b[J]
        for i in range(N):
            A[i, idx[i] if name == "utopk" else np.intersect1d(J, idx[i])] = 0.0
        X, y = pb.data.X, pb.data.y

        def f(v, X=X, y=y, rows=rows):
            return sum(
                pi * np_loss(X[[h]], y[[h]], v.reshape(shape), loss, l2)
                for pi, h in zip(pb.p, rows, strict=True)
            )

        prev, cur, aux = f(w_prev), f(w), f(w_aux)
        up, down = 2 * k, 2 * (len(J) if name == "utopk" else k)
        up_a, down_a = 2 * k_aux, 2 * (len(Ja) if name == "utopk" else k_aux)
        theta = 1 + 10.0 * (up + down) / (2 * D)
        theta_a = 1 + 10.0 * (up_a + down_a) / (2 * D)
        sign = slope = None
        if prev > cur and prev > aux:
            tau_hat = theta_a * (prev - cur) / (prev - aux)
            sign, slope = int(np.sign(theta - tau_hat)), (theta - tau_hat) / (k - k_aux)
        out.append((w.copy(), w_aux, sign, slope))
    return out


@pytest.mark.parametrize("name", ["fabtopk", "fubtopk", "utopk"])
def test_online_rounds_equal_pseudo_code(name):
    """w(m), w'(m) and the estimated sign of each round against NumPy, given the round's
    k_m, k'_m and sampled rows (full batch: the rows are any of the client's)."""
    data = make_data("softmax", sizes=(10, 17, 25, 13), d=8)
    pb = Problem(data, "softmax", 1e-2, "samples")
    cls = ALGORITHMS[name]
    prm = {**params_for(name, 6), "k_control": "online", "k_min": 2, "k_max": 20}
    algo = cls(pb, cls.validate_params(prm), 1)
    assert pb.n_params == 24
    algo.check_problem()
    algo.time_model = {"step_time": 1.0, "round_latency": 0.0, "exchange_time": 10.0}
    algo.setup()
    recorded, got, signs = [], [], []
    for t in range(12):
        algo.round(t)
        assert 2 <= algo.k_used <= 20 and 1 <= algo.k_aux < algo.k_used
        recorded.append((algo.k_used, algo.k_aux, algo.samples.copy()))
        got.append((algo.model.ravel().copy(), algo.w_aux.copy(), algo.sign))
        signs.append(algo.sign)
    assert {-1, 1} & set(signs) and len(set(r[0] for r in recorded)) > 1  # k moved
    expected = online_oracle(
        pb, blocks_of(data), name, recorded, stepsize=0.3, l2=1e-2, loss="softmax"
    )
    for (w, wa, s), (w_o, wa_o, s_o, _) in zip(got, expected, strict=True):
        np.testing.assert_allclose(w, w_o, rtol=RTOL, atol=1e-12)
        np.testing.assert_allclose(wa, wa_o, rtol=RTOL, atol=1e-12)
        assert s == s_o


@pytest.mark.parametrize("control", ["online", "online_extended"])
def test_online_trace_replays_the_controller(control):
    """k_used and k_aux of a run follow Algorithm 2/3 fed with the trace's signs, with the
    controller's own stream (stochastic rounding of k and k', then one row per client)."""
    prm = {"stepsize": 0.1, "k": 6, "k_control": control, "batch_size": 8}
    if control == "online_extended":
        prm["window"] = 3
    cfg = run_cfg("fabtopk", params=prm, rounds=25, time_model={"exchange_time": 10})
    df = to_frame(run_trace(normalize_run_config(cfg)))
    assert df[["k_used", "k_aux", "sign"]].iloc[0].isna().all()
    ctrl = GSCtrl.OnlineK(6, 2, 12, extended=control == "online_extended", window=3)
    rng = np.random.default_rng(np.random.SeedSequence([0, 5]))
    for m in range(1, 26):
        k = GSCtrl.stochastic_round(ctrl.k, rng)
        k_aux = max(1, min(GSCtrl.stochastic_round(ctrl.k - ctrl.delta(m) / 2, rng), k - 1))
        rng.random(4)  # the rows of the sign estimate
        row = df.iloc[m]
        assert (row["k_used"], row["k_aux"]) == (k, k_aux)
        ctrl.update(m, None if pd.isna(row["sign"]) else int(row["sign"]))
    assert df["sign"].notna().sum() > 5 and df["k_used"].nunique() > 1


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"k": 5, "k_min": 3}, "params.k_min: only with k_control online or online_extended or"),
        (
            {"k": 5, "k_control": "online", "window": 3},
            "params.window: only with k_control online_",
        ),
        (
            {"k": 5, "k_control": "exp3", "k_sequence": "x"},
            "params.k_sequence: only with k_control",
        ),
        ({"k": 5, "k_control": "sequence"}, "params.k_sequence: required by k_control sequence"),
        (
            {"k": 5, "k_control": "sequence", "k_sequence": 5},
            "params.k_sequence: must be a string, got 5",
        ),
        (
            {"k": 5, "k_control": "sequence", "k_sequence": "/nonexistent/x.parquet"},
            "params.k_sequence: no trace file or results folder at /nonexistent/x.parquet",
        ),
        ({"k": 5, "k_control": "online", "k_min": 9, "k_max": 8}, "params.k_min: 9 is above"),
        ({"k": 5, "k_control": "online", "k_min": 6}, "params.k: the initial k 5 is outside"),
        ({"k": 5, "k_control": "bandits"}, "params.k_control: must be one of"),
        ({"k": 5, "k_control": "online_extended", "expand": 0.5}, "params.expand: must be >= 1"),
        ({"k": 5, "k_control": "exp3", "k_min": 6}, "params.k: the initial k 5 is outside"),
    ],
)
def test_bad_k_ranges_are_one_line(params, message):
    with pytest.raises(ConfigError) as err:
        normalize_run_config(run_cfg("fabtopk", params={"stepsize": 0.1, **params}))
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_k_max_above_d_is_one_line_and_fixed_k_keeps_its_run_config():
    cfg = normalize_run_config(
        run_cfg("utopk", params={"stepsize": 0.1, "k": 5, "k_control": "online", "k_max": 13})
    )
    with pytest.raises(ConfigError, match=r"^params.k_max: 13 is larger than .* D = 12"):
        run_trace(cfg)
    fixed = normalize_run_config(
        run_cfg("utopk", params={"stepsize": 0.1, "k": 5, "k_control": "fixed"})
    )
    assert fixed["params"] == {"stepsize": 0.1, "batch_size": 32, "k": 5}


# ---- the section 4.2 baselines: value-based OGD, EXP3, continuous bandit -------------------


def feedback(prev, cur, aux, theta=2.0, theta_aux=1.5, k=10, k_aux=8):
    return GSCtrl.Feedback(prev, cur, aux, theta, theta_aux, k, k_aux)


def test_feedback_guards_and_estimates():
    fb = feedback(1.0, 0.8, 0.9)  # tau_hat = 1.5 * 0.2 / 0.1 = 3 > theta = 2: k' is slower
    assert fb.tau_hat() == pytest.approx(3.0) and fb.sign() == -1
    assert fb.slope() == pytest.approx((2.0 - 3.0) / 2) and fb.cost() == pytest.approx(10.0)
    for bad in (feedback(1.0, 1.1, 0.9), feedback(1.0, 0.9, 1.0)):
        assert bad.sign() is None and bad.slope() is None
    assert feedback(1.0, 1.0, 0.9).cost() is None and feedback(
        1.0, 0.9, 1.2
    ).cost() == pytest.approx(20.0)


def test_value_ogd_moves_k_against_the_estimated_derivative():
    ctrl = GSCtrl.ValueOGD(500, 10, 1000)
    ctrl.learn(1, feedback(1.0, 0.8, 0.9, theta=2.2, theta_aux=1.0))  # slope (2.2 - 2) / 2 > 0
    assert ctrl.k == pytest.approx(500 - 990 / np.sqrt(2) * 0.1)
    k = ctrl.k
    ctrl.learn(2, feedback(1.0, 0.8, 0.9, theta=1.0, theta_aux=1.0))  # slope (1 - 2) / 2 < 0
    assert ctrl.k == pytest.approx(k + 990 / 2 * 0.5)
    for unavailable in (None, feedback(1.0, 1.2, 0.9)):
        k = ctrl.k
        ctrl.learn(3, unavailable)
        assert ctrl.k == k
    ctrl.learn(4, feedback(1.0, 0.8, 0.9, theta=1e6, theta_aux=1.0))
    assert ctrl.k == 10  # projected onto K


def test_value_ogd_rounds_equal_pseudo_code():
    """k_m of value-based OGD against a transcription fed with NumPy's losses of each round
    (the rows each client sampled, k_m and k'_m as the run drew them)."""
    data = make_data("softmax", sizes=(10, 17, 25, 13), d=8)
    pb = Problem(data, "softmax", 1e-2, "samples")
    prm = {**params_for("fabtopk", 6), "k_control": "value_ogd", "k_min": 2, "k_max": 20}
    algo = ALGORITHMS["fabtopk"](pb, ALGORITHMS["fabtopk"].validate_params(prm), 1)
    algo.check_problem()
    algo.time_model = {"step_time": 1.0, "round_latency": 0.0, "exchange_time": 10.0}
    algo.setup()
    recorded, states = [], [algo.controller.k]
    for t in range(10):
        algo.round(t)
        recorded.append((algo.k_used, algo.k_aux, algo.samples.copy()))
        states.append(algo.controller.k)
    expected = online_oracle(
        pb, blocks_of(data), "fabtopk", recorded, stepsize=0.3, l2=1e-2, loss="softmax"
    )
    k = 6.0
    for m, (_, _, _, slope) in enumerate(expected, 1):
        if slope is not None:
            k = min(max(k - 18 / np.sqrt(2 * m) * slope, 2), 20)
        assert states[m] == pytest.approx(k, rel=1e-9)
    assert len(set(np.round(states, 6))) > 2  # k moved


def np_exp3(arms, cost_of, uniforms, horizon):
    """EXP3 as spec 4.2.2 writes it (weights, not log-weights): the arm of each round."""
    n = arms.size
    gamma = np.sqrt(np.log(n) / (n * horizon))
    w = np.ones(n)
    played = []
    for u in uniforms:
        p = (1 - gamma) * w / w.sum() + gamma / n
        a = min(int(np.searchsorted(np.cumsum(p), u * p.sum(), "right")), n - 1)
        played.append(arms[a])
        w[a] *= np.exp(gamma * (-cost_of(arms[a]) / p[a]) / n)
    return np.array(played)


def test_exp3_equals_its_transcription_and_learns_the_cheap_arm():
    def cost(k):
        return 1.0 + abs(k - 15) / 2

    ctrl = GSCtrl.Exp3K(10, 20, horizon=200)
    rng = np.random.default_rng(3)
    played = []
    for m in range(1, 1501):
        p = ctrl.probabilities()
        assert p.sum() == pytest.approx(1.0, abs=1e-12) and p.min() >= ctrl.gamma / 11 - 1e-15
        k = ctrl.choose(m, rng)
        played.append(k)
        ctrl.learn(m, feedback(1.0, 1.0 - 1.0 / cost(k), None, theta=1.0))  # cost(k) exactly
    uniforms = np.random.default_rng(3).random(1500)
    np.testing.assert_array_equal(played, np_exp3(np.arange(10, 21), cost, uniforms, 200))
    assert ctrl.arms[np.argmax(ctrl.probabilities())] == 15
    ctrl.learn(1501, feedback(1.0, 1.1, None))  # loss went up: no update
    np.testing.assert_array_equal(ctrl.log_w, GSCtrl.Exp3K(10, 20, horizon=200).log_w + ctrl.log_w)


@given(st.lists(st.floats(0.0, 1e6), min_size=1, max_size=60), st.integers(1, 300))
@settings(max_examples=40, deadline=None)
def test_exp3_probabilities_sum_to_one(costs, n_arms):
    ctrl = GSCtrl.Exp3K(5, 4 + n_arms, horizon=50)
    rng = np.random.default_rng(0)
    for m, c in enumerate(costs, 1):
        ctrl.choose(m, rng)
        ctrl.learn(m, feedback(1.0, 1.0 - 1.0 / max(c, 1e-9), None, theta=1.0))
        p = ctrl.probabilities()
        assert np.isfinite(p).all() and p.sum() == pytest.approx(1.0, abs=1e-9)
        assert p.min() >= ctrl.gamma / n_arms * (1 - 1e-12)


def test_bandit_equals_the_one_point_gradient_transcription():
    k_min, k_max, T = 20, 400, 100

    def cost(k):
        return 1.0 + ((k - 150) / 100) ** 2

    ctrl = GSCtrl.BanditK(300, k_min, k_max, horizon=T)
    rng = np.random.default_rng(5)
    got = [ctrl.choose(m, rng) for m in range(1, 2) for _ in [0]]
    ctrl.learn(1, feedback(1.0, 1.0 - 1.0 / cost(got[0]), None, theta=1.0))
    for m in range(2, 301):
        got.append(ctrl.choose(m, rng))
        assert k_min <= got[-1] <= k_max and ctrl.lo <= ctrl.x <= ctrl.hi
        ctrl.learn(m, feedback(1.0, 1.0 - 1.0 / cost(got[-1]), None, theta=1.0))
    # spec 4.2.3: y = x + delta u, u = +-1; g = c u / delta; x <- P(x - eta g)
    delta, eta = T**-0.25, (k_max - k_min + 1) / T**0.75
    x, r, want = 300.0, np.random.default_rng(5), []
    for _ in range(300):
        u = 1 if r.random() < 0.5 else -1
        y = x + delta * u
        k = int(np.floor(y) + (r.random() < y - np.floor(y)))
        want.append(k)
        x = float(np.clip(x - eta * cost(k) * u / delta, k_min + delta, k_max - delta))
    assert got == want and ctrl.x == pytest.approx(x)


@pytest.mark.parametrize("control", ["value_ogd", "exp3", "bandit"])
def test_baseline_controllers_in_a_run(control):
    """Seeded, within K, and the trace says what they do: k'_m and the sign only for the
    value-based controller, which estimates them."""
    prm = {"stepsize": 0.1, "k": 6, "k_control": control, "batch_size": 8, "k_min": 3}
    cfg = run_cfg("fubtopk", params=prm, rounds=30, time_model={"exchange_time": 10})
    a = to_frame(run_trace(normalize_run_config(cfg)))
    b = to_frame(run_trace(normalize_run_config(cfg)))
    c = to_frame(run_trace(normalize_run_config({**cfg, "seed": 1})))
    pd.testing.assert_frame_equal(a.drop(columns="elapsed_s"), b.drop(columns="elapsed_s"))
    ks = a["k_used"].iloc[1:]
    assert ((ks >= 3) & (ks <= 12)).all() and a["k_control"].iloc[0] == control
    if control == "value_ogd":
        assert (a["k_aux"].iloc[1:] < ks).all() and a["sign"].notna().any()
    else:
        assert a[["k_aux", "sign"]].isna().all().all()
        assert ks.nunique() > 1 and not ks.equals(c["k_used"].iloc[1:])


# ---- replaying a recorded sequence (k_control: sequence) ----------------------------------


def write_trace(path, cfg):
    from fedsparse.results.schema import write_parquet_atomic

    table = run_trace(normalize_run_config(cfg))
    write_parquet_atomic(table, path)
    return to_frame(table)


def online_source(tmp_path, eval_every=1, rounds=20, name="src.parquet"):
    prm = {"stepsize": 0.1, "k": 6, "k_control": "online_extended", "batch_size": 8, "window": 3}
    cfg = run_cfg(
        "fabtopk",
        params=prm,
        rounds=rounds,
        eval_every=eval_every,
        time_model={"exchange_time": 10},
    )
    return write_trace(tmp_path / name, cfg)


def replay_cfg(source, rounds=20, algorithm="fubtopk", eval_every=1, **over):
    prm = {"stepsize": 0.1, "k": 6, "k_control": "sequence", "k_sequence": str(source)}
    return run_cfg(
        algorithm,
        params={**prm, **over},
        rounds=rounds,
        eval_every=eval_every,
        time_model={"exchange_time": 1},
    )


def write_k_trace(path, k_used, run="r1", k=6):
    """A minimal trace file: the columns a replay reads."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    n = len(k_used)
    pq.write_table(
        pa.table(
            {"run_id": [run] * n, "round": list(range(1, n + 1)), "k": [k] * n, "k_used": k_used}
        ),
        path,
    )


def test_sequence_replays_exactly_the_recorded_k(tmp_path):
    src = online_source(tmp_path)
    assert src["k_used"].iloc[1:].nunique() > 1
    cfg = normalize_run_config(replay_cfg(tmp_path / "src.parquet"))
    seq = cfg["params"]["k_sequence"]
    assert seq["run"] == src["run_id"].iloc[0] and len(seq["sha256"]) == 64
    out = to_frame(run_trace(cfg))
    np.testing.assert_array_equal(out["k_used"].iloc[1:], src["k_used"].iloc[1:])
    assert out[["k_aux", "sign"]].isna().all().all()
    assert (out["k_sequence"] == seq["run"]).all()  # the replayed run, in every row
    assert (out["k_control"] == "sequence").all()
    # the same sequence elsewhere: the same content hash (the run id's part that is not a path)
    (tmp_path / "copy").mkdir()
    (tmp_path / "copy" / "x.parquet").write_bytes((tmp_path / "src.parquet").read_bytes())
    other = normalize_run_config(replay_cfg(f"{tmp_path}/copy/x.parquet#{seq['run']}"))
    assert other["params"]["k_sequence"]["sha256"] == seq["sha256"]
    assert run_id(other) == run_id(cfg)  # where the sequence was read is not its identity
    assert normalize_run_config(cfg) == cfg  # the canonical form normalises to itself


def test_a_replay_runs_as_the_first_run_of_its_process(tmp_path, monkeypatch):
    """The kernels' warm-up builds a throwaway algorithm once per process and kind of run; for
    a replay it too gets the resolved sequence (it once got the config's canonical form, and a
    replay that was a process's first such run failed, e.g. a shard job starting with one)."""
    from fedsparse.training import experiment

    online_source(tmp_path)
    cfg = normalize_run_config(replay_cfg(tmp_path / "src.parquet"))
    monkeypatch.setattr(experiment, "_WARM", set())  # nothing warmed up in this process yet
    out = to_frame(run_trace(cfg))
    assert len(experiment._WARM) == 1 and out["k_used"].iloc[1:].notna().all()


def test_the_algorithm_receives_the_sequence_resolved(tmp_path):
    """The config holds the replay's canonical form only; the class's resolved_params hook
    (the family's replay.py) resolves it to the recorded k for the algorithm, which reads no
    file (and refuses an unresolved value)."""
    from fedsparse.families.gradient_sparsification.replay import KSequence

    resolved_params = ALGORITHMS["fubtopk"].resolved_params
    src = online_source(tmp_path)
    params = normalize_run_config(replay_cfg(tmp_path / "src.parquet"))["params"]
    assert set(params["k_sequence"]) == {"path", "run", "sha256"}
    resolved = resolved_params(params)
    seq = resolved["k_sequence"]
    assert isinstance(seq, KSequence) and seq.canonical() == params["k_sequence"]
    np.testing.assert_array_equal(seq.ks, src["k_used"].iloc[1:])
    assert {k: v for k, v in resolved.items() if k != "k_sequence"} == {
        k: v for k, v in params.items() if k != "k_sequence"
    }
    fixed = {"stepsize": 0.1, "k": 6}
    assert resolved_params(fixed) is fixed  # no replay: the params as they are
    pb = Problem(make_data("logistic"), "logistic", 0.0, "uniform")
    assert ALGORITHMS["fubtopk"](pb, resolved, 0).replayed() is seq.ks
    with pytest.raises(TypeError, match="resolved_params"):
        ALGORITHMS["fubtopk"](pb, params, 0).check_problem()


def test_sequence_from_a_results_folder_and_a_sparser_trace(tmp_path):
    from fedsparse.pipeline.shard_runner import run_summary
    from fedsparse.results.aggregate import write_traces_dataset
    from fedsparse.results.schema import RUNS_SCHEMA, rows_table, write_parquet_atomic
    from fedsparse.sweep import Run

    tables, summaries = [], []
    for control in ("online", "online_extended"):
        prm = {"stepsize": 0.1, "k": 6, "k_control": control, "batch_size": 8}
        cfg = normalize_run_config(run_cfg("fabtopk", params=prm, rounds=12, eval_every=4))
        result = run_result(cfg)
        table = result.trace
        tables.append(table)
        rid = table["run_id"][0].as_py()
        summaries.append(run_summary(Run(rid, cfg), table, 1.0, "s", result.client_summary))
    import pyarrow as pa

    write_traces_dataset(pa.concat_tables(tables), tmp_path / "res" / "traces")
    write_parquet_atomic(rows_table(summaries, RUNS_SCHEMA), tmp_path / "res" / "runs.parquet")
    with pytest.raises(ConfigError, match=r"^params.k_sequence: .* holds 2 runs with k_used"):
        normalize_run_config(replay_cfg(tmp_path / "res", rounds=12))
    src = to_frame(tables[1])
    cfg = replay_cfg(f"{tmp_path / 'res'}#{src['run_id'].iloc[0]}", rounds=12)
    out = to_frame(run_trace(normalize_run_config(cfg)))
    recorded = dict(zip(src["round"].iloc[1:], src["k_used"].iloc[1:], strict=True))
    # rounds 1-4 play round 4's k, 5-8 round 8's, 9-12 round 12's
    want = [recorded[4 * ((r + 3) // 4)] for r in range(1, 13)]
    np.testing.assert_array_equal(out["k_used"].iloc[1:], want)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (
            lambda d: replay_cfg(d / "src.parquet", rounds=21),
            "params.k_sequence: the recorded sequence has 20 rounds, this run needs round 21",
        ),
        (lambda d: replay_cfg(d / "src.parquet", k=5), "params.k: 5 is not the replayed run's k 6"),
        (
            lambda d: replay_cfg(d / "junk.parquet"),
            "params.k_sequence: cannot read a k_used trace from",
        ),
        (
            lambda d: replay_cfg(f"{d / 'src.parquet'}#0123"),
            "params.k_sequence: no k_used rows of run 0123 in",
        ),
        (
            lambda d: replay_cfg(d / "big.parquet", rounds=3),
            "params.k_sequence: the recorded k reaches 20, more than the D = 12 parameters",
        ),
        (lambda d: replay_cfg(d / "zero.parquet", rounds=3), "params.k_sequence: run r1 in "),
    ],
)
def test_bad_sequences_are_one_line(tmp_path, make, message):
    online_source(tmp_path)
    (tmp_path / "junk.parquet").write_text("not parquet")
    write_k_trace(tmp_path / "big.parquet", [6, 20, 7])
    write_k_trace(tmp_path / "zero.parquet", [6, 0, 7])
    with pytest.raises(ConfigError) as err:
        run_trace(normalize_run_config(make(tmp_path)))
    assert str(err.value).startswith(message) and "\n" not in str(err.value)


def test_a_changed_sequence_is_caught_and_the_cli_exits_2(tmp_path):
    import subprocess
    import sys

    import yaml

    write_k_trace(tmp_path / "src.parquet", [6, 7, 8])
    cfg = normalize_run_config(replay_cfg(tmp_path / "src.parquet", rounds=3))
    write_k_trace(tmp_path / "src.parquet", [6, 7, 9])
    with pytest.raises(ConfigError, match=r"^params.k_sequence: the k sequence in .* changed"):
        run_trace(cfg)
    bad = replay_cfg(tmp_path / "missing.parquet")
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(bad))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "fedsparse",
            "run",
            str(tmp_path / "bad.yaml"),
            "-o",
            str(tmp_path / "out.parquet"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith("fedsparse: error: params.k_sequence: no trace file")
    assert len(proc.stderr.strip().splitlines()) == 1


def test_per_client_contributions_add_up():
    data = make_data("softmax", sizes=(10, 17, 25, 13))
    pb = Problem(data, "softmax", 1e-2, "uniform")
    for name in ["fabtopk", "fubtopk"]:
        shared = []
        algo = ALGORITHMS[name](pb, ALGORITHMS[name].validate_params(params_for(name, 5)), 0)
        algo.setup()
        for t in range(6):
            algo.round(t)
            shared.append(algo.shared.copy())
        table = algo.client_contributions()
        np.testing.assert_array_equal(table["applied"], np.sum(shared, axis=0))
        np.testing.assert_array_equal(table["idle_rounds"], np.sum(np.array(shared) == 0, axis=0))
        if name == "fabtopk":
            assert (table["idle_rounds"] == 0).all() and (table["applied"] >= 6 * (5 // 4)).all()


def test_replay_configs_name_their_source_configs_algorithm_3_runs():
    """gs-*-replay.yaml list run ids of their source sweep's Algorithm-3 runs: they must follow
    the source config (planning needs no data, so this runs on a fresh machine)."""
    import re

    import yaml

    from fedsparse.sweep import plan_sweep

    root = Path(__file__).resolve().parents[3] / "config"
    for source in ("gs-quick", "gs-paper"):
        plan = plan_sweep(yaml.safe_load((root / f"{source}.yaml").read_text()))
        learned = {
            r.run_id
            for r in plan.runs
            if r.config["algorithm"] == "fabtopk"
            and r.config["params"].get("k_control") == "online_extended"
        }
        replay = (root / f"{source}-replay.yaml").read_text()
        named = set(re.findall(rf"results/{source}#([0-9a-f]{{16}})", replay))
        assert named and named <= learned, (source, named - learned)


def test_k_init_is_the_initial_k_of_an_online_controller():
    """The issue names the starting k ``k_init``; it is ``k`` in the canonical config, so the
    two spellings are one run."""
    base = {"stepsize": 0.1, "k_control": "online_extended", "k_min": 2, "k_max": 30}
    a = normalize_run_config(run_cfg("fabtopk", params={**base, "k": 12}))
    b = normalize_run_config(run_cfg("fabtopk", params={**base, "k_init": 12}))
    assert a == b and run_id(a) == run_id(b) and "k_init" not in b["params"]
    for params, message in [
        ({**base, "k": 5, "k_init": 12}, "params.k_init: 12 differs from k 5"),
        ({"stepsize": 0.1, "k_init": 12}, "params.k_init: only with k_control online"),
        ({**base, "k_init": 40}, "params.k: the initial k 40 is outside"),
    ]:
        with pytest.raises(ConfigError) as err:
            normalize_run_config(run_cfg("fabtopk", params=params))
        assert str(err.value).startswith(message) and "\n" not in str(err.value)
