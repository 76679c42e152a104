"""FUB-top-k's ``merge: tree``, the authors' code's FUB_top_K, against a transcription of the
code (gtop_k.py's ``global_top_k`` and simulation.py's residual update in
github.com/PengchaoHan/Adaptive_Gradient_Sparsification_FL), written on dense N x D arrays the
way the code is: levels of pairwise merges (2m, 2m + 1), weighted by the merged clients' sizes,
a top-k mask at every merge cleared from the local masks of every client below it, an odd node
out carried up unchanged, and the residuals zeroed where a local mask survives the root's."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import make_data, np_grad
from gs_helpers import blocks_of, drive, run_cfg
from network_oracle import np_loss_grad

from fedsparse import testing
from fedsparse.algorithms import ALGORITHMS
from fedsparse.errors import ConfigError
from fedsparse.families.gradient_sparsification import kernels as GS
from fedsparse.objective.problem import Problem
from fedsparse.results.schema import to_frame
from fedsparse.training.config import normalize_run_config, run_id
from fedsparse.training.experiment import run_trace

RTOL = 1e-9


def np_topk_mask(a, k):
    """The code's top-k mask of |a| (tf.nn.top_k: the lower index first among ties)."""
    mask = np.zeros(a.size)
    mask[np.lexsort((np.arange(a.size), -np.abs(a)))[:k]] = 1
    return mask


def np_global_top_k(A, k, sizes):
    """global_top_k on the residuals A (N x D): (g_global, mask, local_mask), dense."""
    N, D = A.shape
    g = np.zeros_like(A)
    local_mask = np.zeros_like(A)
    for n in range(N):
        local_mask[n] = np_topk_mask(A[n], k)
        g[n] = A[n] * local_mask[n]
    this, this_sizes, mask = g.copy(), list(sizes), local_mask[0].copy()
    for level in range(int(math.ceil(math.log2(N))) if N > 1 else 0):
        nxt, nxt_sizes = np.zeros((math.ceil(len(this) / 2), D)), []
        for n in range(len(this)):
            if n % 2 == 1:
                merged = (this[n] * this_sizes[n] + this[n - 1] * this_sizes[n - 1]) / (
                    this_sizes[n] + this_sizes[n - 1]
                )
                mask = np_topk_mask(merged, k)
                nxt[n // 2] = merged * mask
                for j in range(min(2 ** (level + 1), N)):
                    client = (n - 1) // 2 * 2 ** (level + 1) + j
                    if client < N:
                        local_mask[client][mask == 0] = 0
                nxt_sizes.append(this_sizes[n] + this_sizes[n - 1])
            if n == len(this) - 1 and n % 2 == 0:
                nxt[(n + 1) // 2] = this[n]
                nxt_sizes.append(this_sizes[n])
        this, this_sizes = nxt, nxt_sizes
    return this[0], mask, local_mask


def np_tree_rounds(grad, w0, p, k, stepsize, rounds):
    """Full-batch rounds of simulation.py's FUB_top_K: the models and residuals."""
    N, D = len(p), w0.size
    w, A = w0.copy(), np.zeros((N, D))
    models, residuals = [w.copy()], []
    for _ in range(rounds):
        A = A + np.array([grad(i, w) for i in range(N)])
        g, mask, local_mask = np_global_top_k(A, k, p)
        w = w - stepsize * g
        local_mask[:, mask == 0] = 0
        A = A * (local_mask == 0)
        models.append(w.copy())
        residuals.append(A.copy())
    return models, residuals


def offers(A, k):
    idx = np.lexsort((np.broadcast_to(np.arange(A.shape[1]), A.shape), -np.abs(A)))[:, :k]
    return idx, np.take_along_axis(A, idx, axis=1)


@pytest.mark.parametrize("N", [1, 2, 3, 5, 8, 13, 156])
@pytest.mark.parametrize("k", [1, 3, 9])
def test_merge_tree_is_the_codes_global_top_k(N, k):
    rng = np.random.default_rng(N * 10 + k)
    D = 40
    A = rng.normal(size=(N, D)) * rng.lognormal(0, 1, size=(N, 1))
    sizes = rng.integers(5, 50, N).astype(float)
    p = sizes / sizes.sum()
    idx, val = offers(A, k)
    mark, acc = np.zeros(D, bool), np.zeros(D)
    J, b, survived = GS.merge_tree(idx, val, p, k, (mark, acc))
    g, mask, local_mask = np_global_top_k(A, k, p)
    local_mask[:, mask == 0] = 0
    assert (
        not mark.any()
        and not acc.any()
        and np.all(np.diff(J) > 0)
        and J.size == min(k, np.unique(idx).size)
    )
    np.testing.assert_array_equal(np.flatnonzero(g), J)
    np.testing.assert_allclose(b, g[J], rtol=RTOL, atol=1e-15)
    np.testing.assert_array_equal(survived, np.take_along_axis(local_mask, idx, 1) == 1)
    # the root's value is the p-weighted sum over the elements that survived, exactly those
    weighted = (p[:, None] * val)[survived]
    np.testing.assert_allclose(b, np.bincount(idx[survived], weighted, D)[J], rtol=1e-12)


def test_merge_tree_drops_elements_a_flat_top_k_keeps():
    """Not the paper's FUB-top-k: client 0's element 0 loses to client 1's element 1 at the
    first merge, though aggregated over all four clients element 0 is the largest."""
    A = np.array([[3.0, 0, 0], [0, 4.0, 0], [5.0, 0, 0], [5.0, 0, 0]])
    idx, val = offers(A, 1)
    J, b, survived = GS.merge_tree(idx, val, np.full(4, 0.25), 1, (np.zeros(3, bool), np.zeros(3)))
    assert J.tolist() == [0] and b.tolist() == [2.5]  # clients 2 and 3 only: (5 + 5) / 4
    assert survived.ravel().tolist() == [False, False, True, True]


@pytest.mark.parametrize("weights", ["uniform", "samples"])
@pytest.mark.parametrize(
    "case", [("softmax", False, 9), ("logistic", True, 4), ("softmax", False, 1)]
)
def test_linear_full_batch_traces_equal_the_codes_rounds(weights, case):
    loss, sparse, k = case
    data = make_data(loss, sparse=sparse)
    pb = Problem(data, loss, 1e-2, weights)
    blocks = blocks_of(data)

    def grad(i, w):
        Xi, yi = blocks[i]
        return np_grad(Xi, yi, w.reshape(pb.shape), loss, 1e-2).ravel()

    params = {"stepsize": 0.3, "batch_size": "full", "k": k, "merge": "tree"}
    models, residuals, costs, _ = drive(pb, "fubtopk", params, 6)
    w_o, a_o = np_tree_rounds(grad, np.zeros(pb.shape).ravel(), pb.p, k, 0.3, 6)
    for m in range(7):
        np.testing.assert_allclose(models[m].ravel(), w_o[m], rtol=RTOL, atol=1e-12)
    for m in range(6):
        np.testing.assert_allclose(residuals[m], a_o[m], rtol=RTOL, atol=1e-12)
        assert costs[m].values_up == 2 * k and costs[m].values_down <= 2 * k


def test_mlp_full_batch_traces_equal_the_codes_rounds():
    mlp = {
        "kind": "mlp",
        "hidden": [5],
        "activation": "tanh",
        "init": {"kind": "glorot", "seed": 2},
    }
    data = make_data("softmax")
    pb = Problem(data, "softmax", 1e-3, "samples", mlp)
    blocks = blocks_of(data)

    def grad(i, w):
        return np_loss_grad(pb.network, w, *blocks[i], "softmax", 1e-3)[1]

    params = {"stepsize": 0.2, "batch_size": "full", "k": 17, "merge": "tree"}
    models, residuals, _, _ = drive(pb, "fubtopk", params, 5)
    w_o, a_o = np_tree_rounds(grad, pb.initial_model().ravel(), pb.p, 17, 0.2, 5)
    for m in range(6):
        np.testing.assert_allclose(models[m].ravel(), w_o[m], rtol=RTOL, atol=1e-12)
    for m in range(5):
        np.testing.assert_allclose(residuals[m], a_o[m], rtol=RTOL, atol=1e-12)


def test_error_feedback_loses_nothing_and_clients_go_idle():
    """w(m) - eta sum_i p_i a_i(m) = w(0) - eta sum of the added gradients (minibatches), and
    the fairness view counts the elements that survived: some clients have none."""
    data = make_data("softmax", sizes=(30, 41, 25))
    pb = Problem(data, "softmax", 1e-2, "samples")
    cls = ALGORITHMS["fubtopk"]
    params = {"stepsize": 0.2, "batch_size": 4, "k": 2, "merge": "tree"}
    algo = cls(pb, cls.validate_params(params), 3)
    algo.setup()
    eta, total, idle = 0.2, np.zeros(algo.n_params), 0
    for t in range(8):
        before = algo.residuals.copy()
        w_prev = algo.model.ravel().copy()
        algo.round(t)
        applied = (w_prev - algo.model.ravel()) / eta
        total += pb.p @ algo.residuals + applied - pb.p @ before
        np.testing.assert_allclose(
            algo.model.ravel() - eta * (pb.p @ algo.residuals), -eta * total, atol=1e-12
        )
        idle += algo.extra_metrics()["idle_clients"]
    assert np.linalg.norm(total) > 0 and idle > 0


def test_tree_keeps_the_default_run_ids_and_is_charged_as_coded():
    """merge union is left out of the run config (run ids of FUB-top-k runs hold); a tree run
    is charged as the code charges FUB_top_K: 1 + 2 beta k / D a round (|J| = k here)."""
    base = run_cfg("fubtopk")["params"]
    plain = normalize_run_config(run_cfg("fubtopk"))
    union = normalize_run_config(run_cfg("fubtopk", params={**base, "merge": "union"}))
    assert "merge" not in plain["params"] and run_id(union) == run_id(plain)
    timing = {"step_time": 1.0, "round_latency": 0.0, "exchange_time": 10.0}
    tree = normalize_run_config(
        run_cfg("fubtopk", params={**base, "merge": "tree"}, time_model=timing)
    )
    assert run_id(tree) != run_id(plain)
    df = to_frame(run_trace(tree))
    assert np.allclose(np.diff(df["time"]), 1 + 2 * 10.0 * 5 / 12)  # k = 5, D = 12
    assert (df["merge"] == "tree").all()


@pytest.mark.parametrize(
    ("name", "params", "message"),
    [
        ("fubtopk", {"merge": "tree", "k_control": "online"}, "params.merge: tree only with"),
        ("fubtopk", {"merge": "heap"}, "params.merge"),
        ("fabtopk", {"merge": "tree"}, "params.merge: unknown hyperparameter"),
    ],
)
def test_bad_merge_is_one_line(name, params, message):
    base = run_cfg(name)["params"]
    with pytest.raises(ConfigError, match=message):
        normalize_run_config(run_cfg(name, params={**base, **params}))


def test_a_tree_run_is_the_same_bits_alone_and_in_a_cohort():
    """(Resumed from a checkpoint: tests/test_conformance.py's fubtopk-tree case.)"""
    testing.check_cohort_bits(
        "fubtopk", {"stepsize": 0.5, "batch_size": 10, "k": 8, "merge": "tree"}
    )
