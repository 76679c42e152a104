"""What a data set looks like to a model, known from its spec before it is built.

The shape comes from the generator's config (synthetic data), the registry (Fashion-MNIST,
MNIST, the LibSVM sets), a file's header (a folder of IDX files), and the partition (the
client count). Light at import: the cost model reads it in a cluster job's own Snakemake.
"""

from __future__ import annotations

import gzip
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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


def facts(data: dict[str, Any], partition: Any) -> Facts | None:
    """The task, features, classes and clients of a data set spec, where the config fixes
    them; None where only the built data can tell."""
    kind = data["kind"]
    clients = partition.get("clients") if isinstance(partition, dict) else None
    if isinstance(partition, dict) and partition.get("kind") == "papers":
        # clusters x parts, parts_per_client parts a client (fedsparse.data.partition)
        parts = partition.get("clusters", 10) * partition.get("parts", 20)
        clients = parts // max(partition.get("parts_per_client", 2), 1)
    if kind == "synthetic":
        task = "regression" if data["task"] == "linear" else "binary"
        return Facts(task, data["dim"], 0, clients or data["clients"])
    if clients is None:
        return None
    if kind == "idx":
        pixels = IMAGE_PIXELS if data.get("source") else idx_pixels(Path(data["path"]))
        return None if pixels is None else Facts("multiclass", pixels, IMAGE_CLASSES, clients)
    if kind == "svmlight" and data.get("source"):
        from . import registry

        entry = registry.DATASETS[data["source"]]
        n_features = data.get("n_features") or entry.n_features
        return Facts(entry.task, n_features, entry.classes, clients)
    return None


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
