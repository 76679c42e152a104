"""Readings of the Simulation I/II generator: ``dataset.alpha_beta_as``,
``dataset.u_mean`` and ``dataset.v_mean``. Each option changes the moment it names (checked
against the formula on enough draws), the defaults leave the data, names and run ids as they
were, and a bad value is one line naming the key."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from fedsparse.data.synthetic import simulation
from fedsparse.errors import ConfigError
from fedsparse.training.config import normalize_dataset, normalize_run_config, run_id
from fedsparse.training.experiment import load_dataset

# Noiseless, support = dim and more rows than columns: each client's model x_i is the exact
# least-squares solution of its own rows, so the draws of u_i can be read back from the data.
EXACT = {"clients": 300, "samples_per_client": 110, "dim": 100, "support": 100, "noise_std": 0.0}


def client_models(data) -> np.ndarray:
    Z = data.X.reshape(data.n_clients, -1, data.n_features)
    y = data.y.reshape(data.n_clients, -1, 1)
    Zt = Z.transpose(0, 2, 1)
    return np.linalg.solve(Zt @ Z, Zt @ y)[..., 0]  # normal equations, all clients at once


def client_feature_means(data) -> np.ndarray:
    """Each client's feature mean over its rows, an estimate of its v_i."""
    return data.X.reshape(data.n_clients, -1, data.n_features).mean(axis=1)


@pytest.mark.parametrize("how, var_u", [("variance", 0.5), ("std", 0.25)])
def test_alpha_is_the_variance_or_the_sd_of_u(how, var_u):
    data = simulation("linear", alpha=0.5, alpha_beta_as=how, seed=1, **EXACT)
    # x_i's support entries ~ N(u_i, 1): their mean over 100 entries is u_i + N(0, 1/100)
    u_hat = client_models(data).mean(axis=1)
    assert u_hat.var() == pytest.approx(var_u + 1 / 100, rel=0.2)
    assert u_hat.mean() == pytest.approx(0.1, abs=0.1)


@pytest.mark.parametrize("how, var_b", [("variance", 4.0), ("std", 16.0)])
def test_beta_is_the_variance_or_the_sd_of_b(how, var_b):
    data = simulation("linear", beta=4.0, alpha_beta_as=how, seed=2, **EXACT)
    # v_i's entries ~ N(B_i, 1): their mean over 100 entries is B_i + N(0, 1/100)
    b_hat = client_feature_means(data).mean(axis=1)
    assert b_hat.var() == pytest.approx(var_b, rel=0.2)


@pytest.mark.parametrize("u_mean", [0.1, 0.0, 2.0])
def test_u_mean_is_the_mean_of_the_models_and_of_the_noise(u_mean):
    # two features of variance 1 and 2**-1.2, so that each client's intercept is identified
    kw = {"clients": 1000, "samples_per_client": 200, "dim": 2, "support": 2}
    data = simulation("linear", alpha=0.01, u_mean=u_mean, seed=3, **kw)
    blocks = zip(data.X.reshape(1000, 200, 2), data.y.reshape(1000, 200), strict=True)
    intercepts = [
        np.linalg.lstsq(np.column_stack([Z, np.ones(200)]), y, rcond=None)[0][-1] for Z, y in blocks
    ]
    # b_ij ~ N(u_i, 1): each client's intercept; x_i ~ N(u_i, 1): x_true's mean (sd 0.023)
    assert np.mean(intercepts) == pytest.approx(u_mean, abs=0.03)
    assert data.x_true.mean() == pytest.approx(u_mean, abs=0.1)


def test_shared_vector_gives_every_client_one_b_and_beta_no_say_between_clients():
    kw = {**EXACT, "clients": 200}
    shared = simulation("linear", beta=4.0, v_mean="shared_vector", seed=4, **kw)
    scalar = simulation("linear", beta=4.0, seed=4, **kw)
    v_shared, v_scalar = client_feature_means(shared), client_feature_means(scalar)
    # between clients, coordinate by coordinate: v_ik = B_k + N(0, 1) against B_i + N(0, 1)
    assert np.median(v_shared.var(axis=0)) == pytest.approx(1.0, rel=0.15)
    assert np.median(v_scalar.var(axis=0)) == pytest.approx(1.0 + 4.0, rel=0.2)
    # the clients' average is the shared B ~ N(0, beta I_d): its entries vary with variance beta
    assert v_shared.mean(axis=0).var() == pytest.approx(4.0, rel=0.3)
    assert v_scalar.mean(axis=0).var() < 0.05  # only the N(0, 1)/N of the e_i around 0
    # the same clients' offsets B_i are gone: entry means barely vary between clients
    assert v_shared.mean(axis=1).var() < 0.05 < 1.0 < v_scalar.mean(axis=1).var()


def test_defaults_keep_the_data_the_name_and_the_run_id():
    kw = {"clients": 4, "samples_per_client": 20, "dim": 30, "support": 6, "seed": 5}
    plain = simulation("logistic", positives=5, **kw)
    explicit = simulation(
        "logistic", positives=5, alpha_beta_as="variance", u_mean=0.1, v_mean="client_scalar", **kw
    )
    np.testing.assert_array_equal(plain.X, explicit.X)
    np.testing.assert_array_equal(plain.y, explicit.y)
    assert plain.name == explicit.name == "sim-logistic-a0.1-b0.1"
    # a value recorded before these keys existed: the papers' Simulation I at (0.1, 0.1)
    base = {
        "dataset": {"kind": "synthetic", "task": "linear", "alpha": 0.1, "beta": 0.1},
        "model": {"loss": "least_squares"},
        "algorithm": "fedht",
        "rounds": 100,
        "params": {"stepsize": 0.001, "local_steps": 5, "sparsity": 200, "batch_size": 10},
    }
    spelled = copy.deepcopy(base)
    spelled["dataset"].update(alpha_beta_as="variance", u_mean=0.1, v_mean="client_scalar")
    a, b = normalize_run_config(base), normalize_run_config(spelled)
    assert run_id(a) == run_id(b) == "e2a4209956b2d860"
    assert not {"alpha_beta_as", "u_mean", "v_mean"} & set(a["dataset"])


def test_each_reading_is_in_the_config_the_name_and_the_run_id():
    ds = {"kind": "synthetic", "task": "logistic", "alpha": 1.0, "beta": 1.0}
    flower = {"alpha_beta_as": "std", "u_mean": 0, "v_mean": "shared_vector"}
    ids = {run_id({"dataset": normalize_dataset(ds)})}
    for key, value in flower.items():
        out = normalize_dataset({**ds, key: value})
        assert out[key] == value
        ids.add(run_id({"dataset": out}))
    out = normalize_dataset({**ds, **flower, "center": "global"})
    assert out["name"] == "sim-logistic-a1-b1-std-u0-sharedB-center-global"
    ids.add(run_id({"dataset": out}))
    assert len(ids) == 5
    # the canonical config normalises to itself, and the run's data are the reading's
    assert normalize_dataset(out) == out
    small = {**ds, **flower, "clients": 3, "samples_per_client": 20, "dim": 12, "support": 4}
    small["positives"] = 5
    canonical = normalize_dataset(small)
    got = load_dataset(canonical, "logistic")
    want = simulation(
        "logistic",
        clients=3,
        samples_per_client=20,
        dim=12,
        support=4,
        positives=5,
        alpha=1.0,
        beta=1.0,
        **flower,
    )
    np.testing.assert_array_equal(got.X, want.X)
    assert got.name == want.name == "sim-logistic-a1-b1-std-u0-sharedB"


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("alpha_beta_as", "sd", r"^dataset\.alpha_beta_as: must be one of variance, std, got 'sd'"),
        ("v_mean", "shared", r"^dataset\.v_mean: must be one of client_scalar, shared_vector"),
        ("u_mean", "zero", r"^dataset\.u_mean: must be a finite number"),
        ("u_mean", float("nan"), r"^dataset\.u_mean: must be a finite number"),
        ("alpha_beta_as", None, r"^dataset\.alpha_beta_as: must be one of"),
    ],
)
def test_bad_values_are_one_line_naming_the_key(key, value, message):
    with pytest.raises(ConfigError, match=message) as err:
        normalize_dataset({"kind": "synthetic", key: value})
    assert "\n" not in str(err.value)


def test_a_misspelt_key_is_refused_with_a_suggestion():
    with pytest.raises(ConfigError, match=r"u_mean") as err:
        normalize_dataset({"kind": "synthetic", "umean": 0.0})
    assert "\n" not in str(err.value)
