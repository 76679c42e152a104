"""The cost model's estimates against measured CPU time, for shapes of every kind.

    python benchmarks/cost_model.py                 # every case (about 10 minutes)
    python benchmarks/cost_model.py --only mlp      # cases whose name holds "mlp"
    python benchmarks/cost_model.py --results results/gs-quick \
        --configfile config/gs-quick.yaml scripts/toy/gs-toy.yaml   # a finished sweep's jobs
    python benchmarks/cost_model.py --split --repeat 2   # paper-shape network runs by term

Each case is a run config; the benchmark loads its data once, runs it once for a couple of
rounds (kernels compiled or loaded from numba's cache, buffers warmed), then at ``rounds``
and measures the process's CPU time (every thread's) of that run. The estimate is
:func:`fedsparse.sweep.cost.run_seconds` for the same config on the loaded data's shape at this
machine's rates (:func:`fedsparse.sweep.machine.host_rates`). Printed: each case's measured and
estimated core-seconds and their ratio; the model is meant to be within a factor 1.5 for
linear models and 2 for networks. ``--json FILE`` keeps the rows.

``--split`` measures runs of the papers' network shapes (:data:`SPLIT_CASES`: Fig. 4 of
gradient sparsification, 156 clients of a 784-100-10 MLP at batch 32; sFedHP's Fig. 3, 20
clients, 100 proximal steps a round) as a shard job runs them, on one numba thread: a few
rounds of the algorithm, then each term of the model by itself where the algorithm's kernels
allow it (the clients' gradients and residuals, their top-k selections, one evaluation), each
scaled to the paper-length run and printed beside the model's term at rates measured in the
same repeat (:func:`fedsparse.sweep.machine.measure`).

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


# Paper-shape network runs, measured term by term (--split): the Fig. 4 runs of gradient
# sparsification (config/gs-fig4-writer-mix.yaml and its FedAvg) and an sFedHP Fig. 3 run
# (config/sfedhp-fig3-fmnist.yaml). ``rounds`` is the paper's run the terms are scaled to;
# ``measured`` how many of its rounds are timed.
FIG4 = {
    "data": FMNIST,
    "partition": {"kind": "writer_mix", "clients": 156, "writers": 156, "alpha": 0.3},
    "model": {
        "kind": "mlp",
        "loss": "softmax",
        "l2": 0,
        "hidden": [100],
        "activation": "relu",
        "weights": "samples",
        "init": {"kind": "glorot", "seed": 0},
    },
    "rounds": 6000,
    "eval_every": 20,
}
FIG4_GS = {"stepsize": 0.01, "batch_size": 32, "k": 179}
FIG3 = {
    "data": FMNIST,
    "partition": {
        "kind": "label_cycle",
        "clients": 20,
        "labels_per_client": 5,
        "train_per_label": 900,
        "test_per_label": 300,
        "scope": "total",
    },
    "model": {
        "kind": "mlp",
        "loss": "softmax",
        "l2": 1.0e-4,
        "hidden": [100],
        "activation": "relu",
        "init": {"kind": "glorot", "seed": 0},
    },
    "rounds": 800,
    "eval_every": 5,
}
FIG3_GRID = {
    "stepsize": 0.05,
    "inner_stepsize": 0.05,
    "inner_steps": 5,
    "edge_rounds": 20,
    "edges": 4,
    "lambda1": 25,
    "lambda2": 25,
    "rho": 6.0e-5,
    "zero_tol": 1.0e-4,
    "batch_size": 20,
}
SPLIT_CASES = [
    ("fig4-fabtopk", FIG4, "fabtopk", FIG4_GS, 40),
    ("fig4-utopk", FIG4, "utopk", FIG4_GS, 40),
    ("fig4-periodick", FIG4, "periodick", {**FIG4_GS, "charge": "authors_code"}, 40),
    ("fig4-sendall", FIG4, "sendall", {"stepsize": 0.01, "batch_size": 32}, 40),
    (
        "fig4-fedavg-222",
        {**FIG4, "rounds": 28, "eval_every": 1},
        "fedavg",
        {"stepsize": 0.01, "batch_size": 32, "local_steps": 222},
        3,
    ),
    (
        "fig3-sfedhp",
        FIG3,
        "sfedhp",
        {
            **FIG3_GRID,
            "gamma1": 0.001,
            "gamma2": 0.001,
            "gamma_tiny": 1.0e-5,
            "density_floor": 0.2,
            "gamma2_rounds": 100,
        },
        3,
    ),
    (
        "fig3-pfedme",
        FIG3,
        "pfedme",
        {
            "stepsize": 0.05,
            "inner_stepsize": 0.05,
            "inner_steps": 5,
            "lambda": 25,
            "local_steps": 20,
            "batch_size": 20,
        },
        3,
    ),
]


def _cpu(fn, repeats: int = 1) -> float:
    """CPU seconds (every thread's) of one call of ``fn``, the mean of ``repeats``."""
    start = time.process_time()
    for _ in range(repeats):
        fn()
    return (time.process_time() - start) / repeats


def measure_split(spec: tuple, rates) -> dict:
    """One :data:`SPLIT_CASES` case: its measured terms and the model's, both in core-seconds
    of the paper-length run, and the model's estimate of the whole run against the sum of the
    measured terms (rounds and evaluations)."""
    import numpy as np

    from fedsparse.algorithms import ALGORITHMS
    from fedsparse.objective.problem import Problem
    from fedsparse.sweep.cost import run_terms
    from fedsparse.training.config import normalize_run_config
    from fedsparse.training.experiment import load_dataset

    name, shape_spec, algorithm, params, timed = spec
    cfg = normalize_run_config(
        {
            "dataset": {**shape_spec["data"], "name": name},
            "model": shape_spec["model"],
            "partition": shape_spec["partition"],
            "algorithm": algorithm,
            "params": params,
            "rounds": shape_spec["rounds"],
            "seed": 0,
            "eval_every": shape_spec["eval_every"],
        }
    )
    data = load_dataset(cfg["dataset"], cfg["model"]["loss"], cfg["partition"])
    problem = Problem.from_config(data, cfg["model"])
    cls = ALGORITHMS[algorithm]
    alg = cls(problem, cls.resolved_params(cfg["params"]), 0)
    alg.time_model = {"step_time": 1.0, "round_latency": 0.0, "exchange_time": 10.0}
    alg.setup()
    alg.round(0)  # kernels compiled or loaded, buffers warmed
    per_round = _cpu(lambda: [alg.round(t) for t in range(1, timed + 1)]) / timed
    rounds, clients = cfg["rounds"], problem.n_clients
    measured = {"round": per_round * rounds}
    if hasattr(alg, "offers"):  # gradient sparsification: its round's parts
        from fedsparse.families.gradient_sparsification import kernels as gs

        A = alg.A.copy()  # the residuals as the timed rounds left them
        accumulate = _cpu(lambda: alg._accumulate(0), 3)
        g = np.full(A.shape[1], 1e-12)
        add = _cpu(lambda: [np.add(a, g, out=a) for a in alg.A], 3)
        k = int(params.get("k", 0)) if alg.k else 0
        topk = 0.0
        if k:
            sel, counts, out = alg.sel[0], alg.counts[0], np.empty(k, np.int64)
            topk = _cpu(lambda: [gs.top_k(a, k, sel, counts, out) for a in A], 3)
        alg.A[:] = A
        measured["steps"] = (accumulate - add) * rounds
        measured["passes"] = (per_round - accumulate - topk + add) * rounds
        measured["selections"] = topk * rounds
    W = alg.model
    problem.metrics(W)  # the evaluation kernels compiled
    evaluation = _cpu(lambda: problem.metrics(W), 2)
    personal = alg.personal_models
    if personal is not None:
        problem.personal_metrics(personal)
        evaluation += _cpu(lambda: problem.personal_metrics(personal), 2)
    evaluations = -(-rounds // cfg["eval_every"]) + 1
    measured["evaluations"] = evaluation * evaluations
    model = run_terms(cfg, shape_of(data), rates=rates)
    total = measured["round"] + measured["evaluations"]
    return {
        "case": name,
        "clients": clients,
        "rounds": rounds,
        "timed_rounds": timed,
        "per_client_round_ms": round(1e3 * per_round / clients, 4),
        "measured": {key: round(v, 1) for key, v in measured.items()},
        "model": {key: round(v, 1) for key, v in model.items()},
        "measured_cpu_s": round(total, 1),
        "estimated_s": round(sum(model.values()), 1),
        "ratio": round(sum(model.values()) / total, 2),
    }


def print_split(row: dict) -> None:
    """One --split row: the run's total and each term, measured / modelled."""
    m, e = row["measured"], row["model"]
    rounds_model = sum(v for key, v in e.items() if key not in ("evaluations", "overhead"))
    parts = [f"rounds {m['round']:7.0f}/{rounds_model:<7.0f}"]
    for key in ("steps", "passes", "selections"):
        if key in m:
            parts.append(f"{key} {m[key]:6.0f}/{e.get(key, 0):<6.0f}")
    if e.get("tanh"):
        parts.append(f"(tanh {e['tanh']:.0f})")
    parts.append(f"evaluations {m['evaluations']:5.0f}/{e['evaluations']:<5.0f}")
    print(
        f"{row['case']:16} {row['measured_cpu_s']:8.0f}s {row['estimated_s']:8.0f}s "
        f"{row['ratio']:5.2f}  " + "  ".join(parts),
        flush=True,
    )


def split(repeat: int) -> list[dict]:
    """--split: every case of :data:`SPLIT_CASES` ``repeat`` times, rates measured afresh
    before each repeat."""
    import numba

    from fedsparse.sweep.machine import measure as measure_rates

    numba.set_num_threads(1)  # as a shard job (threads: 1)
    rows = []
    for r in range(repeat):
        rates = measure_rates()
        print(
            f"repeat {r + 1}: DGEMM {rates.dgemm / 1e9:.1f} GFLOP/s, "
            f"{rates.bandwidth / 1e9:.1f} GB/s; measured / model, core-seconds of the "
            "paper-length run"
        )
        print(f"{'case':16} {'measured':>9} {'estimated':>9} {'ratio':>5}  terms")
        for spec in SPLIT_CASES:
            row = measure_split(spec, rates)
            row["repeat"] = r + 1
            rows.append(row)
            print_split(row)
    return rows


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
    parser.add_argument(
        "--split",
        action="store_true",
        help="instead: the paper-shape network runs (SPLIT_CASES), measured term by term",
    )
    parser.add_argument("--repeat", type=int, default=1, help="--split: times to measure")
    args = parser.parse_args()
    from fedsparse.objective.problem import one_blas_thread
    from fedsparse.sweep.machine import host_rates

    if args.split:
        one_blas_thread()
        rows = split(args.repeat)
        if args.json:
            args.json.write_text(json.dumps(rows, indent=1))
        return

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
