"""Data sets a run can use: the papers' simulations, bring-your-own svmlight files, and real
data sets from files (svmlight, IDX image sets, LEAF folders; see :mod:`.prepare`).

The names below load on first use: the config layer reads :mod:`.defaults` without the data
code's numba and SciPy (a cluster job's own Snakemake imports it to read the plan).
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "FederatedData",
    "load_built",
    "load_dataset_dir",
    "load_qid_file",
    "save_dataset",
    "simulation",
]

_MODULE_OF = {
    "FederatedData": "federated",
    "load_qid_file": "libsvm",
    "load_built": "store",
    "load_dataset_dir": "store",
    "save_dataset": "store",
    "simulation": "synthetic",
}


def __getattr__(name: str) -> Any:
    if name in _MODULE_OF:
        return getattr(importlib.import_module(f".{_MODULE_OF[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
