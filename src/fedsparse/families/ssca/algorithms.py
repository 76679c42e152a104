"""Mini-batch SSCA, unconstrained and constrained (spec seed-004-ssca.md).

Clients are stateless: each round every client draws a minibatch and sends its mean
gradient (Algorithm 2: and mean loss) at the broadcast model; the server combines them
with the client weights p_i and holds all recursive state. Row r of a trace is the
model after r updates, update r using t = r in the schedules

    rho_t = rho_scale / t**decay,    gamma_t = gamma_scale / t**(decay + gamma_extra).

* ``ssca`` (Algorithm 1 with Example A, §3.2): min F(w) + lambda ||w||^2 with the
  regulariser linearised through beta, as the paper does; the surrogate's minimiser is
  closed form (16)-(17).
* ``ssca_constrained`` (Algorithm 2 with Example B, §3.4): min ||w||^2 s.t. F(w) <= U,
  exact ||w||^2 objective, slack s with penalty c, Lemma 1's closed form with the
  corrected sign of A-bar; U is not averaged.

Both use the paper's normalisation (P1): the quadratic coefficient is exactly tau.
F is the problem's objective, sum_i p_i f_i with ``model.l2``'s term in every f_i.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from ...algorithms.base import Algorithm, Column, Hyperparameter, RoundCost, dense_bytes
from ...algorithms.common import MemberStack, batch_size
from ...lazy import LazyModule

kernels = LazyModule("fedsparse.kernels")
ssca_kernels = LazyModule("fedsparse.families.ssca.kernels")

PROX_WEIGHT = Hyperparameter(
    "prox_weight",
    float,
    "tau: weight of the proximal term tau ||w - w_t||^2",
    default=0.1,
    low=0.0,
    low_open=True,
)
RHO_SCALE = Hyperparameter(
    "rho_scale",
    float,
    "a1: rho_t = a1 / t**decay (surrogate averaging)",
    default=0.9,
    low=0.0,
    low_open=True,
    high=1.0,
)
GAMMA_SCALE = Hyperparameter(
    "gamma_scale",
    float,
    "a2: gamma_t = a2 / t**(decay + gamma_extra) (iterate averaging)",
    default=0.9,
    low=0.0,
    low_open=True,
    high=1.0,
)
DECAY = Hyperparameter("decay", float, "alpha: the schedules' exponent", default=0.3, low=0.0)
GAMMA_EXTRA = Hyperparameter(
    "gamma_extra", float, "gamma's exponent exceeds rho's by this", default=0.05, low=0.0
)
BATCH_SIZE = batch_size("B: minibatch per client per round, or 'full'", 10)
LAMBDA = Hyperparameter(
    "lambda",
    float,
    "weight of lambda ||w||^2 in ssca's objective (no 1/2)",
    default=1e-5,
    low=0.0,
    symbol="λ",
)
COST_LIMIT = Hyperparameter(
    "cost_limit", float, "U: the constraint F(w) <= U", low=0.0, low_open=True
)
PENALTY = Hyperparameter(
    "penalty", float, "c: exact-penalty weight of the slack", default=1e5, low=0.0, low_open=True
)
# the hyperparameters only the server reads (tau, the schedules), which cohorts may vary
SCHEDULE = ("prox_weight", "rho_scale", "gamma_scale", "decay", "gamma_extra")
SQ_NORM = Column("sq_norm", float, "||w||^2")
SLACK = Column(
    "slack",
    float,
    "the server problem's slack s in the round that produced the row's model (null in round 0)",
)
CONSTRAINT_VALUE = Column("constraint_value", float, "F(w) - U at the row's model")


def schedules(params: dict[str, Any], t: int) -> tuple[float, float]:
    """(rho_t, gamma_t) of round t, counted from 1."""
    a = params["decay"]
    return params["rho_scale"] / t**a, params["gamma_scale"] / t ** (a + params["gamma_extra"])


def lemma1(
    h: np.ndarray, A: float, U: float, tau: float, c: float
) -> tuple[np.ndarray, float, float]:
    """Lemma 1: argmin ||w||^2 + c s  s.t.  h.w + tau ||w||^2 + A - U <= s, s >= 0.

    Returns (w, nu, s) with nu the constraint's multiplier in [0, c]. When even the
    surrogate constraint's minimum is positive (b + 4 tau (U - A) <= 0) nu = c.
    """
    b = float(h @ h)
    D = b + 4.0 * tau * (U - A)
    nu = min(max((math.sqrt(b / D) - 1.0) / tau, 0.0), c) if D > 0.0 else c
    w = (-nu / (2.0 * (1.0 + nu * tau))) * h
    if nu < c:  # (c - nu) s = 0: exactly 0, not the rounding of an active constraint
        return w, nu, 0.0
    return w, nu, max(0.0, float(h @ w) + tau * float(w @ w) + A - U)


class _SSCA(Algorithm):
    """The clients' round and the shared recursions; subclasses solve the server problem."""

    server_constants: ClassVar[tuple[str, ...]]
    family = "SSCA"
    config_label = (("batch_size", "b"),)
    trace_columns = (SQ_NORM,)

    def setup(self) -> None:
        problem = self.problem
        self.W = problem.initial_model()
        self.w = self.W.reshape(-1)  # a view: the flat layout of every model
        P = self.w.size
        self.acc = np.zeros(P)  # (B, C) of (14)-(15): averaged gradient minus 2 tau w
        self.g = np.zeros(P)  # this round's combined minibatch gradient
        self.G = np.zeros((problem.n_clients, P))
        self.losses = np.zeros(problem.n_clients)
        self.perm = np.arange(problem.data.n_samples, dtype=np.int64)
        self.rng = kernels.client_states(self.seed, problem.n_clients)
        b = self.params["batch_size"]
        self.batch = 0 if b is None else b
        most = int(problem.data.client_sizes.max())
        self.work = kernels.mlp_thread_work(
            problem.sizes, most if self.batch == 0 else min(self.batch, most)
        )
        self.slack: float | None = None  # s of the last server problem (Algorithm 2)
        self.stack: _ClientStack | None = None  # a cohort's stacked states, on its first round

    def restore_state(self, state: dict[str, Any]) -> None:
        super().restore_state(state)
        self.w = self.W.reshape(-1)  # the view again (a pickle copies it)

    @classmethod
    def fusable(cls, params: dict[str, Any]) -> tuple[str, ...]:
        """The server's constants: every member's clients draw the same rows (same seed and
        batch size), and the server's recursions are each member's own."""
        return cls.server_constants

    def round(self, t: int) -> RoundCost:
        return self.cohort_round([self], t)[0]

    @classmethod
    def cohort_round(cls, members: list[Algorithm], t: int) -> list[RoundCost]:
        """The members' clients in one kernel (a minibatch's rows read once for all), then
        each member's server step."""
        _ClientStack.of(members).gradients(members)
        return [member.server_step(t) for member in members]

    def combine_clients(self) -> float:
        """``self.g = sum_i p_i G[i]`` of this round's clients, and their combined loss
        sum_i p_i f_i (the paper's f-hat, l2 term included)."""
        problem = self.problem
        ssca_kernels.weighted_rows(self.G, problem.p, self.g)
        return float(kernels.weighted_sum(self.losses, problem.p))

    def cost(self, extra_up: int) -> RoundCost:
        n, size = self.problem.n_clients, dense_bytes(self.w.size)
        return RoundCost(n * (size + extra_up), n * size, 1)

    @property
    def model(self) -> np.ndarray:
        return self.W

    def extra_metrics(self) -> dict[str, Any]:
        return {"sq_norm": float(self.w @ self.w)}


class SSCA(_SSCA):
    name = "ssca"
    summary = "mini-batch SSCA (Algorithm 1): min F + lambda ||w||^2, server-side recursions"
    hyperparameters = (PROX_WEIGHT, RHO_SCALE, GAMMA_SCALE, DECAY, GAMMA_EXTRA, LAMBDA, BATCH_SIZE)
    server_constants = SCHEDULE + ("lambda",)

    def setup(self) -> None:
        super().setup()
        self.beta = np.zeros(self.w.size)  # running average of the iterates

    def server_step(self, t: int) -> RoundCost:
        params = self.params
        tau, lam = params["prox_weight"], params["lambda"]
        rho, gamma = schedules(params, t + 1)
        # g = sum_i p_i G_i; beta = (1 - rho) beta + rho w; acc = (1 - rho) acc +
        # rho (g - 2 tau w); w_bar = -(acc + 2 lambda beta) / (2 tau) (16)-(17);
        # w = (1 - gamma) w + gamma w_bar: one fused pass over the d coordinates
        problem = self.problem
        ssca_kernels.ssca_server_step(
            self.G, problem.p, self.w, self.beta, self.acc, self.g, rho, gamma, tau, lam
        )
        return self.cost(0)

    def finish_metrics(self, row: dict[str, Any]) -> dict[str, Any]:
        return {"objective": row["objective"] + self.params["lambda"] * row["sq_norm"]}


class SSCAConstrained(_SSCA):
    name = "ssca_constrained"
    summary = "mini-batch SSCA (Algorithm 2): min ||w||^2 s.t. F(w) <= U, Lemma 1 server step"
    hyperparameters = (
        PROX_WEIGHT,
        RHO_SCALE,
        GAMMA_SCALE,
        DECAY,
        GAMMA_EXTRA,
        COST_LIMIT,
        PENALTY,
        BATCH_SIZE,
    )
    trace_columns = (SLACK, CONSTRAINT_VALUE, SQ_NORM)
    server_constants = SCHEDULE + ("cost_limit", "penalty")

    def setup(self) -> None:
        super().setup()
        self.A = 0.0  # the surrogate constraint's constant (20)

    def server_step(self, t: int) -> RoundCost:
        params = self.params
        tau = params["prox_weight"]
        rho, gamma = schedules(params, t + 1)
        f_hat = self.combine_clients()
        w = self.w
        sq = float(w @ w)
        a_bar = f_hat + tau * sq  # with the leading minus of the cross-entropy (P2)
        self.A = (1.0 - rho) * self.A + rho * (a_bar - float(self.g @ w))
        self.acc *= 1.0 - rho
        self.acc += rho * (self.g - 2.0 * tau * w)
        w_bar, _, s = lemma1(self.acc, self.A, params["cost_limit"], tau, params["penalty"])
        w *= 1.0 - gamma
        w += gamma * w_bar
        self.slack = s
        return self.cost(8)  # the loss sum: one more number per client

    def extra_metrics(self) -> dict[str, Any]:
        return {**super().extra_metrics(), "slack": self.slack}

    def finish_metrics(self, row: dict[str, Any]) -> dict[str, Any]:
        """The paper's F_0 = ||w||^2 as the objective; F(w) - U beside it."""
        return {
            "objective": row["sq_norm"],
            "constraint_value": row["objective"] - self.params["cost_limit"],
        }


class _ClientStack(MemberStack):
    """The stack of :func:`client_batch_grads_cohort`: the members' parameters ``w`` (and
    ``W``, its shaped view), gradients ``G`` and ``losses``."""

    arrays = ("w", "G", "losses")

    def bind(self, member: Any) -> None:
        member.W = member.w.reshape(member.W.shape)

    def gradients(self, members: list[Any]) -> None:
        """Every client's minibatch mean gradient and loss at each member's ``w``."""
        first = members[0]
        problem, data = first.problem, first.problem.data
        ssca_kernels.client_batch_grads_cohort(
            data.kernel_X,
            data.y,
            data.client_ptr,
            self.w,
            self.which(members),
            first.perm,
            first.rng,
            first.batch,
            problem.kernel_model,
            self.G,
            self.losses,
            first.work,
        )
