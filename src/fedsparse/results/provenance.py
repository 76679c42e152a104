"""Where a result came from: package versions, git commit, host."""

from __future__ import annotations

import platform
import socket
import subprocess
from functools import lru_cache
from pathlib import Path

import numba
import numpy as np

from .. import __version__


@lru_cache(maxsize=1)
def git_commit() -> str | None:
    """The commit of the source tree fedsparse runs from, if it is a git checkout."""
    here = Path(__file__).resolve().parents[1]
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=here,
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None


def provenance() -> dict[str, str | None]:
    """Provenance columns of runs.parquet."""
    return {
        "fedsparse_version": __version__,
        "git_commit": git_commit(),
        "python_version": platform.python_version(),
        "numpy_version": np.__version__,
        "numba_version": numba.__version__,
        "host": socket.gethostname(),
    }
