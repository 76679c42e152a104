"""Speed of a gradient-sparsification round, next to send-all and to NumPy.

    python benchmarks/gradient_sparsification.py                # about half a minute on 2 cores
    python benchmarks/gradient_sparsification.py --seconds 0.3  # quicker, noisier

FEMNIST's shape with a linear softmax (the spec's CPU stand-in): 156 clients of 220 random rows,
784 features, 62 classes (D = 48,608), batch 32, k = 1000 (0.2 % of D... the paper's k/D is
0.23 %). Each row times one round: every client's minibatch gradient, its top-k offer, the
server's selection and the update. ``numpy FAB round`` is the same FAB-top-k round written in
NumPy (argpartition for the top-k, FAB-Select by binary search on kappa over the offers), so
the selection's share shows next to send-all's dense round. Random values: the timings do not
depend on them. Prints a table; ``bench(seconds)`` returns its rows for benchmarks/run.py.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
from scipy.special import logsumexp
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parent))  # run as a script or from run.py

from mlp import best_time  # noqa: E402

from fedsparse.algorithms import ALGORITHMS  # noqa: E402
from fedsparse.data import FederatedData  # noqa: E402
from fedsparse.objective.problem import Problem  # noqa: E402

CLIENTS, ROWS, FEATURES, CLASSES, BATCH, K_ELEMENTS = 156, 220, 784, 62, 32, 1000
METHODS = ("fabtopk", "fubtopk", "utopk", "periodick", "sendall")


def problem() -> Problem:
    rng = np.random.default_rng(0)
    n = CLIENTS * ROWS
    data = FederatedData(
        name="random-femnist-shape",
        task="multiclass",
        X=rng.random((n, FEATURES)),
        y=rng.integers(0, CLASSES, n).astype(float),
        client_ptr=np.arange(0, n + 1, ROWS, dtype=np.int64),
        n_classes=CLASSES,
    )
    return Problem(data, "softmax", 0.0, "samples")


def ours(pb: Problem, name: str):
    """One round of ``name`` (compiled and warmed before it is timed)."""
    prm = {"stepsize": 0.01, "batch_size": BATCH}
    if name != "sendall":
        prm["k"] = K_ELEMENTS
    cls = ALGORITHMS[name]
    algo = cls(pb, cls.validate_params(prm), 0)
    algo.setup()
    algo.round(0)
    t = [1]

    def step():
        algo.round(t[0])
        t[0] += 1

    return step


def fab_select(idx: np.ndarray, val: np.ndarray, k: int) -> np.ndarray:
    """FAB-Select (spec S.1-S.8) on ranked offers: the largest kappa with |union of the
    top-kappa| <= k by binary search, then the clients' (kappa+1)-th elements by |a_ij|."""
    n = idx.shape[0]
    lo, hi = k // n, k
    while lo < hi:  # largest kappa with U(kappa) <= k
        mid = (lo + hi + 1) // 2
        if np.unique(idx[:, :mid]).size <= k:
            lo = mid
        else:
            hi = mid - 1
    J = np.unique(idx[:, :lo])
    if J.size < k and lo < k:
        cand, mag = idx[:, lo], np.abs(val[:, lo])
        order = np.lexsort((cand, -mag))
        taken = set(J.tolist())
        new = [j for j in dict.fromkeys(cand[order].tolist()) if j not in taken]
        J = np.concatenate([J, np.array(new[: k - J.size], np.int64)])
    return J


def numpy_fab(pb: Problem):
    """The same FAB-top-k round in NumPy: a loop over clients, then the server."""
    X, y, ptr, p = np.asarray(pb.data.X), pb.data.y.astype(int), pb.data.client_ptr, pb.p
    D = CLASSES * FEATURES
    W, A = np.zeros((CLASSES, FEATURES)), np.zeros((CLIENTS, D))
    rng = np.random.default_rng(0)

    def step():
        idx = np.empty((CLIENTS, K_ELEMENTS), np.int64)
        for i in range(CLIENTS):
            rows = ptr[i] + rng.choice(ROWS, BATCH, replace=False)
            Z = X[rows] @ W.T
            G = np.exp(Z - logsumexp(Z, axis=1, keepdims=True))
            G[np.arange(BATCH), y[rows]] -= 1.0
            A[i] += (G.T @ X[rows] / BATCH).ravel()
            top = np.argpartition(-np.abs(A[i]), K_ELEMENTS)[:K_ELEMENTS]
            idx[i] = top[np.lexsort((top, -np.abs(A[i, top])))]
        val = np.take_along_axis(A, idx, axis=1)
        b = np.zeros(D)
        np.add.at(b, idx, p[:, None] * val)
        J = fab_select(idx, val, K_ELEMENTS)
        W.reshape(-1)[J] -= 0.01 * b[J]
        in_J = np.zeros(D, bool)
        in_J[J] = True
        rows_i = np.repeat(np.arange(CLIENTS), K_ELEMENTS)
        hit = in_J[idx.ravel()]
        A[rows_i[hit], idx.ravel()[hit]] = 0.0

    return step


def bench(seconds: float) -> list[dict]:
    """One row per round kind: its best time in ms, and its ratio to send-all's round."""
    pb = problem()
    with threadpool_limits(1):  # NumPy's products on one BLAS thread, as numba's clients use
        times = {name: best_time(ours(pb, name), seconds) for name in METHODS}
        times["numpy FAB round"] = best_time(numpy_fab(pb), seconds)
    return [
        {
            "round": name,
            "ms": t * 1e3,
            "x send-all": t / times["sendall"],
            "D": pb.n_params,
            "clients": CLIENTS,
            "k": K_ELEMENTS,
            "batch": BATCH,
        }
        for name, t in times.items()
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    rows = bench(args.seconds)
    print(f"D = {rows[0]['D']}, {CLIENTS} clients, batch {BATCH}, k = {K_ELEMENTS}")
    print(f"{'round':20s} {'ms':>9s} {'x send-all':>11s}")
    for r in rows:
        print(f"{r['round']:20s} {r['ms']:9.1f} {r['x send-all']:11.2f}")


if __name__ == "__main__":
    main()
