"""Speed of a mini-batch SSCA round and of one evaluation, next to NumPy (issue 19, item 5).

    python benchmarks/ssca.py                # about a minute on 2 cores
    python benchmarks/ssca.py --seconds 0.5  # quicker, noisier

The paper's setting: 10 clients of 6,000 rows, a 784-128-10 swish network without biases
(d = 101,632), B = 100 per client. Fashion-MNIST from Debian's dataset-fashion-mnist when
installed, else random data of the same shape (the timings do not depend on the values).
Prints a table, writes nothing; every figure is the best of repeated timings over
``--seconds`` (the machine is shared and runs slow in spells).

* round: ``ssca.round`` (clients' minibatch gradients in parallel numba threads, one BLAS
  thread each, then the server's recursions) against the same round in NumPy (a loop over
  clients, one matrix product per layer, BLAS on one thread as well);
* evaluation: F on all 60,000 training rows plus accuracy on 10,000 test rows (the blocked
  numba forward pass) against NumPy's forward pass for F alone.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from scipy.special import expit, logsumexp

from fedsparse.algorithms import SSCA
from fedsparse.data import FederatedData
from fedsparse.problem import Problem

MODEL = {"kind": "mlp", "hidden": [128], "activation": "swish", "bias": False}
CLIENTS, B = 10, 100


def best_time(fn, seconds: float, min_reps: int = 3) -> float:
    best, start, reps = float("inf"), time.perf_counter(), 0
    while reps < min_reps or time.perf_counter() - start < seconds:
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
        reps += 1
    return best


def data() -> tuple[FederatedData, str]:
    try:
        from fedsparse.config import normalize_run_config
        from fedsparse.experiment import load_dataset

        cfg = normalize_run_config(
            {
                "dataset": {"kind": "idx", "source": "fashion-mnist"},
                "partition": {"kind": "iid", "clients": CLIENTS},
                "model": {"loss": "softmax"},
                "algorithm": "ssca",
                "params": {},
                "rounds": 1,
            }
        )
        return load_dataset(cfg["dataset"], "softmax", cfg["partition"]), "Fashion-MNIST"
    except Exception:  # noqa: BLE001 - any failure to find the files: random rows instead
        rng = np.random.default_rng(0)
        n = 60_000
        return (
            FederatedData(
                name="random",
                task="multiclass",
                X=rng.random((n, 784)),
                y=rng.integers(0, 10, n).astype(float),
                client_ptr=np.linspace(0, n, CLIENTS + 1).astype(np.int64),
                n_classes=10,
                X_test=rng.random((10_000, 784)),
                y_test=rng.integers(0, 10, 10_000).astype(float),
            ),
            "random rows",
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    fd, source = data()
    pb = Problem(fd, "softmax", 0.0, "samples", MODEL)  # sets BLAS to one thread
    algo = SSCA(pb, SSCA.validate_params({"batch_size": B}), 0)
    algo.setup()
    algo.round(0)  # compile
    t = [1]

    def ours_round():
        algo.round(t[0])
        t[0] += 1

    X = np.asarray(fd.X)
    y = fd.y.astype(int)
    ptr = fd.client_ptr
    w = algo.w.copy()
    W1, W2 = w[: 128 * 784].reshape(128, 784), w[128 * 784 :].reshape(10, 128)
    beta, acc = np.zeros_like(w), np.zeros_like(w)
    rng = np.random.default_rng(0)

    def numpy_round():
        g = np.zeros_like(w)
        for i in range(CLIENTS):
            rows = ptr[i] + rng.choice(ptr[i + 1] - ptr[i], B, replace=False)
            x = X[rows]
            z = x @ W1.T
            s = expit(z)
            h = z * s
            o = h @ W2.T
            D = np.exp(o - logsumexp(o, axis=1, keepdims=True))
            D[np.arange(B), y[rows]] -= 1.0
            D /= B
            d1 = (D @ W2) * (s * (1.0 + z * (1.0 - s)))
            g += pb.p[i] * np.concatenate([(d1.T @ x).ravel(), (D.T @ h).ravel()])
        beta[:] = 0.1 * beta + 0.9 * w
        acc[:] = 0.1 * acc + 0.9 * (g - 0.2 * w)
        return 0.1 * w + 0.9 * (-(acc + 2e-5 * beta) / 0.2)

    W = algo.model.copy()

    def numpy_eval():
        z = X @ W1.T
        o = (z * expit(z)) @ W2.T
        return (logsumexp(o, axis=1) - o[np.arange(len(y)), y]).mean()

    rows = [
        ("round, B = 100 x 10 clients", ours_round, numpy_round),
        ("evaluation: F on 60k (+ test acc. on 10k: ours)", lambda: pb.metrics(W), numpy_eval),
    ]
    print(f"data: {source}, d = {pb.n_params}")
    print(f"{'':50s} {'fedsparse':>11s} {'NumPy':>11s}")
    for name, ours, ref in rows:
        a, b = best_time(ours, args.seconds), best_time(ref, args.seconds)
        print(f"{name:50s} {a * 1e3:8.1f} ms {b * 1e3:8.1f} ms")


if __name__ == "__main__":
    main()
