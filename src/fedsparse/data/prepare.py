"""Real data end to end: obtain files (download, verify, convert; cached), then partition them.

``obtain`` turns a normalised ``svmlight`` dataset config into parsed CSR data:

* ``path`` (offline): the local file is parsed (plain, .bz2 or .xz);
* otherwise the file is downloaded from ``url``, or from the registry's LibSVM
  URL (``mirror`` replacing the site's base URL), into the data cache
  ``<cache>/<source>/<file>``; it is renamed into place only once it has been
  decompressed and parsed without error, and converted to ``<file>.csr.npz``,
  which later runs read instead. The first download's SHA-256 and size are
  recorded in ``<file>.json``; a later download or a local copy that differs is
  flagged in the log.

Image sets come from :mod:`fedsparse.data.idx` (``kind: idx``, train and test files)
and :mod:`fedsparse.data.leaf` (``kind: leaf``, each writer a client). ``prepare``
adds the partition and the preprocessing and returns the :class:`FederatedData` a run
uses. A data set with a test file keeps it as the held-out test set (one global group)
unless the partition draws per-client test rows from it (``label_cycle``) or holds out
its own (``test_fraction > 0``: then the test file is not used). With
``partition.test_pool: pooled`` the train and test files are pooled first and the
partition draws both train and test rows from the pool (pFedMe's generator's reading).
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp

from ..errors import DataError
from . import registry
from .convert import Parsed, load_csr, parse_svmlight, save_csr
from .download import Codec, cache_dir, fetch_parsed, read_local
from .federated import FederatedData
from .libsvm import labels_for_task
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


def _where(ds: dict[str, Any], cache: Path) -> tuple[str, Path]:
    """URL to download and its place in the cache."""
    if ds.get("source"):
        entry = registry.get(ds["source"])
        url = entry.url(ds["file"], ds.get("mirror"))
        return url, cache / entry.name / entry.file(ds["file"]).filename
    url = ds["url"]
    name = url.rstrip("/").rsplit("/", 1)[-1] or "data"
    return url, cache / f"url-{hashlib.sha1(url.encode()).hexdigest()[:12]}" / name


def obtain(
    ds: dict[str, Any],
    cache: str | Path | None = None,
    download_options: dict[str, Any] | None = None,
) -> tuple[Parsed, dict[str, Any]]:
    """Parsed CSR data of a normalised svmlight config, and where it came from.

    A local ``path`` is read offline (:func:`fedsparse.data.download.read_local`); otherwise
    the file is downloaded into the data cache and converted once
    (:func:`fedsparse.data.download.fetch_parsed`). ``size`` and ``sha256`` pin the file.

    Parameters
    ----------
    ds
        The normalised ``kind: svmlight`` data set config.
    cache
        The data cache (None: the default, :func:`fedsparse.data.download.cache_dir`).
    download_options
        Options of :func:`fedsparse.data.download.download`; None: its defaults.

    Returns
    -------
    tuple
        The :class:`Parsed` rows and raw labels, and ``{origin, size, sha256}`` of the file.

    Raises
    ------
    DataError
        A file that is missing, fails its pins, does not download, or does not parse.
    """
    opts = {"n_features": ds.get("n_features"), "rows": ds.get("rows")}
    codec = Codec(
        parse=lambda path, name: parse_svmlight(path, display=name, **opts),
        suffix=".csr.npz",
        save=save_csr,
        load=load_csr,
        fits=lambda p: ds.get("n_features") is None or p.X.shape[1] == ds["n_features"],
    )
    cache = cache_dir(cache)
    pins = {"expected_size": ds.get("size"), "expected_sha256": ds.get("sha256")}
    if ds.get("path"):
        recorded = _where({**ds, "mirror": None}, cache)[1] if ds.get("source") else None
        return read_local(Path(ds["path"]).expanduser(), codec, recorded=recorded, **pins)
    url, dest = _where(ds, cache)
    return fetch_parsed(url, dest, codec, download_options=download_options, **pins)


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
        X_train, X_held = preprocess(X_train, X_held, preprocessing)
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
) -> Prepared:
    """The federated data of a normalised svmlight, idx or leaf data set config and partition.

    Parameters
    ----------
    ds
        The normalised data set config (``kind`` svmlight, idx or leaf).
    spec
        The normalised partition; ``"natural"`` only for leaf data (its writers as clients).
    cache
        The data cache (None: the default).
    embedding_sample
        Rows of a t-SNE embedding to compute (0: none).
    download_options
        Options of :func:`fedsparse.data.download.download`; None: its defaults (not used for
        leaf data).

    Returns
    -------
    Prepared
        The data, its partition and embedding, and ``source``: where its files came from.

    Raises
    ------
    DataError
        An svmlight or idx set without a partition spec, or as obtaining or partitioning the
        data raises.
    """
    if ds["kind"] == "leaf":
        return _prepare_leaf(ds, spec, cache, embedding_sample)
    if not isinstance(spec, dict):
        raise DataError(f"{ds['name']}: {ds['kind']} data needs a partition (got {spec!r})")
    if ds["kind"] == "idx":
        from . import idx

        images, source = idx.obtain(ds, cache, download_options)
        out = apply_partition(
            images.X,
            images.y,
            "multiclass",
            ds["name"],
            spec,
            embedding_sample=embedding_sample,
            X_test=images.X_test,
            y_test=images.y_test,
            preprocessing=ds["preprocess"],
        )
        out.source = source
        return out
    parsed, source = obtain(ds, cache, download_options)
    X, y_raw = parsed.X, parsed.y
    del parsed
    y = labels_for_task(y_raw, ds["task"], Path(source["origin"]))
    del y_raw
    out = apply_partition(X, y, ds["task"], ds["name"], spec, embedding_sample=embedding_sample)
    out.source = source
    return out


def _prepare_leaf(
    ds: dict[str, Any], spec: str | dict[str, Any], cache, embedding_sample: int
) -> Prepared:
    """A LEAF folder: its writers as clients (``natural``), or its rows re-partitioned."""
    from .leaf import load_leaf_dir

    leaf = load_leaf_dir(ds["path"], cache)
    source = {"origin": str(Path(ds["path"]).expanduser()), "users": len(leaf.users)}
    if isinstance(spec, dict):
        out = apply_partition(
            leaf.X,
            leaf.y,
            "multiclass",
            ds["name"],
            spec,
            embedding_sample=embedding_sample,
            X_test=leaf.X_test,
            y_test=leaf.y_test,
            preprocessing=ds["preprocess"],
        )
        out.source = source
        return out
    X, X_test = preprocess(leaf.X, leaf.X_test, ds["preprocess"])
    top = max(leaf.y.max(), leaf.y_test.max()) if leaf.y_test.size else leaf.y.max()
    data = FederatedData(
        name=ds["name"],
        task="multiclass",
        X=X,
        y=leaf.y,
        client_ptr=leaf.client_ptr,
        n_classes=int(top) + 1,
        X_test=X_test if leaf.y_test.size else None,
        y_test=leaf.y_test if leaf.y_test.size else None,
        test_ptr=leaf.test_ptr if leaf.y_test.size else None,
    )
    return Prepared(data, source=source)
