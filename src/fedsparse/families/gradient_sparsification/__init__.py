"""Adaptive gradient sparsification: FAB-top-k with its online choice of k, and the baselines
U-top-k, FUB-top-k, periodic-k and send-all (specs/seed-003-adaptive-gs.md)."""

from .algorithms import FABTopK, FUBTopK, PeriodicK, SendAll, UTopK

ALGORITHMS = (FABTopK, UTopK, FUBTopK, PeriodicK, SendAll)
REPORT = f"{__name__}.report"
ORDER = 2
