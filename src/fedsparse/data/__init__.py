"""Data sets a run can use: the papers' simulations, bring-your-own svmlight files, and real
data sets from files (svmlight, IDX image sets, LEAF folders; see :mod:`.prepare`)."""

from .federated import FederatedData
from .libsvm import load_qid_file
from .store import load_dataset_dir, save_dataset
from .synthetic import simulation

__all__ = ["FederatedData", "load_dataset_dir", "load_qid_file", "save_dataset", "simulation"]
