"""A tiny per-client random stream usable inside parallel numba loops.

Each client owns one 64-bit SplitMix64 state, seeded from the run seed through
``numpy.random.SeedSequence.spawn``; a client only ever advances its own state,
so results do not depend on how clients are spread over threads.
"""

from __future__ import annotations

import numpy as np
from numba import njit

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_MIX1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX2 = np.uint64(0x94D049BB133111EB)
_TWO_POW_M53 = 1.0 / 9007199254740992.0


def client_states(seed: int, n_clients: int) -> np.ndarray:
    """One independent uint64 state per client, spawned from ``seed``."""
    children = np.random.SeedSequence(seed).spawn(n_clients)
    return np.array([c.generate_state(1, np.uint64)[0] for c in children], dtype=np.uint64)


@njit(cache=True)
def next_u64(state, i):
    """Advance stream ``i`` of ``state`` (SplitMix64) and return 64 random bits."""
    z = state[i] + _GOLDEN
    state[i] = z
    z = (z ^ (z >> np.uint64(30))) * _MIX1
    z = (z ^ (z >> np.uint64(27))) * _MIX2
    return z ^ (z >> np.uint64(31))


@njit(cache=True)
def randbelow(state, i, n):
    """Uniform integer in [0, n) from stream ``i`` (53-bit resolution; bias < n / 2**53)."""
    u = float(next_u64(state, i) >> np.uint64(11)) * _TWO_POW_M53
    k = int(u * n)
    return k if k < n else n - 1


@njit(cache=True)
def sample_without_replacement(perm, lo, n, b, state, i):
    """Move a uniform random b-subset of ``perm[lo:lo+n]`` to ``perm[lo:lo+b]``.

    Partial Fisher-Yates on the client's own slice of ``perm``; the slice stays a
    permutation of the client's rows, so the next draw starts from any order.
    """
    for j in range(b):
        r = lo + j + randbelow(state, i, n - j)
        tmp = perm[lo + j]
        perm[lo + j] = perm[r]
        perm[r] = tmp


@njit(cache=True)
def draw_minibatch(perm, ptr, i, batch, state):
    """Client ``i``'s minibatch: ``min(batch, n_i)`` of its rows drawn without replacement
    from its own stream (``batch <= 0`` or ``>= n_i``: all its rows, no randomness), as the
    view of ``perm`` that holds them."""
    lo = ptr[i]
    n = ptr[i + 1] - lo
    b = n if batch <= 0 or batch >= n else batch
    if b < n:
        sample_without_replacement(perm, lo, n, b, state, i)
    return perm[lo : lo + b]
