"""The numerics version of a run: which arithmetic computed its trace.

A run id hashes a run's configuration, not the code, so a change that alters the bits of a trace
(an order of floating-point operations, a kernel) must say so, or a results folder would mix
traces of two arithmetics under one id. Such a change raises the number of the shared kernels it
touched, :data:`SHARED` (per model path: a linear model without intercept runs on the linear
kernels, local steps and exact evaluation; any other model on the network kernels), or its
algorithm's ``Algorithm.numerics`` (one number, or one per model path). Every stored run records
its version (the runs table's ``numerics``); a shard takes a stored run of another version for
unfinished, moves it aside and computes it again, and a change to one path leaves the other
path's stored runs finished.
"""

from __future__ import annotations

from typing import Any

# the shared kernels' numerics, per model path (linear 2: exact evaluation fuses its margins'
# multiply-adds, and computes logistic losses with kernels.elementary, summed in four lanes;
# network 2: the layer products are the ?gemm of our own dependency scipy-openblas32,
# kernels.blas, instead of the OpenBLAS SciPy bundles)
SHARED = {"linear": 2, "network": 2}

# what a stored run without a recorded version was computed with (every release before the
# version was recorded computed these bits)
UNRECORDED = "1.1"


def model_path(model: dict[str, Any] | None) -> str:
    """``"linear"`` for a normalised model config of a linear model without intercept (the
    fast linear kernels, ``Network.fast_linear``), else ``"network"``."""
    model = model or {}
    linear = model.get("kind", "linear") == "linear" and not model.get("bias", False)
    return "linear" if linear else "network"


def numerics_version(cfg: dict[str, Any] | None) -> str | None:
    """``<shared kernels>.<algorithm's>``: the numerics a normalised run config computes with
    today (None for an algorithm this installation does not have)."""
    from ..algorithms import ALGORITHMS

    algorithm = cfg.get("algorithm") if isinstance(cfg, dict) else None
    cls = ALGORITHMS.get(algorithm) if isinstance(algorithm, str) else None
    if cls is None:
        return None
    path = model_path(cfg.get("model"))
    own = cls.numerics if isinstance(cls.numerics, int) else cls.numerics[path]
    return f"{SHARED[path]}.{own}"
