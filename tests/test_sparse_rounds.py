"""The CSR active-coordinate round gives the same bits as the generic round."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from fedsparse import kernels as K
from fedsparse.algorithms import ALGORITHMS
from fedsparse.data import FederatedData
from fedsparse.kernels.sparse_rounds import _threshold_active
from fedsparse.objective.problem import Problem


def csr_data(loss: str, integer: bool, seed: int = 0) -> FederatedData:
    rng = np.random.default_rng(seed)
    n, d = 240, 400
    X = sp.random(n, d, density=0.02, format="csr", random_state=rng)
    # integer features make equal magnitudes (ties at the H_tau cut) common
    X.data[:] = rng.choice([-1.0, 1.0], X.nnz) if integer else rng.standard_normal(X.nnz)
    if loss == "softmax":
        y, task, classes = rng.integers(0, 3, n).astype(float), "multiclass", 3
    elif loss == "logistic":
        y, task, classes = np.where(rng.random(n) > 0.5, 1.0, -1.0), "binary", 0
    else:
        y, task, classes = rng.integers(-2, 3, n).astype(float), "regression", 0
    return FederatedData("csr", task, X, y, np.arange(0, n + 1, 30), n_classes=classes)


def trajectory(problem, algo, params, active_set: bool, rounds: int = 6):
    cls = ALGORITHMS[algo]
    a = cls(problem, cls.validate_params(params), 7)
    a.setup()
    a.use_active_set(active_set)
    costs = [a.round(t) for t in range(rounds)]
    return a.W.copy(), [(c.bytes_up, c.bytes_down) for c in costs], a.local_models.copy()


@pytest.mark.parametrize("loss", ["least_squares", "logistic", "softmax"])
@pytest.mark.parametrize("algo", ["fedht", "fediterht", "distiht"])
@pytest.mark.parametrize("integer", [False, True], ids=["real", "ties"])
@pytest.mark.parametrize("l2", [0.0, 0.01], ids=["no-ridge", "ridge"])
def test_active_set_round_is_bit_identical_to_generic_round(loss, algo, integer, l2):
    data = csr_data(loss, integer)
    problem = Problem(data, loss, l2)
    # a growing batch makes the compact models' capacity grow between rounds
    for batch, growth in ((5, 1.0), (None, 1.0), (2, 1.7)):
        params = {
            "stepsize": 0.5 if integer else 0.05,
            "sparsity": 12,
            "batch_size": batch,
            "batch_growth": growth,
        }
        fast = trajectory(problem, algo, params, active_set=True)
        slow = trajectory(problem, algo, params, active_set=False)
        np.testing.assert_array_equal(fast[0], slow[0])
        assert fast[1] == slow[1]
        np.testing.assert_array_equal(fast[2], slow[2])  # every client's model, too
        assert np.count_nonzero(fast[0]) > 0


def test_threshold_over_a_shuffled_active_list_breaks_ties_by_coordinate():
    rng = np.random.default_rng(3)
    d, tau = 60, 7
    for _ in range(50):
        row = rng.choice([0.0, 1.0, -1.0, 2.0], d, p=[0.4, 0.3, 0.2, 0.1])
        expected = row.copy()
        K.hard_threshold(expected, tau, K.threshold_scratch(d))
        act = rng.permutation(np.flatnonzero(row)).astype(np.int64)
        W = row[None, :].copy()
        scratch = K.threshold_scratch(d)
        vals = np.empty(d)
        vals[: act.size] = row[act]
        mark = (row != 0).astype(np.uint8)
        kept = _threshold_active(W, act, act.size, tau, vals, scratch, mark)
        np.testing.assert_array_equal(W[0], expected)
        assert sorted(act[:kept]) == sorted(np.flatnonzero(expected))
        np.testing.assert_array_equal(mark, (expected != 0).astype(np.uint8))
