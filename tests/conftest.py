"""Shared helpers: small federated data sets and a plain-NumPy oracle of the losses.

The oracle is written from the spec (section 4), independently of the kernels:

* least squares ``(z.w - y)**2`` (no 1/2),
* logistic ``log(1 + exp(-y z.w))`` with y in {-1, +1},
* softmax ``logsumexp(W z) - (W z)[y]``,

each as a mean over the rows plus ``l2/2 * ||W||^2``.
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.special import expit, logsumexp, softmax

from fedsparse.data import FederatedData

# The cost model at its fixed rates in every test and the workflows they start: estimates,
# time limits and shard cuts then do not depend on this machine's load (tests/test_machine.py
# measures the rates themselves).
os.environ.setdefault("FEDSPARSE_MACHINE", "nominal")

LOSSES = ("least_squares", "logistic", "softmax")
N_CLASSES = 3
# A synthetic data set of a few clients for sweep-level tests (copy it before editing).
SMALL_LINEAR = {
    "kind": "synthetic",
    "task": "linear",
    "clients": 6,
    "samples_per_client": 20,
    "dim": 40,
    "support": 5,
}


def dense(X) -> np.ndarray:
    return X.toarray() if sp.issparse(X) else np.asarray(X)


def np_loss(X, y, W, loss: str, l2: float) -> float:
    """Mean loss of all rows of ``X`` at ``W`` plus ridge."""
    Z = dense(X) @ W.T  # (n, c)
    if loss == "least_squares":
        per = (Z[:, 0] - y) ** 2
    elif loss == "logistic":
        per = np.logaddexp(0.0, -y * Z[:, 0])
    else:
        per = logsumexp(Z, axis=1) - Z[np.arange(len(y)), y.astype(int)]
    return float(per.mean() + 0.5 * l2 * np.sum(W * W))


def np_grad(X, y, W, loss: str, l2: float) -> np.ndarray:
    """Gradient of :func:`np_loss` with respect to ``W``."""
    Xd = dense(X)
    n = len(y)
    Z = Xd @ W.T
    if loss == "least_squares":
        R = (2.0 * (Z[:, 0] - y))[:, None]
    elif loss == "logistic":
        R = (-y * expit(-y * Z[:, 0]))[:, None]
    else:
        R = softmax(Z, axis=1)
        R[np.arange(n), y.astype(int)] -= 1.0
    return R.T @ Xd / n + l2 * W


def np_hard_threshold(x: np.ndarray, tau: int) -> np.ndarray:
    """H_tau of a vector: keep the tau largest |x| (NaN largest), ties to the lower index."""
    x = np.asarray(x, dtype=np.float64)
    n = x.shape[0]
    if tau >= n:
        return x.copy()
    mag = np.abs(x)
    isnan = np.isnan(mag)
    mag = np.where(isnan, np.inf, mag)
    # lexsort: last key is primary -> NaN first, then descending |x|, then index
    order = np.lexsort((np.arange(n), -mag, ~isnan))
    out = np.zeros_like(x)
    keep = order[: max(tau, 0)]
    out[keep] = x[keep]
    return out


def np_hard_threshold_rows(W: np.ndarray, tau: int) -> np.ndarray:
    return np.stack([np_hard_threshold(row, tau) for row in W])


def make_data(
    loss: str,
    sizes=(10, 17, 25, 13),
    d: int = 30,
    sparse: bool = False,
    seed: int = 0,
    density: float = 0.3,
) -> FederatedData:
    """Random federated data fit for ``loss``; CSR if ``sparse``."""
    rng = np.random.default_rng(seed)
    n = int(sum(sizes))
    if sparse:
        X = sp.random(n, d, density=density, format="csr", random_state=rng, dtype=np.float64)
        X.data = rng.standard_normal(X.data.shape[0])
        X.sort_indices()
    else:
        X = rng.standard_normal((n, d))
    w = np.zeros(d)
    w[: d // 3] = rng.standard_normal(d // 3)
    margin = dense(X) @ w
    if loss == "least_squares":
        y, task, n_classes = margin + 0.1 * rng.standard_normal(n), "regression", 0
    elif loss == "logistic":
        y = np.where(margin + 0.3 * rng.standard_normal(n) > 0, 1.0, -1.0)
        task, n_classes = "binary", 0
    else:
        y = rng.integers(0, N_CLASSES, size=n).astype(np.float64)
        y[:N_CLASSES] = np.arange(N_CLASSES)  # every class present
        task, n_classes = "multiclass", N_CLASSES
    ptr = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
    return FederatedData(
        name=f"test-{loss}-{'csr' if sparse else 'dense'}",
        task=task,
        X=X,
        y=y,
        client_ptr=ptr,
        n_classes=n_classes,
    )


@pytest.fixture(params=[False, True], ids=["dense", "csr"])
def sparse(request) -> bool:
    return request.param


def run_sweep(root, cfg: dict):
    """The results folder the workflow would write for sweep ``cfg`` under ``root``: data,
    every shard, the aggregate (the workflow's steps, as Snakemake runs them)."""
    from fedsparse.pipeline import steps
    from fedsparse.pipeline.shard_runner import run_shard
    from fedsparse.results.aggregate import aggregate
    from fedsparse.sweep import plan_sweep

    plan = plan_sweep(cfg)
    for name in plan.datasets:
        steps.make_data(cfg, name, root / "data" / name)
    traces, runs = [], []
    for shard in plan.shards:
        traces.append(root / "shards" / f"{shard}.parquet")
        runs.append(root / "shards" / f"{shard}.runs.parquet")
        run_shard(cfg, shard, root / "data", traces[-1], runs[-1])
    aggregate(traces, runs, root / "traces", root / "runs.parquet")
    return root


def process_tree(root: int) -> list[int]:
    """``root`` and all its descendants (pids), from /proc."""
    from pathlib import Path

    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    todo, tree = [root], []
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo.extend(children.get(pid, []))
    return tree


def kill_tree(root: int) -> None:
    """SIGKILL ``root`` and all its descendants, as a crash or a lost node would.

    Snakemake starts jobs in process groups of their own, so killing its group
    is not enough to stop the jobs.
    """
    import os
    import signal

    for pid in process_tree(root):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def file_digests(folder) -> dict[str, str]:
    """SHA-256 of every file under ``folder``, by relative path: equal means byte-identical."""
    import hashlib

    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def np_act(name, z):
    """Activation and its derivative."""
    if name == "relu":
        return np.maximum(z, 0.0), (z > 0).astype(float)
    if name == "tanh":
        t = np.tanh(z)
        return t, 1.0 - t**2
    s = expit(z)
    if name == "sigmoid":
        return s, s * (1.0 - s)
    return z * s, s + z * s * (1.0 - s)  # swish


def np_per_sample(z, y, loss):
    """Per-sample losses and d loss / d z."""
    if loss == "least_squares":
        r = z[:, 0] - y
        return r**2, 2.0 * r[:, None]
    if loss == "logistic":
        m = y * z[:, 0]
        return np.logaddexp(0.0, -m), (-y * expit(-m))[:, None]
    lab = y.astype(int)
    g = softmax(z, axis=1)
    g[np.arange(len(y)), lab] -= 1.0
    return logsumexp(z, axis=1) - z[np.arange(len(y)), lab], g
