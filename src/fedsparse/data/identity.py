"""What a built data folder holds, named: the digest of its normalised data spec, and a stamp
of each of its files.

A data folder is built from a data set's spec (its source or generator with every parameter
and seed, its partition, its preprocessing) by this version of the data code. The digest of
those (:func:`data_digest`) names the folder (``data/<name>.<digest>``,
:meth:`fedsparse.layout.Layout.dataset_build`) and is recorded in its ``meta.json``: an edited
spec asks for a folder the results folder lacks, so the data is rebuilt whether or not
Snakemake's records (``.snakemake/``) are there, and a job whose runs' config names another
digest than the folder's refuses it (:func:`check_built`).

Each file's size, modification time and SHA-256 are recorded at build time
(:func:`file_stamps`). A job checks sizes and times (a ``stat`` a file: nothing is read); a
file whose time differs (a folder copied without keeping times) is hashed once and, if its
content is the build's, its new time recorded. A file replaced by hand is refused.

Light at import (json, hashlib and the data-set kinds' declarations): the Snakefile names data
folders by digest, in a cluster job's own Snakemake too.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

from ..errors import DataError
from .kinds import kind_of

# The data code's version, in every digest: raise it when a change of the generators,
# readers, partitions or preprocessing changes the data a spec builds (every folder is then
# rebuilt).
DATA_CODE_VERSION = 1
DIGEST_CHARS = 12  # as a shard's (fedsparse.layout.SHARD_DIGEST_CHARS)
META = "meta.json"


def without_locations(data: dict[str, Any]) -> dict[str, Any]:
    """A normalised data config without where its file lies, where the file is one of the
    registry's (svmlight, an IDX set with a source): what run ids and data digests hash."""
    return kind_of(data).without_locations(data)


def data_spec(data: dict[str, Any], loss: str, partition: Any = "natural") -> dict[str, Any]:
    """The normalised spec a data folder is built from.

    Parameters
    ----------
    data
        A normalised data set config (source or generator, parameters, seed,
        preprocessing); the place of a registry file (``path``, ``mirror``) is left out.
    loss
        The model's loss: part of the spec only where it decides the data (a qid file's
        labels, ``kind: libsvm``).
    partition
        The normalised partition (a false value counts as ``"natural"``).

    Returns
    -------
    dict
        ``{data, partition, code}`` (``code``: the data code's version), plus ``loss`` for
        ``kind: libsvm``.
    """
    spec = {
        "data": without_locations(data),
        "partition": partition or "natural",
        "code": DATA_CODE_VERSION,
    }
    if kind_of(data).labels_from_loss:
        spec["loss"] = loss
    return spec


def data_digest(data: dict[str, Any], loss: str, partition: Any = "natural") -> str:
    """A short hash of :func:`data_spec`: what names a data folder.

    Parameters
    ----------
    data
        A normalised data set config.
    loss
        The model's loss.
    partition
        The normalised partition.

    Returns
    -------
    str
        The first ``DIGEST_CHARS`` (12) hex characters of the SHA-256 of the spec as
        canonical JSON; equal specs give equal digests, in any process.
    """
    text = json.dumps(data_spec(data, loss, partition), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:DIGEST_CHARS]


def entry_digest(entry: dict[str, Any]) -> str:
    """The digest of a plan's data set entry (``{data, model, partition?}``)."""
    return data_digest(entry["data"], entry["model"]["loss"], entry.get("partition", "natural"))


def run_data_digest(config: dict[str, Any]) -> str:
    """The digest of the data a normalised run config reads."""
    return data_digest(config["dataset"], config["model"]["loss"], config["partition"])


def file_sha256(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def file_stamps(folder: Path) -> dict[str, dict[str, Any]]:
    """Size, modification time (ns) and SHA-256 of every file in ``folder`` but its
    ``meta.json``: taken once, when the folder is built."""
    stamps = {}
    for path in sorted(p for p in folder.iterdir() if p.is_file() and p.name != META):
        st = path.stat()
        stamps[path.name] = {
            "size": st.st_size,
            "mtime_ns": st.st_mtime_ns,
            "sha256": file_sha256(path),
        }
    return stamps


def check_built(folder: str | Path, digest: str, dataset: str) -> dict[str, Any]:
    """The ``meta.json`` of a built data folder, once checked to hold this data set as built.

    Cost: a read of ``meta.json`` and a ``stat`` per file. A file whose time differs but whose
    size does not is hashed once and, if it is the build's, its new time recorded in
    ``meta.json`` (atomically; best effort on a read-only folder).

    Parameters
    ----------
    folder
        The data folder.
    digest
        The digest (:func:`data_digest`) of the spec the runs read.
    dataset
        The data set's name, for the messages.

    Returns
    -------
    dict
        The folder's ``meta.json``.

    Raises
    ------
    DataError
        One line naming the data set, what differs and what to run: no readable
        ``meta.json``, another digest, no file stamps, or a file missing or not as built.
    """
    folder = Path(folder)
    rebuild = f"delete {folder} and run snakemake again to rebuild it"
    try:
        meta = json.loads((folder / META).read_text())
    except (OSError, ValueError) as exc:
        raise DataError(
            f"data set {dataset}: {folder} is not a built data folder ({exc}); run snakemake "
            "to build it"
        ) from None
    found = meta.get("data_digest")
    if found != digest:
        raise DataError(
            f"data set {dataset}: {folder} holds data of spec digest "
            f"{found or 'unrecorded (built by an older fedsparse)'}, its runs' config has "
            f"digest {digest}; run snakemake with this config to build {dataset}.{digest}"
        )
    stamps = meta.get("files")
    if not isinstance(stamps, dict) or not stamps:
        raise DataError(f"data set {dataset}: {folder} records no file stamps; {rebuild}")
    moved = {}
    for name, stamp in stamps.items():
        path = folder / name
        try:
            st = path.stat()
        except OSError:
            raise DataError(f"data set {dataset}: {path} is missing; {rebuild}") from None
        if st.st_size != stamp["size"]:
            raise DataError(
                f"data set {dataset}: {path} has {st.st_size} bytes, its build wrote "
                f"{stamp['size']} (changed by hand?); {rebuild}"
            )
        if st.st_mtime_ns != stamp["mtime_ns"]:
            if file_sha256(path) != stamp["sha256"]:
                raise DataError(
                    f"data set {dataset}: {path} is not the file its build wrote (its SHA-256 "
                    f"differs: changed by hand?); {rebuild}"
                )
            moved[name] = st.st_mtime_ns  # copied without its time: the same content
    if moved:
        for name, mtime in moved.items():
            stamps[name]["mtime_ns"] = mtime
        _rewrite_meta(folder, meta)
    return meta


def _rewrite_meta(folder: Path, meta: dict[str, Any]) -> None:
    """Record checked times (best effort: a read-only copy is checked again next time)."""
    from ..atomic import atomic_write

    try:
        mode = (folder / META).stat().st_mode & 0o777
        with atomic_write(folder / META) as fh:
            os.fchmod(fh.fileno(), mode)
            fh.write((json.dumps(meta, indent=2) + "\n").encode())
    except OSError:
        pass
