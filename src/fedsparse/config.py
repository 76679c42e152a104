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
# kind svmlight: a plain svmlight/LibSVM file (no client ids) from the registry (source),
# a URL or a local path; its clients come from the partition (fedsparse.data.prepare).
SVMLIGHT_DEFAULTS: dict[str, Any] = {
    "source": None,  # registry name (fedsparse.data.registry.DATASETS)
    "file": "papers",  # registry file: papers (the one the papers used) | train | test
    "url": None,  # a file not in the registry
    "task": None,  # regression | binary | multiclass (from the registry for a source)
    "n_features": None,
    "rows": None,  # expected number of rows (checked)
    "size": None,  # expected download size in bytes (checked)
    "sha256": None,  # expected SHA-256 of the download (checked)
    "path": None,  # offline: a local copy (plain, .bz2 or .xz) instead of downloading
    "mirror": None,  # offline/cluster: a base URL replacing the LibSVM site
    "name": None,
}
# Where a file comes from does not change which run it is: results from a mirror, a
# local copy or the site share run ids (the data's SHA-256 is checked instead).
LOCATION_KEYS = ("path", "mirror")
TASKS = ("regression", "binary", "multiclass")
DEFAULT_LOSS = {"regression": "least_squares", "binary": "logistic", "multiclass": "softmax"}
PARTITION_COMMON: dict[str, Any] = {
    "seed": 0,
    "min_size": 1,
    "test_fraction": 0.0,
    "test_split": "per_client",
}
PARTITION_DEFAULTS: dict[str, dict[str, Any]] = {
    "papers": {"clusters": 10, "parts": 20, "parts_per_client": 2, "cluster_by": "auto"},
    "iid": {"clients": 100},
    "dirichlet": {"clients": 100, "alpha": 0.5, "bins": 10, "max_tries": 100},
    "quantity": {"clients": 100, "alpha": 0.5},
    "labels": {"clients": 100, "k": 2, "bins": 10},
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
        "partition": None,
        "model": model,
        "algorithm": algorithm,
        "params": ALGORITHMS[algorithm].validate_params(raw["params"]),
        "rounds": _integer(raw["rounds"], "rounds", low=1),
        "seed": _integer(raw.get("seed", 0), "seed", low=0),
        "eval_every": _integer(raw.get("eval_every", 1), "eval_every", low=1),
    }
    cfg["partition"] = _partition(raw.get("partition"), cfg["dataset"])
    if cfg["dataset"]["kind"] == "synthetic":
        task = "binary" if cfg["dataset"]["task"] == "logistic" else "regression"
        if model["loss"] != "least_squares" and LOSS_TASKS[model["loss"]] != task:
            raise ConfigError(
                f"model.loss: {model['loss']} does not fit synthetic task {cfg['dataset']['task']}"
            )
    if cfg["dataset"]["kind"] == "svmlight":
        task = cfg["dataset"]["task"]
        if model["loss"] != "least_squares" and LOSS_TASKS[model["loss"]] != task:
            raise ConfigError(f"model.loss: {model['loss']} does not fit {task} data")
    return cfg


def run_id(cfg: dict[str, Any]) -> str:
    """Stable 16-hex-digit id of a normalised run config (the sweep label is not part of it)."""
    identity = {k: v for k, v in cfg.items() if k != "sweep"}
    ds = identity.get("dataset")
    if isinstance(ds, dict) and ds.get("kind") == "svmlight":
        identity["dataset"] = {k: v for k, v in ds.items() if k not in LOCATION_KEYS}
    text = json.dumps(identity, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def dataset_name(ds: dict[str, Any]) -> str:
    """The name a dataset config shows in results."""
    if ds.get("name"):
        return ds["name"]
    if ds["kind"] == "synthetic":
        return f"sim-{ds['task']}-a{ds['alpha']:g}-b{ds['beta']:g}"
    if ds["kind"] == "svmlight":
        if ds.get("source"):
            return ds["source"]
        where = ds.get("url") or ds["path"]
        name = where.rstrip("/").rsplit("/", 1)[-1]
        for suffix in (".bz2", ".xz"):
            name = name.removesuffix(suffix)
        return name or "svmlight"
    return Path(ds["path"]).stem


def default_loss(ds: dict[str, Any]) -> str:
    """The loss a data set gets when its model names none."""
    if ds.get("kind") == "svmlight":
        return DEFAULT_LOSS[ds["task"]]
    return "logistic" if ds.get("task") == "logistic" else "least_squares"


def partition_label(partition: str | dict[str, Any]) -> str:
    """The ``partition`` column of traces and runs: 'natural', 'papers', 'dirichlet-a0.5', ..."""
    if isinstance(partition, str):
        return partition
    kind = partition["kind"]
    label = {
        "dirichlet": f"dirichlet-a{partition.get('alpha', 0):g}",
        "quantity": f"quantity-a{partition.get('alpha', 0):g}",
        "labels": f"labels-k{partition.get('k', 0)}",
    }.get(kind, kind)
    if partition.get("test_fraction"):
        label += f"+test{partition['test_fraction']:g}"
    return label


def _dataset(ds: Any) -> dict[str, Any]:
    if not isinstance(ds, dict) or "kind" not in ds:
        raise ConfigError(
            "dataset: must be a mapping with a 'kind' (synthetic, libsvm or svmlight)"
        )
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
    elif kind == "svmlight":
        out = _svmlight(ds)
    else:
        raise ConfigError(
            f"dataset.kind: unknown kind {kind!r} (known: synthetic, libsvm, svmlight)"
        )
    if out["name"] is not None:
        _string(out["name"], "dataset.name")
    out["name"] = dataset_name(out)
    return out


def _svmlight(ds: dict[str, Any]) -> dict[str, Any]:
    from .data import registry  # data layer, imported lazily

    _known(ds, ("kind", *SVMLIGHT_DEFAULTS), "dataset")
    out = {"kind": "svmlight", **SVMLIGHT_DEFAULTS, **{k: v for k, v in ds.items() if k != "kind"}}
    for key in ("source", "url", "path", "mirror", "task", "sha256"):
        if out[key] is not None:
            _string(out[key], f"dataset.{key}")
    if out["source"] is None and out["url"] is None and out["path"] is None:
        raise ConfigError(
            "dataset.source: kind svmlight needs a registry source "
            f"({', '.join(registry.DATASETS)}), a url or a path"
        )
    if out["source"] is not None and out["url"] is not None:
        raise ConfigError("dataset.url: give a registry source or a url, not both")
    if out["mirror"] is not None and out["source"] is None:
        raise ConfigError("dataset.mirror: a mirror replaces the LibSVM site for a source")
    for key in ("url", "mirror"):
        if out[key] is not None and not out[key].startswith(("http://", "https://", "file:")):
            raise ConfigError(f"dataset.{key}: must be an http(s):// or file: URL")
    if out["file"] not in ("papers", "train", "test"):
        raise ConfigError(f"dataset.file: must be papers, train or test, got {out['file']!r}")
    if out["source"] is not None:
        entry = registry.get(out["source"])
        entry.file(out["file"])  # the file exists
        if out["task"] is not None and out["task"] != entry.task:
            raise ConfigError(f"dataset.task: {out['source']} is {entry.task} data")
        out["task"] = entry.task
        if out["n_features"] is None:
            out["n_features"] = entry.n_features
        if out["rows"] is None:
            out["rows"] = entry.file(out["file"]).rows
    elif out["task"] not in TASKS:
        raise ConfigError(
            f"dataset.task: required without a source; one of {', '.join(TASKS)}, "
            f"got {out['task']!r}"
        )
    for key in ("n_features", "rows", "size"):
        if out[key] is not None:
            out[key] = _integer(out[key], f"dataset.{key}", low=1)
    if out["sha256"] is not None:
        out["sha256"] = out["sha256"].lower()
    return out


def _partition(value: Any, dataset: dict[str, Any]) -> str | dict[str, Any]:
    """'natural' (the data set's own clients) or a full partitioner mapping."""
    own_clients = dataset["kind"] != "svmlight"
    if value is None:
        value = "natural" if own_clients else "papers"
    if isinstance(value, str):
        value = {"kind": value}
    if not isinstance(value, dict) or "kind" not in value:
        raise ConfigError("partition: must be a name or a mapping with a 'kind'")
    kind = value["kind"]
    if kind == "natural":
        _known(value, ("kind",), "partition")
        if not own_clients:
            raise ConfigError(
                "partition: svmlight data has no clients of its own; choose one of "
                f"{', '.join(PARTITION_DEFAULTS)}"
            )
        return "natural"
    if kind not in PARTITION_DEFAULTS:
        raise ConfigError(
            f"partition.kind: unknown partitioner {kind!r} "
            f"(known: natural, {', '.join(PARTITION_DEFAULTS)})"
        )
    defaults = {**PARTITION_DEFAULTS[kind], **PARTITION_COMMON}
    _known(value, ("kind", *defaults), "partition")
    out = {"kind": kind, **defaults, **{k: v for k, v in value.items() if k != "kind"}}
    for key in ("clients", "clusters", "parts", "parts_per_client", "k", "bins", "max_tries"):
        if key in out:
            out[key] = _integer(out[key], f"partition.{key}", low=1)
    out["seed"] = _integer(out["seed"], "partition.seed", low=0)
    out["min_size"] = _integer(out["min_size"], "partition.min_size", low=1)
    if "alpha" in out:
        out["alpha"] = _number(out["alpha"], "partition.alpha")
        if out["alpha"] <= 0:
            raise ConfigError(f"partition.alpha: must be > 0, got {out['alpha']!r}")
    out["test_fraction"] = _number(out["test_fraction"], "partition.test_fraction", low=0.0)
    if out["test_fraction"] >= 1:
        raise ConfigError("partition.test_fraction: must be below 1")
    if out["test_split"] not in ("per_client", "global"):
        raise ConfigError("partition.test_split: must be per_client or global")
    if kind == "papers" and out["cluster_by"] not in ("auto", "kmeans", "labels"):
        raise ConfigError("partition.cluster_by: must be auto, kmeans or labels")
    return out


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
