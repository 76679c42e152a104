"""A folder in LEAF's JSON format (FEMNIST and the other LEAF benchmarks after preprocessing).

The folder holds ``train/*.json`` and ``test/*.json``; each file is::

    {"users": ["f0001", ...], "num_samples": [n1, ...],
     "user_data": {"f0001": {"x": [[...], ...], "y": [...]}, ...}}

Every writer (user) with training rows is a client, in the order the users appear in
the training files (sorted by name); its test rows are the ones the test files list for
it. Rows are numbers (an image is flattened), labels integers >= 0. The parsed folder is
cached once as ``<cache>/leaf-<hash of the folder>/data.npz``, stamped with the names,
sizes and modification times of its files, so JSON is parsed again only when they change.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..atomic import atomic_write
from ..errors import DataError
from .download import cache_dir, file_lock

log = logging.getLogger("fedsparse.data")


@dataclass
class LeafData:
    """Each user's train rows (stacked, ``client_ptr``) and test rows (``test_ptr``)."""

    users: list[str]
    X: np.ndarray
    y: np.ndarray
    client_ptr: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    test_ptr: np.ndarray


def load_leaf_dir(path: str | Path, cache: str | Path | None = None) -> LeafData:
    """Read the LEAF folder ``path``, converted once into the data cache ``cache`` (default:
    see :func:`fedsparse.data.download.cache_dir`). A malformed file is a one-line
    :class:`DataError` naming it and what is wrong."""
    root = Path(path).expanduser()
    if not root.is_dir():
        raise DataError(f"{root}: no such folder (dataset.path)")
    files = {split: sorted((root / split).glob("*.json")) for split in ("train", "test")}
    for split, found in files.items():
        if not found:
            raise DataError(
                f"{root / split}: no *.json files (a LEAF folder holds train/*.json and "
                "test/*.json)"
            )
    stamp = json.dumps(
        [
            [str(p.relative_to(root)), p.stat().st_size, p.stat().st_mtime_ns]
            for p in files["train"] + files["test"]
        ]
    )
    key = hashlib.sha1(str(root.resolve()).encode()).hexdigest()[:12]
    cached = cache_dir(cache) / f"leaf-{key}" / "data.npz"
    with file_lock(cached):
        data = _load_cached(cached, stamp)
        if data is None:
            data = _parse(files["train"], files["test"])
            _save_cached(data, cached, stamp)
        else:
            log.info("using cached %s (of %s)", cached, root)
    return data


def _parse(train_files: list[Path], test_files: list[Path]) -> LeafData:
    train, d = _read_split(train_files, None)
    for name, (_, y, where) in train.items():
        if y.shape[0] == 0:
            raise DataError(f"{where}: user {name!r} has no training rows")
    test, _ = _read_split(test_files, d)
    for name, (_, _, where) in test.items():
        if name not in train:
            raise DataError(f"{where}: user {name!r} has test rows but no training rows")
    users = list(train)
    none = (np.empty((0, d)), np.empty(0), None)
    tests = [test.get(u, none) for u in users]
    return LeafData(
        users=users,
        X=np.concatenate([train[u][0] for u in users]),
        y=np.concatenate([train[u][1] for u in users]),
        client_ptr=_ptr([train[u][1].shape[0] for u in users]),
        X_test=np.concatenate([t[0] for t in tests]),
        y_test=np.concatenate([t[1] for t in tests]),
        test_ptr=_ptr([t[1].shape[0] for t in tests]),
    )


def _ptr(sizes: list[int]) -> np.ndarray:
    return np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)


def _read_split(
    paths: list[Path], d: int | None
) -> tuple[dict[str, tuple[np.ndarray, np.ndarray, Path]], int]:
    """user -> (rows, labels, file) of one split's files, and the number of features ``d``
    (every row must have ``d`` values; None: the first row's)."""
    out: dict[str, tuple[np.ndarray, np.ndarray, Path]] = {}
    for path in paths:
        users, counts, user_data = _document(path)
        for user, count in zip(users, counts, strict=True):
            if user in out:
                raise DataError(f"{path}: user {user!r} also appears in {out[user][2]}")
            X, y = _user_rows(path, user, user_data.get(user), count)
            if X.shape[0]:
                if d is None:
                    d = X.shape[1]
                elif X.shape[1] != d:
                    raise DataError(
                        f"{path}: user {user!r}: rows of {X.shape[1]} values, earlier rows have {d}"
                    )
            out[user] = (X, y, path)
    if d is None:
        raise DataError(f"{paths[0].parent}: no rows in its files")
    return {u: (X.reshape(X.shape[0], d), y, p) for u, (X, y, p) in out.items()}, d


def _document(path: Path) -> tuple[list[str], list, dict]:
    """The users, num_samples and user_data of one LEAF file, their shapes checked."""
    try:
        doc = json.loads(path.read_bytes())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise DataError(f"{path}: not a valid JSON file ({_one_line(exc)})") from None
    if not isinstance(doc, dict):
        raise DataError(f"{path}: must hold a JSON object with users, num_samples, user_data")
    for key in ("users", "num_samples", "user_data"):
        if key not in doc:
            raise DataError(f"{path}: missing key {key!r}")
    users, counts, user_data = doc["users"], doc["num_samples"], doc["user_data"]
    if not isinstance(users, list) or not all(isinstance(u, str) for u in users):
        raise DataError(f"{path}: 'users' must be a list of names")
    if not isinstance(counts, list) or len(counts) != len(users):
        n = len(counts) if isinstance(counts, list) else "no"
        raise DataError(f"{path}: 'num_samples' has {n} entries, 'users' {len(users)}")
    if not isinstance(user_data, dict):
        raise DataError(f"{path}: 'user_data' must map users to {{x, y}}")
    extra = set(user_data) - set(users)
    if extra:
        raise DataError(f"{path}: 'user_data' holds user {sorted(extra)[0]!r}, not in 'users'")
    return users, counts, user_data


def _user_rows(path: Path, user: str, entry, count) -> tuple[np.ndarray, np.ndarray]:
    where = f"{path}: user {user!r}"
    if not isinstance(entry, dict) or "x" not in entry or "y" not in entry:
        raise DataError(f"{where}: 'user_data' needs an entry {{x: [...], y: [...]}}")
    x, y = entry["x"], entry["y"]
    if not isinstance(x, list) or not isinstance(y, list):
        raise DataError(f"{where}: 'x' and 'y' must be lists")
    if len(x) != len(y):
        raise DataError(f"{where}: 'x' has {len(x)} rows, 'y' {len(y)} labels")
    if isinstance(count, bool) or not isinstance(count, int) or count != len(y):
        raise DataError(f"{where}: 'num_samples' says {count!r}, 'x' has {len(x)} rows")
    try:
        X = np.asarray(x, dtype=np.float64)
        labels = np.asarray(y, dtype=np.float64)
    except (ValueError, TypeError) as exc:
        raise DataError(
            f"{where}: rows must be lists of numbers of one length ({_one_line(exc)})"
        ) from None
    if X.ndim < 2 and len(x):
        raise DataError(f"{where}: each row of 'x' must be a list of numbers")
    X = X.reshape(len(x), -1) if len(x) else np.empty((0, 0))
    if not np.all(np.isfinite(X)):
        raise DataError(f"{where}: non-finite value in 'x'")
    if labels.ndim != 1 or not np.all(labels == np.round(labels)) or np.any(labels < 0):
        raise DataError(f"{where}: labels in 'y' must be integers >= 0")
    return X, labels


def _load_cached(path: Path, stamp: str) -> LeafData | None:
    try:
        with np.load(path, allow_pickle=False) as z:
            if str(z["stamp"]) != stamp:
                return None
            return LeafData(
                users=[str(u) for u in z["users"]],
                **{k: z[k] for k in ("X", "y", "client_ptr", "X_test", "y_test", "test_ptr")},
            )
    except (OSError, KeyError, ValueError):
        return None


def _save_cached(data: LeafData, path: Path, stamp: str) -> None:
    with atomic_write(path) as fh:
        np.savez(
            fh,
            stamp=np.array(stamp),
            users=np.array(data.users),
            X=data.X,
            y=data.y,
            client_ptr=data.client_ptr,
            X_test=data.X_test,
            y_test=data.y_test,
            test_ptr=data.test_ptr,
        )


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())[:200]
