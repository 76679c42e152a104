"""What can be checked of a planned sweep before any job runs.

:func:`fedsparse.sweep.plan_sweep` checks every value on its own; this module checks values
against the data they will meet, wherever the config fixes that data without building it:
data files named by a path exist and can be read, and every run's hyperparameters fit the
data's shape (a sparsity level above the dimension, more sampled clients than clients, edges
that do not divide the clients, a k above the model's parameter count). The shape comes from
the generator's config (synthetic data), the registry (Fashion-MNIST, MNIST, the LibSVM
sets), a file's header (a folder of IDX files), and the partition (the client count). What
only the built data can tell fails in the data or shard job, in one line in its log.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from .algorithms import ALGORITHMS
from .errors import ConfigError, DataError

IMAGE_PIXELS = 28 * 28  # both registry image sets (Fashion-MNIST, MNIST) are 28 x 28 grey
IMAGE_CLASSES = 10


@dataclass(frozen=True)
class Facts:
    """What a data set looks like to a model, known before it is built."""

    task: str  # regression | binary | multiclass
    n_features: int
    n_classes: int
    n_clients: int


def check_plan(plan: Any, sweep: dict[str, Any]) -> None:
    """Raise ConfigError naming the data set, algorithm and key of the first run that cannot
    run on its data (see the module docstring)."""
    for name, spec in plan.datasets.items():
        check_paths(spec["data"], f"datasets.{name}.data")
    problems: dict[str, Any] = {}
    shared: set[int] = set()  # the seeds of a configuration share its params (plan_sweep)
    seen: set[tuple[str, str, str]] = set()
    for run in plan.runs:
        cfg = run.config
        if id(cfg["params"]) in shared:
            continue
        shared.add(id(cfg["params"]))
        ds, algo = run.dataset, cfg["algorithm"]
        key = (ds, algo, json.dumps(cfg["params"], sort_keys=True))
        if key in seen:
            continue
        seen.add(key)
        if ds not in problems:
            problems[ds] = _problem(plan.datasets[ds], cfg)
        if problems[ds] is None:
            continue
        try:
            params = ALGORITHMS[algo].resolved_params(cfg["params"])
            ALGORITHMS[algo](problems[ds], params, cfg["seed"]).check_problem()
        except ConfigError as exc:
            key = re.match(r"params\.(\w+)", str(exc))
            msg = str(exc)
            if key:  # name the config key the value came from
                msg = _source(sweep, ds, algo, key[1]) + msg[key.end() :]
            raise ConfigError(f"{msg} ({algo} on data set {ds})") from None


def check_paths(data: dict[str, Any], where: str) -> None:
    """A data set's local file or folder exists and can be read."""
    path = data.get("path")
    if path is None or data["kind"] == "synthetic":
        return
    p = Path(path).expanduser()
    if data["kind"] in ("libsvm", "svmlight"):
        if not p.is_file():
            raise ConfigError(f"{where}.path: no such file: {path}")
        if not os.access(p, os.R_OK):
            raise ConfigError(f"{where}.path: cannot read {path} (permission denied)")
        return
    if not p.is_dir():
        raise ConfigError(f"{where}.path: no such folder: {path}")
    if data["kind"] == "leaf":
        for sub in ("train", "test"):
            if not (p / sub).is_dir():
                raise ConfigError(f"{where}.path: {path} has no {sub}/ folder (LEAF's layout)")
    elif data["kind"] == "idx" and _idx_file(p) is None:
        raise ConfigError(
            f"{where}.path: {path} holds no train-images-idx3-ubyte[.gz] (an IDX image folder)"
        )


def facts(data: dict[str, Any], partition: Any) -> Facts | None:
    """The task, features, classes and clients of a data set spec, where the config fixes
    them; None where only the built data can tell."""
    kind = data["kind"]
    clients = partition.get("clients") if isinstance(partition, dict) else None
    if kind == "synthetic":
        task = "regression" if data["task"] == "linear" else "binary"
        return Facts(task, data["dim"], 0, clients or data["clients"])
    if clients is None:
        return None
    if kind == "idx":
        pixels = IMAGE_PIXELS if data.get("source") else _idx_pixels(Path(data["path"]))
        return None if pixels is None else Facts("multiclass", pixels, IMAGE_CLASSES, clients)
    if kind == "svmlight" and data.get("source"):
        from .data import registry

        entry = registry.DATASETS[data["source"]]
        n_features = data.get("n_features") or entry.n_features
        classes = 0 if entry.task != "multiclass" else None
        if classes is None:
            return None  # a multiclass set's class count is in its labels
        return Facts(entry.task, n_features, classes, clients)
    return None


def _problem(spec: dict[str, Any], cfg: dict[str, Any]):
    """A Problem over an empty stand-in of the data set with its known shape (or None)."""
    from .data import FederatedData
    from .problem import Problem

    known = facts(spec["data"], spec.get("partition", "natural"))
    if known is None:
        return None
    n = known.n_clients
    y = np.zeros(n) if known.task != "binary" else np.ones(n)
    stand_in = FederatedData(
        name=cfg["dataset"]["name"],
        task=known.task,
        X=sp.csr_matrix((n, known.n_features)),  # one empty row per client: no memory
        y=y,
        client_ptr=np.arange(n + 1),
        n_classes=known.n_classes,
    )
    return Problem.from_config(stand_in, cfg["model"])


def _source(sweep: dict[str, Any], ds: str, algo: str, key: str) -> str:
    """The config key a hyperparameter's value came from: the algorithm's override, the data
    set's grid, or the sweep's grid."""
    overrides = sweep.get("algorithms", {})
    entry = overrides.get(algo) if isinstance(overrides, dict) else None
    sets = entry if isinstance(entry, list) else [entry or {}]
    if any(key in s for s in sets if isinstance(s, dict)):
        return f"algorithms.{algo}.{key}"
    if key in (sweep["datasets"].get(ds, {}).get("grid") or {}):
        return f"datasets.{ds}.grid.{key}"
    return f"grid.{key}"


def _idx_file(folder: Path) -> Path | None:
    for name in ("train-images-idx3-ubyte", "train-images-idx3-ubyte.gz"):
        if (folder / name).is_file():
            return folder / name
    return None


def _idx_pixels(folder: Path) -> int | None:
    """Pixels per image from the header of a folder's training images (None: unreadable)."""
    path = _idx_file(folder)
    if path is None:
        return None
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as fh:
            head = fh.read(16)
    except OSError as exc:
        raise DataError(f"{path}: cannot read the IDX header ({exc})") from None
    if len(head) < 16 or head[:3] != b"\0\0\x08" or head[3] != 3:
        return None  # the data job reports what is wrong with it
    _, rows, cols = struct.unpack(">III", head[4:16])
    return rows * cols
