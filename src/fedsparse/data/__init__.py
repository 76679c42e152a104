"""Data sets a run can use: the papers' simulations, bring-your-own svmlight files, and real
data sets from files (svmlight, IDX image sets, LEAF folders; see :mod:`.prepare`).

The names below load on first use: the config layer reads :mod:`.defaults` without the data
code's numba and SciPy (a cluster job's own Snakemake imports it to read the plan).
"""

from __future__ import annotations

from ..lazy import lazy_names

__all__ = [
    "FederatedData",
    "load_built",
    "load_dataset_dir",
    "load_qid_file",
    "save_dataset",
    "simulation",
]

__getattr__ = lazy_names(
    __name__,
    {
        "FederatedData": "fedsparse.data.federated",
        "load_qid_file": "fedsparse.data.libsvm",
        "load_built": "fedsparse.data.store",
        "load_dataset_dir": "fedsparse.data.store",
        "save_dataset": "fedsparse.data.store",
        "simulation": "fedsparse.data.synthetic",
    },
)
