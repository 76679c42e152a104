"""model.dtype: float32 networks (MLP and cnn) against float64 within float32's precision,
thread-count determinism in float32, float64 run ids unchanged, bad values."""

from __future__ import annotations

import numba
import numpy as np
import pytest

from fedsparse import kernels as K
from fedsparse.algorithms import ALGORITHMS
from fedsparse.data import FederatedData
from fedsparse.errors import ConfigError
from fedsparse.kernels.prox import StepModel
from fedsparse.objective.model import Network, normalize
from fedsparse.objective.problem import Problem
from fedsparse.training.config import normalize_run_config, run_id

MLP = {"kind": "mlp", "hidden": [7, 5], "activation": "tanh"}
CNN = {
    "kind": "cnn",
    "layers": [
        {"conv": {"out": 3, "kernel": 3, "padding": "same"}},
        {"pool": {"kind": "max", "size": 2}},
        {"conv": {"out": 4, "kernel": 3, "stride": 2, "padding": 1}},
        {"dense": 6},
    ],
}
MODELS = {"mlp": MLP, "cnn": CNN}
SHAPE = (8, 8, 1)
D = 64
# float32's unit roundoff is 6e-8; through a few layers and steps, relative errors of a
# few 1e-6 are float32 working as it should (float64 would agree to ~1e-15)
RTOL = 2e-5


def pair(kind: str, n_out: int = 3, **model):
    """The same network in float64 and float32."""
    cfg = {**MODELS[kind], **model}
    if kind == "cnn":
        cfg["input"] = list(SHAPE)
    n64 = Network.from_config(normalize(cfg), D, n_out)
    n32 = Network.from_config(normalize({**cfg, "dtype": "float32"}), D, n_out)
    return n64, n32


def image_data(rng, n=80, clients=4, classes=3):
    """8 x 8 images whose class is the brightest of three horizontal bands."""
    y = rng.integers(0, classes, n).astype(float)
    X = 0.3 * rng.standard_normal((n, 8, 8))
    for i in range(n):
        k = int(y[i])
        X[i, 2 * k : 2 * k + 3, :] += 1.0
    X = X.reshape(n, -1)
    ptr = np.linspace(0, n, clients + 1).astype(np.int64)
    return FederatedData(
        "bands", "multiclass", X, y, ptr, n_classes=classes, X_test=X[: n // 4], y_test=y[: n // 4]
    )


def value_grad(net, theta, X, y, rows, loss="softmax", l2=1e-3):
    spec = net.kernel_sizes()
    work = K.mlp_work(spec, len(rows))
    G = np.full(theta.size, 7.0)
    value = K.mlp_batch_grad(
        K.as_kernel_matrix(X, net.dtype),  # a run's rows: float32 for a float32 network
        y,
        rows,
        theta,
        spec,
        net.bias,
        K.ACTIVATIONS[net.activation],
        K.LOSS_CODES[loss],
        l2,
        G,
        work,
    )
    return value, G


def local_round(net, theta, X, y, ptr, tau=0, steps=3, batch=5):
    spec = net.kernel_sizes()
    local = np.empty((ptr.shape[0] - 1, theta.size))
    K.mlp_local_sgd_round(
        K.as_kernel_matrix(X, net.dtype),  # a run's rows: float32 for a float32 network
        y,
        ptr,
        theta,
        local,
        np.arange(y.shape[0], dtype=np.int64),
        K.client_states(5, ptr.shape[0] - 1),
        K.SGDConstants(steps, batch, tau, 0.1),
        StepModel(
            True, spec, net.bias, K.ACTIVATIONS[net.activation], K.LOSS_CODES["softmax"], 1e-3
        ),
        K.mlp_thread_work(spec, batch),
        np.array([0, theta.size]),
    )
    return local


def evaluate(net, thetas, X, y, ptr, block=7):
    groups = ptr.shape[0] - 1
    loss_sum, correct = np.empty(groups), np.empty(groups, np.int64)
    which = np.arange(groups, dtype=np.int64) % thetas.shape[0]
    K.mlp_eval(
        K.as_kernel_matrix(X, net.dtype),  # a run's rows: float32 for a float32 network
        y,
        ptr,
        thetas,
        which,
        net.kernel_sizes(),
        net.bias,
        K.ACTIVATIONS[net.activation],
        K.LOSS_CODES["softmax"],
        block,
        loss_sum,
        correct,
    )
    return loss_sum, correct


# ---------------------------------------------------------------------------
# float32 against float64


@pytest.mark.parametrize("kind", ["mlp", "cnn"])
def test_float32_kernels_agree_with_float64(kind):
    n64, n32 = pair(kind)
    assert n32.n_params == n64.n_params and n32.label == n64.label + "-f32"
    spec = n32.kernel_sizes()
    assert spec.ndim == 2 and K.mlp_work(spec, 2)[0].dtype == np.float32
    assert K.mlp_work(n64.kernel_sizes(), 2)[0].dtype == np.float64
    rng = np.random.default_rng(0)
    X = rng.standard_normal((30, D))
    y = rng.integers(0, 3, 30).astype(float)
    theta = n64.initial().ravel() + 0.05 * rng.standard_normal(n64.n_params)
    rows = np.array([3, 0, 7, 29, 7, 12], dtype=np.int64)
    v64, g64 = value_grad(n64, theta, X, y, rows)
    v32, g32 = value_grad(n32, theta, X, y, rows)
    assert v32 == pytest.approx(v64, rel=RTOL)
    np.testing.assert_allclose(g32, g64, rtol=0, atol=RTOL * np.abs(g64).max())
    assert not np.array_equal(g32, g64)  # it did compute in float32
    # a float32 gradient lands in float64 G: every entry is ridge (float64) + a float32 value
    ptr = np.array([0, 4, 17, 30], dtype=np.int64)
    l64, l32 = local_round(n64, theta, X, y, ptr), local_round(n32, theta, X, y, ptr)
    assert l32.dtype == np.float64
    assert np.array_equal(l32, l32.astype(np.float32))  # the float32 models, exactly
    np.testing.assert_allclose(l32, l64, rtol=0, atol=RTOL * np.abs(l64).max())
    for thetas in (theta[None], l64):  # one model for all groups, and one per group
        (s64, c64), (s32, c32) = evaluate(n64, thetas, X, y, ptr), evaluate(n32, thetas, X, y, ptr)
        np.testing.assert_allclose(s32, s64, rtol=RTOL)
        assert np.abs(c32 - c64).sum() <= 1  # a near-tie may flip one prediction


@pytest.mark.parametrize("kind", ["mlp", "cnn"])
def test_fedavg_rounds_in_float32_track_float64(kind):
    data = image_data(np.random.default_rng(1))
    runs = []
    for dtype in ("float64", "float32"):
        model = normalize({**MODELS[kind], "dtype": dtype})
        problem = Problem(data, "softmax", 1e-3, model=model)
        cls = ALGORITHMS["fedavg"]
        params = cls.validate_params({"stepsize": 0.1, "local_steps": 4, "batch_size": 8})
        algo = cls(problem, params, 0)
        algo.setup()
        for t in range(4):
            algo.round(t)
        assert algo.model.dtype == np.float64
        runs.append((algo.model.copy(), problem.metrics(algo.model)))
    (w64, m64), (w32, m32) = runs
    np.testing.assert_allclose(w32, w64, rtol=0, atol=RTOL * np.abs(w64).max())
    assert not np.array_equal(w32, w64)
    assert m32["objective"] == pytest.approx(m64["objective"], rel=RTOL)
    assert m32["objective"] < 1.0  # it learns (log 3 = 1.1 at the start)
    assert abs(m32["train_accuracy"] - m64["train_accuracy"]) <= 1.5 / data.n_samples


def test_local_hard_thresholding_in_float32():
    """FedIter-HT's H_tau inside the float32 round: exactly tau entries per client model,
    selected on float32 values (as float64: the same order)."""
    _, n32 = pair("mlp")
    rng = np.random.default_rng(2)
    X = rng.standard_normal((30, D))
    y = rng.integers(0, 3, 30).astype(float)
    theta = n32.initial().ravel()
    ptr = np.array([0, 10, 20, 30], dtype=np.int64)
    tau = n32.n_params // 5
    local = local_round(n32, theta, X, y, ptr, tau=tau)
    assert (np.count_nonzero(local, axis=1) == tau).all()
    assert np.array_equal(local, local.astype(np.float32))


# ---------------------------------------------------------------------------
# Determinism


@pytest.mark.parametrize("kind", ["mlp", "cnn"])
def test_float32_results_do_not_depend_on_the_thread_count(kind):
    _, n32 = pair(kind)
    rng = np.random.default_rng(3)
    X = rng.standard_normal((50, D))
    y = rng.integers(0, 3, 50).astype(float)
    theta = n32.initial().ravel()
    ptr = np.array([0, 3, 25, 31, 50], dtype=np.int64)
    before = numba.get_num_threads()
    results = []
    try:
        for threads in (1, 2, 1):
            numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
            local = local_round(n32, theta, X, y, ptr, tau=n32.n_params // 3)
            results.append(
                [local, *evaluate(n32, local, X, y, ptr), *evaluate(n32, theta[None], X, y, ptr)]
            )
    finally:
        numba.set_num_threads(before)
    for other in results[1:]:
        for u, v in zip(results[0], other, strict=True):
            assert np.array_equal(u, v)


# ---------------------------------------------------------------------------
# Configs: the default's run ids, bad values

PINNED_MLP = (
    {
        "dataset": {"kind": "idx", "source": "fashion-mnist"},
        "partition": {"kind": "iid", "clients": 10},
        "model": {"loss": "softmax", "kind": "mlp", "hidden": [200, 100], "activation": "swish"},
        "algorithm": "fedavg",
        "params": {"stepsize": 0.05, "local_steps": 10, "batch_size": 32},
        "rounds": 30,
    },
    "13aee219e3ff148c",  # tests/test_model.py's pin, from before model.kind cnn
)


def test_float64_is_the_default_and_keeps_run_ids():
    raw, expected = PINNED_MLP
    explicit = {**raw, "model": {**raw["model"], "dtype": "float64"}}
    assert run_id(normalize_run_config(raw)) == expected
    assert run_id(normalize_run_config(explicit)) == expected
    assert "dtype" not in normalize_run_config(explicit)["model"]
    f32 = normalize_run_config({**raw, "model": {**raw["model"], "dtype": "float32"}})
    assert f32["model"]["dtype"] == "float32" and run_id(f32) != expected
    # a cnn keeps its id too, and float64 on a linear model is allowed (and changes nothing)
    cnn = {**raw, "model": {"loss": "softmax", "kind": "cnn", "layers": "leaf_femnist"}}
    same = {**cnn, "model": {**cnn["model"], "dtype": "float64"}}
    assert run_id(normalize_run_config(cnn)) == run_id(normalize_run_config(same))
    linear = {**raw, "model": {"loss": "softmax"}}
    assert run_id(normalize_run_config(linear)) == run_id(
        normalize_run_config({**linear, "model": {"loss": "softmax", "dtype": "float64"}})
    )
    assert Network.from_config(normalize(raw["model"] | {"dtype": "float64"}), 784, 10).label == (
        "mlp-200-100-swish"
    )


@pytest.mark.parametrize(
    "model,message",
    [
        (
            {"kind": "mlp", "dtype": "float16"},
            r"^model\.dtype: must be float64 or float32, "
            r"got 'float16'",
        ),
        ({"kind": "cnn", "layers": "leaf_femnist", "dtype": "f32"}, r"^model\.dtype: must be"),
        ({"kind": "mlp", "dtype": 32}, r"^model\.dtype: must be float64 or float32, got 32$"),
        ({"kind": "mlp", "dtype": None}, r"^model\.dtype: must be"),
        ({"dtype": "float32"}, r"^model\.dtype: float32 is for networks \(model\.kind mlp or cnn"),
        ({"kind": "linear", "bias": True, "dtype": "float32"}, r"^model\.dtype: float32 is for"),
    ],
)
def test_bad_dtypes_fail_at_config_time_naming_the_key(model, message):
    raw = {
        # a valid data set (the data set is checked first: it decides a model's default loss)
        "dataset": {"kind": "synthetic", "task": "logistic", "clients": 2, "dim": 5, "support": 2},
        "model": {"loss": "logistic", **model},
        "algorithm": "fedavg",
        "params": {"stepsize": 0.1},
        "rounds": 1,
    }
    with pytest.raises(ConfigError, match=message) as err:
        normalize_run_config(raw)
    assert "\n" not in str(err.value)


# ---------------------------------------------------------------------------
# Every algorithm on a float32 network

REQUIRED = {"stepsize": 0.05, "sparsity": 40, "k": 40, "cost_limit": 10.0}


@pytest.mark.integration
@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_every_algorithm_runs_on_a_float32_network(name):
    """Each algorithm on a float32 cnn, its defaults and the required keys only.

    In the integration tier, as the float64 cnn's (``test_every_algorithm_runs_on_a_cnn``):
    a layer table compiles every family's kernels for one more model type, the largest
    share of the fast tier's first run. The fast tier runs the float32 network kernels
    against float64 (above), and each family's network kernels on a float64 MLP against
    its pseudo-code (``tests/families/``)."""
    cls = ALGORITHMS[name]
    params = {h.name: REQUIRED[h.name] for h in cls.hyperparameters if h.required}
    data = image_data(np.random.default_rng(5))
    model = normalize({**CNN, "dtype": "float32"})
    problem = Problem(data, "softmax", 1e-3, model=model)
    algo = cls(problem, cls.validate_params(params), 0)
    algo.check_problem()
    algo.setup()
    start = problem.objective(algo.model)
    for t in range(2):
        algo.round(t)
    end = problem.metrics(algo.model)
    assert np.isfinite(end["objective"]) and end["objective"] != start
    assert algo.model.dtype == np.float64 and algo.model.shape == (1, problem.n_params)
