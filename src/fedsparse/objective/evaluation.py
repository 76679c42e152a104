"""Scoring models on federated data: the objective f(W) = sum_i p_i f_i(W), the data loss,
accuracies and support recovery of a trace row, for one model, a stack of models or per-client
(personalised) models.

Linear models without intercept keep their fast paths (evaluation from the model's
support columns, several models in one pass); every other model (an MLP, a cnn, or a
linear model with intercept) is scored by the blocked forward kernels of ``kernels.network``
(which run an MLP by ``kernels.mlp``, a cnn's layer table by ``kernels.cnn``),
which also score per-client (personalised) models on each client's own rows.
"""

from __future__ import annotations

import numpy as np

from .. import kernels
from ..data import FederatedData
from ..work import models_scored_together
from .model import Network

EVAL_BLOCK = 256  # rows per forward block: a 256 x width activation stays in cache


class Evaluation:
    """The scores of models of ``network`` on ``data``: what a
    :class:`~fedsparse.objective.problem.Problem` reports of a model (it holds one as
    ``Problem.evaluation``). Models are arguments, never state: the only state is a margins buffer
    reused from call to call.

    Parameters
    ----------
    data : FederatedData
    loss : {"least_squares", "logistic", "softmax"}
        Accuracies are scored for the classification losses.
    network : Network
        The model's structure; W has its ``shape``.
    kernel_model : KernelModel
        The model and loss as the kernels take them
        (:class:`fedsparse.objective.problem.KernelModel`): the layer sizes, activation and loss
        codes, and the ridge weight ``l2``.
    p : array, shape (n_clients,)
        The client weights p_i.
    """

    def __init__(
        self, data: FederatedData, loss: str, network: Network, kernel_model: tuple, p: np.ndarray
    ):
        self.data = data
        self.loss = loss
        self.network = network
        self.kernel_model = kernel_model
        self.p = p
        self.n_outputs = network.sizes[-1]
        self.true_support = None if data.x_true is None else np.flatnonzero(data.x_true)
        self._in_true_support = None if data.x_true is None else data.x_true != 0
        self._margins: np.ndarray | None = None

    @property
    def is_linear(self) -> bool:
        """A linear model without intercept, scored per class row from its support columns."""
        return self.network.fast_linear

    @property
    def l2(self) -> float:
        """The ridge weight (every client's loss adds ``l2/2 * ||W||^2``)."""
        return self.kernel_model.l2

    @property
    def loss_code(self) -> int:
        return self.kernel_model.loss_code

    @property
    def eval_batch(self) -> int:
        """How many models a run should score together with :meth:`metrics_many`.

        Dense data: up to 16, while their margins and copies stay within 32 MB each.
        Sparse data: 1, as each model reads its own CSC columns (nothing is shared).
        Other models than the fast linear one: 1 (a forward pass each).
        """
        d = self.data
        batched = self.is_linear and not d.is_sparse
        return models_scored_together(self.n_outputs, d.n_samples, d.n_features, batched)

    @property
    def eval_models_per_pass(self) -> int:
        """How many models one :meth:`metrics_many` call scores at most when a cohort's members
        wait together (their :attr:`eval_batch` rounds each): four batches' margins, within
        128 MB on dense data (each model's metrics are the same in any pass)."""
        return 4 * self.eval_batch

    def margins_many(self, Ws: np.ndarray) -> np.ndarray:
        """``Ws X^T`` for a stack of models, shape (n_models, n_outputs, n_samples).

        Only the models' support columns are read (dense data: once for all models).
        The returned buffer is reused by the next call.
        """
        d = self.data
        Ws = np.ascontiguousarray(Ws, dtype=np.float64)
        n_models = Ws.shape[0]
        if self._margins is None or self._margins.shape[0] < n_models:
            self._margins = np.empty((n_models, self.n_outputs, d.n_samples))
        M = self._margins[:n_models]
        if d.is_sparse:
            kernels.margins_csc(d.kernel_csc, Ws, M)
        else:
            kernels.margins_columns(d.columns, d.column_checks, Ws, M)
        return M

    def margins(self, W: np.ndarray) -> np.ndarray:
        """``W X^T``, shape (n_outputs, n_samples); the buffer is reused by the next call."""
        return self.margins_many(W[None])[0]

    def client_objectives(self, W: np.ndarray, margins: np.ndarray | None = None) -> np.ndarray:
        """Every client's mean loss f_i(W), the l2 term included."""
        if not self.is_linear:
            loss_sum, _ = self._forward(self.data, W.reshape(1, -1), self.data.client_ptr)
            return loss_sum / self.data.client_sizes + self._ridge(W)
        M = self.margins(W) if margins is None else margins
        d = self.data
        return kernels.client_losses_from_margins(M, d.y, d.client_ptr, self.loss_code, W, self.l2)

    def objective(self, W: np.ndarray, margins: np.ndarray | None = None) -> float:
        """The federated training objective sum_i p_i f_i(W)."""
        return float(kernels.weighted_sum(self.client_objectives(W, margins), self.p))

    def test_accuracy(self, W: np.ndarray) -> float:
        """Accuracy of W on the data set's held-out test rows (classification)."""
        d = self.data
        if not self.is_linear:
            one = np.zeros(2, np.int64)
            one[1] = d.y_test.shape[0]
            _, correct = self._forward(d, W.reshape(1, -1), one, test=True)
            return int(correct.sum()) / d.y_test.shape[0]
        Mt = np.ascontiguousarray(np.asarray(d.X_test @ W.T).T)  # (n_outputs, n_test)
        return kernels.correct_from_margins(Mt, d.y_test, self.loss_code) / d.y_test.shape[0]

    def metrics(self, W: np.ndarray) -> dict[str, float | int | None]:
        """Objective plus the metrics this data set supports (see the trace schema)."""
        return self.metrics_many(W[None])[0]

    def metrics_many(self, Ws: np.ndarray) -> list[dict[str, float | int | None]]:
        """:meth:`metrics` of each model in a stack ``Ws`` (n_models, *shape), the same
        values as one at a time; fast linear models share one pass over the data."""
        if not self.is_linear:
            return [self._network_metrics(W) for W in Ws]
        M = self.margins_many(Ws)
        return [self._metrics_from(Ws[q], M[q]) for q in range(Ws.shape[0])]

    def personal_metrics(self, thetas: np.ndarray) -> dict[str, float | None]:
        """Scores of per-client models ``thetas`` (n_clients, *shape), each client's model on
        its own rows: ``pm_objective`` (sum_i p_i f_i(theta_i), l2 included), and
        ``pm_train_accuracy``/``pm_test_accuracy`` (total correct over total rows; the
        test one only where the test rows belong to clients)."""
        d = self.data
        flat = np.ascontiguousarray(thetas.reshape(self.data.n_clients, -1))
        which = np.arange(self.data.n_clients, dtype=np.int64)
        loss_sum, correct = self._forward(d, flat, d.client_ptr, which=which)
        ridge = 0.5 * self.l2 * np.einsum("ij,ij->i", flat, flat)
        per_client = loss_sum / d.client_sizes + ridge
        out: dict[str, float | None] = {
            "pm_objective": float(kernels.weighted_sum(per_client, self.p)),
            "pm_train_accuracy": None,
            "pm_test_accuracy": None,
        }
        if self.loss in ("logistic", "softmax"):
            out["pm_train_accuracy"] = int(correct.sum()) / d.n_samples
            if d.has_test and d.test_ptr.shape[0] == self.data.n_clients + 1:
                _, correct = self._forward(d, flat, d.test_ptr, which=which, test=True)
                out["pm_test_accuracy"] = int(correct.sum()) / d.y_test.shape[0]
        return out

    def _ridge(self, W: np.ndarray) -> float:
        w = W.reshape(-1)
        return 0.5 * self.l2 * float(w @ w)

    def _forward(
        self,
        d: FederatedData,
        thetas: np.ndarray,
        ptr: np.ndarray,
        which: np.ndarray | None = None,
        test: bool = False,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Per-group data-loss sums and correct counts of the rows grouped by ``ptr``, group
        g scored with ``thetas[which[g]]`` (default: model 0 for all)."""
        groups = ptr.shape[0] - 1
        if which is None:
            which = np.zeros(groups, np.int64)
        X = d.kernel_X_test if test else d.kernel_X
        y = d.y_test if test else d.y
        loss_sum = np.empty(groups)
        correct = np.empty(groups, np.int64)
        kernels.mlp_eval(
            X,
            y,
            ptr,
            np.ascontiguousarray(thetas, dtype=np.float64),
            which,
            self.kernel_model.sizes,
            self.network.bias,
            self.kernel_model.activation_code,
            self.loss_code,
            EVAL_BLOCK,
            loss_sum,
            correct,
        )
        return loss_sum, correct

    def _network_metrics(self, W: np.ndarray) -> dict[str, float | int | None]:
        d = self.data
        loss_sum, correct = self._forward(d, W.reshape(1, -1), d.client_ptr)
        data_loss = loss_sum / d.client_sizes
        with np.errstate(over="ignore", invalid="ignore"):
            out: dict[str, float | int | None] = {
                "objective": float(kernels.weighted_sum(data_loss + self._ridge(W), self.p)),
                "train_loss": float(kernels.weighted_sum(data_loss, self.p)),
                "nnz": int(np.count_nonzero(W)),
            }
        if self.loss in ("logistic", "softmax"):
            out["train_accuracy"] = int(correct.sum()) / d.n_samples
            if d.has_test:
                out["test_accuracy"] = self.test_accuracy(W)
        return out

    def _metrics_from(self, W: np.ndarray, M: np.ndarray) -> dict[str, float | int | None]:
        d = self.data
        # the per-sample losses once (a logistic one is an exp and a log1p, the most costly
        # part of a dense evaluation): the objective adds the ridge term to the same client
        # losses, the bits of client_losses_from_margins with l2
        data_loss = kernels.client_losses_from_margins(M, d.y, d.client_ptr, self.loss_code, W, 0.0)
        if self.l2 == 0.0:
            objectives = data_loss
        else:
            objectives = data_loss + kernels.ridge_term(W, self.l2)
        out: dict[str, float | int | None] = {
            "objective": float(kernels.weighted_sum(objectives, self.p)),
            "train_loss": float(kernels.weighted_sum(data_loss, self.p)),
            "nnz": int(np.count_nonzero(W)),
        }
        if self.loss in ("logistic", "softmax"):
            correct = kernels.correct_from_margins(M, self.data.y, self.loss_code)
            out["train_accuracy"] = correct / self.data.n_samples
            if self.data.has_test:
                out["test_accuracy"] = self.test_accuracy(W)
        if self.true_support is not None and self.n_outputs == 1:
            with np.errstate(over="ignore"):  # a diverging model's distance is inf, not a warning
                out["dist_to_truth"] = float(np.linalg.norm(W[0] - self.data.x_true))
            if not np.all(np.isfinite(W[0])):
                # A diverged model has no support: H_tau keeps NaNs at the lowest
                # indices, which would otherwise score as a perfect recovery.
                out["support_precision"] = None
                out["support_recall"] = None
                return out
            found = np.flatnonzero(W[0])
            hits = int(np.count_nonzero(self._in_true_support[found]))  # ~30x intersect1d
            out["support_precision"] = hits / found.size if found.size else None
            out["support_recall"] = hits / self.true_support.size
        return out
