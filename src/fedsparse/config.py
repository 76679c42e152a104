"""Run configurations: read, validate, fill defaults, and hash into a run id.

A run config is a mapping with keys ``dataset``, ``partition``, ``model``,
``algorithm``, ``params``, ``rounds``, ``seed``, ``eval_every`` (and an optional
``sweep`` label). :func:`normalize_run_config` returns the canonical form: every
default filled in, so two configs that mean the same run hash to the same id.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any

import yaml

from .algorithms import ALGORITHMS
from .errors import ConfigError
from .problem import DEFAULT_L2, LOSS_TASKS

RUN_KEYS = (
    "sweep",
    "dataset",
    "partition",
    "model",
    "algorithm",
    "params",
    "rounds",
    "seed",
    "eval_every",
)
SYNTHETIC_DEFAULTS: dict[str, Any] = {
    "task": "linear",
    "clients": 100,
    "samples_per_client": None,
    "dim": 1000,
    "support": 100,
    "alpha": 0.1,
    "beta": 0.1,
    "seed": 0,
    "noise_std": 1.0,
    "positives": 100,
    "shared_model": False,
    "name": None,
}
LIBSVM_DEFAULTS: dict[str, Any] = {
    "path": None,
    "client_key": "qid",
    "n_features": None,
    "name": None,
}


def read_config_file(path: str | Path) -> dict[str, Any]:
    """Parse a YAML or JSON file into a mapping; ConfigError names the file on failure."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config ({exc.strerror})") from None
    try:
        loaded = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (yaml.YAMLError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{path}: malformed config ({' '.join(str(exc).split())})") from None
    if not isinstance(loaded, dict):
        raise ConfigError(f"{path}: a config must be a mapping of keys to values")
    return loaded


def normalize_run_config(raw: dict[str, Any]) -> dict[str, Any]:
    """Validate a run config and return its canonical form (defaults filled in)."""
    if not isinstance(raw, dict):
        raise ConfigError("config: must be a mapping")
    _known(raw, RUN_KEYS, "config")
    for key in ("dataset", "algorithm", "params", "rounds"):
        if key not in raw:
            raise ConfigError(f"{key}: required")
    algorithm = raw["algorithm"]
    if algorithm not in ALGORITHMS:
        raise ConfigError(
            f"algorithm: unknown algorithm {algorithm!r} (known: {', '.join(ALGORITHMS)})"
        )
    model = _model(raw.get("model", {}))
    cfg = {
        "sweep": _string(raw.get("sweep", "single"), "sweep"),
        "dataset": _dataset(raw["dataset"]),
        "partition": _partition(raw.get("partition", "natural")),
        "model": model,
        "algorithm": algorithm,
        "params": ALGORITHMS[algorithm].validate_params(raw["params"]),
        "rounds": _integer(raw["rounds"], "rounds", low=1),
        "seed": _integer(raw.get("seed", 0), "seed", low=0),
        "eval_every": _integer(raw.get("eval_every", 1), "eval_every", low=1),
    }
    if cfg["dataset"]["kind"] == "synthetic":
        task = "binary" if cfg["dataset"]["task"] == "logistic" else "regression"
        if model["loss"] != "least_squares" and LOSS_TASKS[model["loss"]] != task:
            raise ConfigError(
                f"model.loss: {model['loss']} does not fit synthetic task {cfg['dataset']['task']}"
            )
    return cfg


def run_id(cfg: dict[str, Any]) -> str:
    """Stable 16-hex-digit id of a normalised run config (the sweep label is not part of it)."""
    identity = {k: v for k, v in cfg.items() if k != "sweep"}
    text = json.dumps(identity, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def dataset_name(ds: dict[str, Any]) -> str:
    """The name a dataset config shows in results."""
    if ds.get("name"):
        return ds["name"]
    if ds["kind"] == "synthetic":
        return f"sim-{ds['task']}-a{ds['alpha']:g}-b{ds['beta']:g}"
    return Path(ds["path"]).stem


def _dataset(ds: Any) -> dict[str, Any]:
    if not isinstance(ds, dict) or "kind" not in ds:
        raise ConfigError("dataset: must be a mapping with a 'kind' (synthetic or libsvm)")
    kind = ds["kind"]
    if kind == "synthetic":
        _known(ds, ("kind", *SYNTHETIC_DEFAULTS), "dataset")
        out = {"kind": kind, **SYNTHETIC_DEFAULTS, **{k: v for k, v in ds.items() if k != "kind"}}
        if out["task"] not in ("linear", "logistic"):
            raise ConfigError(f"dataset.task: must be linear or logistic, got {out['task']!r}")
        for key in ("clients", "dim", "support", "positives"):
            out[key] = _integer(out[key], f"dataset.{key}", low=1)
        if out["samples_per_client"] is None:
            out["samples_per_client"] = 100 if out["task"] == "linear" else 1000
        out["samples_per_client"] = _integer(
            out["samples_per_client"], "dataset.samples_per_client", low=1
        )
        out["seed"] = _integer(out["seed"], "dataset.seed", low=0)
        for key in ("alpha", "beta", "noise_std"):
            out[key] = _number(out[key], f"dataset.{key}", low=0.0)
        if out["support"] > out["dim"]:
            raise ConfigError(f"dataset.support: {out['support']} exceeds dataset.dim {out['dim']}")
        if out["task"] == "logistic" and out["positives"] >= out["samples_per_client"]:
            raise ConfigError("dataset.positives: must be below dataset.samples_per_client")
        if not isinstance(out["shared_model"], bool):
            raise ConfigError("dataset.shared_model: must be true or false")
    elif kind == "libsvm":
        _known(ds, ("kind", *LIBSVM_DEFAULTS), "dataset")
        out = {"kind": kind, **LIBSVM_DEFAULTS, **{k: v for k, v in ds.items() if k != "kind"}}
        if not isinstance(out["path"], str) or not out["path"]:
            raise ConfigError("dataset.path: required for kind libsvm (an svmlight file)")
        if out["client_key"] != "qid":
            raise ConfigError("dataset.client_key: only 'qid' is supported")
        if out["n_features"] is not None:
            out["n_features"] = _integer(out["n_features"], "dataset.n_features", low=1)
    else:
        raise ConfigError(f"dataset.kind: unknown kind {kind!r} (known: synthetic, libsvm)")
    if out["name"] is not None:
        _string(out["name"], "dataset.name")
    out["name"] = dataset_name(out)
    return out


def _partition(value: Any) -> str:
    name = value.get("kind") if isinstance(value, dict) else value
    if name != "natural":
        raise ConfigError(
            f"partition: only 'natural' (the data set's own clients) is available, got {value!r}"
        )
    return "natural"


def _model(model: Any) -> dict[str, Any]:
    if not isinstance(model, dict):
        raise ConfigError("model: must be a mapping such as {loss: least_squares}")
    _known(model, ("loss", "l2", "weights"), "model")
    loss = model.get("loss", "least_squares")
    if loss not in LOSS_TASKS:
        raise ConfigError(f"model.loss: unknown loss {loss!r} (known: {', '.join(LOSS_TASKS)})")
    weights = model.get("weights", "uniform")
    if weights not in ("uniform", "samples"):
        raise ConfigError(f"model.weights: must be uniform or samples, got {weights!r}")
    l2 = _number(model.get("l2", DEFAULT_L2[loss]), "model.l2", low=0.0)
    return {"loss": loss, "l2": l2, "weights": weights}


def _known(section: dict[str, Any], allowed: tuple[str, ...], where: str) -> None:
    for key in section:
        if key not in allowed:
            prefix = "" if where == "config" else f"{where}."
            raise ConfigError(f"{prefix}{key}: unknown key (allowed: {', '.join(allowed)})")


def _integer(value: Any, where: str, low: int | None = None) -> int:
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value != int(value)
    ):
        raise ConfigError(f"{where}: must be an integer, got {value!r}")
    if low is not None and value < low:
        raise ConfigError(f"{where}: must be >= {low}, got {value!r}")
    return int(value)


def _number(value: Any, where: str, low: float | None = None) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ConfigError(f"{where}: must be a finite number, got {value!r}")
    if low is not None and value < low:
        raise ConfigError(f"{where}: must be >= {low:g}, got {value!r}")
    return float(value)


def _string(value: Any, where: str) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{where}: must be a non-empty string, got {value!r}")
    return value
