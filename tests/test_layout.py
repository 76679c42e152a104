"""The results folder's layout is a contract: every path as it has always been named (a shard's
files with the digest of their runs)."""

from __future__ import annotations

from pathlib import Path

from fedsparse.layout import Layout


def test_every_path_of_a_results_folder_keeps_its_name():
    L = Layout("res")
    got = {
        "runs": L.runs,
        "traces": L.traces,
        "report": L.report,
        "report_html": L.report_html,
        "report_figures": L.report_figures,
        "report_tables": L.report_tables,
        "data": L.data,
        "dataset": L.dataset("svm"),
        "store": L.store,
        "checkpoint": L.checkpoint("3fa0"),
        "shards": L.shards,
        "plan_file": L.plan_file,
        "shard_traces": L.shard_traces("lin--0000", "0123456789ab"),
        "shard_runs": L.shard_runs("lin--0000", "0123456789ab"),
        "studies": L.studies,
        "study": L.study("s"),
        "aggregate_inputs": L.aggregate_inputs,
        "study_marker": L.study_marker("s"),
        "study_marker_digest": L.study_marker("s", "0123456789ab"),
        "study_journal": L.study_journal("s"),
        "study_sqlite": L.study_sqlite("s"),
        "study_lock": L.study_lock("s"),
        "study_trial_parts": L.study_trial_parts("s"),
        "worker_done": L.worker_done("s", 3),
        "study_checkpoint": L.study_checkpoint("s", "3fa0"),
        "study_traces": L.study_traces("s", "trials"),
        "study_runs": L.study_runs("s", "holdout"),
        "logs": L.logs,
        "benchmarks": L.benchmarks,
        "data_log": L.data_log("svm"),
        "data_benchmark": L.data_benchmark("svm"),
        "dataset_build": L.dataset_build("svm", "0123456789ab"),
        "data_build_log": L.data_log("svm", "0123456789ab"),
        "data_build_benchmark": L.data_benchmark("svm", "0123456789ab"),
        "shard_log": L.shard_log("lin--0000", "0123456789ab"),
        "shard_benchmark": L.shard_benchmark("lin--0000", "0123456789ab"),
        "study_log": L.study_log("s", "worker-0"),
        "log": L.log("aggregate"),
        "benchmark": L.benchmark("report"),
    }
    expected = {
        "runs": "res/runs.parquet",
        "traces": "res/traces",
        "report": "res/report",
        "report_html": "res/report/index.html",
        "report_figures": "res/report/figures",
        "report_tables": "res/report/tables",
        "data": "res/data",
        "dataset": "res/data/svm",
        "store": "res/store",
        "checkpoint": "res/store/checkpoints/3fa0.ckpt",
        "shards": "res/shards",
        "plan_file": "res/shards/plan.parquet",
        "shard_traces": "res/shards/lin--0000.0123456789ab.parquet",
        "shard_runs": "res/shards/lin--0000.0123456789ab.runs.parquet",
        "studies": "res/optuna",
        "study": "res/optuna/s",
        "aggregate_inputs": "res/shards/aggregate.inputs.json",
        "study_marker": "res/optuna/s/study.json",
        "study_marker_digest": "res/optuna/s/study.0123456789ab.json",
        "study_journal": "res/optuna/s/journal.log",
        "study_sqlite": "res/optuna/s/study.db",
        "study_lock": "res/optuna/s/reserve.lock",
        "study_trial_parts": "res/optuna/s/trials",
        "worker_done": "res/optuna/s/worker-3.done",
        "study_checkpoint": "res/optuna/s/checkpoints/3fa0.ckpt",
        "study_traces": "res/optuna/s/trials.parquet",
        "study_runs": "res/optuna/s/holdout.runs.parquet",
        "logs": "res/logs",
        "benchmarks": "res/benchmarks",
        "data_log": "res/logs/data/svm.log",
        "data_benchmark": "res/benchmarks/data/svm.tsv",
        "dataset_build": "res/data/svm.0123456789ab",
        "data_build_log": "res/logs/data/svm.0123456789ab.log",
        "data_build_benchmark": "res/benchmarks/data/svm.0123456789ab.tsv",
        "shard_log": "res/logs/shards/lin--0000.0123456789ab.log",
        "shard_benchmark": "res/benchmarks/shards/lin--0000.0123456789ab.tsv",
        "study_log": "res/logs/optuna/s/worker-0.log",
        "log": "res/logs/aggregate.log",
        "benchmark": "res/benchmarks/report.tsv",
    }
    assert {k: str(v) for k, v in got.items()} == expected


def test_wildcards_pass_through_as_snakemake_patterns():
    L = Layout("results")
    assert (
        str(L.shard_runs("{shard}", "{digest}")) == "results/shards/{shard}.{digest}.runs.parquet"
    )
    assert (
        str(L.worker_done("{study}", "{worker}")) == "results/optuna/{study}/worker-{worker}.done"
    )
    assert str(L.study_log("{study}", "worker-{worker}")) == (
        "results/logs/optuna/{study}/worker-{worker}.log"
    )


def test_the_default_results_folder_and_a_shard_outputs_folder():
    # each config a folder of its own, by its sweep name
    assert Layout.of_sweep({"sweep": "quick"}).root == Path("results/quick")
    assert Layout.of_sweep({}).root == Path("results/sweep")
    assert Layout.of_sweep({"results": "out/x"}).store == Path("out/x/store")
    assert Layout.of_shard_output("res/shards/a.runs.parquet") == Layout("res")


def test_the_results_folders_found_under_results(tmp_path):
    """A sweep's results/<sweep>, and results itself from an older version, by name; a
    sweep without its runs table yet, or any other folder, is none."""
    assert Layout.found_in(tmp_path / "absent") == []
    for folder in ("quick", "paper-simulations"):
        (tmp_path / folder).mkdir()
        Layout(tmp_path / folder).runs.write_bytes(b"")
    (tmp_path / "running" / "shards").mkdir(parents=True)
    found = [layout.root.name for layout in Layout.found_in(tmp_path)]
    assert found == ["paper-simulations", "quick"]
    Layout(tmp_path).runs.write_bytes(b"")
    assert Layout.found_in(tmp_path)[0] == Layout(tmp_path)


def test_a_shards_outputs_of_every_digest_and_none_but_no_other_file(tmp_path):
    L = Layout(tmp_path)
    L.shards.mkdir()
    assert L.shard_outputs("lin--0000") == []
    mine = [
        L.shard_traces("lin--0000", "0123456789ab"),
        L.shard_runs("lin--0000", "0123456789ab"),
        L.shard_runs("lin--0000", "ba9876543210"),
        L.shards / "lin--0000.parquet",  # named before digests
        L.shards / "lin--0000.runs.parquet",
    ]
    others = ["lin--00001.parquet", "lin--0001.0123456789ab.parquet", "plan.parquet"]
    others += ["lin--0000.parquet.parts", ".lin--0000.lock", "lin--0000.abc.parquet"]
    for path in mine + [L.shards / name for name in others]:
        path.touch()
    assert L.shard_outputs("lin--0000") == sorted(mine)
