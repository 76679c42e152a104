"""A cohort's local step: ``kernels.descend`` member by member (numerics 2.1) against
``kernels.dense_steps.descend_members`` (2.2), interleaved in one process.

    python benchmarks/member_step.py                            # one thread
    NUMBA_CPU_NAME=haswell python benchmarks/member_step.py     # compiled for AVX2

Ten random rows of d = 1,000 a step, 400 steps, cohorts of 1 and 15; µs a member-step,
min–median of five interleaved repetitions.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

os.environ.setdefault("NUMBA_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import numpy as np  # noqa: E402
from numba import njit  # noqa: E402

from fedsparse.kernels.dense_steps import descend_members, work_space  # noqa: E402
from fedsparse.kernels.losses import LEAST_SQUARES, LOGISTIC, descend  # noqa: E402

D, STEPS, BATCH = 1000, 400, 10


@njit
def one_by_one(X, y, R, Wm, members, loss, l2, stepsizes, G, s, coef, lanes, grad):
    for t in range(R.shape[0]):
        for m in members:
            descend(X, y, R[t], Wm[m : m + 1], loss, l2, stepsizes[m], G, s)


@njit
def together(X, y, R, Wm, members, loss, l2, stepsizes, G, s, coef, lanes, grad):
    for t in range(R.shape[0]):
        descend_members(X, y, R[t], Wm, members, loss, l2, stepsizes, coef, lanes, grad)


def main() -> None:
    rs = np.random.default_rng(0)
    print(f"member-step, µs (min-median of 5), d = {D}, {BATCH} rows, one thread")
    for n in (10_000, 100_000):
        X = rs.standard_normal((n, D))
        for loss, l2, y in (
            (LEAST_SQUARES, 0.0, rs.standard_normal(n)),
            (LOGISTIC, 1e-4, np.sign(rs.standard_normal(n))),
        ):
            for C in (1, 15):
                R = rs.integers(0, n, (STEPS, BATCH)).astype(np.int64)
                members, stepsizes = np.arange(C), np.full(C, 1e-4)
                G, s = np.empty((1, D)), np.empty(1)
                coef, lanes, grad = (a[0] for a in work_space(1, C, BATCH))
                Wm = np.zeros((C, D))
                args = (members, loss, l2, stepsizes, G, s, coef, lanes, grad)
                times: dict[str, list[float]] = {}
                for f in (one_by_one, together):
                    f(X, y, R[:2], Wm, *args)  # compile
                for _ in range(5):
                    for f in (one_by_one, together):
                        Wm[:] = 0.0
                        start = time.perf_counter()
                        f(X, y, R, Wm, *args)
                        elapsed = time.perf_counter() - start
                        times.setdefault(f.__name__, []).append(elapsed / (STEPS * C) * 1e6)
                name = "least squares " if loss == LEAST_SQUARES else "logistic+ridge"
                cells = "  ".join(f"{k} {min(v):.2f}-{sorted(v)[2]:.2f}" for k, v in times.items())
                print(f"  n={n:6d} {name} C={C:2d}: {cells}", flush=True)


if __name__ == "__main__":
    main()
