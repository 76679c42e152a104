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

import json
import re
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..algorithms import ALGORITHMS
from ..data.kinds import facts, kind_of
from ..errors import ConfigError


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
    if path is not None:
        kind_of(data).check_path(path, where)


def _problem(spec: dict[str, Any], cfg: dict[str, Any]):
    """A Problem over an empty stand-in of the data set with its known shape (or None)."""
    from ..data import FederatedData
    from ..objective.problem import Problem

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
