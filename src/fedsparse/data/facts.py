"""What a data set looks like to a model, known from its spec before it is built: the
:class:`Facts` record, and the header of a folder of IDX files.

Each data-set kind fills a Facts from its spec (:func:`fedsparse.data.kinds.facts`): the
generator's config (synthetic data), the registry (Fashion-MNIST, MNIST, the LibSVM sets), a
file's header (a folder of IDX files), and the partition (the client count). Light at
import: the cost model reads it in a cluster job's own Snakemake.
"""

from __future__ import annotations

import gzip
import struct
from dataclasses import dataclass
from pathlib import Path

from ..errors import DataError

IMAGE_PIXELS = 28 * 28  # both registry image sets (Fashion-MNIST, MNIST) are 28 x 28 grey
IMAGE_CLASSES = 10


@dataclass(frozen=True)
class Facts:
    """What a data set looks like to a model, known before it is built."""

    task: str  # regression | binary | multiclass
    n_features: int
    n_classes: int
    n_clients: int


def idx_file(folder: Path) -> Path | None:
    for name in ("train-images-idx3-ubyte", "train-images-idx3-ubyte.gz"):
        if (folder / name).is_file():
            return folder / name
    return None


def idx_pixels(folder: Path) -> int | None:
    """Pixels per image from the header of a folder's training images (None: unreadable)."""
    path = idx_file(folder)
    if path is None:
        return None
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as fh:
            head = fh.read(16)
    except OSError as exc:
        raise DataError(f"{path}: cannot read the IDX header ({exc})") from None
    if len(head) < 16 or head[:3] != b"\0\0\x08" or head[3] != 3:
        return None  # the data job reports what is wrong with it
    _, rows, cols = struct.unpack(">III", head[4:16])
    return rows * cols
