"""Errors a user can act on; the CLI prints them as one line and exits with status 2."""

from __future__ import annotations


class FedsparseError(Exception):
    """Base class of the errors the CLI reports without a traceback."""


class ConfigError(FedsparseError, ValueError):
    """A configuration value is missing, unknown or out of range; the message names the key."""


class DataError(FedsparseError, ValueError):
    """A data file is missing or malformed; the message names the file."""


class MissingResultsError(FedsparseError, FileNotFoundError):
    """A results folder, or its runs.parquet or traces/, does not exist; the message names it."""


class FedsparseWarning(UserWarning):
    """Something a user should know that does not stop the command; the CLI prints it as
    one ``fedsparse: warning: ...`` line."""


def did_you_mean(value: object, known) -> str:
    """``"; did you mean X?"`` for the closest of ``known`` to a mistyped ``value``, else ``""``
    (appended to an "unknown ..." message right after the key)."""
    import difflib

    if not isinstance(value, str):
        return ""
    close = difflib.get_close_matches(value, [str(k) for k in known], n=2, cutoff=0.75)
    return f"; did you mean {' or '.join(close)}?" if close else ""


def one_line(exc: BaseException) -> str:
    """``exc``'s message as one line of an error: its non-blank lines joined, a DuckDB
    message's LINE/caret excerpt and what follows left out; the exception's type name when
    nothing is left."""
    lines = []
    for raw in str(exc).splitlines():
        if raw.startswith("LINE "):
            break
        if raw.strip():
            lines.append(raw.strip())
    return " ".join(lines) or type(exc).__name__
