"""Parse an svmlight/LibSVM file once into a compact CSR ``.npz``, never densifying.

The file (plain, ``.bz2`` or ``.xz``, recognised by its first bytes) is
decompressed as a stream and parsed in blocks of whole lines: each block is
checked and converted with a few vectorised NumPy calls, and only blocks that
fail a check are re-read line by line to name the offending ``file:line``.
Peak memory is about twice the CSR arrays (the blocks' arrays, then their
concatenation) plus one block of text.
"""

from __future__ import annotations

import bz2
import logging
import lzma
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from ..atomic import atomic_write
from ..errors import DataError

log = logging.getLogger("fedsparse.data")

BLOCK = 1 << 21  # bytes of text per parsed block
# the first character of a token that is not "<index>:<value>" (a search keeps no
# per-token state, unlike a fullmatch of a repeated group, so memory stays flat)
_BAD_TOKEN = re.compile(rb"(?<!\S)(?![0-9]+:[^\s:]+(?!\S))\S")


@dataclass
class Parsed:
    """A parsed svmlight file: CSR features, raw float labels, and each row's line number."""

    X: sp.csr_matrix
    y: np.ndarray

    @property
    def nbytes(self) -> int:
        return self.X.data.nbytes + self.X.indices.nbytes + self.X.indptr.nbytes + self.y.nbytes


def open_text(path: str | Path):
    """``path`` opened for binary reading, decompressing .bz2/.xz by their magic bytes."""
    path = Path(path)
    with open(path, "rb") as fh:
        magic = fh.read(6)
    if magic.startswith(b"BZh"):
        return bz2.open(path, "rb")
    if magic.startswith(b"\xfd7zXZ\x00"):
        return lzma.open(path, "rb")
    return open(path, "rb")


def parse_svmlight(
    path: str | Path,
    *,
    n_features: int | None = None,
    rows: int | None = None,
    display: str | None = None,
    zero_based: bool = False,
    block_size: int = BLOCK,
) -> Parsed:
    """Parse an svmlight/LibSVM file into CSR, never densifying.

    Parameters
    ----------
    path
        The file: plain, ``.bz2`` or ``.xz`` (recognised by its first bytes).
    n_features
        The data set's dimension: an index above it is an error, and the matrix has this many
        columns even if the file never uses the last ones. None: the largest index found.
    rows
        The expected number of rows (another count is an error); None: any.
    display
        How error messages name the file (None: its path).
    zero_based
        Indices count from 0; default from 1, as on the LibSVM site.
    block_size
        Bytes of text parsed at a time (peak memory is about twice the CSR arrays plus one
        block).

    Returns
    -------
    Parsed
        ``X``: float64 values, int32 column indices (strictly increasing within each row, as
        the file must have them), at least one column; ``y``: the raw float labels.

    Raises
    ------
    DataError
        One line naming ``display`` (and, for a malformed line, its line number): no such
        file, a truncated or corrupt archive, no rows, another row count than ``rows``, a
        malformed token, a non-finite label or value, an index out of range or not increasing.
    """
    path = Path(path)
    name = display or str(path)
    base = 0 if zero_based else 1
    labels: list[np.ndarray] = []
    counts: list[np.ndarray] = []
    indices: list[np.ndarray] = []
    values: list[np.ndarray] = []
    line0 = 1  # number of the first line of the current block
    max_index = -1
    try:
        with open_text(path) as fh:
            carry = b""
            while True:
                chunk = fh.read(block_size)
                text = carry + chunk
                if not chunk:
                    carry = b""
                    if not text:
                        break
                else:
                    cut = text.rfind(b"\n") + 1
                    if cut == 0:  # a line longer than a block: read on
                        carry = text
                        continue
                    text, carry = text[:cut], text[cut:]
                lab, cnt, idx, val, nlines = _parse_block(text, line0, name, base, n_features)
                if idx.size:
                    max_index = max(max_index, int(idx.max()))
                labels.append(lab)
                counts.append(cnt)
                indices.append(idx)
                values.append(val)
                line0 += nlines
                if not chunk:
                    break
    except EOFError:
        raise DataError(
            f"{name}: truncated archive (the compressed stream ends before its end marker)"
        ) from None
    except (OSError, lzma.LZMAError) as exc:
        if isinstance(exc, FileNotFoundError):
            raise DataError(f"{name}: no such file") from None
        raise DataError(f"{name}: corrupt or unreadable file ({_one_line(exc)})") from None
    y = np.concatenate(labels) if labels else np.empty(0)
    n_rows = y.shape[0]
    if n_rows == 0:
        raise DataError(f"{name}: no rows")
    if rows is not None and n_rows != rows:
        raise DataError(f"{name}: {n_rows} rows, expected {rows} (incomplete or wrong file?)")
    d = n_features if n_features is not None else max_index + 1
    indptr = np.zeros(n_rows + 1, dtype=np.int64)
    np.cumsum(np.concatenate(counts), out=indptr[1:])
    del labels, counts
    idx_all = np.concatenate(indices) if indices else np.empty(0, np.int32)
    del indices
    val_all = np.concatenate(values) if values else np.empty(0)
    del values
    X = sp.csr_matrix((val_all, idx_all, indptr), shape=(n_rows, max(d, 1)), copy=False)
    X.has_sorted_indices = True
    return Parsed(X, y)


def _parse_block(text: bytes, line0: int, name: str, base: int, n_features: int | None):
    """Labels, per-row counts, 0-based indices and values of one block of whole lines."""
    labels, rests, counts, linenos = [], [], [], []
    for k, line in enumerate(text.split(b"\n")):
        if b"#" in line:
            line = line[: line.index(b"#")]
        parts = line.split(None, 1)
        if not parts:
            continue
        labels.append(parts[0])
        rest = parts[1] if len(parts) > 1 else b""
        rests.append(rest)
        counts.append(rest.count(b":"))
        linenos.append(line0 + k)
    nlines = text.count(b"\n") + (0 if text.endswith(b"\n") else 1)
    cnt = np.array(counts, dtype=np.int64)
    joined = b" ".join(rests)
    try:
        if _BAD_TOKEN.search(joined):
            raise ValueError
        lab = np.fromstring(b" ".join(labels), sep=" ") if labels else np.empty(0)
        nums = np.fromstring(joined.replace(b":", b" "), sep=" ") if joined else np.empty(0)
        if lab.shape[0] != len(labels) or nums.shape[0] != 2 * int(cnt.sum()):
            raise ValueError
    except ValueError:
        _locate(text, line0, name)  # raises, naming the line
        raise DataError(f"{name}: lines {line0}-{line0 + nlines - 1}: malformed") from None
    del joined, rests
    idx = nums[0::2] - base
    val = np.ascontiguousarray(nums[1::2])
    del nums
    rows = np.repeat(np.arange(cnt.shape[0]), cnt)
    bad = ~np.isfinite(lab)
    if bad.any():
        _fail(name, linenos[int(np.argmax(bad))], "label is not a finite number")
    bad = ~np.isfinite(val)
    if bad.any():
        _fail(name, linenos[rows[int(np.argmax(bad))]], "feature value is not a finite number")
    if idx.size:
        low = idx < 0
        if low.any():
            _fail(
                name,
                linenos[rows[int(np.argmax(low))]],
                f"feature index {int(idx[np.argmax(low)] + base)} below {base} "
                f"(LibSVM indices start at {base})",
            )
        if n_features is not None:
            high = idx >= n_features
            if high.any():
                j = int(np.argmax(high))
                _fail(
                    name,
                    linenos[rows[j]],
                    f"feature index {int(idx[j] + base)} exceeds the data set's "
                    f"{n_features} features",
                )
        same_row = rows[1:] == rows[:-1]
        unsorted = same_row & (idx[1:] <= idx[:-1])
        if unsorted.any():
            j = int(np.argmax(unsorted)) + 1
            _fail(name, linenos[rows[j]], "feature indices must be strictly increasing")
        if idx.max() >= np.iinfo(np.int32).max:
            _fail(name, linenos[rows[int(np.argmax(idx))]], "feature index too large")
    return lab, cnt, idx.astype(np.int32), val, nlines


def _locate(text: bytes, line0: int, name: str) -> None:
    """Re-read a block that failed a check line by line; raise naming the first bad line."""
    for k, line in enumerate(text.split(b"\n")):
        lineno = line0 + k
        if b"#" in line:
            line = line[: line.index(b"#")]
        parts = line.split()
        if not parts:
            continue
        try:
            float(parts[0])
        except ValueError:
            _fail(name, lineno, f"label {_show(parts[0])} is not a number")
        for tok in parts[1:]:
            i, sep, v = tok.partition(b":")
            if not sep or b":" in v or not i.isdigit():
                _fail(name, lineno, f"expected <index>:<value>, found {_show(tok)}")
            try:
                float(v)
            except ValueError:
                _fail(name, lineno, f"feature value {_show(v)} is not a number")


def _fail(name: str, lineno: int, what: str) -> None:
    raise DataError(f"{name}:{lineno}: {what}")


def _show(token: bytes) -> str:
    return repr(token[:40].decode("utf-8", "replace"))


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:200]


def save_csr(parsed: Parsed, path: str | Path) -> None:
    """Write the parsed matrix to ``path`` (an uncompressed .npz) atomically."""
    path = Path(path)
    with atomic_write(path) as fh:
        X = parsed.X
        np.savez(
            fh,
            data=X.data,
            indices=X.indices,
            indptr=X.indptr,
            shape=np.array(X.shape, dtype=np.int64),
            y=parsed.y,
        )


def load_csr(path: str | Path) -> Parsed:
    """Read a file written by :func:`save_csr`."""
    try:
        with np.load(path) as z:
            X = sp.csr_matrix(
                (z["data"], z["indices"], z["indptr"]), shape=tuple(z["shape"]), copy=False
            )
            y = z["y"]
    except (OSError, KeyError, ValueError) as exc:
        raise DataError(f"{path}: unreadable converted data ({_one_line(exc)})") from None
    X.has_sorted_indices = True
    return Parsed(X, y)


def convert(
    source: str | Path,
    out: str | Path,
    *,
    n_features: int | None = None,
    rows: int | None = None,
    display: str | None = None,
) -> Parsed:
    """Parse ``source`` (:func:`parse_svmlight`) and save it as CSR ``out`` (:func:`save_csr`).

    Parameters
    ----------
    source
        The svmlight file (plain, ``.bz2`` or ``.xz``).
    out
        The ``.npz`` written, atomically.
    n_features
        As for :func:`parse_svmlight`.
    rows
        As for :func:`parse_svmlight`.
    display
        How messages name the file (None: its path).

    Returns
    -------
    Parsed
        The parsed data.

    Raises
    ------
    DataError
        As :func:`parse_svmlight` raises.
    """
    parsed = parse_svmlight(source, n_features=n_features, rows=rows, display=display)
    save_csr(parsed, out)
    log.info(
        "converted %s: %d rows, %d features, %d non-zeros (%.1f MB as CSR)",
        display or source,
        parsed.X.shape[0],
        parsed.X.shape[1],
        parsed.X.nnz,
        parsed.nbytes / 1e6,
    )
    return parsed


__all__ = ["Parsed", "convert", "load_csr", "open_text", "parse_svmlight", "save_csr"]
