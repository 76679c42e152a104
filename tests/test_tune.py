"""Optuna sweeps (fedsparse.tune): search spaces, parallel workers that stop at exactly
n_trials on a journal file and on a real PostgreSQL server, kill and resume, pruning,
export into the results Parquet, and the workflow from config to report."""

from __future__ import annotations

import copy
import glob
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml
from conftest import SMALL_LINEAR, kill_tree

optuna = pytest.importorskip("optuna")

from snakemake_helpers import TUNE  # noqa: E402

from fedsparse import run as run_config  # noqa: E402
from fedsparse.errors import ConfigError  # noqa: E402
from fedsparse.layout import Layout  # noqa: E402
from fedsparse.pipeline.steps import make_data  # noqa: E402
from fedsparse.sweep import plan_sweep  # noqa: E402
from fedsparse.tune.export import export_study, run_holdout  # noqa: E402
from fedsparse.tune.spec import study_spec  # noqa: E402
from fedsparse.tune.storage import create_study, load_study, open_storage  # noqa: E402
from fedsparse.tune.worker import metric_value, run_worker  # noqa: E402

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[1]
LIN = dict(SMALL_LINEAR)
STUDY = "t--lin--natural--fedht"
# a trade-off: a sparser download costs accuracy (optuna.objectives)
OBJECTIVES = [
    {"metric": "final_test_accuracy", "direction": "maximize"},
    {"metric": "total_bytes_down", "direction": "minimize"},
]
FINISHED = ("COMPLETE", "PRUNED")


def tune_cfg(**optuna_settings) -> dict:
    cfg = copy.deepcopy(TUNE)
    cfg["optuna"].update(optuna_settings)
    return cfg


def prepare(results: Path, cfg: dict, study: str = STUDY) -> Path:
    """Write the sweep file, build its data set and create the study."""
    results.mkdir(parents=True, exist_ok=True)
    for name in cfg["datasets"]:
        make_data(cfg, name, results / "data" / name)
    path = results / "sweep.yaml"
    path.write_text(yaml.safe_dump(cfg))
    create_study(cfg, study, results)
    return path


def spawn_worker(
    sweep: Path, results: Path, env: dict | None = None, study: str = STUDY
) -> subprocess.Popen:
    code = (
        "import sys, yaml\n"
        "from fedsparse.pipeline.steps import setup_logging\n"
        "from fedsparse.tune.worker import run_worker\n"
        "setup_logging(None)\n"
        "cfg = yaml.safe_load(open(sys.argv[1]))\n"
        "print('RAN', run_worker(cfg, sys.argv[2], sys.argv[3] + '/data', sys.argv[3]))\n"
    )
    return subprocess.Popen(
        [sys.executable, "-c", code, str(sweep), study, str(results)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
        start_new_session=True,
    )


def finish(procs: list[subprocess.Popen]) -> list[int]:
    ran = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-3000:]
        ran.append(int(out.split("RAN")[-1]))
    return ran


# One storage per results folder, study and database: a test that polls its trials 20 times a
# second opened a new RDBStorage (an SQLAlchemy engine and its pool) for every look, and the
# connections of the discarded ones outlived them until PostgreSQL refused more clients.
_STORAGES: dict[tuple[str, str, str], object] = {}


@pytest.fixture(autouse=True)
def _close_storages():
    yield
    for storage in _STORAGES.values():
        engine = getattr(storage, "engine", None)  # an RDBStorage's; journals have none
        if engine is not None:
            engine.dispose()
    _STORAGES.clear()


def trials_of(cfg: dict, results: Path, study: str = STUDY):
    spec = study_spec(cfg, study)
    storage = spec.settings.storage
    key = (str(results), spec.name, os.environ.get(storage.get("url_env") or "", ""))
    if key not in _STORAGES:
        _STORAGES[key] = open_storage(spec, results)
    # a fresh study object each look: Optuna's cache of finished trials lives in it
    return load_study(spec, _STORAGES[key]).get_trials(deepcopy=False)


def states(trials) -> dict[str, int]:
    out: dict[str, int] = {}
    for t in trials:
        out[t.state.name] = out.get(t.state.name, 0) + 1
    return out


# ------------------------------------------------------------------------ PostgreSQL


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def postgres_url():
    """A throw-away PostgreSQL server on 127.0.0.1 (Debian's postgresql package)."""
    pytest.importorskip("psycopg2", reason="psycopg2 (the test extra) is not installed")
    initdbs = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not initdbs:
        pytest.skip("no PostgreSQL server binaries (apt-get install postgresql)")
    bindir = Path(initdbs[-1]).parent
    prefix: list[str] = []
    root = Path(tempfile.mkdtemp(prefix="fedsparse-pg-", dir="/tmp"))
    if os.geteuid() == 0:  # the server refuses to run as root
        try:
            user = pwd.getpwnam("postgres")
        except KeyError:
            shutil.rmtree(root)
            pytest.skip("running as root and there is no 'postgres' user to run the server")
        os.chown(root, user.pw_uid, user.pw_gid)
        prefix = ["runuser", "-u", "postgres", "--"]
    data, port = root / "data", _free_port()

    def run(*cmd: str) -> subprocess.CompletedProcess:
        return subprocess.run([*prefix, *cmd], capture_output=True, text=True, timeout=120)

    proc = run(str(bindir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", "-N")
    if proc.returncode != 0:
        shutil.rmtree(root, ignore_errors=True)
        pytest.skip(f"initdb failed: {proc.stderr[-500:]}")
    opts = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off"
    proc = run(
        str(bindir / "pg_ctl"),
        "-D",
        str(data),
        "-l",
        str(root / "log"),
        "-w",
        "-t",
        "60",
        "-o",
        opts,
        "start",
    )
    if proc.returncode != 0:
        log = (root / "log").read_text() if (root / "log").exists() else ""
        shutil.rmtree(root, ignore_errors=True)
        pytest.skip(f"PostgreSQL did not start: {proc.stderr[-300:]} {log[-500:]}")
    try:
        yield f"postgresql+psycopg2://postgres@127.0.0.1:{port}/postgres"
    finally:
        run(str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop")
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(params=["journal", "postgresql"])
def storage(request, monkeypatch, tmp_path):
    """(optuna settings, extra environment) for each storage; PostgreSQL gets a fresh
    database per test so that studies never mix."""
    if request.param == "journal":
        return {"storage": "journal"}, {}
    base = request.getfixturevalue("postgres_url")
    db = f"t{os.getpid()}_{int(time.time() * 1000) % 10**9}"
    import sqlalchemy

    engine = sqlalchemy.create_engine(base, isolation_level="AUTOCOMMIT")
    with engine.connect() as conn:
        conn.execute(sqlalchemy.text(f"CREATE DATABASE {db}"))
    engine.dispose()
    url = base.rsplit("/", 1)[0] + "/" + db
    monkeypatch.setenv("FEDSPARSE_TEST_PG", url)
    return {"storage": {"url_env": "FEDSPARSE_TEST_PG"}}, {"FEDSPARSE_TEST_PG": url}


# ------------------------------------------------------------------------ tests


@pytest.mark.parametrize(
    "edit, needle",
    [
        (lambda c: c["space"]["stepsize"].update(low=0.1, high=0.01), "space.stepsize: low"),
        (lambda c: c["space"]["stepsize"].update(low=0.0), "space.stepsize.low: a log scale"),
        (
            lambda c: c["space"].update(momentum={"type": "float", "low": 0, "high": 1}),
            "space.momentum: unknown parameter",
        ),
        (lambda c: c["space"]["local_steps"].update(type="float"), "space.local_steps.type"),
        (lambda c: c["space"]["sparsity"].update(choices=[0, 5]), "space.sparsity.choices[0]"),
        (lambda c: c["space"].pop("stepsize"), "space.stepsize: required by fedht"),
        (lambda c: c["optuna"].update(storage="sqlite"), "SQLite allows only one worker"),
        (
            lambda c: c["optuna"].update(storage={"url": "postgresql://u:pw@h/db"}),
            "optuna.storage.url: database URLs hold credentials",
        ),
        (lambda c: c["optuna"].update(holdout_seeds=[0]), "optuna.holdout_seeds"),
        (lambda c: c["optuna"].update(sampler={"name": "grid"}), "the grid sampler needs"),
        (lambda c: c["optuna"].update(metric="auc"), "optuna.metric: unknown metric"),
        (lambda c: c.update(grid={"stepsize": [0.1]}), "grid: not used with method optuna"),
        # multi-objective studies
        (
            lambda c: c["optuna"].update(metric="final_objective", objectives=OBJECTIVES),
            "optuna: give metric (one objective) or objectives (several), not both",
        ),
        (
            lambda c: c["optuna"].update(objectives=OBJECTIVES, pruner={"name": "median"}),
            "optuna.pruner: Optuna cannot prune a multi-objective study (objectives)",
        ),
        (
            lambda c: c["optuna"].update(objectives=OBJECTIVES[:1]),
            "optuna.objectives: must list two or more",
        ),
        (
            lambda c: c["optuna"].update(objectives=[OBJECTIVES[0], {"metric": "total_bytes"}]),
            "optuna.objectives[1].direction: must be minimize or maximize, got None",
        ),
        (
            lambda c: c["optuna"].update(
                objectives=[OBJECTIVES[0], {"metric": "total_byte_up", "direction": "minimize"}]
            ),
            "optuna.objectives[1].metric: unknown metric 'total_byte_up'; did you mean "
            "total_bytes_up",
        ),
        (
            lambda c: c["optuna"].update(objectives=[OBJECTIVES[0], OBJECTIVES[0]]),
            "optuna.objectives: lists final_test_accuracy twice",
        ),
        (
            lambda c: c["optuna"].update(
                objectives=[
                    {"metric": "final_objective", "direction": "minimize", "k": 1},
                    OBJECTIVES[1],
                ]
            ),
            "optuna.objectives[0].k: unknown key",
        ),
        (
            lambda c: c["optuna"].update(objectives=OBJECTIVES, sampler={"name": "cmaes"}),
            "optuna.sampler.name: cmaes optimises one objective",
        ),
        (
            lambda c: c["optuna"].update(sampler={"name": "nsga2", "population_size": 1}),
            "optuna.sampler.population_size",
        ),
    ],
)
def test_bad_search_space_or_settings_are_refused_by_name(edit, needle):
    cfg = copy.deepcopy(TUNE)
    edit(cfg)
    with pytest.raises(ConfigError, match=None) as exc:
        plan_sweep(cfg)
    assert needle in str(exc.value) and "\n" not in str(exc.value)


def test_space_beyond_the_data_fails_before_any_trial(tmp_path):
    cfg = copy.deepcopy(TUNE)
    cfg["space"]["sparsity"]["choices"] = [5, 400]  # the data set has 40 features
    prepare(tmp_path, cfg)
    with pytest.raises(ConfigError, match="space: fedht on lin: params.sparsity"):
        run_worker(cfg, STUDY, tmp_path / "data", tmp_path)
    assert trials_of(cfg, tmp_path) == []


def test_bad_space_stops_the_workflow_before_any_job(tmp_path):
    cfg = copy.deepcopy(TUNE)
    cfg["space"]["stepsize"]["low"] = -1.0
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(cfg))
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "snakemake",
            "-s",
            str(ROOT / "Snakefile"),
            "--directory",
            str(tmp_path),
            "-n",
            "--configfile",
            str(path),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode != 0
    assert "space.stepsize.low: a log scale needs low > 0" in proc.stdout + proc.stderr
    assert not (tmp_path / "results").exists()


def test_metrics_of_a_trace():
    trace = run_config(
        {
            "dataset": LIN,
            "algorithm": "fedht",
            "rounds": 10,
            "params": {"stepsize": 0.01, "local_steps": 2, "sparsity": 10, "batch_size": 5},
        }
    )
    import pyarrow as pa

    table = pa.Table.from_pandas(trace, preserve_index=False)
    obj = trace["objective"].to_numpy()
    assert metric_value(table, {"name": "final_objective"}, 10) == obj[-1]
    assert metric_value(table, {"name": "best_objective"}, 10) == obj.min()
    target = obj[4]
    assert metric_value(table, {"name": "rounds_to_target", "target": target}, 10) <= 4
    assert metric_value(table, {"name": "rounds_to_target", "target": -1.0}, 10) == 11
    auc = metric_value(table, {"name": "auc_log_objective"}, 10)
    assert min(obj) < 10**auc < max(obj)


def test_two_parallel_workers_reach_exactly_n_trials(tmp_path, storage):
    settings, env = storage
    cfg = tune_cfg(n_trials=12, **settings)
    cfg["rounds"] = 60
    sweep = prepare(tmp_path, cfg)
    ran = finish([spawn_worker(sweep, tmp_path, env), spawn_worker(sweep, tmp_path, env)])
    assert sum(ran) == 12 and min(ran) >= 1, ran  # both worked, together exactly n_trials
    trials = trials_of(cfg, tmp_path)
    assert len(trials) == 12 and states(trials) == {"COMPLETE": 12}
    assert sorted(t.number for t in trials) == list(range(12))
    # a worker started after the end runs nothing and adds nothing
    assert run_worker(cfg, STUDY, tmp_path / "data", tmp_path) == 0
    assert len(trials_of(cfg, tmp_path)) == 12
    # export: every trial's runs, with trial number, state and sampler; then held-out runs
    export_study(cfg, STUDY, tmp_path, tmp_path / "tr.parquet", tmp_path / "tr.runs.parquet")
    runs = pd.read_parquet(tmp_path / "tr.runs.parquet")
    assert sorted(runs.trial_number) == list(range(12))
    assert set(runs.trial_state) == {"COMPLETE"} and runs.run_id.is_unique
    assert json.loads(runs.sampler.iloc[0]) == {"name": "random", "seed": 0}
    traces = pd.read_parquet(tmp_path / "tr.parquet")
    assert traces.groupby("trial_number")["round"].max().eq(60).all()
    by_trial = {t.number: t for t in trials}
    for row in runs.itertuples():
        assert row.stepsize == pytest.approx(by_trial[row.trial_number].params["stepsize"])
        assert row.trial_value == pytest.approx(by_trial[row.trial_number].value)
    run_holdout(cfg, STUDY, tmp_path / "data", tmp_path, tmp_path / "h.parquet", tmp_path / "h.rp")
    hold = pd.read_parquet(tmp_path / "h.rp")
    best = min((t for t in trials), key=lambda t: t.value)
    assert list(hold.seed) == [7] and list(hold.trial_state) == ["HOLDOUT"]
    assert hold.stepsize.iloc[0] == pytest.approx(best.params["stepsize"])
    assert hold.final_round.iloc[0] == 60


def test_kill_and_resume_keeps_finished_trials_and_reruns_abandoned_ones(tmp_path, storage):
    settings, env = storage
    cfg = tune_cfg(n_trials=10, heartbeat_interval=1, grace_period=4, **settings)
    cfg["rounds"] = 400  # long enough that a kill catches trials running
    sweep = prepare(tmp_path, cfg)
    procs = [spawn_worker(sweep, tmp_path, env), spawn_worker(sweep, tmp_path, env)]
    deadline = time.monotonic() + 180
    try:
        while time.monotonic() < deadline:
            s = states(trials_of(cfg, tmp_path))
            if s.get("COMPLETE", 0) >= 3 and s.get("RUNNING", 0) >= 1:
                # a running trial may finish between the look and the kill: freeze the
                # workers, look again, and kill only when a trial is still caught running
                for p in procs:
                    os.killpg(p.pid, signal.SIGSTOP)
                s = states(trials_of(cfg, tmp_path))
                if s.get("RUNNING", 0) >= 1:
                    break
                for p in procs:
                    os.killpg(p.pid, signal.SIGCONT)
            time.sleep(0.05)
        else:
            pytest.fail(f"no progress within 180 s: {s}")
    finally:
        for p in procs:
            os.killpg(p.pid, signal.SIGKILL)  # as a crash or a lost node would
            p.wait()
    before = trials_of(cfg, tmp_path)
    kept = {t.number: t.value for t in before if t.state.name == "COMPLETE"}
    abandoned = {t.number for t in before if t.state.name == "RUNNING"}
    assert kept and abandoned
    if "url_env" in settings["storage"]:
        # pretend the dead workers ran on another machine: only heartbeats can tell now
        spec = study_spec(cfg, STUDY)
        raw = open_storage(spec, tmp_path)
        for t in before:
            if t.number in abandoned:
                raw.set_trial_user_attr(t._trial_id, "fedsparse_worker", {"host": "x", "pid": 1})
    t0 = time.monotonic()
    ran = finish([spawn_worker(sweep, tmp_path, env), spawn_worker(sweep, tmp_path, env)])
    after = trials_of(cfg, tmp_path)
    finished = [t for t in after if t.state.name in FINISHED]
    parts = Layout(tmp_path).study_trial_parts(STUDY)
    saved = {n for n in abandoned if (parts / f"{n:06d}.parquet").exists()}  # killed in between
    assert len(finished) == 10 and sum(ran) == 10 - len(kept) - len(saved)
    assert {t.number: t.value for t in after if t.number in kept} == kept
    failed = {t.number for t in after if t.state.name == "FAIL"}
    assert failed == abandoned - saved  # abandoned trials were failed ...
    retries = {t.user_attrs.get("fedsparse_retry_of"): t for t in after}
    for n in abandoned - saved:  # ... and re-run with the same parameters
        assert retries[n].state.name in FINISHED
        # (a trial killed while its parameters were being drawn keeps those it had)
        old = next(t.params for t in before if t.number == n)
        assert old.items() <= retries[n].params.items()
    assert states(after).get("RUNNING", 0) == 0 and states(after).get("WAITING", 0) == 0
    if "url_env" in settings["storage"]:
        assert time.monotonic() - t0 >= 3  # waited for the grace period of the heartbeats


def test_a_trial_saved_but_not_told_is_finished_from_its_part(tmp_path):
    """A worker killed between saving a trial's runs and telling the study leaves the trial
    running with its part on disk: the next reservation records the saved outcome (same
    number, same value) instead of failing the trial and running it again."""
    from fedsparse.tune.worker import _reserve, recorded_outcome

    cfg = tune_cfg(n_trials=3)
    prepare(tmp_path, cfg)
    spec = study_spec(cfg, STUDY)
    storage = open_storage(spec, tmp_path)
    study = load_study(spec, storage)
    parts = Layout(tmp_path).study_trial_parts(STUDY)
    parts.mkdir(parents=True, exist_ok=True)
    dead = {"host": socket.gethostname(), "pid": 2**22 + 17}  # no such process
    for number, (state, value) in enumerate([("COMPLETE", 1.5), ("PRUNED", 9.0), (None, 0)]):
        trial = study.ask(spec.distributions())
        storage.set_trial_user_attr(trial._trial_id, "fedsparse_worker", dead)
        if state is not None:
            meta = {b"fedsparse_trial": json.dumps({"value": value, "state": state}).encode()}
            table = pa.table({"x": [1]}).replace_schema_metadata(meta)
            pq.write_table(table, parts / f"{number:06d}.parquet")
    assert recorded_outcome(parts, 0) == ("COMPLETE", 1.5) and recorded_outcome(parts, 2) is None
    _reserve(study, spec, storage, parts)
    by_number = {t.number: t for t in study.get_trials(deepcopy=False)}
    assert by_number[0].state.name == "COMPLETE" and by_number[0].value == 1.5
    assert by_number[1].state.name == "PRUNED"
    assert by_number[2].state.name == "FAIL"  # nothing saved: failed and re-queued


def test_pruning_stops_trials_whose_step_size_diverges(tmp_path):
    steps = [0.001, 0.003, 0.3, 1.0]
    params = {"local_steps": 2, "sparsity": 10, "batch_size": 5}
    # half of these step sizes blow up on this data set (checked here, without pruning); the
    # divergence rule would end them itself, so it is switched off: here the pruner must
    free = 1e300
    grows = {}
    for s in steps:
        trace = run_config(
            {
                "dataset": LIN,
                "algorithm": "fedht",
                "rounds": 30,
                "params": {**params, "stepsize": s},
                "divergence_factor": free,
            }
        )
        grows[s] = trace.objective.iloc[-1] > 1e6 * trace.objective.iloc[0]
    assert [grows[s] for s in steps] == [False, False, True, True]

    cfg = copy.deepcopy(TUNE)
    cfg["divergence_factor"] = free
    cfg["algorithms"] = {"fedht": {"local_steps": 2, "sparsity": 10, "batch_size": 5}}
    cfg["space"] = {"stepsize": {"type": "categorical", "choices": steps}}
    cfg["optuna"].update(n_trials=16, n_workers=1, pruner={"name": "median", "n_startup_trials": 3})
    prepare(tmp_path, cfg)
    run_worker(cfg, STUDY, tmp_path / "data", tmp_path)
    export_study(cfg, STUDY, tmp_path, tmp_path / "tr.parquet", tmp_path / "tr.runs.parquet")
    runs = pd.read_parquet(tmp_path / "tr.runs.parquet").sort_values("trial_number")
    assert len(runs) == 16
    pruned = runs[runs.trial_state == "PRUNED"]
    assert len(pruned) >= 3
    assert (pruned.final_round < 30).all()  # stopped early; its trace is exported
    traces = pd.read_parquet(tmp_path / "tr.parquet")
    assert set(traces[traces.trial_state == "PRUNED"].trial_number) == set(pruned.trial_number)
    late = runs[runs.trial_number >= 3]  # after the pruner's startup trials
    bad = late[late.stepsize.map(grows)]
    assert len(bad) >= 2 and (bad.trial_state == "PRUNED").all()
    assert bad.final_round.sum() <= len(bad) * 30 / 3  # most of their rounds were saved
    good = runs[runs.trial_state == "COMPLETE"]
    assert not good.stepsize.map(grows).all()


def test_sqlite_storage_with_one_worker(tmp_path):
    cfg = tune_cfg(n_trials=3, n_workers=1, storage="sqlite")
    cfg["rounds"] = 5
    prepare(tmp_path, cfg)
    assert run_worker(cfg, STUDY, tmp_path / "data", tmp_path) == 3
    assert states(trials_of(cfg, tmp_path)) == {"COMPLETE": 3}
    assert (tmp_path / "optuna" / STUDY / "study.db").is_file()


def test_a_changed_search_space_is_not_resumed_silently(tmp_path):
    cfg = tune_cfg(n_trials=2)
    prepare(tmp_path, cfg)
    cfg["space"]["stepsize"]["high"] = 0.05
    with pytest.raises(ConfigError, match="different search space"):
        create_study(cfg, STUDY, tmp_path)


def test_url_storage_needs_its_environment_variable(tmp_path, monkeypatch):
    monkeypatch.delenv("FEDSPARSE_NO_SUCH_URL", raising=False)
    cfg = tune_cfg(storage={"url_env": "FEDSPARSE_NO_SUCH_URL"})
    with pytest.raises(ConfigError, match="FEDSPARSE_NO_SUCH_URL is not set"):
        create_study(cfg, STUDY, tmp_path)
    monkeypatch.setenv("FEDSPARSE_NO_SUCH_URL", "sqlite:///x.db")
    with pytest.raises(ConfigError, match="SQLite URL, which allows only one worker"):
        plan_sweep(cfg)


# ------------------------------------------------------------------------ workflow


def snakemake(workdir: Path, *args: str, check: bool = True):
    cmd = [
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        str(ROOT / "Snakefile"),
        "--directory",
        str(workdir),
        "--cores",
        "2",
        "--rerun-incomplete",
        *args,
    ]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"snakemake failed ({proc.returncode}):\n{proc.stdout[-2000:]}{proc.stderr[-4000:]}"
        )
    return proc


def test_workflow_interrupted_and_resumed_then_exported_and_reported(tmp_path):
    cfg = tune_cfg(n_trials=8, pruner={"name": "median", "n_startup_trials": 2})
    cfg["algorithms"] = {"fedht": {"batch_size": 5}, "distiht": {"batch_size": 5, "local_steps": 1}}
    cfg["rounds"] = 200
    cfg["space"]["stepsize"]["high"] = 0.1
    res = tmp_path / Layout.of_sweep(cfg).root  # results/<sweep>
    path = tmp_path / "sweep.yaml"
    path.write_text(yaml.safe_dump(cfg))
    dry = snakemake(tmp_path, "-n", "--configfile", str(path)).stdout
    for rule, n in [
        ("make_data", 1),
        ("optuna_study", 2),
        ("optuna_worker", 4),
        ("optuna_export", 2),
        ("optuna_holdout", 2),
        ("aggregate", 1),
    ]:
        assert f"\n{rule}" in dry and any(
            line.split() == [rule, str(n)] for line in dry.splitlines()
        ), (rule, dry)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "snakemake",
            "-s",
            str(ROOT / "Snakefile"),
            "--directory",
            str(tmp_path),
            "--cores",
            "2",
            "--configfile",
            str(path),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    parts = res / "optuna"
    deadline = time.monotonic() + 300
    try:
        while time.monotonic() < deadline:
            if len(list(parts.glob("*/trials/*.parquet"))) >= 3:
                break
            assert proc.poll() is None, "the workflow stopped before any trial finished"
            time.sleep(0.05)
        else:
            pytest.fail("no trial finished within 300 s")
    finally:
        kill_tree(proc.pid)  # Snakemake, and its jobs (in their own process groups)
        proc.wait()
    done_before = {p.parent.parent.name + "/" + p.stem for p in parts.glob("*/trials/*.parquet")}
    snakemake(tmp_path, "--configfile", str(path), "--unlock")
    snakemake(tmp_path, "--configfile", str(path))

    runs = pd.read_parquet(res / "runs.parquet")
    trials = runs[runs.trial_state.isin(FINISHED)]
    assert trials.groupby("study").trial_number.nunique().to_dict() == {
        "t--lin--natural--fedht": 8,
        "t--lin--natural--distiht": 8,
    }
    for key in done_before:  # trials finished before the kill were kept, not re-run
        study, number = key.split("/")
        assert int(number) in set(trials[trials.study == study].trial_number)
    hold = runs[runs.trial_state == "HOLDOUT"]
    assert sorted(hold.algorithm) == ["distiht", "fedht"] and set(hold.seed) == {7}
    assert runs.run_id.is_unique and trials.sampler.notna().all()
    from fedsparse.query.read import read_traces

    traces = read_traces(res).to_pandas()
    assert set(traces.run_id) == set(runs.run_id)
    assert traces.trial_number.notna().all()
    html = (res / "report/optuna.html").read_text()
    assert "Optuna studies" in html and "Parameter importances" in html
    assert 'href="optuna.html"' in (res / "report/index.html").read_text()
    assert (res / "report/figures/optuna_history_lin.png").is_file()
    best = pd.read_csv(res / "report/tables/optuna_best.csv")
    assert set(best.algorithm) == {"fedht", "distiht"} and (best.holdout_seeds == 1).all()
    # the comparison uses the held-out re-runs, not the trials
    configs = pd.read_csv(res / "report/tables/configs.csv")
    assert configs.runs.sum() == len(hold)
    proc = snakemake(tmp_path, "-n", "--configfile", str(path))
    assert "Nothing to be done" in proc.stdout + proc.stderr


def test_grid_sweeps_plan_no_study():
    plan = plan_sweep(yaml.safe_load((ROOT / "config/quick.yaml").read_text()))
    assert plan.studies == {} and len(plan.runs) == 120
    tq = plan_sweep(yaml.safe_load((ROOT / "config/tune-quick.yaml").read_text()))
    assert tq.shards == {} and len(tq.studies) == 3


def test_trial_files_merge_with_grid_shards(tmp_path):
    """aggregate: shard files (no Optuna columns) and study exports in one results folder."""
    from fedsparse.pipeline.shard_runner import run_shard
    from fedsparse.query.read import read_traces
    from fedsparse.results.aggregate import aggregate

    grid = {
        "sweep": "g",
        "rounds": 5,
        "datasets": {"lin": {"data": LIN}},
        "algorithms": ["fedht"],
        "grid": {"stepsize": [0.01], "sparsity": [5]},
    }
    make_data(grid, "lin", tmp_path / "data" / "lin")
    shard = next(iter(plan_sweep(grid).shards))
    run_shard(grid, shard, tmp_path / "data", tmp_path / "s.parquet", tmp_path / "s.runs.parquet")
    cfg = tune_cfg(n_trials=2, n_workers=1)
    cfg["rounds"] = 5
    create_study(cfg, STUDY, tmp_path)
    run_worker(cfg, STUDY, tmp_path / "data", tmp_path)
    export_study(cfg, STUDY, tmp_path, tmp_path / "o.parquet", tmp_path / "o.runs.parquet")
    # a shard written before the Optuna columns existed
    old = pq.read_table(tmp_path / "s.parquet")
    pq.write_table(
        old.drop_columns(["study", "trial_number", "trial_state", "sampler"]),
        tmp_path / "s.parquet",
    )
    out = tmp_path / "res"
    aggregate(
        [tmp_path / "s.parquet", tmp_path / "o.parquet"],
        [tmp_path / "s.runs.parquet", tmp_path / "o.runs.parquet"],
        out / "traces",
        out / "runs.parquet",
    )
    runs = pd.read_parquet(out / "runs.parquet")
    assert len(runs) == 3 and runs.trial_number.isna().sum() == 1
    traces = read_traces(out).to_pandas()
    assert traces.groupby("run_id").trial_state.first().isna().sum() == 1


# ------------------------------------------------------------------------ multi-objective

MO_DATA = {
    "kind": "synthetic",
    "task": "logistic",
    "clients": 4,
    "samples_per_client": 20,
    "dim": 20,
    "support": 4,
    "positives": 5,
    "alpha": 1,
    "beta": 1,
}
MO_PARTITION = {"kind": "iid", "clients": 4, "test_fraction": 0.25}


def mo_cfg(n_trials: int) -> tuple[dict, str]:
    """A two-objective study (test accuracy up, download bytes down) with NSGA-II."""
    sampler = {"name": "nsga2", "seed": 0, "population_size": 4}
    cfg = tune_cfg(n_trials=n_trials, sampler=sampler, objectives=OBJECTIVES)
    cfg["datasets"] = {
        "log": {"data": MO_DATA, "model": {"loss": "logistic"}, "partition": MO_PARTITION}
    }
    cfg["space"]["sparsity"] = {"type": "categorical", "choices": [2, 5, 10, 20]}
    (study,) = plan_sweep(cfg).studies
    return cfg, study


def test_two_objective_study_with_two_workers_reaches_exactly_n_trials(tmp_path, storage):
    """NSGA-II on two objectives, two workers: exactly n_trials, each trial told both values
    (the runs' mean test accuracy and download bytes); the export carries them; the hold-out
    re-runs are the study's Pareto set, which is the brute-force front of the trials' values."""
    from fedsparse.query import pareto_front

    settings, env = storage
    cfg, study = mo_cfg(10)
    cfg["optuna"].update(settings)
    sweep = prepare(tmp_path, cfg, study)
    ran = finish([spawn_worker(sweep, tmp_path, env, study) for _ in range(2)])
    assert sum(ran) == 10 and min(ran) >= 1, ran
    trials = trials_of(cfg, tmp_path, study)
    assert len(trials) == 10 and states(trials) == {"COMPLETE": 10}
    assert sorted(t.number for t in trials) == list(range(10))
    spec = study_spec(cfg, study)
    s = load_study(spec, open_storage(spec, tmp_path))
    assert [d.name for d in s.directions] == ["MAXIMIZE", "MINIMIZE"]
    # NSGA-II bred past its first population of 4
    assert max(t.system_attrs.get("NSGAIISampler:generation", 0) for t in trials) >= 1
    assert run_worker(cfg, study, tmp_path / "data", tmp_path) == 0

    export_study(cfg, study, tmp_path, tmp_path / "tr.parquet", tmp_path / "tr.runs.parquet")
    runs = pd.read_parquet(tmp_path / "tr.runs.parquet")
    traces = pd.read_parquet(tmp_path / "tr.parquet")
    last = traces.sort_values("round").groupby("run_id").tail(1).set_index("run_id")
    by_trial = {t.number: t for t in trials}
    assert sorted(runs.trial_number) == list(range(10))  # one seed per trial
    for row in runs.itertuples():
        values = json.loads(row.trial_values)
        assert [(v["metric"], v["direction"]) for v in values] == [
            (o["metric"], o["direction"]) for o in OBJECTIVES
        ]
        acc, down = by_trial[row.trial_number].values
        assert values[0]["value"] == pytest.approx(acc) == last.test_accuracy[row.run_id]
        assert values[1]["value"] == down == row.total_bytes_down == last.bytes_down[row.run_id]
        assert row.trial_value == pytest.approx(acc)
    assert runs.total_bytes_down.nunique() > 1  # sparsity moves the bytes: a real trade-off

    run_holdout(cfg, study, tmp_path / "data", tmp_path, tmp_path / "h.parquet", tmp_path / "h.rp")
    hold = pd.read_parquet(tmp_path / "h.rp")
    finite = sorted((t for t in trials if all(np.isfinite(t.values))), key=lambda t: t.number)
    on = pareto_front([t.values[0] for t in finite], [t.values[1] for t in finite], True)
    front = {}  # each configuration once, from its first trial (NSGA-II may copy a parent)
    for t, keep in zip(finite, on, strict=True):
        if keep:
            front.setdefault(json.dumps(t.params, sort_keys=True), t.number)
    front = set(front.values())
    assert len(front) >= 2  # a front, not a single best
    assert set(hold.trial_number) == front and len(hold) == len(front)  # holdout_seeds: [7]
    assert set(hold.trial_state) == {"HOLDOUT"} and set(hold.seed) == {7}
    for row in hold.itertuples():
        assert row.sparsity == by_trial[row.trial_number].params["sparsity"]
        assert json.loads(row.trial_values)[1]["value"] == by_trial[row.trial_number].values[1]

    # optuna.html shows the Pareto set with its held-out means, from the results alone
    from fedsparse.report.page import Page
    from fedsparse.report.tune_section import add_section
    from fedsparse.results.aggregate import aggregate

    out = tmp_path / "res"
    aggregate(
        [tmp_path / "tr.parquet", tmp_path / "h.parquet"],
        [tmp_path / "tr.runs.parquet", tmp_path / "h.rp"],
        out / "traces",
        out / "runs.parquet",
    )
    (out / "report" / "tables").mkdir(parents=True)
    page = Page(out / "report")
    assert add_section(page, out, out / "report" / "tables")
    html = "".join(page.parts)
    assert "Multi-objective studies: Pareto sets" in html and "Parameter importances" not in html
    assert page.figures == [f"optuna_pareto_{study}"]
    table = pd.read_csv(out / "report" / "tables" / "optuna_pareto.csv")
    assert sorted(table.trial) == sorted(front)
    for row in table.itertuples():  # one held-out seed: its mean is its run's value
        h = hold[hold.trial_number == row.trial].iloc[0]
        assert row.total_bytes_down == by_trial[row.trial].values[1]
        assert table.loc[table.trial == row.trial, "holdout total_bytes_down"].item() == (
            h.total_bytes_down
        )
    held_acc = table["holdout final_test_accuracy"]
    assert held_acc.between(0, 1).all()


def test_an_edited_study_on_a_copied_results_folder_is_refused_or_extended_never_mixed(tmp_path):
    """A results folder copied without Snakemake's records (.snakemake/) and a study
    edited in place. An edited search space stops with one line naming the study, before any
    trial of it; a larger budget extends the study."""
    cfg = tune_cfg(n_trials=2, n_workers=1)
    cfg["rounds"] = 10
    first, second = tmp_path / "first", tmp_path / "second"
    for folder in (first, second):
        folder.mkdir()
    (first / "sweep.yaml").write_text(yaml.safe_dump(cfg))
    snakemake(first, "--configfile", str(first / "sweep.yaml"))
    shutil.copytree(first / "results", second / "results", symlinks=True)
    res = Layout(second / Layout.of_sweep(cfg).root)
    spec = study_spec(cfg, STUDY)

    def trials() -> int:
        return len(load_study(spec, open_storage(spec, res.root)).trials)

    space = copy.deepcopy(cfg)
    space["space"]["stepsize"]["high"] = 5e-3
    path = second / "sweep.yaml"
    path.write_text(yaml.safe_dump(space))
    proc = snakemake(second, "--configfile", str(path), check=False)
    assert proc.returncode != 0
    digest = plan_sweep(space).studies[STUDY].digest
    errors = [
        line
        for line in res.study_log(STUDY, f"study.{digest}").read_text().splitlines()
        if " ERROR " in line
    ]
    assert len(errors) == 1 and f"study {STUDY}: the stored study has a different" in errors[0]
    assert trials() == 2  # no trial of the edited space

    budget = tune_cfg(n_trials=3, n_workers=1)
    budget["rounds"] = 10
    path.write_text(yaml.safe_dump(budget))
    snakemake(second, "--configfile", str(path))
    assert trials() == 3
    runs = pd.read_parquet(res.runs)
    assert runs[runs.trial_state.isin(FINISHED)].trial_number.nunique() == 3
    assert [p.name for p in res.study(STUDY).glob("study*.json")] == [
        f"study.{plan_sweep(budget).studies[STUDY].digest}.json"
    ]
