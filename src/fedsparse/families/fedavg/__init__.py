"""FedAvg (local SGD with model averaging): the SGD baseline that several families compare with.
It has no report page of its own; the pages of the families that use it show it."""

from .algorithms import FedAvg

ALGORITHMS = (FedAvg,)
ORDER = 4
