"""Mini-batch stochastic successive convex approximation, unconstrained and constrained
(specs/seed-004-ssca.md; its SGD baseline is the fedavg family's FedAvg)."""

from .algorithms import SSCA, SSCAConstrained

ALGORITHMS = (SSCA, SSCAConstrained)
REPORT = f"{__name__}.report"
ORDER = 3
