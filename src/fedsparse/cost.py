"""Resource estimates for cluster jobs.

A shard's runtime is estimated from the bytes its runs must read (the same
model as the benchmark's read floor: minibatch rows for the local steps, the
τ columns of an exact evaluation) at a deliberately low throughput, and its
memory from the size of its data set on disk (memory-mapped arrays are charged
to the job once their pages are touched). Both err on the generous side: a
SLURM job that outlives its time limit is killed and its run in progress lost,
while asking for too much only waits a little longer in the queue.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from .defaults import sweep_default

# The default sweep's runs read ~27 GB each by this model and take 3.1 s on a laptop
# core (≈ 9 GB/s: evaluations hit the cache); 4 GB/s and a factor 2 give ~4x headroom
# for slower nodes, memory bandwidth shared by a node's other jobs and cold caches.
BYTES_PER_SECOND = 4e9
RUN_OVERHEAD_S = 0.5  # trace assembly, Parquet write, summary (measured 0.24 s)
# What a member of a cohort adds to the cohort's time, as a share of the same run alone: its
# minibatch rows come from cache rather than memory, but its exact evaluations (every round in
# the papers' sweeps) cost nearly what they cost alone. Measured on 2 idle cores
# (benchmarks/run.py --only cohorts, cohorts of 15): 0.55-0.63 for Fed-HT and FedIter-HT on
# Simulations I and II, 0.78-0.84 for Distributed-IHT and FedAvg on Simulation II.
COHORT_MEMBER_SHARE = 0.6
JOB_STARTUP_S = 60.0  # interpreter, imports, JIT from a cold cache (~20 s here)
RUNTIME_SAFETY = 2.0
MIN_RUNTIME_MIN = 10
BASE_MEM_MB = 1024  # Python, numba, pyarrow and per-run buffers
MEM_SAFETY = 1.25


@dataclass(frozen=True)
class DataShape:
    """What the estimates need to know about a data set."""

    rows: int
    cols: int
    nnz: int  # stored values of the training matrix (rows * cols when dense)
    sparse: bool
    clients: int
    n_classes: int
    disk_bytes: int  # all arrays of the data folder (rows, columns copy, test split)

    @property
    def row_bytes(self) -> float:
        """Bytes a kernel reads per training row (value + index for CSR)."""
        if self.sparse:
            return self.nnz / max(self.rows, 1) * 12
        return self.cols * 8.0


def data_shape(data_dir: str | Path) -> DataShape:
    """Read a prepared data folder's shape without loading its arrays."""
    data_dir = Path(data_dir)
    meta = json.loads((data_dir / "meta.json").read_text())
    rows, cols = meta["shape"]
    if meta["sparse"]:
        nnz = int(np.load(data_dir / "X_data.npy", mmap_mode="r").shape[0])
    else:
        nnz = rows * cols
    clients = int(np.load(data_dir / "client_ptr.npy", mmap_mode="r").shape[0]) - 1
    disk = sum(f.stat().st_size for f in data_dir.glob("*.npy"))
    return DataShape(rows, cols, nnz, meta["sparse"], clients, meta["n_classes"], disk)


def synthetic_shape(data: dict[str, Any]) -> DataShape:
    """The shape of a normalised ``kind: synthetic`` data spec (before it is generated)."""
    rows = data["clients"] * data["samples_per_client"]
    cols = data["dim"]
    # X, its column-major copy and y
    return DataShape(rows, cols, rows * cols, False, data["clients"], 0, 2 * rows * cols * 8)


class RunWork(NamedTuple):
    """What the cost model needs from a run's algorithm (its hooks): minibatch gradients one
    client computes per round, and the non-zeros per class its global model keeps where the
    algorithm bounds them (None: dense). The plan file records both for each run, so a cluster
    job's Snakemake sizes its job without loading the algorithms."""

    steps: int
    support: int | None


def run_work(config: dict[str, Any]) -> RunWork:
    """A run's :class:`RunWork`, from its algorithm's ``steps_per_round`` and
    ``model_support`` (an algorithm not registered here: its ``local_steps``, dense)."""
    from .algorithms import ALGORITHMS  # not at import: the plan's readers need no kernels

    params = config["params"]
    cls = ALGORITHMS.get(config.get("algorithm", ""))
    if cls is None:
        return RunWork(int(params.get("local_steps", 1)), None)
    return RunWork(int(cls.steps_per_round(params)), cls.model_support(params))


def steps_per_round(config: dict[str, Any]) -> int:
    """Minibatch gradients one client of a run computes per round, by its algorithm."""
    return run_work(config).steps


def run_bytes(config: dict[str, Any], shape: DataShape, work: RunWork | None = None) -> float:
    """Bytes one run reads: its local steps' minibatch rows and its evaluations (``work``:
    its :func:`run_work`, where known already; an exact evaluation of a model that keeps
    ``support`` non-zeros per class reads only those columns)."""
    params = config["params"]
    rounds = config["rounds"]
    steps, support = run_work(config) if work is None else work
    batch = params.get("batch_size")
    client_rows = shape.rows / max(shape.clients, 1)
    if batch is None or params.get("batch_growth", 1.0) != 1.0:
        rows_per_step = client_rows  # full batch, or growing towards it: bound by the client
    else:
        rows_per_step = min(batch, client_rows)
    local = shape.clients * steps * rows_per_step * shape.row_bytes
    classes = max(shape.n_classes, 1)
    if shape.sparse:
        evaluation = shape.nnz * 12.0 * classes
    else:
        tau = shape.cols if support is None else min(support, shape.cols)
        evaluation = shape.rows * tau * 8.0 * classes
    evaluations = math.ceil(rounds / sweep_default(config, "eval_every")) + 1
    return rounds * local + evaluations * evaluation


def run_seconds(config: dict[str, Any], shape: DataShape, work: RunWork | None = None) -> float:
    """Estimated seconds of one run, its job's start-up aside."""
    return run_bytes(config, shape, work) / BYTES_PER_SECOND + RUN_OVERHEAD_S


def member_seconds(seconds: float) -> float:
    """Estimated seconds a run adds to a cohort, of ``seconds`` alone (:func:`run_seconds`)."""
    return COHORT_MEMBER_SHARE * (seconds - RUN_OVERHEAD_S) + RUN_OVERHEAD_S


def shard_seconds(
    configs: list[dict[str, Any]],
    shape: DataShape,
    work: list[RunWork] | None = None,
    siblings: list[bool] | None = None,
    cohorts: list[bool] | None = None,
) -> float:
    """Estimated seconds of one job running ``configs`` one after another (``work``: each
    one's :func:`run_work`, where known already; ``siblings``: which runs share the
    computation of the run before them, and cost only their trace's writing; ``cohorts``:
    which join the cohort of the runs before them, and cost :func:`member_seconds`)."""
    work = [None] * len(configs) if work is None else work
    siblings = [False] * len(configs) if siblings is None else siblings
    cohorts = [False] * len(configs) if cohorts is None else cohorts
    # A planned configuration's seeds share its params mapping (sweep._plan_sweep), and cost
    # the same: each is estimated once, not once per seed (the DAG's priorities of a
    # million-run plan took 8 s per-run). The key holds the mapping's id while the mapping
    # is alive (this call), with the other fields the estimate reads.
    known: dict[tuple, float] = {}
    total = 0.0  # summed as before, then the start-up: the same float as per-run estimates
    for c, w, sibling, member in zip(configs, work, siblings, cohorts, strict=True):
        if sibling:
            total += RUN_OVERHEAD_S
            continue
        key = (id(c["params"]), c["rounds"], c.get("eval_every"), c.get("algorithm"), w)
        seconds = known.get(key)
        if seconds is None:
            seconds = known[key] = run_seconds(c, shape, w)
        total += member_seconds(seconds) if member else seconds
    return JOB_STARTUP_S + total


def shard_runtime_minutes(
    configs: list[dict[str, Any]],
    shape: DataShape,
    work: list[RunWork] | None = None,
    siblings: list[bool] | None = None,
    cohorts: list[bool] | None = None,
) -> int:
    """A SLURM time limit (minutes) for one job running ``configs`` one after another."""
    seconds = shard_seconds(configs, shape, work, siblings, cohorts)
    return max(MIN_RUNTIME_MIN, math.ceil(RUNTIME_SAFETY * seconds / 60))


def job_mem_mb(shape: DataShape) -> int:
    """Memory (MB) for a job working on one data set."""
    return math.ceil(BASE_MEM_MB + MEM_SAFETY * shape.disk_bytes / 2**20)


# Before a real data set is downloaded its shape is unknown (snakemake -n, say);
# Snakemake evaluates the resources again once the job's input exists.
UNKNOWN_RUNTIME_MIN = 240
UNKNOWN_MEM_MB = 8192


def known_shape(data_spec: dict[str, Any], data_dir: str | Path | None) -> DataShape | None:
    """The shape of a prepared data folder, else of a synthetic spec, else None."""
    if data_dir and (Path(data_dir) / "meta.json").is_file():
        return data_shape(data_dir)
    if data_spec.get("kind") == "synthetic":
        return synthetic_shape(data_spec)
    return None


def job_resources(
    configs: list[dict[str, Any]],
    data_spec: dict[str, Any],
    data_dir: str | Path,
    work: list[RunWork] | None = None,
    siblings: list[bool] | None = None,
    cohorts: list[bool] | None = None,
) -> dict[str, int]:
    """``runtime`` (minutes) and ``mem_mb`` for a job running ``configs`` on one data set."""
    shape = known_shape(data_spec, data_dir)
    if shape is None:
        return {"runtime": UNKNOWN_RUNTIME_MIN, "mem_mb": UNKNOWN_MEM_MB}
    runtime = shard_runtime_minutes(configs, shape, work, siblings, cohorts)
    return {"runtime": runtime, "mem_mb": job_mem_mb(shape)}
