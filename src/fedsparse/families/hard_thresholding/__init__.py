"""Hard thresholding: Fed-HT, FedIter-HT and Distributed-IHT, from "Federated Nonconvex Sparse
Learning" (specs/seed-000-001-fedht.md)."""

from .algorithms import DistributedIHT, FedHT, FedIterHT

ALGORITHMS = (FedHT, FedIterHT, DistributedIHT)
REPORT = f"{__name__}.report"
ORDER = 0
