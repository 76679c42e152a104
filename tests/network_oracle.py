"""A plain-NumPy oracle of the network models, written from the model layer's definition
(forward pass, per-row losses, hand-written backprop), and data with per-client test rows (a
helper module of the model tests, not a test module)."""

from __future__ import annotations

import numpy as np
from conftest import dense
from scipy.special import expit, logsumexp

from fedsparse.data import FederatedData
from fedsparse.objective.model import Network

ACT = {
    "relu": (lambda z: np.maximum(z, 0.0), lambda z: (z > 0).astype(float)),
    "tanh": (np.tanh, lambda z: 1.0 - np.tanh(z) ** 2),
    "sigmoid": (expit, lambda z: expit(z) * (1.0 - expit(z))),
    "swish": (lambda z: z * expit(z), lambda z: expit(z) * (1.0 + z * (1.0 - expit(z)))),
}


def np_forward(net: Network, theta, X):
    """Outputs Z (n, n_out) and each layer's pre-activations and inputs."""
    f, _ = ACT[net.activation]
    a, cache = dense(X), []
    layers = net.split(np.asarray(theta, dtype=float).ravel())
    for k, (W, b) in enumerate(layers):
        z = a @ W.T + (0.0 if b is None else b)
        cache.append((a, z))
        a = z if k == len(layers) - 1 else f(z)
    return a, cache


def np_per_row_loss(Z, y, loss):
    if loss == "least_squares":
        return (Z[:, 0] - y) ** 2
    if loss == "logistic":
        return np.logaddexp(0.0, -y * Z[:, 0])
    return logsumexp(Z, axis=1) - Z[np.arange(len(y)), y.astype(int)]


def np_correct(Z, y, loss):
    if loss == "logistic":
        return int(np.sum(np.where(Z[:, 0] > 0, 1.0, -1.0) == y))
    if loss == "softmax":
        return int(np.sum(np.argmax(Z, axis=1) == y.astype(int)))
    return 0


def np_loss_grad(net: Network, theta, X, y, loss, l2):
    """Mean loss + l2/2 ||theta||^2 and its gradient (flat), by hand-written backprop."""
    theta = np.asarray(theta, dtype=float).ravel()
    Z, cache = np_forward(net, theta, X)
    n = len(y)
    if loss == "least_squares":
        D = (2.0 * (Z[:, 0] - y))[:, None]
    elif loss == "logistic":
        D = (-y * expit(-y * Z[:, 0]))[:, None]
    else:
        D = np.exp(Z - logsumexp(Z, axis=1, keepdims=True))
        D[np.arange(n), y.astype(int)] -= 1.0
    D /= n
    _, df = ACT[net.activation]
    layers = net.split(theta)
    grads = []
    for k in range(len(layers) - 1, -1, -1):
        a, z = cache[k]
        if k < len(layers) - 1:
            D = D * df(z)
        W, b = layers[k]
        grads.append((D.T @ a, D.sum(axis=0) if b is not None else None))
        D = D @ W
    flat = np.concatenate(
        [np.concatenate([gW.ravel(), *([gb] if gb is not None else [])]) for gW, gb in grads[::-1]]
    )
    value = np_per_row_loss(Z, y, loss).mean() + 0.5 * l2 * theta @ theta
    return value, flat + l2 * theta


def blocks(data: FederatedData):
    ptr = data.client_ptr
    return [
        (dense(data.X)[ptr[i] : ptr[i + 1]], data.y[ptr[i] : ptr[i + 1]])
        for i in range(data.n_clients)
    ]


def with_client_tests(data: FederatedData, seed: int = 5) -> FederatedData:
    """``data`` with held-out test rows of its own for each client."""
    rng = np.random.default_rng(seed)
    sizes = np.array([3, 5, 2, 4])[: data.n_clients]
    X = rng.standard_normal((sizes.sum(), data.n_features))
    if data.task == "multiclass":
        y = rng.integers(0, data.n_classes, sizes.sum()).astype(float)
    elif data.task == "binary":
        y = np.where(rng.standard_normal(sizes.sum()) > 0, 1.0, -1.0)
    else:
        y = rng.standard_normal(sizes.sum())
    return FederatedData(
        name=data.name,
        task=data.task,
        X=data.X,
        y=data.y,
        client_ptr=data.client_ptr,
        n_classes=data.n_classes,
        X_test=X,
        y_test=y,
        test_ptr=np.concatenate([[0], np.cumsum(sizes)]),
    )
