"""A model and loss bound to federated data, the objective f(W) = sum_i p_i f_i(W), and how the
algorithms train it: the model as the training kernels take it, their work spaces, local steps
and minibatch gradients.

Scoring a model (the objective and the metrics of a trace row) is
:class:`fedsparse.objective.evaluation.Evaluation`'s; a Problem holds one and passes on its methods.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from typing import NamedTuple

import numpy as np

from .. import kernels
from ..data import FederatedData
from ..errors import ConfigError
from ..kernels import prox
from .evaluation import Evaluation
from .model import ACTIVATIONS, Network

LOSS_TASKS = {"least_squares": "regression", "logistic": "binary", "softmax": "multiclass"}
DEFAULT_L2 = {"least_squares": 0.0, "logistic": 1e-4, "softmax": 1e-4}


def one_blas_thread() -> None:
    """Run BLAS on one thread in this process (NumPy's, SciPy's and the network kernels' own
    OpenBLAS, :mod:`fedsparse.kernels.blas`).

    The MLP kernels call BLAS from inside numba's parallel loop over clients: with BLAS
    threads too, the two thread pools fight (a 784-500-200-10 round 4.8x slower on 2
    cores), and BLAS's thread count would change the last bits of a trace.
    """
    import scipy.linalg  # noqa: F401  (loads SciPy's BLAS, which numba's np.dot calls)
    from threadpoolctl import threadpool_limits

    from ..kernels import blas  # noqa: F401  (loads the network kernels' BLAS)

    threadpool_limits(1, user_api="blas")


class KernelModel(NamedTuple):
    """The model and loss as the training kernels take them, in their argument order: a call
    passes ``*problem.kernel_model`` where a kernel takes ``sizes, bias, activation_code,
    loss_code, l2`` (the network kernels of ``kernels.network``), the named tuple itself
    where a kernel takes it as one ``model`` argument (SSCA's client kernels),
    ``*problem.kernel_model.linear`` where a linear-model kernel takes ``loss_code, l2``;
    :attr:`Problem.step_model` adds the ``network`` flag for the kernels of either kind."""

    sizes: np.ndarray  # layer widths, or a cnn's 2-D layer table (kernels.cnn)
    bias: bool
    activation_code: int  # kernels.layers' activation codes
    loss_code: int  # kernels.LOSS_CODES
    l2: float

    @property
    def linear(self) -> tuple[int, float]:
        """(loss_code, l2): the arguments of the fast linear kernels."""
        return self.loss_code, self.l2


class ThreadWork:
    """Per-thread work space of one kind of training kernel, allocated on first use and grown
    (never shrunk) to the largest minibatch asked for: the one growth rule of every algorithm.

    The algorithm holds it (from :meth:`Problem.local_work` or :meth:`Problem.step_work`) and
    hands it back to the problem's step methods, which read :meth:`for_batch`.
    """

    def __init__(self, allocate: Callable[[int], tuple], most_rows: int, grows: bool = True):
        self._allocate = allocate
        self._most_rows = most_rows  # the largest client: a full batch's rows
        self._grows = grows  # False: the buffers do not depend on the batch (a linear model)
        self.rows = 0
        self.buffers: tuple | None = None

    def for_batch(self, batch: int) -> tuple:
        """The buffers, grown to hold a minibatch of ``batch`` rows (<= 0: a full batch)."""
        rows = self._most_rows if batch <= 0 else min(batch, self._most_rows)
        if self.buffers is None or (self._grows and rows > self.rows):
            self.buffers = self._allocate(rows)
            self.rows = rows
        return self.buffers


class Problem:
    """Federated objective of ``loss`` on ``data``; the parameter W has shape :attr:`shape`
    ((n_outputs, d) for a linear model without intercept, (1, n_params) otherwise). The
    algorithms hand the model to the training kernels as one bundle, :attr:`kernel_model`;
    :attr:`evaluation` scores models.

    Parameters
    ----------
    data : FederatedData
        The rows; :attr:`data` holds them in the dtype the kernels compute in
        (:meth:`FederatedData.in_dtype`: float32 for a float32 network).
    loss : {"least_squares", "logistic", "softmax"}
    l2 : float
        Ridge weight; every client's loss adds ``l2/2 * ||W||^2`` (every parameter).
    weights : {"uniform", "samples"}
        Client weights p_i: ``1/N`` (the papers' choice) or ``n_i / n``.
    model : dict, optional
        The structure keys of a normalised model config (``kind``, ``hidden``, ...);
        None or ``{}``: a linear model without intercept.
    """

    def __init__(
        self,
        data: FederatedData,
        loss: str,
        l2: float,
        weights: str = "uniform",
        model: dict | None = None,
    ):
        if LOSS_TASKS[loss] != data.task and not (loss == "least_squares"):
            raise ConfigError(
                f"model.loss: {loss} needs {LOSS_TASKS[loss]} data, "
                f"but dataset {data.name} is {data.task}"
            )
        self.loss = loss
        self.weights = weights
        sizes = data.client_sizes.astype(np.float64)
        self.p = (
            np.full(data.n_clients, 1.0 / data.n_clients)
            if weights == "uniform"
            else (sizes / sizes.sum())
        )
        self.n_outputs = max(data.n_classes, 2) if loss == "softmax" else 1
        self.network = Network.from_config(model or {}, data.n_features, self.n_outputs)
        # the rows in the dtype the kernels compute in: float32 for a float32 network
        self.data = data = data.in_dtype(self.network.dtype)
        self.kernel_model = KernelModel(
            self.network.kernel_sizes(),
            self.network.bias,
            ACTIVATIONS.index(self.network.activation),
            kernels.LOSS_CODES[loss],
            float(l2),
        )
        if not self.is_linear:
            one_blas_thread()
        self.evaluation = Evaluation(data, loss, self.network, self.kernel_model, self.p)

    @classmethod
    def from_config(cls, data: FederatedData, model: dict) -> Problem:
        """The problem of a normalised run config's ``model`` section on ``data``."""
        structure = {k: v for k, v in model.items() if k not in ("loss", "l2", "weights")}
        return cls(data, model["loss"], model["l2"], model["weights"], structure)

    @property
    def l2(self) -> float:
        """The ridge weight (every client's loss adds ``l2/2 * ||W||^2``)."""
        return self.kernel_model.l2

    @property
    def loss_code(self) -> int:
        return self.kernel_model.loss_code

    @property
    def sizes(self) -> np.ndarray:
        """The network's layer widths, or a cnn's layer table, as the kernels take them."""
        return self.kernel_model.sizes

    @property
    def activation_code(self) -> int:
        return self.kernel_model.activation_code

    @property
    def is_linear(self) -> bool:
        """A linear model without intercept: W is (n_outputs, n_features), thresholded and
        scored per class row, with its own fast kernels. Any other model (a network, or a
        linear model with intercept) has W of shape (1, n_params)."""
        return self.network.fast_linear

    @property
    def parameter_noun(self) -> str:
        """What a row of W counts, for messages: "dimension" (a linear model's features)
        or "number of model parameters"."""
        return "dimension" if self.is_linear else "number of model parameters"

    @cached_property
    def step_model(self) -> prox.StepModel:
        """``StepModel(network, sizes, bias, act, loss, l2)``: the model as the kernels that
        take either kind (:mod:`fedsparse.kernels.prox` and those built on
        :func:`~fedsparse.kernels.prox.model_grad`) take it, one argument, ``network`` choosing
        the gradient."""
        return prox.StepModel(not self.is_linear, *self.kernel_model)

    @property
    def n_params(self) -> int:
        return self.network.n_params

    # ---- the model's interface to the algorithms: local steps, gradients, work spaces -------
    # Everything that belongs to one run's model (W, the clients' copies, step sizes, weights)
    # is an argument, never state of the problem: a cohort of runs differing in a continuous
    # hyperparameter can later pass a stack of members through the same methods
    # (docs/architecture.md, "The model's interface").

    @property
    def _most_rows(self) -> int:
        return int(self.data.client_sizes.max())

    def local_work(self) -> ThreadWork:
        """Work space of :meth:`local_sgd_round` (one per algorithm instance)."""
        if self.is_linear:
            return ThreadWork(
                lambda rows: kernels.thread_buffers(*self.shape), self._most_rows, False
            )
        dense = not self.data.is_sparse
        return ThreadWork(
            lambda rows: kernels.mlp_thread_work(self.sizes, rows, dense=dense), self._most_rows
        )

    def step_work(self) -> ThreadWork:
        """Work space of :meth:`prox_steps` and of the family kernels that take
        :attr:`step_model` (see :func:`fedsparse.kernels.prox.step_work`)."""
        network, dense = not self.is_linear, not self.data.is_sparse
        return ThreadWork(
            lambda rows: prox.step_work(self.sizes, self.shape, rows, network=network, dense=dense),
            self._most_rows,
            network,
        )

    def grad_work(self, max_rows: int) -> np.ndarray | tuple:
        """One thread's work space of :meth:`minibatch_grad` for up to ``max_rows`` rows."""
        if self.is_linear:
            return np.zeros(self.shape[0])
        return kernels.mlp_work(self.sizes, max(max_rows, 1), dense=not self.data.is_sparse)

    def local_sgd_round(
        self,
        W: np.ndarray,
        W_local: np.ndarray,
        perm: np.ndarray,
        rng: np.ndarray,
        steps: int,
        batch: int,
        stepsize: float,
        work: ThreadWork,
        *,
        tau_local: int = 0,
        layer_bounds: np.ndarray | None = None,
        client_ptr: np.ndarray | None = None,
    ) -> None:
        """``steps`` local SGD steps of every client from ``W`` into ``W_local``.

        Parameters
        ----------
        W : array, shape :attr:`shape`
            The broadcast model.
        W_local : array, shape (n_clients, *shape)
            Output: each client's model at the end of the round.
        perm, rng : the run's per-client row permutations and random states (advanced).
        steps, batch, stepsize : local steps, rows per minibatch (<= 0: all), step size.
        work : from :meth:`local_work`.
        tau_local : > 0: H_tau after every step (per class row, or per segment of
            ``layer_bounds`` for a network).
        client_ptr : the row bounds of the clients stepped (default: all); ``W_local`` and
            ``rng`` then hold those clients only.
        """
        data = self.data
        ptr = data.client_ptr if client_ptr is None else client_ptr
        buffers = work.for_batch(batch)
        common = (data.kernel_X, data.y, ptr)
        constants = kernels.SGDConstants(steps, batch, tau_local, stepsize)
        if self.is_linear:
            if layer_bounds is not None:
                raise ValueError("layer bounds are for networks; a linear model has rows")
            kernels.local_sgd_round(
                *common, W, W_local, perm, rng, constants, self.step_model, buffers
            )
            return
        if layer_bounds is None:
            layer_bounds = np.array([0, W.shape[-1]], dtype=np.int64)
        kernels.mlp_local_sgd_round(
            *common,
            W[0],
            W_local[:, 0],
            perm,
            rng,
            constants,
            self.step_model,
            buffers,
            np.ascontiguousarray(layer_bounds, dtype=np.int64),
        )

    def local_sgd_cohort_round(
        self,
        Ws: np.ndarray,
        W_locals: np.ndarray,
        members: np.ndarray,
        perm: np.ndarray,
        rng: np.ndarray,
        steps: int,
        batch: int,
        stepsizes: np.ndarray,
        work: ThreadWork,
        tau_local: int = 0,
        clients: np.ndarray | None = None,
    ) -> None:
        """:meth:`local_sgd_round` of the ``members`` of a cohort of linear models at once
        (``Ws`` (C, *shape), ``W_locals`` (C, n_clients, *shape), ``stepsizes`` (C,)), sharing
        one ``perm`` and ``rng``: each member's bits are those of its own round (see
        :func:`fedsparse.kernels.local_sgd_cohort_round`). ``clients``: the clients stepped
        (default: all)."""
        if not self.is_linear:
            raise ValueError("the cohort kernel of local SGD is for linear models")
        data = self.data
        if clients is None:
            clients = np.arange(self.n_clients, dtype=np.int64)
        kernels.local_sgd_cohort_round(
            data.kernel_X,
            data.y,
            data.client_ptr,
            Ws,
            W_locals,
            np.ascontiguousarray(members, dtype=np.int64),
            np.ascontiguousarray(clients, dtype=np.int64),
            perm,
            rng,
            kernels.SGDConstants(
                steps, batch, tau_local, np.ascontiguousarray(stepsizes, dtype=np.float64)
            ),
            self.step_model,
            work.for_batch(batch),
        )

    @property
    def has_active_set_steps(self) -> bool:
        """Whether :meth:`active_set_sgd_round` applies: a linear model on CSR data."""
        return self.is_linear and self.data.is_sparse

    def active_set_sgd_round(
        self,
        W: np.ndarray,
        support: np.ndarray,
        compact: tuple,
        perm: np.ndarray,
        rng: np.ndarray,
        steps: int,
        batch: int,
        stepsize: float,
        tau_local: int,
        work: tuple,
    ) -> None:
        """:meth:`local_sgd_round` touching only each client's active coordinates (the
        broadcast ``support`` plus the features its rows hit), into the compact models
        ``compact`` of :func:`fedsparse.kernels.sparse_buffers` (``work`` from there too)."""
        if not self.has_active_set_steps:
            raise ValueError("the active-set kernel needs CSR data and a linear model")
        data = self.data
        kernels.local_sgd_round_csr(
            data.kernel_X,
            data.y,
            data.client_ptr,
            (W, support),
            *compact,
            perm,
            rng,
            kernels.SGDConstants(steps, batch, tau_local, stepsize),
            self.step_model,
            work,
        )

    def prox_steps(
        self,
        thetas: np.ndarray,
        anchors: np.ndarray,
        which: np.ndarray,
        perm: np.ndarray,
        rng: np.ndarray,
        constants: prox.ProxConstants,
        work: ThreadWork,
    ) -> None:
        """Proximal local steps of every client on ``thetas`` (n_clients, *shape), in place,
        anchored at ``anchors[which[i]]`` (see :mod:`fedsparse.kernels.prox`); ``constants``: a
        :class:`~fedsparse.kernels.prox.ProxConstants` of floats (``steps``, ``batch``,
        ``fresh``, ``stepsize``, ``weight``, ``gamma``, ``rho``); ``work`` from
        :meth:`step_work`."""
        data = self.data
        prox.prox_steps(
            data.kernel_X,
            data.y,
            data.client_ptr,
            thetas,
            anchors,
            np.ascontiguousarray(which, dtype=np.int64),
            perm,
            rng,
            constants,
            self.step_model,
            work.for_batch(constants.batch),
        )

    def minibatch_grad(
        self, W: np.ndarray, rows: np.ndarray, G: np.ndarray, work: np.ndarray | tuple
    ) -> float:
        """Mean loss over ``rows`` plus ridge at ``W`` (shape :attr:`shape`); its gradient
        into ``G`` (the same shape). No rows: the ridge term's gradient, and 0.0. ``work``
        from :meth:`grad_work`."""
        if rows.size == 0:
            G[:] = self.l2 * W
            return 0.0
        data = self.data
        if self.is_linear:
            return kernels.batch_grad(
                data.kernel_X, data.y, rows, W, *self.kernel_model.linear, G, work
            )
        return kernels.mlp_batch_grad(
            data.kernel_X, data.y, rows, W[0], *self.kernel_model, G[0], work
        )

    def initial_model(self) -> np.ndarray:
        """theta_0 of shape :attr:`shape` (the config's ``model.init``)."""
        return self.network.initial()

    @property
    def n_clients(self) -> int:
        return self.data.n_clients

    @property
    def n_features(self) -> int:
        return self.data.n_features

    @property
    def shape(self) -> tuple[int, int]:
        """Shape of the parameter W the algorithms hold."""
        return self.network.shape

    # ---- scoring models: fedsparse.objective.evaluation ------------------------------------

    def objective(self, W: np.ndarray, margins: np.ndarray | None = None) -> float:
        """The federated training objective sum_i p_i f_i(W) (:meth:`Evaluation.objective`)."""
        return self.evaluation.objective(W, margins)

    def metrics(self, W: np.ndarray) -> dict[str, float | int | None]:
        """Objective plus the metrics this data set supports (:meth:`Evaluation.metrics`)."""
        return self.evaluation.metrics(W)

    def metrics_many(self, Ws: np.ndarray) -> list[dict[str, float | int | None]]:
        """:meth:`metrics` of each model in a stack (:meth:`Evaluation.metrics_many`)."""
        return self.evaluation.metrics_many(Ws)

    def personal_metrics(self, thetas: np.ndarray) -> dict[str, float | None]:
        """Scores of per-client models (:meth:`Evaluation.personal_metrics`)."""
        return self.evaluation.personal_metrics(thetas)

    @property
    def eval_batch(self) -> int:
        """How many models a run should score together (:attr:`Evaluation.eval_batch`)."""
        return self.evaluation.eval_batch

    @property
    def eval_models_per_pass(self) -> int:
        """How many models one :meth:`metrics_many` call scores at most when a cohort's members
        wait together (:attr:`Evaluation.eval_models_per_pass`)."""
        return self.evaluation.eval_models_per_pass
