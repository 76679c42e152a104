"""Each kernel's rate beside the machine's limit, both measured in this run, on one thread.

    python benchmarks/limits.py               # about two minutes; prints the table
    python benchmarks/run.py --only limits    # the same, kept in benchmarks/results.json

Limits: the FMA rate (six independent chains of ``<8 x double>`` fused multiply-adds, two
flops a lane), DGEMM and SGEMM of 1,000 x 1,000 matrices (NumPy's BLAS, one thread), the read
bandwidth (a vectorised sum of 1 GiB). Kernels, each against the limit its work meets:

- margins: ``kernels.margins_columns`` of a cohort of 15 models sharing a 200-column support
  on 100,000 dense samples (Simulation II's evaluation): ``2 n |support| C`` flops / FMA rate;
- losses: ``kernels.client_losses_from_margins`` (100 clients), ns a sample; the logistic
  loss also against our own ``exp`` and ``log1p`` alone in a loop, the floor of its arithmetic
  (softmax, 10 classes, takes libm's ``exp`` a class: linear numerics 2);
- local step: ``kernels.losses.descend``, 10 random rows of d = 1,000 (logistic), the rows'
  bytes a second / read bandwidth;
- layer: ``kernels.layers.gemm``, a 784-100-10 network's first layer at batch 32 (32 x 784 by
  784 x 100), float64 / DGEMM and float32 / SGEMM.

Each figure is the best over at least ``--seconds`` (this machine is shared).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # one thread: the peaks are a core's
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import numba  # noqa: E402
import numpy as np  # noqa: E402
from numba import njit  # noqa: E402

from fedsparse import kernels as K  # noqa: E402
from fedsparse.kernels.elementary import exp_minus, log1p_from_exp  # noqa: E402
from fedsparse.kernels.layers import BLAS_N, gemm  # noqa: E402
from fedsparse.kernels.losses import descend  # noqa: E402
from fedsparse.kernels.simd import hsum, vfma, vsplat  # noqa: E402

GiB = 1 << 30
CHAINS_FLOPS = 6 * 8 * 2  # chains x lanes x (multiply + add) an iteration


def best_of(fn, repeat: int = 5, min_seconds: float = 0.0) -> float:
    """Minimum wall time of ``fn()`` over ``repeat`` calls (after one warm-up call),
    continuing until ``min_seconds`` have passed."""
    fn()
    times = []
    start = time.perf_counter()
    while len(times) < repeat or time.perf_counter() - start < min_seconds:
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


@njit
def fma_chains(n, x):
    """``n`` iterations of six independent ``<8 x double>`` FMA chains: twelve AVX2 registers
    (sixteen in all, so eight chains would spill), as many in flight as two FMA units of
    five cycles' latency need; six AVX-512 registers, a little under what they need."""
    b, c = vsplat(0.9999999), vsplat(1e-9)
    a0 = a1 = a2 = a3 = a4 = a5 = vsplat(x)
    for _ in range(n):
        a0 = vfma(a0, b, c)
        a1 = vfma(a1, b, c)
        a2 = vfma(a2, b, c)
        a3 = vfma(a3, b, c)
        a4 = vfma(a4, b, c)
        a5 = vfma(a5, b, c)
    one = vsplat(1.0)
    return hsum(vfma(a0, one, vfma(a1, one, vfma(a2, one, vfma(a3, one, vfma(a4, one, a5))))))


@njit(fastmath={"reassoc"})
def streaming_sum(a):
    """A sum with vector accumulators: bound by memory, not by the adder's latency."""
    s = 0.0
    for i in range(a.shape[0]):  # indexing, not iteration: only this form vectorises
        s += a[i]
    return s


@njit(error_model="numpy")
def logistic_arithmetic(v, out):
    """``log(1 + e^-|v|)`` of every entry by our own exp and log1p: the logistic loss's
    arithmetic with nothing else (no labels, no sums), in the kernel's two loops."""
    for i in range(v.shape[0]):
        out[i] = exp_minus(abs(v[i]))
    for i in range(v.shape[0]):
        out[i] = log1p_from_exp(out[i], abs(v[i]))


@njit
def steps(X, y, R, W, loss, stepsize, G, s):
    for t in range(R.shape[0]):
        descend(X, y, R[t], W, loss, 0.0, stepsize, G, s)


def machine(seconds: float) -> dict:
    n = 2_000_000
    fma = n * CHAINS_FLOPS / best_of(lambda: fma_chains(n, 1.0), 3, seconds)
    ones = np.ones(GiB // 8)
    read = GiB / best_of(lambda: streaming_sum(ones), 3, seconds)
    ones = None  # 1 GiB back before the kernels' data
    rates = {"fma_GFLOPs": fma / 1e9, "read_GBps": read / 1e9}
    for name, dtype in (("dgemm", np.float64), ("sgemm", np.float32)):
        A = np.random.default_rng(0).random((1000, 1000)).astype(dtype)
        rates[f"{name}_GFLOPs"] = 2e9 / best_of(lambda A=A: A @ A, 3, seconds) / 1e9
    return rates


def margins(seconds: float, fma_GFLOPs: float) -> dict:
    rng = np.random.default_rng(1)
    n, d, C, support = 100_000, 1_000, 15, 200
    Xt = np.ascontiguousarray(rng.standard_normal((d, n)))
    checks = K.column_checks(Xt)
    cols = rng.choice(d, support, replace=False)
    Ws = np.zeros((C, 1, d))
    Ws[:, 0, cols] = rng.standard_normal((C, support))
    M = np.empty((C, 1, n))
    dt = best_of(lambda: K.margins_columns(Xt, checks, Ws, M), 3, seconds)
    rate = 2 * n * support * C / dt / 1e9
    by_size = {}  # where a cohort's time goes: the first tile reads the data, later ones add
    for size in (1, 2, 3, 4, 8, 12, 13, 15):
        M = np.empty((size, 1, n))
        by_size[size] = best_of(
            lambda W=Ws[:size], M=M: K.margins_columns(Xt, checks, W, M), 3, seconds / 2
        )
    return {
        "kernel": "margins, cohort of 15",
        "time": f"{dt / C * 1e3:.2f} ms a model",
        "rate": f"{rate:.1f} GFLOP/s",
        "of_limit": rate / fma_GFLOPs,
        "limit": "FMA",
        "by_cohort_size_ms": {k: v * 1e3 for k, v in by_size.items()},
        "data_MB": n * support * 8 / 1e6,
    }


def losses(seconds: float) -> list[dict]:
    rng = np.random.default_rng(2)
    n, clients = 100_000, 100
    ptr = np.linspace(0, n, clients + 1).astype(np.int64)
    rows = []
    floor_out = np.empty(n)
    v = rng.standard_normal(n) * 3
    floor = best_of(lambda: logistic_arithmetic(v, floor_out), 3, seconds) / n
    for loss, c, y in (
        ("least_squares", 1, rng.standard_normal(n)),
        ("logistic", 1, np.sign(rng.standard_normal(n))),
        ("softmax", 10, rng.integers(0, 10, n).astype(np.float64)),
    ):
        M = rng.standard_normal((c, n)) * 3
        W = np.zeros((c, 1))
        code = K.LOSS_CODES[loss]
        dt = (
            best_of(
                lambda M=M, y=y, W=W, code=code: K.client_losses_from_margins(
                    M, y, ptr, code, W, 0.0
                ),
                3,
                seconds,
            )
            / n
        )
        row = {
            "kernel": f"losses, {loss}",
            "time": f"{dt * 1e9:.2f} ns a sample",
            "rate": "",
            "of_limit": None,
            "limit": "",
        }
        if loss == "logistic":
            row.update(of_limit=floor / dt, limit=f"its exp and log1p alone: {floor * 1e9:.2f} ns")
        rows.append(row)
    return rows


def local_step(seconds: float, read_GBps: float) -> dict:
    rng = np.random.default_rng(3)
    n, d, b, T = 100_000, 1_000, 10, 2_000
    X = rng.standard_normal((n, d))
    y = np.sign(rng.standard_normal(n))
    R = rng.integers(0, n, (T, b))
    W = np.zeros((1, d))
    G, s = np.zeros_like(W), np.empty(1)
    dt = best_of(lambda: steps(X, y, R, W, K.LOGISTIC, 1e-3, G, s), 3, seconds) / T
    rate = b * d * 8 / dt / 1e9
    return {
        "kernel": "local step, logistic, 10 rows",
        "time": f"{dt * 1e6:.2f} µs a step",
        "rate": f"{rate:.1f} GB/s of rows",
        "of_limit": rate / read_GBps,
        "limit": "read",
    }


def layer(seconds: float, rates: dict) -> list[dict]:
    m, k, n = 32, 784, 100
    rows = []
    for dtype, peak in ((np.float64, "dgemm"), (np.float32, "sgemm")):
        rng = np.random.default_rng(4)
        A, B = rng.random(m * k).astype(dtype), rng.random(k * n).astype(dtype)
        C = np.empty(m * n, dtype)
        dt = best_of(
            lambda A=A, B=B, C=C: gemm(BLAS_N, BLAS_N, m, n, k, 1.0, A, B, 0.0, C), 3, seconds
        )
        rate = 2 * m * k * n / dt / 1e9
        rows.append(
            {
                "kernel": f"layer 32x784 by 784x100, {np.dtype(dtype).name}",
                "time": f"{dt * 1e6:.1f} µs",
                "rate": f"{rate:.1f} GFLOP/s",
                "of_limit": rate / rates[f"{peak}_GFLOPs"],
                "limit": peak.upper(),
            }
        )
    return rows


def run(seconds: float = 2.0) -> dict:
    """Measure the limits then every kernel on one numba thread; print the table; return both."""
    threads = numba.get_num_threads()
    numba.set_num_threads(1)
    try:
        return _run(seconds)
    finally:
        numba.set_num_threads(threads)


def _run(seconds: float) -> dict:
    rates = machine(seconds)
    print(
        f"limits, one thread: FMA {rates['fma_GFLOPs']:.1f} GFLOP/s, DGEMM "
        f"{rates['dgemm_GFLOPs']:.1f}, SGEMM {rates['sgemm_GFLOPs']:.1f} GFLOP/s, read "
        f"{rates['read_GBps']:.1f} GB/s",
        flush=True,
    )
    rows = [
        margins(seconds, rates["fma_GFLOPs"]),
        *losses(seconds),
        local_step(seconds, rates["read_GBps"]),
        *layer(seconds, rates),
    ]
    print(f"  {'kernel':40s} {'time':>22s} {'rate':>22s}  of the limit")
    for r in rows:
        share = (
            r["limit"] if r["of_limit"] is None else f"{100 * r['of_limit']:5.0f} % of {r['limit']}"
        )
        print(f"  {r['kernel']:40s} {r['time']:>22s} {r['rate']:>22s}  {share}", flush=True)
    sizes = rows[0]["by_cohort_size_ms"]
    print(
        f"  margins by cohort size (ms a call; the support's columns are "
        f"{rows[0]['data_MB']:.0f} MB, {rows[0]['data_MB'] / sizes[1]:.1f} GB/s read alone): "
        + ", ".join(f"{k}: {v:.1f}" for k, v in sizes.items()),
        flush=True,
    )
    return {"machine": rates, "kernels": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--seconds", type=float, default=2.0, help="least time a figure's best is taken over"
    )
    run(parser.parse_args().seconds)


if __name__ == "__main__":
    main()
