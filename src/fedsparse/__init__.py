"""fedsparse: sweeps of federated sparse learning algorithms.

``fedsparse.run(config)`` runs one configuration and returns its per-round
trace as a pandas DataFrame; the ``fedsparse`` command and the Snakemake
workflow build on the same functions.
"""

from __future__ import annotations

from .errors import ConfigError, DataError, FedsparseError
from .lazy import lazy_names

__version__ = "0.1.0"

__all__ = ["ConfigError", "DataError", "FedsparseError", "__version__", "run"]


# ``run`` loads the experiment and its kernels: on first use only (fedsparse.lazy)
__getattr__ = lazy_names(__name__, {"run": "fedsparse.training.experiment"})
