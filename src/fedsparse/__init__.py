"""fedsparse: sweeps of federated sparse learning algorithms.

``fedsparse.run(config)`` runs one configuration and returns its per-round
trace as a pandas DataFrame; the ``fedsparse`` command and the Snakemake
workflow build on the same functions.
"""

from __future__ import annotations

from typing import Any

from .errors import ConfigError, DataError, FedsparseError

__version__ = "0.1.0"

__all__ = ["ConfigError", "DataError", "FedsparseError", "__version__", "run"]


def __getattr__(name: str) -> Any:
    # ``run`` is imported on first use: importing any fedsparse module runs this file, and
    # the experiment's kernels (numba, scipy: ~1 s) would otherwise load in every Snakemake
    # process, a cluster job's own included, which only reads the plan.
    if name == "run":
        from .experiment import run

        return run
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
