"""Image sets in the original IDX format (MNIST, Fashion-MNIST): four files, train and test.

An IDX file is a 4-byte magic number (two zero bytes, a type code, the number of
dimensions), one big-endian uint32 size per dimension, then the values, row-major.
Images are ``0x00000803`` (unsigned bytes, n x rows x columns), labels ``0x00000801``
(unsigned bytes, n). A file may be gzip-compressed (recognised by its first bytes).

``obtain`` finds the four files of a normalised ``kind: idx`` config: a folder
(``path``), the folder a system package installed (Debian's ``dataset-fashion-mnist``),
or a download into the data cache (``<cache>/<source>/<file>.gz``, converted once to
``<file>.gz.npy``), with the guarantees of :mod:`fedsparse.data.download`. A compressed
local file is decompressed once too, to ``<cache>/idx-local/{images,labels}/<sha256>.npy``.
"""

from __future__ import annotations

import gzip
import logging
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..atomic import atomic_write
from ..errors import DataError
from . import registry
from .download import Codec, cache_dir, fetch_parsed, read_local

log = logging.getLogger("fedsparse.data")

# where compressed local IDX files (a folder's, a system package's) are kept decompressed, named
# by their SHA-256: gunzipping the training images on every run would cost more than the run's
# data loading otherwise does; reading the .npy costs almost nothing (an uncompressed file is
# read as fast as its copy, so none is kept)
LOCAL_CONVERTED = "idx-local"

IMAGES, LABELS = 0x00000803, 0x00000801
_WHAT = {IMAGES: "images", LABELS: "labels"}


@dataclass
class ImageSplit:
    """Train and test images as rows of pixels (uint8, n x pixels) and their labels (float64)."""

    X: np.ndarray
    y: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray


def read_idx(path: str | Path, magic: int, *, display: str | None = None) -> np.ndarray:
    """The array of an IDX file (plain or gzip), which must carry ``magic``.

    Parameters
    ----------
    path
        The file; gzip is recognised by its first bytes.
    magic
        The magic number expected: ``IMAGES`` or ``LABELS``.
    display
        How error messages name the file (None: its path).

    Returns
    -------
    numpy.ndarray
        uint8: images as ``(n, rows * columns)``, labels as ``(n,)``.

    Raises
    ------
    DataError
        One line naming ``display``: no such or unreadable file, a truncated or corrupt gzip
        stream, a wrong magic number, or a header that disagrees with the file's size.
    """
    name = display or str(path)
    raw = _read_bytes(Path(path), name)
    ndim = magic & 0xFF
    if len(raw) < 4 or int.from_bytes(raw[:4], "big") != magic:
        found = f"0x{int.from_bytes(raw[:4], 'big'):08x}" if len(raw) >= 4 else "none"
        raise DataError(
            f"{name}: not an IDX {_WHAT[magic]} file (magic number {found}, expected 0x{magic:08x})"
        )
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise DataError(f"{name}: truncated IDX header ({len(raw)} of {header} bytes)")
    dims = [int.from_bytes(raw[4 + 4 * k : 8 + 4 * k], "big") for k in range(ndim)]
    need = int(np.prod(dims))
    have = len(raw) - header
    if have != need:
        shape = " x ".join(map(str, dims))
        state = "truncated" if have < need else f"{have - need} bytes too long"
        raise DataError(
            f"{name}: {state}: the header announces {shape} = {need} bytes of data, "
            f"the file holds {have}"
        )
    arr = np.frombuffer(raw, dtype=np.uint8, offset=header)
    return arr.reshape(dims[0], int(np.prod(dims[1:]))) if magic == IMAGES else arr


def _read_bytes(path: Path, name: str) -> bytes:
    try:
        with open(path, "rb") as fh:
            raw = fh.read()
    except FileNotFoundError:
        raise DataError(f"{name}: no such file") from None
    except OSError as exc:
        raise DataError(f"{name}: cannot read ({exc.strerror})") from None
    if raw[:2] != b"\x1f\x8b":
        return raw
    try:
        return gzip.decompress(raw)
    except EOFError:
        raise DataError(f"{name}: truncated gzip stream") from None
    except (OSError, zlib.error) as exc:
        raise DataError(f"{name}: corrupt gzip stream ({' '.join(str(exc).split())})") from None


def _codec(magic: int, rows: int | None) -> Codec:
    """Parse an IDX file (with the expected number of rows); cache it as ``.npy``."""

    def parse(path: Path, name: str) -> np.ndarray:
        arr = read_idx(path, magic, display=name)
        if rows is not None and arr.shape[0] != rows:
            raise DataError(f"{name}: {arr.shape[0]} {_WHAT[magic]}, expected {rows}")
        return arr

    def save(arr: np.ndarray, dest: Path) -> None:
        with atomic_write(dest) as fh:
            np.save(fh, arr)

    def load(src: Path) -> np.ndarray:
        try:
            return np.load(src, mmap_mode="r")
        except (OSError, ValueError) as exc:
            raise DataError(f"{src}: unreadable converted data ({exc})") from None

    return Codec(parse, ".npy", save, load, lambda a: rows is None or a.shape[0] == rows)


def find_files(folder: Path) -> dict[str, Path] | None:
    """The four IDX files in ``folder`` (each plain or ``.gz``), or None if one is missing."""
    found = _present(folder)
    return found if len(found) == len(registry.IDX_FILES) else None


def _present(folder: Path) -> dict[str, Path]:
    found = {}
    for key, stem in registry.IDX_FILES.items():
        for candidate in (folder / stem, folder / f"{stem}.gz"):
            if candidate.is_file():
                found[key] = candidate
                break
    return found


def obtain(
    ds: dict[str, Any],
    cache: str | Path | None = None,
    download_options: dict[str, Any] | None = None,
) -> tuple[ImageSplit, dict[str, Any]]:
    """The images and labels of a normalised ``kind: idx`` config, and their origin.

    The four files come from ``ds["path"]``, else a system package's folder (no ``mirror``),
    else a download into the data cache (:func:`fedsparse.data.download.fetch_parsed`).

    Parameters
    ----------
    ds
        The normalised ``kind: idx`` data set config (``source`` or ``path``).
    cache
        The data cache (None: the default, :func:`fedsparse.data.download.cache_dir`).
    download_options
        Options of :func:`fedsparse.data.download.download`; None: its defaults.

    Returns
    -------
    tuple
        An :class:`ImageSplit` (images uint8, one row of pixels each; labels float64), and
        ``{origin, files}``: the folder or base URL, and each file's origin, size and SHA-256.

    Raises
    ------
    DataError
        A missing folder or file, a file that does not read as IDX or holds another number of
        rows than the registry's, or train and test files that disagree (image and label
        counts, pixels per image).
    """
    entry = registry.get_images(ds["source"]) if ds.get("source") else None
    cache = cache_dir(cache)
    folder, system = None, False
    if ds.get("path"):
        folder = Path(ds["path"]).expanduser()
        if not folder.is_dir():
            raise DataError(f"{folder}: no such folder (dataset.path)")
    elif entry is not None and not ds.get("mirror"):
        for local in entry.local:  # a system package's copy: no download
            if find_files(Path(local)) is not None:
                folder, system = Path(local), True
                break
    local_files = None
    if folder is not None:
        local_files = _present(folder)
        missing = [s for k, s in registry.IDX_FILES.items() if k not in local_files]
        if missing:
            raise DataError(f"{folder}: no {missing[0]} (nor {missing[0]}.gz) in this IDX folder")
    arrays: dict[str, np.ndarray] = {}
    files: dict[str, Any] = {}
    for key, stem in registry.IDX_FILES.items():
        split = key.split("_")[0]
        rows = entry.rows[split] if entry is not None else None
        what = "images" if key.endswith("images") else "labels"
        codec = _codec(IMAGES if what == "images" else LABELS, rows)
        if local_files is not None:
            recorded = None if system or entry is None else cache / entry.name / f"{stem}.gz"
            path = local_files[key]
            # (by what the file must hold: a labels file with an images file's bytes is refused)
            keep = cache / LOCAL_CONVERTED / what if path.suffix == ".gz" else None
            arrays[key], files[stem] = read_local(
                path, codec, recorded=recorded, converted_dir=keep
            )
        else:
            assert entry is not None  # (the config requires a source or a path)
            url = entry.url(f"{stem}.gz", ds.get("mirror"))
            dest = cache / entry.name / f"{stem}.gz"
            arrays[key], files[stem] = fetch_parsed(
                url, dest, codec, download_options=download_options
            )
    names = {k: files[s]["origin"] for k, s in registry.IDX_FILES.items()}
    for split in ("train", "test"):
        n_images, n_labels = len(arrays[f"{split}_images"]), len(arrays[f"{split}_labels"])
        if n_images != n_labels:
            raise DataError(
                f"{names[f'{split}_labels']}: {n_labels} labels, but "
                f"{names[f'{split}_images']} holds {n_images} images"
            )
    if arrays["test_images"].shape[1] != arrays["train_images"].shape[1]:
        raise DataError(
            f"{names['test_images']}: images of {arrays['test_images'].shape[1]} pixels, "
            f"the training images have {arrays['train_images'].shape[1]}"
        )
    origin = str(folder) if folder is not None else entry.url("", ds.get("mirror"))
    images = ImageSplit(
        X=arrays["train_images"],
        y=arrays["train_labels"].astype(np.float64),
        X_test=arrays["test_images"],
        y_test=arrays["test_labels"].astype(np.float64),
    )
    return images, {"origin": origin, "files": files}
