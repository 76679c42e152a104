"""How numba's threads wait: a run with the default threads is never slower than with one.

GNU OpenMP (numba's ``omp`` threading layer) lets a thread that reaches the end of a parallel
loop spin for milliseconds before it sleeps. A round is one or a few parallel loops of a
fraction of a millisecond each, so on a busy machine the spinning thread holds a core that the
other thread, or another process, needs, and the round waits for the thread that lost its
core. :func:`configure_waiting` asks for passive waiting (a waiting thread sleeps at once)
unless the user chose a policy; docs/performance.md has the measurements, and why the thread
count is not chosen from the load instead.

:func:`configure_waiting` must run before numba loads OpenMP, which it does at the first
parallel kernel call, so :mod:`fedsparse.kernels` calls it on import. Nothing here changes a
result: every kernel gives the same bits for any thread count (tested).
"""

from __future__ import annotations

import os


def configure_waiting() -> None:
    """Waiting OpenMP threads sleep instead of spinning, unless the user set a policy."""
    if "OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ:
        os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
