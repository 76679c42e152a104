"""fedsparse: sweeps of federated sparse learning algorithms.

``fedsparse.run(config)`` runs one configuration and returns its per-round
trace as a pandas DataFrame; the ``fedsparse`` command and the Snakemake
workflow build on the same functions.
"""

from __future__ import annotations

__version__ = "0.1.0"

from .errors import ConfigError, DataError, FedsparseError  # noqa: E402
from .experiment import run  # noqa: E402

__all__ = ["ConfigError", "DataError", "FedsparseError", "__version__", "run"]
