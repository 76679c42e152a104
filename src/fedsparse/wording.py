"""Counts in sentences a person reads: ``1 shard``, ``2 shards``."""

from __future__ import annotations

__all__ = ["counted"]


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and ``noun``, plural unless ``n`` is 1 (``plural`` when adding an s is wrong):
    ``counted(1, "shard") == "1 shard"``, ``counted(0, "run") == "0 runs"``."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"
