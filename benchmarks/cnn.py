"""Speed of the cnn kernels (leaf_femnist on 28 x 28 x 1), float64 and float32, next to
NumPy and the measured DGEMM and SGEMM peaks.

    python benchmarks/cnn.py                         # one step, and a round of 20 x 10 steps
    python benchmarks/cnn.py --clients 4 --steps 5   # a smaller round, quicker

Prints a table, writes nothing. Times are the best of repeated runs over ``--seconds``
(the machine is shared). FLOPs of one SGD step of batch b: 2 b sum(patches * kernel
weights) forward for each conv and 2 b (in * out) for each dense layer, three times that
for forward + backward (the first layer's input delta, which nobody computes, included).

Compared, in float64 and float32 (``model.dtype``): our kernels' ``mlp_batch_grad`` (a
gradient into float64 G from float64 theta: in float32 that includes rounding theta to
float32 and adding the float32 gradient into G, 2 D conversions), one client's step as a
round runs it (``mlp_local_sgd_round`` on one client, per step: the float32 copy of the
model is made once per round), a whole round on all numba threads (one BLAS thread each),
and a straightforward NumPy implementation (im2col through ``sliding_window_view``,
products through ``@``, one BLAS thread) in each dtype. The peaks are 3000 x 3000 products
by SciPy's ``dgemm``/``sgemm`` on one thread: the OpenBLAS the kernels call (its core type
is printed). PyTorch is timed where installed (float32, 1 and 2 intra-op threads, the same network
with our parameters loaded, its gradient checked against ours).
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # before NumPy loads (see kernels.network)

import numpy as np  # noqa: E402
from numpy.lib.stride_tricks import sliding_window_view  # noqa: E402

from fedsparse import kernels as K  # noqa: E402
from fedsparse.kernels.prox import StepModel  # noqa: E402
from fedsparse.objective.model import Network, normalize  # noqa: E402
from fedsparse.objective.problem import one_blas_thread  # noqa: E402


def best_time(fn, seconds: float, min_reps: int = 2, warm: bool = True) -> float:
    if warm:
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
        zero = np.zeros((), self.theta.dtype)  # ReLU's 0 in the model's dtype
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
                a = np.maximum(z, zero)
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
                a = np.maximum(z, zero) if layer.act else z
        p = np.exp(a - a.max(axis=1, keepdims=True))
        p /= p.sum(axis=1, keepdims=True)
        p[np.arange(n), y.astype(int)] -= 1
        delta = p / np.asarray(n, p.dtype)
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
                    dxp = np.zeros(padded, self.theta.dtype)
                    for ky in range(5):
                        for kx in range(5):
                            dxp[:, ky : ky + act.shape[1], kx : kx + act.shape[2]] += dcols[
                                :, :, :, ky, kx
                            ]
                    delta = dxp[:, 2:-2, 2:-2]
        g = np.concatenate([np.concatenate([gw.ravel(), gb]) for gw, gb in reversed(grads)])
        self.theta -= self.theta.dtype.type(lr) * (g + self.theta.dtype.type(l2) * self.theta)


def blas_info() -> str:
    """The OpenBLAS builds loaded (SciPy's is the one the kernels call) and their core type."""
    from threadpoolctl import threadpool_info

    return "; ".join(
        f"{os.path.basename(i['filepath']).split('-')[0]} {i.get('version')} "
        f"{i.get('architecture')} kernels, {i['num_threads']} thread(s)"
        for i in threadpool_info()
        if i["user_api"] == "blas"
    )


def gemm_peak(dtype, seconds: float, size: int = 3000) -> float:
    """FLOP/s of SciPy's ?gemm on a size^3 product (Fortran order: no copies)."""
    from scipy.linalg import blas

    a = np.asfortranarray(np.random.default_rng(0).random((size, size)), dtype=dtype)
    gemm = blas.sgemm if dtype == np.float32 else blas.dgemm
    c = np.zeros_like(a, order="F")
    return 2 * size**3 / best_time(lambda: gemm(1.0, a, a, 0.0, c, overwrite_c=True), seconds)


def measure(dtype, X, y, rows, ptr, b, clients, steps, seconds):
    """Times of our kernels and of NumPy on leaf_femnist in ``dtype``."""
    relu, softmax = K.ACTIVATIONS["relu"], K.LOSS_CODES["softmax"]
    rng = np.random.default_rng(1)
    net = Network.from_config(
        normalize({"kind": "cnn", "layers": "leaf_femnist", "dtype": dtype}), 784, 10
    )
    spec = net.kernel_sizes()
    theta0 = net.initial().ravel()
    X = K.as_kernel_matrix(X, net.dtype)  # a run's rows: float32 for a float32 network
    r = {}
    G = np.empty_like(theta0)
    work = K.mlp_work(spec, b)
    r["grad"] = best_time(
        lambda: K.mlp_batch_grad(X, y, rows, theta0, spec, True, relu, softmax, 1e-4, G, work),
        seconds,
    )
    npdt = np.dtype(dtype).type
    ref = NumpyCNN(net, theta0.astype(npdt))
    Xd = X.astype(npdt)
    r["numpy_step"] = best_time(lambda: ref.step(Xd[rows], y[rows], 0.0, 1e-4), seconds)
    # the NumPy step and ours agree (lr 0: the reference's theta stays put)
    check = NumpyCNN(net, theta0.astype(npdt))
    check.step(Xd[rows], y[rows], 1.0, 1e-4)
    tol = (1e-8, 1e-12) if dtype == "float64" else (2e-3, 2e-5 * np.abs(G).max())
    assert np.allclose(theta0.astype(npdt) - check.theta, G, rtol=tol[0], atol=tol[1])

    local = np.empty((clients, theta0.size))
    perm = np.arange(X.shape[0], dtype=np.int64)
    states = K.client_states(0, clients)
    twork = K.mlp_thread_work(spec, b)

    def ours_round(m=clients):
        K.mlp_local_sgd_round(
            X,
            y,
            ptr[: m + 1],
            theta0,
            local[:m],
            perm,
            states,
            K.SGDConstants(steps, b, 0, 0.01),
            StepModel(True, spec, True, relu, softmax, 1e-4),
            twork,
            np.array([0, theta0.size]),
        )

    r["round"] = best_time(ours_round, seconds, min_reps=1)
    # one client's steps alone (one thread), per step: a step as a round runs it
    r["step"] = best_time(lambda: ours_round(1), seconds) / steps

    def numpy_round():
        for i in range(clients):
            m = NumpyCNN(net, theta0.astype(npdt))
            for _ in range(steps):
                rr = rng.choice(200, b, replace=False) + ptr[i]
                m.step(Xd[rr], y[rr], 0.01, 1e-4)

    r["numpy_round"] = best_time(numpy_round, seconds, min_reps=1, warm=False)
    return net, r


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--batch", type=int, default=32)
    args = ap.parse_args()
    one_blas_thread()
    import numba

    load_start = os.getloadavg()[0]
    b, clients, steps = args.batch, args.clients, args.steps
    rng = np.random.default_rng(0)
    n = clients * 200
    X = rng.random((n, 784))
    y = rng.integers(0, 10, n).astype(np.float64)
    rows = rng.choice(n, b, replace=False).astype(np.int64)
    n_threads = numba.get_num_threads()
    ptr = np.arange(0, n + 1, 200, dtype=np.int64)
    results, net = {}, None
    for dtype in ("float64", "float32"):
        net, results[dtype] = measure(dtype, X, y, rows, ptr, b, clients, steps, args.seconds)
    peak = {"float64": gemm_peak(np.float64, args.seconds)}
    peak["float32"] = gemm_peak(np.float32, args.seconds)
    f = step_flops(net, b)
    print(
        f"leaf_femnist, {net.n_params:,} parameters, batch {b}; {n_threads} numba thread(s), "
        f"1 BLAS thread each; {os.cpu_count()} cores, load average {load_start:.1f} at start, "
        f"{os.getloadavg()[0]:.1f} at end (a shared machine: other processes skew the figures)"
    )
    print(f"BLAS: {blas_info()}")
    print(
        f"Peaks (SciPy ?gemm, 1 thread, 3000^3): DGEMM {peak['float64'] / 1e9:.1f}, "
        f"SGEMM {peak['float32'] / 1e9:.1f} GFLOP/s; {f / 1e9:.2f} GFLOP per step"
    )
    head = f"{'':30}{'ms':>9}{'GFLOP/s':>9}{'% peak':>8}{'NumPy ms':>10}{'x NumPy':>9}"
    print(head)
    rounds = clients * steps
    for dtype, r in results.items():
        top = peak[dtype] / 1e9
        for what, t, flops, ref, per in (
            ("grad", r["grad"], f, r["numpy_step"], 1),
            ("step in a round", r["step"], f, r["numpy_step"], 1),
            (f"round {clients}x{steps}", r["round"], rounds * f, r["numpy_round"], n_threads),
        ):
            gf = flops / t / 1e9 / per
            print(
                f"{dtype + ' ' + what:30}{t * 1e3:9.1f}{gf:9.1f}{100 * gf / top:7.0f}%"
                f"{ref * 1e3:10.1f}{ref / t:9.2f}"
            )
    print(
        "% peak: of the dtype's 1-thread peak (a round: GFLOP/s per numba thread). "
        f"float32 / float64: step {results['float64']['step'] / results['float32']['step']:.2f}x, "
        f"round {results['float64']['round'] / results['float32']['round']:.2f}x"
    )
    try:
        import torch
    except ImportError:
        print("PyTorch: not installed (no comparison)")
        return
    print(f"PyTorch {torch.__version__} CPU float32 (the same network, its gradient checked):")
    print(f"{'':30}{'ms':>9}{'GFLOP/s':>9}{'x ours':>8}")
    for threads in (1, 2):
        t = torch_times(torch, net, X, y, rows, ptr, b, clients, steps, threads, args.seconds)
        ours = results["float32"]
        for what, sec, flops, mine in (
            ("step", t["step"], f, ours["step"]),
            (f"round {clients}x{steps}", t["round"], rounds * f, ours["round"]),
        ):
            print(
                f"{f'{threads} thread(s) {what}':30}{sec * 1e3:9.1f}{flops / sec / 1e9:9.1f}"
                f"{sec / mine:8.2f}"
            )
    print("x ours: PyTorch's time over ours (ours: float32, a step on one thread, a round on all)")


def torch_model(torch, net: Network, theta: np.ndarray):
    """leaf_femnist in PyTorch with our parameters; the dense input is flattened in our
    (h, w, c) order, so our weights load unchanged."""
    nn = torch.nn
    mods = []
    for layer in net.cnn:
        if layer.kind == "conv":
            mods += [nn.Conv2d(layer.ins[2], layer.outs[2], layer.size, padding=layer.pad[0])]
            mods += [nn.ReLU()]
        elif layer.kind == "max":
            mods += [nn.MaxPool2d(layer.size)]
        else:
            if not any(isinstance(m, nn.Linear) for m in mods):
                mods += [Flatten(torch)]
            mods += [nn.Linear(layer.ins[2], layer.outs[2])] + ([nn.ReLU()] if layer.act else [])
    model = nn.Sequential(*mods)
    weights = [m for m in model if isinstance(m, nn.Conv2d | nn.Linear)]
    with torch.no_grad():
        for m, (W, bias) in zip(weights, net.split(theta), strict=True):
            if isinstance(m, nn.Conv2d):
                o, c, k, _ = m.weight.shape
                W = W.reshape(o, k, k, c).transpose(0, 3, 1, 2)
            m.weight.copy_(torch.from_numpy(np.ascontiguousarray(W, np.float32)))
            m.bias.copy_(torch.from_numpy(bias.astype(np.float32)))
    return model, weights


def Flatten(torch):  # noqa: N802 (a module factory)
    class HWCFlatten(torch.nn.Module):
        def forward(self, x):
            return x.permute(0, 2, 3, 1).flatten(1)

    return HWCFlatten()


def torch_times(torch, net, X, y, rows, ptr, b, clients, steps, threads, seconds):
    """PyTorch float32: one SGD step (loss, backward, update) and a round of FedAvg clients,
    each from the global model, with ``threads`` intra-op threads."""
    torch.set_num_threads(threads)
    theta = net.initial().ravel()
    model, weights = torch_model(torch, net, theta)
    Xt = torch.from_numpy(X.astype(np.float32)).reshape(-1, 1, 28, 28)
    yt = torch.from_numpy(y.astype(np.int64))
    lossf = torch.nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, weight_decay=1e-4)
    # the same gradient as ours (softmax loss, l2 1e-4): the same network and FLOPs
    model.zero_grad()
    lossf(model(Xt[rows]), yt[rows]).backward()
    g = np.concatenate(
        [np.concatenate([_ours(m.weight.grad.numpy()), m.bias.grad.numpy()]) for m in weights]
    )
    spec = net.kernel_sizes()
    G, t64 = np.empty_like(theta), theta.astype(np.float64)
    relu, softmax = K.ACTIVATIONS["relu"], K.LOSS_CODES["softmax"]
    Xk = K.as_kernel_matrix(X, net.dtype)
    K.mlp_batch_grad(Xk, y, rows, t64, spec, True, relu, softmax, 0.0, G, K.mlp_work(spec, b))
    assert np.allclose(g, G, rtol=1e-3, atol=1e-5 * np.abs(G).max()), "PyTorch's gradient differs"
    idx = torch.from_numpy(rows)

    def step(i=idx):
        opt.zero_grad(set_to_none=False)
        lossf(model(Xt[i]), yt[i]).backward()
        opt.step()

    start = [p.detach().clone() for p in model.parameters()]
    total = [torch.zeros_like(p) for p in start]
    gen = torch.Generator().manual_seed(0)

    def round_():
        for s in total:
            s.zero_()
        for c in range(clients):
            with torch.no_grad():
                for p, s in zip(model.parameters(), start, strict=True):
                    p.copy_(s)
            for _ in range(steps):
                step(torch.randint(int(ptr[c]), int(ptr[c + 1]), (b,), generator=gen))
            with torch.no_grad():
                for s, p in zip(total, model.parameters(), strict=True):
                    s.add_(p)

    return {
        "step": best_time(step, seconds),
        "round": best_time(round_, seconds, min_reps=1),
    }


def _ours(w: np.ndarray) -> np.ndarray:
    """A PyTorch weight in our flat layout (conv: out, kh, kw, in)."""
    return (w.transpose(0, 2, 3, 1) if w.ndim == 4 else w).ravel()


if __name__ == "__main__":
    main()
