"""Real data end to end: obtain a file (download, verify, convert; cached), then partition it.

``obtain`` turns a normalised ``svmlight`` dataset config into parsed CSR data:

* ``path`` (offline): the local file is parsed (plain, .bz2 or .xz);
* otherwise the file is downloaded from ``url``, or from the registry's LibSVM
  URL (``mirror`` replacing the site's base URL), into the data cache
  ``<cache>/<source>/<file>``; it is renamed into place only once it has been
  decompressed and parsed without error, and converted to ``<file>.csr.npz``,
  which later runs read instead. The first download's SHA-256 and size are
  recorded in ``<file>.json``; a later download or a local copy that differs is
  flagged in the log.

``prepare`` adds the partition and returns the :class:`FederatedData` a run uses.
"""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..errors import DataError
from . import registry
from .convert import Parsed, load_csr, parse_svmlight, save_csr
from .download import cache_dir, fetch, file_lock, read_record, sha256_of
from .federated import FederatedData
from .libsvm import _labels
from .partition import PartitionResult, embedding, partition

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
    """Parsed CSR data of the normalised svmlight config ``ds`` and where it came from."""
    opts = {"n_features": ds.get("n_features"), "rows": ds.get("rows")}
    cache = cache_dir(cache)
    if ds.get("path"):
        path = Path(ds["path"]).expanduser()
        if not path.is_file():
            raise DataError(f"{path}: no such file (dataset.path)")
        size, sha = path.stat().st_size, sha256_of(path)
        _check_pins(ds, str(path), size, sha)
        if ds.get("source"):
            _, dest = _where({**ds, "mirror": None}, cache)
            rec = read_record(dest)
            if rec and rec.get("sha256") != sha:
                log.warning(
                    "%s: local copy (sha256 %s) differs from the recorded download of %s "
                    "(sha256 %s)",
                    path,
                    sha[:16],
                    rec.get("url"),
                    str(rec.get("sha256"))[:16],
                )
        log.info("reading local file %s (%d bytes, sha256 %s)", path, size, sha)
        parsed = parse_svmlight(path, **opts)
        return parsed, {"origin": str(path), "size": size, "sha256": sha}
    url, dest = _where(ds, cache)
    converted = dest.with_name(dest.name + ".csr.npz")
    with file_lock(dest):
        if dest.is_file() and converted.is_file():
            parsed = load_csr(converted)
            if ds.get("n_features") is None or parsed.X.shape[1] == ds["n_features"]:
                rec = read_record(dest) or {}
                log.info("using cached %s", converted)
                return parsed, {"origin": url, "size": rec.get("size"), "sha256": rec.get("sha256")}
        if dest.is_file():  # downloaded earlier, not (or differently) converted
            parsed = parse_svmlight(dest, display=str(dest), **opts)
            save_csr(parsed, converted)
            rec = read_record(dest) or {}
            return parsed, {"origin": url, "size": rec.get("size"), "sha256": rec.get("sha256")}
        holder: dict[str, Parsed] = {}

        def verify(part: Path) -> None:
            holder["parsed"] = parse_svmlight(part, display=url, **opts)

        fetch(
            url,
            dest,
            verify=verify,
            expected_size=ds.get("size"),
            expected_sha256=ds.get("sha256"),
            **(download_options or {}),
        )
        parsed = holder["parsed"]
        save_csr(parsed, converted)
        rec = read_record(dest) or {}
        return parsed, {"origin": url, "size": rec.get("size"), "sha256": rec.get("sha256")}


def _check_pins(ds: dict[str, Any], where: str, size: int, sha: str) -> None:
    if ds.get("size") is not None and size != ds["size"]:
        raise DataError(f"{where}: size mismatch: expected {ds['size']} bytes, got {size}")
    if ds.get("sha256") is not None and sha != ds["sha256"]:
        raise DataError(f"{where}: SHA-256 mismatch: expected {ds['sha256']}, got {sha}")


def apply_partition(
    X,
    y: np.ndarray,
    task: str,
    name: str,
    spec: dict[str, Any],
    x_true: np.ndarray | None = None,
    embedding_sample: int = 0,
) -> Prepared:
    """Partition rows ``(X, y)`` and stack them by client (the test split kept apart)."""
    n_classes = int(y.max()) + 1 if task == "multiclass" else 0
    result = partition(X, y, task, spec)
    emb = None
    if embedding_sample > 0:
        client_of_row = np.full(y.shape[0], -1, dtype=np.int64)
        for i, rows in enumerate(result.clients):
            client_of_row[rows] = i
        groups = result.clusters if result.clusters is not None else result.groups
        emb = embedding(X, groups, client_of_row, embedding_sample, spec.get("seed", 0))
    order = result.order
    test = result.test_order
    data = FederatedData(
        name=name,
        task=task,
        X=X[order],
        y=y[order],
        client_ptr=result.client_ptr,
        x_true=x_true,
        n_classes=n_classes,
        X_test=X[test] if test.size else None,
        y_test=y[test] if test.size else None,
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
    """The federated data of a normalised svmlight dataset config and partition."""
    if not isinstance(spec, dict):
        raise DataError(f"{ds['name']}: svmlight data needs a partition (got {spec!r})")
    parsed, source = obtain(ds, cache, download_options)
    X, y_raw = parsed.X, parsed.y
    del parsed
    y = _labels(y_raw, ds["task"], Path(source["origin"]))
    del y_raw
    out = apply_partition(X, y, ds["task"], ds["name"], spec, embedding_sample=embedding_sample)
    out.source = source
    return out
