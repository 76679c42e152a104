"""Partitioners: invariants (every row once, client counts, determinism), errors, memory."""

from __future__ import annotations

import time
import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from fedsparse.data.convert import parse_svmlight
from fedsparse.data.libsvm import labels_for_task
from fedsparse.data.partition import partition
from fedsparse.data.prepare import apply_partition
from fedsparse.errors import ConfigError, DataError
from fedsparse.training.config import normalize_partition, normalize_run_config

SVM = {"kind": "svmlight", "url": "http://127.0.0.1/x.svm", "task": "multiclass"}


def spec(kind: str, **kw) -> dict:
    """A normalised partition spec (through the config validator)."""
    return normalize_partition({"kind": kind, **kw}, SVM)


def data(n: int, classes: int, d: int = 20, seed: int = 0):
    rng = np.random.default_rng(seed)
    X = sp.random(n, d, density=0.2, format="csr", random_state=rng)
    y = rng.integers(0, classes, n).astype(np.float64)
    y[:classes] = np.arange(classes)
    return X, y


def check_exactly_once(res, n: int) -> None:
    rows = np.concatenate([*res.clients, *res.test])
    assert np.array_equal(np.sort(rows), np.arange(n)), "a row is missing or used twice"
    assert all(len(c) >= 1 for c in res.clients)
    assert res.stats["rows"].tolist() == [len(c) for c in res.clients]


KINDS = st.sampled_from(
    [
        ("iid", {}),
        ("dirichlet", {"alpha": 0.5}),
        ("dirichlet", {"alpha": 5.0, "min_size": 2}),
        ("quantity", {"alpha": 0.3, "min_size": 3}),
        ("labels", {"k": 2}),
    ]
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    kind=KINDS,
    n=st.integers(120, 600),
    classes=st.integers(2, 6),
    clients=st.integers(2, 12),
    seed=st.integers(0, 2**16),
    test=st.sampled_from([(0.0, "per_client"), (0.2, "per_client"), (0.25, "global")]),
)
def test_every_row_used_exactly_once_with_the_requested_clients(
    kind, n, classes, clients, seed, test
):
    name, extra = kind
    # (labels: too few clients to cover every label is a clear error, tested below)
    assume(name != "labels" or clients * extra["k"] >= classes)
    X, y = data(n, classes, seed=seed)
    s = spec(name, clients=clients, seed=seed, test_fraction=test[0], test_split=test[1], **extra)
    res = partition(X, y, "multiclass", s)
    check_exactly_once(res, n)
    assert len(res.clients) == clients
    if test[0] == 0:
        assert min(len(c) for c in res.clients) >= s["min_size"]
    if test[0] and test[1] == "global":
        assert len(res.test) == 1 and len(res.test[0]) == round(test[0] * n)
    if name == "labels":
        assert (res.stats["labels"] <= 2).all()
    again = partition(X, y, "multiclass", s)  # deterministic per seed
    assert all(np.array_equal(a, b) for a, b in zip(res.clients, again.clients, strict=True))
    assert all(np.array_equal(a, b) for a, b in zip(res.test, again.test, strict=True))


def test_a_different_seed_gives_a_different_partition():
    X, y = data(300, 4)
    a = partition(X, y, "multiclass", spec("dirichlet", clients=5, seed=1))
    b = partition(X, y, "multiclass", spec("dirichlet", clients=5, seed=2))
    assert any(not np.array_equal(u, v) for u, v in zip(a.clients, b.clients, strict=True))


@pytest.mark.parametrize("classes, parts", [(10, 20), (5, 6), (3, 4)])
def test_papers_scheme_with_labels_as_clusters(classes, parts):
    X, y = data(1000, classes, seed=classes)
    res = partition(X, y, "multiclass", spec("papers", parts=parts, seed=3))
    check_exactly_once(res, 1000)
    assert len(res.clients) == classes * parts // 2  # 100 for the papers' 10 x 20
    # two parts from two different clusters; labels are the clusters here
    assert (res.stats["clusters"] == 2).all() and (res.stats["labels"] == 2).all()
    assert np.array_equal(res.clusters, y.astype(int))
    # each cluster's rows are dealt as `parts` near-equal parts
    for c in range(classes):
        sizes = sorted(
            int(np.sum(res.clusters[rows] == c))
            for rows in res.clients
            if (res.clusters[rows] == c).any()
        )
        assert len(sizes) == parts and sizes[-1] - sizes[0] <= 1


def test_papers_scheme_with_kmeans_on_sparse_rows():
    rng = np.random.default_rng(0)
    # three well-separated groups of sparse rows; binary labels unrelated to them
    blocks = [sp.random(200, 60, density=0.05, random_state=rng, format="csr") for _ in range(3)]
    for k, b in enumerate(blocks):
        b.data += 5.0
        blocks[k] = sp.hstack([b[:, :20] * (k == 0), b[:, 20:40] * (k == 1), b[:, 40:] * (k == 2)])
    X = sp.vstack(blocks).tocsr()
    y = np.where(rng.random(600) < 0.5, 1.0, -1.0)
    s = spec("papers", clusters=3, parts=4, seed=0)
    res = partition(X, y, "binary", s)
    check_exactly_once(res, 600)
    assert len(res.clients) == 6 and (res.stats["clusters"] == 2).all()
    assert len(np.unique(res.clusters)) == 3
    res2 = partition(X, y, "binary", s)
    assert np.array_equal(res.clusters, res2.clusters)


def test_papers_scheme_with_tiny_clusters_gives_no_client_an_empty_share():
    # cluster 0 has 3 rows for 20 parts: 17 empty parts must pair with non-empty ones
    y = np.concatenate([np.zeros(3), np.repeat(np.arange(1, 10), 60)])
    X = sp.csr_matrix(np.ones((y.size, 2)))
    res = partition(X, y, "multiclass", spec("papers", seed=0))
    check_exactly_once(res, y.size)
    assert len(res.clients) == 100


def test_regression_uses_quantile_bins_of_y_as_labels():
    rng = np.random.default_rng(0)
    X = sp.random(500, 10, density=0.3, format="csr", random_state=rng)
    y = rng.standard_normal(500)
    res = partition(X, y, "regression", spec("labels", clients=10, k=1, bins=5))
    check_exactly_once(res, 500)
    assert (res.stats["y_bins"] == 1).all()  # one quantile bin per client
    means = res.stats["y_mean"].to_numpy()
    assert means.max() - means.min() > 1.5  # clients see very different targets


def test_impossible_min_size_fails_fast_with_a_clear_message():
    X, y = data(2000, 10)
    start = time.monotonic()
    with pytest.raises(DataError, match=r"dirichlet with alpha=0.01 .* min_size=30 .* 100 tries"):
        partition(X, y, "multiclass", spec("dirichlet", clients=50, alpha=0.01, min_size=30))
    assert time.monotonic() - start < 10
    with pytest.raises(DataError, match=r"needs 2100 rows, the data has 2000: impossible"):
        partition(X, y, "multiclass", spec("quantity", clients=70, min_size=30))
    with pytest.raises(DataError, match=r"cannot cover all 10 labels"):
        partition(X, y, "multiclass", spec("labels", clients=4, k=2))


@pytest.mark.parametrize(
    "value, needle",
    [
        ({"kind": "dirichlet", "alpha": 0}, "partition.alpha"),
        ({"kind": "shuffle"}, "partition.kind"),
        ({"kind": "iid", "clients": 0}, "partition.clients"),
        ({"kind": "iid", "test_fraction": 1.0}, "partition.test_fraction"),
        ({"kind": "iid", "test_split": "both"}, "partition.test_split"),
        ({"kind": "iid", "colour": 1}, "partition.colour"),
        ("natural", "no clients of its own"),
    ],
)
def test_bad_partition_configs_name_the_key(value, needle):
    with pytest.raises(ConfigError, match=needle):
        normalize_partition(value, SVM)


def test_configs_without_a_partition_keep_their_natural_clients():
    cfg = {
        "dataset": {"kind": "synthetic"},
        "algorithm": "fedht",
        "params": {"stepsize": 0.1, "sparsity": 5},
        "rounds": 1,
    }
    assert normalize_run_config(cfg)["partition"] == "natural"
    svm = normalize_run_config({**cfg, "dataset": {**SVM}, "model": {"loss": "softmax"}})
    assert svm["partition"]["kind"] == "papers"  # real data default: the papers' scheme


def write_big_svmlight(path, rows: int, d: int, per_row: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    with open(path, "w") as fh:
        for start in range(0, rows, 1000):
            lines = []
            for _ in range(min(1000, rows - start)):
                idx = np.sort(rng.choice(d, per_row, replace=False)) + 1
                vals = rng.random(per_row)
                pairs = zip(idx.tolist(), vals.tolist(), strict=True)
                feats = " ".join(f"{i}:{v:.6g}" for i, v in pairs)
                lines.append(("+1 " if rng.random() < 0.5 else "-1 ") + feats)
            fh.write("\n".join(lines) + "\n")


def test_converting_and_partitioning_stay_close_to_the_csr_size(tmp_path):
    """Peak traced memory of parse + partition, against the CSR size.

    50,000 rows x 100,000 features, 40 non-zeros a row: the CSR arrays take ~24 MB,
    a dense copy 40 GB. Allowed: 2.5x the CSR (the parsed blocks and their
    concatenation, then the rows regrouped by client and the original) plus 8 MB
    (one text block and small per-block arrays); the papers' scheme may add K-means'
    dense k x d centroids (8 MB each for k=10), at most 8 of them. Densifying any
    1,000-row slice (800 MB) would break either bound.
    """
    import sklearn.cluster  # noqa: F401  (imports are not data: load them before measuring)
    import sklearn.decomposition  # noqa: F401

    path = tmp_path / "big.svm"
    d = 100_000
    write_big_svmlight(path, rows=50_000, d=d, per_row=40)
    peaks = {}
    for kind in ("iid", "papers"):
        tracemalloc.start()
        try:
            parsed = parse_svmlight(path, n_features=d)
            X = parsed.X
            csr = X.data.nbytes + X.indices.nbytes + X.indptr.nbytes
            y = labels_for_task(parsed.y, "binary", path)
            del parsed
            extra = {"clients": 100} if kind == "iid" else {"cluster_by": "kmeans"}
            s = spec(kind, test_fraction=0.1, seed=0, **extra)
            out = apply_partition(X, y, "binary", "big", s)
            del X
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert out.data.is_sparse and out.data.X.nnz + out.data.X_test.nnz == 50_000 * 40
        peaks[kind] = peak
        print(f"{kind}: CSR {csr / 1e6:.1f} MB, peak {peak / 1e6:.1f} MB ({peak / csr:.2f}x)")
    centroids = 10 * d * 8
    assert peaks["iid"] < 2.5 * csr + 8e6
    assert peaks["papers"] < 2.5 * csr + 8e6 + 8 * centroids


# ---------------------------------------------------------------------------- the papers' splits


def balanced(n_per: int, classes: int, seed: int = 0) -> np.ndarray:
    """Labels 0..classes-1, ``n_per`` of each, shuffled."""
    return (
        np.random.default_rng(seed)
        .permutation(np.repeat(np.arange(classes), n_per))
        .astype(np.float64)
    )


def cycle(**kw) -> dict:
    return spec("label_cycle", **kw)


@pytest.mark.parametrize("scope", ["per_client", "total"])
def test_label_cycle_labels_counts_and_no_row_given_twice(scope):
    y, y_test = balanced(300, 10), balanced(100, 10, seed=1)
    X = np.zeros((y.size, 1))
    s = cycle(clients=20, labels_per_client=5, train_per_label=20, test_per_label=10, scope=scope)
    res = partition(X, y, "multiclass", s, y_test=y_test)
    assert len(res.clients) == len(res.test) == 20
    each_tr, each_te = (20, 10) if scope == "per_client" else (2, 1)  # total: over 10 clients
    for u, (tr, te) in enumerate(zip(res.clients, res.test, strict=True)):
        mine = sorted((u + j) % 10 for j in range(5))
        assert np.unique(y[tr]).tolist() == mine and np.unique(y_test[te]).tolist() == mine
        assert np.bincount(y[tr].astype(int), minlength=10)[mine].tolist() == [each_tr] * 5
        assert np.bincount(y_test[te].astype(int), minlength=10)[mine].tolist() == [each_te] * 5
    train = np.concatenate(res.clients)
    test = np.concatenate(res.test)
    assert len(np.unique(train)) == len(train) and len(np.unique(test)) == len(test)
    assert res.stats["labels"].tolist() == [5] * 20
    assert res.stats["test_rows"].tolist() == [5 * each_te] * 20
    again = partition(X, y, "multiclass", s, y_test=y_test)  # seeded
    assert all(np.array_equal(a, b) for a, b in zip(res.clients, again.clients, strict=True))
    other = partition(X, y, "multiclass", {**s, "seed": 1}, y_test=y_test)
    assert not np.array_equal(res.clients[0], other.clients[0])


def test_label_cycle_total_splits_a_label_as_evenly_as_possible():
    y = balanced(50, 4)
    s = cycle(clients=3, labels_per_client=2, train_per_label=7, test_per_label=0, scope="total")
    res = partition(np.zeros((y.size, 1)), y, "multiclass", s, y_test=balanced(5, 4))
    # labels 1 and 2 have two clients each: 7 rows as 4 + 3; labels 0 and 3 one client each
    counts = [np.bincount(y[c].astype(int), minlength=4).tolist() for c in res.clients]
    assert counts == [[7, 4, 0, 0], [0, 3, 4, 0], [0, 0, 3, 7]]
    assert all(len(t) == 0 for t in res.test)


def test_label_cycle_on_one_pool_draws_test_rows_from_the_rest():
    y = balanced(30, 3)
    s = cycle(clients=3, labels_per_client=2, train_per_label=5, test_per_label=4)
    res = partition(np.zeros((y.size, 1)), y, "multiclass", s)  # no test file
    train, test = np.concatenate(res.clients), np.concatenate(res.test)
    assert len(train) == 30 and len(test) == 24
    assert not set(train.tolist()) & set(test.tolist())  # no row both trains and tests
    with pytest.raises(
        DataError,
        match=r"label 0 needs 10 training \+ 22 test rows, the data "
        r"has 30 \(short by 2\)",
    ):
        partition(np.zeros((y.size, 1)), y, "multiclass", {**s, "test_per_label": 11})


def test_label_cycle_says_by_how_much_a_label_is_short():
    y, y_test = balanced(1000, 10), balanced(100, 10)
    X = np.zeros((y.size, 1))
    s = cycle(clients=20, labels_per_client=5, train_per_label=200, test_per_label=10)
    with pytest.raises(DataError) as err:
        partition(X, y, "multiclass", s, y_test=y_test)
    assert str(err.value) == (
        "partition: label 0 needs 2000 training rows, the data has 1000 (short by 1000); "
        "and 9 more shortfalls"
    )
    with pytest.raises(DataError, match=r"label 0 needs 8000 test rows, the test data has 100 "):
        partition(
            X, y, "multiclass", {**s, "train_per_label": 20, "test_per_label": 800}, y_test=y_test
        )
    with pytest.raises(DataError, match=r"partition.labels_per_client: 11 labels per client"):
        partition(X, y, "multiclass", {**s, "labels_per_client": 11}, y_test=y_test)
    with pytest.raises(DataError, match=r"partition.train_per_label: .* client 10 without"):
        partition(
            X,
            y,
            "multiclass",
            {**s, "train_per_label": 1, "scope": "total", "labels_per_client": 1},
            y_test=y_test,
        )


# ---------------------------------------------------------------------------- test_pool: pooled

IDX = {"kind": "idx", "path": "/nowhere"}  # normalize_partition reads only the kind


def pooled_cycle(**kw) -> dict:
    """A normalised label_cycle spec on image data (which has a test file to pool)."""
    return normalize_partition({"kind": "label_cycle", "test_pool": "pooled", **kw}, IDX)


def two_files(n_train: int, n_test: int, classes: int = 10):
    """A train and a test file whose one feature is the row's place in the pool (train rows
    first), so the prepared rows can be traced back to the rows they came from."""
    y, y_test = balanced(n_train, classes), balanced(n_test, classes, seed=1)
    X = np.arange(y.size, dtype=np.float64)[:, None]
    X_test = (y.size + np.arange(y_test.size, dtype=np.float64))[:, None]
    return X, y, X_test, y_test


def pooled_prepare(X, y, X_test, y_test, s: dict):
    return apply_partition(X, y, "multiclass", "t", s, X_test=X_test, y_test=y_test)


def test_pooled_label_cycle_gives_each_client_its_labels_from_both_files_no_row_twice():
    # 100 training and 30 test images per label: 4 clients x 8 test rows of a label is more
    # than the test file has (split fails), but fits the pooled 130 (pFedMe's generator)
    X, y, X_test, y_test = two_files(100, 30)
    s = pooled_cycle(clients=20, labels_per_client=2, train_per_label=24, test_per_label=8)
    with pytest.raises(DataError, match=r"label 0 needs 32 test rows, the test data has 30 "):
        pooled_prepare(X, y, X_test, y_test, {**s, "test_pool": "split"})
    out = pooled_prepare(X, y, X_test, y_test, s)
    d, res = out.data, out.partition
    y_pool = np.concatenate([y, y_test])
    assert np.diff(d.client_ptr).tolist() == [48] * 20 and np.diff(d.test_ptr).tolist() == [16] * 20
    for u in range(20):
        mine = sorted({u % 10, (u + 1) % 10})
        tr = d.X[d.client_ptr[u] : d.client_ptr[u + 1], 0].astype(int)
        te = d.X_test[d.test_ptr[u] : d.test_ptr[u + 1], 0].astype(int)
        assert np.array_equal(tr, res.clients[u]) and np.array_equal(te, res.test[u])
        # the labels each row carries are the labels of the rows it came from
        assert np.array_equal(d.y[d.client_ptr[u] : d.client_ptr[u + 1]], y_pool[tr])
        assert np.array_equal(d.y_test[d.test_ptr[u] : d.test_ptr[u + 1]], y_pool[te])
        assert np.bincount(y_pool[tr].astype(int), minlength=10)[mine].tolist() == [24, 24]
        assert np.bincount(y_pool[te].astype(int), minlength=10)[mine].tolist() == [8, 8]
    rows = np.concatenate([*res.clients, *res.test])
    assert len(np.unique(rows)) == len(rows) == 20 * 64  # no row trains or tests twice
    # both files feed both sides: the pool is one pool
    train, test = np.concatenate(res.clients), np.concatenate(res.test)
    assert (train >= y.size).any() and (train < y.size).any()
    assert (test >= y.size).any() and (test < y.size).any()
    assert res.stats["test_rows"].tolist() == [16] * 20
    again = pooled_prepare(X, y, X_test, y_test, s).partition  # seeded
    assert all(np.array_equal(a, b) for a, b in zip(res.test, again.test, strict=True))
    assert all(np.array_equal(a, b) for a, b in zip(res.clients, again.clients, strict=True))
    other = pooled_prepare(X, y, X_test, y_test, {**s, "seed": 1}).partition
    assert not np.array_equal(res.test[0], other.test[0])


@settings(max_examples=30, deadline=None)
@given(
    n=st.integers(5, 40),
    n_test=st.integers(0, 20),
    classes=st.integers(2, 5),
    clients=st.integers(1, 8),
    labels=st.integers(1, 5),
    tr=st.integers(1, 6),
    te=st.integers(0, 6),
    scope=st.sampled_from(["per_client", "total"]),
)
def test_pooled_label_cycle_either_meets_the_counts_exactly_or_says_which_label_is_short(
    n, n_test, classes, clients, labels, tr, te, scope
):
    assume(labels <= classes)
    X, y, X_test, y_test = two_files(n, n_test, classes)
    s = pooled_cycle(
        clients=clients,
        labels_per_client=labels,
        train_per_label=tr,
        test_per_label=te,
        scope=scope,
    )
    holders = np.bincount(
        [(u + j) % classes for u in range(clients) for j in range(labels)], minlength=classes
    )
    need = holders * (tr + te) if scope == "per_client" else (holders > 0) * (tr + te)
    if (need > n + n_test).any():
        with pytest.raises(DataError, match=r"pooled train and test data has"):
            pooled_prepare(X, y, X_test, y_test, s)
        return
    try:
        res = pooled_prepare(X, y, X_test, y_test, s).partition
    except DataError as err:  # scope total: a label spread too thin leaves a client nothing
        assert scope == "total" and "without training rows" in str(err)
        return
    y_pool = np.concatenate([y, y_test])
    rows = np.concatenate([*res.clients, *res.test])
    assert len(np.unique(rows)) == len(rows)
    for c in range(classes):
        assert (y_pool[np.concatenate(res.clients)] == c).sum() == (
            holders[c] * tr if scope == "per_client" else tr * (holders[c] > 0)
        )
        assert (y_pool[np.concatenate(res.test)] == c).sum() == (
            holders[c] * te if scope == "per_client" else te * (holders[c] > 0)
        )
    for u, (a, b) in enumerate(zip(res.clients, res.test, strict=True)):
        mine = {(u + j) % classes for j in range(labels)}
        assert set(y_pool[a].astype(int).tolist()) <= mine
        assert set(y_pool[b].astype(int).tolist()) <= mine


def test_a_pooled_shortfall_is_one_line_naming_the_keys():
    X, y, X_test, y_test = two_files(100, 30)
    s = pooled_cycle(clients=20, labels_per_client=2, train_per_label=30, test_per_label=10)
    with pytest.raises(DataError) as err:
        pooled_prepare(X, y, X_test, y_test, s)
    assert str(err.value) == (
        "partition: label 0 needs 120 training + 40 test rows (train_per_label, "
        "test_per_label), the pooled train and test data has 130 (short by 30); "
        "and 9 more shortfalls"
    )


def test_pooled_other_partitions_hold_their_test_rows_out_of_the_pool():
    X, y, X_test, y_test = two_files(40, 10)
    s = normalize_partition(
        {"kind": "iid", "clients": 5, "test_fraction": 0.25, "test_pool": "pooled"}, IDX
    )
    out = pooled_prepare(X, y, X_test, y_test, s)
    check_exactly_once(out.partition, 500)  # every row of both files, once
    assert np.diff(out.data.test_ptr).tolist() == [25] * 5
    assert np.array_equal(out.data.X_test[:, 0].astype(int), out.partition.test_order)
    # split: the partition's own test rows come from the training file only
    split = pooled_prepare(X, y, X_test, y_test, {**s, "test_pool": "split"})
    check_exactly_once(split.partition, 400)


def test_test_pool_is_validated_and_its_default_stays_out_of_the_config():
    base = {"kind": "label_cycle", "labels_per_client": 2}
    assert normalize_partition({**base, "test_pool": "split"}, IDX) == normalize_partition(
        base, IDX
    )
    assert "test_pool" not in normalize_partition(base, IDX)
    assert normalize_partition({**base, "test_pool": "pooled"}, IDX)["test_pool"] == "pooled"
    leaf = {"kind": "leaf", "path": "/nowhere"}
    assert normalize_partition({**base, "test_pool": "pooled"}, leaf)["test_pool"] == "pooled"
    for value, dataset, line in [
        (
            {**base, "test_pool": "both"},
            IDX,
            "partition.test_pool: must be split or pooled, got 'both'",
        ),
        (
            {**base, "test_pool": "pooled"},
            SVM,
            "partition.test_pool: pooled pools a data set's train and test files; "
            "svmlight data has no test file (use split)",
        ),
        (
            {"kind": "dirichlet", "test_pool": "pooled"},
            IDX,
            "partition.test_pool: pooled with kind dirichlet needs test_fraction > 0 "
            "(the test rows are then held out of the pooled rows)",
        ),
    ]:
        with pytest.raises(ConfigError) as err:
            normalize_partition(value, dataset)
        assert str(err.value) == line


def test_one_class_gives_every_client_one_label_split_evenly():
    y = balanced(31, 5)
    X = np.zeros((y.size, 1))
    res = partition(X, y, "multiclass", spec("one_class", clients=10))
    check_exactly_once(res, y.size)
    for u, c in enumerate(res.clients):
        assert np.unique(y[c]).tolist() == [u % 5]
        assert len(c) in (15, 16)  # 31 rows of a label split between its two clients
    with pytest.raises(DataError, match=r"partition.clients: .* multiple of the data's 5 labels"):
        partition(X, y, "multiclass", spec("one_class", clients=7))


def test_new_partition_configs_are_validated_and_leave_old_ones_alone():
    assert spec("iid") == {
        "kind": "iid",
        "clients": 100,
        "seed": 0,
        "min_size": 1,
        "test_fraction": 0.0,
        "test_split": "per_client",
    }
    for value, needle in [
        ({"kind": "label_cycle", "scope": "both"}, "partition.scope"),
        ({"kind": "label_cycle", "test_per_label": -1}, "partition.test_per_label"),
        ({"kind": "label_cycle", "labels_per_client": 0}, "partition.labels_per_client"),
        ({"kind": "label_cycle", "test_fraction": 0.2}, "partition.test_fraction: unknown key"),
        ({"kind": "one_class", "clients": 2.5}, "partition.clients"),
    ]:
        with pytest.raises(ConfigError, match=needle):
            normalize_partition(value, SVM)
    with pytest.raises(DataError, match="label_cycle needs classification data"):
        partition(np.zeros((10, 1)), np.arange(10.0), "regression", cycle())
