"""A user's own federated data: an svmlight/libsvm file whose ``qid`` names each row's client."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import scipy.sparse as sp

from ..errors import DataError
from .federated import FederatedData


def load_qid_file(
    path: str | Path, task: str, n_features: int | None = None, name: str | None = None
) -> FederatedData:
    """Load an svmlight file as federated data, one client per distinct ``qid``.

    Parameters
    ----------
    path
        The svmlight file; every row has a ``qid:<client>`` field.
    task
        How labels are read (:func:`labels_for_task`): ``regression``, ``binary`` or
        ``multiclass``.
    n_features
        The data set's dimension (None: inferred from the file).
    name
        The data set's name (None: the file's stem).

    Returns
    -------
    FederatedData
        Rows stay sparse (CSR, sorted indices), stacked by client in ascending ``qid`` order
        (the file's row order kept within a client).

    Raises
    ------
    DataError
        Naming the file: missing, not valid svmlight, no rows, a row without a qid, a
        non-finite value or label, or labels that do not fit ``task``.
    """
    from sklearn.datasets import load_svmlight_file  # slow import, only needed here

    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: no such file")
    try:
        X, y, qid = load_svmlight_file(
            str(path), n_features=n_features, query_id=True, dtype=np.float64
        )
    except (ValueError, RuntimeError, UnicodeDecodeError) as exc:
        raise DataError(f"{path}: not a valid svmlight file ({_one_line(exc)})") from None
    if X.shape[0] == 0:
        raise DataError(f"{path}: no rows")
    if qid.shape[0] == 0:
        raise DataError(f"{path}: no qid:<client> field; each row must name its client")
    if qid.shape[0] != X.shape[0]:
        # sklearn returns qids only for the rows that have one, which would
        # misalign rows and clients: refuse instead of guessing.
        raise DataError(
            f"{path}: {X.shape[0] - qid.shape[0]} of {X.shape[0]} rows have no qid:<client> "
            "field; each row must name its client"
        )
    if not np.all(np.isfinite(X.data)) or not np.all(np.isfinite(y)):
        raise DataError(f"{path}: non-finite feature or label value")
    y = labels_for_task(y, task, path)
    order = np.argsort(qid, kind="stable")
    X = sp.csr_matrix(X[order])
    X.sort_indices()
    y = y[order]
    _, counts = np.unique(qid[order], return_counts=True)
    ptr = np.concatenate([[0], np.cumsum(counts)])
    return FederatedData(
        name=name or path.stem,
        task=task,
        X=X,
        y=y,
        client_ptr=ptr,
        n_classes=int(y.max()) + 1 if task == "multiclass" else 0,
    )


def labels_for_task(y: np.ndarray, task: str, path: Path) -> np.ndarray:
    """The labels ``y`` as the loss of ``task`` reads them.

    Parameters
    ----------
    y
        The raw float labels.
    task
        ``binary``: -1/+1 kept, 0/1 mapped to -1/+1; ``multiclass``: integer labels mapped to
        0..c-1 in sorted order; any other task (``regression``): as they are.
    path
        The file they came from, for the messages.

    Returns
    -------
    numpy.ndarray
        The labels, one per row of ``y`` (``y`` itself where they are kept as they are).

    Raises
    ------
    DataError
        Binary labels other than -1/+1 or 0/1, or multiclass labels that are not integers.
    """
    values = np.unique(y)
    if task == "binary":
        if set(values) <= {-1.0, 1.0}:
            return y
        if set(values) <= {0.0, 1.0}:
            return np.where(y > 0, 1.0, -1.0)
        raise DataError(f"{path}: binary labels must be -1/+1 or 0/1, found {values[:5].tolist()}")
    if task == "multiclass":
        if not np.all(values == np.round(values)):
            raise DataError(f"{path}: class labels must be integers")
        return np.searchsorted(values, y).astype(np.float64)
    return y


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())[:200]
