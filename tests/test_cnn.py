"""Convolutional networks: layers against a plain NumPy CNN and central differences, the
dense-only CNN against the MLP, thread-count determinism, bad layer specs, every algorithm
on a cnn, and `fedsparse run` training one on (a slice of) Fashion-MNIST."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import numba
import numpy as np
import pyarrow.parquet as pq
import pytest
import scipy.sparse as sp
import yaml
from conftest import np_act, np_per_sample

from fedsparse import kernels as K
from fedsparse.algorithms import ALGORITHMS
from fedsparse.data import FederatedData
from fedsparse.errors import ConfigError
from fedsparse.kernels import cnn as C
from fedsparse.kernels.prox import StepModel
from fedsparse.objective.model import Network, normalize
from fedsparse.objective.problem import Problem
from fedsparse.training.config import normalize_run_config, run_id

# ---------------------------------------------------------------------------
# A plain NumPy CNN, written from the layout in fedsparse.objective.model's docstring: feature maps
# (n, h, w, c); conv W (out, k, k, c_in); convolution as a sum over the kernel's offsets
# of strided slices of the zero-padded input (no im2col); pools by reshaping into tiles.


def np_conv(x, W, b, layer):
    """Outputs of a convolution and the padded input (for the backward pass)."""
    (oh, ow, _), k, s, (pt, pl) = layer.outs, layer.size, layer.stride, layer.pad
    n, h, w, c = x.shape
    hp, wp = max((oh - 1) * s + k, h + pt), max((ow - 1) * s + k, w + pl)
    xp = np.zeros((n, hp, wp, c))
    xp[:, pt : pt + h, pl : pl + w] = x
    z = np.zeros((n, oh, ow, W.shape[0]))
    for ky in range(k):
        for kx in range(k):
            patch = xp[:, ky : ky + (oh - 1) * s + 1 : s, kx : kx + (ow - 1) * s + 1 : s]
            z += np.einsum("nhwc,oc->nhwo", patch, W[:, ky, kx, :])
    return z + (0.0 if b is None else b), xp


def np_conv_back(dz, xp, W, layer, in_shape):
    """Gradients of W, b and of the (unpadded) input."""
    (oh, ow, _), k, s, (pt, pl) = layer.outs, layer.size, layer.stride, layer.pad
    dW = np.zeros_like(W)
    dxp = np.zeros_like(xp)
    for ky in range(k):
        for kx in range(k):
            sl = (
                slice(None),
                slice(ky, ky + (oh - 1) * s + 1, s),
                slice(kx, kx + (ow - 1) * s + 1, s),
            )
            dW[:, ky, kx, :] = np.einsum("nhwo,nhwc->oc", dz, xp[sl])
            dxp[sl] += np.einsum("nhwo,oc->nhwc", dz, W[:, ky, kx, :])
    h, w = in_shape[1], in_shape[2]
    return dW, dz.sum(axis=(0, 1, 2)), dxp[:, pt : pt + h, pl : pl + w]


def np_pool(x, layer):
    n, h, w, c = x.shape
    q = layer.size
    tiles = x.reshape(n, h // q, q, w // q, q, c).transpose(0, 1, 3, 5, 2, 4)
    tiles = tiles.reshape(n, h // q, w // q, c, q * q)  # window in row-major order
    if layer.kind == "avg":
        return tiles.mean(axis=-1), None
    arg = tiles.argmax(axis=-1)  # the first maximum, as the kernel's winner
    return np.take_along_axis(tiles, arg[..., None], -1)[..., 0], arg


def np_pool_back(dz, arg, layer, in_shape):
    n, h, w, c = in_shape
    q = layer.size
    if layer.kind == "avg":
        tiles = np.repeat(dz[..., None], q * q, axis=-1) / (q * q)
    else:
        tiles = np.zeros(dz.shape + (q * q,))
        np.put_along_axis(tiles, arg[..., None], dz[..., None], -1)
    tiles = tiles.reshape(n, h // q, w // q, c, q, q).transpose(0, 1, 4, 2, 5, 3)
    return tiles.reshape(n, h, w, c)


def np_cnn_value_grad(net: Network, theta, X, y, act, loss, l2):
    """Mean loss + l2/2 ||theta||^2 and its flat gradient, by hand-written backprop."""
    params = iter(net.split(theta))
    (h, w, c), first = net.cnn[0].ins, net.cnn[0]
    a = np.asarray(X, dtype=float)
    if first.kind != "dense":
        a = (
            a.reshape(len(y), c, h, w).transpose(0, 2, 3, 1)
            if net.input_order == "chw"
            else (a.reshape(len(y), h, w, c))
        )
    tape = []
    for layer in net.cnn:
        if layer.kind == "conv":
            W2, b = next(params)
            W = W2.reshape(layer.outs[2], layer.size, layer.size, layer.ins[2])
            z, xp = np_conv(a, W, b, layer)
            tape.append((layer, a.shape, (W, b, xp)))
        elif layer.kind == "dense":
            W, b = next(params)
            flat = a.reshape(len(y), -1)
            z = flat @ W.T + (0.0 if b is None else b)
            tape.append((layer, a.shape, (W, b, flat)))
        else:
            z, arg = np_pool(a, layer)
            tape.append((layer, a.shape, arg))
        if layer.act:
            a, da = np_act(act, z)
            tape[-1] = (*tape[-1], da)
        else:
            a = z
            tape[-1] = (*tape[-1], None)
    per, delta = np_per_sample(a, y, loss)
    delta = delta / len(y)
    grads = []
    for layer, in_shape, saved, da in reversed(tape):
        if da is not None:
            delta = delta * da
        if layer.kind == "conv":
            W, b, xp = saved
            dW, db, delta = np_conv_back(delta, xp, W, layer, in_shape)
            grads += [db, dW] if b is not None else [dW]
        elif layer.kind == "dense":
            W, b, flat = saved
            grads += [delta.sum(axis=0), delta.T @ flat] if b is not None else [delta.T @ flat]
            delta = (delta @ W).reshape(in_shape)
        else:
            delta = np_pool_back(delta, saved, layer, in_shape)
    g = np.concatenate([v.ravel() for v in reversed(grads)])
    return per.mean() + 0.5 * l2 * theta @ theta, g + l2 * theta


# ---------------------------------------------------------------------------
# Helpers


def network(layers, shape, n_out=3, order="chw", **model):
    cfg = normalize(
        {"kind": "cnn", "layers": layers, "input": list(shape), "input_order": order, **model}
    )
    return Network.from_config(cfg, int(np.prod(shape)), n_out)


def labels(loss, n, rng, n_out=3):
    if loss == "softmax":
        return rng.integers(0, n_out, n).astype(float)
    if loss == "logistic":
        return rng.choice([-1.0, 1.0], n)
    return rng.standard_normal(n)


def kernel_value_grad(net, theta, X, y, rows, act, loss, l2, max_batch=None):
    spec = net.kernel_sizes()
    work = K.mlp_work(spec, max_batch or len(rows))
    for buf in work:
        buf[:] = np.nan  # stale work space must not leak into results
    G = np.full(theta.size, 7.0)
    if not isinstance(X, tuple):  # read-only, as a run passes its data (one signature)
        X = K.as_kernel_matrix(X)
    value = K.mlp_batch_grad(
        X, y, rows, theta, spec, net.bias, K.ACTIVATIONS[act], K.LOSS_CODES[loss], l2, G, work
    )
    return value, G


CONV = {"conv": {"out": 4, "kernel": 3, "stride": 1, "padding": "same"}}
# (layers, input (h, w, c), input order): strides 1-3, every padding, odd and non-square
# sizes, channels > 1 in and out, max and avg pools, pools after pools, a conv after a pool.
GEOMETRIES = [
    ([CONV, {"pool": {"kind": "max", "size": 2}}, {"dense": 5}], (6, 8, 1), "chw"),
    ([{"conv": {"out": 3, "kernel": 3, "stride": 2, "padding": "valid"}}], (7, 9, 2), "hwc"),
    (
        [
            {"conv": {"out": 3, "kernel": 4, "stride": 2, "padding": "same"}},
            {"conv": {"out": 2, "kernel": 2, "stride": 1, "padding": 1}},
        ],
        (7, 5, 3),
        "chw",
    ),
    (
        [
            {"conv": {"out": 2, "kernel": 3, "stride": 3, "padding": 2}},
            {"pool": {"kind": "avg", "size": 2}},
        ],
        (8, 8, 2),
        "chw",
    ),
    (
        [
            {"pool": {"kind": "max", "size": 3}},
            {"conv": {"out": 5, "kernel": 3, "padding": "same"}},
            {"pool": {"kind": "avg", "size": 3}},
            {"dense": 4},
        ],
        (9, 9, 3),
        "hwc",
    ),
    (
        [
            {"conv": {"out": 3, "kernel": 5, "padding": "valid"}},
            {"pool": {"kind": "max", "size": 1}},
            {"pool": {"kind": "max", "size": 3}},
        ],
        (7, 7, 1),
        "chw",
    ),
]


# ---------------------------------------------------------------------------
# Layers against NumPy and central differences


@pytest.mark.parametrize("layers,shape,order", GEOMETRIES)
@pytest.mark.parametrize(
    "loss,act", [("softmax", "relu"), ("logistic", "tanh"), ("least_squares", "swish")]
)
def test_cnn_gradient_matches_numpy(layers, shape, order, loss, act):
    rng = np.random.default_rng(0)
    n_out = 3 if loss == "softmax" else 1
    net = network(layers, shape, n_out, order)
    n = 11
    X = rng.standard_normal((n, int(np.prod(shape))))
    y = labels(loss, n, rng)
    theta = 0.5 * rng.standard_normal(net.n_params)
    rows = np.array([3, 0, 7, 10, 7, 2], dtype=np.int64)  # a repeated row counts twice
    want_v, want_g = np_cnn_value_grad(net, theta, X[rows], y[rows], act, loss, 1e-3)
    got_v, got_g = kernel_value_grad(net, theta, X, y, rows, act, loss, 1e-3, max_batch=9)
    assert got_v == pytest.approx(want_v, rel=1e-12)
    np.testing.assert_allclose(got_g, want_g, rtol=1e-10, atol=1e-12)
    # CSR rows give the same (the input is scattered into a dense block)
    csr = K.as_kernel_matrix(sp.csr_matrix(np.where(np.abs(X) < 0.5, 0.0, X)))
    dense_X = np.where(np.abs(X) < 0.5, 0.0, X)
    a = kernel_value_grad(net, theta, csr, y, rows, act, loss, 0.0)
    b = kernel_value_grad(net, theta, dense_X, y, rows, act, loss, 0.0)
    assert a[0] == b[0] and np.array_equal(a[1], b[1])


@pytest.mark.parametrize("layers,shape,order", GEOMETRIES[:5])
def test_cnn_gradient_central_differences(layers, shape, order):
    """Smooth activation, so every coordinate's difference quotient is the derivative
    (random inputs: a max pool's winner is unique and stays put under the step)."""
    rng = np.random.default_rng(1)
    net = network(layers, shape, 3, order)
    X = rng.standard_normal((6, int(np.prod(shape))))
    y = labels("softmax", 6, rng)
    theta = 0.5 * rng.standard_normal(net.n_params)
    rows = np.arange(6, dtype=np.int64)
    _, g = kernel_value_grad(net, theta, X, y, rows, "tanh", "softmax", 0.01)
    h = 1e-6
    pick = rng.choice(net.n_params, min(net.n_params, 60), replace=False)
    for j in pick:
        e = np.zeros_like(theta)
        e[j] = h
        up = kernel_value_grad(net, theta + e, X, y, rows, "tanh", "softmax", 0.01)[0]
        down = kernel_value_grad(net, theta - e, X, y, rows, "tanh", "softmax", 0.01)[0]
        assert (up - down) / (2 * h) == pytest.approx(g[j], rel=1e-5, abs=1e-8)


def test_conv_and_pool_layers_alone_match_numpy():
    """im2col/col2im and the pools, one layer at a time, against the NumPy layers."""
    rng = np.random.default_rng(2)
    for layers, shape, _ in GEOMETRIES:
        net = network(layers, shape, 3, "hwc")
        spec = net.kernel_sizes()
        b = 3
        a = rng.standard_normal((b, *shape))
        for n, layer in enumerate(net.cnn[:-1], start=1):
            row = spec[n]
            flat = a.reshape(-1).copy()
            if layer.kind == "conv":
                W = rng.standard_normal((layer.outs[2], layer.size, layer.size, layer.ins[2]))
                want, xp = np_conv(a, W, None, layer)
                cols = np.empty(b * layer.outs[0] * layer.outs[1] * W[0].size)
                C.im2col(flat, row, 0, b, cols)
                got = cols.reshape(-1, W[0].size) @ W.reshape(W.shape[0], -1).T
                np.testing.assert_allclose(got.reshape(want.shape), want, rtol=1e-12)
                dz = rng.standard_normal(want.shape)
                _, _, want_dx = np_conv_back(dz, xp, W, layer, a.shape)
                dcols = (dz.reshape(-1, W.shape[0]) @ W.reshape(W.shape[0], -1)).ravel()
                dx = np.zeros(flat.size)
                C.col2im(dcols, row, 0, b, dx)
                np.testing.assert_allclose(dx.reshape(a.shape), want_dx, rtol=1e-12, atol=1e-12)
            elif layer.kind != "dense":
                want, arg = np_pool(a, layer)
                out = np.empty(want.size)
                D = np.empty(want.size)
                C._pool_forward(flat, row, b, out, D)
                np.testing.assert_allclose(out.reshape(want.shape), want, rtol=1e-15)
                dz = rng.standard_normal(want.shape)
                dx = np.full(flat.size, np.nan)
                C._pool_backward(row, b, dz.ravel(), D, dx)
                np.testing.assert_allclose(
                    dx.reshape(a.shape), np_pool_back(dz, arg, layer, a.shape), rtol=1e-14
                )
                want = want.reshape(b, *layer.outs)
            else:
                break
            a = want.reshape(b, *layer.outs)


# ---------------------------------------------------------------------------
# Dense-only CNN = MLP; determinism


def test_dense_only_cnn_equals_the_mlp():
    rng = np.random.default_rng(3)
    d, n = 12, 30
    cnn = network([{"dense": 6}, {"dense": 4}], (2, 2, 3), 3, activation="swish")
    mlp = Network.from_config(
        normalize({"kind": "mlp", "hidden": [6, 4], "activation": "swish"}), d, 3
    )
    assert cnn.n_params == mlp.n_params and np.array_equal(cnn.initial(), mlp.initial())
    assert cnn.label == "cnn-d6-d4-swish"
    X = rng.standard_normal((n, d))
    y = labels("softmax", n, rng)
    theta = 0.5 * rng.standard_normal(cnn.n_params)
    rows = np.array([1, 5, 5, 20], dtype=np.int64)
    a = kernel_value_grad(cnn, theta, X, y, rows, "swish", "softmax", 0.01)
    b = kernel_value_grad(mlp, theta, X, y, rows, "swish", "softmax", 0.01)
    assert a[0] == b[0] and np.array_equal(a[1], b[1])
    ptr = np.array([0, 10, 30], dtype=np.int64)
    outs = []
    for net in (cnn, mlp):
        outs.append(local_round(net, theta, X, y, ptr) + evaluate(net, theta, X, y, ptr))
    for u, v in zip(*outs, strict=True):
        assert np.array_equal(u, v)


def local_round(net, theta, X, y, ptr, steps=3, batch=4):
    spec = net.kernel_sizes()
    n_clients = ptr.shape[0] - 1
    local = np.empty((n_clients, theta.size))
    perm = np.arange(y.shape[0], dtype=np.int64)
    rng = K.client_states(5, n_clients)
    work = K.mlp_thread_work(spec, batch)
    K.mlp_local_sgd_round(
        K.as_kernel_matrix(X),
        y,
        ptr,
        theta,
        local,
        perm,
        rng,
        K.SGDConstants(steps, batch, 0, 0.1),
        StepModel(
            True, spec, net.bias, K.ACTIVATIONS[net.activation], K.LOSS_CODES["softmax"], 0.01
        ),
        work,
        np.array([0, theta.size]),
    )
    return [local]


def evaluate(net, theta, X, y, ptr, block=7):
    loss_sum = np.empty(ptr.shape[0] - 1)
    correct = np.empty(ptr.shape[0] - 1, np.int64)
    K.mlp_eval(
        K.as_kernel_matrix(X),
        y,
        ptr,
        theta[None],
        np.zeros(ptr.shape[0] - 1, np.int64),
        net.kernel_sizes(),
        net.bias,
        K.ACTIVATIONS[net.activation],
        K.LOSS_CODES["softmax"],
        block,
        loss_sum,
        correct,
    )
    return [loss_sum, correct]


def test_eval_and_local_round_match_numpy_and_do_not_depend_on_threads():
    rng = np.random.default_rng(4)
    layers, shape, order = GEOMETRIES[4]
    net = network(layers, shape, 3, order)
    n = 40
    X = rng.standard_normal((n, int(np.prod(shape))))
    y = labels("softmax", n, rng)
    theta = 0.5 * rng.standard_normal(net.n_params)
    ptr = np.array([0, 3, 25, 40], dtype=np.int64)
    loss_sum, correct = evaluate(net, theta, X, y, ptr)
    for i in range(3):
        rows = np.arange(ptr[i], ptr[i + 1])
        v, _ = np_cnn_value_grad(net, theta, X[rows], y[rows], "relu", "softmax", 0.0)
        assert loss_sum[i] == pytest.approx(v * rows.size, rel=1e-12)
    assert 0 <= correct.sum() <= n
    # a local round equals one SGD step at a time through mlp_batch_grad
    local = local_round(net, theta, X, y, ptr, steps=2, batch=5)[0]
    perm = np.arange(n, dtype=np.int64)
    states = K.client_states(5, 3)
    for i in range(3):
        t = theta.copy()
        lo, m = ptr[i], ptr[i + 1] - ptr[i]
        for _ in range(2):
            b = min(5, m)
            if b < m:
                K.sample_without_replacement(perm, lo, m, b, states, i)
            _, g = kernel_value_grad(net, t, X, y, perm[lo : lo + b], "relu", "softmax", 0.01)
            t = t - 0.1 * g
        np.testing.assert_allclose(local[i], t, rtol=1e-12, atol=1e-13)
    # bit-identical for any number of numba threads
    before = numba.get_num_threads()
    results = []
    try:
        for threads in (1, before):
            numba.set_num_threads(threads)
            results.append(local_round(net, theta, X, y, ptr) + evaluate(net, theta, X, y, ptr))
    finally:
        numba.set_num_threads(before)
    for u, v in zip(*results, strict=True):
        assert np.array_equal(u, v)


# ---------------------------------------------------------------------------
# Configs


def test_presets_and_layout():
    net = Network.from_config(normalize({"kind": "cnn", "layers": "leaf_femnist"}), 784, 10)
    assert net.label == "cnn-leaf_femnist-relu"
    assert [(layer.kind, layer.outs) for layer in net.cnn] == [
        ("conv", (28, 28, 32)),
        ("max", (14, 14, 32)),
        ("conv", (14, 14, 64)),
        ("max", (7, 7, 64)),
        ("dense", (1, 1, 2048)),
        ("dense", (1, 1, 10)),
    ]
    assert net.layers == [(32, 25), (64, 800), (2048, 3136), (10, 2048)]
    assert net.n_params == 832 + 51_264 + 6_424_576 + 20_490
    assert list(net.layer_bounds) == [0, 832, 52_096, 6_476_672, 6_497_162]
    lenet = Network.from_config(normalize({"kind": "cnn", "layers": "cifar_lenet"}), 3072, 10)
    assert lenet.cnn[0].ins == (32, 32, 3) and lenet.cnn[3].outs == (5, 5, 16)
    assert lenet.n_params == 62_006  # LeNet-5 on CIFAR-10, as PyTorch's tutorial counts it
    # glorot with a convolution's fans (kernel^2 * channels)
    W1 = net.split(net.initial())[0][0]
    limit = np.sqrt(6.0 / (25 + 25 * 32))
    assert np.abs(W1).max() <= limit and np.abs(W1).max() > 0.9 * limit


def cnn_cfg(model, dataset=None):
    raw = {
        "dataset": dataset or {"kind": "idx", "source": "fashion-mnist"},
        "partition": {"kind": "iid", "clients": 4},
        "model": {"loss": "softmax", "kind": "cnn", **model},
        "algorithm": "fedavg",
        "params": {"stepsize": 0.05, "local_steps": 2},
        "rounds": 2,
    }
    return normalize_run_config(raw)


def test_cnn_config_is_explicit_and_presets_expand():
    a = cnn_cfg({"layers": "leaf_femnist"})
    b = cnn_cfg(
        {
            "layers": [
                {"conv": {"out": 32, "kernel": 5, "padding": "same"}},
                {"pool": {"size": 2}},
                {"conv": {"out": 64, "kernel": 5, "stride": 1, "padding": "same"}},
                {"pool": {"kind": "max"}},
                {"dense": 2048},
            ]
        }
    )
    assert a == b and run_id(a) == run_id(b)
    assert a["model"]["layers"][0] == {
        "conv": {"out": 32, "kernel": 5, "stride": 1, "padding": "same"}
    }
    assert a["model"]["activation"] == "relu" and a["model"]["bias"] is True
    assert run_id(cnn_cfg({"layers": "leaf_femnist", "bias": False})) != run_id(a)


@pytest.mark.parametrize(
    "model,message",
    [
        ({"layers": "leaf_femnst"}, r"model.layers: unknown preset 'leaf_femnst'; did you mean"),
        ({}, r"model.layers: required"),
        ({"layers": []}, r"model.layers: must be"),
        ({"layers": [{"conv": {"out": 0, "kernel": 3}}]}, r"model.layers\[0\].conv.out: must be"),
        ({"layers": [{"conv": {"kernel": 3}}]}, r"model.layers\[0\].conv.out: required"),
        (
            {"layers": [{"conv": {"out": 2, "kernel": 3, "padding": "full"}}]},
            r"model.layers\[0\].conv.padding",
        ),
        (
            {"layers": [{"conv": {"out": 2, "kernel": 3, "dilation": 2}}]},
            r"model.layers\[0\].conv.dilation: unknown key",
        ),
        ({"layers": [{"dense": 0}]}, r"model.layers\[0\].dense: must be"),
        ({"layers": [{"dropout": 0.5}]}, r"model.layers\[0\].dropout: unknown layer"),
        ({"layers": [{"pool": {"kind": "min"}}]}, r"model.layers\[0\].pool.kind"),
        ({"layers": [{"dense": 4}, {"pool": {"size": 2}}]}, r"model.layers\[1\].pool: a pool"),
        # the checks that need the images' shape: at config time for a registry source
        (
            {"layers": [{"conv": {"out": 2, "kernel": 29}}]},
            r"model.layers\[0\].conv.kernel: 29 is larger than the 28x28 input",
        ),
        (
            {"layers": [{"conv": {"out": 2, "kernel": 29, "padding": "same"}}]},
            r"model.layers\[0\].conv.kernel: 29 is larger",
        ),
        (
            {"layers": [{"pool": {"size": 2}}, {"pool": {"size": 2}}, {"pool": {"size": 2}}]},
            r"model.layers\[2\].pool.size: 2 does not divide the 7x7 input",
        ),
        (
            {"layers": [{"conv": {"out": 2, "kernel": 3}}], "input": [28, 28, 2]},
            r"model.input: 28x28x2 = 1568 values, but the data's rows have 784",
        ),
        (
            {"layers": [{"conv": {"out": 2, "kernel": 3}}], "input_order": "nchw"},
            r"model.input_order",
        ),
        ({"layers": "leaf_femnist", "hidden": [10]}, r"model.hidden: not for model.kind cnn"),
    ],
)
def test_bad_layer_specs_fail_at_config_time_naming_the_key(model, message):
    with pytest.raises(ConfigError, match="^" + message) as info:
        cnn_cfg(model)
    assert "\n" not in str(info.value)


def test_shape_checks_without_a_known_row_length_fail_when_the_problem_is_built():
    """A LEAF folder's row length is known only from its files: the same check, one step
    later (before any round)."""
    data = image_data(np.random.default_rng(0), n=8, shape=(5, 5, 1))
    model = normalize({"kind": "cnn", "layers": [{"conv": {"out": 2, "kernel": 7}}]})
    with pytest.raises(ConfigError, match=r"^model.layers\[0\].conv.kernel: 7 is larger"):
        Problem(data, "softmax", 0.0, model=model)
    with pytest.raises(ConfigError, match=r"^model.input: cannot infer"):
        Problem(
            image_data(np.random.default_rng(0), n=8, shape=(5, 4, 1)), "softmax", 0.0, model=model
        )
    # input given: checked as soon as the model config is
    with pytest.raises(ConfigError, match=r"^model.layers\[0\].conv.kernel: 7 is larger"):
        normalize({**model, "input": [5, 5, 1]})


# ---------------------------------------------------------------------------
# Every algorithm on a cnn


def image_data(rng, n=60, shape=(6, 6, 1), clients=4, classes=3):
    """Images whose class is the brightest of ``classes`` horizontal bands."""
    h, w, c = shape
    y = rng.integers(0, classes, n).astype(float)
    X = 0.3 * rng.standard_normal((n, c, h, w))
    band = max(1, h // classes)
    for i in range(n):
        k = int(y[i])
        X[i, :, k * band : (k + 1) * band, :] += 1.0
    X = X.reshape(n, -1)
    ptr = np.linspace(0, n, clients + 1).astype(np.int64)
    return FederatedData(
        "bands", "multiclass", X, y, ptr, n_classes=classes, X_test=X[: n // 3], y_test=y[: n // 3]
    )


SMALL_CNN = {
    "kind": "cnn",
    "layers": [
        {"conv": {"out": 3, "kernel": 3, "padding": "same"}},
        {"pool": {"size": 2}},
        {"dense": 5},
    ],
    "activation": "tanh",
}


REQUIRED = {"stepsize": 0.05, "sparsity": 40, "k": 40, "cost_limit": 10.0}


@pytest.mark.integration
@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_every_algorithm_runs_on_a_cnn(name):
    """Each algorithm as it is, its defaults and the required keys only: a flat parameter
    vector is all it sees.

    In the integration tier, as the float32 cnn's
    (``test_every_algorithm_runs_on_a_float32_network``): a float64 cnn compiles every
    family's kernels for one more model type. The fast tier runs the float64 cnn's own
    kernels against NumPy (above)."""
    cls = ALGORITHMS[name]
    params = {h.name: REQUIRED[h.name] for h in cls.hyperparameters if h.required}
    problem = Problem(
        image_data(np.random.default_rng(5)), "softmax", 1e-3, model=normalize(SMALL_CNN)
    )
    algo = cls(problem, cls.validate_params(params), 0)
    algo.check_problem()
    algo.setup()
    start = problem.objective(algo.model)
    for t in range(2):
        algo.round(t)
    end = problem.metrics(algo.model)
    assert np.isfinite(end["objective"]) and end["objective"] != start
    assert algo.model.shape == problem.shape == (1, problem.n_params)


# ---------------------------------------------------------------------------
# `fedsparse run`: FedAvg trains a cnn on Fashion-MNIST

FASHION = Path("/usr/share/datasets/fashion-mnist")


def write_idx(path: Path, arr: np.ndarray, magic: int) -> None:
    dims = arr.shape
    head = magic.to_bytes(4, "big") + b"".join(int(d).to_bytes(4, "big") for d in dims)
    with gzip.open(path, "wb") as fh:
        fh.write(head + arr.astype(np.uint8).tobytes())


@pytest.mark.skipif(not FASHION.exists(), reason="Fashion-MNIST is not installed")
def test_fedsparse_run_trains_a_cnn_on_fashion_mnist(tmp_path):
    """Toy size: 2,000 training images, a small cnn, 8 rounds (test accuracy 0.738 here;
    about 30 s). The full check -- leaf_femnist, 60,000 images, 5 IID clients x 40 steps
    of 32, stepsize 0.1, 20 rounds -- reached 0.8605 and takes about half an hour on
    2 cores, too long for a test."""
    from fedsparse.data.idx import IMAGES, LABELS, read_idx

    names = {
        "train-images-idx3-ubyte": 2000,
        "train-labels-idx1-ubyte": 2000,
        "t10k-images-idx3-ubyte": 1000,
        "t10k-labels-idx1-ubyte": 1000,
    }
    for name, rows in names.items():
        src = next(FASHION.glob(name + "*"))
        magic = IMAGES if "images" in name else LABELS
        arr = read_idx(src, magic)[:rows]
        write_idx(
            tmp_path / (name + ".gz"), arr.reshape(-1, 28, 28) if arr.ndim == 2 else arr, magic
        )
    config = {
        "dataset": {"kind": "idx", "path": str(tmp_path)},
        "partition": {"kind": "iid", "clients": 4},
        "model": {
            "loss": "softmax",
            "kind": "cnn",
            "layers": [
                {"conv": {"out": 8, "kernel": 5, "padding": "same"}},
                {"pool": {"size": 2}},
                {"conv": {"out": 16, "kernel": 5, "padding": "same"}},
                {"pool": {"size": 2}},
                {"dense": 64},
            ],
        },
        "algorithm": "fedavg",
        "params": {"stepsize": 0.05, "local_steps": 25, "batch_size": 32},
        "rounds": 8,
        "eval_every": 4,
    }
    (tmp_path / "run.yaml").write_text(yaml.safe_dump(config))
    out = tmp_path / "trace.parquet"
    subprocess.run(
        [sys.executable, "-m", "fedsparse", "run", str(tmp_path / "run.yaml"), "-o", str(out)],
        check=True,
        capture_output=True,
    )
    trace = pq.read_table(out).to_pandas()
    assert list(trace["round"]) == [0, 4, 8]
    assert trace["test_accuracy"].iloc[0] < 0.3
    assert trace["test_accuracy"].iloc[-1] >= 0.65, json.dumps(trace["test_accuracy"].tolist())
    assert trace["model"].iloc[0] == "cnn-c8k5s1same-max2-c16k5s1same-max2-d64-relu"
