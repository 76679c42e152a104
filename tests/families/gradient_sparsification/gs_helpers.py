"""Run configs and toy results folders the gradient-sparsification tests share (a helper
module of the family's tests, not a test module)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from fedsparse.algorithms import ALGORITHMS
from fedsparse.pipeline.shard_runner import run_summary
from fedsparse.results.aggregate import write_traces_dataset
from fedsparse.results.schema import RUNS_SCHEMA, rows_table, write_parquet_atomic
from fedsparse.sweep import Run
from fedsparse.training.config import normalize_run_config
from fedsparse.training.experiment import run_result


def params_for(name, k, stepsize=0.3, fill="client"):
    prm = {"stepsize": stepsize, "batch_size": "full"}
    if name != "sendall":
        prm["k"] = k
    if name == "fabtopk":
        prm["fill"] = fill
    return prm


def run_cfg(algorithm, **over):
    cfg = {
        "dataset": {
            "kind": "synthetic",
            "task": "logistic",
            "clients": 4,
            "dim": 12,
            "support": 4,
            "samples_per_client": 30,
            "positives": 10,
        },
        "model": {"loss": "logistic"},
        "algorithm": algorithm,
        "params": params_for(algorithm, 5, stepsize=0.1),
        "rounds": 4,
    }
    cfg.update(over)
    return cfg


DATA = {
    "kind": "synthetic",
    "task": "logistic",
    "clients": 6,
    "dim": 40,
    "support": 8,
    "samples_per_client": 40,
    "positives": 15,
    "name": "toy",
}


def config(algorithm, params, beta, data=DATA, rounds=40, seed=0):
    return normalize_run_config(
        {
            "dataset": data,
            "model": {"loss": "logistic"},
            "algorithm": algorithm,
            "params": params,
            "rounds": rounds,
            "seed": seed,
            "eval_every": 1,
            "time_model": {"exchange_time": beta},
        }
    )


def write_folder(folder, configs, done=()):
    """Run ``configs`` and write them, with the (table, summary) pairs ``done`` before, as a
    results folder; return every (table, summary)."""
    runs = list(done)
    for cfg in configs:
        result = run_result(cfg)
        table = result.trace
        rid = table["run_id"][0].as_py()
        runs.append((table, run_summary(Run(rid, cfg), table, 1.0, "toy", result.client_summary)))
    write_traces_dataset(pa.concat_tables([t for t, _ in runs]), folder / "traces")
    write_parquet_atomic(rows_table([s for _, s in runs], RUNS_SCHEMA), folder / "runs.parquet")
    return runs


def base(k=8, **over):
    return {"stepsize": 0.5, "batch_size": 10, "k": k, **over}


# every fixed-k method of Fig. 4 and FedAvg, at the fixture's step sizes
FIXED = (
    ("fabtopk", base()),
    ("fubtopk", base()),
    ("utopk", base()),
    ("periodick", base()),
    ("sendall", {"stepsize": 0.5, "batch_size": 10}),
    ("fedavg", {"stepsize": 0.5, "batch_size": 10, "local_steps": 2}),
)


def blocks_of(data):
    """Each client's (X, y) rows, X dense."""
    ptr = data.client_ptr
    X = data.X.toarray() if hasattr(data.X, "toarray") else np.asarray(data.X)
    return [(X[ptr[i] : ptr[i + 1]], data.y[ptr[i] : ptr[i + 1]]) for i in range(data.n_clients)]


def drive(problem, name, params, rounds, seed=0):
    """Run ``rounds`` rounds of algorithm ``name``: the models w(0..rounds), the residuals
    after each round, the rounds' costs and the algorithm."""
    cls = ALGORITHMS[name]
    algo = cls(problem, cls.validate_params(params), seed)
    algo.check_problem()
    algo.setup()
    models, residuals, costs = [algo.model.copy()], [], []
    for t in range(rounds):
        costs.append(algo.round(t))
        models.append(algo.model.copy())
        residuals.append(algo.residuals.copy())
    return models, residuals, costs, algo
