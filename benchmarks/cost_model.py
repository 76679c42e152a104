"""The cost model's estimates against measured CPU time, for shapes of every kind.

    python benchmarks/cost_model.py                 # every case (about 10 minutes)
    python benchmarks/cost_model.py --only mlp      # cases whose name holds "mlp"
    python benchmarks/cost_model.py --results results/gs-quick \
        --configfile config/gs-quick.yaml scripts/toy/gs-toy.yaml   # a finished sweep's jobs

Each case is a run config; the benchmark loads its data once, runs it once for a couple of
rounds (kernels compiled or loaded from numba's cache, buffers warmed), then at ``rounds``
and measures the process's CPU time (every thread's) of that run. The estimate is
:func:`fedsparse.sweep.cost.run_seconds` for the same config on the loaded data's shape at this
machine's rates (:func:`fedsparse.sweep.machine.host_rates`). Printed: each case's measured and
estimated core-seconds and their ratio; the model is meant to be within a factor 1.5 for
linear models and 2 for networks. ``--json FILE`` keeps the rows.

The machine is shared and noisy: run it idle, and read the ratio, not the seconds.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

SIM2 = {"kind": "synthetic", "task": "linear", "alpha": 1.0, "beta": 1.0}
SIM2_LOGISTIC = {"kind": "synthetic", "task": "logistic", "alpha": 1.0, "beta": 1.0}
FMNIST = {"kind": "idx", "source": "fashion-mnist"}
DIRICHLET = {"kind": "dirichlet", "clients": 20, "alpha": 0.5}
LEAF_SMALL = [
    {"conv": {"out": 32, "kernel": 5, "stride": 1, "padding": "same"}},
    {"pool": {"kind": "max", "size": 2}},
    {"conv": {"out": 32, "kernel": 5, "stride": 1, "padding": "same"}},
    {"pool": {"kind": "max", "size": 2}},
    {"dense": 256},
]


def case(name, kind, data, model, algorithm, params, rounds, partition="natural", every=1):
    return {
        "name": name,
        "kind": kind,
        "config": {
            "dataset": {**data, "name": name},
            "model": model,
            "partition": partition,
            "algorithm": algorithm,
            "params": params,
            "rounds": rounds,
            "seed": 0,
            "eval_every": every,
        },
    }


HT = {"stepsize": 0.0001, "local_steps": 5, "sparsity": 200, "batch_size": 10}
SPARSE_FILE = Path("/tmp/fedsparse-cost-model/sparse.svm")
SPARSE = {"kind": "svmlight", "path": str(SPARSE_FILE), "task": "binary"}

CASES = [
    case(
        "sparse-logistic-fedht",
        "linear",
        SPARSE,
        {"loss": "logistic"},
        "fedht",
        {**HT, "stepsize": 0.01},
        100,
        {"kind": "iid", "clients": 20},
    ),
    case("sim2-fedht", "linear", SIM2, {"loss": "least_squares"}, "fedht", HT, 200),
    case(
        "sim2-logistic-fediterht",
        "linear",
        SIM2_LOGISTIC,
        {"loss": "logistic"},
        "fediterht",
        {**HT, "stepsize": 0.01},
        200,
    ),
    case(
        "sim2-distiht-every5",
        "linear",
        SIM2,
        {"loss": "least_squares"},
        "distiht",
        {**HT, "local_steps": 1},
        400,
        every=5,
    ),
    case(
        "fmnist-softmax-fedavg",
        "linear",
        FMNIST,
        {"loss": "softmax"},
        "fedavg",
        {"stepsize": 0.05, "local_steps": 10, "batch_size": 32},
        30,
        DIRICHLET,
    ),
    case(
        "fmnist-softmax-ssca",
        "linear",
        FMNIST,
        {"loss": "softmax"},
        "ssca",
        {"batch_size": 100},
        30,
        {"kind": "iid", "clients": 10},
    ),
    case(
        "fmnist-mlp100-fedavg",
        "network",
        FMNIST,
        {"kind": "mlp", "loss": "softmax", "hidden": [100]},
        "fedavg",
        {"stepsize": 0.05, "local_steps": 10, "batch_size": 20},
        20,
        DIRICHLET,
        every=5,
    ),
    case(
        "fmnist-mlp500-200-sfedhp",
        "network",
        FMNIST,
        {"kind": "mlp", "loss": "softmax", "hidden": [500, 200]},
        "sfedhp",
        {"edge_rounds": 4, "inner_steps": 5, "batch_size": 20, "edges": 4},
        4,
        {"kind": "label_cycle", "clients": 20, "scope": "total"},
        every=2,
    ),
    case(
        "fmnist-mlp200-fabtopk",
        "network",
        FMNIST,
        {"kind": "mlp", "loss": "softmax", "hidden": [200]},
        "fabtopk",
        {"stepsize": 0.01, "batch_size": 32, "k": 1000},
        100,
        {"kind": "dirichlet", "clients": 156, "alpha": 0.3},
        every=20,
    ),
    case(
        "fmnist-cnn-f32-periodick",
        "network",
        FMNIST,
        {"kind": "cnn", "loss": "softmax", "layers": LEAF_SMALL, "dtype": "float32"},
        "periodick",
        {"stepsize": 0.01, "batch_size": 32, "k": 970},
        20,
        {"kind": "dirichlet", "clients": 156, "alpha": 0.3},
        every=20,
    ),
]


def write_sparse_file(path: Path, rows: int = 20_000, cols: int = 50_000, per_row: int = 60):
    """A random sparse binary data set in svmlight format (the sparse case's data)."""
    if path.is_file():
        return
    import numpy as np
    import scipy.sparse as sp
    from sklearn.datasets import dump_svmlight_file

    rng = np.random.default_rng(0)
    indices = np.sort(rng.integers(0, cols, (rows, per_row)), axis=1).ravel()
    indptr = np.arange(0, rows * per_row + 1, per_row)
    X = sp.csr_matrix((rng.random(rows * per_row), indices, indptr), shape=(rows, cols))
    X.sum_duplicates()
    y = np.where(X @ rng.standard_normal(cols) > 0, 1, -1)
    path.parent.mkdir(parents=True, exist_ok=True)
    dump_svmlight_file(X, y, str(path), zero_based=False)


def shape_of(data):
    """The cost model's view of a loaded data set."""
    import scipy.sparse as sp

    from fedsparse.sweep.cost import DataShape

    X = data.X
    sparse = sp.issparse(X)
    rows, cols = X.shape
    nnz = X.nnz if sparse else rows * cols
    test = data.y_test.shape[0] if data.has_test else 0
    return DataShape(rows, cols, nnz, sparse, data.n_clients, data.n_classes, 0, test)


def measure(spec: dict, rates) -> dict:
    from fedsparse.sweep.cost import run_seconds
    from fedsparse.training.config import normalize_run_config
    from fedsparse.training.experiment import load_dataset, run_result

    cfg = normalize_run_config(spec["config"])
    data = load_dataset(cfg["dataset"], cfg["model"]["loss"], cfg["partition"])
    warm = normalize_run_config({**spec["config"], "rounds": 2, "eval_every": 1})
    run_result(warm, data)
    start, wall = time.process_time(), time.perf_counter()
    result = run_result(cfg, data)
    cpu, wall = time.process_time() - start, time.perf_counter() - wall
    last = result.trace.slice(result.trace.num_rows - 1).to_pylist()[0]
    if last["status"] != "ok" and last["round"] < cfg["rounds"]:
        raise SystemExit(f"{spec['name']}: stopped at round {last['round']} ({last['status']})")
    estimate = run_seconds(cfg, shape_of(data), rates=rates)
    return {
        "case": spec["name"],
        "kind": spec["kind"],
        "rounds": cfg["rounds"],
        "measured_cpu_s": round(cpu, 3),
        "measured_wall_s": round(wall, 3),
        "estimated_s": round(estimate, 3),
        "ratio": round(estimate / cpu, 2),
    }


def finished_sweep(results: Path, configs: list[Path], rates) -> list[dict]:
    """Each shard job of a finished sweep: its estimate at ``rates`` against the CPU time
    Snakemake's benchmark file recorded for it (start-up, runs and their writing)."""
    import yaml

    from fedsparse.sweep import plan_sweep
    from fedsparse.sweep.cost import known_shape, shard_seconds

    def merge(into: dict, update: dict) -> None:  # as snakemake --configfile A B merges them
        for key, value in update.items():
            if isinstance(value, dict) and isinstance(into.get(key), dict):
                merge(into[key], value)
            else:
                into[key] = value

    sweep: dict = {}
    for path in configs:
        merge(sweep, yaml.safe_load(path.read_text()))
    import pyarrow.parquet as pq

    plan = plan_sweep(sweep)
    # the shards as the sweep ran them (an older plan may have cut them elsewhere), each run
    # with its flags in today's plan
    planned = {r.run_id: r for r in plan.runs}
    ran = pq.read_table(results / "runs.parquet", columns=["run_id", "shard"]).to_pydict()
    shards: dict[str, list] = {}
    for run_id, shard in zip(ran["run_id"], ran["shard"], strict=True):
        shards.setdefault(shard, []).append(planned[run_id])
    order = {r.run_id: i for i, r in enumerate(plan.runs)}
    rows = []
    for shard, runs in shards.items():
        runs.sort(key=lambda r: order[r.run_id])
        found = list((results / "benchmarks" / "shards").glob(f"{shard}.*.tsv"))
        if len(found) != 1:
            continue
        fields = found[0].read_text().splitlines()
        measured = dict(zip(fields[0].split("\t"), fields[-1].split("\t"), strict=True))
        entry = plan.datasets[runs[0].dataset]
        shape = known_shape(entry["data"], results / "data" / runs[0].dataset)
        estimate = shard_seconds(
            [r.config for r in runs],
            shape,
            siblings=[r.sibling for r in runs],
            cohorts=[r.cohort for r in runs],
            rates=rates,
        )
        cpu = float(measured["cpu_time"])
        rows.append(
            {
                "shard": shard,
                "runs": len(runs),
                "measured_cpu_s": cpu,
                "estimated_s": round(estimate, 2),
                "ratio": round(estimate / cpu, 2) if cpu > 0 else None,
                "max_rss_mb": float(measured["max_rss"]),
            }
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help="cases whose name contains this")
    parser.add_argument("--json", type=Path, help="also write the rows to this file")
    parser.add_argument(
        "--results",
        type=Path,
        help="instead: a finished sweep's folder, each shard job's estimate against its "
        "measured CPU time (give the sweep's config files with --configfile)",
    )
    parser.add_argument("--configfile", type=Path, nargs="+", default=[])
    args = parser.parse_args()
    from fedsparse.objective.problem import one_blas_thread
    from fedsparse.sweep.machine import host_rates

    if args.results:
        rows = finished_sweep(args.results, args.configfile, host_rates())
        print(f"{'shard':40} {'runs':>4} {'measured':>9} {'estimated':>9} {'est/meas':>8}")
        for row in rows:
            print(
                f"{row['shard']:40} {row['runs']:4d} {row['measured_cpu_s']:8.1f}s "
                f"{row['estimated_s']:8.1f}s {row['ratio']:8.2f}"
            )
        measured = sum(r["measured_cpu_s"] for r in rows)
        estimated = sum(r["estimated_s"] for r in rows)
        print(
            f"{'all':40} {sum(r['runs'] for r in rows):4d} {measured:8.1f}s {estimated:8.1f}s "
            f"{estimated / measured:8.2f}"
        )
        if args.json:
            args.json.write_text(json.dumps(rows, indent=1))
        return

    one_blas_thread()
    write_sparse_file(SPARSE_FILE)
    rates = host_rates()
    print(
        f"rates of {rates.host}: DGEMM {rates.dgemm / 1e9:.1f}, SGEMM {rates.sgemm / 1e9:.1f} "
        f"GFLOP/s, {rates.bandwidth / 1e9:.1f} GB/s"
    )
    rows = []
    print(f"{'case':32} {'rounds':>6} {'measured':>9} {'estimated':>9} {'est/meas':>8}")
    for spec in CASES:
        if args.only and args.only not in spec["name"]:
            continue
        row = measure(spec, rates)
        rows.append(row)
        print(
            f"{row['case']:32} {row['rounds']:6d} {row['measured_cpu_s']:8.2f}s "
            f"{row['estimated_s']:8.2f}s {row['ratio']:8.2f}",
            flush=True,
        )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
