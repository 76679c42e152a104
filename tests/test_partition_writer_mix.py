"""The writer_mix partition: Dirichlet writers dealt as the gradient-sparsification authors'
code deals FEMNIST's writers (github.com/PengchaoHan/Adaptive_Gradient_Sparsification_FL,
util/utils.py get_indices_each_node_case, case index 3)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp

from fedsparse.data.partition import deal_as_authors, partition
from fedsparse.errors import ConfigError
from fedsparse.training.config import normalize_partition, partition_label

SVM = {"kind": "svmlight", "url": "http://127.0.0.1/x.svm", "task": "multiclass"}


def authors_case4(n_nodes: int, label_list: list[int]) -> list[list[int]]:
    """The code's case 4, transcribed line for line (its label_list: each row's writer)."""
    nodes: list[list[int]] = [[] for _ in range(n_nodes)]
    min_label, max_label = min(label_list), max(label_list)
    num_labels = max_label - min_label + 1
    for i in range(len(label_list)):
        target = int((label_list[i] - min_label) % n_nodes)  # case 2's, kept when n_nodes == 1
        tmp = int(np.ceil(min(n_nodes, num_labels) / 2))
        if label_list[i] < (min_label + max_label) / 2:
            target = i % tmp
        elif n_nodes > 1:
            target = int(((label_list[i] - min_label) % (min(n_nodes, num_labels) - tmp)) + tmp)
        if n_nodes > num_labels:
            best, best_len = 0, math.inf
            for n in range(n_nodes):
                if n % num_labels == target and len(nodes[n]) < best_len:
                    best, best_len = n, len(nodes[n])
            target = best
        nodes[target].append(i)
    return nodes


@pytest.mark.parametrize("N, W", [(156, 156), (8, 8), (7, 7), (5, 12), (12, 5), (1, 4), (2, 2)])
def test_the_deal_is_the_authors_code(N, W):
    rng = np.random.default_rng(N * 100 + W)
    sizes = rng.integers(1, 9, W)
    rows = rng.permutation(int(sizes.sum()))
    writers = np.split(rows, np.cumsum(sizes)[:-1])
    writer_of_position = np.repeat(np.arange(W), sizes).tolist()
    order = np.concatenate([np.sort(w) for w in writers])
    expected = [order[positions] for positions in authors_case4(N, writer_of_position)]
    got = deal_as_authors(writers, N)
    assert len(got) == N
    for a, b in zip(got, expected, strict=True):
        assert np.array_equal(a, np.asarray(b, np.int64))


def test_156_clients_half_mixed_half_one_writer_each():
    """The paper's 156 writers: clients 0..77 each a round-robin mix of writers 0..77 (sizes
    within one row of each other), client w >= 78 is writer w alone, labels and all."""
    rng = np.random.default_rng(0)
    n, W = 20_000, 156
    y = rng.integers(0, 10, n).astype(np.float64)
    X = sp.random(n, 5, density=0.5, format="csr", random_state=rng)
    s = normalize_partition({"kind": "writer_mix", "alpha": 0.3, "seed": 4}, SVM)
    assert s["clients"] == 156 and s["writers"] == 156  # the defaults: the paper's
    res = partition(X, y, "multiclass", s)
    # the same rng stream as a 156-client dirichlet partition: those are the writers
    writers = partition(
        X,
        y,
        "multiclass",
        normalize_partition({"kind": "dirichlet", "clients": W, "alpha": 0.3, "seed": 4}, SVM),
    ).clients
    assert len(res.clients) == 156
    assert np.array_equal(np.sort(np.concatenate(res.clients)), np.arange(n))
    for w in range(78, 156):  # one writer each
        assert np.array_equal(res.clients[w], writers[w])
    mixed = np.sort(np.concatenate(writers[:78]))
    assert np.array_equal(np.sort(np.concatenate(res.clients[:78])), mixed)
    sizes = np.array([len(c) for c in res.clients[:78]])
    assert sizes.max() - sizes.min() <= 1 and sizes.sum() == mixed.size
    # round robin over the writers' rows laid out in order: client u holds positions u, u+78, ...
    order = np.concatenate([np.sort(w) for w in writers[:78]])
    assert np.array_equal(res.clients[5], np.sort(order[5::78]))
    # labels: a mixed client holds about 1/78 of each label of writers 0..77, close to IID,
    # while a one-writer client keeps its writer's skew
    pooled = np.bincount(y[mixed].astype(int), minlength=10) / mixed.size
    client = np.bincount(y[res.clients[0]].astype(int), minlength=10) / sizes[0]
    assert np.abs(client - pooled).max() < 0.15
    assert (res.stats["labels"][:78] >= 8).all()
    assert res.stats["labels"][78:].median() < res.stats["labels"][:78].median()


def test_writer_mix_keys_and_label():
    s = normalize_partition({"kind": "writer_mix", "clients": 10, "writers": 20}, SVM)
    assert (s["clients"], s["writers"], s["alpha"]) == (10, 20, 0.3)
    assert partition_label(s) == "writer_mix-w20-a0.3"
    with pytest.raises(ConfigError, match="partition.writers"):
        normalize_partition({"kind": "writer_mix", "writers": 0}, SVM)
