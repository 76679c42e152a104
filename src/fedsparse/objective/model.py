"""The model layer: what a parameter vector means, its layout and its starting point.

Three kinds (``model.kind``):

* ``linear`` (the default): W of shape (n_outputs, n_features), one row per class for
  softmax; optionally an intercept (``bias: true``);
* ``mlp``: a fully connected network with hidden widths ``hidden``, activation
  ``activation`` and biases unless ``bias: false``;
* ``cnn``: a convolutional network, ``layers`` a preset name (:data:`PRESETS`) or a list
  of ``{conv: {out, kernel, stride, padding}}``, ``{pool: {kind, size}}`` and
  ``{dense: WIDTH}``, followed by a dense output layer; ``activation`` after every conv
  and hidden dense layer (not after pools), biases as for MLPs. Images are rows of
  ``H * W * C`` values; the shape is ``input: [H, W, C]`` if given, else inferred from
  the row length (``s*s``: s x s x 1, such as IDX's 28 x 28; ``3*s*s``: s x s x 3, such
  as CIFAR-10's 3,072), with ``input_order: chw`` (the default: channel planes, CIFAR-10's
  and PyTorch's order; the same as ``hwc`` for one channel) or ``hwc``.

``dtype`` (networks only): ``float64`` (the default, left out of the canonical config, so
run ids are unchanged) or ``float32``: the network kernels then compute in float32 (the
parameters of the local steps, the input rows, activations and deltas, products by BLAS
sgemm), while the algorithms keep their float64 parameters (the broadcast model is rounded
to float32 for each client's local steps, the clients' results come back exact in float64,
and server arithmetic stays float64), and per-row losses, their sums, norms and H_tau's
selection stay float64. A linear model computes in float64 (``dtype: float32`` is an error
there; ``float64`` is allowed and changes nothing).

Algorithms see the parameters as one float64 array of :attr:`Network.shape`:
(n_outputs, n_features) for a linear model without bias (the hard-thresholding
kernels' fast paths, the sparsity constraint per row), (1, n_params) otherwise. Its
flat, row-major form is the layout of saved models and of ``init: {kind: file}``:
for each layer in order, W_l with shape (out_l, in_l) row-major, then b_l if
``bias``. A convolution's W_l is (out, kernel, kernel, in_channels) row-major, i.e.
(out_l, in_l) with in_l = kernel * kernel * in_channels over (row, column, channel) of
the patch; a dense layer after a feature map reads it flattened as (row, column,
channel) (the first layer of a network reads rows as the data stores them). Pools have
no parameters; per-layer H_tau (``threshold: per_layer``) segments are the layers that
have parameters, in this order.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np

from ..data.kinds import kind_of
from ..errors import ConfigError, did_you_mean

KINDS = ("linear", "mlp", "cnn")
# Every key a model config may hold (config.normalize_model checks against it).
KEYS = ("loss", "l2", "weights", "kind", "hidden", "activation", "bias", "init", "layers")
KEYS += ("input", "input_order", "dtype")
DTYPES = ("float64", "float32")  # model.dtype; the first is the default
POOL_KINDS = ("max", "avg")
INPUT_ORDERS = ("chw", "hwc")
# Named architectures (``layers: NAME``), expanded in the canonical config.
PRESETS: dict[str, list[dict[str, Any]]] = {
    # LEAF's FEMNIST CNN (Caldas et al. 2018, models/femnist/cnn.py): 5x5 convolutions with
    # "same" padding, 2x2 max pools, a 2048-wide dense layer; D = 6,497,162 on 28x28x1
    # with 10 classes, 6,603,710 with FEMNIST's 62.
    "leaf_femnist": [
        {"conv": {"out": 32, "kernel": 5, "stride": 1, "padding": "same"}},
        {"pool": {"kind": "max", "size": 2}},
        {"conv": {"out": 64, "kernel": 5, "stride": 1, "padding": "same"}},
        {"pool": {"kind": "max", "size": 2}},
        {"dense": 2048},
    ],
    # The 2-conv LeNet that FedAvg reproductions train on CIFAR-10 (LeNet-5 as in PyTorch's
    # CIFAR-10 tutorial: valid 5x5 convolutions with 6 and 16 channels, 2x2 max pools, dense
    # 120 and 84); FedAvg's own paper used 64-channel convolutions and 384/192 dense layers
    # on 24x24 crops (write those layers out to run it).
    "cifar_lenet": [
        {"conv": {"out": 6, "kernel": 5, "stride": 1, "padding": "valid"}},
        {"pool": {"kind": "max", "size": 2}},
        {"conv": {"out": 16, "kernel": 5, "stride": 1, "padding": "valid"}},
        {"pool": {"kind": "max", "size": 2}},
        {"dense": 120},
        {"dense": 84},
    ],
}
ACTIVATIONS = ("relu", "swish", "tanh", "sigmoid")
INIT_KINDS = ("zeros", "normal", "glorot", "truncated_normal", "file")
# Defaults of the keys a model config may leave out. Keys equal to their default stay
# out of the canonical form (and so out of the run id): linear configs written before
# the model layer keep their run ids.
DEFAULTS: dict[str, dict[str, Any]] = {
    "linear": {"bias": False, "init": {"kind": "zeros"}},
    "mlp": {
        "hidden": [100],
        "activation": "relu",
        "bias": True,
        "init": {"kind": "glorot", "seed": 0},
    },
    "cnn": {
        "activation": "relu",
        "bias": True,
        "init": {"kind": "glorot", "seed": 0},
    },
}
INIT_DEFAULTS: dict[str, dict[str, Any]] = {
    "zeros": {},
    "normal": {"std": 0.01, "seed": 0},
    "glorot": {"seed": 0},
    # TensorFlow 1's tf.truncated_normal weights and constant biases, as the gradient-
    # sparsification authors' code initialises its networks (std 0.1, biases 0.1)
    "truncated_normal": {"std": 0.1, "biases": 0.1, "seed": 0},
    "file": {"path": None},
}


def normalize(model: dict[str, Any], where: str = "model") -> dict[str, Any]:
    """The structural keys of a model config (kind, hidden, activation, bias, init),
    validated, with the ones equal to their default left out (``kind: linear`` too)."""
    kind = model.get("kind", "linear")
    if kind not in KINDS:
        raise ConfigError(
            f"{where}.kind: unknown model kind {kind!r}{did_you_mean(kind, KINDS)} "
            f"(known: {', '.join(KINDS)})"
        )
    defaults = DEFAULTS[kind]
    if kind == "linear":
        for key in ("hidden", "activation"):
            if key in model:
                raise ConfigError(f"{where}.{key}: only for model.kind mlp")
    if kind != "cnn":
        for key in ("layers", "input", "input_order"):
            if key in model:
                raise ConfigError(f"{where}.{key}: only for model.kind cnn")
    elif "hidden" in model:
        raise ConfigError(f"{where}.hidden: not for model.kind cnn (list dense layers in layers)")
    out: dict[str, Any] = {} if kind == "linear" else {"kind": kind}
    dtype = model.get("dtype", DTYPES[0])
    if not isinstance(dtype, str) or dtype not in DTYPES:
        raise ConfigError(
            f"{where}.dtype: must be float64 or float32, got {dtype!r}"
            f"{did_you_mean(str(dtype), DTYPES)}"
        )
    if dtype != DTYPES[0]:  # the default stays out of the canonical config (and run id)
        if kind == "linear":
            raise ConfigError(
                f"{where}.dtype: {dtype} is for networks (model.kind mlp or cnn); "
                "linear models compute in float64"
            )
        out["dtype"] = dtype
    if kind == "mlp":
        out["hidden"] = _hidden(model.get("hidden", defaults["hidden"]), f"{where}.hidden")
    if kind == "cnn":
        if "layers" not in model:
            raise ConfigError(
                f"{where}.layers: required for model.kind cnn (a preset: {', '.join(PRESETS)}, "
                "or a list of {conv: ...}, {pool: ...}, {dense: WIDTH})"
            )
        out["layers"] = _layers(model["layers"], f"{where}.layers")
        if "input" in model:
            out["input"] = _input_shape(model["input"], f"{where}.input")
        if "input_order" in model:
            order = model["input_order"]
            if order not in INPUT_ORDERS:
                raise ConfigError(
                    f"{where}.input_order: must be chw or hwc, got {order!r}"
                    f"{did_you_mean(order, INPUT_ORDERS)}"
                )
            out["input_order"] = order
        if "input" in out:  # the shape is known: its checks fail now, not at run time
            resolve(out, int(np.prod(out["input"])), 2, where)
    if kind in ("mlp", "cnn"):
        act = model.get("activation", defaults["activation"])
        if act not in ACTIVATIONS:
            raise ConfigError(
                f"{where}.activation: unknown activation {act!r}{did_you_mean(act, ACTIVATIONS)} "
                f"(known: {', '.join(ACTIVATIONS)})"
            )
        out["activation"] = act
    bias = model.get("bias", defaults["bias"])
    if not isinstance(bias, bool):
        raise ConfigError(f"{where}.bias: must be true or false, got {bias!r}")
    init = _init(model.get("init", defaults["init"]), f"{where}.init")
    # network configs keep every structural key, so a run's config says it all
    if kind != "linear" or bias != defaults["bias"]:
        out["bias"] = bias
    if kind != "linear" or init != defaults["init"]:
        out["init"] = init
    return out


def _hidden(value: Any, where: str) -> list[int]:
    if isinstance(value, int) and not isinstance(value, bool):
        value = [value]
    if not isinstance(value, list) or not all(
        isinstance(h, int) and not isinstance(h, bool) for h in value
    ):
        raise ConfigError(f"{where}: must be a list of hidden widths such as [100], got {value!r}")
    if not value:
        raise ConfigError(f"{where}: list at least one width (no hidden layer: model.kind linear)")
    for h in value:
        if h <= 0:
            raise ConfigError(f"{where}: widths must be >= 1, got {h!r}")
    return list(value)


def _int(value: Any, where: str, low: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise ConfigError(f"{where}: must be an integer >= {low}, got {value!r}")
    return value


def _layers(value: Any, where: str) -> list[dict[str, Any]]:
    """A cnn's ``layers``: a preset name, expanded, or a list of layer mappings, each
    with every key filled in (conv: stride 1, padding valid; pool: kind max, size 2)."""
    if isinstance(value, str):
        if value not in PRESETS:
            raise ConfigError(
                f"{where}: unknown preset {value!r}{did_you_mean(value, PRESETS)} "
                f"(known: {', '.join(PRESETS)})"
            )
        value = PRESETS[value]
    if not isinstance(value, list) or not value:
        raise ConfigError(
            f"{where}: must be a preset name ({', '.join(PRESETS)}) or a non-empty list of "
            "{conv: ...}, {pool: ...}, {dense: WIDTH}"
        )
    out = []
    for n, layer in enumerate(value):
        at = f"{where}[{n}]"
        if not isinstance(layer, dict) or len(layer) != 1:
            raise ConfigError(
                f"{at}: must be one of {{conv: ...}}, {{pool: ...}}, {{dense: WIDTH}}"
            )
        ((kind, spec),) = layer.items()
        if kind == "dense":
            out.append({"dense": _int(spec, f"{at}.dense")})
            continue
        if kind not in ("conv", "pool"):
            raise ConfigError(
                f"{at}.{kind}: unknown layer{did_you_mean(kind, ('conv', 'pool', 'dense'))} "
                "(known: conv, pool, dense)"
            )
        if not isinstance(spec, dict):
            raise ConfigError(f"{at}.{kind}: must be a mapping")
        allowed = ("out", "kernel", "stride", "padding") if kind == "conv" else ("kind", "size")
        for key in spec:
            if key not in allowed:
                raise ConfigError(
                    f"{at}.{kind}.{key}: unknown key{did_you_mean(key, allowed)} "
                    f"(allowed: {', '.join(allowed)})"
                )
        if kind == "conv":
            for key in ("out", "kernel"):
                if key not in spec:
                    raise ConfigError(f"{at}.conv.{key}: required")
            pad = spec.get("padding", "valid")
            if pad not in ("same", "valid"):
                pad = _int(pad, f"{at}.conv.padding", low=0)
            out.append(
                {
                    "conv": {
                        "out": _int(spec["out"], f"{at}.conv.out"),
                        "kernel": _int(spec["kernel"], f"{at}.conv.kernel"),
                        "stride": _int(spec.get("stride", 1), f"{at}.conv.stride"),
                        "padding": pad,
                    }
                }
            )
        else:
            pk = spec.get("kind", "max")
            if pk not in POOL_KINDS:
                raise ConfigError(
                    f"{at}.pool.kind: must be max or avg, got {pk!r}{did_you_mean(pk, POOL_KINDS)}"
                )
            out.append({"pool": {"kind": pk, "size": _int(spec.get("size", 2), f"{at}.pool.size")}})
    return out


def _input_shape(value: Any, where: str) -> list[int]:
    if not isinstance(value, list) or len(value) != 3:
        raise ConfigError(f"{where}: must be [height, width, channels], got {value!r}")
    return [_int(v, f"{where}[{k}]") for k, v in enumerate(value)]


@dataclass(frozen=True)
class Layer:
    """One resolved layer of a cnn: its kind (conv, max, avg, dense), input and output
    shapes (h, w, c; a dense layer's are (1, 1, width)), kernel or pool size, stride,
    top and left padding, and whether the activation follows it."""

    kind: str
    ins: tuple[int, int, int]
    outs: tuple[int, int, int]
    size: int = 1
    stride: int = 1
    pad: tuple[int, int] = (0, 0)
    act: bool = False

    @property
    def params(self) -> tuple[int, int] | None:
        """(out, in) of this layer's weight matrix; None for a pool."""
        if self.kind == "conv":
            return (self.outs[2], self.size * self.size * self.ins[2])
        if self.kind == "dense":
            return (self.outs[2], self.ins[2])
        return None


def input_shape(model: dict[str, Any], n_features: int, where: str = "model") -> tuple:
    """The image shape and pixel order of a cnn's input rows.

    Parameters
    ----------
    model
        A normalised cnn model config; ``input`` (``[height, width, channels]``) fixes the
        shape, else it is inferred as a square of 1 or 3 channels.
    n_features
        The length of the data's rows.
    where
        The config path error messages name.

    Returns
    -------
    tuple
        ``((H, W, C), order)``, ``order`` the config's ``input_order`` (``"chw"`` or ``"hwc"``,
        default ``"chw"``).

    Raises
    ------
    ConfigError
        ``input`` holds another number of values than ``n_features``, or no square shape of 1
        or 3 channels has ``n_features`` values.
    """
    order = model.get("input_order", "chw")
    if "input" in model:
        shape = tuple(model["input"])
        if int(np.prod(shape)) != n_features:
            raise ConfigError(
                f"{where}.input: {'x'.join(map(str, shape))} = {int(np.prod(shape))} values, "
                f"but the data's rows have {n_features}"
            )
        return shape, order
    for c in (1, 3):
        s = int(round(np.sqrt(n_features / c)))
        if c * s * s == n_features:
            return (s, s, c), order
    raise ConfigError(
        f"{where}.input: cannot infer an image shape from rows of {n_features} values "
        "(give model.input: [height, width, channels])"
    )


def _same_pad(n: int, k: int, s: int) -> tuple[int, int]:
    """TensorFlow's "same": ceil(n / s) outputs, the padding split with the extra one after."""
    o = -(-n // s)
    total = max((o - 1) * s + k - n, 0)
    return o, total // 2


def resolve(model: dict[str, Any], n_features: int, n_outputs: int, where: str = "model") -> list:
    """A cnn config's layers with their shapes on rows of ``n_features`` values.

    Parameters
    ----------
    model
        A normalised cnn model config (its ``layers``, ``input``, ``input_order``).
    n_features
        The length of the data's rows.
    n_outputs
        The width of the dense output layer appended last.
    where
        The config path error messages name.

    Returns
    -------
    list of Layer
        The config's layers in order, each with its (H, W, C) input and output shapes, then the
        dense output layer (no activation).

    Raises
    ------
    ConfigError
        Naming the first layer that does not fit: a kernel larger than its (padded) input, a
        pool size that does not divide its input, a conv or pool after a dense layer; or an
        input shape that does not fit the rows (:func:`input_shape`).
    """
    (h, w, c), _ = input_shape(model, n_features, where)
    out: list[Layer] = []
    flat = False
    for n, layer in enumerate(model["layers"]):
        at = f"{where}.layers[{n}]"
        ((kind, spec),) = layer.items()
        if kind == "dense":
            fan_in = h * w * c
            out.append(Layer("dense", (1, 1, fan_in), (1, 1, spec), act=True))
            h, w, c, flat = 1, 1, spec, True
            continue
        if flat:
            raise ConfigError(f"{at}.{kind}: a {kind} layer cannot follow a dense layer")
        if kind == "conv":
            k, s, p = spec["kernel"], spec["stride"], spec["padding"]
            if p == "same":
                if k > h or k > w:
                    raise ConfigError(f"{at}.conv.kernel: {k} is larger than the {h}x{w} input")
                (oh, pt), (ow, pl) = _same_pad(h, k, s), _same_pad(w, k, s)
            else:
                pt = pl = 0 if p == "valid" else p
                if k > h + 2 * pt or k > w + 2 * pl:
                    raise ConfigError(
                        f"{at}.conv.kernel: {k} is larger than the {h}x{w} input"
                        + (f" padded by {pt}" if pt else "")
                    )
                oh, ow = (h + 2 * pt - k) // s + 1, (w + 2 * pl - k) // s + 1
            out.append(Layer("conv", (h, w, c), (oh, ow, spec["out"]), k, s, (pt, pl), act=True))
            h, w, c = oh, ow, spec["out"]
        else:
            q = spec["size"]
            if h % q or w % q:
                raise ConfigError(
                    f"{at}.pool.size: {q} does not divide the {h}x{w} input "
                    "(pools tile their input exactly)"
                )
            out.append(Layer(spec["kind"], (h, w, c), (h // q, w // q, c), q, q))
            h, w = h // q, w // q
    out.append(Layer("dense", (1, 1, h * w * c), (1, 1, n_outputs)))
    return out


def known_features(dataset: dict[str, Any]) -> int | None:
    """The row length a normalised dataset config fixes before any data is read, if any
    (a cnn's shape checks then run at config time)."""
    if dataset.get("n_features") is not None:
        return int(dataset["n_features"])
    return kind_of(dataset).known_features(dataset)


def _init(value: Any, where: str) -> dict[str, Any]:
    if isinstance(value, str):
        value = {"kind": value}
    if not isinstance(value, dict) or "kind" not in value:
        raise ConfigError(f"{where}: must be a mapping with a 'kind' ({', '.join(INIT_KINDS)})")
    kind = value["kind"]
    if kind not in INIT_KINDS:
        raise ConfigError(
            f"{where}.kind: unknown init {kind!r}{did_you_mean(kind, INIT_KINDS)} "
            f"(known: {', '.join(INIT_KINDS)})"
        )
    allowed = ("kind", *INIT_DEFAULTS[kind], *(("sha256",) if kind == "file" else ()))
    for key in value:
        if key not in allowed:
            raise ConfigError(
                f"{where}.{key}: unknown key{did_you_mean(key, allowed)} "
                f"(allowed: {', '.join(allowed)})"
            )
    out = {"kind": kind, **INIT_DEFAULTS[kind], **{k: v for k, v in value.items() if k != "kind"}}
    if "seed" in out:
        seed = out["seed"]
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ConfigError(f"{where}.seed: must be an integer >= 0, got {seed!r}")
    if "std" in out:
        std = out["std"]
        if isinstance(std, bool) or not isinstance(std, int | float) or not std > 0:
            raise ConfigError(f"{where}.std: must be a number > 0, got {std!r}")
        out["std"] = float(std)
    if "biases" in out:
        biases = out["biases"]
        if (
            isinstance(biases, bool)
            or not isinstance(biases, int | float)
            or not np.isfinite(biases)
        ):
            raise ConfigError(f"{where}.biases: must be a finite number, got {biases!r}")
        out["biases"] = float(biases)
    if kind == "file":
        path = out["path"]
        if not isinstance(path, str) or not path:
            raise ConfigError(f"{where}.path: required for init kind file (a .npy file)")
        # The file's content, not its location, identifies the run (see config.run_id).
        out["sha256"] = _sha256(Path(path).expanduser(), f"{where}.path")
    return out


def _sha256(path: Path, where: str) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as exc:
        raise ConfigError(f"{where}: cannot read {path} ({exc.strerror})") from None


@dataclass(frozen=True)
class Network:
    """A model bound to a data set's dimensions: layer sizes, layout and initial point.

    ``sizes`` is ``[n_features, hidden..., n_outputs]``; a linear model has no hidden
    layer; a cnn's is ``[n_features, n_outputs]`` and ``cnn`` its resolved layers, the
    output layer included. ``fast_linear`` marks the linear model without intercept, which
    keeps the W = (n_outputs, n_features) kernels (and the sparsity constraint per row).
    """

    kind: str
    sizes: tuple[int, ...]
    bias: bool
    activation: str
    init: dict[str, Any]
    # a cnn's layers, input and input_order keys; resolved against the data on first use,
    # so a label needs no data (experiment.run_identity asks for it with dimensions 1)
    cnn_config: dict[str, Any] | None = None
    dtype: str = "float64"  # what the network kernels compute in (model.dtype)

    @classmethod
    def from_config(cls, model: dict[str, Any], n_features: int, n_outputs: int) -> Network:
        """The network of a normalised model config for these data dimensions.

        Nothing is checked against the data here: a cnn's layers are resolved on first use
        (:attr:`cnn`).

        Parameters
        ----------
        model
            A normalised model config (its ``kind``'s defaults fill missing keys).
        n_features
            The length of the data's rows.
        n_outputs
            The model's outputs: the width of its last layer.

        Returns
        -------
        Network
            ``sizes`` is ``(n_features, hidden..., n_outputs)`` (no hidden sizes but an mlp's).
        """
        kind = model.get("kind", "linear")
        spec = {**DEFAULTS[kind], **model}
        hidden = tuple(spec["hidden"]) if kind == "mlp" else ()
        cnn_config = None
        if kind == "cnn":
            cnn_config = {k: spec[k] for k in ("layers", "input", "input_order") if k in spec}
        return cls(
            kind=kind,
            sizes=(n_features, *hidden, n_outputs),
            bias=spec["bias"],
            activation=spec.get("activation", "relu"),
            init=spec["init"],
            cnn_config=cnn_config,
            dtype=spec.get("dtype", DTYPES[0]),
        )

    @cached_property
    def cnn(self) -> tuple[Layer, ...]:
        """A cnn's layers with their shapes on this data, the output layer last (ConfigError
        where one does not fit); empty for other kinds."""
        if self.kind != "cnn":
            return ()
        return tuple(resolve(self.cnn_config, self.sizes[0], self.sizes[-1]))

    @property
    def input_order(self) -> str:
        return (self.cnn_config or {}).get("input_order", "chw")

    @property
    def preset(self) -> str | None:
        """The name of a cnn's preset architecture, if its layers are one."""
        layers = (self.cnn_config or {}).get("layers")
        return next((k for k, v in PRESETS.items() if v == layers), None)

    @property
    def fast_linear(self) -> bool:
        return self.kind == "linear" and not self.bias

    @property
    def layers(self) -> list[tuple[int, int]]:
        """(out, in) of each layer's weight matrix (a cnn: of the layers with parameters)."""
        if self.kind == "cnn":
            return [layer.params for layer in self.cnn if layer.params is not None]
        return [(self.sizes[k + 1], self.sizes[k]) for k in range(len(self.sizes) - 1)]

    @property
    def fans(self) -> list[tuple[int, int]]:
        """(fan_in, fan_out) of each weight matrix, for Glorot's limit: a convolution's are
        kernel^2 * in_channels and kernel^2 * out_channels (Keras' convention)."""
        if self.kind != "cnn":
            return [(i, o) for o, i in self.layers]
        return [
            (layer.params[1], layer.params[0] * (layer.params[1] // layer.ins[2]))
            if layer.kind == "conv"
            else (layer.params[1], layer.params[0])
            for layer in self.cnn
            if layer.params is not None
        ]

    def kernel_sizes(self) -> np.ndarray:
        """The ``sizes`` argument of the network kernels: ``sizes`` as int64 for a linear
        model or a float64 MLP, the 2-D layer table of :func:`fedsparse.kernels.cnn.cnn_spec`
        for a cnn or a float32 MLP (its dense layers; the table carries the dtype, and the
        kernels tell the two forms apart by dimension)."""
        if self.kind != "cnn" and self.dtype == "float64":
            return np.asarray(self.sizes, dtype=np.int64)
        from ..kernels.cnn import cnn_spec  # kernels layer; only networks need it

        if self.kind == "cnn":
            return cnn_spec(self.cnn, self.input_order, self.bias, self.dtype)
        n = len(self.sizes) - 1
        dense = [
            Layer("dense", (1, 1, self.sizes[k]), (1, 1, self.sizes[k + 1]), act=k < n - 1)
            for k in range(n)
        ]
        return cnn_spec(dense, "hwc", self.bias, self.dtype)

    @property
    def n_params(self) -> int:
        return sum(o * i + (o if self.bias else 0) for o, i in self.layers)

    @property
    def shape(self) -> tuple[int, int]:
        """Shape of the parameter array the algorithms hold."""
        if self.fast_linear:
            return (self.sizes[-1], self.sizes[0])
        return (1, self.n_params)

    @property
    def label(self) -> str:
        """The ``model`` column of results: 'linear', 'linear+bias', 'mlp-500-200-relu'
        ('-f32' appended in float32)."""
        if self.kind == "linear":
            return "linear+bias" if self.bias else "linear"
        tail = ("" if self.bias else "-nobias") + ("" if self.dtype == "float64" else "-f32")
        if self.kind == "cnn":
            if self.preset is not None:
                body = self.preset
            else:
                body = "-".join(_layer_label(layer) for layer in self.cnn_config["layers"])
            return f"cnn-{body}-{self.activation}{tail}"
        widths = "-".join(str(h) for h in self.sizes[1:-1])
        return f"mlp-{widths}-{self.activation}{tail}"

    @property
    def layer_bounds(self) -> np.ndarray:
        """Where each layer's parameters (W_l, then b_l) start and end in the flat layout."""
        sizes = [o * i + (o if self.bias else 0) for o, i in self.layers]
        return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)

    def split(self, theta: np.ndarray) -> list[tuple[np.ndarray, np.ndarray | None]]:
        """Views (W_l, b_l) of a flat parameter vector, layer by layer."""
        theta = np.asarray(theta).reshape(-1)
        if theta.size != self.n_params:
            raise ValueError(f"expected {self.n_params} parameters, got {theta.size}")
        out, k = [], 0
        for o, i in self.layers:
            W = theta[k : k + o * i].reshape(o, i)
            k += o * i
            b = None
            if self.bias:
                b = theta[k : k + o]
                k += o
            out.append((W, b))
        return out

    def initial(self) -> np.ndarray:
        """theta_0 in :attr:`shape`; the same for every algorithm and seed of a config."""
        init = self.init
        theta = np.zeros(self.n_params)
        if init["kind"] == "normal":
            theta[:] = np.random.default_rng(init["seed"]).normal(0.0, init["std"], self.n_params)
        elif init["kind"] == "glorot":
            # Glorot/Xavier uniform for each weight matrix, biases zero (Keras' default).
            rng = np.random.default_rng(init["seed"])
            for (W, _), (fan_in, fan_out) in zip(self.split(theta), self.fans, strict=True):
                limit = np.sqrt(6.0 / (fan_in + fan_out))
                W[:, :] = rng.uniform(-limit, limit, W.shape)
        elif init["kind"] == "truncated_normal":
            rng = np.random.default_rng(init["seed"])
            for W, b in self.split(theta):
                W[:, :] = truncated_normal(rng, init["std"], W.size).reshape(W.shape)
                if b is not None:
                    b[:] = init["biases"]
        elif init["kind"] == "file":
            theta[:] = load_init_file(init["path"], self.n_params, init.get("sha256"))
        return theta.reshape(self.shape)


def truncated_normal(rng: np.random.Generator, std: float, n: int) -> np.ndarray:
    """Draws of N(0, std^2) truncated at 2 std, as TensorFlow's ``truncated_normal`` defines it.

    Parameters
    ----------
    rng
        The generator drawn from (advanced).
    std
        The standard deviation before truncation.
    n
        How many values.

    Returns
    -------
    numpy.ndarray
        ``n`` float64 values, each draw beyond 2 ``std`` drawn again (their std is 0.880 ``std``).
    """
    values = rng.normal(0.0, std, n)
    out = np.abs(values) > 2.0 * std
    while out.any():
        values[out] = rng.normal(0.0, std, int(out.sum()))
        out = np.abs(values) > 2.0 * std
    return values


def _layer_label(layer: dict[str, Any]) -> str:
    """'c32k5s1same', 'max2', 'd2048': a layer of a cnn config in a model label."""
    ((kind, spec),) = layer.items()
    if kind == "conv":
        return f"c{spec['out']}k{spec['kernel']}s{spec['stride']}{spec['padding']}"
    if kind == "dense":
        return f"d{spec}"
    return f"{spec['kind']}{spec['size']}"


def load_init_file(path: str, n_params: int, sha256: str | None = None) -> np.ndarray:
    """The initial point stored in a ``.npy`` file, checked.

    Parameters
    ----------
    path
        The ``.npy`` file (``~`` expanded).
    n_params
        The model's number of parameters.
    sha256
        The file's SHA-256 when the config was read; None: not checked.

    Returns
    -------
    numpy.ndarray
        A 1-D float64 array of ``n_params`` finite values.

    Raises
    ------
    ConfigError
        Naming the file: it changed since the config was read, is not a readable ``.npy``, or
        is not a 1-D float64 array of ``n_params`` finite values.
    """
    where = f"model.init.path: {path}"
    p = Path(path).expanduser()
    if sha256 is not None and _sha256(p, "model.init.path") != sha256:
        raise ConfigError(f"{where}: the file changed since the config was read")
    try:
        arr = np.load(p, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{where}: not a readable .npy file ({exc})") from None
    if arr.dtype != np.float64:
        raise ConfigError(f"{where}: dtype must be float64, got {arr.dtype}")
    if arr.ndim != 1 or arr.size != n_params:
        raise ConfigError(
            f"{where}: must be a 1-D array of {n_params} values (the model's size), "
            f"got shape {arr.shape}"
        )
    if not np.all(np.isfinite(arr)):
        raise ConfigError(f"{where}: holds non-finite values")
    return arr
