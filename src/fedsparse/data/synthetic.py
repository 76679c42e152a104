"""The papers' synthetic federated data: Simulation I (linear) and II (logistic).

Following the FedProx ``synthetic(alpha, beta)`` recipe as the Fed-HT papers
describe it: for client i, ``u_i ~ N(0.1, alpha)``, the first ``support`` entries
of its model ``x_i ~ N(u_i, 1)`` (the rest 0), ``B_i ~ N(0, beta)``,
``v_i ~ N(B_i, 1)`` entrywise, rows ``z_ij ~ N(v_i, Sigma)`` with
``Sigma_kk = k**-1.2`` and noise ``b_ij ~ N(u_i, noise_std**2)``.
``alpha`` and ``beta`` are variances. Simulation I: ``y_ij = z_ij.x_i + b_ij``.
Simulation II: the ``positives`` largest ``sigmoid(z_ij.x_i + b_ij)`` of each client
are labelled +1, the others -1 (the papers' 0/1 labels with their 0/1 form of the loss are
the same model).

Readings: where the text is ambiguous or other code reads it differently, three
options select the other reading; their defaults are the text as read above.

- ``alpha_beta_as``: ``variance`` (the N(mean, variance) convention) or ``std``, as FedProx's
  generator (``litian96/FedProx`` ``data/synthetic_*/generate_synthetic.py``, the setup the
  papers follow) and the Flower baseline (``adap/flower`` PR #4398, ``baselines/fedht``) pass
  them to ``np.random.normal`` as its scale.
- ``u_mean``: the mean of ``u_i``; the papers' text says 0.1, FedProx's code and Flower's 0.
- ``v_mean``: ``client_scalar`` (the text: each client draws a scalar ``B_i`` and its ``v_i``
  has entries ``N(B_i, 1)``) or ``shared_vector`` (Flower: one vector ``B ~ N(0, beta I_d)``
  for all clients, ``v_i ~ N(B, I)``; clients' feature means then differ by N(0, 1) entries
  whatever ``beta`` is, and ``beta`` only moves all of them together).
"""

from __future__ import annotations

import numpy as np

from .federated import FederatedData

ALPHA_BETA_AS = ("variance", "std")
V_MEANS = ("client_scalar", "shared_vector")


def reading_suffix(
    center: str = "none",
    alpha_beta_as: str = "variance",
    u_mean: float = 0.1,
    v_mean: str = "client_scalar",
) -> str:
    """The part of a simulation's name that says which readings differ from the text's.

    Parameters
    ----------
    center
        As for :func:`simulation`.
    alpha_beta_as
        As for :func:`simulation`.
    u_mean
        As for :func:`simulation`.
    v_mean
        As for :func:`simulation`.

    Returns
    -------
    str
        ``''`` at the defaults, else e.g. ``'-std-u0-sharedB-center-global'`` (in that order).
    """
    parts = ""
    if alpha_beta_as != "variance":
        parts += f"-{alpha_beta_as}"
    if u_mean != 0.1:
        parts += f"-u{u_mean:g}"
    if v_mean != "client_scalar":
        parts += "-sharedB"
    if center != "none":
        parts += f"-center-{center}"
    return parts


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
    alpha_beta_as: str = "variance",
    u_mean: float = 0.1,
    v_mean: str = "client_scalar",
) -> FederatedData:
    """Generate Simulation I (``task='linear'``) or II (``task='logistic'``).

    Every draw comes from one generator seeded by ``seed``; at the readings' defaults, the data
    of a seed is that of the text's reading (the module docstring).

    Parameters
    ----------
    task
        ``linear`` (regression responses) or ``logistic`` (labels -1/+1).
    clients
        The number of clients.
    samples_per_client
        Rows per client; None: the papers' 100 (linear) or 1000 (logistic).
    dim
        Features per row.
    support
        The client models' nonzero entries: the first ``support`` coordinates.
    alpha
        The spread of each client's ``u_i`` (a variance, or a std by ``alpha_beta_as``).
    beta
        The spread of each client's ``B_i`` (a variance, or a std by ``alpha_beta_as``).
    seed
        Seeds every draw.
    noise_std
        The standard deviation of the responses' noise (0: none).
    positives
        Rows of each client labelled +1 (logistic): those of the largest margins.
    shared_model
        Draw one model for all clients (with ``noise_std=0``, a noiseless IID-model sanity
        case).
    name
        The data set's name; None: ``sim-<task>-a<alpha>-b<beta>`` and :func:`reading_suffix`.
    center
        A reading the papers do not describe: ``global`` subtracts the features' mean over all
        rows, ``per_client`` each client's own (after the responses are drawn, so ``y`` is
        unchanged); ``none``: no centring.
    alpha_beta_as
        ``variance`` or ``std``: how ``alpha`` and ``beta`` are read.
    u_mean
        The mean of ``u_i``.
    v_mean
        ``client_scalar`` (each client's scalar ``B_i``) or ``shared_vector`` (one vector ``B``
        for all clients).

    Returns
    -------
    FederatedData
        Dense rows, ``n`` consecutive ones per client; task ``regression`` (linear) or
        ``binary`` (logistic); ``x_true`` the mean of the client models.

    Raises
    ------
    ValueError
        An unknown ``alpha_beta_as``, ``v_mean`` or ``center``.
    """
    if alpha_beta_as not in ALPHA_BETA_AS:
        raise ValueError(f"alpha_beta_as: must be variance or std, got {alpha_beta_as!r}")
    if v_mean not in V_MEANS:
        raise ValueError(f"v_mean: must be client_scalar or shared_vector, got {v_mean!r}")
    if samples_per_client is None:
        samples_per_client = 100 if task == "linear" else 1000
    rng = np.random.default_rng(seed)
    n = samples_per_client
    sd_z = np.arange(1, dim + 1, dtype=np.float64) ** -0.6  # sqrt of k**-1.2
    X = np.empty((clients * n, dim))
    y = np.empty(clients * n)
    models = np.zeros((clients, dim))
    shared = None
    sd_u, sd_b = (np.sqrt(alpha), np.sqrt(beta)) if alpha_beta_as == "variance" else (alpha, beta)
    # Flower's one B for every client; drawn first so the default reading's draws are unchanged
    shared_b = rng.normal(0.0, sd_b, size=dim) if v_mean == "shared_vector" else None
    for i in range(clients):
        u = rng.normal(u_mean, sd_u)
        B = rng.normal(0.0, sd_b) if shared_b is None else shared_b
        if shared_model:
            if shared is None:
                shared = rng.normal(u, 1.0, size=support)
            models[i, :support] = shared
        else:
            models[i, :support] = rng.normal(u, 1.0, size=support)
        v = rng.normal(B, 1.0, size=dim)
        rows = slice(i * n, (i + 1) * n)
        Z = X[rows]  # drawn in place: v + N(0, 1) * sd_z without the temporaries' page faults
        rng.standard_normal(out=Z)
        Z *= sd_z
        Z += v
        noise = rng.normal(u, noise_std, size=n) if noise_std > 0 else np.zeros(n)
        margin = Z[:, :support] @ models[i, :support] + noise
        if task == "linear":
            y[rows] = margin
        else:
            labels = -np.ones(n)
            # top `positives` of sigmoid(margin) == top of margin; stable order for ties
            labels[np.argsort(-margin, kind="stable")[:positives]] = 1.0
            y[rows] = labels
    center_features(X, clients, n, center)
    if name is None:
        name = f"sim-{task}-a{alpha:g}-b{beta:g}" + reading_suffix(
            center, alpha_beta_as, u_mean, v_mean
        )
    return FederatedData(
        name=name,
        task="regression" if task == "linear" else "binary",
        X=X,
        y=y,
        client_ptr=np.arange(clients + 1, dtype=np.int64) * n,
        x_true=models.mean(axis=0),
    )


def center_features(X: np.ndarray, clients: int, n: int, how: str) -> None:
    """Centre the columns of ``X`` in place, globally or per client.

    Parameters
    ----------
    X
        The rows, C-contiguous; clients hold ``n`` consecutive rows each.
    clients
        The number of clients.
    n
        Rows per client.
    how
        ``global``: subtract the column means over all rows; ``per_client``: each client's
        own column means; ``none``: ``X`` is left alone.

    Raises
    ------
    ValueError
        Any other ``how``.
    """
    if how == "global":
        X -= X.mean(axis=0)
    elif how == "per_client":
        blocks = X.reshape(clients, n, X.shape[1])  # a view: rows are contiguous per client
        blocks -= blocks.mean(axis=1, keepdims=True)
    elif how != "none":
        raise ValueError(f"center: must be none, global or per_client, got {how!r}")
