"""Speed of the cnn kernels (leaf_femnist on 28 x 28 x 1) next to NumPy and the DGEMM peak.

    python benchmarks/cnn.py                         # one step, and a round of 20 x 10 steps
    python benchmarks/cnn.py --clients 4 --steps 5   # a smaller round, quicker

Prints a table, writes nothing. Times are the best of repeated runs over ``--seconds``
(the machine is shared). FLOPs of one SGD step of batch b: 2 b sum(patches * kernel
weights) forward for each conv and 2 b (in * out) for each dense layer, three times that
for forward + backward (the first layer's input delta, which nobody computes, included).

Compared: our kernels (``mlp_batch_grad`` for a step, ``mlp_local_sgd_round`` for a round
on all numba threads, one BLAS thread each) and a straightforward NumPy implementation
(im2col through ``sliding_window_view``, products through ``@``, one BLAS thread),
float64 both; the DGEMM peak is a 3000 x 3000 product on one BLAS thread. PyTorch is
timed where installed (float32, 1 and 2 threads). float32 kernels are not written yet.
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before NumPy loads (see kernels.mlp)

import numpy as np  # noqa: E402
from numpy.lib.stride_tricks import sliding_window_view  # noqa: E402

from fedsparse import kernels as K  # noqa: E402
from fedsparse.model import Network, normalize  # noqa: E402
from fedsparse.problem import one_blas_thread  # noqa: E402


def best_time(fn, seconds: float, min_reps: int = 2) -> float:
    fn()  # warm up: compilation, caches
    best, reps, start = float("inf"), 0, time.perf_counter()
    while reps < min_reps or time.perf_counter() - start < seconds:
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
        reps += 1
    return best


def step_flops(net: Network, b: int) -> float:
    macs = 0
    for layer in net.cnn:
        if layer.params is not None:
            out, fan_in = layer.params
            macs += out * fan_in * (layer.outs[0] * layer.outs[1] if layer.kind == "conv" else 1)
    return 6.0 * b * macs


class NumpyCNN:
    """leaf_femnist's step in plain NumPy: feature maps (n, h, w, c), ReLU, softmax."""

    def __init__(self, net: Network, theta: np.ndarray):
        self.net, self.theta = net, theta

    def step(self, X, y, lr, l2):
        net, n = self.net, X.shape[0]
        params = iter(net.split(self.theta))
        a = X.reshape(n, 28, 28, 1)
        tape = []
        for layer in net.cnn:
            if layer.kind == "conv":
                W, b = next(params)
                k, (pt, pl) = layer.size, layer.pad
                xp = np.pad(a, ((0, 0), (pt, k - 1 - pt), (pl, k - 1 - pl), (0, 0)))
                cols = sliding_window_view(xp, (k, k), axis=(1, 2))  # n, h, w, c, k, k
                cols = cols.transpose(0, 1, 2, 4, 5, 3).reshape(-1, W.shape[1])
                z = (cols @ W.T + b).reshape(n, *layer.outs)
                tape.append(("conv", W, b, cols, xp.shape, z > 0))
                a = np.maximum(z, 0.0)
            elif layer.kind == "max":
                h, w, c = layer.ins
                t = a.reshape(n, h // 2, 2, w // 2, 2, c)
                m = t.max(axis=(2, 4))
                mask = t == m[:, :, None, :, None, :]
                tape.append(("pool", mask, a.shape))
                a = m
            else:
                W, b = next(params)
                flat = a.reshape(n, -1)
                z = flat @ W.T + b
                tape.append(("dense", W, b, flat, a.shape, z > 0 if layer.act else None))
                a = np.maximum(z, 0.0) if layer.act else z
        p = np.exp(a - a.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        p[np.arange(n), y.astype(int)] -= 1.0
        delta = p / n
        grads = []
        for entry in reversed(tape):
            if entry[0] == "dense":
                _, W, b, flat, shape, act = entry
                if act is not None:
                    delta = delta * act
                grads.append((delta.T @ flat, delta.sum(axis=0)))
                delta = (delta @ W).reshape(shape)
            elif entry[0] == "pool":
                _, mask, shape = entry
                delta = (mask * delta[:, :, None, :, None, :]).reshape(shape)
            else:
                _, W, b, cols, padded, act = entry
                delta = (delta * act).reshape(-1, W.shape[0])
                grads.append((delta.T @ cols, delta.sum(axis=0)))
                if len(grads) < 4:  # not the first layer: the input's delta (col2im)
                    dcols = (delta @ W).reshape(n, *act.shape[1:3], 5, 5, -1)
                    dxp = np.zeros(padded)
                    for ky in range(5):
                        for kx in range(5):
                            dxp[:, ky : ky + act.shape[1], kx : kx + act.shape[2]] += dcols[
                                :, :, :, ky, kx
                            ]
                    delta = dxp[:, 2:-2, 2:-2]
        g = np.concatenate([np.concatenate([gw.ravel(), gb]) for gw, gb in reversed(grads)])
        self.theta -= lr * (g + l2 * self.theta)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--batch", type=int, default=32)
    args = ap.parse_args()
    one_blas_thread()
    import numba

    net = Network.from_config(normalize({"kind": "cnn", "layers": "leaf_femnist"}), 784, 10)
    spec = net.kernel_sizes()
    theta0 = net.initial().ravel()
    b, clients, steps = args.batch, args.clients, args.steps
    rng = np.random.default_rng(0)
    n = clients * 200
    X = rng.random((n, 784))
    y = rng.integers(0, 10, n).astype(np.float64)
    rows = rng.choice(n, b, replace=False).astype(np.int64)
    relu, softmax = K.ACTIVATIONS["relu"], K.LOSS_CODES["softmax"]

    a = n_threads = numba.get_num_threads()
    G = np.empty_like(theta0)
    work = K.mlp_work(spec, b)
    ours_step = best_time(
        lambda: K.mlp_batch_grad(X, y, rows, theta0, spec, True, relu, softmax, 1e-4, G, work),
        args.seconds,
    )
    ref = NumpyCNN(net, theta0.copy())
    numpy_step = best_time(lambda: ref.step(X[rows], y[rows], 0.0, 1e-4), args.seconds)
    # the NumPy step and ours agree (lr 0: the reference's theta stays put)
    check = NumpyCNN(net, theta0.copy())
    check.step(X[rows], y[rows], 1.0, 1e-4)
    assert np.allclose(theta0 - check.theta, G, rtol=1e-8, atol=1e-12)

    ptr = np.arange(0, n + 1, 200, dtype=np.int64)
    local = np.empty((clients, theta0.size))
    perm = np.arange(n, dtype=np.int64)
    states = K.client_states(0, clients)
    twork = K.mlp_thread_work(spec, b)

    def ours_round():
        K.mlp_local_sgd_round(
            X,
            y,
            ptr,
            theta0,
            local,
            perm,
            states,
            steps,
            b,
            0.01,
            spec,
            True,
            relu,
            softmax,
            1e-4,
            0,
            twork,
        )

    ours_round_t = best_time(ours_round, args.seconds, min_reps=1)

    def numpy_round():
        for i in range(clients):
            m = NumpyCNN(net, theta0.copy())
            for _ in range(steps):
                r = rng.choice(200, b, replace=False) + ptr[i]
                m.step(X[r], y[r], 0.01, 1e-4)

    numpy_round_t = best_time(numpy_round, args.seconds, min_reps=1)
    A = rng.random((3000, 3000))
    peak = 2 * 3000**3 / best_time(lambda: A @ A, args.seconds)
    f = step_flops(net, b)
    print(
        f"leaf_femnist, {net.n_params:,} parameters, batch {b}, float64, "
        f"{a} numba thread(s), 1 BLAS thread; {os.cpu_count()} cores, "
        f"load {os.getloadavg()[0]:.1f}"
    )
    print(f"DGEMM peak (1 thread, 3000^3): {peak / 1e9:.1f} GFLOP/s")
    print(f"{'':28}{'ours':>10}{'NumPy':>10}{'ours/NumPy':>12}{'ours GFLOP/s':>14}{'% peak':>8}")
    gf = f / ours_step / 1e9
    print(
        f"{'step (ms)':28}{ours_step * 1e3:10.1f}{numpy_step * 1e3:10.1f}"
        f"{numpy_step / ours_step:12.2f}{gf:14.1f}{100 * gf / (peak / 1e9):8.0f}"
    )
    gf = clients * steps * f / ours_round_t / 1e9 / n_threads
    label = f"round {clients}x{steps} (s)"
    print(
        f"{label:28}{ours_round_t:10.2f}{numpy_round_t:10.2f}"
        f"{numpy_round_t / ours_round_t:12.2f}{gf:14.1f}{100 * gf / (peak / 1e9):8.0f}"
        "  (GFLOP/s per thread)"
    )
    try:
        import torch  # noqa: F401

        print("PyTorch is installed, but its comparison is not written yet")
    except ImportError:
        print("PyTorch: not installed (no comparison)")


if __name__ == "__main__":
    main()
