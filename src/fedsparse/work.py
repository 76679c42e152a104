"""What an algorithm's round does, and how a run batches its evaluations, as the cost model
(:mod:`fedsparse.sweep.cost`) counts them.

Light at import: the algorithms declare it (their ``work`` hook), the plan file records it,
and a cluster job's own Snakemake reads it back without the algorithms.
"""

from __future__ import annotations

from typing import NamedTuple


class RunWork(NamedTuple):
    """The work an algorithm does in a round, beyond what the data and model decide (its
    ``work`` hook declares it next to the algorithm)."""

    steps: int  # minibatch gradients a computing client takes per round
    support: int | None  # non-zeros per class its global model keeps (None: dense)
    clients: int | None = None  # clients that compute in a round (None: all)
    passes: float = 0.0  # passes over the model's parameters a computing client makes
    states: float = 2.0  # parameter vectors the run keeps per client (memory)
    evaluations: float = 1.0  # forward passes over the data an evaluation makes
    probes: float = 0.0  # one-row gradients a client computes per round (an online k's losses)
    offered_share: float = 0.0  # elements a client offers a round, as a share of the parameters
    selections: float = 0.0  # top-k selections over the model's parameters a client makes a round
    tanh_passes: float = 0.0  # passes a client makes a round taking tanh of every parameter
    # on sparse data, a client of a linear model works on its active coordinates only (the
    # broadcast support and the features its rows touched: kernels.sparse_rounds)
    active_set: bool = False


def models_scored_together(n_outputs: int, n_samples: int, n_features: int, batched: bool) -> int:
    """How many of a run's models are scored in one pass over the data
    (:attr:`fedsparse.objective.evaluation.Evaluation.eval_batch`): where ``batched`` (a linear
    model without intercept on dense data), up to 16 while their margins and copies stay within
    32 MB each; otherwise 1 (sparse data: each model reads its own columns; a network: a
    forward pass each)."""
    if not batched:
        return 1
    per_model = n_outputs * max(n_samples, n_features) * 8
    return max(1, min(16, (32 << 20) // per_model))
