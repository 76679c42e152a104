"""Config values read and checked: each helper returns the value in its canonical type or
raises a one-line ConfigError naming the value's config path.

Light at import (the standard library and fedsparse.errors): every layer that reads a config
section uses it, the data-set kinds (fedsparse.data.kinds) and fedsparse.training.config among them.
"""

from __future__ import annotations

import math
from typing import Any

from .errors import ConfigError, did_you_mean


def check_keys(section: dict[str, Any], allowed: tuple[str, ...], where: str) -> None:
    """Check that a config section has no key but the allowed ones.

    Parameters
    ----------
    section
        The config mapping checked.
    allowed
        The keys it may have.
    where
        The section's config path, for the message (``"config"``: the top level).

    Raises
    ------
    ConfigError
        For the first unknown key, naming its path, a close known key if any, and the
        allowed keys.
    """
    for key in section:
        if key not in allowed:
            prefix = "" if where == "config" else f"{where}."
            raise ConfigError(
                f"{prefix}{key}: unknown key{did_you_mean(key, allowed)} "
                f"(allowed: {', '.join(allowed)})"
            )


def as_integer(value: Any, where: str, low: int | None = None) -> int:
    """A config value as an integer, checked.

    Parameters
    ----------
    value
        The value read (an int, or a float with an integral value; never a bool).
    where
        The value's config path, for the message.
    low
        The smallest value allowed; None: no bound.

    Returns
    -------
    int

    Raises
    ------
    ConfigError
        ``value`` is not a finite integral number, or is below ``low``.
    """
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or value != int(value)
    ):
        raise ConfigError(f"{where}: must be an integer, got {value!r}")
    if low is not None and value < low:
        raise ConfigError(f"{where}: must be >= {low}, got {value!r}")
    return int(value)


def as_number(value: Any, where: str, low: float | None = None) -> float:
    """A config value as a finite float, checked.

    Parameters
    ----------
    value
        The value read (an int or float; never a bool).
    where
        The value's config path, for the message.
    low
        The smallest value allowed; None: no bound.

    Returns
    -------
    float

    Raises
    ------
    ConfigError
        ``value`` is not a finite number, or is below ``low``.
    """
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ConfigError(f"{where}: must be a finite number, got {value!r}")
    if low is not None and value < low:
        raise ConfigError(f"{where}: must be >= {low:g}, got {value!r}")
    return float(value)


def nonempty_string(value: Any, where: str) -> str:
    """A config value that must be a non-empty string, checked (ConfigError names ``where``)."""
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{where}: must be a non-empty string, got {value!r}")
    return value
