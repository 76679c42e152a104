"""The authors'-code reading of the gradient-sparsification paper: the time each round is
charged in each reading, against rounds computed by hand (simulation.py of
github.com/PengchaoHan/Adaptive_Gradient_Sparsification_FL: a top-k round costs
beta / D / 2 * (2 k + 2 k_down), a periodic-k or FUB round beta / D * 2 k, computation 1)."""

from __future__ import annotations

import numpy as np
import pytest
from gs_helpers import run_cfg

from fedsparse.errors import ConfigError
from fedsparse.results.schema import to_frame
from fedsparse.training.config import normalize_run_config, run_id
from fedsparse.training.experiment import run_trace

D, K, BETA = 12, 5, 10.0  # run_cfg: a 12-parameter logistic model, k = 5
TIMING = {"step_time": 1.0, "round_latency": 0.0, "exchange_time": BETA}


def trace(name: str, **params):
    base = run_cfg(name)["params"]
    cfg = normalize_run_config(run_cfg(name, params={**base, **params}, time_model=TIMING))
    return cfg, to_frame(run_trace(cfg))


def test_periodic_k_in_each_reading():
    """paper_text: k values each way, 1 + beta k / D a round; authors_code: 1 + 2 beta k / D;
    the same trajectory (the charge is time only)."""
    _, text = trace("periodick")
    _, code = trace("periodick", charge="authors_code")
    assert np.allclose(np.diff(text["time"]), 1 + BETA * K / D)  # 5.1667
    assert np.allclose(np.diff(code["time"]), 1 + 2 * BETA * K / D)  # 9.3333
    np.testing.assert_array_equal(text["objective"], code["objective"])
    assert text["charge"].isna().all() or (text["charge"] == "paper_text").all()
    assert (code["charge"] == "authors_code").all()


def test_the_default_charge_keeps_run_ids():
    plain = normalize_run_config(run_cfg("periodick"))
    base = run_cfg("periodick")["params"]
    named = normalize_run_config(run_cfg("periodick", params={**base, "charge": "paper_text"}))
    assert "charge" not in plain["params"] and run_id(named) == run_id(plain)
    code = normalize_run_config(run_cfg("periodick", params={**base, "charge": "authors_code"}))
    assert run_id(code) != run_id(plain)


def test_top_k_rounds_are_charged_alike_in_both_readings():
    """FAB-top-k and FUB-top-k (the code's U_top_K): k elements up, |J| down, an element its
    value and its index: 1 + beta (k + |J|) / D, as the code charges them."""
    for name in ("fabtopk", "fubtopk"):
        _, df = trace(name)
        assert np.allclose(np.diff(df["time"]), 1 + BETA * (K + K) / D)  # |J| = k here


@pytest.mark.parametrize("name", ["fabtopk", "fubtopk", "utopk", "sendall"])
def test_charge_is_periodic_k_s_only(name):
    base = run_cfg(name)["params"]
    with pytest.raises(ConfigError, match="params.charge: unknown hyperparameter"):
        normalize_run_config(run_cfg(name, params={**base, "charge": "authors_code"}))


def test_gs_authors_runs_each_reading_on_its_own_data_set():
    """config/gs-authors.yaml: the writer-mix half in the authors' code's reading (periodic-k
    charged as coded, Algorithm 3 by the code's rules), the Dirichlet half in the paper's
    text; k_rules set by the grid is left out of the fixed-k runs."""
    from pathlib import Path

    import yaml

    from fedsparse.families.gradient_sparsification import report as gs_section
    from fedsparse.report.claims import reading_of
    from fedsparse.sweep import plan_sweep

    root = Path(__file__).resolve().parents[3]
    plan = plan_sweep(yaml.safe_load((root / "config/gs-authors.yaml").read_text()))
    kinds = {
        "fmnist-writer-mix": "authors_code",
        "fmnist-writer-mix-tn": "authors_code",  # from the code's initialisation as well
        "fmnist-writers": "paper_text",
    }
    for run in plan.runs:
        cfg, params = run.config, run.config["params"]
        assert reading_of(gs_section.READINGS, cfg).kind == kinds[cfg["dataset"]["name"]]
        code = cfg["dataset"]["name"].startswith("fmnist-writer-mix")
        assert (params.get("charge") == "authors_code") == (
            code and cfg["algorithm"] == "periodick"
        )
        online = params.get("k_control") == "online_extended"
        assert (params.get("k_rules") == "authors_code") == (code and online)
    # a mixed run (the code's charge on the text's partition) is neither paper reading
    text_periodic = next(
        r.config
        for r in plan.runs
        if r.config["algorithm"] == "periodick" and r.config["dataset"]["name"] == "fmnist-writers"
    )
    mixed = {**text_periodic, "params": {**text_periodic["params"], "charge": "authors_code"}}
    assert reading_of(gs_section.READINGS, mixed).kind == "variation"
