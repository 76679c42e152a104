"""The numerics version of a run: which arithmetic computed its trace.

A run id hashes a run's configuration, not the code, so a change that alters the bits of a trace
(an order of floating-point operations, a kernel) must say so, or a results folder would mix
traces of two arithmetics under one id. Such a change raises :data:`CORE` (the shared kernels:
local steps, evaluation, the network kernels) or its algorithm's ``Algorithm.numerics``. Every
stored run records its version (the runs table's ``numerics``); a shard takes a stored run of
another version for unfinished, moves it aside and computes it again.
"""

from __future__ import annotations

CORE = 2  # the shared kernels' numerics (2: exact evaluation's fused margins, own log1p)

# what a stored run without a recorded version was computed with (every release before the
# version was recorded computed these bits)
UNRECORDED = "1.1"


def numerics_version(algorithm: str | None) -> str | None:
    """``<core>.<algorithm's>``: the numerics a run of ``algorithm`` computes with today (None
    for an algorithm this installation does not have)."""
    from .algorithms import ALGORITHMS

    cls = ALGORITHMS.get(algorithm) if isinstance(algorithm, str) else None
    return None if cls is None else f"{CORE}.{cls.numerics}"
