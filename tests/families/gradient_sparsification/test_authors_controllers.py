"""k_rules: authors_code, the k controllers as the authors' code has them
(control_algorithm/*.py and simulation.py of
github.com/PengchaoHan/Adaptive_Gradient_Sparsification_FL), against transcriptions of that code
driven by the same random draws and the same costs."""

from __future__ import annotations

import math

import numpy as np
import pytest
from conftest import make_data
from gs_helpers import params_for, run_cfg

from fedsparse.algorithms import ALGORITHMS
from fedsparse.families.gradient_sparsification import controllers as C
from fedsparse.objective.problem import Problem
from fedsparse.results.schema import to_frame
from fedsparse.training.config import normalize_run_config, run_id
from fedsparse.training.experiment import run_trace


def code_sr(x, rand):
    floor_x = int(np.floor(x))
    return floor_x + 1 if rand() < x - floor_x else floor_x


class CodeOGD:
    """ONLINE_GRADIENT_DESCENT, transcribed (prints dropped)."""

    def __init__(self, k_min, k_max, rand):
        self.k_min_orig, self.k_max_orig, self.k_min, self.k_max = k_min, k_max, k_min, k_max
        self.d, self.delta, self.rand = k_max - k_min, 0.1, rand
        self.min_max_update_window, self.alpha, self.min_max_update_count = 20, 1.5, 0
        self.k_min_window, self.k_max_window = self.k_max_orig, self.k_min_orig
        self.reference_iter, self.m_prev, self.timer, self.grad_value_prev = 0, 0, 0, 0

    def tuning_k_grad_sign(self, k, k_aux, cost, cost_aux, time):
        eta = self.d / np.sqrt(2 * (time - self.reference_iter))
        unchanged = False
        if cost_aux is None:
            if self.timer <= 10:
                k_next, unchanged = k, True
                self.timer += 1
            else:
                self.timer = 0
                k_next = code_sr(k + eta, self.rand)
        else:
            self.timer = 0
            k_next = code_sr(k - eta * np.sign((cost - cost_aux) / (k - k_aux)), self.rand)
        k_next = min(max(k_next, self.k_min), self.k_max)
        k_aux_next = code_sr(k_next - eta / 2.0, self.rand)
        if k_aux_next < self.k_min * self.delta:
            k_aux_next = int(np.ceil(self.k_min * self.delta))
        if k_aux_next >= k_next:
            k_aux_next = k_next - 1
        if not unchanged:
            self.k_min_window = min(self.k_min_window, k_next)
            self.k_max_window = max(self.k_max_window, k_next)
            self.min_max_update_count += 1
        if self.min_max_update_count >= self.min_max_update_window:
            self.min_max_update_count = 0
            lo = int(np.round(max(self.k_min_window / self.alpha, self.k_min_orig)))
            hi = int(np.round(min(self.k_max_window * self.alpha, self.k_max_orig)))
            b_new, b_orig = hi - lo, self.k_max - self.k_min
            m_current = time - self.reference_iter
            if b_new > 0 and m_current >= self.m_prev and b_orig + b_new <= b_orig * np.sqrt(2):
                self.k_min, self.k_max, self.d = lo, hi, hi - lo
                self.reference_iter, self.m_prev = time, m_current
            self.k_min_window, self.k_max_window = self.k_max_orig, self.k_min_orig
        return k_next, k_aux_next

    def tuning_k_grad_value(self, k, k_aux, cost, cost_aux, time):
        eta = self.d / np.sqrt(2 * time)
        grad_value = None
        if cost_aux is None:
            if self.timer <= 10:
                k_next = k
                self.timer += 1
            else:
                self.timer = 0
                k_next = code_sr(k + eta * self.grad_value_prev, self.rand)
        else:
            self.timer = 0
            grad_value = (cost - cost_aux) / (k - k_aux)
            k_next = code_sr(k - eta * grad_value, self.rand)
            self.grad_value_prev = grad_value
        k_next = min(max(k_next, self.k_min), self.k_max)
        if grad_value is None:
            grad_value = self.grad_value_prev
        k_aux_next = code_sr(k_next - eta * np.abs(grad_value) / 2.0, self.rand)
        if k_aux_next < self.k_min * self.delta:
            k_aux_next = int(np.ceil(self.k_min * self.delta))
        if k_aux_next >= k_next:
            k_aux_next = k_next - 1
        return k_next, k_aux_next


def feedback(theta, tau_hat, k, k_aux):
    """A Feedback whose estimate tau_hat is ``tau_hat`` (None: the guard fails)."""
    if tau_hat is None:
        return C.Feedback(1.0, 1.5, 0.5, theta, theta, k, k_aux)
    return C.Feedback(1.0, 0.5, 0.5, theta, tau_hat, k, k_aux)


def costs(rounds, seed, none_every):
    rng = np.random.default_rng(seed)
    out = []
    for m in range(1, rounds + 1):
        theta = 1.0 + rng.random()
        out.append((theta, None if m % none_every == 0 else theta + rng.normal() * 0.3))
    return out


@pytest.mark.parametrize(("value", "none_every"), [(False, 3), (False, 40), (True, 4)])
def test_ogd_equals_the_code(value, none_every):
    """Sign (with its windows) and value-based OGD: the (k, k') of every round, from k_1 =
    300 in [20, 2000], over 300 rounds, with runs of unavailable estimates (none_every 40:
    long runs of available ones; 3: a forced step after 11 unavailable in a row is rare, so
    the run below also checks one directly)."""
    ours_rng, code_rng = np.random.default_rng(7), np.random.default_rng(7)
    k_min, k_max, k1 = 20, 2000, 300
    ctrl = C.AuthorsValueOGD(k1, k_min, k_max) if value else C.AuthorsSignOGD(k1, k_min, k_max)
    code = CodeOGD(k_min, k_max, code_rng.random)
    k, k_aux = k1, math.ceil(0.9 * k1)
    seq = costs(300, 3, none_every)
    for m, (theta, tau_hat) in enumerate(seq, start=1):
        assert ctrl.choose(m, ours_rng) == k and ctrl.choose_aux(m, k, ours_rng) == k_aux
        ctrl.learn(m, feedback(theta, tau_hat, k, k_aux))
        if m > 2:  # simulation.py: num_iter > 2
            tune = code.tuning_k_grad_value if value else code.tuning_k_grad_sign
            k, k_aux = tune(k, k_aux, theta, tau_hat, m)
    assert (ctrl.k, ctrl.k_aux) == (k, k_aux)
    if not value:
        assert (ctrl.lo, ctrl.hi) == (code.k_min, code.k_max)


def test_eleven_unavailable_estimates_then_a_forced_step():
    ctrl = C.AuthorsSignOGD(100, 10, 1000, extended=False)
    rng = np.random.default_rng(0)
    ks = []
    for m in range(1, 20):
        ctrl.choose(m, rng)
        ctrl.learn(m, feedback(1.0, None, ctrl.k, ctrl.k_aux))
        ks.append(ctrl.k)
    # rounds 3..13 keep k (11 unavailable), round 14 forces k + delta = 100 + 990 / sqrt(28)
    assert ks[:13] == [100] * 13 and ks[13] in (287, 288)


class CodeExp3:
    def __init__(self, dim, T, choices, rand):
        self.gamma = np.sqrt(np.log(dim) / dim / T)
        self.weights = np.ones([len(choices)])
        self.prob = (1 - self.gamma) * self.weights / sum(self.weights) + self.gamma / len(choices)
        self.choices, self.rand = choices, rand

    def pick_choice(self):
        x, cumulative = self.rand(), 0.0
        for item, p in zip(self.choices, self.prob, strict=True):  # noqa: B007 (as coded)
            cumulative += p
            if x < cumulative:
                break
        return item

    def step(self, choice, reward):
        reward_ = np.zeros([len(self.choices)])
        idx = self.choices.index(choice)
        reward_[idx] = reward / self.prob[idx]
        self.weights = self.weights * np.exp(self.gamma * reward_ / len(self.choices))
        self.prob = (1 - self.gamma) * self.weights / sum(self.weights) + self.gamma / len(
            self.choices
        )
        return self.pick_choice()


def test_exp3_equals_the_code():
    """Arms 10..D-1, gamma from D, a reward theta / (L(w) - L(w_prev)) that favours a rise
    in loss: the arms played over 200 rounds (T small so that the weights move)."""
    D, T = 60, 20
    ours_rng, code_rng = np.random.default_rng(5), np.random.default_rng(5)
    ctrl = C.AuthorsExp3(10, D - 1, D, horizon=T)
    code = CodeExp3(D, T, [i + 10 for i in range(D - 10)], code_rng.random)
    k = code.pick_choice()
    losses = np.random.default_rng(1)
    for m in range(1, 201):
        assert ctrl.choose(m, ours_rng) == k
        theta = 1.0 + 0.01 * k
        prev, cur = 1.0, 1.0 + losses.normal() * 0.05 + (0.02 if k > 40 else -0.02)
        ctrl.learn(m, C.Feedback(prev, cur, None, theta, None, k, None))
        if m > 2:
            k = code.step(k, theta / (cur - prev))
    assert len(set(ctrl.arms.tolist())) == D - 10 and ctrl.arms[0] == 10


class CodeBandit:
    def __init__(self, k_min, k_max, T, rand):
        self.delta = 1 / np.power(T, 1 / 4)
        self.eta = (k_max - k_min + 1) / 1 / np.power(T, 3 / 4)
        self.max_d, self.min_d = k_max - self.delta, k_min + self.delta
        self.action = (k_max + k_min) / 200
        self.rand = rand
        self.u = 1 if rand() <= 0.5 else -1

    def project(self, a):
        return min(max(a, self.min_d), self.max_d)

    def initial(self):
        return code_sr(self.project(self.action + self.delta * self.u), self.rand)

    def next(self, cost):
        if cost is None:
            return code_sr(self.action, self.rand)
        self.action = self.project(self.action - self.eta * (1 / self.delta * cost * self.u))
        self.u = 1 if self.rand() <= 0.5 else -1
        return code_sr(self.action + self.delta * self.u, self.rand)


def test_bandit_equals_the_code():
    ours_rng, code_rng = np.random.default_rng(9), np.random.default_rng(9)
    D, T = 5000, 5780
    ctrl, code = C.AuthorsBandit(10, D, T), CodeBandit(10, D, T, code_rng.random)
    k = code.initial()
    losses = np.random.default_rng(2)
    for m in range(1, 301):
        assert ctrl.choose(m, ours_rng) == k
        prev = 1.0
        cur = prev if m % 50 == 0 else prev - 0.01 + losses.normal() * 0.02
        theta = 1.0 + k / D
        ctrl.learn(m, C.Feedback(prev, cur, None, theta, None, k, None))
        if m > 2:
            k = code.next(None if prev == cur else theta / (prev - cur))
    assert ctrl.x == pytest.approx(code.action)


def test_code_times_lag_a_round_and_charge_the_losses():
    """The times Algorithm 3 learns from under k_rules authors_code, by hand: D = 8 x 3 = 24
    (softmax, d = 8, 3 classes), beta = 10, b = 10: computation 1 + 1/10; round 1 its own
    downlink, round 2 round 1's downlink with round 2's uplink."""
    pb = Problem(make_data("softmax", sizes=(10, 17, 25, 13), d=8), "softmax", 1e-2, "samples")
    prm = {**params_for("fabtopk", 6), "batch_size": 10}
    prm.update(k_control="online_extended", k_rules="authors_code")
    algo = ALGORITHMS["fabtopk"](pb, ALGORITHMS["fabtopk"].validate_params(prm), 1)
    algo.time_model = {"step_time": 1.0, "round_latency": 0.0, "exchange_time": 10.0}
    algo.setup()
    D = algo.n_params
    assert D == 24 and algo.authors_rules
    assert algo._code_times(5, 4, 5, 4) == pytest.approx((1.1 + 10 * 10 / D, 1.1 + 10 * 8 / D))
    assert algo._code_times(6, 5, 6, 5) == pytest.approx((1.1 + 10 * 11 / D, 1.1 + 10 * 9 / D))
    assert algo.controller.k_aux == math.ceil(0.9 * 6)  # k'_1 = ceil(0.9 k_1)
    assert algo.k_range() == (1, D)  # round(0.002 D) = 0, at least 1


@pytest.mark.parametrize("control", ["online_extended", "value_ogd", "exp3", "bandit"])
def test_authors_rules_in_a_run(control):
    """Seeded, within the code's K, k unchanged for rounds 1-3 (the first update is after
    round 3), and the paper-text run id kept when k_rules is left at its default."""
    prm = {"stepsize": 0.1, "k": 10, "k_control": control, "batch_size": 8}  # D = 12
    plain = normalize_run_config(run_cfg("fabtopk", params=prm))
    named = normalize_run_config(run_cfg("fabtopk", params={**prm, "k_rules": "paper_text"}))
    assert run_id(plain) == run_id(named) and "k_rules" not in plain["params"]
    cfg = run_cfg(
        "fabtopk",
        params={**prm, "k_rules": "authors_code"},
        rounds=30,
        eval_every=1,
        time_model={"exchange_time": 10},
    )
    a = to_frame(run_trace(normalize_run_config(cfg)))
    b = to_frame(run_trace(normalize_run_config(cfg)))
    assert a["k_used"].tolist()[1:] == b["k_used"].tolist()[1:]
    ks = a["k_used"].iloc[1:].to_numpy()
    assert (ks[:3] == ks[0]).all() and (a["k_rules"] == "authors_code").all()
    assert ks.min() >= 1 and ks.max() <= 12
    if control in ("online_extended", "value_ogd"):
        assert a["k_aux"].iloc[1] == math.ceil(0.9 * 10)
