"""Split the rows of a data set into clients (and a held-out test split).

Every partitioner is seeded, uses every (training) row exactly once, and returns
a statistics table (rows, labels and clusters per client). Partitioners:

``papers``
    The Fed-HT papers' scheme: rows grouped into ``clusters`` clusters (K-means on
    the sparse rows; for multi-class data the labels are the clusters), each
    cluster shuffled and split evenly into ``parts`` parts, each client given
    ``parts_per_client`` parts from as many different clusters, every part used
    exactly once: ``clusters * parts / parts_per_client`` clients (100 by default).
``iid``
    A random permutation cut into ``clients`` near-equal pieces.
``dirichlet``
    Label skew: each label's rows spread over the clients in Dirichlet(``alpha``)
    proportions (regression: quantile bins of y serve as labels); redrawn at most
    ``max_tries`` times until every client has ``min_size`` rows, then a clear error.
``writer_mix``
    The authors' code of the gradient-sparsification paper (Han et al.; its
    ``get_indices_each_node_case``, case index 3, the one its loop leaves set): rows
    first split into ``writers`` "writers" by Dirichlet(``alpha``) label skew (as
    ``dirichlet`` does, standing in for FEMNIST's writers), then laid out writer after
    writer and dealt as the code deals them. With ``clients`` = ``writers`` = 2h: the
    rows of writers 0..h-1 go round-robin to clients 0..h-1 (each a mix of those
    writers, close to IID), writer w >= h is client w alone. In general (the code's
    rule): h = ceil(min(N, W) / 2); the row at position i of a writer w < (W - 1) / 2
    goes to client i mod h, of any other writer to h + w mod (min(N, W) - h); with
    more clients than writers, to the smallest client so far whose index is that
    target mod W.
``quantity``
    Quantity skew: client sizes ``min_size + Multinomial(n - clients*min_size,
    Dirichlet(alpha))``, rows drawn at random.
``labels``
    ``k`` labels per client (bins for regression), each label's rows split evenly
    among the clients holding it.
``one_class``
    One label per client (client ``u`` holds label ``u mod C``, so ``clients`` must be
    a multiple of the ``C`` labels), each label's rows split evenly among its clients.
``label_cycle``
    The pFedMe/sFedHP scheme: client ``u`` holds labels ``(u + j) mod C`` for
    ``j < labels_per_client``; ``train_per_label`` and ``test_per_label`` rows of each
    of them (``scope: per_client``) or of each label in total, split evenly among the
    clients holding it (``scope: total``), drawn at random, no row given twice. Its
    test rows come from the test pool (a data set's test file; else the rows left
    over), so every client has test rows of its own labels. Unlike the others it
    need not use every row. ``test_pool: pooled`` (the caller has appended the test
    file to the rows): train and test rows are both drawn from the one pool, as in
    pFedMe's generator, which the test file alone cannot supply at its sizes.

Test split: ``test_fraction`` of the rows held out, either ``global`` (drawn
before partitioning) or ``per_client`` (drawn from each client's rows); with
``test_pool: pooled`` those rows include the data set's test file.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import DataError

if TYPE_CHECKING:  # pandas is imported for the statistics only: a run never asks for them
    import pandas as pd
    import scipy.sparse as sp

KINDS = (
    "papers",
    "iid",
    "dirichlet",
    "writer_mix",
    "quantity",
    "labels",
    "one_class",
    "label_cycle",
)


@dataclass
class PartitionResult:
    """Row indices of each client's training rows, the test rows, and per-row clusters."""

    clients: list[np.ndarray]  # training rows of client i (sorted)
    test: list[np.ndarray]  # per_client: test rows of client i; global: one array
    clusters: np.ndarray | None  # cluster of every row (papers), else None
    groups: np.ndarray  # label (classification) or quantile bin (regression) of every row
    stat_rows: list[dict[str, Any]]  # one per client: the rows of :attr:`stats`

    @property
    def stats(self) -> pd.DataFrame:
        """Per-client statistics (rows, test rows, labels or y bins, clusters) as a table."""
        import pandas as pd

        return pd.DataFrame(self.stat_rows)

    @property
    def order(self) -> np.ndarray:
        return np.concatenate(self.clients)

    @property
    def client_ptr(self) -> np.ndarray:
        return np.concatenate([[0], np.cumsum([len(c) for c in self.clients])]).astype(np.int64)

    @property
    def test_order(self) -> np.ndarray:
        return np.concatenate(self.test) if self.test else np.empty(0, np.int64)

    @property
    def test_ptr(self) -> np.ndarray:
        return np.concatenate([[0], np.cumsum([len(c) for c in self.test])]).astype(np.int64)


def label_groups(y: np.ndarray, task: str, bins: int = 10) -> np.ndarray:
    """Each row's group: its class, or its quantile bin of ``y`` for regression.

    Parameters
    ----------
    y
        The labels, one per row.
    task
        ``regression``: rows binned by the quantiles of ``y``; any other task: grouped by label.
    bins
        The number of quantile bins for regression.

    Returns
    -------
    numpy.ndarray
        int64 group numbers 0..G-1, one per row, in the sorted order of the labels or bins.
    """
    if task == "regression":
        edges = np.quantile(y, np.linspace(0.0, 1.0, bins + 1)[1:-1])
        g = np.searchsorted(edges, y, side="right")
    else:
        g = y
    return np.unique(g, return_inverse=True)[1].astype(np.int64)


def partition(
    X: np.ndarray | sp.csr_matrix,
    y: np.ndarray,
    task: str,
    spec: dict,
    y_test: np.ndarray | None = None,
) -> PartitionResult:
    """Partition the rows of ``(X, y)`` into clients as the normalised partition ``spec`` says.

    Every random draw comes from ``spec``'s ``seed`` (default 0).

    Parameters
    ----------
    X
        The rows' features (dense or CSR); read by ``papers`` clustering only.
    y
        The labels, one per row.
    task
        ``regression``, ``binary`` or ``multiclass``.
    spec
        The normalised partition (``kind`` one of :data:`KINDS`, its parameters, ``seed``,
        ``test_fraction``, ``test_split``, ``min_size``).
    y_test
        Labels of a separate test pool (a data set's test file), from which ``label_cycle``
        draws each client's test rows (``test`` then indexes that pool); None: none.

    Returns
    -------
    PartitionResult
        Each client's sorted training rows, the test rows (per client, or one global array),
        each row's cluster (``papers``) and group, and per-client statistics.

    Raises
    ------
    DataError
        An unknown kind, a label-based kind on regression data, a ``test_fraction`` that
        leaves no test or no training rows, a client with fewer than ``min_size`` rows (at
        least 1), or parameters the data cannot meet.
    """
    kind = spec["kind"]
    if kind not in KINDS:
        raise DataError(f"partition.kind: unknown partitioner {kind!r}")
    n = y.shape[0]
    split_seq, part_seq, km_seq = np.random.SeedSequence(spec.get("seed", 0)).spawn(3)
    if kind in ("one_class", "label_cycle") and task == "regression":
        raise DataError(f"partition.kind: {kind} needs classification data (labels)")
    groups = label_groups(y, task, spec.get("bins", 10))
    if kind == "label_cycle":
        return _label_cycle(y, y_test, task, spec, part_seq, split_seq)
    rows = np.arange(n, dtype=np.int64)
    frac = spec.get("test_fraction", 0.0)
    test_global = None
    if frac > 0 and spec.get("test_split", "per_client") == "global":
        rng = np.random.default_rng(split_seq)
        n_test = int(round(frac * n))
        if n_test < 1 or n_test >= n:
            raise DataError(f"partition.test_fraction: {frac} leaves no test or no training rows")
        perm = rng.permutation(n)
        test_global = np.sort(perm[:n_test])
        rows = np.sort(perm[n_test:])
    rng = np.random.default_rng(part_seq)
    clusters = None
    if kind == "papers":
        clusters = _clusters(X, y, task, spec, km_seq)
        clients = _papers(rows, clusters[rows], spec, rng)
    elif kind == "iid":
        clients = _iid(rows, spec, rng)
    elif kind == "dirichlet":
        clients = _dirichlet(rows, groups[rows], spec, rng)
    elif kind == "writer_mix":
        clients = _writer_mix(rows, groups[rows], spec, rng)
    elif kind == "quantity":
        clients = _quantity(rows, spec, rng)
    elif kind == "one_class":
        clients = _one_class(rows, groups[rows], spec, rng)
    else:
        clients = _labels(rows, groups[rows], spec, rng)
    clients = [np.sort(c) for c in clients]
    min_size = spec.get("min_size", 1)
    for i, c in enumerate(clients):
        if len(c) < max(1, min_size):
            raise DataError(
                f"partition: client {i} of {kind} partition has {len(c)} rows "
                f"(fewer than min_size={max(1, min_size)}); use fewer clients or parts"
            )
    if frac > 0 and test_global is None:  # per client
        rng_t = np.random.default_rng(split_seq)
        train, test = [], []
        for c in clients:
            k = min(int(np.floor(frac * len(c))), len(c) - 1)
            pick = rng_t.permutation(len(c))
            test.append(np.sort(c[pick[:k]]))
            train.append(np.sort(c[pick[k:]]))
        clients = train
    elif test_global is not None:
        test = [test_global]
    else:
        test = []
    stats = _stats(clients, test if test_global is None else None, y, task, groups, clusters)
    return PartitionResult(clients, test, clusters, groups, stats)


# ---------------------------------------------------------------------------- schemes


def _clusters(X, y, task, spec, seq) -> np.ndarray:
    by = spec.get("cluster_by", "auto")
    if by == "auto":
        by = "labels" if task == "multiclass" else "kmeans"
    if by == "labels":
        if task == "regression":
            raise DataError("partition.cluster_by: labels needs classification data")
        return np.unique(y, return_inverse=True)[1].astype(np.int64)
    from sklearn.cluster import KMeans  # slow import, only needed here

    k = spec.get("clusters", 10)
    if X.shape[0] < k:
        raise DataError(f"partition.clusters: {k} clusters but only {X.shape[0]} rows")
    km = KMeans(
        n_clusters=k,
        n_init=3,
        max_iter=100,
        copy_x=False,  # sparse input is not modified; a copy would double the peak memory
        random_state=int(seq.generate_state(1)[0] % (2**31 - 1)),
    )
    return km.fit_predict(X).astype(np.int64)


def _papers(rows: np.ndarray, cl: np.ndarray, spec: dict, rng) -> list[np.ndarray]:
    P, m = spec.get("parts", 20), spec.get("parts_per_client", 2)
    ids = np.unique(cl)
    C = len(ids)
    if m > C:
        raise DataError(
            f"partition.parts_per_client: {m} parts from different clusters, "
            f"but there are only {C} clusters"
        )
    if (C * P) % m:
        raise DataError(
            f"partition.parts: {C} clusters x {P} parts is not divisible by parts_per_client={m}"
        )
    parts, part_cluster = [], []
    for c in ids:
        members = rows[cl == c]
        members = members[rng.permutation(len(members))]
        parts.extend(np.array_split(members, P))
        part_cluster.extend([c] * P)
    part_cluster = np.array(part_cluster)
    n_clients = C * P // m
    deal = rng.permutation(C * P).reshape(n_clients, m)
    sizes = np.array([len(p) for p in parts])
    _repair(deal, part_cluster, sizes, max(1, spec.get("min_size", 1)), rng)
    return [np.concatenate([parts[p] for p in deal[i]]) for i in range(n_clients)]


def _repair(
    deal: np.ndarray,
    part_cluster: np.ndarray,
    sizes: np.ndarray,
    min_size: int,
    rng,
    max_sweeps: int = 200,
) -> None:
    """Swap parts between clients until every client holds parts of ``m`` different
    clusters and at least ``min_size`` rows (a cluster smaller than ``parts`` has empty parts).

    No cluster has more parts than there are clients (checked by the caller), so
    random swaps that fix a conflict without creating one converge quickly.
    Bounded: raises rather than loops forever.
    """
    n, m = deal.shape

    def ok(row: np.ndarray) -> bool:
        return len(set(part_cluster[row].tolist())) == m and sizes[row].sum() >= min_size

    for _ in range(max_sweeps):
        bad = [i for i in range(n) if not ok(deal[i])]
        if not bad:
            return
        for i in bad:
            if ok(deal[i]):
                continue
            for _try in range(4 * n):
                a, j, b = int(rng.integers(m)), int(rng.integers(n)), int(rng.integers(m))
                if j == i:
                    continue
                j_was_ok = ok(deal[j])
                deal[i, a], deal[j, b] = deal[j, b], deal[i, a]
                if ok(deal[i]) and (ok(deal[j]) or not j_was_ok):
                    break
                deal[i, a], deal[j, b] = deal[j, b], deal[i, a]  # undo
    raise DataError(
        "partition: could not deal the parts so that every client gets parts of "
        f"{m} different clusters and at least min_size={min_size} rows "
        f"(cluster sizes: {np.bincount(part_cluster, weights=sizes).astype(int).tolist()}); "
        "use fewer parts or clusters"
    )


def _check_size(n: int, clients: int, min_size: int, kind: str) -> None:
    if clients * max(1, min_size) > n:
        raise DataError(
            f"partition: {kind}: {clients} clients x min_size {max(1, min_size)} needs "
            f"{clients * max(1, min_size)} rows, the data has {n}: impossible"
        )


def _iid(rows, spec, rng) -> list[np.ndarray]:
    N = spec["clients"]
    _check_size(len(rows), N, spec.get("min_size", 1), "iid")
    return np.array_split(rows[rng.permutation(len(rows))], N)


def _dirichlet(rows, g, spec, rng) -> list[np.ndarray]:
    N, alpha = spec["clients"], spec["alpha"]
    min_size = max(1, spec.get("min_size", 1))
    _check_size(len(rows), N, min_size, "dirichlet")
    members = [rows[g == k] for k in np.unique(g)]
    smallest = -1
    tries = spec.get("max_tries", 100)
    for _ in range(tries):
        chunks: list[list[np.ndarray]] = [[] for _ in range(N)]
        for mk in members:
            mk = mk[rng.permutation(len(mk))]
            p = rng.dirichlet(np.full(N, alpha))
            cuts = (np.cumsum(p)[:-1] * len(mk)).astype(np.int64)
            for i, piece in enumerate(np.split(mk, cuts)):
                chunks[i].append(piece)
        sizes = np.array([sum(len(c) for c in ch) for ch in chunks])
        smallest = max(smallest, int(sizes.min()))
        if sizes.min() >= min_size:
            return [np.concatenate(ch) for ch in chunks]
    raise DataError(
        f"partition: dirichlet with alpha={alpha:g} gave a client fewer than "
        f"min_size={min_size} rows in all {tries} tries (best smallest client: {smallest} "
        f"rows); raise alpha, lower min_size or use fewer clients"
    )


def _writer_mix(rows, g, spec, rng) -> list[np.ndarray]:
    """Dirichlet writers dealt as the authors' code deals FEMNIST's writers (module doc)."""
    W = spec["writers"]
    writers = _dirichlet(rows, g, {**spec, "clients": W, "min_size": 1}, rng)
    return deal_as_authors(writers, spec["clients"])


def deal_as_authors(writers: list[np.ndarray], N: int) -> list[np.ndarray]:
    """The code's case 4: the rows of ``writers`` (each non-empty), laid out writer after
    writer in row order, dealt to ``N`` clients; the rows each client gets."""
    W = len(writers)
    order = np.concatenate([np.sort(w) for w in writers])
    writer = np.concatenate([np.full(len(w), u, np.int64) for u, w in enumerate(writers)])
    half = math.ceil(min(N, W) / 2)
    i = np.arange(writer.size)
    if N > 1:
        target = np.where(writer < (W - 1) / 2, i % half, half + writer % (min(N, W) - half))
    else:
        target = np.zeros(writer.size, np.int64)
    if N > W:  # the code's balancing: the smallest client so far among those = target mod W
        sizes = np.zeros(N, np.int64)
        for pos, t in enumerate(target):
            holders = np.arange(t, N, W)
            target[pos] = holders[int(np.argmin(sizes[holders]))]
            sizes[target[pos]] += 1
    return [order[target == u] for u in range(N)]


def _quantity(rows, spec, rng) -> list[np.ndarray]:
    N, alpha = spec["clients"], spec["alpha"]
    min_size = max(1, spec.get("min_size", 1))
    _check_size(len(rows), N, min_size, "quantity")
    extra = rng.multinomial(len(rows) - N * min_size, rng.dirichlet(np.full(N, alpha)))
    sizes = min_size + extra
    return np.split(rows[rng.permutation(len(rows))], np.cumsum(sizes)[:-1])


def _labels(rows, g, spec, rng) -> list[np.ndarray]:
    N, k = spec["clients"], spec["k"]
    ids = np.unique(g)
    G = len(ids)
    _check_size(len(rows), N, spec.get("min_size", 1), "labels")
    if k > G:
        raise DataError(f"partition.k: {k} labels per client, but the data has only {G}")
    if N * k < G:
        raise DataError(
            f"partition.k: {N} clients x {k} labels cannot cover all {G} labels; "
            "raise k or the number of clients"
        )
    perm = ids[rng.permutation(G)]
    holders: dict[int, list[int]] = {int(c): [] for c in ids}
    for i in range(N):
        for j in range(k):
            holders[int(perm[(i * k + j) % G])].append(i)
    chunks: list[list[np.ndarray]] = [[] for _ in range(N)]
    for c, hs in holders.items():
        mk = rows[g == c]
        mk = mk[rng.permutation(len(mk))]
        for i, piece in zip(hs, np.array_split(mk, len(hs)), strict=True):
            chunks[i].append(piece)
    return [np.concatenate(ch) for ch in chunks]


def _one_class(rows, g, spec, rng) -> list[np.ndarray]:
    N = spec["clients"]
    ids = np.unique(g)
    C = len(ids)
    if N % C:
        raise DataError(
            f"partition.clients: one_class gives every client one label, so clients must be "
            f"a multiple of the data's {C} labels, got {N}"
        )
    chunks: list[np.ndarray] = [np.empty(0, np.int64)] * N
    for k, c in enumerate(ids):
        mk = rows[g == c]
        holders = range(k, N, C)  # client u holds label u mod C
        pieces = np.array_split(mk[rng.permutation(len(mk))], N // C)
        for i, piece in zip(holders, pieces, strict=True):
            chunks[i] = piece
    return chunks


def _label_cycle(y, y_test, task, spec, part_seq, split_seq) -> PartitionResult:
    """Client u gets labels (u + j) mod C, j < labels_per_client, and from each of them
    ``train_per_label`` training and ``test_per_label`` test rows (per client, or in total
    split among the label's clients), drawn without replacement; the rows nobody drew
    stay unused. With no separate test pool the test rows come from the same rows."""
    N, L = spec["clients"], spec["labels_per_client"]
    ids = np.unique(y if y_test is None else np.concatenate([y, y_test]))
    C = len(ids)
    if L > C:
        raise DataError(
            f"partition.labels_per_client: {L} labels per client, but the data has only {C}"
        )
    g = np.searchsorted(ids, y)
    g_test = None if y_test is None else np.searchsorted(ids, y_test)
    holders: list[list[int]] = [[] for _ in range(C)]
    for u in range(N):
        for j in range(L):
            holders[(u + j) % C].append(u)
    train_rng, test_rng = np.random.default_rng(part_seq), np.random.default_rng(split_seq)
    train: list[list[np.ndarray]] = [[] for _ in range(N)]
    test: list[list[np.ndarray]] = [[] for _ in range(N)]
    short: list[tuple[int, int, str, int, str]] = []  # label, needed, what, available, pool
    # a pooled shortfall says so and names both keys: train and test rows share the pool
    pooled = "pooled train and test " if spec.get("test_pool") == "pooled" else ""
    for c, hs in enumerate(holders):
        if not hs:
            continue
        tr = _shares(spec["train_per_label"], len(hs), spec["scope"])
        te = _shares(spec["test_per_label"], len(hs), spec["scope"])
        pool = np.flatnonzero(g == c)
        pool = pool[train_rng.permutation(len(pool))]
        if g_test is None:  # one pool: training rows first, test rows from the rest
            test_pool = pool[tr.sum() :]
            if tr.sum() + te.sum() > len(pool):
                what = f"{tr.sum()} training + {te.sum()} test"
                short.append((c, tr.sum() + te.sum(), what, len(pool), pooled))
        else:
            test_pool = np.flatnonzero(g_test == c)
            test_pool = test_pool[test_rng.permutation(len(test_pool))]
            if tr.sum() > len(pool):
                short.append((c, tr.sum(), f"{tr.sum()} training", len(pool), ""))
            if te.sum() > len(test_pool):
                short.append((c, te.sum(), f"{te.sum()} test", len(test_pool), "test "))
        for u, a, b in zip(hs, np.cumsum(tr) - tr, np.cumsum(tr), strict=True):
            train[u].append(pool[a:b])
        for u, a, b in zip(hs, np.cumsum(te) - te, np.cumsum(te), strict=True):
            test[u].append(test_pool[a:b])
    if short:
        c, need, what, have, which = short[0]
        more = f"; and {len(short) - 1} more shortfalls" if len(short) > 1 else ""
        keys = " (train_per_label, test_per_label)" if pooled else ""
        raise DataError(
            f"partition: label {ids[c]:g} needs {what} rows{keys}, the {which}data has {have} "
            f"(short by {need - have}){more}"
        )
    clients = [np.sort(np.concatenate(t)) if t else np.empty(0, np.int64) for t in train]
    tests = [np.sort(np.concatenate(t)) if t else np.empty(0, np.int64) for t in test]
    for u, rows in enumerate(clients):
        if len(rows) == 0:
            raise DataError(
                f"partition.train_per_label: label_cycle leaves client {u} without training "
                f"rows ({spec['train_per_label']} rows per label in total, split among its "
                "clients); raise it"
            )
    groups = g.astype(np.int64)
    stats = _stats(clients, tests, y, task, groups, None)
    return PartitionResult(clients, tests, None, groups, stats)


def _shares(count: int, holders: int, scope: str) -> np.ndarray:
    """Rows of one label for each of its ``holders``: ``count`` each (per_client), or
    ``count`` in total split as evenly as possible (total)."""
    if scope == "per_client":
        return np.full(holders, count, dtype=np.int64)
    return np.full(holders, count // holders, dtype=np.int64) + (
        np.arange(holders) < count % holders
    )


# ---------------------------------------------------------------------------- statistics


def _counts(values: np.ndarray) -> str:
    ids, cnt = np.unique(values, return_counts=True)
    return " ".join(f"{a}:{b}" for a, b in zip(ids.tolist(), cnt.tolist(), strict=True))


def _stats(clients, test, y, task, groups, clusters) -> list[dict[str, Any]]:
    rows = []
    for i, c in enumerate(clients):
        r = {"client": i, "rows": len(c), "test_rows": len(test[i]) if test else 0}
        if task == "regression":
            r["y_mean"] = float(y[c].mean())
            r["y_bins"] = int(np.unique(groups[c]).size)
        else:
            r["labels"] = int(np.unique(groups[c]).size)
            r["label_counts"] = _counts(groups[c])
        if clusters is not None:
            r["clusters"] = int(np.unique(clusters[c]).size)
            r["cluster_counts"] = _counts(clusters[c])
        rows.append(r)
    return rows


def embedding(
    X, clusters: np.ndarray, client_of_row: np.ndarray, sample: int = 1000, seed: int = 0
) -> pd.DataFrame:
    """A 2-D t-SNE embedding of a random sample of rows, for the report.

    Sparse rows, and dense rows of more than 50 features, are reduced by truncated SVD first.

    Parameters
    ----------
    X
        The rows' features (dense or CSR).
    clusters
        Each row's cluster (or group), copied to the output.
    client_of_row
        Each row's client (-1: none), copied to the output.
    sample
        How many rows to embed at most.
    seed
        Seeds the sample, the SVD and t-SNE.

    Returns
    -------
    pandas.DataFrame
        Columns ``x, y, cluster, client``, one row per sampled row (``min(sample, n)``, in row
        order).
    """
    import pandas as pd
    import scipy.sparse as sp
    from sklearn.decomposition import TruncatedSVD
    from sklearn.manifold import TSNE

    rng = np.random.default_rng(seed)
    n = X.shape[0]
    pick = np.sort(rng.choice(n, size=min(sample, n), replace=False))
    Xs = X[pick]
    dims = min(50, Xs.shape[1] - 1, len(pick) - 1)
    if sp.issparse(Xs) or Xs.shape[1] > 50:
        Z = TruncatedSVD(n_components=max(dims, 2), random_state=seed).fit_transform(Xs)
    else:
        Z = np.asarray(Xs, dtype=np.float64)
    perplexity = float(min(30.0, max(2.0, (len(pick) - 1) / 3.0)))
    E = TSNE(n_components=2, init="pca", perplexity=perplexity, random_state=seed).fit_transform(Z)
    return pd.DataFrame(
        {"x": E[:, 0], "y": E[:, 1], "cluster": clusters[pick], "client": client_of_row[pick]}
    )
