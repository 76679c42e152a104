"""Plain NumPy transcriptions of the personalised family's pseudo-code (sFedHP §2.3,
pFedMe §3, HierFAVG), replaying the clients' minibatch draws from the same per-client streams
and the server's draws (a helper module of the family's tests, not a test module)."""

from __future__ import annotations

import numpy as np
from conftest import dense, make_data, np_grad, np_loss
from network_oracle import np_loss_grad

from fedsparse import kernels as K
from fedsparse.algorithms.common import server_stream
from fedsparse.objective.problem import Problem

TANH = {"kind": "mlp", "hidden": [5], "activation": "tanh"}


class Oracle:
    """Replays client minibatches and the server's draws; gradients in plain NumPy."""

    def __init__(self, pb: Problem, seed: int):
        self.pb = pb
        data = pb.data
        self.X, self.y, self.ptr = dense(data.X), data.y, data.client_ptr
        self.state = K.client_states(seed, data.n_clients)
        self.server = server_stream(seed, data.n_clients)
        self.perm = np.arange(data.n_samples, dtype=np.int64)

    def draw(self, i: int, batch) -> np.ndarray:
        lo, n = int(self.ptr[i]), int(self.ptr[i + 1] - self.ptr[i])
        b = n if batch is None else min(batch, n)
        if b < n:
            K.sample_without_replacement(self.perm, lo, n, b, self.state, i)
        return self.perm[lo : lo + b].copy()

    def grad(self, W, rows) -> np.ndarray:
        pb = self.pb
        if pb.is_linear:
            return np_grad(self.X[rows], self.y[rows], W, pb.loss, pb.l2)
        _, g = np_loss_grad(pb.network, W, self.X[rows], self.y[rows], pb.loss, pb.l2)
        return g.reshape(W.shape)

    def objective(self, W) -> float:
        pb, ptr = self.pb, self.ptr
        if pb.is_linear:
            return sum(
                pb.p[i]
                * np_loss(
                    self.X[ptr[i] : ptr[i + 1]], self.y[ptr[i] : ptr[i + 1]], W, pb.loss, pb.l2
                )
                for i in range(pb.n_clients)
            )
        return sum(
            pb.p[i]
            * np_loss_grad(
                pb.network,
                W,
                self.X[ptr[i] : ptr[i + 1]],
                self.y[ptr[i] : ptr[i + 1]],
                pb.loss,
                pb.l2,
            )[0]
            for i in range(pb.n_clients)
        )


def oracle_sfedhp(pb: Problem, prm: dict, rounds: int, seed: int):
    """§2.3 line by line; returns [(w, thetas)] for rounds 0..rounds."""
    o = Oracle(pb, seed)
    n, N = pb.n_clients, prm["edges"]
    J = n // N
    l1, l2, rho = prm["lambda1"], prm["lambda2"], prm["rho"]
    g1, g2 = prm["gamma1"], prm["gamma2"]
    w = pb.initial_model().copy()
    thetas = [w.copy() for _ in range(n)]
    out = [(w.copy(), np.stack(thetas))]
    for _ in range(rounds):
        w_edge = []
        for i in range(N):
            wi, phi_i = w.copy(), w.copy()
            clients = range(i * J, (i + 1) * J)
            phi_ij = {j: w.copy() for j in clients}
            for j in clients:
                thetas[j] = w.copy()
            for _r in range(prm["edge_rounds"]):
                new_phi = {}
                for j in clients:
                    D = o.draw(j, prm["batch_size"])
                    a = phi_i if prm["anchor"] == "edge_avg" else phi_ij[j]
                    th = thetas[j]
                    for _k in range(prm["inner_steps"]):
                        th = th - prm["inner_stepsize"] * (
                            o.grad(th, D) + g1 * np.tanh(th / rho) + l1 * (th - a)
                        )
                    thetas[j] = th
                    new_phi[j] = (l1 * th + l2 * wi) / (l1 + l2)
                phi_ij = new_phi
                phi_i = sum(new_phi[j] for j in clients) / J
                wi = wi - prm["stepsize"] * (l2 * (wi - phi_i) + g2 * np.tanh(wi / rho))
            w_edge.append(wi)
        S = prm["sampled_edges"]
        chosen = range(N) if S in (0, N) else np.sort(o.server.choice(N, S, replace=False))
        w = (1 - prm["beta"]) * w + prm["beta"] * sum(w_edge[i] for i in chosen) / len(chosen)
        out.append((w.copy(), np.stack(thetas)))
    return out, o


def oracle_pfedme(pb: Problem, prm: dict, rounds: int, seed: int):
    o = Oracle(pb, seed)
    n, lam = pb.n_clients, prm["lambda"]
    w = pb.initial_model().copy()
    thetas = [w.copy() for _ in range(n)]
    out = [(w.copy(), np.stack(thetas))]
    for _ in range(rounds):
        local = []
        for i in range(n):
            wi, th = w.copy(), w.copy()
            for _r in range(prm["local_steps"]):
                D = o.draw(i, prm["batch_size"])
                for _k in range(prm["inner_steps"]):
                    th = th - prm["inner_stepsize"] * (o.grad(th, D) + lam * (th - wi))
                wi = wi - prm["stepsize"] * lam * (wi - th)
            thetas[i] = th
            local.append(wi)
        m = prm["sampled_clients"]
        chosen = range(n) if m in (0, n) else np.sort(o.server.choice(n, m, replace=False))
        w = (1 - prm["beta"]) * w + prm["beta"] * sum(local[i] for i in chosen) / len(chosen)
        out.append((w.copy(), np.stack(thetas)))
    return out, o


def weighted_problem(model=None) -> Problem:
    data = make_data("softmax", sizes=(7, 9, 6, 8, 5, 10), d=8, seed=1)
    return Problem(data, "softmax", 1e-3, "samples", model)  # p_i = n_i / n: not uniform


def oracle_hierfavg(pb: Problem, prm: dict, rounds: int, seed: int):
    o = Oracle(pb, seed)
    n, N = pb.n_clients, prm["edges"]
    J = n // N
    w = pb.initial_model().copy()
    out = [w.copy()]
    for _ in range(rounds):
        edges = [w.copy() for _ in range(N)]
        for _r in range(prm["edge_rounds"]):
            for e in range(N):
                total = np.zeros_like(w)
                for j in range(e * J, (e + 1) * J):
                    wj = edges[e].copy()
                    for _k in range(prm["local_steps"]):
                        wj = wj - prm["stepsize"] * o.grad(wj, o.draw(j, prm["batch_size"]))
                    total += pb.p[j] * wj
                edges[e] = total / pb.p[e * J : (e + 1) * J].sum()
        w = sum(pb.p[e * J : (e + 1) * J].sum() * edges[e] for e in range(N))
        out.append(w.copy())
    return out, o
