"""Gradient sparsification with error feedback (spec seed-003-adaptive-gs.md).

Every round is one synchronous SGD step on an aggregated sparse gradient (not FedAvg):
each client adds its minibatch gradient at w to its residual a_i and offers a subset of
a_i; the server aggregates b_j = sum_i p_i a_ij 1[j in J_i] on a downlink set J; every
client applies ``w_J -= stepsize * b_J`` and zeroes what was applied from its residual.

* ``fabtopk``: fairness-aware bidirectional top-k (FAB-Select: |J| = k, |J ∩ J_i| >= k // N);
* ``fubtopk``: the k largest aggregated |b_j| inside the union of the offers (``merge:
  tree``: the authors' code's FUB_top_K, the offers averaged pairwise up a binary tree with a
  top-k at every merge);
* ``utopk``: unidirectional top-k, the downlink is the whole union (residuals reset on J_i);
* ``periodick``: k shared random indices cycling through all coordinates;
* ``sendall``: full synchronous SGD (D values each way).

D is the number of model parameters; an index is the flat row-major parameter index;
ties go to the lower index everywhere (selection kernels in ``kernels.py``).
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from ...algorithms.base import (
    Algorithm,
    Column,
    Hyperparameter,
    RoundCost,
    RunWork,
    dense_bytes,
    sparse_bytes,
)
from ...algorithms.common import batch_size, stepsize
from ...errors import ConfigError
from ...lazy import LazyModule
from .controllers import (
    AuthorsBandit,
    AuthorsExp3,
    AuthorsSignOGD,
    AuthorsValueOGD,
    BanditK,
    Exp3K,
    Feedback,
    OnlineK,
    SequenceK,
    ValueOGD,
)

kernels = LazyModule("fedsparse.kernels")
sparsification = LazyModule("fedsparse.families.gradient_sparsification.kernels")
numba = LazyModule("numba")

STEPSIZE = stepsize("SGD step size eta")
BATCH_SIZE = batch_size("minibatch size of each client's gradient, or 'full' (deterministic)", 32)
K_ELEMENTS = Hyperparameter("k", int, "elements per sparse message (1 <= k <= D)", low=1)
FILL = Hyperparameter(
    "fill",
    str,
    "FAB fill rule: client = the clients' own |a_ij| (spec reading (a)), aggregate = |b_j|",
    default="client",
    choices=("client", "aggregate"),
)

# What a periodic-k round is charged. paper_text: k values each way (the indices are the
# shared seed's), beta k / D a round; authors_code: the authors' code's 2 beta k / D
# (simulation.py charges k values and k indices each way, as for a top-k message).
CHARGE = Hyperparameter(
    "charge",
    str,
    "periodic-k's time per round: paper_text (k values up and down, beta k / D) or "
    "authors_code (the authors' code's 2 beta k / D)",
    default="paper_text",
    choices=("paper_text", "authors_code"),
    omit_default=True,
)

# How FUB-top-k's server chooses. union: the paper's text; tree: the authors' code's FUB_top_K
# (gtop_k.py's global_top_k), which the code runs with a fixed k only.
MERGE = Hyperparameter(
    "merge",
    str,
    "FUB-top-k's server: union (the k largest aggregated values of the union of the offers, "
    "the paper's text) or tree (the authors' code's FUB_top_K: the offers averaged pairwise up "
    "a binary tree, the k largest kept at every merge; fixed k only)",
    default="union",
    choices=("union", "tree"),
    omit_default=True,
)


# k_control: how k_m is chosen each round. SEARCH: the controllers over K = [k_min, k_max];
# SIGNED: those that estimate the derivative from k'_m = k_m - delta_m / 2 and w'(m) (spec 2.6).
K_CONTROLS = ("fixed", "online", "online_extended", "value_ogd", "exp3", "bandit", "sequence")
SEARCH = ("online", "online_extended", "value_ogd", "exp3", "bandit")
SIGNED = ("online", "online_extended", "value_ogd")

CONTROL = (
    Hyperparameter(
        "k_control",
        str,
        "fixed k, or chosen online: Algorithm 2 (online) or 3 (online_extended) of the spec, "
        "the section 4.2 baselines (value_ogd, exp3, bandit), or replayed (sequence)",
        default="fixed",
        choices=K_CONTROLS,
        omit_default=True,
    ),
    Hyperparameter(
        "k_min",
        int,
        "online k: lower end of K (0: max(2, ceil(0.002 D)))",
        default=0,
        low=0,
        omit_default=True,
    ),
    Hyperparameter(
        "k_max", int, "online k: upper end of K (0: D)", default=0, low=0, omit_default=True
    ),
    Hyperparameter(
        "window",
        int,
        "online_extended: M_u, rounds per window",
        default=20,
        low=1,
        omit_default=True,
    ),
    Hyperparameter(
        "expand",
        float,
        "online_extended: alpha, the window range's widening",
        default=1.5,
        low=1.0,
        omit_default=True,
    ),
    Hyperparameter(
        "k_rules",
        str,
        "online k: paper_text (the spec's rules) or authors_code (the authors' code's: no "
        "update before round 3, the times of the round before, its k' and forced steps, "
        "EXP3's and the bandit's forms and ranges; docs/gradient-sparsification.md); left "
        "out of a fixed-k run's config",
        default="paper_text",
        choices=("paper_text", "authors_code"),
        omit_default=True,
    ),
    Hyperparameter(
        "k_sequence",
        str,
        "sequence: the run whose k_used to replay, 'PATH#RUN_ID' (PATH a results folder or a "
        "trace .parquet; '#RUN_ID' may be left out when PATH holds one such run)",
        default="",
        omit_default=True,
    ),
)
# which k_control each of these keys belongs to
_ONLY_WITH = {
    "k_min": SEARCH,
    "k_max": SEARCH,
    "window": ("online_extended",),
    "expand": ("online_extended",),
    "k_sequence": ("sequence",),
}


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


class _GradientSparsification(Algorithm):
    """Shared state and round; subclasses set ``selection``."""

    selection: ClassVar[str]  # fab | fub | union | periodic | all
    hyperparameters = (STEPSIZE, BATCH_SIZE, K_ELEMENTS, *CONTROL)
    family = "Gradient sparsification"
    config_label = (("stepsize", "γ"), ("batch_size", "b"))
    trace_columns = (
        Column("k_used", int, "the k used in this round (D for sendall; null in row 0)"),
        # online k: this round's k'_m and the estimated sign of d tau / dk
        Column("k_aux", int, "online k: this round's k'_m, the auxiliary k of the sign estimate"),
        Column(
            "sign",
            int,
            "online k: the estimated sign of d tau / dk (+1, -1, 0; null when "
            "the losses did not both decrease)",
        ),
        # the round's fairness view
        Column(
            "min_shared",
            int,
            "min over clients of |J ∩ J_i|: the elements of client i's offer that were applied",
        ),
        Column("idle_clients", int, "the clients none of whose offer was applied"),
    )

    @property
    def n_params(self) -> int:
        shape = self.problem.shape
        return int(shape[0] * shape[1])

    @classmethod
    def canonical_params(cls, params: dict[str, Any]) -> dict[str, Any]:
        # a replay's k_sequence read now (replay.py reads results: imported on use)
        from .replay import canonical_params

        return canonical_params(params)

    @classmethod
    def resolved_params(cls, params: dict[str, Any]) -> dict[str, Any]:
        from .replay import resolved_params

        return resolved_params(params)

    @classmethod
    def validate_params(cls, params: dict[str, Any], where: str = "params") -> dict[str, Any]:
        if isinstance(params, dict) and "k_init" in params:
            params = cls._k_init_as_k(params, where)
        source = params.get("k_sequence") if isinstance(params, dict) else None
        if isinstance(source, dict):  # canonical (already read): checked by replay.py
            params = {key: v for key, v in params.items() if key != "k_sequence"}
        out = super().validate_params(params, where)
        if isinstance(source, dict):
            out["k_sequence"] = source
        full = super().with_defaults(out)
        if "k_control" not in full:
            return out
        control = full["k_control"]
        if control not in SEARCH:  # k_rules is online k's: dropped otherwise, so that a data
            out.pop("k_rules", None)  # set's grid can set it for all (fixed-k ids unchanged)
        for key, controls in _ONLY_WITH.items():
            if key in out and control not in controls:
                raise ConfigError(f"{where}.{key}: only with k_control {' or '.join(controls)}")
        if control == "sequence":  # its source is read where the config is normalised
            if "k_sequence" not in out:  # (canonical_params)
                raise ConfigError(f"{where}.k_sequence: required by k_control sequence")
            return out
        if control == "fixed":
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

    @staticmethod
    def _k_init_as_k(params: dict[str, Any], where: str) -> dict[str, Any]:
        """``k_init`` (the issue's name for an online controller's starting k) is ``k``: the
        canonical config, and so the run id and the trace, carry it as ``k``."""
        params = dict(params)
        k_init = params.pop("k_init")
        if params.get("k_control", "fixed") not in SEARCH:
            raise ConfigError(f"{where}.k_init: only with k_control {' or '.join(SEARCH)}")
        if "k" in params and params["k"] != k_init:
            raise ConfigError(
                f"{where}.k_init: {k_init!r} differs from k {params['k']!r} (k is the initial k "
                "of an online controller: give one of them)"
            )
        params["k"] = k_init
        return params

    @classmethod
    def with_defaults(cls, params: dict[str, Any]) -> dict[str, Any]:
        """The trace's hyperparameter columns: k_sequence shows the replayed run's id (its
        path and content hash are in the runs row's config_json)."""
        out = super().with_defaults(params)
        seq = out.get("k_sequence")
        if isinstance(seq, dict):
            out["k_sequence"] = seq["run"]
        elif not seq:
            out.pop("k_sequence", None)
        return out

    @classmethod
    def work(cls, params: dict[str, Any]) -> RunWork:
        """A client adds its gradient to its residual (a pass over one vector a client) and,
        but for periodic-k and send-all, selects its top k of the residual (a selection over
        D); the server aggregates the offers. Send-all's server also reads every residual for
        the mean and zeroes it: two passes more a client. An online controller also takes
        each client's loss on one of its rows at the last, the new and the auxiliary model
        (three one-row gradients a client a round), and offers k and k' elements where k moves
        with the time model: charged a third of D each, the mean k of the toy sweep's
        trajectories over its four exchange times (a run at a cheap exchange costs more, one
        at a dear exchange less)."""
        work = super().work(params)
        passes = 3.0 if cls.selection == "all" else 1.0
        selections = 0.0 if cls.selection in ("periodic", "all") else 1.0
        work = work._replace(passes=passes, states=1.0, selections=selections)
        if "k" in params and params.get("k_control", "fixed") in SEARCH:
            return work._replace(probes=3.0, offered_share=2 / 3)
        return work

    @classmethod
    def reads_time_model(cls, params: dict[str, Any]) -> bool:
        """The online controllers learn from each round's simulated time (spec 2.6)."""
        return "k" in params and params.get("k_control", "fixed") in SEARCH

    @property
    def control(self) -> str:
        return self.param("k_control") if "k" in self.params else "fixed"

    def k_range(self) -> tuple[int, int]:
        """[k_min, k_max] of the online controller; 0 means max(2, ceil(0.002 D)) (the paper's
        0.002 D, at least 2 so that some k' < k exists: at k = 1 no sign, so k would stay)
        and D. With k_rules authors_code, 0 means the code's: round(0.002 D) and D for OGD,
        10 and D - 1 for EXP3's arms, 10 and D for the bandit."""
        D = self.n_params
        if self.authors_rules:
            low, high = {"exp3": (10, D - 1), "bandit": (10, D)}.get(
                self.control, (max(1, int(np.round(0.002 * D))), D)
            )
            return self.param("k_min") or min(low, self.params["k"]), self.param("k_max") or high
        k_max = self.param("k_max") or D
        k_min = self.param("k_min") or min(max(2, math.ceil(0.002 * D)), self.params["k"])
        return k_min, k_max

    @property
    def authors_rules(self) -> bool:
        return self.control in SEARCH and self.param("k_rules") == "authors_code"

    def check_problem(self, where: str = "params") -> None:
        k, D = self.params.get("k"), self.n_params
        if k is not None and k > D:
            raise ConfigError(
                f"{where}.k: {k} is larger than the number of model parameters D = {D} "
                f"of dataset {self.problem.data.name}"
            )
        if self.control in SEARCH and self.param("k_max") > D:
            raise ConfigError(
                f"{where}.k_max: {self.param('k_max')} is larger than the number of model "
                f"parameters D = {D} of dataset {self.problem.data.name}"
            )
        if self.control == "sequence" and self.replayed().max() > D:
            raise ConfigError(
                f"{where}.k_sequence: the recorded k reaches {self.replayed().max()}, more than "
                f"the D = {D} parameters of dataset {self.problem.data.name}"
            )

    def replayed(self) -> np.ndarray:
        """k_control sequence: the k of each round (``ks[m - 1]`` is round m's), from the
        resolved sequence this run was built with (resolved_params reads the
        recorded run; an algorithm reads no files)."""
        seq = self.params["k_sequence"]
        if not hasattr(seq, "ks"):
            raise TypeError(
                "k_sequence: build the algorithm with the resolved sequence "
                "(the class's resolved_params), not its config value"
            )
        return seq.ks

    @property
    def online(self) -> bool:
        return self.control != "fixed"

    def _controller(self) -> tuple[Any, int]:
        """This run's k controller and the largest k it can play (the offers' width)."""
        control, k = self.control, self.params["k"]
        if control == "sequence":
            ks = self.replayed()
            return SequenceK(ks), int(ks.max())
        k_min, k_max = self.k_range()
        if self.authors_rules:
            if control == "value_ogd":
                return AuthorsValueOGD(k, k_min, k_max), k_max
            if control == "exp3":
                return AuthorsExp3(k_min, k_max, self.n_params), k_max
            if control == "bandit":
                return AuthorsBandit(k_min, k_max), k_max
            extended, window = control == "online_extended", self.param("window")
            return AuthorsSignOGD(k, k_min, k_max, extended, window, self.param("expand")), k_max
        if control == "value_ogd":
            return ValueOGD(k, k_min, k_max), k_max
        if control == "exp3":
            return Exp3K(k_min, k_max), k_max
        if control == "bandit":
            return BanditK(k, k_min, k_max), k_max
        extended = control == "online_extended"
        return OnlineK(k, k_min, k_max, extended, self.param("window"), self.param("expand")), k_max

    def setup(self) -> None:
        problem = self.problem
        N, D = problem.n_clients, self.n_params
        self.k = self.params.get("k", 0) if self.selection not in ("periodic", "all") else 0
        self.controller: Any = None
        k_cap = self.k
        if self.online:
            self.controller, k_max = self._controller()
            self.ctrl_rng = np.random.default_rng(np.random.SeedSequence([self.seed, 5]))
            k_cap = k_max if self.k else 0
            self.loss_work = (np.zeros(problem.shape), problem.grad_work(1))
        self.W = problem.initial_model()
        self.A = np.zeros((N, D))  # residuals a_i
        self.perm = np.arange(problem.data.n_samples, dtype=np.int64)
        self.rng = kernels.client_states(self.seed, N)
        k_offer = max(k_cap, 1)  # arrays need a column even when nothing is offered
        self.idx = np.zeros((N, k_offer), np.int64)
        self.val = np.zeros((N, k_offer))
        self.agg = np.zeros(D)
        self.in_J = np.zeros(D, np.bool_)
        self.J = np.zeros(k_offer, np.int64)
        threads = numba.config.NUMBA_NUM_THREADS
        self.sel = np.empty((threads, 2 * D), np.uint64)
        self.counts = np.empty((threads, sparsification.RADIX_BINS), np.int64)
        self.shared = np.zeros(N, np.int64)  # |J ∩ J_i| of the last round
        self.contributed = np.zeros(N, np.int64)  # sum over rounds of |J ∩ J_i|
        self.idle_rounds = np.zeros(N, np.int64)  # rounds with J ∩ J_i empty
        self.rounds_run = 0
        self.k_used: int | None = None
        self.k_aux: int | None = None
        self.sign: int | None = None
        self.w_aux: np.ndarray | None = None  # w'(m) of the last round (online k)
        self.samples: np.ndarray | None = None  # the rows h of the sign estimate
        if self.selection == "periodic":
            self.periodic = PeriodicIndices(self.seed, D)
            self.periodic_charge = 2 if self.param("charge") == "authors_code" else 1
        self.tree = self.selection == "fub" and self.param("merge") == "tree"
        self.tree_acc = np.zeros(D) if self.tree else None  # merge_tree's sums
        self.work = problem.step_work()
        # k_rules authors_code: |J| and |J'| of the round before (the code's times lag one)
        self.last_down: tuple[int, int] | None = None

    def _batch(self) -> int:
        b = self.params["batch_size"]
        return 0 if b is None else b

    def _accumulate(self, k: int) -> None:
        """a_i += minibatch gradient at w for every client; offers of size k (0: none)."""
        problem, data = self.problem, self.problem.data
        batch = self._batch()
        idx, val = (
            (self.idx, self.val)
            if k == self.idx.shape[1] or k == 0
            else (np.empty((problem.n_clients, k), np.int64), np.empty((problem.n_clients, k)))
        )
        sparsification.accumulate_offers(
            data.kernel_X,
            data.y,
            data.client_ptr,
            self.W,
            self.A,
            self.perm,
            self.rng,
            sparsification.OfferConstants(batch, k),
            problem.step_model,
            (idx, val),
            self.work.for_batch(batch),
            (self.sel, self.counts),
        )
        self.offers = (idx, val)

    def _values(self, k: int, down: int | None = None) -> tuple[int, int]:
        """Values one client sends up and receives in a round with k elements."""
        if self.selection == "all":
            return self.n_params, self.n_params
        if self.selection == "periodic":
            return self.periodic_charge * k, self.periodic_charge * k
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
        sparsification.aggregate_offers(idx, val, self.problem.p, agg)
        if self.selection == "union":
            J = sparsification.union_indices(idx, in_J)
            in_J[J] = True
            return J
        if self.selection == "fab":
            sparsification.fab_select(idx, val, agg, k, self.params["fill"] == "aggregate", in_J, J)
        else:
            sparsification.fub_select(idx, agg, k, in_J, J)
        return J[:k]

    def _merge_tree(self, idx, val, k) -> np.ndarray:
        """The authors' code's FUB_top_K: J and b_J from :func:`kernels.merge_tree`, marked in
        ``in_J``; each client's residual is reset, and counted as applied, where its offered
        element survived every merge above it."""
        scratch = (self.in_J, self.tree_acc)
        J, b, survived = sparsification.merge_tree(idx, val, self.problem.p, k, scratch)
        self.agg[J] = b
        self.in_J[J] = True
        self.shared[:] = survived.sum(axis=1)
        self.A[np.nonzero(survived)[0], idx[survived]] = 0.0
        return J

    def round(self, t: int) -> RoundCost:
        problem, params = self.problem, self.params
        N, D = problem.n_clients, self.n_params
        w = self.W.reshape(-1)  # a view: flat row-major parameters
        eta = params["stepsize"]
        if self.selection == "all":
            self._accumulate(0)
            w -= eta * (problem.p @ self.A)
            self.A[:] = 0.0
            self.shared[:] = D
            self.k_used = D
            self._tally()
            return RoundCost(N * dense_bytes(D), N * dense_bytes(D), 1, D, D)
        ctrl, m = self.controller, t + 1
        k = params["k"] if ctrl is None else ctrl.choose(m, self.ctrl_rng)
        k_aux = ctrl.choose_aux(m, k, self.ctrl_rng) if ctrl is not None and ctrl.signed else None
        w_prev = w.copy() if ctrl is not None else None
        aux_down = None
        if self.selection == "periodic":
            self._accumulate(0)
            J = self.periodic.next(k)
            self.agg[J] = problem.p @ self.A[:, J]
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
            if self.tree:
                J = self._merge_tree(idx, val, k)
            else:
                J = self._select(idx, val, k, self.agg, self.in_J, self.J)
                sparsification.count_shared(idx, self.in_J, self.shared)
                sparsification.reset_sent(self.A, idx, self.in_J, self.selection == "union")
            sparsification.apply_sparse(w, J, self.agg, eta, self.in_J)
            up, down = self._values(k, J.size)
            cost = RoundCost(N * sparse_bytes(k), N * sparse_bytes(J.size), 1, up, down)
        self.k_used = k
        self._tally()
        if ctrl is not None:
            self.k_aux, self.sign, self.w_aux = k_aux, None, None
            if k_aux is not None:
                self.w_aux = w_prev.copy()
                self.w_aux[J_aux] -= eta * agg_aux[J_aux]
            feedback = None
            code_times = (
                self._code_times(k, k_aux, J.size, aux_down) if self.authors_rules else None
            )
            if not isinstance(ctrl, SequenceK) and (k_aux is not None or not ctrl.signed):
                theta_aux = None if k_aux is None else self._theta(*self._values(k_aux, aux_down))
                theta = self._theta(up, down)
                if code_times is not None:
                    theta, theta_aux = code_times
                feedback = self._feedback(w_prev, w, self.w_aux, theta, theta_aux)
                feedback = Feedback(**feedback, k=k, k_aux=k_aux)
                self.sign = feedback.sign()
            ctrl.learn(m, feedback)
        return cost

    def _code_times(self, k, k_aux, down, aux_down) -> tuple[float, float | None]:
        """The times the authors' code learns from in round m (k_rules authors_code), with
        ``down`` = |J| and ``aux_down`` = |J'| (None: k') of this round: computed at the end
        of round m - 1, so the downlink is that round's while the uplink is already this
        round's k and k' (beta / D / 2 (2 k + 2 |J|)); the computation times (1 + 1/b) for OGD
        and the bandit (a typo, 'EP3', leaves EXP3 out). Round 1 takes its own downlink."""
        tm, D = self.time_model, self.n_params
        b = self._batch()
        comp = tm["step_time"] * (1.0 + 1.0 / b if b > 0 and self.control != "exp3" else 1.0)
        comp += tm["round_latency"]
        down_aux = k_aux if aux_down is None else aux_down
        last = self.last_down or (down, down_aux)
        self.last_down = (down, down_aux)
        theta = comp + tm["exchange_time"] * (2 * k + 2 * last[0]) / (2.0 * D)
        if k_aux is None:
            return theta, None
        last_aux = last[1] if last[1] is not None else down_aux
        return theta, comp + tm["exchange_time"] * (2 * k_aux + 2 * last_aux) / (2.0 * D)

    def _tally(self) -> None:
        """The per-client contribution table's running sums: elements of each client's offer
        applied, and rounds in which it had none applied."""
        self.contributed += self.shared
        self.idle_rounds += self.shared == 0
        self.rounds_run += 1

    def client_summary(self) -> dict[str, np.ndarray]:
        return self.client_contributions()

    def client_contributions(self) -> dict[str, np.ndarray]:
        """Per client, over the rounds so far: the elements of its offer applied (sum of
        |J ∩ J_i|), their mean per round, and the rounds with none applied."""
        rounds = max(self.rounds_run, 1)
        return {
            "client": np.arange(self.problem.n_clients),
            "applied": self.contributed.copy(),
            "applied_per_round": self.contributed / rounds,
            "idle_rounds": self.idle_rounds.copy(),
        }

    def _feedback(self, w_prev, w, w_aux, theta, theta_aux) -> dict[str, float | None]:
        """Spec section 2.6: each client's loss at w(m-1), w(m) and (with k') w'(m) on one
        random row of its minibatch, p-weighted, and the times of the round."""
        problem, data = self.problem, self.problem.data
        ptr, batch = data.client_ptr, self._batch()
        sizes = np.diff(ptr)
        b = sizes if batch <= 0 else np.minimum(sizes, batch)
        self.samples = self.perm[
            ptr[:-1] + (self.ctrl_rng.random(problem.n_clients) * b).astype(int)
        ]
        points = (w_prev, w) if w_aux is None else (w_prev, w, w_aux)
        L = np.array([[self._sample_loss(v, h) for h in self.samples] for v in points]) @ problem.p
        aux = None if w_aux is None else float(L[2])
        return {
            "prev": float(L[0]),
            "cur": float(L[1]),
            "aux": aux,
            "theta": theta,
            "theta_aux": theta_aux,
        }

    def _sample_loss(self, w: np.ndarray, row: int) -> float:
        """f_{i,h}(w): the loss of one row (l2 term included)."""
        problem = self.problem
        G, work = self.loss_work
        return problem.minibatch_grad(w.reshape(problem.shape), np.array([row], np.int64), G, work)

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
    hyperparameters = (STEPSIZE, BATCH_SIZE, K_ELEMENTS, MERGE, *CONTROL)

    @classmethod
    def validate_params(cls, params: dict[str, Any], where: str = "params") -> dict[str, Any]:
        out = super().validate_params(params, where)
        if out.get("merge") == "tree" and out.get("k_control", "fixed") != "fixed":
            raise ConfigError(
                f"{where}.merge: tree only with k_control fixed (the authors' code adapts k "
                "for its U_top_K and FAB_top_K only)"
            )
        return out


class UTopK(_GradientSparsification):
    name = "utopk"
    summary = "unidirectional top-k: k up, the union of the offers down"
    selection = "union"


class PeriodicK(_GradientSparsification):
    name = "periodick"
    summary = "periodic-k: k shared random indices per round, cycling through all coordinates"
    selection = "periodic"
    hyperparameters = (STEPSIZE, BATCH_SIZE, K_ELEMENTS, CHARGE, *CONTROL)


class SendAll(_GradientSparsification):
    name = "sendall"
    summary = "always-send-all: synchronous minibatch SGD, D values up and down"
    selection = "all"
    hyperparameters = (STEPSIZE, BATCH_SIZE)
