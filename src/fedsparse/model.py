"""The model layer: what a parameter vector means, its layout and its starting point.

Two kinds (``model.kind``):

* ``linear`` (the default): W of shape (n_outputs, n_features), one row per class for
  softmax; optionally an intercept (``bias: true``);
* ``mlp``: a fully connected network with hidden widths ``hidden``, activation
  ``activation`` and biases unless ``bias: false``.

Algorithms see the parameters as one float64 array of :attr:`Network.shape`:
(n_outputs, n_features) for a linear model without bias (the hard-thresholding
kernels' fast paths, the sparsity constraint per row), (1, n_params) otherwise. Its
flat, row-major form is the layout of saved models and of ``init: {kind: file}``:
for each layer in order, W_l with shape (out_l, in_l) row-major, then b_l if
``bias``.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .errors import ConfigError, did_you_mean

KINDS = ("linear", "mlp")
ACTIVATIONS = ("relu", "swish", "tanh", "sigmoid")
INIT_KINDS = ("zeros", "normal", "glorot", "file")
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
}
INIT_DEFAULTS: dict[str, dict[str, Any]] = {
    "zeros": {},
    "normal": {"std": 0.01, "seed": 0},
    "glorot": {"seed": 0},
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
    out: dict[str, Any] = {} if kind == "linear" else {"kind": kind}
    if kind == "mlp":
        out["hidden"] = _hidden(model.get("hidden", defaults["hidden"]), f"{where}.hidden")
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
    # mlp configs are new: they keep every structural key, so a run's config says it all
    if kind == "mlp" or bias != defaults["bias"]:
        out["bias"] = bias
    if kind == "mlp" or init != defaults["init"]:
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
    layer. ``fast_linear`` marks the linear model without intercept, which keeps the
    W = (n_outputs, n_features) kernels (and the sparsity constraint per row).
    """

    kind: str
    sizes: tuple[int, ...]
    bias: bool
    activation: str
    init: dict[str, Any]

    @classmethod
    def from_config(cls, model: dict[str, Any], n_features: int, n_outputs: int) -> Network:
        """The network of a normalised model config for these data dimensions."""
        kind = model.get("kind", "linear")
        spec = {**DEFAULTS[kind], **model}
        hidden = tuple(spec["hidden"]) if kind == "mlp" else ()
        return cls(
            kind=kind,
            sizes=(n_features, *hidden, n_outputs),
            bias=spec["bias"],
            activation=spec.get("activation", "relu"),
            init=spec["init"],
        )

    @property
    def fast_linear(self) -> bool:
        return self.kind == "linear" and not self.bias

    @property
    def layers(self) -> list[tuple[int, int]]:
        """(out, in) of each layer."""
        return [(self.sizes[k + 1], self.sizes[k]) for k in range(len(self.sizes) - 1)]

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
        """The ``model`` column of results: 'linear', 'linear+bias', 'mlp-500-200-relu'."""
        if self.kind == "linear":
            return "linear+bias" if self.bias else "linear"
        widths = "-".join(str(h) for h in self.sizes[1:-1])
        return f"mlp-{widths}-{self.activation}" + ("" if self.bias else "-nobias")

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
            for W, _ in self.split(theta):
                limit = np.sqrt(6.0 / (W.shape[0] + W.shape[1]))
                W[:, :] = rng.uniform(-limit, limit, W.shape)
        elif init["kind"] == "file":
            theta[:] = load_init_file(init["path"], self.n_params, init.get("sha256"))
        return theta.reshape(self.shape)


def load_init_file(path: str, n_params: int, sha256: str | None = None) -> np.ndarray:
    """A 1-D float64 ``.npy`` of exactly ``n_params`` values; ConfigError names the file."""
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
