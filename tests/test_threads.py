"""Waiting numba/OpenMP threads sleep instead of spinning (two threads lost to one on
a busy machine while they spun)."""

from __future__ import annotations

import os
import subprocess
import sys

PROBE = (
    "import os, fedsparse.kernels as K, numpy as np;"
    "K.aggregate(np.ones((2, 1, 3)), np.full(2, 0.5), 3, np.empty((1, 3)), K.threshold_scratch(3));"
    "print(os.environ.get('OMP_WAIT_POLICY'), os.environ.get('GOMP_SPINCOUNT'))"
)


def _probe(**env: str) -> str:
    base = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    out = subprocess.run(
        [sys.executable, "-c", PROBE], env={**base, **env}, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def test_kernels_ask_openmp_for_passive_waiting():
    assert _probe() == "PASSIVE None"


def test_a_users_wait_policy_or_spin_count_is_kept():
    assert _probe(OMP_WAIT_POLICY="ACTIVE") == "ACTIVE None"
    assert _probe(GOMP_SPINCOUNT="1000") == "None 1000"


def test_the_policy_is_set_before_openmp_is_loaded():
    """libgomp reads OMP_WAIT_POLICY once, when it is loaded: importing the kernels must not
    load it (numba loads it at the first parallel call)."""
    code = (
        "import fedsparse.kernels;print(any('libgomp' in line for line in open('/proc/self/maps')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "False"
