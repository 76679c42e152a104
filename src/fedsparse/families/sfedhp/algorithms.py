"""Hierarchical personalised sparse FL (sFedHP) and its baselines (spec seed-002 §3): pFedMe,
HierFAVG, FedProx, Per-FedAvg and HeurFedAMP (FedAvg is ``fedavg.FedAvg``).

sFedHP (spec seed-002 §2.3): N edges of J clients each, client u under edge u // J. Per
global round every client starts at theta = w^t; each of R edge rounds runs K proximal
steps of theta anchored at the edge's phi_i (``anchor: edge_avg``) or the client's own
phi_ij (``per_client``), sets phi_ij = (lambda1 theta + lambda2 w_i) / (lambda1 + lambda2)
with the old w_i, averages phi_i = mean_j phi_ij and steps
w_i -= eta1 (lambda2 (w_i - phi_i) + gamma2 tanh(w_i / rho)). The cloud relaxes towards
the uniform mean of S sampled edges: w = (1 - beta) w + beta mean_S w_i. pFedMe is the
flat single-level case. Means are uniform, as in both papers (spec A7); the other baselines
average with the model's weights p_i. sFedHP, pFedMe and HierFAVG run a whole round in one
parallel kernel (edges, or clients, in parallel); FedProx and HeurFedAMP call the proximal-step
kernel once a round, Per-FedAvg the minibatch-gradient kernels client by client. Every client
draws its minibatches from its own stream, so traces do not depend on the thread count.

Communication: ``bytes_up``/``bytes_down`` are the cloud link, ``edge_bytes_*`` the
client-edge link; every vector is sent as the cheaper of dense and sparse, counting
|x| <= ``zero_tol`` as zero. ``bits`` is the paper's Remark 1 count for one edge (sFedHP)
or one client (flat methods): 64 per non-zero plus a d-bit map, at most 64 d, up and down.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...algorithms.base import (
    Algorithm,
    Column,
    Hyperparameter,
    RoundCost,
    RunWork,
    count_nonzero,
    dense_bytes,
    vector_bits,
    vector_bytes,
)
from ...algorithms.common import (
    BITS,
    DENSITY,
    MemberStack,
    batch_size,
    server_stream,
    stepsize,
)
from ...errors import ConfigError
from ...lazy import LazyModule

kernels = LazyModule("fedsparse.kernels")
prox_kernels = LazyModule("fedsparse.kernels.prox")
round_kernels = LazyModule("fedsparse.families.sfedhp.kernels")


def edge_of(n_clients: int, edges: int, where: str = "params.edges") -> np.ndarray:
    """Edge of each client: u // J with J = n_clients / edges; ConfigError unless it divides."""
    if edges < 1 or n_clients % edges:
        raise ConfigError(f"{where}: {edges} edges do not divide the {n_clients} clients evenly")
    return np.arange(n_clients, dtype=np.int64) // (n_clients // edges)


def _positive(name: str, doc: str, default: float, symbol: str = "") -> Hyperparameter:
    return Hyperparameter(name, float, doc, default=default, low=0.0, low_open=True, symbol=symbol)


# hierarchical methods: cumulative client<->edge bytes (bytes_up/bytes_down are then the cloud
# link); the clients' models' density (with BITS and DENSITY, FedAvg's columns)
EDGE_BYTES_UP = Column("edge_bytes_up", int, "cumulative client -> edge bytes")
EDGE_BYTES_DOWN = Column("edge_bytes_down", int, "cumulative edge -> client bytes")
PM_DENSITY = Column("pm_density", float, "mean density of the clients' models")


BATCH_SIZE = batch_size("minibatch size, or 'full' (deterministic)", 20)


class ClientStack(MemberStack):
    """The stack of the family's cohort kernels: the members' clients' models ``thetas``."""

    arrays = ("thetas",)

    def models(self, members: list[Any], models: list[np.ndarray]) -> np.ndarray:
        """Each member's model of ``models`` at its place in the stack (zeros elsewhere)."""
        out = np.zeros((self.size, *models[0].shape))
        out[self.which(members)] = models
        return out


class ProxClients(Algorithm):
    """Shared machinery: per-client streams and row permutations, the proximal-step kernel,
    per-client models, edge/bit accounting read by the trace through extra_metrics."""

    family = "Personalised and hierarchical"
    # the shared pages show these by name; the label and colour are the sFedHP page's
    shared_pages_by_name = True
    config_label = (("stepsize", "γ"), ("local_steps", "K"), ("batch_size", "b"))
    trace_columns = (EDGE_BYTES_UP, EDGE_BYTES_DOWN, BITS, DENSITY, PM_DENSITY)
    zero_tol = 0.0
    scores_personal = True  # its clients' personal models are scored at every evaluation

    @classmethod
    def work(cls, params: dict[str, Any]) -> RunWork:
        """Clients keep personal models beside their local ones; where those are scored, an
        evaluation is two forward passes over the data (the global model's, the personal
        models')."""
        work = super().work(params)
        if not cls.scores_personal:
            return work
        return work._replace(states=3.0, evaluations=2.0)

    def _setup_clients(self) -> None:
        problem = self.problem
        self.W = problem.initial_model()
        self.thetas = np.repeat(self.W[None], problem.n_clients, axis=0)
        self.perm = np.arange(problem.data.n_samples, dtype=np.int64)
        self.rng = kernels.client_states(self.seed, problem.n_clients)
        self.server = server_stream(self.seed, problem.n_clients)
        self.work = problem.step_work()  # the proximal steps' and the round kernels'
        self.totals = {"edge_bytes_up": 0, "edge_bytes_down": 0, "bits": 0.0}
        self.stack: ClientStack | None = None  # a cohort's stacked models, on its first round

    def round(self, t: int) -> RoundCost:
        return self.cohort_round([self], t)[0]

    @classmethod
    def prox_cohort(
        cls,
        members: list[Any],
        anchors: np.ndarray,
        which: np.ndarray,
        fresh: bool,
        constants: dict[str, list[float]],
    ) -> None:
        """The members' proximal steps on their ``thetas`` in place, in one kernel
        (:func:`fedsparse.kernels.prox.prox_steps_cohort`): ``anchors`` (stack size,
        n_anchors, *shape), ``constants`` each member's ``stepsize``, ``weight``, ``gamma``
        and ``rho``."""
        first = members[0]
        stack = ClientStack.of(members)
        data, batch = first.problem.data, first.batch
        prox_kernels.prox_steps_cohort(
            data.kernel_X,
            data.y,
            data.client_ptr,
            stack.thetas,
            anchors,
            np.ascontiguousarray(which, dtype=np.int64),
            stack.which(members),
            first.perm,
            first.rng,
            prox_kernels.ProxConstants(
                first.params["local_steps"],
                batch,
                fresh,
                *(
                    stack.values(members, constants[k])
                    for k in ("stepsize", "weight", "gamma", "rho")
                ),
            ),
            first.problem.step_model,
            first.work.for_batch(batch),
        )

    @property
    def batch(self) -> int:
        """Rows per minibatch as the kernels take it (0: all rows)."""
        b = self.params["batch_size"]
        return 0 if b is None else b

    def round_work(self) -> tuple:
        """Per-thread work space of the whole-round kernels: (G, S, X0, A, D, E)."""
        return self.work.for_batch(self.batch)

    def nnz(self, models: np.ndarray) -> np.ndarray:
        return count_nonzero(models, self.zero_tol)

    @property
    def model(self) -> np.ndarray:
        return self.W

    @property
    def personal_models(self) -> np.ndarray:
        return self.thetas

    def extra_metrics(self) -> dict[str, Any]:
        d = self.W.size
        return {
            **self.totals,
            "density": float(self.nnz(self.W[None])[0]) / d,
            "pm_density": float(self.nnz(self.thetas).mean()) / d,
        }


class FlatClients(ProxClients):
    """Flat (client-cloud) baselines: bits per client, no edge link."""

    trace_columns = (BITS, DENSITY, PM_DENSITY)

    def add_bits(self, nnz_up: np.ndarray, nnz_down: np.ndarray) -> None:
        d = self.W.size
        self.totals["bits"] += (
            sum(vector_bits(k, d) for k in nnz_up) + sum(vector_bits(k, d) for k in nnz_down)
        ) / self.problem.n_clients

    def extra_metrics(self) -> dict[str, Any]:
        out = super().extra_metrics()
        del out["edge_bytes_up"], out["edge_bytes_down"]
        return out


SFEDHP_HYPERPARAMETERS = (
    stepsize("eta1: the edge model w_i step", default=0.05, symbol="η"),
    _positive("inner_stepsize", "eta2: the theta step of the inner solve", 0.05, "η2"),
    Hyperparameter("inner_steps", int, "K: theta steps per edge round", default=5, low=1),
    Hyperparameter("edge_rounds", int, "R: edge rounds per global round", default=20, low=1),
    _positive("lambda1", "theta-phi proximity weight", 25.0, "λ1"),
    _positive("lambda2", "phi-w proximity weight", 25.0, "λ2"),
    Hyperparameter("gamma1", float, "smooth-l1 weight on theta", default=0.0, low=0.0, symbol="γ1"),
    Hyperparameter("gamma2", float, "smooth-l1 weight on w_i", default=0.0, low=0.0, symbol="γ2"),
    _positive("rho", "smoothing of the l1 norm, rho log cosh(x/rho)", 6e-5, "ρ"),
    Hyperparameter(
        "beta", float, "cloud relaxation w = (1-beta) w + beta mean", default=1.0, low=0.0
    ),
    Hyperparameter("edges", int, "N: edge servers (must divide the clients)", default=4, low=1),
    Hyperparameter(
        "sampled_edges", int, "S: edges aggregated per round (0: all)", default=0, low=0
    ),
    BATCH_SIZE,
    Hyperparameter(
        "anchor",
        str,
        "theta's anchor: the edge mean phi_i or the client's phi_ij",
        default="edge_avg",
        choices=("edge_avg", "per_client"),
    ),
    Hyperparameter("gamma_tiny", float, "gamma after a schedule switch", default=1e-5, low=0.0),
    Hyperparameter(
        "density_floor",
        float,
        "gamma1 -> gamma_tiny once the mean theta density is below it (0: off)",
        default=0.0,
        low=0.0,
        high=1.0,
    ),
    Hyperparameter(
        "gamma2_rounds",
        int,
        "gamma2 -> gamma_tiny after this many rounds (0: off)",
        default=0,
        low=0,
    ),
    Hyperparameter(
        "zero_tol", float, "|x| <= zero_tol counts as zero (density, bits)", default=1e-4, low=0.0
    ),
)


# sFedHP's constants that cohorts may vary (the structure, anchor and batch stay shared)
SFEDHP_FUSABLE = (
    "stepsize",
    "inner_stepsize",
    "lambda1",
    "lambda2",
    "gamma1",
    "gamma2",
    "rho",
    "beta",
    "gamma_tiny",
    "density_floor",
    "gamma2_rounds",
    "zero_tol",
)


class SFedHP(ProxClients):
    """sFedHP (Liu et al.): client/edge/cloud personalisation with a smooth-l1 sparsity term."""

    name = "sfedhp"
    label, colour = "sFedHP", "tab:red"
    summary = "sFedHP: hierarchical Moreau-envelope personalisation, smooth-l1 sparse"
    hyperparameters = SFEDHP_HYPERPARAMETERS

    @classmethod
    def steps_per_round(cls, params: dict[str, Any]) -> int:
        return params.get("edge_rounds", 20) * params.get("inner_steps", 5)

    @classmethod
    def work(cls, params: dict[str, Any]) -> RunWork:
        """With a smooth-l1 weight on theta (gamma1 > 0), every proximal step takes the tanh of
        each of the client's parameters (its gradient, ``tanh(theta / rho)``): a tanh pass a
        step, dearer than the step's products at a network's size. The edges' tanh passes
        (gamma2 > 0, one an edge round over an edge's model) are a share of the clients' edge
        count over their number, and are left out."""
        work = super().work(params)
        if params.get("gamma1", 0.0) > 0:
            return work._replace(tanh_passes=float(work.steps))
        return work

    @classmethod
    def check_clients(cls, params: dict[str, Any], n_clients: int, where: str = "params") -> None:
        edge_of(n_clients, params["edges"], f"{where}.edges")

    def check_problem(self, where: str = "params") -> None:
        params = self.params
        self.check_clients(params, self.problem.n_clients, where)
        if params["sampled_edges"] > params["edges"]:
            raise ConfigError(
                f"{where}.sampled_edges: {params['sampled_edges']} is more than the "
                f"{params['edges']} edges"
            )

    def setup(self) -> None:
        self._setup_clients()
        params = self.params
        self.zero_tol = params["zero_tol"]
        edge_of(self.problem.n_clients, params["edges"])  # client u under edge u // J
        self.gamma1 = params["gamma1"]

    def current_gammas(self, t: int) -> tuple[float, float]:
        """(gamma1, gamma2) of round ``t`` (0-based) under the optional schedule."""
        params = self.params
        g2 = params["gamma2"]
        if params["gamma2_rounds"] > 0 and t >= params["gamma2_rounds"]:
            g2 = params["gamma_tiny"]
        return self.gamma1, g2

    @classmethod
    def fusable(cls, params: dict[str, Any]) -> tuple[str, ...]:
        """Every continuous constant: the members' clients draw the same rows (same seed,
        edges, R, K, b), and each member's steps and schedule switches are its own."""
        return SFEDHP_FUSABLE

    @classmethod
    def cohort_round(cls, members: list[Algorithm], t: int) -> list[RoundCost]:
        first = members[0]
        params, data = first.params, first.problem.data
        stack = ClientStack.of(members)
        C, N, shape = stack.size, params["edges"], first.W.shape
        gammas = [m.current_gammas(t) for m in members]
        w_e = np.empty((C, N, *shape))
        phi_e = np.empty_like(w_e)
        phi_c = np.empty_like(stack.thetas)
        edge_bytes = np.zeros((C, N, 2), np.int64)

        def each(key: str) -> np.ndarray:
            return stack.values(members, [m.params[key] for m in members])

        round_kernels.sfedhp_cohort_round(
            data.kernel_X,
            data.y,
            data.client_ptr,
            stack.models(members, [m.W for m in members]),
            round_kernels.SFedHPModels(stack.thetas, w_e, phi_e, phi_c, edge_bytes),
            stack.which(members),
            first.perm,
            first.rng,
            round_kernels.SFedHPConstants(
                params["edge_rounds"],
                params["inner_steps"],
                first.batch,
                params["anchor"] == "per_client",
                each("stepsize"),
                each("inner_stepsize"),
                each("lambda1"),
                each("lambda2"),
                stack.values(members, [g[0] for g in gammas]),
                stack.values(members, [g[1] for g in gammas]),
                each("rho"),
                each("zero_tol"),
            ),
            first.problem.step_model,
            first.round_work(),
        )
        return [
            m.aggregate(w_e[k], edge_bytes[k])
            for m, k in zip(members, stack.which(members), strict=True)
        ]

    def aggregate(self, w_e: np.ndarray, edge_bytes: np.ndarray) -> RoundCost:
        """The cloud's step from this round's edge models ``w_e``, the schedule switch, the
        totals and the round's cost."""
        params = self.params
        N, d = params["edges"], self.W.size
        w = self.W
        S = params["sampled_edges"]
        chosen = np.arange(N) if S in (0, N) else np.sort(self.server.choice(N, S, replace=False))
        nnz_up, nnz_down = self.nnz(w_e[chosen]), self.nnz(w[None])[0]
        beta = params["beta"]
        self.W = (1.0 - beta) * w + beta * w_e[chosen].mean(axis=0)
        if (
            params["density_floor"] > 0
            and self.nnz(self.thetas).mean() / d < params["density_floor"]
        ):
            self.gamma1 = params["gamma_tiny"]
        self.totals["edge_bytes_up"] += int(edge_bytes[:, 0].sum())
        self.totals["edge_bytes_down"] += int(edge_bytes[:, 1].sum())
        self.totals["bits"] += sum(vector_bits(k, d) for k in nnz_up) / N + vector_bits(nnz_down, d)
        up = sum(vector_bytes(k, d) for k in nnz_up)
        down = N * vector_bytes(nnz_down, d)
        return RoundCost(up, down, params["edge_rounds"] * params["inner_steps"])


PFEDME_HYPERPARAMETERS = (
    stepsize("eta: the local model w_i step", default=0.05),
    _positive("inner_stepsize", "the theta step of the inner solve", 0.05),
    Hyperparameter("inner_steps", int, "K: theta steps per local round", default=5, low=1),
    Hyperparameter("local_steps", int, "R: local rounds per global round", default=20, low=1),
    _positive("lambda", "theta-w proximity weight", 25.0, "λ"),
    Hyperparameter(
        "beta", float, "server relaxation w = (1-beta) w + beta mean", default=1.0, low=0.0
    ),
    Hyperparameter(
        "sampled_clients", int, "clients aggregated per round (0: all)", default=0, low=0
    ),
    BATCH_SIZE,
)


class PFedMe(FlatClients):
    """pFedMe (Dinh et al.): Moreau-envelope personalisation, uniform server mean."""

    name = "pfedme"
    label, colour = "pFedMe", "tab:blue"
    summary = "pFedMe: personalised models by Moreau envelopes, beta-relaxed uniform mean"
    hyperparameters = PFEDME_HYPERPARAMETERS

    @classmethod
    def steps_per_round(cls, params: dict[str, Any]) -> int:
        return params.get("local_steps", 20) * params.get("inner_steps", 5)

    def check_problem(self, where: str = "params") -> None:
        m, n = self.params["sampled_clients"], self.problem.n_clients
        if m > n:
            raise ConfigError(f"{where}.sampled_clients: {m} is more than the {n} clients")

    def setup(self) -> None:
        self._setup_clients()

    @classmethod
    def fusable(cls, params: dict[str, Any]) -> tuple[str, ...]:
        """The steps, the proximity weight and the relaxation: the members' clients draw the
        same rows (same seed, R, K, b) and the server samples the same clients."""
        return ("stepsize", "inner_stepsize", "lambda", "beta")

    @classmethod
    def cohort_round(cls, members: list[Algorithm], t: int) -> list[RoundCost]:
        first = members[0]
        params, data = first.params, first.problem.data
        stack = ClientStack.of(members)
        w_c = np.empty_like(stack.thetas)

        def each(key: str) -> np.ndarray:
            return stack.values(members, [m.params[key] for m in members])

        round_kernels.pfedme_cohort_round(
            data.kernel_X,
            data.y,
            data.client_ptr,
            stack.models(members, [m.W for m in members]),
            round_kernels.PFedMeModels(stack.thetas, w_c),
            stack.which(members),
            first.perm,
            first.rng,
            round_kernels.PFedMeConstants(
                params["local_steps"],
                params["inner_steps"],
                first.batch,
                each("stepsize"),
                each("inner_stepsize"),
                each("lambda"),
            ),
            first.problem.step_model,
            first.round_work(),
        )
        return [m.aggregate(w_c[k]) for m, k in zip(members, stack.which(members), strict=True)]

    def aggregate(self, w_c: np.ndarray) -> RoundCost:
        """The server's step from this round's local models ``w_c``; the round's cost."""
        problem, params = self.problem, self.params
        n, d = problem.n_clients, self.W.size
        w = self.W
        m = params["sampled_clients"]
        chosen = np.arange(n) if m in (0, n) else np.sort(self.server.choice(n, m, replace=False))
        nnz_up, nnz_down = self.nnz(w_c[chosen]), self.nnz(w[None])[0]
        beta = params["beta"]
        self.W = (1.0 - beta) * w + beta * w_c[chosen].mean(axis=0)
        self.add_bits(nnz_up, np.repeat(nnz_down, n))
        up = int(sum(vector_bytes(k, d) for k in nnz_up))
        return RoundCost(
            up, n * vector_bytes(nnz_down, d), params["local_steps"] * params["inner_steps"]
        )


# ---- baselines of the family ------------------------------------------------------------------


def weighted_mean(models: np.ndarray, p: np.ndarray, scratch: np.ndarray) -> np.ndarray:
    """sum_i p_i models[i], in a fixed order (the FedAvg server kernel, no thresholding)."""
    out = np.empty(models.shape[1:])
    kernels.aggregate(models, np.ascontiguousarray(p, dtype=np.float64), out.shape[1], out, scratch)
    return out


class HierFAVG(ProxClients):
    """HierFAVG (Liu et al.): client-edge-cloud FedAvg. Per global round, ``edge_rounds``
    (kappa2) times: every client runs ``local_steps`` (kappa1) SGD steps from its edge's
    model and the edge averages with p renormalised within it; then the cloud averages the
    edges weighted by their clients' total p. Client u is under edge u // J."""

    name = "hierfavg"
    label, colour = "HierFAVG", "tab:green"
    summary = "HierFAVG: FedAvg with kappa2 edge aggregations per cloud aggregation"
    trace_columns = (EDGE_BYTES_UP, EDGE_BYTES_DOWN, BITS, DENSITY)
    hyperparameters = (
        stepsize("local SGD step", default=0.05),
        Hyperparameter("local_steps", int, "kappa1: SGD steps per edge round", default=1, low=1),
        Hyperparameter(
            "edge_rounds", int, "kappa2: edge rounds per cloud round", default=20, low=1
        ),
        Hyperparameter("edges", int, "edge servers (must divide the clients)", default=4, low=1),
        BATCH_SIZE,
    )

    @classmethod
    def steps_per_round(cls, params: dict[str, Any]) -> int:
        return params.get("local_steps", 1) * params.get("edge_rounds", 20)

    @classmethod
    def check_clients(cls, params: dict[str, Any], n_clients: int, where: str = "params") -> None:
        edge_of(n_clients, params["edges"], f"{where}.edges")

    def check_problem(self, where: str = "params") -> None:
        self.check_clients(self.params, self.problem.n_clients, where)

    def setup(self) -> None:
        self._setup_clients()
        edge_of(self.problem.n_clients, self.params["edges"])  # client u under edge u // J
        self.scratch = kernels.threshold_scratch(self.W.shape[1])

    @classmethod
    def fusable(cls, params: dict[str, Any]) -> tuple[str, ...]:
        """Step sizes: the members' clients draw the same rows (same seed, edges, kappas, b)."""
        return ("stepsize",)

    @classmethod
    def cohort_round(cls, members: list[Algorithm], t: int) -> list[RoundCost]:
        first = members[0]
        problem, params, data = first.problem, first.params, first.problem.data
        stack = ClientStack.of(members)
        w_e = np.empty((stack.size, params["edges"], *first.W.shape))
        edge_bytes = np.zeros((stack.size, params["edges"], 2), np.int64)
        round_kernels.hierfavg_cohort_round(
            data.kernel_X,
            data.y,
            data.client_ptr,
            stack.models(members, [m.W for m in members]),
            round_kernels.HierFAVGModels(stack.thetas, w_e, edge_bytes),
            stack.which(members),
            first.perm,
            first.rng,
            round_kernels.HierFAVGConstants(
                problem.p,
                params["edge_rounds"],
                params["local_steps"],
                first.batch,
                stack.values(members, [m.params["stepsize"] for m in members]),
            ),
            problem.step_model,
            first.round_work(),
        )
        return [
            m.aggregate(w_e[k], edge_bytes[k])
            for m, k in zip(members, stack.which(members), strict=True)
        ]

    def aggregate(self, w_e: np.ndarray, edge_bytes: np.ndarray) -> RoundCost:
        """The cloud's average of this round's edge models ``w_e``; the round's cost."""
        problem, params = self.problem, self.params
        n, N, d = problem.n_clients, params["edges"], self.W.size
        self.totals["edge_bytes_up"] += int(edge_bytes[:, 0].sum())
        self.totals["edge_bytes_down"] += params["edge_rounds"] * n * dense_bytes(d)
        down = self.nnz(self.W[None])[0]
        self.W = weighted_mean(w_e, problem.p.reshape(N, n // N).sum(axis=1), self.scratch)
        nnz_up = self.nnz(w_e)
        self.totals["bits"] += sum(vector_bits(k, d) for k in nnz_up) / N + vector_bits(down, d)
        return RoundCost(
            int(sum(vector_bytes(k, d) for k in nnz_up)),
            N * vector_bytes(down, d),
            params["local_steps"] * params["edge_rounds"],
        )

    scores_personal = False

    @property
    def personal_models(self) -> None:
        return None

    def extra_metrics(self) -> dict[str, Any]:
        out = super().extra_metrics()
        del out["pm_density"]
        return out


class FedProx(FlatClients):
    """FedProx (Li et al.): each client runs ``local_steps`` SGD steps (a fresh minibatch
    each) on f_i(w) + mu/2 ||w - w^t||^2 from w^t; the server takes the p-weighted mean."""

    name = "fedprox"
    label, colour = "FedProx", "tab:orange"
    summary = "FedProx: local SGD with a proximal term at w^t, p-weighted mean"
    trace_columns = (BITS, DENSITY)
    hyperparameters = (
        stepsize("local SGD step", default=0.05),
        Hyperparameter("local_steps", int, "SGD steps per round", default=20, low=1),
        BATCH_SIZE,
        Hyperparameter("mu", float, "proximal weight", default=0.001, low=0.0, symbol="μ"),
    )

    def setup(self) -> None:
        self._setup_clients()
        self.scratch = kernels.threshold_scratch(self.W.shape[1])

    @classmethod
    def fusable(cls, params: dict[str, Any]) -> tuple[str, ...]:
        """The step size and proximal weight (the members' clients draw the same rows)."""
        return ("stepsize", "mu")

    @classmethod
    def cohort_round(cls, members: list[Algorithm], t: int) -> list[RoundCost]:
        stack = ClientStack.of(members)
        for m in members:
            m.thetas[:] = m.W
        cls.prox_cohort(
            members,
            stack.models(members, [m.W[None] for m in members]),
            np.zeros(members[0].problem.n_clients, np.int64),
            True,
            {
                "stepsize": [m.params["stepsize"] for m in members],
                "weight": [m.params["mu"] for m in members],
                "gamma": [0.0] * len(members),
                "rho": [1.0] * len(members),
            },
        )
        return [m.aggregate() for m in members]

    def aggregate(self) -> RoundCost:
        """The server's p-weighted mean of the clients' models; the round's cost."""
        problem, params = self.problem, self.params
        d, n = self.W.size, problem.n_clients
        nnz_up, nnz_down = self.nnz(self.thetas), self.nnz(self.W[None])
        self.W = weighted_mean(self.thetas, problem.p, self.scratch)
        self.add_bits(nnz_up, np.repeat(nnz_down, n))
        up = int(sum(vector_bytes(k, d) for k in nnz_up))
        return RoundCost(up, n * vector_bytes(nnz_down[0], d), params["local_steps"])

    scores_personal = False

    @property
    def personal_models(self) -> None:
        return None

    def extra_metrics(self) -> dict[str, Any]:
        out = super().extra_metrics()
        del out["pm_density"]
        return out


class PerFedAvg(FlatClients):
    """Per-FedAvg (Fallah et al.), MAML objective f_i(w - alpha grad f_i(w)). Each local step
    draws fresh minibatches D1, D2: w_tmp = w - alpha grad f(w; D1), w -= beta grad f(w_tmp;
    D2); ``variant: hf`` multiplies the outer gradient g by (I - alpha H(w; D3)), the Hessian-
    vector product by central differences of width ``hvp_delta``. The server takes the
    p-weighted mean; each client's personalised model is one step from the new global model,
    theta_i = w - alpha grad f_i(w; D)."""

    name = "perfedavg"
    label, colour = "Per-FedAvg", "tab:purple"
    summary = "Per-FedAvg: first-order (or Hessian-free) MAML, one-step personalisation"
    hyperparameters = (
        stepsize("beta: the outer (meta) step", default=0.05),
        _positive("inner_stepsize", "alpha: the adaptation step", 0.05),
        Hyperparameter("local_steps", int, "meta steps per round", default=20, low=1),
        BATCH_SIZE,
        Hyperparameter(
            "variant", str, "fo: first order; hf: Hessian-free", default="fo", choices=("fo", "hf")
        ),
        _positive("hvp_delta", "hf: finite-difference width of the Hessian-vector product", 1e-3),
    )

    @classmethod
    def steps_per_round(cls, params: dict[str, Any]) -> int:
        return params.get("local_steps", 20) * (3 if params.get("variant") == "hf" else 2)

    def setup(self) -> None:
        self._setup_clients()
        self.scratch = kernels.threshold_scratch(self.W.shape[1])
        problem = self.problem
        rows = int(problem.data.client_sizes.max())
        if self.params["batch_size"] is not None:
            rows = min(rows, self.params["batch_size"])
        self.grad_work = problem.grad_work(rows)

    def draw(self, i: int) -> np.ndarray:
        """A minibatch of client ``i`` from its own stream (all rows for a full batch)."""
        ptr, batch = self.problem.data.client_ptr, self.params["batch_size"]
        lo, n = int(ptr[i]), int(ptr[i + 1] - ptr[i])
        b = n if batch is None else min(batch, n)
        if b < n:
            kernels.sample_without_replacement(self.perm, lo, n, b, self.rng, i)
        return self.perm[lo : lo + b].copy()

    def grad(self, W: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """Minibatch gradient of the loss (l2 included) at ``W``."""
        G = np.empty_like(W)
        self.problem.minibatch_grad(W, rows, G, self.grad_work)
        return G

    def round(self, t: int) -> RoundCost:
        problem, params = self.problem, self.params
        n, d = problem.n_clients, self.W.size
        alpha, beta, delta = params["inner_stepsize"], params["stepsize"], params["hvp_delta"]
        local = np.empty((n, *self.W.shape))
        for i in range(n):
            w = self.W.copy()
            for _ in range(params["local_steps"]):
                temp = w - alpha * self.grad(w, self.draw(i))
                g = self.grad(temp, self.draw(i))
                if params["variant"] == "hf":
                    rows = self.draw(i)
                    hv = (self.grad(w + delta * g, rows) - self.grad(w - delta * g, rows)) / (
                        2.0 * delta
                    )
                    g = g - alpha * hv
                w = w - beta * g
            local[i] = w
        nnz_up, nnz_down = self.nnz(local), self.nnz(self.W[None])
        self.W = weighted_mean(local, problem.p, self.scratch)
        for i in range(n):
            self.thetas[i] = self.W - alpha * self.grad(self.W, self.draw(i))
        self.add_bits(nnz_up, np.repeat(nnz_down, n))
        up = int(sum(vector_bytes(k, d) for k in nnz_up))
        steps = params["local_steps"] * (3 if params["variant"] == "hf" else 2)
        return RoundCost(up, n * vector_bytes(nnz_down[0], d), steps)


class HeurFedAMP(FlatClients):
    """HeurFedAMP (Huang et al.): the cloud keeps each client's model w_j and sends client i
    u_i = alpha_self w_i + (1 - alpha_self) sum_{j != i} softmax_j(sigma cos(w_i, w_j)) w_j;
    client i runs ``local_steps`` SGD steps on f_i(w) + lambda/2 ||w - u_i||^2 from u_i. The
    personalised models are the clients' models; the global columns score their p-weighted
    mean (the method has no global model)."""

    name = "heurfedamp"
    label, colour = "HeurFedAMP", "tab:brown"
    summary = "HeurFedAMP: attentive personalised cloud models by cosine similarity"
    hyperparameters = (
        stepsize("local SGD step", default=0.05),
        Hyperparameter("local_steps", int, "SGD steps per round", default=20, low=1),
        BATCH_SIZE,
        Hyperparameter(
            "alpha_self",
            float,
            "weight of the client's own model in u_i",
            default=0.5,
            low=0.0,
            high=1.0,
            symbol="α",
        ),
        Hyperparameter("sigma", float, "scale of the cosine similarities", default=1.0, low=0.0),
        Hyperparameter("lambda", float, "weight of the proximal term at u_i", default=1.0, low=0.0),
    )

    def setup(self) -> None:
        self._setup_clients()
        self.scratch = kernels.threshold_scratch(self.W.shape[1])

    def cloud_models(self) -> np.ndarray:
        """u_i for every client from the current client models (cos = 0 at a zero model)."""
        n, a = self.problem.n_clients, self.params["alpha_self"]
        flat = self.thetas.reshape(n, -1)
        if n == 1:
            return self.thetas.copy()
        norms = np.linalg.norm(flat, axis=1)
        safe = np.where(norms > 0, norms, 1.0)
        cos = (flat @ flat.T) / np.outer(safe, safe)
        cos[(norms == 0)[:, None] | (norms == 0)[None, :]] = 0.0
        xi = np.empty((n, n))
        for i in range(n):
            z = self.params["sigma"] * np.delete(cos[i], i)
            e = np.exp(z - z.max())
            xi[i] = np.insert((1.0 - a) * e / e.sum(), i, a)
        return (xi @ flat).reshape(self.thetas.shape)

    @classmethod
    def fusable(cls, params: dict[str, Any]) -> tuple[str, ...]:
        """The step size and the cloud's constants (the members' clients draw the same
        rows; each member's cloud models are its own)."""
        return ("stepsize", "alpha_self", "sigma", "lambda")

    @classmethod
    def cohort_round(cls, members: list[Algorithm], t: int) -> list[RoundCost]:
        stack = ClientStack.of(members)
        clouds = [m.cloud_models() for m in members]
        for m, U in zip(members, clouds, strict=True):
            m.thetas[:] = U
        n = members[0].problem.n_clients
        cls.prox_cohort(
            members,
            stack.models(members, clouds),
            np.arange(n, dtype=np.int64),
            True,
            {
                "stepsize": [m.params["stepsize"] for m in members],
                "weight": [m.params["lambda"] for m in members],
                "gamma": [0.0] * len(members),
                "rho": [1.0] * len(members),
            },
        )
        return [m.aggregate(U) for m, U in zip(members, clouds, strict=True)]

    def aggregate(self, U: np.ndarray) -> RoundCost:
        """The p-weighted mean of the clients' models (sent up; ``U`` came down); the cost."""
        problem, params = self.problem, self.params
        d = self.W.size
        nnz_up, nnz_down = self.nnz(self.thetas), self.nnz(U)
        self.W = weighted_mean(self.thetas, problem.p, self.scratch)
        self.add_bits(nnz_up, nnz_down)
        up = int(sum(vector_bytes(k, d) for k in nnz_up))
        down = int(sum(vector_bytes(k, d) for k in nnz_down))
        return RoundCost(up, down, params["local_steps"])
