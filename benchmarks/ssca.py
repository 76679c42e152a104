"""Speed of a mini-batch SSCA round and of one evaluation, next to NumPy and DGEMM.

    python benchmarks/ssca.py                # about a minute on 2 cores
    python benchmarks/ssca.py --seconds 0.5  # quicker, noisier

``bench(seconds)`` returns the table's rows (for ``benchmarks/run.py``); ``main()`` prints it.

The paper's setting: 10 clients of 6,000 rows, a 784-128-10 swish network without biases
(d = 101,632), B = 100 per client. Fashion-MNIST from Debian's dataset-fashion-mnist when
installed, else random data of the same shape (the timings do not depend on the values).
Every figure is the best of repeated timings over ``seconds`` (the machine is shared and
runs slow in spells; the best is the least disturbed).

* round: ``SSCA.round`` (the clients' minibatch gradients in parallel numba threads, one
  BLAS thread each, then the server's recursions in one parallel pass) against the same
  round in NumPy (a loop over clients, one matrix product per layer, then the server's
  vector expressions);
* evaluation: ``Problem.metrics``, i.e. F and accuracy on all 60,000 training rows and
  accuracy on the 10,000 test rows (the blocked numba forward pass), against the same in
  NumPy (whole-matrix products).

FLOPs count the matrix products only, 2 per multiply-add: a round is 10 clients x (forward
2 B d + weight gradients 2 B d + hidden delta 2 B 10 128), an evaluation 2 x 70,000 x d.
The DGEMM peak is NumPy's ``a @ a`` (n = 2000) on one BLAS thread, times the threads a
kernel runs (DGEMM scales with cores: measured 53 -> 105 GFLOP/s on this 2-core machine):
``fedsparse`` uses ``numba.get_num_threads()`` threads, NumPy one BLAS thread (as in every
run: ``Problem`` sets BLAS to one thread). ``numpy_mt_ms``: NumPy with BLAS on as many
threads as numba, where this process's BLAS allows more than one (None otherwise).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numba
import numpy as np
from scipy.special import expit, logsumexp
from threadpoolctl import threadpool_info, threadpool_limits

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fedsparse.algorithms import SSCA  # noqa: E402
from fedsparse.data import FederatedData  # noqa: E402
from fedsparse.objective.problem import Problem  # noqa: E402

MODEL = {"kind": "mlp", "hidden": [128], "activation": "swish", "bias": False}
CLIENTS, B, HIDDEN, CLASSES = 10, 100, 128, 10
DGEMM_N = 2000


def data() -> tuple[FederatedData, str]:
    try:
        from fedsparse.training.config import normalize_run_config
        from fedsparse.training.experiment import load_dataset

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
                y=rng.integers(0, CLASSES, n).astype(float),
                client_ptr=np.linspace(0, n, CLIENTS + 1).astype(np.int64),
                n_classes=CLASSES,
                X_test=rng.random((10_000, 784)),
                y_test=rng.integers(0, CLASSES, 10_000).astype(float),
            ),
            "random rows",
        )


def blas_can_use(threads: int) -> bool:
    """Whether NumPy's BLAS in this process can run ``threads`` threads."""
    with threadpool_limits(threads, user_api="blas"):
        return all(
            i["num_threads"] >= threads for i in threadpool_info() if i["user_api"] == "blas"
        )


class NumpySSCA:
    """Algorithm 1's round and the evaluation, written plainly in NumPy."""

    def __init__(self, fd: FederatedData, p: np.ndarray, w: np.ndarray, seed: int = 0):
        self.X, self.y = np.asarray(fd.X), fd.y.astype(np.int64)
        self.Xt, self.yt = np.asarray(fd.X_test), fd.y_test.astype(np.int64)
        self.ptr, self.p = fd.client_ptr, p
        self.w = w.copy()
        self.beta, self.acc = np.zeros_like(w), np.zeros_like(w)
        self.rng = np.random.default_rng(seed)
        self.t = 1

    def layers(self, w):
        d = self.X.shape[1]
        return w[: HIDDEN * d].reshape(HIDDEN, d), w[HIDDEN * d :].reshape(CLASSES, HIDDEN)

    def round(self, tau=0.1, lam=1e-5, a1=0.9, a2=0.9, alpha=0.3, extra=0.05):
        rho, gamma = a1 / self.t**alpha, a2 / self.t ** (alpha + extra)
        self.t += 1
        w = self.w
        W1, W2 = self.layers(w)
        g = np.zeros_like(w)
        for i in range(CLIENTS):
            rows = self.ptr[i] + self.rng.choice(self.ptr[i + 1] - self.ptr[i], B, replace=False)
            x = self.X[rows]
            z = x @ W1.T
            s = expit(z)
            h = z * s
            o = h @ W2.T
            D = np.exp(o - logsumexp(o, axis=1, keepdims=True))
            D[np.arange(B), self.y[rows]] -= 1.0
            D /= B
            d1 = (D @ W2) * (s * (1.0 + z * (1.0 - s)))
            g += self.p[i] * np.concatenate([(d1.T @ x).ravel(), (D.T @ h).ravel()])
        self.beta *= 1.0 - rho
        self.beta += rho * w
        self.acc *= 1.0 - rho
        self.acc += rho * (g - 2.0 * tau * w)
        w_bar = (self.acc + 2.0 * lam * self.beta) / (-2.0 * tau)
        w *= 1.0 - gamma
        w += gamma * w_bar

    def evaluate(self, w):
        W1, W2 = self.layers(w)
        out = []
        for X, y in ((self.X, self.y), (self.Xt, self.yt)):
            z = X @ W1.T
            o = (z * expit(z)) @ W2.T
            loss = (logsumexp(o, axis=1) - o[np.arange(len(y)), y]).mean()
            out.append((loss, np.mean(np.argmax(o, axis=1) == y)))
        return out


def interleaved_best(fns: dict, seconds: float, slice_s: float = 0.25, min_reps: int = 3) -> dict:
    """Best wall time of each ``fns[name]()`` over about ``seconds``: the functions take turns,
    each called repeatedly for ``slice_s`` (at least once) per turn, so that on a shared
    machine each gets the same chances at the quiet spells, short ones many calls."""
    for fn in fns.values():
        fn()  # warm up (compilation, caches, thread pools)
    best = dict.fromkeys(fns, float("inf"))
    start, turns = time.perf_counter(), 0
    while turns < min_reps or time.perf_counter() - start < seconds:
        for name, fn in fns.items():
            t_end = time.perf_counter() + slice_s
            while True:
                t = time.perf_counter()
                fn()
                now = time.perf_counter()
                best[name] = min(best[name], now - t)
                if now >= t_end:
                    break
        turns += 1
    return best


def bench(seconds: float) -> list[dict]:
    """Rows ``name, fedsparse_ms, numpy_ms, speedup, gflops, peak_fraction`` (fedsparse's
    GFLOP/s and its fraction of the DGEMM peak of the threads it ran), with ``numpy_gflops``,
    ``numpy_peak_fraction`` (of one thread's peak), ``numpy_mt_ms``, fedsparse on one numba
    thread (``fedsparse_1thread_ms``, ``speedup_1thread``, ``peak_fraction_1thread``: the
    like-for-like comparison with one-thread NumPy, and the one least disturbed by other
    processes on a shared machine), ``threads``, ``gflop``, ``dgemm_1thread_gflops``, ``data``.

    Each row's timings (and a DGEMM of n = DGEMM_N on one BLAS thread) are interleaved over
    about ``seconds``, best of each."""
    fd, source = data()
    pb = Problem(fd, "softmax", 0.0, "samples", MODEL)  # sets BLAS to one thread
    threads = numba.get_num_threads()
    algo = SSCA(pb, SSCA.validate_params({"batch_size": B}), 0)
    algo.setup()
    ref = NumpySSCA(fd, pb.p, algo.w)
    t = [0]

    def ours_round():
        algo.round(t[0])
        t[0] += 1

    def one_thread(fn):
        def run():
            numba.set_num_threads(1)
            try:
                fn()
            finally:
                numba.set_num_threads(threads)

        return run

    a = np.random.default_rng(0).random((DGEMM_N, DGEMM_N))
    c = np.empty_like(a)

    def dgemm():
        with threadpool_limits(1, user_api="blas"):
            np.dot(a, a, out=c)

    W = algo.model.copy()
    d, n_eval = pb.n_params, fd.n_samples + fd.y_test.shape[0]
    cases = [
        (
            "round, B = 100 x 10 clients",
            ours_round,
            ref.round,
            CLIENTS * (4.0 * B * d + 2.0 * B * CLASSES * HIDDEN),
        ),
        (
            "evaluation: F + accuracy on 60k, accuracy on 10k",
            lambda: pb.metrics(W),
            lambda: ref.evaluate(W.reshape(-1)),
            2.0 * n_eval * d,
        ),
    ]
    multi = threads > 1 and blas_can_use(threads)
    rows = []
    for name, ours, numpy_fn, flops in cases:
        fns = {"ours": ours, "ours_1": one_thread(ours), "numpy": numpy_fn, "dgemm": dgemm}
        if multi:

            def numpy_mt(fn=numpy_fn):
                with threadpool_limits(threads, user_api="blas"):
                    fn()

            fns["numpy_mt"] = numpy_mt
        best = interleaved_best(fns, seconds)
        peak1 = 2.0 * DGEMM_N**3 / best["dgemm"] / 1e9
        a_, b_, one = best["ours"], best["numpy"], best["ours_1"]
        rows.append(
            {
                "name": name,
                "fedsparse_ms": a_ * 1e3,
                "numpy_ms": b_ * 1e3,
                "speedup": b_ / a_,
                "gflops": flops / a_ / 1e9,
                "peak_fraction": flops / a_ / 1e9 / (threads * peak1),
                "numpy_gflops": flops / b_ / 1e9,
                "numpy_peak_fraction": flops / b_ / 1e9 / peak1,
                "numpy_mt_ms": best["numpy_mt"] * 1e3 if multi else None,
                "fedsparse_1thread_ms": one * 1e3,
                "speedup_1thread": b_ / one,
                "peak_fraction_1thread": flops / one / 1e9 / peak1,
                "threads": threads,
                "gflop": flops / 1e9,
                "dgemm_1thread_gflops": peak1,
                "data": source,
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    rows = bench(args.seconds)
    r0 = rows[0]
    peaks = ", ".join(f"{r['dgemm_1thread_gflops']:.1f}" for r in rows)
    print(
        f"data: {r0['data']}; fedsparse on {r0['threads']} numba threads (one BLAS thread "
        f"each) and on 1, NumPy on one BLAS thread; DGEMM peak per thread {peaks} GFLOP/s "
        "(measured beside each row); best of interleaved timings"
    )
    n = r0["threads"]
    print(
        f"{'':50s} {'GFLOP':>6s} {f'fedsparse {n}t':>12s} {'GFLOP/s':>8s} {'of peak':>7s} "
        f"{'fedsparse 1t':>12s} {'of peak':>7s} {'NumPy 1t':>10s} {'GFLOP/s':>8s} "
        f"{'of peak':>7s} {'speedup':>7s} {'1t vs 1t':>8s} {f'NumPy {n}t':>10s}"
    )
    for r in rows:
        mt = "-" if r["numpy_mt_ms"] is None else f"{r['numpy_mt_ms']:7.1f} ms"
        print(
            f"{r['name']:50s} {r['gflop']:6.3f} {r['fedsparse_ms']:9.1f} ms {r['gflops']:8.1f} "
            f"{r['peak_fraction']:7.0%} {r['fedsparse_1thread_ms']:9.1f} ms "
            f"{r['peak_fraction_1thread']:7.0%} {r['numpy_ms']:7.1f} ms {r['numpy_gflops']:8.1f} "
            f"{r['numpy_peak_fraction']:7.0%} {r['speedup']:6.2f}x {r['speedup_1thread']:7.2f}x "
            f"{mt:>10s}"
        )


if __name__ == "__main__":
    main()
