"""A model that names no loss gets its data's (softmax for classes), in a run config and a sweep
alike: least squares on class numbers made a CNN on Fashion-MNIST diverge at once."""

from __future__ import annotations

import pytest

from fedsparse.sweep import plan_sweep
from fedsparse.training.config import normalize_run_config

IMAGES = {"kind": "idx", "source": "fashion-mnist"}
SYNTHETIC = {"kind": "synthetic", "task": "logistic", "clients": 4, "dim": 10, "support": 2}


@pytest.mark.parametrize(
    ("data", "model", "loss"),
    [
        (IMAGES, {"kind": "mlp", "hidden": [8]}, "softmax"),
        (IMAGES, None, "softmax"),
        (SYNTHETIC, {}, "logistic"),
        ({**SYNTHETIC, "task": "linear"}, {}, "least_squares"),
        (IMAGES, {"kind": "mlp", "loss": "least_squares"}, "least_squares"),  # named: kept
    ],
)
def test_a_model_without_a_loss_gets_its_datas(data, model, loss):
    run = {"dataset": data, "algorithm": "fedavg", "params": {"stepsize": 0.1}, "rounds": 1}
    if model is not None:
        run["model"] = model
    assert normalize_run_config(run)["model"]["loss"] == loss

    entry = {"data": data} if model is None else {"data": data, "model": model}
    sweep = {
        "sweep": "t",
        "rounds": 1,
        "seeds": [0],
        "datasets": {"d": entry},
        "algorithms": {"fedavg": {}},
        "grid": {"stepsize": [0.1]},
    }
    (planned,) = plan_sweep(sweep).runs
    assert planned.config["model"]["loss"] == loss
