"""Hierarchical personalised sparse learning: sFedHP and its baselines pFedMe, HierFAVG, FedProx,
Per-FedAvg and HeurFedAMP (specs/seed-002-sfedhp.md; FedAvg is the fedavg family's)."""

from .algorithms import FedProx, HeurFedAMP, HierFAVG, PerFedAvg, PFedMe, SFedHP

ALGORITHMS = (SFedHP, PFedMe, HierFAVG, FedProx, PerFedAvg, HeurFedAMP)
REPORT = f"{__name__}.report"
ORDER = 1
