"""Plain svmlight files (``kind: svmlight``): downloaded, verified, converted and cached.

``obtain`` turns a normalised ``svmlight`` dataset config into parsed CSR data:

* ``path`` (offline): the local file is parsed (plain, .bz2 or .xz);
* otherwise the file is downloaded from ``url``, or from the registry's LibSVM
  URL (``mirror`` replacing the site's base URL), into the data cache
  ``<cache>/<source>/<file>``; it is renamed into place only once it has been
  decompressed and parsed without error, and converted to ``<file>.csr.npz``,
  which later runs read instead. The first download's SHA-256 and size are
  recorded in ``<file>.json``; a later download or a local copy that differs is
  flagged in the log.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from . import registry
from .convert import Parsed, load_csr, parse_svmlight, save_csr
from .download import Codec, cache_dir, fetch_parsed, read_local


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
