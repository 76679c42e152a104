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
