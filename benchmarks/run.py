"""fedsparse benchmark suite: prints a table and writes JSON.

    python benchmarks/run.py                  # everything but the default sweep (a few minutes)
    python benchmarks/run.py --default-sweep  # also time config/config.yaml end to end
    python benchmarks/run.py --only rounds,kernels -o out.json   # other sections of out.json kept

Sections
  machine   memory read bandwidth (sum of a 1 GiB array) and copy rate
  limits    benchmarks/limits.py: the FMA rate, DGEMM, SGEMM and read bandwidth of one core,
            and beside them the margins, losses, a local step and a network layer's products
  rounds    ms per round of fedht / fediterht / distiht on Simulation I, Simulation II and
            an RCV1-shaped CSR data set, fedsparse (1 thread and all threads) against the
            straightforward NumPy implementation in benchmarks/numpy_reference.py
  kernels   bytes per second of the gradient kernels (dense, CSR) and of exact evaluation,
            against the measured read bandwidth
  jit       process time of a tiny run with a cold and with a warm kernel cache
  sweep     quick (and optionally default) sweep, each with fuse: false and with cohorts: runs
            per minute, core-seconds in shard jobs, per-run overhead, peak memory
  cohorts   benchmarks/cohorts.py: a cohort of 1, 5, 15, 45 step sizes against the same runs
            alone, per member, for each algorithm that fuses (Simulation I and II shapes)
  scale     benchmarks/scale.py: wall time, CPU time and peak memory of planning, snakemake -n,
            a cluster job's start-up, aggregation, a group-by query and the report, at sweep
            sizes --scale-sizes (results synthesised up to --scale-results-max runs)
  gradient_sparsification, sfedhp, ssca
            a round of each method of the other families against a NumPy round (and the
            DGEMM peak where the work is matrix products): benchmarks/<family>.py, each also a
            program printing its own table
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # the NumPy baseline runs on one core
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numba  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import scipy.sparse as sp  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import limits  # noqa: E402
from limits import best_of, streaming_sum  # noqa: E402
from numpy_reference import NumpyHardThreshold  # noqa: E402

from fedsparse import kernels as K  # noqa: E402
from fedsparse.algorithms import ALGORITHMS, registry  # noqa: E402
from fedsparse.data import FederatedData, simulation  # noqa: E402
from fedsparse.kernels.rows import prefetch_csr_row  # noqa: E402
from fedsparse.objective.problem import Problem  # noqa: E402

GiB = 1 << 30


# Every speed is the best over at least this long: this shared machine runs slow in
# spells of up to a second (a NumPy round's best of 20 measured 22-37 ms across runs).
QUIET_SECONDS = 4.0


# ---- machine ------------------------------------------------------------------------------


def bench_machine() -> dict:
    """One core's memory read bandwidth: the faster of NumPy's sum and a vectorised sum of
    1 GiB (NumPy's pairwise sum is partly compute-bound here), and the copy rate."""
    a = np.ones(GiB // 8)
    b = np.empty_like(a)
    # best over >= 4 s, as every kernel below: the machine's speed outside its slow spells
    numpy_read = GiB / best_of(lambda: a.sum(), 3, QUIET_SECONDS)
    vector_read = GiB / best_of(lambda: streaming_sum(a), 3, QUIET_SECONDS)  # serial: one core
    copy = GiB / best_of(lambda: np.copyto(b, a), 3, QUIET_SECONDS)
    return {
        "cpu": platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "numba_threads": numba.config.NUMBA_NUM_THREADS,
        "read_GBps": max(numpy_read, vector_read) / 1e9,
        "numpy_sum_GBps": numpy_read / 1e9,
        "vector_sum_GBps": vector_read / 1e9,
        "copy_GBps": copy / 1e9,
    }


# ---- data sets ----------------------------------------------------------------------------


def rcv1_shaped(seed: int = 0) -> FederatedData:
    """A generated CSR data set of RCV1's shape: 20,242 x 47,236, about 0.16 % non-zeros."""
    rng = np.random.default_rng(seed)
    n, d, density = 20_242, 47_236, 0.0016
    X = sp.random(n, d, density=density, format="csr", random_state=rng, dtype=np.float64)
    X.data[:] = rng.random(X.nnz)
    X = sp.csr_matrix(X.multiply(1.0 / np.sqrt(X.multiply(X).sum(axis=1)).A.clip(1e-12)))
    w = np.zeros(d)
    w[rng.choice(d, 200, replace=False)] = rng.standard_normal(200) * 5
    y = np.where(X @ w + 0.1 * rng.standard_normal(n) > 0, 1.0, -1.0)
    sizes = rng.multinomial(n - 100, np.full(100, 0.01)) + 1  # 100 uneven clients
    return FederatedData("rcv1-shaped", "binary", X, y, np.concatenate([[0], np.cumsum(sizes)]))


def datasets() -> dict[str, tuple[FederatedData, str]]:
    return {
        "Simulation I (10,000 x 1,000 dense)": (simulation("linear"), "least_squares"),
        "Simulation II (100,000 x 1,000 dense)": (simulation("logistic"), "logistic"),
        "RCV1-shaped (20,242 x 47,236 CSR)": (rcv1_shaped(), "logistic"),
    }


# ---- rounds -------------------------------------------------------------------------------

PARAMS = {"stepsize": 0.001, "sparsity": 200, "local_steps": 5, "batch_size": 10}


def fedsparse_round_time(problem: Problem, algo: str, threads: int) -> float:
    numba.set_num_threads(threads)
    cls = ALGORITHMS[algo]
    params = dict(PARAMS, local_steps=1 if algo == "distiht" else PARAMS["local_steps"])
    a = cls(problem, cls.validate_params(params), 0)
    a.setup()
    counter = iter(range(10**9))
    # best group of 5 rounds over at least 30 groups (CSR rounds swing between about 9.5
    # and 15 ms in this machine's spells)
    return best_of(lambda: [a.round(next(counter)) for _ in range(5)], 30, QUIET_SECONDS) / 5


def numpy_round_time(data: FederatedData, loss: str, algo: str) -> float:
    ref = NumpyHardThreshold(
        data.X, data.y, data.client_ptr, algorithm=algo, loss=loss, l2=0.0, **PARAMS
    )
    # timed like fedsparse's rounds, so the comparison is not flattered by a slow spell
    return best_of(ref.round, 20, QUIET_SECONDS)


def round_bytes(data: FederatedData, algo: str) -> float:
    """Bytes of data a round must read: every sampled row once (values, plus indices for CSR)."""
    steps = 1 if algo == "distiht" else PARAMS["local_steps"]
    rows = data.n_clients * steps * PARAMS["batch_size"]
    if data.is_sparse:
        return rows * data.X.nnz / data.n_samples * 12
    return rows * data.n_features * 8


def bench_rounds(sets, read_Bps: float) -> list[dict]:
    out = []
    all_threads = numba.config.NUMBA_NUM_THREADS
    for name, (data, loss) in sets.items():
        problem = Problem(data, loss, 0.0)
        for algo in ("fedht", "fediterht", "distiht"):
            one = fedsparse_round_time(problem, algo, 1)
            many = fedsparse_round_time(problem, algo, all_threads)
            ref = numpy_round_time(data, loss, algo)
            need = round_bytes(data, algo)
            out.append(
                {
                    "dataset": name,
                    "algorithm": algo,
                    "numpy_ms": ref * 1e3,
                    "fedsparse_1t_ms": one * 1e3,
                    f"fedsparse_{all_threads}t_ms": many * 1e3,
                    "speedup_1t": ref / one,
                    f"speedup_{all_threads}t": ref / many,
                    "rounds_per_s_1t": 1 / one,
                    "floor_ms": need / read_Bps * 1e3,
                }
            )
            print(
                f"  {name:40s} {algo:10s} numpy {ref * 1e3:8.2f} ms  fedsparse {one * 1e3:7.2f} ms "
                f"(x{ref / one:5.1f}), {all_threads} threads {many * 1e3:7.2f} ms "
                f"(x{ref / many:5.1f}); read floor {need / read_Bps * 1e3:6.2f} ms",
                flush=True,
            )
    numba.set_num_threads(all_threads)
    return out


# ---- kernels ------------------------------------------------------------------------------


@numba.njit
def dense_grads(X, y, batches, W, code, G, s):
    t = 0.0
    for k in range(batches.shape[0]):
        t += K.batch_grad(X, y, batches[k], W, code, 0.0, G, s)
    return t


@numba.njit
def sparse_grads(X, y, batches, W, code, G, s):
    """Minibatch gradients as the CSR round computes them: weight and gradient of a
    feature interleaved in one work array, the next row prefetched."""
    data, indices, indptr = X
    c = W.shape[0]
    WG = np.zeros((W.shape[1], 2 * c))
    WG[:, :c] = W.T
    W, G = WG[:, :c].T, WG[:, c:].T
    t = 0.0
    for k in range(batches.shape[0]):
        rows = batches[k]
        prefetch_csr_row(X, rows[0])
        for q in range(rows.shape[0]):
            if q + 1 < rows.shape[0]:
                prefetch_csr_row(X, rows[q + 1])
            t += K.sample_loss_grad(X, y, rows[q], W, code, 1.0 / rows.shape[0], G, s)
        for q in range(rows.shape[0]):  # clear what was touched, as the round does
            for p in range(indptr[rows[q]], indptr[rows[q] + 1]):
                G[0, indices[p]] = 0.0
    return t


def bench_kernels(sets, read_Bps: float) -> list[dict]:
    numba.set_num_threads(1)
    out = []
    rng = np.random.default_rng(1)
    for name, (data, loss) in sets.items():
        if "Simulation I " in name:
            continue  # fits in cache: not a bandwidth test
        X, code = data.kernel_X, K.LOSS_CODES[loss]
        W = np.zeros((1, data.n_features))
        W[0, rng.choice(data.n_features, 200, replace=False)] = 0.01
        G, s = np.zeros_like(W), np.empty(1)
        batches = rng.integers(0, data.n_samples, size=(2000, 10))
        row_bytes = (data.X.nnz / data.n_samples * 12) if data.is_sparse else data.n_features * 8

        if data.is_sparse:
            many_grads = sparse_grads  # what the active-set round does: no O(d) reset
        else:
            many_grads = dense_grads

        dt = best_of(partial(many_grads, X, data.y, batches, W, code, G, s), 7, QUIET_SECONDS)
        grad_Bps = batches.size * row_bytes / dt
        ceiling = {}
        if data.is_sparse:
            # The same code with nothing to wait for: rows in order, features folded
            # into 2,048 so that model and gradient sit in L1. What is left is the work
            # per non-zero (gather, multiply-add, scatter, clear), the kernel's ceiling.
            in_order = np.arange(batches.size).reshape(batches.shape) % data.n_samples
            folded = (X[0], X[1] % 2048, X[2])
            folded_grads = partial(many_grads, folded, data.y, in_order, W[:, :2048], code, G, s)
            dt0 = best_of(folded_grads, 7, QUIET_SECONDS)
            ceiling_Bps = batches.size * row_bytes / dt0
            ceiling = {
                "gradient_ceiling_GBps": ceiling_Bps / 1e9,
                "gradient_ceiling_ns_per_nonzero": dt0 / (batches.size * row_bytes / 12) * 1e9,
            }
        problem = Problem(data, loss, 0.0)
        ev = best_of(partial(problem.metrics, W), 5, QUIET_SECONDS)
        if data.is_sparse:  # the support's CSC columns: values and row indices
            indptr = data.kernel_csc[2]
            support = np.flatnonzero(W[0])
            touched = int((indptr[support + 1] - indptr[support]).sum()) * 12
        else:
            touched = 200 * data.n_samples * 8
        eval_Bps = touched / ev
        # as a run scores its rounds: 16 consecutive iterates, which share their support
        Ws = np.stack([W * (1.0 + 0.01 * q) for q in range(16)])
        ev16 = best_of(partial(problem.metrics_many, Ws), 5, QUIET_SECONDS) / len(Ws)
        out.append(
            {
                "dataset": name,
                "gradient_GBps": grad_Bps / 1e9,
                "gradient_pct_of_read": 100 * grad_Bps / read_Bps,
                "evaluation_ms": ev * 1e3,
                "evaluation_GBps": eval_Bps / 1e9,
                "evaluation_pct_of_read": 100 * eval_Bps / read_Bps,
                "evaluation_of_16_ms_per_model": ev16 * 1e3,
                **ceiling,
            }
        )
        print(
            f"  {name:40s} gradient {grad_Bps / 1e9:6.2f} GB/s "
            f"({100 * grad_Bps / read_Bps:4.0f}% of "
            f"read), evaluation {ev * 1e3:7.2f} ms = {eval_Bps / 1e9:6.2f} GB/s "
            f"({100 * eval_Bps / read_Bps:4.0f}%); 16 iterates together {ev16 * 1e3:6.2f} ms each",
            flush=True,
        )
        if ceiling:
            print(
                f"  {'':40s} CSR gradient with rows in order and the model in L1: "
                f"{ceiling['gradient_ceiling_GBps']:.2f} GB/s "
                f"({ceiling['gradient_ceiling_ns_per_nonzero']:.1f} ns per non-zero)",
                flush=True,
            )
    numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
    return out


# ---- jit ----------------------------------------------------------------------------------

TINY_RUN = """
import fedsparse
for loss, task in [("least_squares", "linear"), ("logistic", "logistic")]:
    for algo in ("fedht", "fediterht", "distiht"):
        fedsparse.run({"dataset": {"kind": "synthetic", "task": task, "clients": 3,
                       "samples_per_client": 20, "dim": 30, "support": 3, "positives": 5},
                       "model": {"loss": loss}, "algorithm": algo,
                       "params": {"stepsize": 0.01, "sparsity": 5}, "rounds": 2})
"""


def bench_jit() -> dict:
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "FEDSPARSE_NUMBA_CACHE": cache}

        def proc(code: str) -> float:
            t = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], env=env, check=True)
            return time.perf_counter() - t

        imports = min(proc("import fedsparse, fedsparse.training.experiment") for _ in range(3))
        cold = proc(TINY_RUN)
        warm = min(proc(TINY_RUN) for _ in range(3))
    out = {
        "import_s": imports,
        "cold_cache_s": cold,
        "warm_cache_s": warm,
        "compile_s": cold - warm,
    }
    print(
        f"  imports {imports:.2f} s; tiny runs of every algorithm and loss: cold cache "
        f"{cold:.1f} s, warm cache {warm:.2f} s (compilation {cold - warm:.1f} s)",
        flush=True,
    )
    return out


# ---- sweeps -------------------------------------------------------------------------------


# Peak memory of the sweep's process tree, measured by a small launcher: a forked
# child's ru_maxrss also counts pages inherited from its parent (this process holds
# large benchmark data), so the parent must not be the one that forks snakemake.
LAUNCHER = (
    "import resource, subprocess, sys\n"
    "subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL,"
    " stderr=subprocess.DEVNULL)\n"
    "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)\n"
)


def run_sweep(config: Path, workdir: Path, cores: int, fuse: bool = True) -> dict:
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        str(ROOT / "Snakefile"),
        "--directory",
        str(workdir),
        "--configfile",
        str(config),
        "--cores",
        str(cores),
        "--quiet",
        *([] if fuse else ["--config", "fuse=false"]),
    ]
    t = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", LAUNCHER, *cmd], check=True, capture_output=True, text=True
    )
    peak_kib = int(out.stdout.split()[-1])
    wall = time.perf_counter() - t
    import yaml

    from fedsparse.layout import Layout

    results = workdir / Layout.of_sweep(yaml.safe_load(config.read_text())).root  # results/<sweep>
    runs = pd.read_parquet(results / "runs.parquet")
    busy = runs.wall_time_s.sum()
    overhead = wall * cores - busy  # core-seconds not spent inside a run

    def job_seconds(pattern: str) -> float:  # Snakemake's benchmark files of the jobs
        files = list((results / "benchmarks").glob(pattern))
        return sum(float(pd.read_csv(f, sep="\t").s.iloc[0]) for f in files)

    shard_jobs = job_seconds("shards/*.tsv")
    data_jobs = job_seconds("data/*.tsv")
    merge_jobs = job_seconds("aggregate.tsv") + job_seconds("report.tsv")
    per_run = shard_jobs - busy  # inside shard jobs, outside runs: start-up, saving, merging
    return {
        "config": config.name if fuse else f"{config.name} (fuse: false)",
        "runs": len(runs),
        "cores": cores,
        "wall_s": wall,
        "runs_per_min": len(runs) / wall * 60,
        "run_time_s": busy,
        "train_time_s": runs.train_time_s.sum(),
        "overhead_per_run_s": overhead / len(runs),
        "overhead_pct": 100 * overhead / (wall * cores),
        # where the core time outside runs goes
        "shard_jobs_s": shard_jobs,  # core-seconds inside shard jobs (what cohorts save)
        "shard_overhead_s": per_run,
        "shard_overhead_pct": 100 * per_run / (wall * cores),
        "data_s": data_jobs,
        "aggregate_report_s": merge_jobs,
        "idle_s": wall * cores - shard_jobs - data_jobs - merge_jobs,
        "peak_rss_MB": peak_kib / 1024,
    }


def bench_sweeps(include_default: bool) -> list[dict]:
    """The quick sweep (and the default one), each with cohorts (the default) and with
    ``fuse: false``, one after the other in this run."""
    configs = [(ROOT / "config/quick.yaml", fuse) for fuse in (False, True)]
    if include_default:
        configs += [(ROOT / "config/config.yaml", fuse) for fuse in (False, True)]
    # Sweeps are timed with compiled kernels in the cache, as every sweep after the
    # first finds them (the jit section times compiling): an untimed quick sweep first
    # compiles the variants for memory-mapped data.
    with tempfile.TemporaryDirectory() as tmp:
        run_sweep(ROOT / "config/quick.yaml", Path(tmp), os.cpu_count() or 1)
    out = []
    for config, fuse in configs:
        with tempfile.TemporaryDirectory() as tmp:
            r = run_sweep(config, Path(tmp), os.cpu_count() or 1, fuse)
        out.append(r)
        print(
            f"  {r['config']:12s} {r['runs']:5d} runs in {r['wall_s']:7.1f} s on {r['cores']} "
            f"cores: {r['runs_per_min']:7.0f} runs/min; overhead {r['overhead_per_run_s']:.3f} "
            f"s/run = {r['overhead_pct']:.1f}% of core time; peak RSS {r['peak_rss_MB']:.0f} MB",
        )
        print(f"    core-seconds inside shard jobs {r['shard_jobs_s']:.0f}")
        print(
            f"    core time outside runs: in shard jobs {r['shard_overhead_s']:.0f} s "
            f"({r['shard_overhead_pct']:.1f}%: start-up, saving, merging), data generation "
            f"{r['data_s']:.0f} s, aggregate + report {r['aggregate_report_s']:.0f} s, "
            f"idle or scheduling {r['idle_s']:.0f} s",
            flush=True,
        )
    return out


# ---- scale --------------------------------------------------------------------------------
# benchmarks/scale.py: each stage of a sweep (plan, DAG, a cluster job's start-up, aggregate,
# query, report) in a process of its own, at growing sweep sizes.


def bench_scale(sizes: str, results_max: float) -> list[dict]:
    import scale

    return scale.bench([int(float(n)) for n in sizes.split(",")], int(1e5), int(results_max))


# ---- the other families -------------------------------------------------------------------

# Each family's benchmark is a program of its own beside this one, named as the family's
# module (python benchmarks/ssca.py prints its table); bench(seconds) returns the rows this
# program records. A built-in family with such a file is benchmarked: no list to edit here.
FAMILY_BENCHMARKS = tuple(
    short
    for short in (fam.module.rsplit(".", 1)[-1] for fam in registry.families(plugins=False))
    if (HERE / f"{short}.py").is_file()
)


def bench_family(name: str) -> list[dict]:
    module = importlib.import_module(name)  # benchmarks/ is the script's folder: on sys.path
    rows = module.bench(QUIET_SECONDS)
    for row in rows:
        print("  " + ", ".join(f"{k} {_short(v)}" for k, v in row.items()), flush=True)
    return rows


def _short(v) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


# ---- driver -------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--only",
        default="machine,limits,rounds,kernels,jit,sweep,cohorts,scale,"
        + ",".join(FAMILY_BENCHMARKS),
        help="comma-separated sections",
    )
    parser.add_argument(
        "--default-sweep",
        action="store_true",
        help="also time the default sweep (config/config.yaml)",
    )
    parser.add_argument(
        "--scale-sizes", default="1e4,1e6", help="scale: sweep sizes in runs, comma-separated"
    )
    parser.add_argument(
        "--scale-results-max",
        type=float,
        default=2e4,
        help="scale: the largest size whose results are synthesised (aggregate, query, report)",
    )
    parser.add_argument("-o", "--output", type=Path, default=HERE / "results.json")
    args = parser.parse_args()
    only = set(args.only.split(","))
    report: dict = {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "numba": numba.__version__,
        "host": platform.node(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    previous = (
        json.loads(args.output.read_text())
        if args.only != parser.get_default("only") and args.output.exists()
        else None
    )
    read_Bps = 0.0
    if only & {"machine", "rounds", "kernels"}:  # the bandwidth those figures are against
        print("machine")
        report["machine"] = m = bench_machine()
        print(
            f"  {m['cores']} cores; read {m['read_GBps']:.1f} GB/s (one core summing 1 GiB: "
            f"NumPy {m['numpy_sum_GBps']:.1f}, vectorised {m['vector_sum_GBps']:.1f}), "
            f"copy {m['copy_GBps']:.1f} GB/s",
            flush=True,
        )
        read_Bps = m["read_GBps"] * 1e9
    if "limits" in only:
        print("limits")
        report["limits"] = limits.run()
    sets = datasets() if only & {"rounds", "kernels"} else {}
    if "rounds" in only:
        print(
            "rounds (K=5, batch 10, tau=200; best over >= 4 s: fedsparse of 5 rounds, NumPy of 1)"
        )
        report["rounds"] = bench_rounds(sets, read_Bps)
    if "kernels" in only:
        print("kernels (single thread)")
        report["kernels"] = bench_kernels(sets, read_Bps)
    sets.clear()  # free the benchmark data before timing whole sweeps
    if "jit" in only:
        print("jit")
        report["jit"] = bench_jit()
    if "sweep" in only:
        print("sweeps")
        report["sweeps"] = bench_sweeps(args.default_sweep)
    if "cohorts" in only:
        import cohorts

        print(f"cohorts ({cohorts.ROUNDS} rounds, every round evaluated; per member)")
        report["cohorts"] = cohorts.bench()
    if "scale" in only:
        print("scale")
        report["scale"] = bench_scale(args.scale_sizes, args.scale_results_max)
    for section in FAMILY_BENCHMARKS:
        if section in only:
            print(
                f"{section} (a round of each method against NumPy; best over >= {QUIET_SECONDS} s)"
            )
            report[section] = bench_family(section)
    if previous is not None:
        # A partial run updates its sections and keeps the others, each with its date.
        dates = previous.get("section_dates", {})
        timed = {s["config"] for s in report.get("sweeps", [])}  # sweeps timed in this run
        sections = ("machine", "limits", "rounds", "kernels", "jit", "sweeps", "cohorts", "scale")
        for key in (*sections, *FAMILY_BENCHMARKS):
            if key in report:
                dates[key] = report["date"]
            elif key in previous:
                report[key] = previous[key]
                dates.setdefault(key, previous["date"])
        for config in timed:
            dates.pop(config, None)
        for old in previous.get("sweeps", []) if timed else []:  # e.g. the default sweep,
            if old["config"] not in timed:  # when only the quick one was re-timed
                report["sweeps"].append(old)
                dates.setdefault(old["config"], previous["date"])
        report["section_dates"] = dates
    args.output.write_text(json.dumps(report, indent=2) + "\n")
    print(f"-> {args.output}")


if __name__ == "__main__":
    main()
