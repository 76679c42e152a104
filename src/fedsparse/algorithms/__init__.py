"""Algorithm registry: name in a config -> class."""

from __future__ import annotations

from .base import Algorithm, Hyperparameter, RoundCost, dense_bytes, sparse_bytes
from .hardthreshold import DistributedIHT, FedHT, FedIterHT

ALGORITHMS: dict[str, type[Algorithm]] = {
    cls.name: cls for cls in (FedHT, FedIterHT, DistributedIHT)
}

__all__ = [
    "ALGORITHMS",
    "Algorithm",
    "DistributedIHT",
    "FedHT",
    "FedIterHT",
    "Hyperparameter",
    "RoundCost",
    "dense_bytes",
    "sparse_bytes",
]
