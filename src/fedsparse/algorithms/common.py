"""Declarations several families share: the step-size and batch-size hyperparameters, the
server's random stream, the Remark-1 bits and density trace columns of FedAvg and the
personalised family, and the lazy handle through which a family names its kernels.

A family imports these from here, never from another family's module.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .base import Column, Hyperparameter


def stepsize(doc: str, **declared: Any) -> Hyperparameter:
    """The ``stepsize`` hyperparameter: a float > 0, required unless ``default`` is declared
    (``declared``: the other fields of :class:`~fedsparse.algorithms.base.Hyperparameter`)."""
    return Hyperparameter("stepsize", float, doc, low=0.0, low_open=True, **declared)


def batch_size(doc: str, default: int) -> Hyperparameter:
    """The ``batch_size`` hyperparameter: rows per minibatch (>= 1), or ``'full'`` (stored as
    None, the kernels' 0: every local row, deterministic)."""
    return Hyperparameter("batch_size", int, doc, default=default, low=1, full_ok=True)


# The minibatch of one local SGD step: the hard-thresholding family's and FedAvg's (FedAvg is
# Fed-HT with sparsity = every parameter, bit for bit, so it declares the same).
LOCAL_STEP_BATCH_SIZE = batch_size("minibatch size per local step, or 'full' (deterministic)", 10)


def server_stream(seed: int, n_clients: int) -> np.random.Generator:
    """The server's random stream: the run seed's child after the clients' ones
    (:func:`fedsparse.kernels.client_states` spawns children 0..n_clients-1)."""
    return np.random.default_rng(np.random.SeedSequence(seed).spawn(n_clients + 1)[-1])


# Trace columns of FedAvg and the personalised family (sFedHP's paper counts bits)
BITS = Column(
    "bits",
    float,
    "cumulative Remark-1 bits of one edge (sfedhp) or one client (flat methods), up and down",
)
DENSITY = Column("density", float, "density of the global model w")


class MemberStack:
    """A cohort's per-member arrays in one stack, for a family's cohort kernels: each member
    attribute named in ``arrays`` is stacked (the stack's attribute of the same name, shape
    (stack size, *the member's)) and the member's becomes a view of its row; the members share
    the first's ``perm`` and ``rng`` (equal seeds draw equal minibatches), so a kernel reads every
    member's state where the member reads its own. Made on the members' first fused round, and
    again for a cohort seen for the first time (a member that diverged has left the list since:
    the others stay where they are in the stack). A member holds it as ``stack``, the name
    checkpoints leave out (Algorithm.checkpoint_state)."""

    arrays: tuple[str, ...] = ()

    def __init__(self, members: list[Any]):
        self.size = len(members)
        self.position = {id(m): k for k, m in enumerate(members)}
        for name in self.arrays:
            stacked = np.stack([getattr(m, name) for m in members])
            setattr(self, name, stacked)
            for k, m in enumerate(members):
                setattr(m, name, stacked[k])
        perm, rng = members[0].perm, members[0].rng
        for m in members:
            m.perm, m.rng, m.stack = perm, rng, self
            self.bind(m)

    def bind(self, member: Any) -> None:
        """Views a member keeps of its stacked arrays (none by default)."""

    @classmethod
    def of(cls, members: list[Any]) -> Any:
        stack = getattr(members[0], "stack", None)
        if stack is None or any(getattr(m, "stack", None) is not stack for m in members):
            stack = cls(members)
        return stack

    def which(self, members: list[Any]) -> np.ndarray:
        """The members' places in the stack (the kernels' ``members``)."""
        return np.array([self.position[id(m)] for m in members], dtype=np.int64)

    def values(self, members: list[Any], values: list[float]) -> np.ndarray:
        """A constant of each member (in ``members``' order) at its place in the stack."""
        out = np.zeros(self.size)
        out[self.which(members)] = values
        return out


class LocalSGDStack(MemberStack):
    """The stack of the fused local-SGD kernel
    (:meth:`fedsparse.objective.problem.Problem.local_sgd_cohort_round`): the members' global models
    ``W`` and clients' models ``W_local``."""

    arrays = ("W", "W_local")

    def steps(
        self,
        members: list[Any],
        stepsizes: list[float],
        steps: int,
        batch: int,
        tau_local: int = 0,
        clients: np.ndarray | None = None,
    ) -> None:
        """The members' local steps (their own step sizes, in order) from their ``W``."""
        first = members[0]
        first.problem.local_sgd_cohort_round(
            self.W,
            self.W_local,
            self.which(members),
            first.perm,
            first.rng,
            steps,
            batch,
            self.values(members, stepsizes),
            first.work,
            tau_local,
            clients,
        )
