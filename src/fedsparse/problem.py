"""A loss bound to federated data: the objective f(W) = sum_i p_i f_i(W) and metrics."""

from __future__ import annotations

import numpy as np

from . import kernels as K
from .data import FederatedData
from .errors import ConfigError

LOSS_TASKS = {"least_squares": "regression", "logistic": "binary", "softmax": "multiclass"}
DEFAULT_L2 = {"least_squares": 0.0, "logistic": 1e-4, "softmax": 1e-4}


class Problem:
    """Federated objective of ``loss`` on ``data``; the parameter is W, shape (n_outputs, d).

    Parameters
    ----------
    data : FederatedData
    loss : {"least_squares", "logistic", "softmax"}
    l2 : float
        Ridge weight; every client's loss adds ``l2/2 * ||W||^2``.
    weights : {"uniform", "samples"}
        Client weights p_i: ``1/N`` (the papers' choice) or ``n_i / n``.
    """

    def __init__(self, data: FederatedData, loss: str, l2: float, weights: str = "uniform"):
        if LOSS_TASKS[loss] != data.task and not (loss == "least_squares"):
            raise ConfigError(
                f"model.loss: {loss} needs {LOSS_TASKS[loss]} data, "
                f"but dataset {data.name} is {data.task}"
            )
        self.data = data
        self.loss = loss
        self.loss_code = K.LOSS_CODES[loss]
        self.l2 = float(l2)
        self.weights = weights
        sizes = data.client_sizes.astype(np.float64)
        self.p = (
            np.full(data.n_clients, 1.0 / data.n_clients)
            if weights == "uniform"
            else (sizes / sizes.sum())
        )
        self.n_outputs = max(data.n_classes, 2) if loss == "softmax" else 1
        self.true_support = None if data.x_true is None else np.flatnonzero(data.x_true)
        self._in_true_support = None if data.x_true is None else data.x_true != 0
        self._margins: np.ndarray | None = None

    @property
    def n_clients(self) -> int:
        return self.data.n_clients

    @property
    def n_features(self) -> int:
        return self.data.n_features

    @property
    def shape(self) -> tuple[int, int]:
        """Shape of the parameter W."""
        return (self.n_outputs, self.n_features)

    @property
    def eval_batch(self) -> int:
        """How many models a run should score together with :meth:`metrics_many`.

        Dense data: up to 16, while their margins and copies stay within 32 MB each.
        Sparse data: 1, as each model reads its own CSC columns (nothing is shared).
        """
        if self.data.is_sparse:
            return 1
        per_model = self.n_outputs * max(self.data.n_samples, self.n_features) * 8
        return max(1, min(16, (32 << 20) // per_model))

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
            K.margins_csc(d.kernel_csc, Ws, M)
        else:
            K.margins_columns(d.columns, Ws, M)
        return M

    def margins(self, W: np.ndarray) -> np.ndarray:
        """``W X^T``, shape (n_outputs, n_samples); the buffer is reused by the next call."""
        return self.margins_many(W[None])[0]

    def client_objectives(self, W: np.ndarray, margins: np.ndarray | None = None) -> np.ndarray:
        """Every client's mean loss f_i(W)."""
        M = self.margins(W) if margins is None else margins
        d = self.data
        return K.client_losses_from_margins(M, d.y, d.client_ptr, self.loss_code, W, self.l2)

    def objective(self, W: np.ndarray, margins: np.ndarray | None = None) -> float:
        """The federated training objective sum_i p_i f_i(W)."""
        return float(K.weighted_sum(self.client_objectives(W, margins), self.p))

    def test_accuracy(self, W: np.ndarray) -> float:
        """Accuracy of W on the data set's held-out test rows (classification)."""
        d = self.data
        Mt = np.ascontiguousarray(np.asarray(d.X_test @ W.T).T)  # (n_outputs, n_test)
        return K.correct_from_margins(Mt, d.y_test, self.loss_code) / d.y_test.shape[0]

    def metrics(self, W: np.ndarray) -> dict[str, float | int | None]:
        """Objective plus the metrics this data set supports (see the trace schema)."""
        return self.metrics_many(W[None])[0]

    def metrics_many(self, Ws: np.ndarray) -> list[dict[str, float | int | None]]:
        """:meth:`metrics` of each model in a stack ``Ws`` (n_models, n_outputs, n_features),
        the same values as one at a time, with one pass over the data for all of them."""
        M = self.margins_many(Ws)
        return [self._metrics_from(Ws[q], M[q]) for q in range(Ws.shape[0])]

    def _metrics_from(self, W: np.ndarray, M: np.ndarray) -> dict[str, float | int | None]:
        out: dict[str, float | int | None] = {
            "objective": self.objective(W, M),
            "nnz": int(np.count_nonzero(W)),
        }
        if self.loss in ("logistic", "softmax"):
            correct = K.correct_from_margins(M, self.data.y, self.loss_code)
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
