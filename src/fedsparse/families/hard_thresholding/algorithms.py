"""Fed-HT, FedIter-HT and Distributed-IHT (seed papers 000/001; spec seed-000-001-fedht.md).

All three run local minibatch SGD on every client from the broadcast model and
let the server take ``H_tau`` of the weighted average:

* Fed-HT: K plain local steps; uplink dense, downlink tau-sparse.
* FedIter-HT: ``H_tau`` after every local step; uplink and downlink tau-sparse.
* Distributed-IHT: one stochastic gradient step per round (Fed-HT with K = 1);
  the worker sends its dense gradient.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from ...algorithms.base import (
    Algorithm,
    Hyperparameter,
    RoundCost,
    RunWork,
    dense_bytes,
    sparse_bytes,
)
from ...algorithms.common import LOCAL_STEP_BATCH_SIZE, LocalSGDStack, stepsize
from ...errors import ConfigError
from ...lazy import LazyModule

kernels = LazyModule("fedsparse.kernels")

STEPSIZE = stepsize("constant step size gamma")
SPARSITY = Hyperparameter("sparsity", int, "tau: non-zeros kept per class by H_tau", low=1)
LOCAL_STEPS = Hyperparameter("local_steps", int, "K: local steps per round", default=5, low=1)
BATCH_GROWTH = Hyperparameter(
    "batch_growth",
    float,
    "per-round batch growth g: b_t = ceil(b * g**t), the papers' Gamma/omega**t with omega = 1/g",
    default=1.0,
    low=1.0,
    label_omits_default=True,
)
THRESHOLD = Hyperparameter(
    "threshold",
    str,
    "networks: H_tau over all parameters (all) or tau per layer, W_l and b_l together "
    "(per_layer; a layer with at most tau parameters keeps them all)",
    default="all",
    choices=("all", "per_layer"),
    omit_default=True,
)


class _LocalSGDHardThreshold(Algorithm):
    """Shared implementation; subclasses set the local thresholding and upload encoding."""

    threshold_locally: ClassVar[bool]
    # linear 2: a local step on dense rows sums in FMA lanes (kernels.dense_steps)
    numerics = {"linear": 2, "network": 1}
    hyperparameters = (
        STEPSIZE,
        SPARSITY,
        LOCAL_STEPS,
        LOCAL_STEP_BATCH_SIZE,
        BATCH_GROWTH,
        THRESHOLD,
    )
    family = "Hard thresholding"
    config_label = (
        ("stepsize", "γ"),
        ("local_steps", "K"),
        ("sparsity", "τ"),
        ("batch_size", "b"),
        ("batch_growth", "growth"),
    )

    @classmethod
    def model_support(cls, params: dict[str, Any]) -> int | None:
        """H_τ keeps τ entries of each class's weights: an exact evaluation reads τ columns."""
        return params.get("sparsity")

    def check_problem(self, where: str = "params") -> None:
        problem = self.problem
        d = problem.shape[1]  # a row of W: the features, or every parameter of a network
        if self.params["sparsity"] > d:
            raise ConfigError(
                f"{where}.sparsity: {self.params['sparsity']} is larger than the "
                f"{problem.parameter_noun} {d} of dataset {problem.data.name}"
            )
        if self.param("threshold") == "per_layer" and problem.is_linear:
            raise ConfigError(
                f"{where}.threshold: per_layer is for networks (model.kind mlp, or bias); "
                "a linear model is thresholded per class already"
            )

    def setup(self) -> None:
        problem = self.problem
        self.W = problem.initial_model()
        self.perm = np.arange(problem.data.n_samples, dtype=np.int64)
        self.rng = kernels.client_states(self.seed, problem.n_clients)
        self.scratch = kernels.threshold_scratch(problem.shape[1])
        # On CSR data, local steps of a linear model that touch only each client's active
        # coordinates (the broadcast support plus the features its minibatches hit) are
        # several times faster than dense ones (RCV1-shaped, one thread: Fed-HT 18 -> 8 ms
        # per round, Distributed-IHT 9 -> 2 ms; FedIter-HT 10 ms, 125 with dense steps).
        self.use_active_set(problem.has_active_set_steps)

    def restore_state(self, state: dict[str, Any]) -> None:
        self.setup()
        self.use_active_set(state["active_set"])  # its work space, as the checkpointed run's
        vars(self).update(state)

    def use_active_set(self, on: bool) -> None:
        """Choose the local-step kernel (both give the same bits); call after ``setup``."""
        problem = self.problem
        self.active_set = on
        if on:
            if not problem.has_active_set_steps:
                raise ValueError("the active-set kernel needs CSR data and a linear model")
            indptr, ptr = problem.data.kernel_X[2], problem.data.client_ptr
            self._client_nnz = indptr[ptr[1:]] - indptr[ptr[:-1]]
            # every client has a row (FederatedData checks), so no empty reduceat segment
            self._client_widest_row = np.maximum.reduceat(np.diff(indptr), ptr[:-1])
            self.compact, self.work = None, None
            self.W_local = None
        else:
            self.W_local = np.zeros((problem.n_clients, *problem.shape))
            self.work = problem.local_work()
        self.stack = None  # a cohort's stacked models (LocalSGDStack), on first fused round

    def _compact_capacity(self, batch: int) -> int:
        """Coordinates a client's model may hold at the end of a round with this batch size.

        With local H_tau at most c * tau per client; without, the broadcast support
        (at most c * tau columns) plus every feature the client's sampled rows touch.
        """
        problem, params = self.problem, self.params
        c, d, tau = problem.shape[0], problem.n_features, params["sparsity"]
        if self.threshold_locally:
            return min(d, c * tau)
        sizes = problem.data.client_sizes
        rows = sizes if batch <= 0 else np.minimum(sizes, params["local_steps"] * batch)
        touched = np.minimum(self._client_nnz, rows * self._client_widest_row)
        return int(min(d, c * tau + touched.max()))

    @property
    def local_models(self) -> np.ndarray:
        """Each client's model at the end of the last round, shape (n_clients, *model shape)."""
        if self.active_set:
            if self.compact is None:  # before the first round
                return np.zeros((self.problem.n_clients, *self.problem.shape))
            return kernels.dense_models(*self.compact, self.problem.n_features)
        return self.W_local

    def batch_at(self, t: int) -> int:
        """Minibatch size in round t; 0 means the whole local data set."""
        b = self.params["batch_size"]
        if b is None:
            return 0
        growth = self.params["batch_growth"]
        if growth == 1.0:
            return b
        # Any batch of at least the largest client's size is that client's full
        # batch; cap there so b * growth**t can neither overflow a float nor
        # exceed the int64 the kernel takes.
        cap = int(self.problem.data.client_sizes.max())
        try:
            grown = b * growth**t
        except OverflowError:
            return cap
        return cap if grown >= cap else math.ceil(grown)

    @classmethod
    def fusable(cls, params: dict[str, Any]) -> tuple[str, ...]:
        """Step sizes: the members' minibatches are the same rows (same seed, clients, K, b)."""
        return ("stepsize",)

    @property
    def fuses_steps(self) -> bool:
        """Whether its local steps run as a cohort's (:func:`kernels.local_sgd_cohort_round`):
        a linear model with dense steps. The active-set and network steps run member by
        member (their evaluations still share passes)."""
        return self.problem.is_linear and not self.active_set

    def round(self, t: int) -> RoundCost:
        return self.cohort_round([self], t)[0]

    @classmethod
    def cohort_round(cls, members: list[Algorithm], t: int) -> list[RoundCost]:
        down = [m.broadcast_bytes() for m in members]  # of H_tau(x_t), before the steps
        first = members[0]
        if first.fuses_steps:
            stepsizes = [m.params["stepsize"] for m in members]
            steps, batch = first.params["local_steps"], first.batch_at(t)
            LocalSGDStack.of(members).steps(members, stepsizes, steps, batch, first.tau_local)
        else:
            for member in members:
                member.local_steps(t)
        return [m.server_step(d) for m, d in zip(members, down, strict=True)]

    def broadcast_bytes(self) -> int:
        return self.problem.n_clients * sparse_bytes(np.count_nonzero(self.W))

    def local_steps(self, t: int) -> None:
        """This member's local steps of round ``t`` alone (active-set or network steps)."""
        problem, params = self.problem, self.params
        n = problem.n_clients
        batch = self.batch_at(t)
        steps = (self.perm, self.rng, params["local_steps"], batch, params["stepsize"])
        tau_local = self.tau_local
        if self.active_set:
            support = np.flatnonzero(np.any(self.W != 0.0, axis=0))
            capacity = self._compact_capacity(batch)
            if support.size > min(problem.n_features, problem.shape[0] * params["sparsity"]):
                # cannot happen (W is H_tau per row), but the capacity counts on it
                raise RuntimeError("broadcast model has more non-zero columns than c * sparsity")
            if self.compact is None or self.compact[0].shape[1] < capacity:  # grows with b
                self.compact, self.work = kernels.sparse_buffers(n, *problem.shape, capacity)
            problem.active_set_sgd_round(
                self.W, support, self.compact, *steps, tau_local, self.work
            )
        else:
            bounds = self._layer_bounds()
            problem.local_sgd_round(
                self.W,
                self.W_local,
                *steps,
                self.work,
                tau_local=tau_local,
                layer_bounds=bounds[0] if bounds else None,
            )

    @classmethod
    def work(cls, params: dict[str, Any]) -> RunWork:
        """A client on sparse data works on its active coordinates; FedIter-HT's clients also
        select the τ largest weights after every local step."""
        work = super().work(params)._replace(active_set=True)
        return work._replace(selections=float(work.steps)) if cls.threshold_locally else work

    @property
    def tau_local(self) -> int:
        """tau of the H_tau after every local step; 0: none (only FedIter-HT thresholds)."""
        return self.params["sparsity"] if self.threshold_locally else 0

    def server_step(self, bytes_down: int) -> RoundCost:
        """The uplink, the server's H_tau of the average, and the round's cost."""
        problem, params = self.problem, self.params
        n = problem.n_clients
        if not self.threshold_locally:
            bytes_up = n * dense_bytes(self.W.size)
        elif self.active_set:
            bytes_up = sparse_bytes(kernels.nnz_active(*self.compact[1:]).sum())
        else:
            bytes_up = sparse_bytes(kernels.nnz_per_client(self.W_local).sum())
        tau = params["sparsity"]
        if self.active_set:
            kernels.aggregate_active(*self.compact, problem.p, self.W)
            kernels.hard_threshold_rows(self.W, tau, self.scratch)
        elif self._layer_bounds():
            # no H_tau in the average: it is taken per layer
            kernels.aggregate(self.W_local, problem.p, self.W.shape[1], self.W, self.scratch)
            bounds = problem.network.layer_bounds
            for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
                kernels.hard_threshold(self.W[0, lo:hi], tau, self.scratch)
        else:
            kernels.aggregate(self.W_local, problem.p, tau, self.W, self.scratch)
        # values for the time model: a dense value is one, a sparse entry two (value + index)
        up = bytes_up / (n * (sparse_bytes(1) / 2 if self.threshold_locally else dense_bytes(1)))
        return RoundCost(
            bytes_up, bytes_down, params["local_steps"], up, 2 * bytes_down / (n * sparse_bytes(1))
        )

    def _layer_bounds(self) -> tuple[np.ndarray, ...]:
        """The network's layer bounds when thresholding per layer, else nothing."""
        if self.param("threshold") == "per_layer":
            return (self.problem.network.layer_bounds,)
        return ()

    @property
    def model(self) -> np.ndarray:
        return self.W


class FedHT(_LocalSGDHardThreshold):
    name = "fedht"
    summary = "Fed-HT: K local SGD steps, server H_tau of the average (dense uplink)"
    label, colour = "Fed-HT", "tab:blue"
    report_order = 1
    threshold_locally = False


class FedIterHT(_LocalSGDHardThreshold):
    name = "fediterht"
    summary = "FedIter-HT: H_tau after every local step and at the server (sparse both ways)"
    label, colour = "FedIter-HT", "tab:orange"
    report_order = 2
    threshold_locally = True


class DistributedIHT(_LocalSGDHardThreshold):
    name = "distiht"
    summary = "Distributed-IHT: one stochastic gradient per worker per round, server H_tau"
    label, colour = "Distributed-IHT", "tab:green"
    report_order = 0  # the baseline: first
    threshold_locally = False
    hyperparameters = (
        STEPSIZE,
        SPARSITY,
        Hyperparameter(
            "local_steps", int, "always 1 (one gradient per round)", default=1, low=1, high=1
        ),
        LOCAL_STEP_BATCH_SIZE,
        BATCH_GROWTH,
        THRESHOLD,
    )
