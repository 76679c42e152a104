"""Speed of one round of each personalised-family method, next to NumPy and DGEMM.

    python benchmarks/sfedhp.py                # about three minutes on 2 cores
    python benchmarks/sfedhp.py --seconds 0.2  # quicker, noisier

``bench(seconds)`` returns the table's rows (for ``benchmarks/run.py``); ``main()`` prints it.

The sFedHP paper's two settings (spec seed-002 §4.2) on its data layout: 20 clients of 450 rows
(setting 2, 900 images per label in all), |D| = 20, R = 20, K = 5, eta = 0.05, 4 edges x 5
clients, lambda = 20, FedProx mu = 0.001, HeurFedAMP alpha = 0.5, gamma = 0:

* convex: multinomial logistic regression 784 -> 10 with a bias (d = 7,850; with the bias it
  runs through the network kernels, as config/sfedhp-convex.yaml does);
* DNN: 784-100-10 ReLU (Remark 1's 79,510 parameters; config/sfedhp-quick.yaml's network).

Random rows of that shape (the timings do not depend on the values). Every figure is the best
of repeated timings over ``seconds`` (the machine is shared and runs slow in spells).

fedsparse: ``Algorithm.round`` (sFedHP, pFedMe and HierFAVG run a round in one parallel
kernel, FedProx and HeurFedAMP the proximal-step kernel, Per-FedAvg and FedAvg their own) on
``numba.get_num_threads()`` threads, one BLAS thread each; NumPy: the same round written plainly
(a loop over clients, one matrix product per layer and pass) on one BLAS thread.

FLOPs count the matrix products a gradient executes, 2 per multiply-add: forward and weight
gradients 2 b sum_l(in_l out_l) each, the deltas of the layers after the first 2 b in_l out_l
(nobody computes the input's); times the gradients one client takes in a round (R for FedAvg,
FedProx, HierFAVG and HeurFedAMP, R K for sFedHP and pFedMe, 2 R + 1 for Per-FedAvg) and the 20
clients. The DGEMM peak is NumPy's ``a @ a`` (n = 3000, benchmarks/mlp.py) on one BLAS thread,
times the threads the code ran on.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numba
import numpy as np
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parent))

from mlp import best_time, work_dgemm  # noqa: E402

from fedsparse.algorithms import ALGORITHMS  # noqa: E402
from fedsparse.data import FederatedData  # noqa: E402
from fedsparse.objective.problem import Problem  # noqa: E402

CLIENTS, ROWS, FEATURES, CLASSES = 20, 450, 784, 10
B, R, K, EDGES, ETA, LAM, L2 = 20, 20, 5, 4, 0.05, 20.0, 1e-4
SETTINGS = {
    "convex (MLR 784-10 + bias)": {"kind": "linear", "bias": True},
    "DNN 784-100-10": {"kind": "mlp", "hidden": [100], "activation": "relu"},
}
PARAMS = {
    "sfedhp": {"lambda1": LAM, "lambda2": LAM, "edges": EDGES, "edge_rounds": R, "inner_steps": K},
    "pfedme": {"lambda": LAM, "local_steps": R, "inner_steps": K},
    "fedavg": {"local_steps": R, "batch_size": B},
    "hierfavg": {"local_steps": 1, "edge_rounds": R, "edges": EDGES},
    "fedprox": {"local_steps": R, "mu": 0.001},
    "perfedavg": {"local_steps": R},
    "heurfedamp": {"local_steps": R, "alpha_self": 0.5},
}
GRADIENTS = {
    "sfedhp": R * K,
    "pfedme": R * K,
    "fedavg": R,
    "hierfavg": R,
    "fedprox": R,
    "perfedavg": 2 * R + 1,
    "heurfedamp": R,
}


def data(seed: int = 0) -> FederatedData:
    rng = np.random.default_rng(seed)
    n = CLIENTS * ROWS
    return FederatedData(
        name="random",
        task="multiclass",
        X=rng.random((n, FEATURES)),
        y=rng.integers(0, CLASSES, n).astype(float),
        client_ptr=np.arange(0, n + 1, ROWS, dtype=np.int64),
        n_classes=CLASSES,
    )


def grad_flops(sizes, b: int) -> float:
    """Matrix-product FLOPs of one minibatch gradient (no delta for the input layer)."""
    prods = [i * o for i, o in zip(sizes[:-1], sizes[1:], strict=True)]
    return 4.0 * b * sum(prods) + 2.0 * b * sum(prods[1:])


class NumpyRounds:
    """One round of each method in plain NumPy: flat parameters (W_l then b_l per layer), a
    ReLU network (no hidden layer: softmax regression), softmax loss, ridge l2."""

    def __init__(self, fd: FederatedData, sizes, w0: np.ndarray, seed: int = 0):
        self.X, self.y, self.ptr = fd.X, fd.y.astype(np.int64), fd.client_ptr
        self.sizes, self.w = tuple(sizes), w0.copy()
        self.rng = np.random.default_rng(seed)
        self.thetas = np.repeat(w0[None], CLIENTS, axis=0)  # HeurFedAMP's client models

    def layers(self, w):
        out, pos = [], 0
        for i, o in zip(self.sizes[:-1], self.sizes[1:], strict=True):
            out.append((w[pos : pos + o * i].reshape(o, i), w[pos + o * i : pos + o * i + o]))
            pos += o * i + o
        return out

    def batch(self, c: int) -> np.ndarray:
        lo, n = self.ptr[c], self.ptr[c + 1] - self.ptr[c]
        return lo + self.rng.choice(n, B, replace=False)

    def grad(self, w, rows) -> np.ndarray:
        layers = self.layers(w)
        a, acts = self.X[rows], []
        for k, (W, b) in enumerate(layers):
            acts.append(a)
            a = a @ W.T + b
            if k < len(layers) - 1:
                a = np.maximum(a, 0.0)
        p = np.exp(a - a.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        p[np.arange(len(rows)), self.y[rows]] -= 1.0
        delta, parts = p / len(rows), []
        for k in range(len(layers) - 1, -1, -1):
            W, _ = layers[k]
            parts = [(delta.T @ acts[k]).ravel(), delta.sum(axis=0), *parts]
            if k > 0:
                delta = (delta @ W) * (acts[k] > 0.0)
        return np.concatenate(parts) + L2 * w

    def sgd(self, c: int, w, steps: int, anchor=None, mu: float = 0.0):
        for _ in range(steps):
            g = self.grad(w, self.batch(c))
            w = w - ETA * (g if anchor is None else g + mu * (w - anchor))
        return w

    def fedavg(self):
        self.w = np.mean([self.sgd(c, self.w, R) for c in range(CLIENTS)], axis=0)

    def fedprox(self):
        self.w = np.mean([self.sgd(c, self.w, R, self.w, 0.001) for c in range(CLIENTS)], axis=0)

    def hierfavg(self):
        J, edges = CLIENTS // EDGES, []
        for e in range(EDGES):
            w_e = self.w
            for _ in range(R):
                w_e = np.mean([self.sgd(c, w_e, 1) for c in range(e * J, (e + 1) * J)], axis=0)
            edges.append(w_e)
        self.w = np.mean(edges, axis=0)

    def prox_steps(self, c: int, theta, anchor, lam: float):
        rows = self.batch(c)  # one minibatch reused for the K steps
        for _ in range(K):
            theta = theta - ETA * (self.grad(theta, rows) + lam * (theta - anchor))
        return theta

    def pfedme(self):
        out = []
        for c in range(CLIENTS):
            w, theta = self.w.copy(), self.w.copy()
            for _ in range(R):
                theta = self.prox_steps(c, theta, w, LAM)
                w = w - ETA * LAM * (w - theta)
            out.append(w)
        self.w = np.mean(out, axis=0)

    def sfedhp(self):
        J, edges = CLIENTS // EDGES, []
        for e in range(EDGES):
            w_i, phi_i = self.w.copy(), self.w.copy()
            thetas = {c: self.w.copy() for c in range(e * J, (e + 1) * J)}
            for _ in range(R):
                phis = []
                for c in thetas:
                    thetas[c] = self.prox_steps(c, thetas[c], phi_i, LAM)
                    phis.append((LAM * thetas[c] + LAM * w_i) / (2 * LAM))
                phi_i = np.mean(phis, axis=0)
                w_i = w_i - ETA * LAM * (w_i - phi_i)
            edges.append(w_i)
        self.w = np.mean(edges, axis=0)

    def perfedavg(self):
        out = []
        for c in range(CLIENTS):
            w = self.w
            for _ in range(R):
                temp = w - ETA * self.grad(w, self.batch(c))
                w = w - ETA * self.grad(temp, self.batch(c))
            out.append(w)
        self.w = np.mean(out, axis=0)
        self.thetas = np.stack(
            [self.w - ETA * self.grad(self.w, self.batch(c)) for c in range(CLIENTS)]
        )

    def heurfedamp(self, alpha: float = 0.5, sigma: float = 1.0, lam: float = 1.0):
        flat = self.thetas
        norms = np.linalg.norm(flat, axis=1)
        safe = np.where(norms > 0, norms, 1.0)  # a zero model is orthogonal to all (cos 0)
        cos = flat @ flat.T / np.outer(safe, safe)
        U = np.empty_like(flat)
        for i in range(CLIENTS):
            z = sigma * np.delete(cos[i], i)
            e = np.exp(z - z.max())
            U[i] = alpha * flat[i] + (1 - alpha) * (e / e.sum()) @ np.delete(flat, i, axis=0)
        self.thetas = np.stack([self.sgd(c, U[c], R, U[c], lam) for c in range(CLIENTS)])
        self.w = self.thetas.mean(axis=0)


def dgemm_gflops(seconds: float) -> float:
    """NumPy's DGEMM on one BLAS thread (benchmarks/mlp.py's), GFLOP/s."""
    with threadpool_limits(1, user_api="blas"):
        return work_dgemm(seconds)["gflops"]


def _round_timer(algo):
    t = [0]

    def run():
        algo.round(t[0])
        t[0] += 1

    return run


def bench(seconds: float) -> list[dict]:
    """Rows ``setting, method, fedsparse_ms, numpy_ms, speedup, gflops, peak_fraction``
    (fedsparse's GFLOP/s and its fraction of the DGEMM peak of the threads it ran), with
    ``numpy_gflops``, ``numpy_peak_fraction`` (of one thread's peak), fedsparse on one numba
    thread (``fedsparse_1thread_ms``, ``peak_fraction_1thread``: the like-for-like comparison
    with one-thread NumPy), ``threads``, ``gflop``, ``dgemm_1thread_gflops``."""
    fd = data()
    threads = numba.get_num_threads()
    peak1 = dgemm_gflops(seconds)
    rows = []
    for setting, model in SETTINGS.items():
        pb = Problem(fd, "softmax", L2, "uniform", model)  # networks: one BLAS thread
        sizes = tuple(int(s) for s in pb.sizes)
        for name, params in PARAMS.items():
            cls = ALGORITHMS[name]
            algo = cls(pb, cls.validate_params({"stepsize": ETA, **params}), 0)
            algo.setup()
            ref = NumpyRounds(fd, sizes, algo.model.ravel())
            flops = CLIENTS * GRADIENTS[name] * grad_flops(sizes, B)
            ours = _round_timer(algo)
            with threadpool_limits(1, user_api="blas"):
                a, b = best_time(ours, seconds), best_time(getattr(ref, name), seconds)
            numba.set_num_threads(1)
            try:
                one = best_time(ours, seconds)
            finally:
                numba.set_num_threads(threads)
            rows.append(
                {
                    "setting": setting,
                    "method": name,
                    "fedsparse_ms": a * 1e3,
                    "numpy_ms": b * 1e3,
                    "speedup": b / a,
                    "gflops": flops / a / 1e9,
                    "peak_fraction": flops / a / 1e9 / (threads * peak1),
                    "numpy_gflops": flops / b / 1e9,
                    "numpy_peak_fraction": flops / b / 1e9 / peak1,
                    "fedsparse_1thread_ms": one * 1e3,
                    "speedup_1thread": b / one,
                    "peak_fraction_1thread": flops / one / 1e9 / peak1,
                    "threads": threads,
                    "gflop": flops / 1e9,
                    "dgemm_1thread_gflops": peak1,
                }
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=1.0)
    args = parser.parse_args()
    rows = bench(args.seconds)
    n, peak = rows[0]["threads"], rows[0]["dgemm_1thread_gflops"]
    print(
        f"fedsparse on {n} numba threads (one BLAS thread each), NumPy on one BLAS thread; "
        f"DGEMM peak {peak:.1f} GFLOP/s per thread; best of repeated timings"
    )
    head = (
        f"{'setting':27s} {'method':11s} {'GFLOP':>6s} {f'fedsparse {n}t':>13s} {'GFLOP/s':>8s} "
        f"{'of peak':>7s} {'fedsparse 1t':>13s} {'of peak':>7s} {'NumPy 1t':>11s} "
        f"{'GFLOP/s':>8s} {'of peak':>7s} {'speedup':>7s} {'1t vs 1t':>8s}"
    )
    print(head)
    for r in rows:
        print(
            f"{r['setting']:27s} {r['method']:11s} {r['gflop']:6.2f} {r['fedsparse_ms']:10.1f} ms "
            f"{r['gflops']:8.1f} {r['peak_fraction']:7.0%} {r['fedsparse_1thread_ms']:10.1f} ms "
            f"{r['peak_fraction_1thread']:7.0%} {r['numpy_ms']:8.1f} ms {r['numpy_gflops']:8.1f} "
            f"{r['numpy_peak_fraction']:7.0%} {r['speedup']:6.2f}x {r['speedup_1thread']:7.2f}x"
        )


if __name__ == "__main__":
    main()
