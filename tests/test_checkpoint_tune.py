"""An Optuna worker killed mid-trial: the retried trial resumes its run from the checkpoint,
reports every round to the study as the uninterrupted trial would, and saves the trace of the
run never interrupted."""

from __future__ import annotations

import copy
import os
import signal
import subprocess
import sys

import pandas as pd
import pytest
import yaml
from conftest import SMALL_LINEAR

from fedsparse.layout import Layout
from fedsparse.pipeline.steps import make_data
from fedsparse.results.checkpoint import KILL_IN_WRITE
from fedsparse.training.experiment import run_trace
from fedsparse.tune.spec import study_spec
from fedsparse.tune.storage import create_study, load_study, open_storage

pytestmark = pytest.mark.integration

ROUNDS = 600
TUNE = {
    "sweep": "t",
    "method": "optuna",
    "rounds": ROUNDS,
    "eval_every": 1,  # rows scored (and reported) every 16 rounds: some before the kill
    "seeds": [0],
    "datasets": {"lin": {"data": dict(SMALL_LINEAR)}},
    "algorithms": {"fedht": {"batch_size": 5, "local_steps": 2, "sparsity": 5}},
    "checkpoint_minutes": 1e-6,  # every round or so: the kill lands at round ~40, any machine
    "optuna": {
        "n_trials": 2,
        "n_workers": 1,
        "sampler": {"name": "random", "seed": 0},
        "storage": "journal",
        # a pruner, so trials report their rounds; too few trials for it to prune any
        "pruner": {"name": "median", "n_startup_trials": 10},
    },
    "space": {"stepsize": {"type": "float", "low": 1e-3, "high": 1e-2, "log": True}},
}
STUDY = "t--lin--natural--fedht"
STUDY_COLUMNS = ["run_id", "study", "trial_number", "trial_state", "sampler", "elapsed_s"]


def worker(sweep, results, env=None) -> tuple[int, str]:
    code = (
        "import sys, yaml\n"
        "from fedsparse.pipeline.steps import setup_logging\n"
        "from fedsparse.tune.worker import run_worker\n"
        "setup_logging(None)\n"
        "run_worker(yaml.safe_load(open(sys.argv[1])), sys.argv[2], sys.argv[3] + '/data',"
        " sys.argv[3])\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(sweep), STUDY, str(results)],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=600,
    )
    return proc.returncode, proc.stderr


def test_a_killed_trial_resumes_its_run_from_its_checkpoint(tmp_path):
    cfg = copy.deepcopy(TUNE)
    make_data(cfg, "lin", tmp_path / "data" / "lin")
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(yaml.safe_dump(cfg))
    create_study(cfg, STUDY, tmp_path)

    code, log = worker(sweep, tmp_path, {KILL_IN_WRITE: "40"})
    assert code == -signal.SIGKILL, log
    code, log = worker(sweep, tmp_path)
    assert code == 0, log
    lines = [line for line in log.splitlines() if "resumed from round" in line]
    assert len(lines) == 1, log
    resumed = int(lines[0].split("resumed from round ")[1].split()[0])
    # past the first 16 rounds, which the killed trial had scored and reported
    assert 16 < resumed < ROUNDS, lines
    assert "trial 0 was abandoned; failed" in log and "trial 0 re-queued" in log

    spec = study_spec(cfg, STUDY)
    trials = load_study(spec, open_storage(spec, tmp_path)).get_trials(deepcopy=False)
    [retry] = [t for t in trials if t.user_attrs.get("fedsparse_retry_of") == 0]
    assert retry.state.name == "COMPLETE"
    # every evaluated round reported, those before the checkpoint too
    assert sorted(retry.intermediate_values) == list(range(1, ROUNDS + 1))
    run_cfg = spec.run_config(retry.params, 0)
    alone = run_trace(run_cfg).to_pandas()
    parts = Layout(tmp_path).study_trial_parts(STUDY)
    saved = pd.read_parquet(parts / f"{retry.number:06d}.parquet")
    pd.testing.assert_frame_equal(
        saved.drop(columns=STUDY_COLUMNS), alone.drop(columns=STUDY_COLUMNS)
    )
    objective = dict(zip(alone["round"], alone["objective"], strict=True))
    assert retry.intermediate_values == {t: objective[t] for t in retry.intermediate_values}
    assert not list(Layout(tmp_path).study_checkpoint(STUDY, "x").parent.iterdir())
