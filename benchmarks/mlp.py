"""Speed of the MLP kernels next to this machine's DGEMM/SGEMM peaks, NumPy and (if installed)
PyTorch, in float64 and float32 (``model.dtype``).

    python benchmarks/mlp.py                # about three minutes on 2 cores
    python benchmarks/mlp.py --seconds 0.5  # quicker, noisier

Prints tables, writes nothing. Every figure is the best of repeated timings over
``--seconds`` (time.perf_counter): this machine is shared and runs slow in spells.

FLOPs counted per SGD step of batch b: 2 b sum_l(in_l out_l) forward and twice
that backward, 6 b sum_l(in_l out_l) in all (biases, activations, the loss and
the update not counted). Our kernels skip the input layer's delta, so they
execute 2 b d h_1 fewer FLOPs than are counted; NumPy and PyTorch skip it too.

BLAS threads are set per measurement through the environment
(``OPENBLAS_NUM_THREADS``, ``MKL_NUM_THREADS``) of a fresh worker process, the
only way to set them without a thread-pool library: each table row says how many
BLAS threads it ran with. The round kernel runs clients in parallel numba
threads, each calling BLAS; with a multithreaded BLAS inside those threads the
two thread pools fight over the cores (see the round table), so the intended
configuration is one BLAS thread per numba thread.

float32: the same network as a float32 layer table (``Network.kernel_sizes()`` of
``model.dtype: float32``): ``grad32`` is ``mlp_batch_grad`` from float64 theta into float64
G (rounding theta and adding the float32 gradient, 2 D conversions, included), ``step32``
a step inside a float32 round; round rows name their dtype and their "% peak" is of that
dtype's GEMM peak.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from functools import partial

ARCHS = ((784, 100, 10), (784, 500, 200, 10))
BATCHES = (20, 32)
CLIENTS, ROWS_PER_CLIENT, STEPS, ROUND_BATCH = 20, 200, 100, 20
STEPSIZE, L2 = 0.01, 1e-4
DGEMM_N = 3000


def best_time(fn, seconds: float, min_reps: int = 3) -> float:
    """Best wall time of ``fn()`` over about ``seconds`` (at least ``min_reps`` calls)."""
    fn()  # warm up (compilation, caches, thread pools)
    best, reps, start = float("inf"), 0, time.perf_counter()
    while reps < min_reps or time.perf_counter() - start < seconds:
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
        reps += 1
    return best


def float32_sizes(arch):
    """The kernels' ``sizes`` of a relu MLP with bias in float32 (a layer table)."""
    from fedsparse.objective.model import Network, normalize

    model = normalize({"kind": "mlp", "hidden": list(arch[1:-1]), "dtype": "float32"})
    return Network.from_config(model, arch[0], arch[-1]).kernel_sizes()


def step_flops(sizes, b: int) -> float:
    return 6.0 * b * sum(i * o for i, o in zip(sizes[:-1], sizes[1:], strict=True))


def make_data(d: int, n_classes: int, n: int, seed: int = 0):
    import numpy as np

    rng = np.random.default_rng(seed)
    X = rng.random((n, d))  # pixel-like values in [0, 1)
    y = rng.integers(0, n_classes, n).astype(np.float64)
    return X, y


def glorot(sizes, seed: int = 1):
    """Flat parameters (W_l then b_l per layer), Glorot-uniform weights, zero biases."""
    import numpy as np

    rng = np.random.default_rng(seed)
    parts = []
    for fan_in, out in zip(sizes[:-1], sizes[1:], strict=True):
        r = np.sqrt(6.0 / (fan_in + out))
        parts += [rng.uniform(-r, r, out * fan_in), np.zeros(out)]
    return np.concatenate(parts)


# ---------------------------------------------------------------------------
# Workers (each in a fresh process whose BLAS thread count the environment fixed)


def work_dgemm(seconds: float, dtype: str = "float64") -> dict:
    import numpy as np

    a = np.random.default_rng(0).random((DGEMM_N, DGEMM_N)).astype(dtype)
    c = np.empty_like(a)
    t = best_time(lambda: np.dot(a, a, out=c), seconds)
    return {"gflops": 2.0 * DGEMM_N**3 / t / 1e9}


class NumpyMLP:
    """A straightforward NumPy SGD step: relu MLP, softmax loss, ridge, float64."""

    def __init__(self, sizes, theta):
        self.Ws, self.bs, pos = [], [], 0
        for fan_in, out in zip(sizes[:-1], sizes[1:], strict=True):
            self.Ws.append(theta[pos : pos + out * fan_in].reshape(out, fan_in).copy())
            pos += out * fan_in
            self.bs.append(theta[pos : pos + out].copy())
            pos += out

    def step(self, X, y, rows, lr, l2):
        import numpy as np

        a = X[rows]
        acts = [a]
        for W, b in zip(self.Ws[:-1], self.bs[:-1], strict=True):
            a = np.maximum(a @ W.T + b, 0.0)
            acts.append(a)
        z = a @ self.Ws[-1].T + self.bs[-1]
        p = np.exp(z - z.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        p[np.arange(len(rows)), y[rows].astype(np.int64)] -= 1.0
        delta = p / len(rows)
        for k in range(len(self.Ws) - 1, -1, -1):
            W, b = self.Ws[k], self.bs[k]
            gW, gb = delta.T @ acts[k], delta.sum(axis=0)
            if k > 0:
                delta = (delta @ W) * (acts[k] > 0.0)
            W -= lr * (gW + l2 * W)
            b -= lr * (gb + l2 * b)


def torch_step_time(sizes, X, y, rows, dtype_name: str, threads: int, seconds: float) -> float:
    import torch

    torch.set_num_threads(threads)
    dtype = getattr(torch, dtype_name)
    layers = []
    for fan_in, out in zip(sizes[:-1], sizes[1:], strict=True):
        layers += [torch.nn.Linear(fan_in, out), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers[:-1]).to(dtype)
    opt = torch.optim.SGD(model.parameters(), lr=STEPSIZE, weight_decay=L2)
    Xt = torch.from_numpy(X).to(dtype)
    yt = torch.from_numpy(y.astype("int64"))
    rt = torch.from_numpy(rows)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(model(Xt[rt]), yt[rt])
        loss.backward()
        opt.step()

    return best_time(step, seconds)


def work_steps(seconds: float, blas_threads: int) -> dict:
    import numpy as np

    from fedsparse import kernels as K
    from fedsparse.kernels.prox import StepModel

    out = {}
    for arch in ARCHS:
        sizes = np.array(arch, dtype=np.int64)
        X, y = make_data(arch[0], arch[-1], CLIENTS * ROWS_PER_CLIENT)
        theta = glorot(arch)
        G = np.empty_like(theta)
        for b in BATCHES:
            rows = np.random.default_rng(b).choice(len(y), b, replace=False).astype(np.int64)
            work = K.mlp_work(sizes, b)
            row = {}
            grad = (X, y, rows, theta, sizes, True, K.RELU, K.SOFTMAX, L2, G, work)
            row["grad"] = best_time(partial(K.mlp_batch_grad, *grad), seconds)
            # one client's SGD steps exactly as a round runs them (sampling, fused update)
            one = np.array([0, ROWS_PER_CLIENT], dtype=np.int64)
            perm = np.arange(len(y), dtype=np.int64)
            rng = K.client_states(0, 1)
            local = np.empty((1, theta.size))
            twork = K.mlp_thread_work(sizes, b)
            constants = K.SGDConstants(STEPS, b, 0, STEPSIZE)
            model = StepModel(True, sizes, True, K.RELU, K.SOFTMAX, L2)
            step = (X, y, one, theta, local, perm, rng, constants, model, twork)
            row["step"] = best_time(partial(K.mlp_local_sgd_round, *step), seconds) / STEPS
            s32 = float32_sizes(arch)
            grad = (X, y, rows, theta, s32, True, K.RELU, K.SOFTMAX, L2, G, K.mlp_work(s32, b))
            row["grad32"] = best_time(partial(K.mlp_batch_grad, *grad), seconds)
            model = StepModel(True, s32, True, K.RELU, K.SOFTMAX, L2)
            step = (*step[:8], model, K.mlp_thread_work(s32, b))
            row["step32"] = best_time(partial(K.mlp_local_sgd_round, *step), seconds) / STEPS
            ref = NumpyMLP(arch, theta)
            row["numpy"] = best_time(partial(ref.step, X, y, rows, STEPSIZE, L2), seconds)
            try:
                import torch  # noqa: F401
            except ImportError:
                pass
            else:
                for dt in ("float64", "float32"):
                    row[f"torch_{dt}"] = torch_step_time(
                        arch, X, y, rows, dt, blas_threads, seconds
                    )
            out[f"{'-'.join(map(str, arch))}/{b}"] = row
    return out


def work_round(
    seconds: float, numba_threads: int, archs, tau_fraction: float, dtype: str = "float64"
) -> dict:
    import numba
    import numpy as np

    from fedsparse import kernels as K
    from fedsparse.kernels.prox import StepModel

    numba.set_num_threads(numba_threads)
    out = {}
    for arch in archs:
        sizes = np.array(arch, dtype=np.int64) if dtype == "float64" else float32_sizes(arch)
        X, y = make_data(arch[0], arch[-1], CLIENTS * ROWS_PER_CLIENT)
        ptr = np.arange(0, len(y) + 1, ROWS_PER_CLIENT, dtype=np.int64)
        theta = glorot(arch)
        perm = np.arange(len(y), dtype=np.int64)
        rng = K.client_states(0, CLIENTS)
        local = np.empty((CLIENTS, theta.size))
        work = K.mlp_thread_work(sizes, ROUND_BATCH)
        tau = int(tau_fraction * theta.size)
        constants = K.SGDConstants(STEPS, ROUND_BATCH, tau, STEPSIZE)
        model = StepModel(True, sizes, True, K.RELU, K.SOFTMAX, L2)
        args = (X, y, ptr, theta, local, perm, rng, constants, model, work)
        t = best_time(partial(K.mlp_local_sgd_round, *args), seconds, min_reps=1)
        out["-".join(map(str, arch))] = t
    return out


# ---------------------------------------------------------------------------
# Orchestration and printing


def run_worker(args: list[str], blas_threads: int, seconds: float) -> dict:
    env = dict(os.environ)
    env["OPENBLAS_NUM_THREADS"] = str(blas_threads)
    env["MKL_NUM_THREADS"] = str(blas_threads)
    cmd = [sys.executable, __file__, "--worker", *args]
    cmd += ["--blas-threads", str(blas_threads), "--seconds", str(seconds)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"benchmark worker {' '.join(args)} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def machine_line() -> str:
    import numba

    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return (
        f"{model}, {os.cpu_count()} cores, numba {numba.__version__} "
        f"({numba.config.NUMBA_NUM_THREADS} threads)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="timing window per figure")
    parser.add_argument("--worker", nargs="+", help=argparse.SUPPRESS)
    parser.add_argument("--blas-threads", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        kind, *rest = args.worker
        if kind == "dgemm":
            result = work_dgemm(args.seconds, *rest)
        elif kind == "steps":
            result = work_steps(args.seconds, args.blas_threads)
        else:
            archs = [tuple(int(s) for s in a.split("-")) for a in rest[1].split(",")]
            result = work_round(args.seconds, int(rest[0]), archs, float(rest[2]), rest[3])
        print(json.dumps(result))
        return

    cores = os.cpu_count() or 1
    threads = sorted({1, cores})
    load_start = os.getloadavg()[0]
    progress("DGEMM")
    dgemm_seconds = max(args.seconds, 3.0)
    peak = {k: run_worker(["dgemm"], k, dgemm_seconds)["gflops"] for k in threads}
    progress("SGEMM")
    speak = {k: run_worker(["dgemm", "float32"], k, dgemm_seconds)["gflops"] for k in threads}
    steps = {}
    for k in threads:
        progress(f"SGD steps, {k} BLAS thread(s)")
        steps[k] = run_worker(["steps"], k, args.seconds)
    arch_list = ",".join("-".join(map(str, a)) for a in ARCHS)
    big = "-".join(map(str, ARCHS[-1]))
    f64, f32 = "float64", "float32"
    configs = [(cores, 1, arch_list, 0.0, args.seconds, f64)]
    configs += [(cores, 1, arch_list, 0.0, args.seconds, f32)]
    configs += [
        (1, 1, arch_list, 0.0, args.seconds, f64),
        (1, 1, arch_list, 0.0, args.seconds, f32),
    ]
    if cores > 1:  # the nested case is slow: one timed round after the warm-up
        configs += [
            (1, cores, arch_list, 0.0, args.seconds, f64),
            (cores, cores, big, 0.0, 0.0, f64),
        ]
    configs += [(cores, 1, big, 0.1, args.seconds, f64), (cores, 1, big, 0.1, args.seconds, f32)]
    rounds = []
    for nthr, bthr, archs, tau, secs, dtype in configs:
        progress(f"rounds, {nthr} numba x {bthr} BLAS thread(s), tau {tau}, {dtype}")
        times = run_worker(["round", str(nthr), archs, str(tau), dtype], bthr, secs)
        rounds += [(arch, nthr, bthr, tau, dtype, t) for arch, t in times.items()]
    # the peak once more: a busy spell during the first measurement would inflate "% peak"
    progress("DGEMM again")
    peak[max(threads)] = max(
        peak[max(threads)], run_worker(["dgemm"], max(threads), dgemm_seconds)["gflops"]
    )
    print_tables(peak, speak, steps, rounds, load_start)


def progress(what: str) -> None:
    print(f"[benchmark] {what} ...", file=sys.stderr, flush=True)


def print_tables(peak: dict, speak: dict, steps: dict, rounds: list, load_start: float) -> None:
    top_threads = max(peak)
    top = {"float64": peak[top_threads], "float32": speak[top_threads]}
    print(machine_line())
    print(
        f"load average (1 min) at start {load_start:.2f}, at end {os.getloadavg()[0]:.2f}: "
        "other processes on the machine skew the figures"
    )
    print("FLOPs per SGD step: 6 b sum(in_l * out_l) (forward 2 b sum, backward twice that)\n")
    print(f"DGEMM ({DGEMM_N} x {DGEMM_N} float64, NumPy, best of two measurements), SGEMM:")
    for k, g in peak.items():
        print(f"  {k} BLAS thread{'s' if k > 1 else ''}: {g:7.1f}, {speak[k]:7.1f} GFLOP/s")

    print("\nOne SGD step, softmax, relu, bias: ms per step (GFLOP/s)")
    print("  grad  = mlp_batch_grad (value and gradient into G)")
    print("  step  = one client's steps inside mlp_local_sgd_round (sampling + fused update)")
    print("  grad32, step32 = the same in float32 (model.dtype: float32)")
    print("  numpy = straightforward NumPy SGD step (float64); torch_* = PyTorch SGD step")
    for k, table in steps.items():
        cols = list(next(iter(table.values())))
        print(f"\n  {k} BLAS/torch thread{'s' if k > 1 else ''}")
        print("  " + f"{'network/batch':<20}" + "".join(f"{c:>19}" for c in cols))
        for key, row in table.items():
            arch, b = key.split("/")
            flops = step_flops([int(v) for v in arch.split("-")], int(b))
            cells = "".join(f"{row[c] * 1e3:9.3f} ({flops / row[c] / 1e9:5.1f})" for c in cols)
            print(f"  {key:<20}{cells}")

    print(
        f"\nWhole round: {CLIENTS} clients x {STEPS} steps, batch {ROUND_BATCH}, "
        f"softmax, relu, bias ({CLIENTS * ROWS_PER_CLIENT} rows):"
    )
    print(
        f"  {'network':<16}{'dtype':>8}{'numba thr':>10}{'BLAS thr':>9}{'tau':>6}"
        f"{'ms':>10}{'GFLOP/s':>9}{'% peak':>8}{'f64/f32':>8}"
    )
    by_key = {(arch, nthr, bthr, tau, dtype): t for arch, nthr, bthr, tau, dtype, t in rounds}
    for arch, nthr, bthr, tau, dtype, t in rounds:
        flops = CLIENTS * STEPS * step_flops([int(v) for v in arch.split("-")], ROUND_BATCH)
        g = flops / t / 1e9
        tau_txt = f"{tau:.0%}" if tau else "0"
        t64 = by_key.get((arch, nthr, bthr, tau, "float64"))
        ratio = f"{t64 / t:8.2f}" if dtype == "float32" and t64 else ""
        print(
            f"  {arch:<16}{dtype:>8}{nthr:>10}{bthr:>9}{tau_txt:>6}{t * 1e3:>10.1f}{g:>9.1f}"
            f"{100 * g / top[dtype]:>7.0f}%{ratio}"
        )
    print(
        f"% peak: of the {top_threads}-thread DGEMM ({top['float64']:.1f} GFLOP/s) or SGEMM "
        f"({top['float32']:.1f}), by dtype; f64/f32: the float64 round's time over float32's. "
        "tau: H_tau after each local step keeping that fraction of the parameters (FedIter-HT)."
    )


if __name__ == "__main__":
    main()
