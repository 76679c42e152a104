"""Synthetic Simulation I/II data and svmlight files with qid clients."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from fedsparse import DataError
from fedsparse.data import FederatedData, load_qid_file, simulation

# ---- simulation ----------------------------------------------------------------------------


def test_linear_shapes_and_defaults():
    data = simulation("linear", clients=3, dim=20, support=5, seed=1)
    assert data.task == "regression" and not data.is_sparse
    assert data.X.shape == (300, 20) and data.y.shape == (300,)
    np.testing.assert_array_equal(data.client_ptr, [0, 100, 200, 300])
    np.testing.assert_array_equal(data.client_sizes, [100, 100, 100])
    assert data.n_clients == 3 and data.n_features == 20 and data.n_samples == 300
    assert data.x_true.shape == (20,)
    assert np.all(data.x_true[:5] != 0) and np.all(data.x_true[5:] == 0)
    assert np.all(np.isfinite(data.X)) and np.all(np.isfinite(data.y))


def test_logistic_default_rows_and_labels():
    data = simulation("logistic", clients=2, dim=10, support=3, seed=2)
    assert data.task == "binary"
    assert data.X.shape == (2000, 10)
    np.testing.assert_array_equal(data.client_ptr, [0, 1000, 2000])
    assert set(np.unique(data.y)) == {-1.0, 1.0}
    for i in range(2):
        assert np.sum(data.y[i * 1000 : (i + 1) * 1000] == 1.0) == 100


@pytest.mark.parametrize("positives", [1, 7, 29])
def test_logistic_positives_per_client(positives):
    data = simulation(
        "logistic", clients=4, samples_per_client=30, dim=12, support=4, positives=positives, seed=3
    )
    ptr = data.client_ptr
    for i in range(4):
        yi = data.y[ptr[i] : ptr[i + 1]]
        assert np.sum(yi == 1.0) == positives and np.sum(yi == -1.0) == 30 - positives


def test_logistic_positives_are_the_largest_margins():
    data = simulation(
        "logistic",
        clients=3,
        samples_per_client=40,
        dim=15,
        support=5,
        positives=9,
        noise_std=0.0,
        shared_model=True,
        seed=4,
    )
    margin = data.X @ data.x_true
    ptr = data.client_ptr
    for i in range(3):
        m, yi = margin[ptr[i] : ptr[i + 1]], data.y[ptr[i] : ptr[i + 1]]
        assert m[yi == 1.0].min() > m[yi == -1.0].max()


def test_noiseless_shared_model_is_exact():
    data = simulation(
        "linear",
        clients=3,
        samples_per_client=15,
        dim=25,
        support=6,
        noise_std=0.0,
        shared_model=True,
        alpha=0.0,
        beta=0.0,
        seed=5,
    )
    np.testing.assert_allclose(data.y, data.X @ data.x_true, rtol=1e-12, atol=1e-12)
    assert np.count_nonzero(data.x_true) == 6


def test_feature_variance_within_a_client_is_k_to_minus_1_2():
    data = simulation("linear", clients=1, samples_per_client=4000, dim=6, support=2, seed=6)
    var = data.X.var(axis=0)
    k = np.arange(1, 7)
    np.testing.assert_allclose(var, k**-1.2, rtol=0.1)


def test_simulation_is_deterministic_by_seed():
    kwargs = dict(task="logistic", clients=3, samples_per_client=20, dim=10, support=3, positives=5)
    a, b = simulation(seed=7, **kwargs), simulation(seed=7, **kwargs)
    np.testing.assert_array_equal(a.X, b.X)
    np.testing.assert_array_equal(a.y, b.y)
    np.testing.assert_array_equal(a.x_true, b.x_true)
    c = simulation(seed=8, **kwargs)
    assert not np.array_equal(a.X, c.X)


def test_federated_data_validates_shapes():
    X = np.zeros((4, 3))
    with pytest.raises(ValueError):
        FederatedData("x", "regression", X, np.zeros(3), np.array([0, 3]))
    with pytest.raises(ValueError):
        FederatedData("x", "regression", X, np.zeros(4), np.array([0, 2, 2, 4]))
    ok = FederatedData("x", "regression", X, np.zeros(4), np.array([0, 1, 4]))
    assert ok.y.dtype == np.float64 and ok.client_ptr.dtype == np.int64
    assert ok.kernel_X is ok.kernel_X  # built once


# ---- svmlight files with qid -----------------------------------------------------------------

BINARY = """\
1 qid:3 1:0.5 4:1.0
0 qid:1 2:2.0
1 qid:2 3:-1.5
0 qid:3 5:3.0
1 qid:1 1:1.0 5:2.0
"""


def write(tmp_path, text, name="clients.svm"):
    path = tmp_path / name
    path.write_text(text)
    return path


def test_qid_file_groups_clients_by_ascending_qid(tmp_path):
    path = write(tmp_path, BINARY)
    data = load_qid_file(path, "binary")
    assert data.name == "clients" and data.task == "binary" and data.is_sparse
    assert sp.isspmatrix_csr(data.X) or isinstance(data.X, sp.csr_array)
    np.testing.assert_array_equal(data.client_ptr, [0, 2, 3, 5])
    expected = np.array(
        [
            [0, 2.0, 0, 0, 0],  # qid 1, line 2
            [1.0, 0, 0, 0, 2.0],  # qid 1, line 5
            [0, 0, -1.5, 0, 0],  # qid 2
            [0.5, 0, 0, 1.0, 0],  # qid 3, line 1
            [0, 0, 0, 0, 3.0],  # qid 3, line 4
        ]
    )
    np.testing.assert_array_equal(data.X.toarray(), expected)
    np.testing.assert_array_equal(data.y, [-1.0, 1.0, 1.0, 1.0, -1.0])  # 0/1 -> -1/+1
    kX = data.kernel_X
    assert isinstance(kX, tuple) and kX[1].dtype == np.int32


def test_qid_file_binary_plus_minus_one_kept(tmp_path):
    path = write(tmp_path, "-1 qid:5 1:1\n+1 qid:5 2:1\n1 qid:9 3:1\n")
    data = load_qid_file(path, "binary", name="mine")
    assert data.name == "mine"
    np.testing.assert_array_equal(data.y, [-1.0, 1.0, 1.0])
    np.testing.assert_array_equal(data.client_ptr, [0, 2, 3])


def test_qid_file_multiclass_labels_mapped(tmp_path):
    path = write(tmp_path, "9 qid:2 1:1\n2 qid:1 2:1\n5 qid:1 3:1\n9 qid:1 1:2\n2 qid:2 2:2\n")
    data = load_qid_file(path, "multiclass")
    # rows ordered qid 1 (lines 2, 3, 4) then qid 2 (lines 1, 5); labels 2,5,9 -> 0,1,2
    np.testing.assert_array_equal(data.y, [0.0, 1.0, 2.0, 2.0, 0.0])
    assert data.n_classes == 3
    np.testing.assert_array_equal(data.client_ptr, [0, 3, 5])


def test_qid_file_regression_and_n_features(tmp_path):
    path = write(tmp_path, "0.25 qid:1 1:1\n-3.5 qid:2 2:1\n")
    data = load_qid_file(path, "regression", n_features=8)
    np.testing.assert_array_equal(data.y, [0.25, -3.5])
    assert data.n_features == 8


@pytest.mark.parametrize(
    "text,task",
    [
        ("1 1:0.5\n0 2:1\n", "binary"),  # no qid at all
        ("1 qid:2 1:0.5\n0 2:1\n1 qid:1 3:2\n", "binary"),  # a row without qid
        ("1 qid:1 1:0.5\n0 qid:1 2:1.0 oops\n", "binary"),  # malformed line
        ("1 qid:1 1:abc\n", "binary"),  # malformed value
        ("1 qid:1 1:0.5\n2 qid:2 1:1\n", "binary"),  # labels not binary
        ("1.5 qid:1 1:0.5\n2 qid:2 1:1\n", "multiclass"),  # non-integer class
        ("", "regression"),  # empty
    ],
    ids=["no-qid", "partial-qid", "bad-token", "bad-value", "bad-binary", "bad-class", "empty"],
)
def test_qid_file_errors_name_the_file(tmp_path, text, task):
    path = write(tmp_path, text, name="broken.svm")
    with pytest.raises(DataError) as info:
        load_qid_file(path, task)
    assert str(path) in str(info.value)
    assert "\n" not in str(info.value)


def test_missing_qid_file(tmp_path):
    path = tmp_path / "absent.svm"
    with pytest.raises(DataError, match="absent.svm") as info:
        load_qid_file(path, "binary")
    assert str(path) in str(info.value)


def test_qid_zero_is_a_client_id(tmp_path):
    path = write(tmp_path, "1 qid:0 1:1\n0 qid:0 2:1\n")
    data = load_qid_file(path, "binary")
    np.testing.assert_array_equal(data.client_ptr, [0, 2])
