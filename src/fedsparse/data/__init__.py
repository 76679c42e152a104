"""Data sets a run can use: the papers' simulations and bring-your-own svmlight files."""

from .federated import FederatedData
from .libsvm import load_qid_file
from .synthetic import simulation

__all__ = ["FederatedData", "load_qid_file", "simulation"]
