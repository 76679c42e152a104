"""Cohorts against the same runs alone: a run's time (training and evaluation) per member.

    python benchmarks/cohorts.py              # its own table
    python benchmarks/run.py --only cohorts   # the same, into benchmarks/results.json

For each algorithm that fuses its step size, on Simulation I and II's shapes, C runs differing
only in their step size (C = 1, 5, 15, 45) are computed as one cohort
(fedsparse.training.experiment.run_cohort) and one after another alone (run_result), interleaved,
the same data in memory; per-member wall seconds of each and their ratio. Then the issue's network
case: FedAvg on an MLP 784-100-10 over the real Fashion-MNIST (Debian's dataset-fashion-mnist;
skipped without it), whose cohort computes its members one after another. Every cohort's traces
are checked equal to the runs' alone (elapsed_s aside) before a figure is printed.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from fedsparse.training.config import normalize_run_config  # noqa: E402
from fedsparse.training.experiment import load_dataset, run_cohort, run_result  # noqa: E402

SIZES = (1, 5, 15, 45)
ROUNDS = 20  # evaluated every round, as the default sweep does
CASES = {  # algorithm -> its params but the step size
    "fedht": {"sparsity": 200, "local_steps": 5, "batch_size": 10},
    "fediterht": {"sparsity": 200, "local_steps": 5, "batch_size": 10},
    "distiht": {"sparsity": 200, "local_steps": 1, "batch_size": 10},
    "fedavg": {"local_steps": 5, "batch_size": 10},
}
DATA = {
    "Simulation I": (
        {"kind": "synthetic", "task": "linear", "alpha": 0.5, "beta": 0.5},
        "least_squares",
    ),
    "Simulation II": (
        {"kind": "synthetic", "task": "logistic", "alpha": 0.5, "beta": 0.5},
        "logistic",
    ),
}


# fmnist-mlp.yaml's data and model, FedAvg as in the target (15 step sizes)
NETWORK = {
    "dataset": {"kind": "idx", "source": "fashion-mnist"},
    "partition": {"kind": "label_cycle", "clients": 20, "labels_per_client": 5,
                  "train_per_label": 2000, "test_per_label": 800, "scope": "total"},
    "model": {"kind": "mlp", "loss": "softmax", "l2": 1e-4, "hidden": [100],
              "activation": "relu", "init": {"kind": "glorot", "seed": 0}},
}  # fmt: skip
NETWORK_ROUNDS, NETWORK_SIZES = 10, (1, 5, 15)
FASHION_MNIST = Path("/usr/share/datasets/fashion-mnist")


def configs(algorithm: str, dataset: dict, loss: str, n: int) -> list[dict]:
    steps = np.geomspace(1e-4, 1e-2, n) if n > 1 else [1e-3]
    return [
        normalize_run_config(
            {
                "dataset": dataset,
                "model": {"loss": loss},
                "algorithm": algorithm,
                "params": {**CASES[algorithm], "stepsize": float(s)},
                "rounds": ROUNDS,
                "seed": 0,
            }
        )
        for s in steps
    ]


def network_configs(n: int) -> list[dict]:
    steps = np.geomspace(0.01, 0.3, n) if n > 1 else [0.1]
    params = {"local_steps": 10, "batch_size": 20}
    return [
        normalize_run_config(
            {
                **NETWORK,
                "algorithm": "fedavg",
                "params": {**params, "stepsize": float(s)},
                "rounds": NETWORK_ROUNDS,
                "eval_every": 5,
                "seed": 0,
            }
        )
        for s in steps
    ]


def same(a, b) -> bool:
    return a.drop_columns(["elapsed_s"]).equals(b.drop_columns(["elapsed_s"]))


def bench(quiet_seconds: float = 0.0, sizes=SIZES, algorithms=tuple(CASES)) -> list[dict]:
    rows = []
    for name, (dataset, loss) in DATA.items():
        data = load_dataset(dataset, loss)
        for algorithm in algorithms:
            run_result(configs(algorithm, dataset, loss, 1)[0], data)  # compiles the kernels
            for n in sizes:
                cfgs = configs(algorithm, dataset, loss, n)
                rows.append(compare(name, algorithm, cfgs, data))
    if "fedavg" in algorithms:
        if not FASHION_MNIST.is_dir():
            print(f"  MLP case skipped: no Fashion-MNIST in {FASHION_MNIST}")
            return rows
        first = network_configs(1)[0]
        data = load_dataset(first["dataset"], first["model"]["loss"], first["partition"])
        run_result(first, data)  # compiles the kernels
        for n in NETWORK_SIZES:
            rows.append(compare("F-MNIST MLP", "fedavg", network_configs(n), data))
    return rows


def compare(name: str, algorithm: str, cfgs: list[dict], data) -> dict:
    """The runs ``cfgs`` as one cohort, then alone; per-member seconds, checked traces."""
    n = len(cfgs)
    start = time.perf_counter()
    together = run_cohort([[c] for c in cfgs], data)
    fused = time.perf_counter() - start
    start = time.perf_counter()
    alone = [run_result(c, data) for c in cfgs]
    solo = time.perf_counter() - start
    if not all(same(a.trace, b[0].trace) for a, b in zip(alone, together, strict=True)):
        raise AssertionError(f"{algorithm} on {name}: a cohort changed a trace")
    print(
        f"  {name:13s} {algorithm:9s} C={n:2d}: alone {solo / n:7.3f} s a run, "
        f"cohort {fused / n:7.3f} s a member, {solo / fused:5.2f}x",
        flush=True,
    )
    return {
        "data": name,
        "algorithm": algorithm,
        "members": n,
        "alone_s_per_run": solo / n,
        "cohort_s_per_run": fused / n,
        "ratio": solo / fused,
    }


if __name__ == "__main__":
    print(
        f"cohorts ({ROUNDS} rounds, every round evaluated; "
        f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f})"
    )
    bench()
