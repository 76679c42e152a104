"""Real data end to end: a data set's rows read from its files, then partitioned.

Each data-set kind read from files says how its rows are read (:mod:`fedsparse.data.kinds`:
:mod:`fedsparse.data.svmlight` downloads, verifies, converts and caches plain svmlight
files). Image sets come from :mod:`fedsparse.data.idx` (``kind: idx``, train and test files)
and :mod:`fedsparse.data.leaf` (``kind: leaf``, each writer a client). ``prepare``
adds the partition and the preprocessing and returns the :class:`FederatedData` a run
uses. A data set with a test file keeps it as the held-out test set (one global group)
unless the partition draws per-client test rows from it (``label_cycle``) or holds out
its own (``test_fraction > 0``: then the test file is not used). With
``partition.test_pool: pooled`` the train and test files are pooled first and the
partition draws both train and test rows from the pool (pFedMe's generator's reading).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp

from ..errors import DataError
from .federated import FederatedData
from .kinds import Rows, kind_of
from .partition import PartitionResult, embedding, partition
from .preprocess import preprocess

if TYPE_CHECKING:  # pandas only for the partition's statistics, which a run never reads
    import pandas as pd

log = logging.getLogger("fedsparse.data")


@dataclass
class Prepared:
    data: FederatedData
    partition: PartitionResult | None = None
    embedding: pd.DataFrame | None = None
    source: dict[str, Any] = field(default_factory=dict)


def apply_partition(
    X,
    y: np.ndarray,
    task: str,
    name: str,
    spec: dict[str, Any],
    x_true: np.ndarray | None = None,
    embedding_sample: int = 0,
    *,
    X_test=None,
    y_test: np.ndarray | None = None,
    preprocessing: dict[str, Any] | None = None,
    dtype: type = np.float64,
) -> Prepared:
    """Partition rows ``(X, y)`` into clients and stack them by client, the test split kept apart.

    Parameters
    ----------
    X
        The rows' features (dense or CSR).
    y
        The labels, one per row, as the loss reads them (:func:`labels_for_task`).
    task
        ``regression``, ``binary`` or ``multiclass`` (classes: the largest label + 1).
    name
        The data set's name.
    spec
        The normalised partition. ``test_pool: pooled``: the test file is appended to the
        training rows first, and the partition's row indices count in that pool.
    x_true
        The generating model of synthetic data, kept with it; None: none.
    embedding_sample
        Rows of a t-SNE embedding to compute (0: none).
    X_test
        The data set's own test file's features, if it has one. ``label_cycle`` draws each
        client's test rows from it; any other partition keeps it whole as the global test set,
        unless it holds out its own rows (``test_fraction > 0``).
    y_test
        The test file's labels (with ``X_test``).
    preprocessing
        ``{scale, standardize}`` applied to the selected rows (:func:`preprocess`), its
        statistics taken from the training rows; None: none.
    dtype
        The preprocessed rows' dtype (float32 for a float32 network; :func:`preprocess`).

    Returns
    -------
    Prepared
        The data (rows stacked by client, each client's rows in ascending row order), the
        :class:`PartitionResult` and the embedding (or None).

    Raises
    ------
    DataError
        As :func:`fedsparse.data.partition.partition` raises.
    """
    if spec.get("test_pool") == "pooled" and X_test is not None:
        X = sp.vstack([X, X_test], format="csr") if sp.issparse(X) else np.concatenate([X, X_test])
        y = np.concatenate([y, y_test])
        X_test = y_test = None
    separate = X_test is not None
    top = max(y.max(), y_test.max()) if separate and y_test.size else y.max()
    n_classes = int(top) + 1 if task == "multiclass" else 0
    cycle = spec["kind"] == "label_cycle"
    result = partition(X, y, task, spec, y_test=y_test if cycle and separate else None)
    test_X, test_y = X, y
    if separate and (cycle or not spec.get("test_fraction")):
        test_X, test_y = X_test, y_test
        if not cycle:
            result.test = [np.arange(y_test.shape[0], dtype=np.int64)]
    emb = None
    if embedding_sample > 0:
        client_of_row = np.full(y.shape[0], -1, dtype=np.int64)
        for i, rows in enumerate(result.clients):
            client_of_row[rows] = i
        groups = result.clusters if result.clusters is not None else result.groups
        rows = result.order if cycle else slice(None)  # label_cycle leaves rows unused
        emb = embedding(
            X[rows], groups[rows], client_of_row[rows], embedding_sample, spec.get("seed", 0)
        )
    order = result.order
    test = result.test_order
    X_train, X_held = X[order], test_X[test] if test.size else None
    if preprocessing is not None:
        X_train, X_held = preprocess(X_train, X_held, preprocessing, dtype)
    data = FederatedData(
        name=name,
        task=task,
        X=X_train,
        y=y[order],
        client_ptr=result.client_ptr,
        x_true=x_true,
        n_classes=n_classes,
        X_test=X_held,
        y_test=test_y[test] if test.size else None,
        test_ptr=result.test_ptr if test.size else None,
    )
    return Prepared(data, result, emb)


def prepare(
    ds: dict[str, Any],
    spec: str | dict[str, Any],
    cache: str | Path | None = None,
    embedding_sample: int = 0,
    download_options: dict[str, Any] | None = None,
    dtype: type = np.float64,
) -> Prepared:
    """The federated data of a normalised data set config read from files (a kind whose
    ``prepared`` is true: svmlight, idx, leaf) and its partition.

    Parameters
    ----------
    ds
        The normalised data set config; its kind reads the rows (:mod:`fedsparse.data.kinds`).
    spec
        The normalised partition; ``"natural"`` only for a kind with its own clients (leaf:
        its writers as clients).
    cache
        The data cache (None: the default).
    embedding_sample
        Rows of a t-SNE embedding to compute (0: none).
    download_options
        Options of :func:`fedsparse.data.download.download`; None: its defaults (not used for
        leaf data).
    dtype
        The dtype of preprocessed image rows (float32 for a float32 network; others stay
        as read).

    Returns
    -------
    Prepared
        The data, its partition and embedding, and ``source``: where its files came from.

    Raises
    ------
    DataError
        A kind without clients of its own (svmlight, idx) without a partition spec, or as
        obtaining or partitioning the data raises.
    """
    kind = kind_of(ds)
    if not isinstance(spec, dict) and not kind.own_clients:
        raise DataError(f"{ds['name']}: {ds['kind']} data needs a partition (got {spec!r})")
    rows = kind.read(ds, cache, download_options)
    if isinstance(spec, dict):
        out = apply_partition(
            rows.X,
            rows.y,
            rows.task,
            ds["name"],
            spec,
            embedding_sample=embedding_sample,
            X_test=rows.X_test,
            y_test=rows.y_test,
            preprocessing=rows.preprocessing,
            dtype=dtype,
        )
        out.source = rows.source
        return out
    return Prepared(_own_clients(ds["name"], rows, dtype), source=rows.source)


def _own_clients(name: str, rows: Rows, dtype: type) -> FederatedData:
    """The rows of a data set with its own clients (``client_ptr``, ``test_ptr``), each
    client's rows together, preprocessed."""
    X, X_test = preprocess(rows.X, rows.X_test, rows.preprocessing, dtype)
    tested = rows.y_test is not None and rows.y_test.size > 0
    top = max(rows.y.max(), rows.y_test.max()) if tested else rows.y.max()
    return FederatedData(
        name=name,
        task=rows.task,
        X=X,
        y=rows.y,
        client_ptr=rows.client_ptr,
        n_classes=int(top) + 1,
        X_test=X_test if tested else None,
        y_test=rows.y_test if tested else None,
        test_ptr=rows.test_ptr if tested else None,
    )
