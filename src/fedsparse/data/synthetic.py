"""The papers' synthetic federated data: Simulation I (linear) and II (logistic).

Following the FedProx ``synthetic(alpha, beta)`` recipe as the Fed-HT papers
describe it: for client i, ``u_i ~ N(0.1, alpha)``, the first ``support`` entries
of its model ``x_i ~ N(u_i, 1)`` (the rest 0), ``B_i ~ N(0, beta)``,
``v_i ~ N(B_i, 1)`` entrywise, rows ``z_ij ~ N(v_i, Sigma)`` with
``Sigma_kk = k**-1.2`` and noise ``b_ij ~ N(u_i, noise_std**2)``.
``alpha`` and ``beta`` are variances. Simulation I: ``y_ij = z_ij.x_i + b_ij``.
Simulation II: the ``positives`` largest ``sigmoid(z_ij.x_i + b_ij)`` of each client
are labelled +1, the others -1.
"""

from __future__ import annotations

import numpy as np

from .federated import FederatedData


def simulation(
    task: str = "linear",
    clients: int = 100,
    samples_per_client: int | None = None,
    dim: int = 1000,
    support: int = 100,
    alpha: float = 0.1,
    beta: float = 0.1,
    seed: int = 0,
    noise_std: float = 1.0,
    positives: int = 100,
    shared_model: bool = False,
    name: str | None = None,
    center: str = "none",
) -> FederatedData:
    """Generate Simulation I (``task='linear'``) or II (``task='logistic'``).

    ``samples_per_client`` defaults to the papers' 100 (linear) or 1000 (logistic).
    ``shared_model=True`` draws one model for all clients (a noiseless, IID-model
    sanity case when combined with ``noise_std=0``). The reference model
    ``x_true`` is the mean of the client models, supported on the first
    ``support`` coordinates.

    ``center`` is a reading of the data the papers do not describe: ``global`` subtracts the
    features' mean over all rows, ``per_client`` each client's own feature mean (after the
    responses are drawn, so y is unchanged).
    """
    if samples_per_client is None:
        samples_per_client = 100 if task == "linear" else 1000
    rng = np.random.default_rng(seed)
    n = samples_per_client
    sd_z = np.arange(1, dim + 1, dtype=np.float64) ** -0.6  # sqrt of k**-1.2
    X = np.empty((clients * n, dim))
    y = np.empty(clients * n)
    models = np.zeros((clients, dim))
    shared = None
    for i in range(clients):
        u = rng.normal(0.1, np.sqrt(alpha))
        B = rng.normal(0.0, np.sqrt(beta))
        if shared_model:
            if shared is None:
                shared = rng.normal(u, 1.0, size=support)
            models[i, :support] = shared
        else:
            models[i, :support] = rng.normal(u, 1.0, size=support)
        v = rng.normal(B, 1.0, size=dim)
        Z = v + rng.standard_normal((n, dim)) * sd_z
        noise = rng.normal(u, noise_std, size=n) if noise_std > 0 else np.zeros(n)
        margin = Z[:, :support] @ models[i, :support] + noise
        rows = slice(i * n, (i + 1) * n)
        X[rows] = Z
        if task == "linear":
            y[rows] = margin
        else:
            labels = -np.ones(n)
            # top `positives` of sigmoid(margin) == top of margin; stable order for ties
            labels[np.argsort(-margin, kind="stable")[:positives]] = 1.0
            y[rows] = labels
    center_features(X, clients, n, center)
    if name is None:
        suffix = f"-center-{center}" if center != "none" else ""
        name = f"sim-{task}-a{alpha:g}-b{beta:g}{suffix}"
    return FederatedData(
        name=name,
        task="regression" if task == "linear" else "binary",
        X=X,
        y=y,
        client_ptr=np.arange(clients + 1, dtype=np.int64) * n,
        x_true=models.mean(axis=0),
    )


def center_features(X: np.ndarray, clients: int, n: int, how: str) -> None:
    """Subtract the global (``global``) or each client's (``per_client``) column means in
    place; ``none`` leaves X alone. Clients hold ``n`` consecutive rows each."""
    if how == "global":
        X -= X.mean(axis=0)
    elif how == "per_client":
        blocks = X.reshape(clients, n, X.shape[1])  # a view: rows are contiguous per client
        blocks -= blocks.mean(axis=1, keepdims=True)
    elif how != "none":
        raise ValueError(f"center: must be none, global or per_client, got {how!r}")
