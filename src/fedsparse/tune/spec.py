"""What the study runners share: their error, host name and markers, and a study's spec.

The specs themselves (search spaces, settings) are planned with the sweep, in
:mod:`fedsparse.sweep.studies`.
"""

from __future__ import annotations

import datetime as dt
import json
import socket
from pathlib import Path
from typing import Any

from ..atomic import atomic_write
from ..errors import ConfigError, FedsparseError
from ..sweep.plan import plan_sweep
from ..sweep.studies import StudySpec

HOST = socket.gethostname()
MAX_ERRORS = 3  # a trial whose objective raised this many times stops the study


class TuneError(FedsparseError):
    """A study cannot go on (e.g. a trial keeps failing); the message says why."""


def study_spec(sweep: dict[str, Any], study: str) -> StudySpec:
    """The spec of ``study``, one of the studies the sweep config plans."""
    plan = plan_sweep(sweep)
    if study not in plan.studies:
        known = ", ".join(plan.studies) or "none: not an optuna sweep"
        raise ConfigError(f"study {study!r}: not in this sweep (studies: {known})")
    return plan.studies[study]


def write_json(path: str | Path, obj: dict[str, Any]) -> None:
    """Write ``obj`` (with the time it was written) as JSON, atomically."""
    obj = {**obj, "written_at": dt.datetime.now(dt.UTC).isoformat(timespec="seconds")}
    with atomic_write(path) as fh:
        fh.write((json.dumps(obj, indent=1, sort_keys=True, default=str) + "\n").encode())
