"""Algorithm registry: name in a config -> class."""

from __future__ import annotations

from .base import Algorithm, Hyperparameter, RoundCost, dense_bytes, sparse_bytes
from .fedavg import FedAvg
from .gradsparse import FABTopK, FUBTopK, PeriodicK, SendAll, UTopK
from .hardthreshold import DistributedIHT, FedHT, FedIterHT
from .personalized import FedProx, HeurFedAMP, HierFAVG, PerFedAvg, PFedMe, SFedHP
from .ssca import SSCA, SSCAConstrained

ALGORITHMS: dict[str, type[Algorithm]] = {
    cls.name: cls
    for cls in (
        FedHT,
        FedIterHT,
        DistributedIHT,
        FABTopK,
        UTopK,
        FUBTopK,
        PeriodicK,
        SendAll,
        FedAvg,
        SSCA,
        SSCAConstrained,
        SFedHP,
        PFedMe,
        HierFAVG,
        FedProx,
        PerFedAvg,
        HeurFedAMP,
    )
}

__all__ = [
    "ALGORITHMS",
    "Algorithm",
    "DistributedIHT",
    "FABTopK",
    "FUBTopK",
    "FedAvg",
    "FedHT",
    "FedProx",
    "FedIterHT",
    "HeurFedAMP",
    "HierFAVG",
    "Hyperparameter",
    "PFedMe",
    "PerFedAvg",
    "PeriodicK",
    "RoundCost",
    "SFedHP",
    "SSCA",
    "SSCAConstrained",
    "SendAll",
    "UTopK",
    "dense_bytes",
    "sparse_bytes",
]
