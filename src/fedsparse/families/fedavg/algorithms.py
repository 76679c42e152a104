"""FedAvg / local SGD with model averaging: the SGD baseline of several families.

Each round the server broadcasts W_t to the participating clients (all, or
``sampled_clients`` drawn uniformly without replacement); each runs ``local_steps``
minibatch SGD steps with step ``stepsize / t**stepsize_decay`` (t the round counted
from 1) and uploads its model; the server sets W_{t+1} to the p-weighted average over
the participants, p renormalised over them. Linear models use the hard-thresholding
family's local-SGD kernel without thresholding, networks the MLP kernel: FedAvg is
Fed-HT with sparsity = every parameter, bit for bit.

Besides the bytes, the trace gets the personalised family's ``bits`` (the sFedHP paper's Remark 1
count for one client, up and down, cumulative) and ``density`` (non-zeros of W / d): FedAvg is
that family's flat baseline, and its bits are what sFedHP's are compared with.
"""

from __future__ import annotations

import numpy as np

from ...algorithms.base import (
    Algorithm,
    Hyperparameter,
    RoundCost,
    count_nonzero,
    dense_bytes,
    vector_bits,
)
from ...algorithms.common import (
    BITS,
    DENSITY,
    LOCAL_STEP_BATCH_SIZE,
    LocalSGDStack,
    server_stream,
    stepsize,
)
from ...errors import ConfigError
from ...lazy import LazyModule

kernels = LazyModule("fedsparse.kernels")

HYPERPARAMETERS = (
    stepsize("initial local step size a"),
    Hyperparameter("local_steps", int, "E: local SGD steps per round", default=1, low=1),
    LOCAL_STEP_BATCH_SIZE,  # the same declaration as the hard-thresholding family's
    Hyperparameter(
        "sampled_clients",
        int,
        "clients drawn per round without replacement (0: all)",
        default=0,
        low=0,
    ),
    Hyperparameter(
        "stepsize_decay",
        float,
        "alpha: the step in round t (from 1) is stepsize / t**alpha",
        default=0.0,
        low=0.0,
    ),
)


class FedAvg(Algorithm):
    name = "fedavg"
    summary = "FedAvg: E local SGD steps (decaying step), p-weighted average of the participants"
    hyperparameters = HYPERPARAMETERS
    trace_columns = (BITS, DENSITY)
    family = "FedAvg"
    label, colour = "FedAvg", "tab:gray"  # as the sFedHP page shows it
    shared_pages_by_name = True
    config_label = (("stepsize", "γ"), ("local_steps", "K"), ("batch_size", "b"))
    # linear 2: a local step on dense rows sums in FMA lanes (kernels.dense_steps)
    numerics = {"linear": 2, "network": 1}

    def check_problem(self, where: str = "params") -> None:
        m, n = self.params["sampled_clients"], self.problem.n_clients
        if m > n:
            raise ConfigError(
                f"{where}.sampled_clients: {m} is more than the {n} clients of "
                f"dataset {self.problem.data.name}"
            )

    def setup(self) -> None:
        problem = self.problem
        self.W = problem.initial_model()
        self.W_local = np.zeros((problem.n_clients, *problem.shape))
        self.perm = np.arange(problem.data.n_samples, dtype=np.int64)
        self.rng = kernels.client_states(self.seed, problem.n_clients)
        self.server = server_stream(self.seed, problem.n_clients)
        self.scratch = kernels.threshold_scratch(problem.shape[1])
        self.work = problem.local_work()
        self.stack = None  # a cohort's stacked models (LocalSGDStack), on first fused round
        self.bits = 0.0

    def participants(self) -> np.ndarray | None:
        """This round's clients in increasing order, drawn from the server stream; None: all."""
        m, n = self.params["sampled_clients"], self.problem.n_clients
        if m == 0 or m == n:
            return None
        return np.sort(self.server.choice(n, size=m, replace=False))

    def _local(self, ptr, W_local, rng, batch: int, lr: float) -> None:
        """Local SGD of the clients of ``ptr`` (rows, W_local and rng sliced alike)."""
        self.problem.local_sgd_round(
            self.W,
            W_local,
            self.perm,
            rng,
            self.params["local_steps"],
            batch,
            lr,
            self.work,
            client_ptr=ptr,
        )

    @classmethod
    def fusable(cls, params: dict) -> tuple[str, ...]:
        """The step and its decay: the members' clients and minibatches are the same (one seed)."""
        return ("stepsize", "stepsize_decay")

    def step_at(self, t: int) -> float:
        """The local step size of round ``t`` (from 0)."""
        params = self.params
        return params["stepsize"] / float(t + 1) ** params["stepsize_decay"]

    @property
    def batch(self) -> int:
        return 0 if self.params["batch_size"] is None else self.params["batch_size"]

    def round(self, t: int) -> RoundCost:
        return self.cohort_round([self], t)[0]

    @classmethod
    def cohort_round(cls, members: list[Algorithm], t: int) -> list[RoundCost]:
        """A linear model's members step in one fused kernel (the same participants, drawn
        from each member's equal server stream, and the same rows); a network's one by one."""
        first = members[0]
        if not first.problem.is_linear:
            return [m.own_round(t) for m in members]
        who = [m.participants() for m in members]
        nnz_down = [int(np.count_nonzero(m.W)) for m in members]  # W_t, before the average
        stack = LocalSGDStack.of(members)
        steps = first.params["local_steps"]
        stack.steps(members, [m.step_at(t) for m in members], steps, first.batch, 0, who[0])
        return [m.server_step(w, n) for m, w, n in zip(members, who, nnz_down, strict=True)]

    def own_round(self, t: int) -> RoundCost:
        """Round ``t`` of this member alone (a network's)."""
        problem = self.problem
        batch, lr = self.batch, self.step_at(t)
        who = self.participants()
        ptr = problem.data.client_ptr
        nnz_down = int(np.count_nonzero(self.W))  # W_t, before the average replaces it
        if who is None:
            self._local(ptr, self.W_local, self.rng, batch, lr)
        else:
            # one kernel call per participant on its own slices: the same streams and rows
            # as in a round of all clients, so client i's work never depends on the draw
            for i in who:
                self._local(ptr[i : i + 2], self.W_local[i : i + 1], self.rng[i : i + 1], batch, lr)
        return self.server_step(who, nnz_down)

    def server_step(self, who: np.ndarray | None, nnz_down: int) -> RoundCost:
        """The average of the participants' models ``who`` (None: all), and the round's cost."""
        problem = self.problem
        if who is None:
            kernels.aggregate(self.W_local, problem.p, self.W.shape[1], self.W, self.scratch)
            n = problem.n_clients
        else:
            p = problem.p[who] / problem.p[who].sum()
            kernels.aggregate(self.W_local[who], p, self.W.shape[1], self.W, self.scratch)
            n = who.size
        up = self.W_local if who is None else self.W_local[who]
        self.add_bits(up, nnz_down)
        size = dense_bytes(self.W.size)
        return RoundCost(n * size, n * size, self.params["local_steps"])

    def add_bits(self, up: np.ndarray, nnz_down: int) -> None:
        """Remark 1 bits of this round for one client on average: each participant's model
        up and W_t down (to the participants only), exact zeros free, as the flat baselines of
        the personalised family count them."""
        d, n = self.W.size, self.problem.n_clients
        sent = sum(vector_bits(k, d) for k in count_nonzero(up, 0.0))
        self.bits += (sent + up.shape[0] * vector_bits(nnz_down, d)) / n

    def extra_metrics(self) -> dict:
        d = self.W.size
        return {"bits": self.bits, "density": float(np.count_nonzero(self.W)) / d}

    @property
    def model(self) -> np.ndarray:
        return self.W

    @property
    def local_models(self) -> np.ndarray:
        """Each client's model at the end of its last round (non-participants keep theirs)."""
        return self.W_local
