"""Real data end to end: scikit-learn's digits written as svmlight, served from 127.0.0.1,
downloaded, partitioned the papers' way and run through a whole softmax sweep."""

from __future__ import annotations

import bz2
import io
import re

import numpy as np
import pandas as pd
import pytest
from _loopback import Loopback
from snakemake_helpers import ROOT, job_counts, results_dir, snakemake, write_config

import fedsparse
from fedsparse.data import load_dataset_dir, save_dataset
from fedsparse.data.prepare import prepare

pytestmark = pytest.mark.integration


def digits_svmlight() -> bytes:
    from sklearn.datasets import dump_svmlight_file, load_digits

    X, y = load_digits(return_X_y=True)
    buf = io.BytesIO()
    dump_svmlight_file(X / 16.0, y, buf, zero_based=False)
    return bz2.compress(buf.getvalue())


@pytest.fixture(scope="module")
def server():
    with Loopback() as srv:
        srv.serve("/libsvm/digits.svm.bz2", digits_svmlight())
        yield srv


def digits_ds(url: str) -> dict:
    return {"kind": "svmlight", "url": url, "task": "multiclass", "n_features": 64, "rows": 1797}


def test_softmax_run_with_the_papers_partition_and_a_test_split(server, tmp_path, monkeypatch):
    monkeypatch.setenv("FEDSPARSE_DATA_CACHE", str(tmp_path / "cache"))
    tau = 12
    trace = fedsparse.run(
        {
            "dataset": digits_ds(server.url("/libsvm/digits.svm.bz2")),
            "partition": {"kind": "papers", "test_fraction": 0.2, "seed": 0},
            "model": {"loss": "softmax"},
            "algorithm": "fediterht",
            "params": {"stepsize": 0.5, "sparsity": tau, "local_steps": 3, "batch_size": 10},
            "rounds": 15,
        }
    )
    assert (trace["partition"] == "papers+test0.2").all()
    assert trace["objective"].iloc[-1] < 0.75 * trace["objective"].iloc[0]  # log(10) at round 0
    assert trace["test_accuracy"].notna().all()
    assert trace["test_accuracy"].iloc[-1] > 0.6  # chance is 0.1
    assert (trace["nnz"] <= 10 * tau).all()  # per-class H_tau
    assert trace["nnz"].iloc[-1] > tau  # ... per class, not over the whole W


def test_partitioned_data_round_trips_through_the_store(server, tmp_path):
    ds = {**digits_ds(server.url("/libsvm/digits.svm.bz2")), "name": "digits"}
    from fedsparse.training.config import normalize_run_config

    cfg = normalize_run_config(
        {
            "dataset": ds,
            "partition": {
                "kind": "dirichlet",
                "clients": 10,
                "alpha": 0.3,
                "min_size": 20,
                "test_fraction": 0.25,
                "test_split": "global",
            },
            "algorithm": "fedht",
            "params": {"stepsize": 0.1, "sparsity": 5},
            "rounds": 1,
        }
    )
    out = prepare(cfg["dataset"], cfg["partition"], cache=tmp_path)
    save_dataset(out.data, tmp_path / "d")
    back = load_dataset_dir(tmp_path / "d")
    assert back.n_clients == 10 and back.is_sparse and back.has_test
    assert back.y_test.shape[0] == round(0.25 * 1797)
    assert back.n_samples + back.y_test.shape[0] == 1797
    assert (back.X_test != out.data.X_test).nnz == 0
    assert np.array_equal(back.test_ptr, [0, back.y_test.shape[0]])
    assert (back.client_sizes >= 20).all()


def test_dry_run_of_the_paper_config_plans_the_papers_real_data_sweep(tmp_path):
    proc = snakemake(tmp_path, "-n", "--configfile", str(ROOT / "config/paper.yaml"))
    counts = job_counts(proc.stdout)
    # 3 data sets x (36 fedht + 36 fediterht + 9 distiht configs) x 2 seeds = 486 runs
    assert counts["make_data"] == 3
    assert counts["run_shard"] == 3 * 6  # 162 runs per data set, 27 per shard
    assert not (tmp_path / "results").exists()  # planning downloads nothing


SWEEP = {
    "sweep": "digits",
    "rounds": 12,
    "seeds": [0, 1],
    "shard_size": 12,
    "embedding_sample": 300,
    "algorithms": {"fedht": {}, "fediterht": {}, "distiht": {"local_steps": [1]}},
    "grid": {"stepsize": [1.0, 0.3], "local_steps": [3], "sparsity": [12], "batch_size": [10]},
}


@pytest.fixture(scope="module")
def finished(server, tmp_path_factory):
    workdir = tmp_path_factory.mktemp("digits")
    url = server.url("/libsvm/digits.svm.bz2")
    cfg = {
        **SWEEP,
        "data_cache": str(workdir / "cache"),
        "datasets": {
            "digits": {
                "data": digits_ds(url),
                "model": {"loss": "softmax"},
                "partition": {"kind": "papers", "test_fraction": 0.2, "seed": 0},
            },
            "digits-dirichlet": {  # the same file: downloaded once, from the cache after
                "data": digits_ds(url),
                "model": {"loss": "softmax"},
                "partition": {
                    "kind": "dirichlet",
                    "clients": 10,
                    "alpha": 0.5,
                    "test_fraction": 0.2,
                    "test_split": "global",
                },
            },
        },
    }
    before = len(server.state.requests)
    snakemake(workdir, "--configfile", str(write_config(workdir, cfg)))
    workdir.joinpath("requests.txt").write_text(
        "\n".join(p for p, _ in server.state.requests[before:])
    )
    return workdir


def test_whole_softmax_sweep_on_digits_served_from_loopback(finished, server):
    res = results_dir(finished)
    runs = pd.read_parquet(res / "runs.parquet")
    assert len(runs) == 2 * (2 + 2 + 2) * 2
    assert (runs.status == "ok").all() and (runs.loss == "softmax").all()
    assert set(runs.partition) == {"papers+test0.2", "dirichlet-a0.5+test0.2"}
    traces = pd.read_parquet(res / "traces")
    assert traces["test_accuracy"].between(0, 1).all()
    last = traces.sort_values("round").groupby("run_id").tail(1)
    assert last["test_accuracy"].max() > 0.6
    assert (last["objective"] < np.log(10)).all()
    # one download for the two data sets
    assert (finished / "requests.txt").read_text().split() == ["/libsvm/digits.svm.bz2"]
    # the papers' partition: 100 clients of two digits each; its statistics in the report
    stats = pd.read_csv(res / "data/digits/partition_stats.csv")
    assert len(stats) == 100 and (stats["labels"] == 2).all()
    assert stats["rows"].sum() + stats["test_rows"].sum() == 1797
    emb = pd.read_csv(res / "data/digits/embedding.csv")
    assert len(emb) == 300 and set(emb["cluster"]) == set(range(10))
    html = (res / "report/data.html").read_text()
    assert "Real data: partitions and test accuracy" in html
    assert 'href="data.html"' in (res / "report/index.html").read_text()
    assert (res / "report/figures/embedding_digits.png").is_file()
    acc = pd.read_csv(res / "report/tables/test_accuracy.csv")
    assert set(acc["algorithm"]) == {"fedht", "fediterht", "distiht"}
    parts = pd.read_csv(res / "report/tables/partitions.csv").set_index("dataset")
    assert parts.loc["digits", "clients"] == 100 and parts.loc["digits-dirichlet", "clients"] == 10
    # a data set's log is named as its build, data/<name>.<digest>
    (one,) = (res / "logs/data").glob("digits.*.log")
    (two,) = (res / "logs/data").glob("digits-dirichlet.*.log")
    log = one.read_text() + two.read_text()
    assert re.search(r"100 clients, \d+ samples \(\+\d+ test\)", log)


def test_rerun_needs_no_network(finished, server):
    n = len(server.state.requests)
    proc = snakemake(finished, "-n", "--configfile", str(finished / "sweep.yaml"))
    assert "Nothing to be done" in proc.stdout + proc.stderr
    assert len(server.state.requests) == n
