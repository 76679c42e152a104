"""Downloads a researcher on a flaky network can trust.

:func:`fetch` streams a URL to ``<dest>.part`` with a progress display, resumes
an interrupted transfer with an HTTP ``Range`` request, retries with
exponential back-off, and gives every socket operation a time-out. Only a file
that is complete (its size matches what the server announced, and any expected
size or SHA-256) and that passes the caller's ``verify`` check (for data files:
it decompresses and parses) is renamed to ``dest``; a bad file is deleted and
never used.

The LibSVM site publishes no checksums, so the first download of a file records
its SHA-256 and size in ``<dest>.json``; a later download that differs is
flagged (a warning in the log and a ``later`` entry in that record).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import hashlib
import http.client
import json
import logging
import os
import re
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..atomic import atomic_write
from ..errors import DataError

log = logging.getLogger("fedsparse.data")

ENV_CACHE = "FEDSPARSE_DATA_CACHE"
CHUNK = 1 << 16


def cache_dir(configured: str | Path | None = None) -> Path:
    """The data cache: ``configured`` (config key ``data_cache``), else ``$FEDSPARSE_DATA_CACHE``,
    else ``~/.cache/fedsparse/data``."""
    if configured:
        return Path(configured).expanduser()
    env = os.environ.get(ENV_CACHE)
    if env:
        return Path(env).expanduser()
    return Path.home() / ".cache" / "fedsparse" / "data"


def sha256_of(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


@contextlib.contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive lock on ``<path>.lock``: two jobs never download the same file at once."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


class _Progress:
    """A progress bar on a terminal, a log line every 10 % (or 30 s) otherwise."""

    def __init__(self, name: str, total: int | None, done: int, enabled: bool = True):
        self.name, self.total, self.done = name, total, done
        self.start = time.monotonic()
        self.start_bytes = done
        self.enabled = enabled
        self.tty = enabled and sys.stderr.isatty()
        self.next_pct = 10.0
        self.next_time = self.start + 30.0
        self.last_draw = 0.0

    def update(self, n: int) -> None:
        self.done += n
        if not self.enabled:
            return
        now = time.monotonic()
        pct = 100.0 * self.done / self.total if self.total else None
        if self.tty:
            if now - self.last_draw >= 0.2:
                self.last_draw = now
                sys.stderr.write("\r" + self._line(now, pct))
                sys.stderr.flush()
        elif (pct is not None and pct >= self.next_pct) or now >= self.next_time:
            log.info("%s", self._line(now, pct))
            while pct is not None and self.next_pct <= pct:
                self.next_pct += 10.0
            self.next_time = now + 30.0

    def close(self) -> None:
        if self.tty:
            sys.stderr.write("\r" + self._line(time.monotonic(), 100.0 if self.total else None))
            sys.stderr.write("\n")
            sys.stderr.flush()

    def _line(self, now: float, pct: float | None) -> str:
        rate = (self.done - self.start_bytes) / max(now - self.start, 1e-9)
        mb = self.done / 1e6
        if pct is None:
            return f"downloading {self.name}: {mb:.1f} MB, {rate / 1e6:.2f} MB/s"
        width = 30
        bar = "#" * int(width * min(pct, 100.0) / 100.0)
        return (
            f"downloading {self.name}: [{bar:<{width}}] {pct:5.1f}% of "
            f"{self.total / 1e6:.1f} MB, {rate / 1e6:.2f} MB/s"
        )


class _Retry(Exception):
    """A transient failure: try again after a pause."""


def _total_from_content_range(value: str | None) -> int | None:
    m = re.match(r"bytes\s+(\d+)-(\d+)/(\d+|\*)", value or "")
    if not m or m[3] == "*":
        return None
    return int(m[3])


def _int_header(resp, name: str) -> int | None:
    value = resp.headers.get(name)
    return int(value) if value and value.isdigit() else None


def download(
    url: str,
    part: Path,
    *,
    expected_size: int | None = None,
    retries: int = 5,
    backoff: float = 1.0,
    max_backoff: float = 60.0,
    timeout: float = 30.0,
    progress: bool = True,
) -> None:
    """Fill ``part`` with the whole body of ``url``, resuming what is already there.

    Retries transient failures (connection errors, time-outs, cut transfers, HTTP 408, 429
    and 5xx, a refused resume, which starts over) with exponential back-off.

    Parameters
    ----------
    url
        The URL downloaded.
    part
        The partial file, appended to with an HTTP ``Range`` request where the server resumes
        (its folder is created).
    expected_size
        The body's size in bytes, checked against the size the server announces; None: not
        checked.
    retries
        Transient failures retried before giving up.
    backoff
        Seconds waited before the first retry; doubled after each.
    max_backoff
        The longest wait between retries, in seconds.
    timeout
        Seconds each socket operation may take.
    progress
        Show a progress bar on a terminal (a log line every 10 % or 30 s otherwise).

    Raises
    ------
    DataError
        One line naming the URL: a permanent HTTP error, a size that disagrees with
        ``expected_size``, or the retries used up (the partial file is then kept for the next
        attempt to resume).
    """
    part.parent.mkdir(parents=True, exist_ok=True)
    name = url.rsplit("/", 1)[-1] or url
    attempt = 0
    while True:
        have = part.stat().st_size if part.exists() else 0
        headers = {"User-Agent": "fedsparse", "Accept-Encoding": "identity"}
        if have:
            headers["Range"] = f"bytes={have}-"
        req = urllib.request.Request(url, headers=headers)
        try:
            _transfer(req, part, have, url, name, expected_size, timeout, progress)
            return
        except urllib.error.HTTPError as exc:
            if exc.code == 416 and have:
                # we hold more than the server has: the file changed; start again
                log.warning("%s: server refused to resume at byte %d; starting over", url, have)
                part.unlink(missing_ok=True)
                reason = "HTTP 416 on resume"
            elif exc.code in (408, 429) or exc.code >= 500:
                reason = f"HTTP {exc.code} {exc.reason}"
            else:
                raise DataError(f"{url}: HTTP {exc.code} {exc.reason}") from None
        except _Retry as exc:
            reason = str(exc)
        except (
            urllib.error.URLError,
            http.client.HTTPException,
            ConnectionError,
            TimeoutError,
            OSError,
        ) as exc:
            reason = " ".join(str(getattr(exc, "reason", exc) or type(exc).__name__).split())
        attempt += 1
        kept = part.stat().st_size if part.exists() else 0
        if attempt > retries:
            raise DataError(
                f"{url}: download failed after {attempt} attempts ({reason}); "
                f"{kept} bytes kept in {part}, run again to resume"
            )
        wait = min(max_backoff, backoff * 2 ** (attempt - 1))
        log.warning(
            "%s: %s at byte %d; retry %d/%d in %.1fs", url, reason, kept, attempt, retries, wait
        )
        time.sleep(wait)


def _transfer(req, part, have, url, name, expected_size, timeout, progress) -> None:
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        status = getattr(resp, "status", 200)
        if have and status == 206:
            total = _total_from_content_range(resp.headers.get("Content-Range"))
            mode = "ab"
        else:
            if have:
                log.info("%s: server does not resume; downloading from the start", url)
            have = 0
            total = _int_header(resp, "Content-Length")
            mode = "wb"
        if expected_size is not None and total is not None and total != expected_size:
            raise DataError(
                f"{url}: size mismatch: expected {expected_size} bytes, the server has {total}"
            )
        bar = _Progress(name, total, have, progress)
        try:
            with open(part, mode) as fh:
                while True:
                    block = resp.read(CHUNK)
                    if not block:
                        break
                    fh.write(block)
                    bar.update(len(block))
                fh.flush()
                os.fsync(fh.fileno())
        finally:
            bar.close()
    got = part.stat().st_size
    if total is not None and got < total:
        raise _Retry(f"transfer cut at byte {got} of {total}")
    if total is not None and got > total:
        part.unlink()
        raise _Retry(f"received {got} bytes, more than the announced {total}")


def _record_path(dest: Path) -> Path:
    return dest.with_name(dest.name + ".json")


def read_record(dest: Path) -> dict[str, Any] | None:
    try:
        return json.loads(_record_path(dest).read_text())
    except (OSError, json.JSONDecodeError):
        return None


def record_download(dest: Path, url: str, size: int, sha256: str) -> bool:
    """Record a download's size and SHA-256 beside it, or compare it with the first download's.

    The record ``<dest>.json`` is written atomically: the first download's entry, and every
    later one under ``later`` with whether it differs (logged as a warning when it does).

    Parameters
    ----------
    dest
        The downloaded file's final place.
    url
        Where it came from.
    size
        Its size in bytes.
    sha256
        Its SHA-256, hex.

    Returns
    -------
    bool
        True if a record existed and this download's size or SHA-256 differs from it.
    """
    now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
    rec = read_record(dest)
    entry = {"url": url, "size": size, "sha256": sha256, "downloaded_at": now}
    if rec is None:
        rec = {**entry, "first_downloaded_at": now, "later": []}
        changed = False
    else:
        changed = rec.get("sha256") != sha256 or rec.get("size") != size
        rec.setdefault("later", []).append({**entry, "differs": changed})
        if changed:
            log.warning(
                "%s: this download (sha256 %s, %d bytes) DIFFERS from the first download "
                "(sha256 %s, %d bytes, %s): the file on the server has changed",
                dest.name,
                sha256[:16],
                size,
                str(rec.get("sha256"))[:16],
                rec.get("size") or -1,
                rec.get("first_downloaded_at"),
            )
    with atomic_write(_record_path(dest)) as fh:
        fh.write((json.dumps(rec, indent=2) + "\n").encode())
    return changed


def fetch(
    url: str,
    dest: str | Path,
    *,
    verify: Callable[[Path], Any] | None = None,
    expected_size: int | None = None,
    expected_sha256: str | None = None,
    **download_options: Any,
) -> Path:
    """``dest``, downloading ``url`` first if it is not there yet.

    The download goes to ``<dest>.part`` and is checked (its size against ``expected_size``,
    its SHA-256 against ``expected_sha256``, then ``verify``) before it is recorded
    (:func:`record_download`) and renamed to ``dest``; a file that fails a check is deleted.

    Parameters
    ----------
    url
        The URL downloaded.
    dest
        The file's final place; returned as it is if it exists.
    verify
        Called with the downloaded part; it raises (a :class:`DataError`) on a bad file.
        None: no check.
    expected_size
        The file's size in bytes; None: not checked.
    expected_sha256
        The file's SHA-256, hex (either case); None: not checked.
    **download_options
        Passed to :func:`download` (``retries``, ``backoff``, ``timeout``, ...).

    Returns
    -------
    Path
        ``dest``.

    Raises
    ------
    DataError
        A download that fails (:func:`download`) or a file that fails a check.
    """
    dest = Path(dest)
    if dest.is_file():
        return dest
    part = dest.with_name(dest.name + ".part")
    log.info("downloading %s -> %s", url, dest)
    download(url, part, expected_size=expected_size, **download_options)
    size = part.stat().st_size
    try:
        if expected_size is not None and size != expected_size:
            raise DataError(f"{url}: size mismatch: expected {expected_size} bytes, got {size}")
        sha = sha256_of(part)
        if expected_sha256 is not None and sha != expected_sha256.lower():
            raise DataError(f"{url}: SHA-256 mismatch: expected {expected_sha256}, got {sha}")
        if verify is not None:
            verify(part)
    except BaseException:
        part.unlink(missing_ok=True)
        raise
    record_download(dest, url, size, sha)
    os.replace(part, dest)
    log.info("downloaded %s: %d bytes, sha256 %s", dest.name, size, sha)
    return dest


# ---------------------------------------------------------------------------- parsed and cached


@dataclass(frozen=True)
class Codec:
    """How one kind of data file is parsed, and its converted form cached next to the download.

    ``parse(file, name)`` reads a file (``name`` is what its errors say: the URL or the path)
    and raises a one-line :class:`DataError` on a bad one; ``save``/``load`` write and read the
    converted form ``<download><suffix>``; ``fits`` says whether a cached conversion still
    fits the config (e.g. its number of features), else the download is parsed again.
    """

    parse: Callable[[Path, str], Any]
    suffix: str
    save: Callable[[Any, Path], None]
    load: Callable[[Path], Any]
    fits: Callable[[Any], bool] = lambda _parsed: True


def fetch_parsed(
    url: str,
    dest: Path,
    codec: Codec,
    *,
    expected_size: int | None = None,
    expected_sha256: str | None = None,
    download_options: dict[str, Any] | None = None,
) -> tuple[Any, dict[str, Any]]:
    """The parsed contents of ``url``, downloaded to ``dest`` and converted once.

    Holds a file lock on ``dest`` throughout, so two jobs never download or convert the same
    file at once. A converted form ``<dest><codec.suffix>`` that still fits is read; a
    download found without one is parsed and converted; otherwise the file is fetched
    (:func:`fetch`, renamed into place only once it parses) and converted.

    Parameters
    ----------
    url
        The URL downloaded.
    dest
        The download's place in the data cache.
    codec
        How the file is parsed, and its converted form saved and loaded.
    expected_size
        The download's size in bytes; None: not checked.
    expected_sha256
        The download's SHA-256, hex; None: not checked.
    download_options
        Options of :func:`download`; None: its defaults.

    Returns
    -------
    tuple
        The parsed data, and ``{origin, size, sha256}``: the URL and the download's recorded
        size and SHA-256 (None where it has no record).

    Raises
    ------
    DataError
        A download that fails or does not parse (as :func:`fetch`).
    """
    converted = dest.with_name(dest.name + codec.suffix)
    with file_lock(dest):
        if dest.is_file() and converted.is_file():
            parsed = codec.load(converted)
            if codec.fits(parsed):
                log.info("using cached %s", converted)
                return parsed, _origin(url, dest)
        if dest.is_file():  # downloaded earlier, not (or differently) converted
            parsed = codec.parse(dest, str(dest))
            codec.save(parsed, converted)
            return parsed, _origin(url, dest)
        holder: dict[str, Any] = {}

        def verify(part: Path) -> None:
            holder["parsed"] = codec.parse(part, url)

        fetch(
            url,
            dest,
            verify=verify,
            expected_size=expected_size,
            expected_sha256=expected_sha256,
            **(download_options or {}),
        )
        parsed = holder["parsed"]
        codec.save(parsed, converted)
        return parsed, _origin(url, dest)


def read_local(
    path: Path,
    codec: Codec,
    *,
    recorded: Path | None = None,
    expected_size: int | None = None,
    expected_sha256: str | None = None,
    converted_dir: Path | None = None,
) -> tuple[Any, dict[str, Any]]:
    """Parse the local copy ``path`` of a data file (offline), checked against its pins.

    A ``recorded`` download record whose SHA-256 differs from the file's is logged as a
    warning, not an error.

    Parameters
    ----------
    path
        The local file.
    codec
        How the file is parsed, and its converted form saved and loaded.
    recorded
        The cache place of the same file, whose download record (if any) the file is compared
        with; None: none.
    expected_size
        The file's size in bytes; None: not checked.
    expected_sha256
        The file's SHA-256, hex; None: not checked.
    converted_dir
        Where the converted form is kept, named by the file's SHA-256 (an edited file is parsed
        again), and read on later calls; a folder that cannot be written only costs the parse.
        None: not kept.

    Returns
    -------
    tuple
        The parsed data, and ``{origin, size, sha256}`` of ``path``.

    Raises
    ------
    DataError
        No such file, a size or SHA-256 other than the pins, or a file that does not parse.
    """
    if not path.is_file():
        raise DataError(f"{path}: no such file (dataset.path)")
    size, sha = path.stat().st_size, sha256_of(path)
    if expected_size is not None and size != expected_size:
        raise DataError(f"{path}: size mismatch: expected {expected_size} bytes, got {size}")
    if expected_sha256 is not None and sha != expected_sha256:
        raise DataError(f"{path}: SHA-256 mismatch: expected {expected_sha256}, got {sha}")
    rec = read_record(recorded) if recorded is not None else None
    if rec and rec.get("sha256") != sha:
        log.warning(
            "%s: local copy (sha256 %s) differs from the recorded download of %s (sha256 %s)",
            path,
            sha[:16],
            rec.get("url"),
            str(rec.get("sha256"))[:16],
        )
    origin = {"origin": str(path), "size": size, "sha256": sha}
    converted = None if converted_dir is None else converted_dir / f"{sha}{codec.suffix}"
    if converted is not None and converted.is_file():
        try:
            parsed = codec.load(converted)
        except DataError as exc:  # unreadable: parsed and written again below
            log.info("%s", exc)
        else:
            if codec.fits(parsed):
                log.info("using %s, the converted local file %s", converted, path)
                return parsed, origin
    log.info("reading local file %s (%d bytes, sha256 %s)", path, size, sha)
    parsed = codec.parse(path, str(path))
    if converted is not None:
        try:
            converted.parent.mkdir(parents=True, exist_ok=True)
            codec.save(parsed, converted)
        except OSError as exc:
            log.info("%s: not kept (%s)", converted, exc.strerror or exc)
    return parsed, origin


def _origin(url: str, dest: Path) -> dict[str, Any]:
    rec = read_record(dest) or {}
    return {"origin": url, "size": rec.get("size"), "sha256": rec.get("sha256")}
