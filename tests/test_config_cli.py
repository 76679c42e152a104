"""The ``fedsparse run`` command, config validation and run ids.

Successful runs and a few failures go through a real ``python -m fedsparse.cli``
process (started together, since each one pays the import cost); the full list
of bad configs goes through ``fedsparse.cli.main`` in-process, which is the same
code path minus the interpreter start.
"""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from fedsparse import cli
from fedsparse.training.config import normalize_run_config, run_id

TRACE_COLUMNS = [
    "run_id",
    "dataset",
    "algorithm",
    "seed",
    "stepsize",
    "local_steps",
    "sparsity",
    "batch_size",
    "round",
    "local_iterations",
    "objective",
    "bytes_up",
    "bytes_down",
    "elapsed_s",
    "status",
]

SYNTH = {
    "dataset": {
        "kind": "synthetic",
        "task": "linear",
        "clients": 3,
        "samples_per_client": 15,
        "dim": 20,
        "support": 4,
        "seed": 1,
    },
    "model": {"loss": "least_squares"},
    "algorithm": "fedht",
    "params": {"stepsize": 0.01, "sparsity": 4, "local_steps": 2, "batch_size": 5},
    "rounds": 7,
    "seed": 3,
    "eval_every": 3,
}

QID_FILE = "".join(
    f"{(i * 7) % 2} qid:{1 + i % 3} {1 + i % 6}:{0.5 + i / 10} {7 + i % 4}:{1 - i / 20}\n"
    for i in range(24)
)


def synth(**over):
    cfg = copy.deepcopy(SYNTH)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(cfg.get(key), dict):
            cfg[key].update(value)
        else:
            cfg[key] = value
    return cfg


def libsvm_cfg(path):
    return {
        "dataset": {"kind": "libsvm", "path": str(path)},
        "model": {"loss": "logistic"},
        "algorithm": "fediterht",
        "params": {"stepsize": 0.2, "sparsity": 3, "local_steps": 2, "batch_size": "full"},
        "rounds": 4,
    }


# ---- real processes ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cli_runs(tmp_path_factory):
    """Start every CLI process at once; return {name: (returncode, stdout, stderr, out_path)}."""
    tmp = tmp_path_factory.mktemp("cli")
    (tmp / "clients.svm").write_text(QID_FILE)
    (tmp / "run.yaml").write_text(yaml.safe_dump(SYNTH))
    (tmp / "run.json").write_text(json.dumps(libsvm_cfg(tmp / "clients.svm")))
    (tmp / "broken.yaml").write_text("dataset: {kind: synthetic\nalgorithm: [fedht\n")
    missing = libsvm_cfg(tmp / "nowhere.svm")
    (tmp / "missing.json").write_text(json.dumps(missing))
    jobs = {}
    for name, config in (
        ("yaml", "run.yaml"),
        ("json", "run.json"),
        ("broken", "broken.yaml"),
        ("missing", "missing.json"),
    ):
        out = tmp / f"{name}.parquet"
        proc = subprocess.Popen(
            [sys.executable, "-m", "fedsparse.cli", "run", str(tmp / config), "-o", str(out)],
            cwd=tmp,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        jobs[name] = (proc, out)
    results = {}
    for name, (proc, out) in jobs.items():
        stdout, stderr = proc.communicate(timeout=300)
        results[name] = (proc.returncode, stdout, stderr, out)
    results["tmp"] = tmp
    return results


def test_cli_yaml_run_writes_parquet_trace(cli_runs):
    code, stdout, stderr, out = cli_runs["yaml"]
    assert code == 0, stderr
    df = pd.read_parquet(out)
    for column in TRACE_COLUMNS:
        assert column in df.columns, column
    assert list(df["round"]) == [0, 3, 6, 7]  # eval_every 3 plus the last round
    assert list(df["local_iterations"]) == [0, 6, 12, 14]
    assert set(df["status"]) == {"ok"}
    assert df["run_id"].nunique() == 1
    assert df["run_id"].iloc[0] == run_id(normalize_run_config(SYNTH))
    row = df.iloc[-1]
    assert row["dataset"] == "sim-linear-a0.1-b0.1" and row["algorithm"] == "fedht"
    assert (
        row["seed"],
        row["stepsize"],
        row["local_steps"],
        row["sparsity"],
        row["batch_size"],
    ) == (3, 0.01, 2, 4, 5)
    assert np.all(np.diff(df["bytes_up"]) > 0) and df["bytes_up"].iloc[0] == 0
    assert df["bytes_up"].iloc[-1] == 7 * 3 * 8 * 20  # 7 rounds x 3 clients x dense d
    assert np.all(np.diff(df["elapsed_s"]) >= 0) and df["elapsed_s"].iloc[0] == 0
    assert np.all(np.isfinite(df["objective"]))
    assert df["objective"].iloc[-1] < df["objective"].iloc[0]
    assert "objective" in stdout and stderr.count("Traceback") == 0


def test_cli_json_libsvm_run(cli_runs):
    code, _, stderr, out = cli_runs["json"]
    assert code == 0, stderr
    df = pd.read_parquet(out)
    assert list(df["round"]) == [0, 1, 2, 3, 4]
    assert set(df["dataset"]) == {"clients"} and set(df["algorithm"]) == {"fediterht"}
    assert df["batch_size"].isna().all()  # full batch is stored as null
    assert "train_accuracy" in df.columns and df["train_accuracy"].between(0, 1).all()
    assert set(df["status"]) == {"ok"}


@pytest.mark.parametrize("name,needle", [("broken", "broken.yaml"), ("missing", "nowhere.svm")])
def test_cli_process_reports_one_line_and_exits_2(cli_runs, name, needle):
    code, stdout, stderr, out = cli_runs[name]
    assert code == 2
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert needle in lines[0] and "Traceback" not in stderr
    assert not out.exists()
    assert not list(cli_runs["tmp"].glob(f".{out.name}*"))  # no temporary left behind


# ---- bad configs, in-process ----------------------------------------------------------------


def _bad_configs(tmp):
    (tmp / "bad.svm").write_text("1 qid:1 1:0.5\n0 qid:1 2:1.0 what\n")
    (tmp / "ok.svm").write_text(QID_FILE)
    return {
        "unknown-top-key": (synth(colour="blue"), "colour"),
        "unknown-params-key": (synth(params={"bogus": 1}), "params.bogus"),
        "unknown-algorithm": (synth(algorithm="sgd-magic"), "algorithm"),
        "stepsize-zero": (synth(params={"stepsize": 0}), "params.stepsize"),
        "stepsize-negative": (synth(params={"stepsize": -0.1}), "params.stepsize"),
        "sparsity-zero": (synth(params={"sparsity": 0}), "params.sparsity"),
        "batch-size-zero": (synth(params={"batch_size": 0}), "params.batch_size"),
        "missing-data-file": (libsvm_cfg(tmp / "absent.svm"), str(tmp / "absent.svm")),
        "malformed-svmlight": (libsvm_cfg(tmp / "bad.svm"), str(tmp / "bad.svm")),
        "sparsity-above-dim": (synth(params={"sparsity": 21}), "params.sparsity"),
        "sparsity-above-libsvm-dim": (
            {**libsvm_cfg(tmp / "ok.svm"), "params": {"stepsize": 0.1, "sparsity": 11}},
            "params.sparsity",
        ),
        "sparsity-infinite": (synth(params={"sparsity": float("inf")}), "params.sparsity"),
        "unknown-dataset-key": (synth(dataset={"colour": 1}), "dataset.colour"),
        "unknown-loss": (synth(model={"loss": "hinge"}), "model.loss"),
        "rounds-zero": (synth(rounds=0), "rounds"),
    }


BAD_NAMES = [
    "unknown-top-key",
    "unknown-params-key",
    "unknown-algorithm",
    "stepsize-zero",
    "stepsize-negative",
    "sparsity-zero",
    "batch-size-zero",
    "missing-data-file",
    "malformed-svmlight",
    "sparsity-above-dim",
    "sparsity-above-libsvm-dim",
    "sparsity-infinite",
    "unknown-dataset-key",
    "unknown-loss",
    "rounds-zero",
]


def run_main(args, capsys):
    code = cli.main(args)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def assert_one_line_error(code, out, err, needle, output):
    assert code == 2
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("fedsparse: error: ")
    assert needle in lines[0], lines[0]
    assert "Traceback" not in err and out == ""
    assert not output.exists()


@pytest.mark.parametrize("fmt", ["yaml", "json"])
@pytest.mark.parametrize("case", BAD_NAMES)
def test_bad_config_exits_2_with_one_line(tmp_path, capsys, case, fmt):
    cfg, needle = _bad_configs(tmp_path)[case]
    path = tmp_path / f"config.{fmt}"
    if fmt == "yaml":
        path.write_text(yaml.safe_dump(cfg))
    else:
        path.write_text(json.dumps(cfg))
    output = tmp_path / "out.parquet"
    code, out, err = run_main(["run", str(path), "-o", str(output)], capsys)
    assert_one_line_error(code, out, err, needle, output)


@pytest.mark.parametrize(
    "name,text",
    [
        ("broken.yaml", "dataset: {kind: synthetic\nrounds: [1\n"),
        ("broken.json", '{"dataset": {"kind": "synthetic"},\n "rounds": }'),
        ("list.yaml", "- 1\n- 2\n"),
    ],
)
def test_malformed_config_file(tmp_path, capsys, name, text):
    path = tmp_path / name
    path.write_text(text)
    output = tmp_path / "out.parquet"
    code, out, err = run_main(["run", str(path), "-o", str(output)], capsys)
    assert_one_line_error(code, out, err, str(path), output)


@pytest.mark.parametrize(
    "text, where",
    [
        ("dataset: {kind: synthetic\nrounds: [1\n", ", line 2, column 7: malformed YAML (while"),
        ("a: 1\n  b: 2\n", ", line 2, column 4: malformed YAML (mapping values"),
    ],
)
def test_malformed_yaml_names_the_file_and_line(tmp_path, capsys, text, where):
    path = tmp_path / "broken.yaml"
    path.write_text(text)
    for args in (["run", str(path), "-o", str(tmp_path / "out.parquet")], ["check", str(path)]):
        code, out, err = run_main(args, capsys)
        assert_one_line_error(code, out, err, f"{path}{where}", tmp_path / "out.parquet")


def test_check_plans_a_sweep_as_the_workflow_does_without_running_it(tmp_path, capsys):
    root = Path(__file__).resolve().parents[1]
    code, out, err = run_main(["check", str(root / "config/quick.yaml")], capsys)
    assert code == 0 and err == ""
    first, *cost = out.splitlines()
    assert (
        first
        == f"{root / 'config/quick.yaml'}: a valid sweep: 120 runs in 3 shards over 3 data sets"
    )
    assert cost[0].startswith("estimated cost: ") and "core-hours" in cost[0]
    # a second file overrides the first, as `snakemake --configfile A B` merges them
    (tmp_path / "more.yaml").write_text("grid: {sparsity: [400]}\n")
    code, out, err = run_main(
        ["check", str(root / "config/quick.yaml"), str(tmp_path / "more.yaml")], capsys
    )
    assert code == 2 and out == "" and len(err.splitlines()) == 1
    assert "more.yaml: grid.sparsity: 400 is larger than the dimension 200 of dataset" in err
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(synth()))
    code, out, err = run_main(["check", str(path)], capsys)
    assert code == 0 and out.startswith(f"{path}: a valid run config (")


def test_missing_config_file(tmp_path, capsys):
    path = tmp_path / "nope.yaml"
    output = tmp_path / "out.parquet"
    code, out, err = run_main(["run", str(path), "-o", str(output)], capsys)
    assert_one_line_error(code, out, err, str(path), output)


def test_non_finite_integers_are_config_errors(tmp_path, capsys):
    """Bug in config._integer (src/fedsparse/training/config.py): ``rounds: .inf`` raises
    OverflowError and ``rounds: .nan`` ValueError from ``int(value)``, so the CLI dies
    with a traceback instead of a one-line error naming the key. Same for every integer
    key that goes through ``_integer`` (eval_every, seed, dataset.clients, ...)."""
    failures = []
    for key in ("rounds", "eval_every", "seed", "dataset.clients"):
        for value in (float("inf"), float("nan")):
            cfg = copy.deepcopy(SYNTH)
            if key.startswith("dataset."):
                cfg["dataset"][key.split(".")[1]] = value
            else:
                cfg[key] = value
            path = tmp_path / "config.yaml"
            path.write_text(yaml.safe_dump(cfg))
            output = tmp_path / "out.parquet"
            try:
                code, out, err = run_main(["run", str(path), "-o", str(output)], capsys)
                assert_one_line_error(code, out, err, key, output)
            except Exception as exc:  # noqa: BLE001 - collect every case, then report
                failures.append(f"{key}: {value}: {type(exc).__name__}: {exc}")
    assert not failures, "\n".join(failures)


def test_fractional_integers_are_config_errors(tmp_path, capsys):
    for key in ("rounds", "eval_every", "seed"):
        path = tmp_path / "config.yaml"
        path.write_text(yaml.safe_dump({**SYNTH, key: 1.5}))
        output = tmp_path / "out.parquet"
        code, out, err = run_main(["run", str(path), "-o", str(output)], capsys)
        assert_one_line_error(code, out, err, key, output)


def test_in_process_run_writes_what_the_process_writes(tmp_path, capsys):
    path = tmp_path / "run.yaml"
    path.write_text(yaml.safe_dump(synth(rounds=2, eval_every=1)))
    output = tmp_path / "sub" / "out.parquet"
    code, out, err = run_main(["run", str(path), "-o", str(output)], capsys)
    assert code == 0 and err == "" and "objective" in out
    df = pd.read_parquet(output)
    assert list(df["round"]) == [0, 1, 2]
    assert [p.name for p in output.parent.iterdir()] == ["out.parquet"]


# ---- run ids ---------------------------------------------------------------------------------


def test_run_id_is_stable():
    a = run_id(normalize_run_config(SYNTH))
    assert len(a) == 16 and int(a, 16) >= 0
    assert run_id(normalize_run_config(copy.deepcopy(SYNTH))) == a
    # key order does not matter
    reordered = dict(reversed(list(SYNTH.items())))
    assert run_id(normalize_run_config(reordered)) == a
    # the sweep label is not part of the identity
    assert run_id(normalize_run_config(synth(sweep="other"))) == a


def test_run_id_defaults_written_explicitly():
    minimal = {
        "dataset": {"kind": "synthetic"},
        "algorithm": "fedht",
        "params": {"stepsize": 0.1, "sparsity": 10},
        "rounds": 5,
    }
    explicit = {
        "sweep": "single",
        "dataset": {
            "kind": "synthetic",
            "task": "linear",
            "clients": 100,
            "samples_per_client": 100,
            "dim": 1000,
            "support": 100,
            "alpha": 0.1,
            "beta": 0.1,
            "seed": 0,
            "noise_std": 1.0,
            "positives": 100,
            "shared_model": False,
            "name": "sim-linear-a0.1-b0.1",
        },
        "partition": "natural",
        "model": {"loss": "least_squares", "l2": 0.0, "weights": "uniform"},
        "algorithm": "fedht",
        "params": {
            "stepsize": 0.1,
            "sparsity": 10,
            "local_steps": 5,
            "batch_size": 10,
            "batch_growth": 1.0,
        },
        "rounds": 5,
        "seed": 0,
        "eval_every": 1,
    }
    assert normalize_run_config(explicit) == normalize_run_config(minimal)
    assert run_id(normalize_run_config(explicit)) == run_id(normalize_run_config(minimal))
    # integer-valued floats and ints mean the same run
    same = copy.deepcopy(minimal)
    same["params"]["stepsize"] = 0.1
    same["rounds"] = 5.0
    assert run_id(normalize_run_config(same)) == run_id(normalize_run_config(minimal))


@pytest.mark.parametrize(
    "change",
    [
        {"params": {"stepsize": 0.02}},
        {"params": {"local_steps": 3}},
        {"params": {"batch_size": "full"}},
        {"seed": 4},
        {"rounds": 8},
        {"algorithm": "fediterht"},
        {"dataset": {"seed": 2}},
        {"model": {"weights": "samples"}},
    ],
)
def test_run_id_changes_with_the_run(change):
    assert run_id(normalize_run_config(synth(**change))) != run_id(normalize_run_config(SYNTH))


def test_logistic_l2_default_is_1e_4():
    cfg = normalize_run_config(
        synth(model={"loss": "logistic"}, dataset={"task": "logistic", "positives": 5})
    )
    assert cfg["model"]["l2"] == 1e-4
    assert normalize_run_config(SYNTH)["model"]["l2"] == 0.0


def test_check_counts_read_as_a_person_would_say_them(tmp_path, capsys):
    # one data set, one shard: "1 shard", not "1 shards"
    path = tmp_path / "one.yaml"
    sweep = {
        "sweep": "one",
        "rounds": 1,
        "seeds": [0],
        "datasets": {"lin": {"data": {"kind": "synthetic", "dim": 20, "support": 2}}},
        "algorithms": ["fedht"],
        "grid": {"stepsize": [0.1], "sparsity": [2]},
    }
    path.write_text(yaml.safe_dump(sweep))
    code, out, err = run_main(["check", str(path)], capsys)
    assert code == 0 and err == ""
    assert out.startswith(f"{path}: a valid sweep: 1 run in 1 shard over 1 data set\nestimated")
    path.write_text(yaml.safe_dump({**synth(), "rounds": 1}))
    code, out, err = run_main(["check", str(path)], capsys)
    assert code == 0 and ", 1 round)\nestimated cost: " in out, out


def test_a_run_imports_no_pandas(tmp_path):
    """pandas (0.2 s to import) is for tables a run never builds: ``fedsparse run`` writes its
    trace through ``results.rows_table``, whose columns are assembled without ``pa.array`` on
    lists (which imports pandas to ask whether a list is a pandas object)."""
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(SYNTH))
    out = tmp_path / "out.parquet"
    code = (
        "import sys\n"
        "from fedsparse.cli import main\n"
        f"assert main(['run', {str(path)!r}, '-o', {str(out)!r}]) == 0\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'pandas'))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip().splitlines()[-1] == "[]"
    assert pq.read_table(out).column("round").to_pylist() == [0, 3, 6, 7]  # eval_every 3


def test_rows_table_is_pyarrow_s_table_of_the_same_rows():
    """The pandas-free column builder gives ``pa.Table.from_pydict``'s values, nulls and types:
    ints, floats (NaN and inf kept as values, NumPy scalars), unicode strings, all-null and
    empty columns; a value it does not assemble itself goes to ``pa.array`` with its error."""
    from fedsparse.results.schema import TRACE_SCHEMA, rows_table

    rng = np.random.default_rng(5)
    names = {f.name: f.type for f in TRACE_SCHEMA}
    ints = [n for n, t in names.items() if t == pa.int64()]
    floats = [n for n, t in names.items() if t == pa.float64()]
    strings = [n for n, t in names.items() if t == pa.string()]
    special = [float("nan"), float("inf"), -0.0, np.float64(2.5), np.float32(0.1), 3, 1e308]
    rows = []
    for i in range(40):
        row = {}
        for n in ints:
            if rng.random() < 0.7:
                row[n] = int(rng.integers(-(2**62), 2**62)) if i % 2 else np.int64(i)
        for n in floats:
            if rng.random() < 0.7:
                row[n] = special[i % len(special)] if i % 3 == 0 else float(rng.normal())
        for n in strings:
            if rng.random() < 0.7:
                row[n] = ["", "ok", "héllo wörld ✓", "x" * 300][i % 4]
        rows.append(row)
    for batch in (rows, rows[:1], [], [{}, {}]):
        want = pa.Table.from_pydict({n: [r.get(n) for r in batch] for n in names}, TRACE_SCHEMA)
        got = rows_table(batch, TRACE_SCHEMA)
        assert got.schema == want.schema
        assert repr(got.to_pylist()) == repr(want.to_pylist())  # NaN compares by its repr
        for name in names:
            assert got.column(name).null_count == want.column(name).null_count
    with pytest.raises(pa.ArrowTypeError):  # a bool in an int column: refused as pa.array does
        rows_table([{ints[0]: True}], TRACE_SCHEMA)
    with pytest.raises(pa.ArrowInvalid):  # an int a double cannot hold exactly: likewise
        rows_table([{floats[0]: 2**60 + 1}], TRACE_SCHEMA)
