"""A generated or converted data set on disk: ``.npy`` arrays plus ``meta.json``.

Arrays are memory-mapped on load, so the processes of a sweep share one copy
through the page cache instead of each holding its own.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..atomic import atomic_directory
from ..errors import DataError
from .federated import FederatedData
from .identity import check_built, file_stamps


def save_dataset(
    data: FederatedData,
    path: str | Path,
    config: dict[str, Any] | None = None,
    digest: str | None = None,
    tables: dict[str, Any] | None = None,
) -> None:
    """Write a data set to the folder ``path``, atomically.

    A temporary folder is filled and swapped in (:func:`fedsparse.atomic.atomic_directory`): a
    reader finds the old folder or the complete new one. It holds one ``.npy`` per array (a
    dense matrix also column-major, ``Xt``), the ``tables``, and ``meta.json``.

    Parameters
    ----------
    data
        The federated data set.
    path
        The data folder written.
    config
        The spec it was built from, recorded in ``meta.json``; None: none.
    digest
        The digest of that spec (:mod:`fedsparse.data.identity`), recorded in ``meta.json``
        with every file's stamp (size, time, SHA-256); None: none recorded.
    tables
        File name to DataFrame, each written as CSV beside the arrays (the partition's
        statistics, the embedding); None: none.
    """
    with atomic_directory(path) as tmp:
        arrays = {"y": data.y, "client_ptr": data.client_ptr}
        if data.is_sparse:
            X = data.X.tocsr()
            arrays.update(X_data=X.data, X_indices=X.indices, X_indptr=X.indptr)
        else:
            arrays["X"] = np.ascontiguousarray(data.X)
            arrays["Xt"] = data.columns  # shared column-major copy for fast evaluation
        if data.x_true is not None:
            arrays["x_true"] = data.x_true
        if data.has_test:
            arrays.update(y_test=data.y_test, test_ptr=data.test_ptr)
            if sp.issparse(data.X_test):
                T = data.X_test.tocsr()
                arrays.update(Xtest_data=T.data, Xtest_indices=T.indices, Xtest_indptr=T.indptr)
            else:
                arrays["X_test"] = np.ascontiguousarray(data.X_test)
        for name, arr in arrays.items():
            np.save(tmp / f"{name}.npy", arr)
        for name, table in (tables or {}).items():
            table.to_csv(tmp / name, index=False)
        meta = {
            "name": data.name,
            "task": data.task,
            "n_classes": data.n_classes,
            "shape": list(data.X.shape),
            "sparse": data.is_sparse,
            "test_shape": list(data.X_test.shape) if data.has_test else None,
            "config": config,
            "data_digest": digest,
            "files": file_stamps(tmp),
        }
        (tmp / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")


def load_dataset_dir(
    path: str | Path, digest: str | None = None, dataset: str | None = None
) -> FederatedData:
    """Load a folder written by :func:`save_dataset`.

    The feature matrices (and ``x_true``, ``Xt``) are memory-mapped, so the processes of a
    sweep share one copy through the page cache; labels and client pointers are read into
    memory.

    Parameters
    ----------
    path
        The data folder.
    digest
        The digest of the spec the reader's config names: the folder is first checked to
        hold that spec's data as built (:func:`fedsparse.data.identity.check_built`). None:
        not checked.
    dataset
        The data set's name, for the messages (None: the folder's name).

    Returns
    -------
    FederatedData

    Raises
    ------
    DataError
        The folder is not a built data folder, or fails :func:`check_built`.
    """
    path = Path(path)
    if digest is not None:
        meta = check_built(path, digest, dataset or path.name)
    else:
        try:
            meta = json.loads((path / "meta.json").read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise DataError(f"{path}: not a fedsparse data directory ({exc})") from None

    def arr(name: str) -> np.ndarray:
        return np.asarray(np.load(path / f"{name}.npy", mmap_mode="r"))

    if meta["sparse"]:
        X = sp.csr_matrix(
            (arr("X_data"), arr("X_indices"), arr("X_indptr")), shape=tuple(meta["shape"])
        )
    else:
        X = arr("X")
    x_true = arr("x_true") if (path / "x_true.npy").exists() else None
    Xt = arr("Xt") if (path / "Xt.npy").exists() else None
    X_test = y_test = test_ptr = None
    if meta.get("test_shape"):
        if (path / "Xtest_data.npy").exists():
            X_test = sp.csr_matrix(
                (arr("Xtest_data"), arr("Xtest_indices"), arr("Xtest_indptr")),
                shape=tuple(meta["test_shape"]),
            )
        else:
            X_test = arr("X_test")
        y_test, test_ptr = np.array(arr("y_test")), np.array(arr("test_ptr"))
    return FederatedData(
        name=meta["name"],
        task=meta["task"],
        X=X,
        y=np.array(arr("y")),
        client_ptr=np.array(arr("client_ptr")),
        x_true=x_true,
        n_classes=meta["n_classes"],
        Xt=Xt,
        X_test=X_test,
        y_test=y_test,
        test_ptr=test_ptr,
    )


def load_built(data_root: str | Path, dataset: str, digest: str) -> FederatedData:
    """A data set as built from the spec of ``digest``, checked.

    Parameters
    ----------
    data_root
        The folder of the built data sets.
    dataset
        The data set's name; its build ``<dataset>.<digest>`` is read, else ``<dataset>`` (the
        link to its latest build, or a folder built by hand).
    digest
        The digest of the spec the runs read (:func:`fedsparse.data.identity.run_data_digest`).

    Returns
    -------
    FederatedData
        As :func:`load_dataset_dir` loads it.

    Raises
    ------
    DataError
        One line naming the data set: the folder is missing or does not hold that spec's data
        as built (:func:`fedsparse.data.identity.check_built`).
    """
    from ..layout import dataset_in

    folder = dataset_in(data_root, dataset, digest)
    if not folder.is_dir():
        folder = Path(data_root) / dataset
    return load_dataset_dir(folder, digest, dataset)
