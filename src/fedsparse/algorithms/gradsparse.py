"""Gradient sparsification with error feedback (seed paper 003; spec seed-003-adaptive-gs.md).

Every round is one synchronous SGD step on an aggregated sparse gradient (not FedAvg):
each client adds its minibatch gradient at w to its residual a_i and offers a subset of
a_i; the server aggregates b_j = sum_i p_i a_ij 1[j in J_i] on a downlink set J; every
client applies ``w_J -= stepsize * b_J`` and zeroes what was applied from its residual.

* ``fabtopk``: fairness-aware bidirectional top-k (FAB-Select: |J| = k, |J ∩ J_i| >= k // N);
* ``fubtopk``: the k largest aggregated |b_j| inside the union of the offers;
* ``utopk``: unidirectional top-k, the downlink is the whole union (residuals reset on J_i);
* ``periodick``: k shared random indices cycling through all coordinates;
* ``sendall``: full synchronous SGD (D values each way).

D is the number of model parameters; an index is the flat row-major parameter index;
ties go to the lower index everywhere (selection kernels in ``kernels.gradsparse``).
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numba
import numpy as np

from .. import kernels as K
from ..errors import ConfigError
from ..kernels import gradsparse as GS
from .base import Algorithm, Hyperparameter, RoundCost, dense_bytes, sparse_bytes

STEPSIZE = Hyperparameter("stepsize", float, "SGD step size eta", low=0.0, low_open=True)
BATCH_SIZE = Hyperparameter(
    "batch_size",
    int,
    "minibatch size of each client's gradient, or 'full' (deterministic)",
    default=32,
    low=1,
    full_ok=True,
)
K_ELEMENTS = Hyperparameter("k", int, "elements per sparse message (1 <= k <= D)", low=1)
FILL = Hyperparameter(
    "fill",
    str,
    "FAB fill rule: client = the clients' own |a_ij| (spec reading (a)), aggregate = |b_j|",
    default="client",
    choices=("client", "aggregate"),
)


CONTROL = (
    Hyperparameter(
        "k_control",
        str,
        "fixed k, or chosen online: Algorithm 2 (online) or 3 (online_extended) of the spec",
        default="fixed",
        choices=("fixed", "online", "online_extended"),
        omit_default=True,
    ),
    Hyperparameter(
        "k_min", int, "online k: lower end of K (0: max(2, ceil(0.002 D)))", default=0, low=0,
        omit_default=True,
    ),
    Hyperparameter(
        "k_max", int, "online k: upper end of K (0: D)", default=0, low=0, omit_default=True
    ),
    Hyperparameter(
        "window", int, "online_extended: M_u, rounds per window", default=20, low=1,
        omit_default=True,
    ),
    Hyperparameter(
        "expand", float, "online_extended: alpha, the window range's widening", default=1.5,
        low=1.0, omit_default=True,
    ),
)  # fmt: skip


class PeriodicIndices:
    """Shared random index sets for periodic-k: draws without replacement from the
    coordinates not yet covered in this cycle; when fewer than k remain, all of them plus
    random others, and a new cycle starts (the authors' code; spec section 4.1.3).

    Seeded from the run seed only, so every client (and a test) derives the same sets."""

    def __init__(self, seed: int, D: int):
        self.rng = np.random.default_rng(np.random.SeedSequence([seed, 3]))
        self.D = D
        self.left = self.rng.permutation(D)

    def next(self, k: int) -> np.ndarray:
        if k <= self.left.size:
            J, self.left = self.left[:k], self.left[k:]
            if self.left.size == 0:
                self.left = self.rng.permutation(self.D)
            return J
        rest = self.left
        others = np.setdiff1d(np.arange(self.D), rest)
        J = np.concatenate([rest, self.rng.choice(others, k - rest.size, replace=False)])
        self.left = self.rng.permutation(self.D)
        return J


class OnlineK:
    """Online choice of a continuous k (spec sections 2.3-2.5 and 3): Algorithm 2
    (``extended=False``: k <- P_K(k - delta_m s_m), delta_m = B / sqrt(2m)) or Algorithm 3
    (also shrinks K after windows of M_u rounds with an available sign, when the widened
    window range B' < (sqrt 2 - 1) B and the instance ran at least as long as the last one).

    ``update(m, sign)`` takes the sign of round m (1-based) or None when unavailable (k is
    then unchanged and the window skips the round); delta uses max(1, m - m_0) with m_0 = 0
    at the start (the spec's reading of its 3.1/3.4).
    """

    def __init__(self, k_init, k_min, k_max, extended=False, window=20, expand=1.5):
        self.k = float(k_init)
        self.k_min0, self.k_max0 = float(k_min), float(k_max)
        self.lo, self.hi = self.k_min0, self.k_max0
        self.B = self.k_max0 - self.k_min0
        self.extended, self.window, self.expand = extended, window, expand
        self.m0, self.n, self.M_prev = 0, 0, 0
        self.win_lo, self.win_hi = math.inf, 0.0

    def delta(self, m: int) -> float:
        return self.B / math.sqrt(2.0 * max(1, m - self.m0))

    def update(self, m: int, sign: int | None) -> None:
        delta = self.delta(m)
        if sign is not None:
            self.k = min(max(self.k - delta * sign, self.lo), self.hi)
        if not self.extended:
            return
        rounds = m - self.m0  # M'': rounds of the current instance
        if sign is not None:
            self.win_lo, self.win_hi = min(self.win_lo, self.k), max(self.win_hi, self.k)
            self.n += 1
        if self.n >= self.window:
            hi = min(self.expand * self.win_hi, self.k_max0)
            lo = max(self.win_lo / self.expand, self.k_min0)
            if hi - lo < (math.sqrt(2.0) - 1.0) * self.B and rounds >= self.M_prev:
                self.lo, self.hi, self.B = lo, hi, hi - lo
                self.M_prev, self.m0 = rounds, m
            self.n, self.win_lo, self.win_hi = 0, math.inf, 0.0


def stochastic_round(x: float, rng: np.random.Generator) -> int:
    """floor(x) + Bernoulli(x - floor(x)) (spec Definition 2, read as the pitfall says)."""
    low = math.floor(x)
    return int(low + (rng.random() < x - low))


class _GradientSparsification(Algorithm):
    """Shared state and round; subclasses set ``selection``."""

    selection: ClassVar[str]  # fab | fub | union | periodic | all
    hyperparameters = (STEPSIZE, BATCH_SIZE, K_ELEMENTS, *CONTROL)

    @property
    def n_params(self) -> int:
        shape = self.problem.shape
        return int(shape[0] * shape[1])

    @classmethod
    def validate_params(cls, params: dict[str, Any], where: str = "params") -> dict[str, Any]:
        out = super().validate_params(params, where)
        full = cls.with_defaults(out)
        if "k_control" not in full:
            return out
        if full["k_control"] == "fixed":
            for key in ("k_min", "k_max", "window", "expand"):
                if key in out:
                    raise ConfigError(
                        f"{where}.{key}: only with k_control online or online_extended"
                    )
            return out
        k_min, k_max = full["k_min"] or 1, full["k_max"]
        if k_max and k_min > k_max:
            raise ConfigError(f"{where}.k_min: {k_min} is above k_max {k_max}")
        if full["k"] < k_min or (k_max and full["k"] > k_max):
            raise ConfigError(
                f"{where}.k: the initial k {full['k']} is outside [k_min, k_max] = "
                f"[{k_min}, {k_max or 'D'}]"
            )
        return out

    def k_range(self) -> tuple[int, int]:
        """[k_min, k_max] of the online controller; 0 means max(2, ceil(0.002 D)) (the paper's
        0.002 D, at least 2 so that some k' < k exists: at k = 1 no sign, so k would stay)
        and D."""
        D = self.n_params
        k_max = self.param("k_max") or D
        k_min = self.param("k_min") or min(max(2, math.ceil(0.002 * D)), self.params["k"])
        return k_min, k_max

    def check_problem(self, where: str = "params") -> None:
        k, D = self.params.get("k"), self.n_params
        if k is not None and k > D:
            raise ConfigError(
                f"{where}.k: {k} is larger than the number of model parameters D = {D} "
                f"of dataset {self.problem.data.name}"
            )
        if self.online and self.param("k_max") > D:
            raise ConfigError(
                f"{where}.k_max: {self.param('k_max')} is larger than the number of model "
                f"parameters D = {D} of dataset {self.problem.data.name}"
            )

    @property
    def online(self) -> bool:
        return "k" in self.params and self.param("k_control") != "fixed"

    def setup(self) -> None:
        pb = self.problem
        N, D = pb.n_clients, self.n_params
        self.k = self.params.get("k", 0) if self.selection not in ("periodic", "all") else 0
        self.controller: OnlineK | None = None
        k_cap = self.k
        if self.online:
            k_min, k_max = self.k_range()
            self.controller = OnlineK(
                self.params["k"], k_min, k_max, self.param("k_control") == "online_extended",
                self.param("window"), self.param("expand"),
            )  # fmt: skip
            self.ctrl_rng = np.random.default_rng(np.random.SeedSequence([self.seed, 5]))
            k_cap = k_max if self.k else 0
            self.loss_work = (
                (np.zeros((1, *pb.shape)), np.zeros(pb.shape[0]))
                if pb.fast_linear
                else (np.zeros(D), K.mlp_work(pb.sizes, 1))
            )
        self.W = pb.initial_model()
        self.A = np.zeros((N, D))  # residuals a_i
        self.perm = np.arange(pb.data.n_samples, dtype=np.int64)
        self.rng = K.client_states(self.seed, N)
        k_offer = max(k_cap, 1)  # arrays need a column even when nothing is offered
        self.idx = np.zeros((N, k_offer), np.int64)
        self.val = np.zeros((N, k_offer))
        self.agg = np.zeros(D)
        self.in_J = np.zeros(D, np.bool_)
        self.J = np.zeros(k_offer, np.int64)
        threads = numba.config.NUMBA_NUM_THREADS
        self.sel = np.empty((threads, 2 * D), np.uint64)
        self.counts = np.empty((threads, GS.RADIX_BINS), np.int64)
        self.shared = np.zeros(N, np.int64)  # |J ∩ J_i| of the last round
        self.k_used: int | None = None
        self.k_aux: int | None = None
        self.sign: int | None = None
        self.w_aux: np.ndarray | None = None  # w'(m) of the last round (online k)
        self.samples: np.ndarray | None = None  # the rows h of the sign estimate
        if self.selection == "periodic":
            self.periodic = PeriodicIndices(self.seed, D)
        if pb.fast_linear:
            self.G = np.zeros((threads, D))
            self.S = np.zeros((threads, pb.shape[0]))
        else:
            self.work_rows = 0

    def _batch(self) -> int:
        b = self.params["batch_size"]
        return 0 if b is None else b

    def _accumulate(self, k: int) -> None:
        """a_i += minibatch gradient at w for every client; offers of size k (0: none)."""
        pb, data = self.problem, self.problem.data
        batch = self._batch()
        idx, val = (self.idx, self.val) if k == self.idx.shape[1] or k == 0 else (
            np.empty((pb.n_clients, k), np.int64), np.empty((pb.n_clients, k))
        )  # fmt: skip
        if pb.fast_linear:
            GS.accumulate_offers(
                data.kernel_X, data.y, data.client_ptr, self.W, self.A, self.perm, self.rng,
                batch, pb.loss_code, pb.l2, k, idx, val, self.G, self.S, self.sel,
                self.counts,
            )  # fmt: skip
        else:
            rows = int(data.client_sizes.max()) if batch <= 0 else batch
            if rows > self.work_rows:
                self.work = K.mlp_thread_work(pb.sizes, rows)
                self.work_rows = rows
            GS.accumulate_offers_mlp(
                data.kernel_X, data.y, data.client_ptr, self.W[0], self.A, self.perm, self.rng,
                batch, pb.sizes, pb.network.bias, pb.activation_code, pb.loss_code, pb.l2, k,
                idx, val, self.work, self.sel, self.counts,
            )  # fmt: skip
        self.offers = (idx, val)

    def _values(self, k: int, down: int | None = None) -> tuple[int, int]:
        """Values one client sends up and receives in a round with k elements."""
        if self.selection == "all":
            return self.n_params, self.n_params
        if self.selection == "periodic":
            return k, k
        return 2 * k, 2 * (k if down is None else down)

    def _theta(self, up: float, down: float) -> float:
        """Simulated time of one round (one local step) sending ``up`` and ``down`` values."""
        tm = self.time_model
        return (
            tm["step_time"]
            + tm["round_latency"]
            + tm["exchange_time"] * (up + down) / (2.0 * self.n_params)
        )

    def _select(self, idx, val, k, agg, in_J, J) -> np.ndarray:
        """Aggregate the offers (idx, val), choose J (marked in ``in_J``); return J."""
        GS.aggregate_offers(idx, val, self.problem.p, agg)
        if self.selection == "union":
            J = GS.union_indices(idx, in_J)
            in_J[J] = True
            return J
        if self.selection == "fab":
            GS.fab_select(idx, val, agg, k, self.params["fill"] == "aggregate", in_J, J)
        else:
            GS.fub_select(idx, agg, k, in_J, J)
        return J[:k]

    def round(self, t: int) -> RoundCost:
        pb, prm = self.problem, self.params
        N, D = pb.n_clients, self.n_params
        w = self.W.reshape(-1)  # a view: flat row-major parameters
        eta = prm["stepsize"]
        if self.selection == "all":
            self._accumulate(0)
            w -= eta * (pb.p @ self.A)
            self.A[:] = 0.0
            self.shared[:] = D
            self.k_used = D
            return RoundCost(N * dense_bytes(D), N * dense_bytes(D), 1, D, D)
        ctrl = self.controller
        k = prm["k"] if ctrl is None else stochastic_round(ctrl.k, self.ctrl_rng)
        k_aux = None
        if ctrl is not None:
            # k'_m = k_m - delta_m / 2, rounded too, clamped to [1, k - 1] (spec pitfall 8)
            k_aux = stochastic_round(ctrl.k - ctrl.delta(t + 1) / 2, self.ctrl_rng)
            k_aux = None if k < 2 else max(1, min(k_aux, k - 1))
        w_prev = w.copy() if ctrl is not None else None
        aux_down = None
        if self.selection == "periodic":
            self._accumulate(0)
            J = self.periodic.next(k)
            self.agg[J] = pb.p @ self.A[:, J]
            if k_aux is not None:
                J_aux, agg_aux = J[:k_aux], self.agg
            w[J] -= eta * self.agg[J]
            self.A[:, J] = 0.0
            self.shared[:] = k
            up, down = self._values(k)
            cost = RoundCost(N * dense_bytes(k), N * dense_bytes(k), 1, up, down)
        else:
            self._accumulate(k)
            idx, val = self.offers
            if k_aux is not None:  # the k'-element result from the same offers' prefixes
                agg_aux, in_aux = np.zeros(D), np.zeros(D, np.bool_)
                ia, va = np.ascontiguousarray(idx[:, :k_aux]), np.ascontiguousarray(val[:, :k_aux])
                J_aux = self._select(ia, va, k_aux, agg_aux, in_aux, np.zeros(k_aux, np.int64))
                aux_down = J_aux.size
            J = self._select(idx, val, k, self.agg, self.in_J, self.J)
            GS.count_shared(idx, self.in_J, self.shared)
            GS.reset_sent(self.A, idx, self.in_J, self.selection == "union")
            GS.apply_sparse(w, J, self.agg, eta, self.in_J)
            up, down = self._values(k, J.size)
            cost = RoundCost(N * sparse_bytes(k), N * sparse_bytes(J.size), 1, up, down)
        self.k_used = k
        if ctrl is not None:
            self.k_aux, self.sign = k_aux, None
            if k_aux is not None:
                self.w_aux = w_prev.copy()
                self.w_aux[J_aux] -= eta * agg_aux[J_aux]
                self.sign = self._estimate_sign(w_prev, w, self.w_aux, (up, down), k_aux, aux_down)
            ctrl.update(t + 1, self.sign)
        return cost

    def _estimate_sign(self, w_prev, w, w_aux, values, k_aux, aux_down) -> int | None:
        """Spec section 2.6: each client's loss at w(m-1), w(m) and w'(m) on one random row of
        its minibatch, p-weighted; the sign of tau_m(k_m) - tau_hat_m(k'_m), None when the
        losses did not both decrease."""
        pb, data = self.problem, self.problem.data
        ptr, batch = data.client_ptr, self._batch()
        sizes = np.diff(ptr)
        b = sizes if batch <= 0 else np.minimum(sizes, batch)
        self.samples = self.perm[ptr[:-1] + (self.ctrl_rng.random(pb.n_clients) * b).astype(int)]
        L = np.array([[self._sample_loss(v, h) for h in self.samples] for v in (w_prev, w, w_aux)])
        prev, cur, aux = L @ pb.p
        if not (prev > cur and prev > aux):
            return None
        tau = self._theta(*values)
        tau_hat = self._theta(*self._values(k_aux, aux_down)) * (prev - cur) / (prev - aux)
        return int(np.sign(tau - tau_hat))

    def _sample_loss(self, w: np.ndarray, row: int) -> float:
        """f_{i,h}(w): the loss of one row (l2 term included)."""
        pb, data = self.problem, self.problem.data
        rows = np.array([row], np.int64)
        if pb.fast_linear:
            G, S = self.loss_work
            return K.batch_grad(
                data.kernel_X, data.y, rows, w.reshape(pb.shape), pb.loss_code, pb.l2, G[0], S
            )
        g, work = self.loss_work
        return K.mlp_batch_grad(
            data.kernel_X, data.y, rows, w, pb.sizes, pb.network.bias, pb.activation_code,
            pb.loss_code, pb.l2, g, work,
        )  # fmt: skip

    @property
    def model(self) -> np.ndarray:
        return self.W

    @property
    def residuals(self) -> np.ndarray:
        """The clients' error-feedback residuals a_i, shape (n_clients, D)."""
        return self.A

    def extra_metrics(self) -> dict[str, Any]:
        out: dict[str, Any] = {"k_used": self.k_used, "min_shared": None, "idle_clients": None}
        if self.k_used is not None:  # the fairness view of the last round
            out["min_shared"] = int(self.shared.min())
            out["idle_clients"] = int(np.count_nonzero(self.shared == 0))
        if self.controller is not None:
            out.update(k_aux=self.k_aux, sign=self.sign)
        return out


class FABTopK(_GradientSparsification):
    name = "fabtopk"
    summary = "FAB-top-k: fairness-aware bidirectional top-k with error feedback (k up, k down)"
    selection = "fab"
    hyperparameters = (STEPSIZE, BATCH_SIZE, K_ELEMENTS, FILL, *CONTROL)


class FUBTopK(_GradientSparsification):
    name = "fubtopk"
    summary = "FUB-top-k: the k largest aggregated values of the clients' top-k offers"
    selection = "fub"


class UTopK(_GradientSparsification):
    name = "utopk"
    summary = "unidirectional top-k: k up, the union of the offers down"
    selection = "union"


class PeriodicK(_GradientSparsification):
    name = "periodick"
    summary = "periodic-k: k shared random indices per round, cycling through all coordinates"
    selection = "periodic"


class SendAll(_GradientSparsification):
    name = "sendall"
    summary = "always-send-all: synchronous minibatch SGD, D values up and down"
    selection = "all"
    hyperparameters = (STEPSIZE, BATCH_SIZE)
