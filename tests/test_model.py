"""The model layer: config keys, canonical form and run ids, layout, initial points,
and the results schema as the one register of column names."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from fedsparse.algorithms import ALGORITHMS
from fedsparse.errors import ConfigError
from fedsparse.objective.model import Network, load_init_file, normalize
from fedsparse.results.schema import (
    HYPERPARAMETER_COLUMNS,
    RUNS_SCHEMA,
    TRACE_SCHEMA,
    rows_table,
    trace_table,
    upgrade,
)
from fedsparse.training.config import normalize_run_config, run_id

SIM = {
    "kind": "synthetic",
    "task": "linear",
    "clients": 4,
    "samples_per_client": 10,
    "dim": 12,
    "support": 3,
}
HT = {"algorithm": "fedht", "params": {"stepsize": 0.01, "sparsity": 3}, "rounds": 2}


def cfg(model=None, **extra):
    raw = {"dataset": SIM, **HT, **extra}
    if model is not None:
        raw["model"] = model
    return normalize_run_config(raw)


# Run ids computed by the release before the model layer: they must not change.
PINNED = [
    (
        {
            "dataset": {"kind": "synthetic", "task": "linear", "alpha": 0.5, "beta": 0.5},
            "algorithm": "fedht",
            "params": {"stepsize": 0.001, "sparsity": 100, "local_steps": 5},
            "rounds": 200,
        },
        "7d517b8f8942eb3f",
    ),
    (
        {
            "dataset": {"kind": "synthetic", "task": "logistic"},
            "model": {"loss": "logistic", "l2": 0.001},
            "algorithm": "fediterht",
            "params": {"stepsize": 0.01, "sparsity": 50, "batch_size": "full"},
            "rounds": 100,
            "seed": 2,
        },
        "595029394455f87f",
    ),
    (
        {
            "dataset": {"kind": "svmlight", "source": "mnist"},
            "model": {"loss": "softmax"},
            "partition": {"kind": "dirichlet", "clients": 20, "alpha": 0.3},
            "algorithm": "distiht",
            "params": {"stepsize": 0.1, "sparsity": 500},
            "rounds": 50,
            "eval_every": 5,
        },
        "fb99e7ce12c91298",
    ),
]


# An MLP run id computed before model.kind cnn existed: network configs keep their ids.
PINNED.append(
    (
        {
            "dataset": {"kind": "idx", "source": "fashion-mnist"},
            "partition": {"kind": "iid", "clients": 10},
            "model": {
                "loss": "softmax",
                "kind": "mlp",
                "hidden": [200, 100],
                "activation": "swish",
            },
            "algorithm": "fedavg",
            "params": {"stepsize": 0.05, "local_steps": 10, "batch_size": 32},
            "rounds": 30,
        },
        "13aee219e3ff148c",
    )
)


@pytest.mark.parametrize("raw,expected", PINNED)
def test_existing_run_ids_are_unchanged(raw, expected):
    assert run_id(normalize_run_config(raw)) == expected


def test_default_model_keys_stay_out_of_the_canonical_form():
    plain = cfg({"loss": "least_squares"})
    assert plain["model"] == {"loss": "least_squares", "l2": 0.0, "weights": "uniform"}
    spelled = cfg({"kind": "linear", "bias": False, "init": {"kind": "zeros"}})
    assert spelled == plain and run_id(spelled) == run_id(plain)
    with_bias = cfg({"bias": True})
    assert with_bias["model"]["bias"] is True and run_id(with_bias) != run_id(plain)


def test_mlp_config_is_explicit():
    m = cfg({"kind": "mlp"})["model"]
    assert m == {
        "loss": "least_squares",
        "l2": 0.0,
        "weights": "uniform",
        "kind": "mlp",
        "hidden": [100],
        "activation": "relu",
        "bias": True,
        "init": {"kind": "glorot", "seed": 0},
    }
    m = cfg({"kind": "mlp", "hidden": 7, "activation": "swish", "bias": False})["model"]
    assert m["hidden"] == [7] and m["activation"] == "swish" and m["bias"] is False
    a = cfg({"kind": "mlp", "init": {"kind": "normal", "std": 0.1, "seed": 3}})
    assert a["model"]["init"] == {"kind": "normal", "std": 0.1, "seed": 3}


@pytest.mark.parametrize(
    "model,where",
    [
        ({"kind": "cnm"}, "model.kind"),
        ({"kind": "cnn"}, "model.layers"),
        ({"layers": "leaf_femnist"}, "model.layers"),
        ({"kind": "mlp", "input": [28, 28, 1]}, "model.input"),
        ({"kind": "mlp", "activation": "gelu"}, "model.activation"),
        ({"kind": "mlp", "hidden": [10, 0]}, "model.hidden"),
        ({"kind": "mlp", "hidden": []}, "model.hidden"),
        ({"kind": "mlp", "hidden": "100"}, "model.hidden"),
        ({"kind": "mlp", "bias": "yes"}, "model.bias"),
        ({"hidden": [10]}, "model.hidden"),
        ({"kind": "mlp", "init": {"kind": "he"}}, "model.init.kind"),
        ({"kind": "mlp", "init": {"kind": "normal", "std": 0}}, "model.init.std"),
        ({"kind": "mlp", "init": {"kind": "glorot", "seed": -1}}, "model.init.seed"),
        ({"kind": "mlp", "init": {"kind": "glorot", "scale": 2}}, "model.init.scale"),
        ({"kind": "mlp", "init": {"kind": "file"}}, "model.init.path"),
        (
            {"kind": "mlp", "init": {"kind": "truncated_normal", "biases": "0.1"}},
            "model.init.biases",
        ),
        (
            {"kind": "mlp", "init": {"kind": "truncated_normal", "biases": float("nan")}},
            "model.init.biases",
        ),
        ({"kind": "mlp", "init": {"kind": "glorot", "biases": 0.1}}, "model.init.biases"),
        ({"kind": "mlp", "init": {"kind": "file", "path": "/nonexistent.npy"}}, "model.init.path"),
    ],
)
def test_bad_model_keys_name_the_key(model, where):
    with pytest.raises(ConfigError, match=f"^{where}"):
        cfg(model)


def test_layout_and_sizes():
    net = Network.from_config(cfg({"kind": "mlp", "hidden": [100]})["model"], 784, 10)
    assert net.n_params == 79_510  # sFedHP's Remark 1
    assert net.shape == (1, 79_510) and net.label == "mlp-100-relu"
    theta = np.arange(net.n_params, dtype=float)
    (W1, b1), (W2, b2) = net.split(theta)
    assert W1.shape == (100, 784) and W1[1, 0] == 784  # row-major
    assert b1[0] == 78_400 and W2[0, 0] == 78_500 and b2[-1] == 79_509
    nobias = Network.from_config({"kind": "mlp", "hidden": [128], "bias": False}, 784, 10)
    assert nobias.n_params == 784 * 128 + 128 * 10 and nobias.label == "mlp-128-relu-nobias"
    linear = Network.from_config({}, 30, 3)
    assert linear.fast_linear and linear.shape == (3, 30) and linear.label == "linear"
    intercept = Network.from_config({"bias": True}, 30, 3)
    assert not intercept.fast_linear and intercept.shape == (1, 93)


def test_initial_points():
    net = Network.from_config({"kind": "mlp", "hidden": [50, 20]}, 40, 3)
    theta = net.initial()
    assert np.array_equal(theta, net.initial())  # the same theta_0 for every run
    for W, b in net.split(theta):
        limit = np.sqrt(6.0 / sum(W.shape))
        assert np.abs(W).max() <= limit and np.abs(W).max() > 0.8 * limit
        assert not b.any()
    other = Network.from_config(
        {"kind": "mlp", "hidden": [50, 20], "init": {"kind": "glorot", "seed": 1}}, 40, 3
    )
    assert not np.array_equal(other.initial(), theta)
    assert not Network.from_config({}, 40, 3).initial().any()
    normal = Network.from_config({"init": {"kind": "normal", "std": 0.5, "seed": 0}}, 2000, 1)
    assert abs(normal.initial().std() - 0.5) < 0.03


def test_truncated_normal_init_is_tensorflows():
    # the gradient-sparsification authors' code: tf.truncated_normal(stddev=0.1) weights, 0.1 biases
    model = cfg({"kind": "mlp", "hidden": [300], "init": "truncated_normal"})["model"]
    assert model["init"] == {"kind": "truncated_normal", "std": 0.1, "biases": 0.1, "seed": 0}
    net = Network.from_config(model, 784, 10)
    theta = net.initial()
    assert np.array_equal(theta, net.initial())
    weights = np.concatenate([W.ravel() for W, _ in net.split(theta)])
    assert np.abs(weights).max() <= 0.2 and np.abs(weights).max() > 0.199  # redrawn beyond 2 std
    # a normal truncated at 2 std: std 0.8796 sigma, 4.55 % of plain draws would lie beyond
    assert abs(weights.std() - 0.08796) < 0.0005 and abs(weights.mean()) < 0.0005
    assert all(np.all(b == 0.1) for _, b in net.split(theta))
    cnn = normalize(
        {"kind": "cnn", "layers": "leaf_femnist", "init": {"kind": "truncated_normal", "biases": 0}}
    )
    cnn_net = Network.from_config(cnn, 784, 62)
    parts = cnn_net.split(cnn_net.initial())
    assert all(np.abs(W).max() <= 0.2 and W.std() > 0.08 for W, _ in parts)
    assert not any(b.any() for _, b in parts)
    other = {**model, "init": {**model["init"], "seed": 1}}
    assert not np.array_equal(Network.from_config(other, 784, 10).initial(), theta)
    assert run_id(cfg({"kind": "mlp"})) != run_id(cfg({"kind": "mlp", "init": "truncated_normal"}))


def test_init_file(tmp_path):
    net_cfg = {"kind": "mlp", "hidden": [4]}
    n = Network.from_config(net_cfg, 3, 2).n_params
    theta = np.linspace(-1, 1, n)
    np.save(tmp_path / "theta0.npy", theta)
    model = cfg({**net_cfg, "init": {"kind": "file", "path": str(tmp_path / "theta0.npy")}})
    net = Network.from_config(model["model"], 3, 2)
    assert np.array_equal(net.initial().ravel(), theta)
    # the same file elsewhere is the same run
    (tmp_path / "copy").mkdir()
    np.save(tmp_path / "copy" / "t.npy", theta)
    moved = cfg({**net_cfg, "init": {"kind": "file", "path": str(tmp_path / "copy" / "t.npy")}})
    assert run_id(moved) == run_id(model)
    np.save(tmp_path / "short.npy", theta[:-1])
    with pytest.raises(ConfigError, match=r"^model.init.path: .*short.npy: must be a 1-D array"):
        load_init_file(str(tmp_path / "short.npy"), n)
    np.save(tmp_path / "f32.npy", theta.astype(np.float32))
    with pytest.raises(ConfigError, match="dtype must be float64"):
        load_init_file(str(tmp_path / "f32.npy"), n)
    (tmp_path / "junk.npy").write_bytes(b"not numpy")
    with pytest.raises(ConfigError, match="not a readable .npy"):
        load_init_file(str(tmp_path / "junk.npy"), n)
    np.save(tmp_path / "theta0.npy", theta + 1)  # edited after the config was read
    with pytest.raises(ConfigError, match="changed since"):
        Network.from_config(model["model"], 3, 2).initial()


def test_every_hyperparameter_has_one_type_and_no_collision():
    declared = {name: TRACE_SCHEMA.field(name).type for name in HYPERPARAMETER_COLUMNS}
    assert declared == {name: RUNS_SCHEMA.field(name).type for name in HYPERPARAMETER_COLUMNS}
    kinds = {int: pa.int64(), float: pa.float64(), str: pa.string()}
    seen: dict[str, pa.DataType] = {}
    for cls in ALGORITHMS.values():
        for h in cls.hyperparameters:
            assert h.name in declared, f"{cls.name}.{h.name} has no results column"
            assert declared[h.name] == kinds[h.kind], f"{cls.name}.{h.name}: type differs"
            assert seen.setdefault(h.name, kinds[h.kind]) == kinds[h.kind]
    others = [n for n in TRACE_SCHEMA.names + RUNS_SCHEMA.names if n not in declared]
    assert not set(declared) & set(others)
    assert len(set(TRACE_SCHEMA.names)) == len(TRACE_SCHEMA.names)
    assert len(set(RUNS_SCHEMA.names)) == len(RUNS_SCHEMA.names)


def test_writes_are_strict():
    with pytest.raises(ValueError, match="not in the results schema: surprise"):
        trace_table([{"run_id": "a", "round": 0, "surprise": 1.0}])
    t = rows_table([{"run_id": "a", "data_alpha": 0.5}], RUNS_SCHEMA)
    assert t.column("data_alpha").to_pylist() == [0.5]


def test_old_runs_tables_are_upgraded():
    old = pa.table(
        {
            "run_id": ["a", "b"],
            "alpha": [0.5, None],
            "beta": [1.0, None],
            "final_objective": [1.0, 2.0],
        }
    )
    new = upgrade(old, RUNS_SCHEMA)
    assert new.schema.names[: len(RUNS_SCHEMA.names)] == RUNS_SCHEMA.names
    assert new.column("data_alpha").to_pylist() == [0.5, None]
    assert new.column("data_beta").to_pylist() == [1.0, None]
    assert new.column("model").to_pylist() == ["linear", "linear"]
    assert new.column("stepsize").null_count == 2
    traces = upgrade(pa.table({"run_id": ["a"], "round": [0], "dataset": ["x"]}), TRACE_SCHEMA)
    assert traces.column("pm_objective").to_pylist() == [None]


# Traces recorded by the release before the model layer (objective per round, as hex floats).
# Compared at 1e-13, not bit for bit: the dot products are vectorised, so another CPU's vector
# width may change the last bits (the README says so); on one machine they are bit-identical.
RECORDED = [
    (
        {
            "dataset": dict(SIM, dim=40, support=5, clients=6, samples_per_client=20),
            "algorithm": "fedht",
            "params": {"stepsize": 0.01, "sparsity": 5, "local_steps": 3, "batch_size": 4},
            "rounds": 8,
        },
        "6db3aab4fd0d1e14",
        "0x1.f57efc247062ep+2 0x1.a67b7d655a39ap+2 0x1.735a3dbc2f706p+2 0x1.469656487d6d9p+2 "
        "0x1.255aff91fa978p+2 0x1.14bdee0e3aa71p+2 0x1.02d4550cdbbb2p+2 0x1.ea0f88b4238e0p+1 "
        "0x1.d439989ebba51p+1",
    ),
    (
        {
            "dataset": {
                "kind": "synthetic",
                "task": "logistic",
                "clients": 4,
                "samples_per_client": 50,
                "dim": 30,
                "support": 5,
                "positives": 20,
            },
            "model": {"loss": "logistic"},
            "algorithm": "fediterht",
            "params": {"stepsize": 0.05, "sparsity": 6, "local_steps": 2, "batch_size": "full"},
            "rounds": 5,
            "eval_every": 2,
        },
        "4e48859d6eb1de66",
        "0x1.62e42fefa39e9p-1 0x1.5e5bc3c3afc14p-1 0x1.5abde953baabap-1 0x1.593e236dd40f9p-1",
    ),
]


@pytest.mark.parametrize("raw,rid,objectives", RECORDED)
def test_linear_traces_are_those_of_the_release_before(raw, rid, objectives):
    from fedsparse.training.experiment import run

    trace = run(raw)
    assert (trace["run_id"] == rid).all()
    expected = [float.fromhex(v) for v in objectives.split()]
    np.testing.assert_allclose(trace["objective"].to_numpy(float), expected, rtol=1e-13)
    assert (trace["model"] == "linear").all() and trace["pm_objective"].isna().all()


# How the kernels name the fields of Problem.kernel_model, in its order: an algorithm passes
# ``*problem.kernel_model`` (``*problem.kernel_model.linear``: the last two) into these slots.
KERNEL_MODEL_ARGS = ("sizes", "bias", "act", "loss", "l2")


def kernel_parameters(kernel) -> list[str]:
    import inspect

    return list(inspect.signature(getattr(kernel, "py_func", kernel)).parameters)


def test_the_kernel_model_bundle_is_in_the_kernels_argument_order():
    from conftest import make_data

    from fedsparse import kernels as K
    from fedsparse.families.gradient_sparsification import kernels as GS
    from fedsparse.families.sfedhp import kernels as KP
    from fedsparse.families.ssca import kernels as KS
    from fedsparse.kernels import prox
    from fedsparse.objective.model import ACTIVATIONS
    from fedsparse.objective.problem import KernelModel, Problem

    assert KernelModel._fields == ("sizes", "bias", "activation_code", "loss_code", "l2")
    network_kernels = [
        K.mlp_batch_grad,
    ]
    for kernel in network_kernels:
        names = kernel_parameters(kernel)
        at = names.index("sizes")
        assert tuple(names[at : at + 5]) == KERNEL_MODEL_ARGS, kernel.__name__
    # kernels of either kind of model take Problem.step_model, one StepModel argument
    either_kernels = [
        K.mlp_local_sgd_round,
        K.local_sgd_round,
        K.local_sgd_cohort_round,
        K.local_sgd_round_csr,
        GS.accumulate_offers,
        prox.prox_steps,
        prox.prox_steps_cohort,
        KP.sfedhp_round,
        KP.sfedhp_cohort_round,
        KP.pfedme_round,
        KP.pfedme_cohort_round,
        KP.hierfavg_round,
        KP.hierfavg_cohort_round,
    ]
    for kernel in either_kernels:
        names = kernel_parameters(kernel)
        assert "model" in names and "network" not in names, kernel.__name__
    assert prox.StepModel._fields == ("network", *KERNEL_MODEL_ARGS)
    # and SSCA's client kernels take Problem.kernel_model itself, one argument
    for kernel in [KS.client_batch_grads, KS.client_batch_grads_cohort]:
        names = kernel_parameters(kernel)
        assert "model" in names and "sizes" not in names, kernel.__name__
    linear_kernels = [
        K.batch_grad,
    ]
    for kernel in linear_kernels:
        names = kernel_parameters(kernel)
        at = names.index("loss")
        assert tuple(names[at : at + 2]) == KERNEL_MODEL_ARGS[3:], kernel.__name__

    model = {"kind": "mlp", "hidden": [5], "activation": "tanh", "bias": True}
    pb = Problem(make_data("softmax"), "softmax", 1e-3, model=model)
    km = pb.kernel_model
    np.testing.assert_array_equal(km.sizes, pb.network.kernel_sizes())
    assert km.bias is pb.network.bias is True
    assert km.activation_code == ACTIVATIONS.index("tanh")
    assert km.loss_code == K.LOSS_CODES["softmax"]
    assert km.l2 == pb.l2 == 1e-3 and km.linear == (km.loss_code, km.l2)
    assert pb.step_model.network is True and pb.step_model[1:] == tuple(km)
    assert isinstance(pb.step_model, prox.StepModel) and pb.step_model is pb.step_model
    assert pb.parameter_noun == "number of model parameters" and not pb.is_linear
    linear = Problem(make_data("softmax"), "softmax", 1e-3)
    assert linear.is_linear and linear.step_model.network is False
    assert linear.parameter_noun == "dimension"


def test_no_compiled_kernel_takes_more_than_twelve_arguments():
    """Kernels take the model, their constants and their outputs as named tuples (or pairs),
    not as long loose argument lists: every numba-compiled function of the package (``njit``,
    and the implementations of ``overload``) takes at most 12 parameters."""
    import ast
    from pathlib import Path

    import fedsparse

    root = Path(fedsparse.__file__).parent
    long = []
    for source in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(source.read_text())):
            if not isinstance(node, ast.FunctionDef):
                continue
            decorators = {ast.unparse(d).split("(")[0] for d in node.decorator_list}
            if not decorators & {"njit", "numba.njit", "overload"}:
                continue
            args = node.args
            count = len(args.posonlyargs) + len(args.args) + len(args.kwonlyargs)
            if count > 12:
                long.append(f"{source.relative_to(root)}:{node.name} ({count})")
    assert not long, long


def test_no_family_branches_on_the_kind_of_model():
    """The linear-vs-network switch lives behind the Problem: no family's algorithms read
    ``fast_linear`` (they ask ``is_linear``/``parameter_noun`` where they must know) or call
    a model-specific kernel themselves."""
    import ast
    from pathlib import Path

    import fedsparse.families

    root = Path(fedsparse.families.__file__).parent
    sources = sorted(root.glob("*/algorithms.py"))
    assert len(sources) >= 5
    # the model-specific kernels (local_sgd_round and prox_steps are also the Problem's
    # methods' names, so they are not listed)
    forbidden = {
        "fast_linear",
        "batch_grad",
        "mlp_batch_grad",
        "mlp_local_sgd_round",
        "local_sgd_round_csr",
        "thread_buffers",
        "mlp_prox_steps",
        "accumulate_offers_mlp",
    }
    for source in sources:
        tree = ast.parse(source.read_text())
        read = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
        read |= {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
        assert not read & forbidden, (source.parent.name, sorted(read & forbidden))


def test_work_space_grows_to_the_largest_batch_and_never_shrinks():
    from conftest import make_data

    from fedsparse.objective.problem import Problem

    data = make_data("softmax")  # clients of 10, 17, 25 and 13 rows
    net = Problem(data, "softmax", 1e-3, model={"kind": "mlp", "hidden": [4]})
    work = net.local_work()
    first = work.for_batch(5)
    assert work.rows == 5 and work.for_batch(3) is first  # smaller: the same buffers
    assert work.for_batch(0) is not first and work.rows == 25  # a full batch: the largest client
    assert work.for_batch(100) is work.buffers and work.rows == 25  # capped at the largest
    linear = Problem(data, "softmax", 1e-3).local_work()
    buffers = linear.for_batch(1)
    assert linear.for_batch(0) is buffers  # a linear model's buffers do not depend on rows


@pytest.mark.parametrize("model", [{}, {"kind": "mlp", "hidden": [4], "bias": False}])
def test_minibatch_grad_is_the_models_kernel(model):
    from conftest import make_data

    from fedsparse import kernels as K
    from fedsparse.objective.problem import Problem

    pb = Problem(make_data("softmax"), "softmax", 1e-3, model=model)
    W = pb.initial_model() + 0.1
    rows = np.array([0, 3, 7], np.int64)
    G = np.empty(pb.shape)
    value = pb.minibatch_grad(W, rows, G, pb.grad_work(3))
    d, expected = pb.data, np.empty(pb.shape)
    if pb.is_linear:
        want = K.batch_grad(
            d.kernel_X, d.y, rows, W, *pb.kernel_model.linear, expected, np.zeros(3)
        )
    else:
        work = K.mlp_work(pb.sizes, 3)
        want = K.mlp_batch_grad(d.kernel_X, d.y, rows, W[0], *pb.kernel_model, expected[0], work)
    assert value == want
    np.testing.assert_array_equal(G, expected)
    assert pb.minibatch_grad(W, rows[:0], G, None) == 0.0
    np.testing.assert_array_equal(G, pb.l2 * W)
