"""The algorithms: ``ALGORITHMS`` (name in a config -> class, see ``registry``), the base
declarations, and the built-in classes by name (``from fedsparse.algorithms import FedHT``).

Light at import: the classes load on first use, and their numba kernels only when a run
first calls one (:mod:`fedsparse.lazy`).
"""

from __future__ import annotations

from typing import Any

from ..lazy import lazy_names
from .registry import ALGORITHMS, GROUP

_BASE = ("Algorithm", "Column", "Hyperparameter", "RoundCost", "dense_bytes", "sparse_bytes")

__all__ = ["ALGORITHMS", "GROUP", *_BASE]


def _builtin_class(name: str) -> Any:
    if name[:1].isupper():  # a built-in class, by its name
        from .registry import families

        for family in families(plugins=False):
            for cls in family.algorithms:
                if cls.__name__ == name:
                    return cls
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__getattr__ = lazy_names(
    __name__, dict.fromkeys(_BASE, "fedsparse.algorithms.base"), fallback=_builtin_class
)
