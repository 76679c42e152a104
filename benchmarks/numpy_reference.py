"""A straightforward, vectorised NumPy implementation of Fed-HT / FedIter-HT / Distributed-IHT.

This is what a researcher would write by hand: per client, per local step,
draw a minibatch (``Generator.permutation``, three times faster than
``choice(replace=False)`` for small clients), take a gradient step with matrix
products, threshold with ``argpartition``. It is the baseline the benchmark
compares fedsparse's kernels with (same algorithm, same configuration, least
squares or logistic loss, dense or CSR data).
"""

from __future__ import annotations

import numpy as np


def hard_threshold(x: np.ndarray, tau: int) -> np.ndarray:
    if tau >= x.size:
        return x
    keep = np.argpartition(np.abs(x), x.size - tau)[x.size - tau :]
    out = np.zeros_like(x)
    out[keep] = x[keep]
    return out


def gradient(Z, y: np.ndarray, w: np.ndarray, loss: str, l2: float) -> np.ndarray:
    m = Z @ w
    if loss == "least_squares":
        g = Z.T @ (2.0 * (m - y)) / y.size
    else:
        g = Z.T @ (-y / (1.0 + np.exp(y * m))) / y.size
    return g + l2 * w


class NumpyHardThreshold:
    """One round at a time, like :class:`fedsparse.algorithms.FedHT` and friends."""

    def __init__(
        self,
        X,
        y,
        client_ptr,
        *,
        algorithm: str,
        stepsize: float,
        sparsity: int,
        local_steps: int,
        batch_size: int,
        loss: str,
        l2: float = 0.0,
        seed: int = 0,
    ):
        self.clients = [
            (X[a:b], y[a:b]) for a, b in zip(client_ptr[:-1], client_ptr[1:], strict=True)
        ]
        self.p = np.full(len(self.clients), 1.0 / len(self.clients))
        self.local_threshold = algorithm == "fediterht"
        self.steps = 1 if algorithm == "distiht" else local_steps
        self.gamma, self.tau, self.b, self.loss, self.l2 = stepsize, sparsity, batch_size, loss, l2
        self.rngs = [np.random.default_rng([seed, i]) for i in range(len(self.clients))]
        self.w = np.zeros(X.shape[1])

    def round(self) -> None:
        total = np.zeros_like(self.w)
        for pi, (Z, y), rng in zip(self.p, self.clients, self.rngs, strict=True):
            w = self.w.copy()
            for _ in range(self.steps):
                idx = rng.permutation(y.size)[: self.b]
                w -= self.gamma * gradient(Z[idx], y[idx], w, self.loss, self.l2)
                if self.local_threshold:
                    w = hard_threshold(w, self.tau)
            total += pi * w
        self.w = hard_threshold(total, self.tau)
