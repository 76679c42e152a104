"""How numba's threads wait: a run with the default threads is never slower than with one.

A run with numba's default threads (one per core) was slower than with one thread while another
process was busy (issue 38: FedIter-HT on Simulation I, 2 cores, one other busy process: 7.9 ms a
round against 3.6 with one thread; 14-30 ms against 3-12 on a machine shared by several). The
cause: GNU OpenMP (numba's ``omp`` threading layer) lets a thread that reaches the end of a
parallel loop spin for about 300,000 pause instructions (milliseconds) before it sleeps. A round
is one or a few parallel loops of a fraction of a millisecond each, so the spinning thread holds
a core that the other thread, or the other process, needs, and the round waits for the thread
that lost its core. Waiting passively (a waiting thread sleeps at once) removes that: measured on
the same busy machine, 2 threads then took 3.0-9.0 ms a round against 7.6-12 with one (the
default before: 22-30).

Choosing the thread count from the cores left free at start was tried too and dropped: with
passive waiting two threads beat one even on an overloaded machine (a thread's share of a
contended core is per thread), and a count chosen once would pin a long run to one thread after
a moment of load.

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
