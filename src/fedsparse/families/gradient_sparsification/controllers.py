"""The k controllers of gradient sparsification (spec sections 2.3-2.6 and 4.2-4.3): how k_m,
the elements per sparse message, is chosen each round from what the server learned (``Feedback``).
One class per ``k_control`` other than ``fixed``: ``online`` and ``online_extended``
(``OnlineK``), ``value_ogd``, ``exp3``, ``bandit`` and ``sequence`` (a recorded sequence replayed).
Each has ``choose(m, rng) -> k`` and ``learn(m, feedback)``; ``signed`` says whether it needs the
k'-element variant of the round.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...errors import ConfigError

# EXP3 and the continuous bandit need a horizon T; the authors' code uses 5780 (spec 4.2). A
# hyperparameter of its own would need a trace column (fedsparse.results.schema), so it is fixed
# here.
HORIZON = 5780


def stochastic_round(x: float, rng: np.random.Generator) -> int:
    """floor(x) + Bernoulli(x - floor(x)) (spec Definition 2, read as the pitfall says)."""
    low = math.floor(x)
    return int(low + (rng.random() < x - low))


@dataclass(frozen=True)
class Feedback:
    """What the server learns after round m (spec 2.6): the p-weighted single-sample losses
    at w(m-1), w(m) and w'(m) (``aux``: None without k'), and the times theta_m(k_m) and
    theta_m(k'_m) of the round and of its k'-element variant."""

    prev: float
    cur: float
    aux: float | None
    theta: float
    theta_aux: float | None
    k: int
    k_aux: int | None

    def tau_hat(self) -> float | None:
        """(10): the time k' would take for the same loss decrease; None when unavailable
        (the guard: both losses must have decreased)."""
        if self.aux is None or not (self.prev > self.cur and self.prev > self.aux):
            return None
        return self.theta_aux * (self.prev - self.cur) / (self.prev - self.aux)

    def sign(self) -> int | None:
        """(11): sign(tau_m(k_m) - tau_hat_m(k'_m)) (k > k')."""
        tau_hat = self.tau_hat()
        return None if tau_hat is None else int(np.sign(self.theta - tau_hat))

    def slope(self) -> float | None:
        """Value-based estimate of d tau / dk: (tau_m(k_m) - tau_hat_m(k'_m)) / (k_m - k'_m)."""
        tau_hat = self.tau_hat()
        return None if tau_hat is None else (self.theta - tau_hat) / (self.k - self.k_aux)

    def cost(self) -> float | None:
        """The bandits' cost: time per unit loss decrease theta_m / (L(w(m-1)) - L(w(m)));
        None when the loss did not decrease (the same guard as the sign's)."""
        return self.theta / (self.prev - self.cur) if self.prev > self.cur else None


class OnlineK:
    """Online choice of a continuous k (spec sections 2.3-2.5 and 3): Algorithm 2
    (``extended=False``: k <- P_K(k - delta_m s_m), delta_m = B / sqrt(2m)) or Algorithm 3
    (also shrinks K after windows of M_u rounds with an available sign, when the widened
    window range B' < (sqrt 2 - 1) B and the instance ran at least as long as the last one).

    ``update(m, sign)`` takes the sign of round m (1-based) or None when unavailable (k is
    then unchanged and the window skips the round); delta uses max(1, m - m_0) with m_0 = 0
    at the start (the spec's reading of its 3.1/3.4).
    """

    signed = True  # needs k'_m and w'(m)

    def __init__(self, k_init, k_min, k_max, extended=False, window=20, expand=1.5):
        self.k = float(k_init)
        self.k_min0, self.k_max0 = float(k_min), float(k_max)
        self.lo, self.hi = self.k_min0, self.k_max0
        self.B = self.k_max0 - self.k_min0
        self.extended, self.window, self.expand = extended, window, expand
        self.m0, self.n, self.M_prev = 0, 0, 0
        self.win_lo, self.win_hi = math.inf, 0.0

    def delta(self, m: int) -> float:
        return self.B / math.sqrt(2.0 * max(1, m - self.m0))

    def choose(self, m: int, rng: np.random.Generator) -> int:
        """k_m of round m: the continuous state, stochastically rounded."""
        return stochastic_round(self.k, rng)

    def choose_aux(self, m: int, k: int, rng: np.random.Generator) -> int | None:
        """k'_m = k_m - delta_m / 2, rounded too, clamped to [1, k - 1] (spec pitfall 8);
        None at k = 1 (no k' < k)."""
        k_aux = stochastic_round(self.k - self.delta(m) / 2, rng)
        return None if k < 2 else max(1, min(k_aux, k - 1))

    def learn(self, m: int, feedback: Feedback | None) -> None:
        self.update(m, None if feedback is None else feedback.sign())

    def update(self, m: int, sign: int | None) -> None:
        delta = self.delta(m)
        if sign is not None:
            self.k = min(max(self.k - delta * sign, self.lo), self.hi)
        if not self.extended:
            return
        rounds = m - self.m0  # M'': rounds of the current instance
        if sign is not None:
            self.win_lo, self.win_hi = min(self.win_lo, self.k), max(self.win_hi, self.k)
            self.n += 1
        if self.n >= self.window:
            hi = min(self.expand * self.win_hi, self.k_max0)
            lo = max(self.win_lo / self.expand, self.k_min0)
            if hi - lo < (math.sqrt(2.0) - 1.0) * self.B and rounds >= self.M_prev:
                self.lo, self.hi, self.B = lo, hi, hi - lo
                self.M_prev, self.m0 = rounds, m
            self.n, self.win_lo, self.win_hi = 0, math.inf, 0.0


class ValueOGD(OnlineK):
    """Value-based online gradient descent on k (spec 4.2.1): Algorithm 2 with the estimated
    derivative itself in place of its sign, k <- P_K(k - delta_m d_m), d_m = (tau_m(k_m) -
    tau_hat_m(k'_m)) / (k_m - k'_m); k unchanged when the estimate is unavailable (the paper's
    rule; the authors' code reuses the previous one)."""

    def __init__(self, k_init, k_min, k_max):
        super().__init__(k_init, k_min, k_max)

    def learn(self, m: int, feedback: Feedback | None) -> None:
        slope = None if feedback is None else feedback.slope()
        if slope is not None:
            self.k = min(max(self.k - self.delta(m) * slope, self.lo), self.hi)


class Exp3K:
    """EXP3 over the integer arms k_min..k_max (spec 4.2.2, the authors' form): gamma =
    sqrt(ln n / (n T)); p = (1 - gamma) w / sum w + gamma / n; an arm drawn every round; the
    played arm's weight times exp(gamma (r / p_arm) / n) with reward r = -cost (minus the time
    per unit loss decrease). Log-weights, so no weight under- or overflows."""

    signed = False

    def __init__(self, k_min: int, k_max: int, horizon: int = HORIZON):
        self.arms = np.arange(k_min, k_max + 1)
        n = self.arms.size
        self.gamma = min(1.0, math.sqrt(math.log(n) / (n * horizon)))
        self.log_w = np.zeros(n)
        self.arm, self.p_arm = 0, 1.0

    def probabilities(self) -> np.ndarray:
        w = np.exp(self.log_w - self.log_w.max())
        return (1.0 - self.gamma) * w / w.sum() + self.gamma / w.size

    def choose(self, m: int, rng: np.random.Generator) -> int:
        p = self.probabilities()
        self.arm = min(
            int(np.searchsorted(np.cumsum(p), rng.random() * p.sum(), "right")), p.size - 1
        )
        self.p_arm = float(p[self.arm])
        return int(self.arms[self.arm])

    def learn(self, m: int, feedback: Feedback | None) -> None:
        cost = None if feedback is None else feedback.cost()
        if cost is not None:
            self.log_w[self.arm] += self.gamma * (-cost / self.p_arm) / self.arms.size


class BanditK:
    """Continuous bandit, Flaxman-Kalai-McMahan's one-point gradient (spec 4.2.3, the authors'
    constants on K = [k_min, k_max]): play y = x + delta u, u = +-1 at random, stochastically
    rounded; g = cost u / delta; x <- P_[k_min + delta, k_max - delta](x - eta g), with
    delta = T^(-1/4), eta = (k_max - k_min + 1) / T^(3/4); x_1 is the initial k."""

    signed = False

    def __init__(self, k_init: int, k_min: int, k_max: int, horizon: int = HORIZON):
        self.k_min, self.k_max = k_min, k_max
        self.delta = horizon**-0.25
        self.eta = (k_max - k_min + 1) / horizon**0.75
        self.lo = min(k_min + self.delta, (k_min + k_max) / 2)
        self.hi = max(k_max - self.delta, self.lo)
        self.x = min(max(float(k_init), self.lo), self.hi)
        self.u = 1

    def choose(self, m: int, rng: np.random.Generator) -> int:
        self.u = 1 if rng.random() < 0.5 else -1
        k = stochastic_round(self.x + self.delta * self.u, rng)
        return min(max(k, self.k_min), self.k_max)

    def learn(self, m: int, feedback: Feedback | None) -> None:
        cost = None if feedback is None else feedback.cost()
        if cost is not None:
            g = cost * self.u / self.delta
            self.x = min(max(self.x - self.eta * g, self.lo), self.hi)


class SequenceK:
    """A recorded k sequence replayed (spec 4.3): round m uses ``ks[m - 1]``; no feedback."""

    signed = False

    def __init__(self, ks: np.ndarray, where: str = "params.k_sequence"):
        self.ks, self.where = ks, where

    def choose(self, m: int, rng: np.random.Generator) -> int:
        if m > self.ks.size:
            raise ConfigError(
                f"{self.where}: the recorded sequence has {self.ks.size} rounds, this run "
                f"needs round {m}"
            )
        return int(self.ks[m - 1])

    def learn(self, m: int, feedback: Feedback | None) -> None:
        return None


# ---- the authors' code's controllers (k_rules: authors_code) ------------------------------
# control_algorithm/*.py of github.com/PengchaoHan/Adaptive_Gradient_Sparsification_FL, with
# simulation.py's calls: no update before round 3 (``num_iter > 2``); k is an integer state,
# stochastically rounded at each update (the draws in the code's order, from the rng the first
# ``choose`` gets). The times they learn from are the code's (``_code_times`` in algorithms.py).
FIRST_UPDATE = 3
PATIENCE = 10  # unavailable estimates are skipped while the counter is <= 10: 11 in a row
AUX_FLOOR = 0.1  # k' never below ceil(0.1 k_min)


class _AuthorsCode:
    def choose(self, m: int, rng: np.random.Generator) -> int:
        self.rng = rng
        return self.k


class AuthorsSignOGD(_AuthorsCode):
    """ONLINE_GRADIENT_DESCENT.tuning_k_grad_sign (Algorithms 2/3 as coded): k'_1 = ceil(0.9
    k_1); delta = d / sqrt(2 (m - m_0)); an unavailable estimate keeps k for 11 rounds, then
    forces k += delta; k' = SR(k - delta / 2), at least ceil(0.1 k_min), below k; the window
    (``extended``) counts every round with a step, restarts when b_new > 0, the instance ran at
    least as long as the last and b + b_new <= sqrt(2) b, its ends rounded to integers."""

    signed = True

    def __init__(self, k_init, k_min, k_max, extended=True, window=20, expand=1.5):
        self.k, self.k_aux = int(k_init), math.ceil(0.9 * k_init)
        self.k_min0, self.k_max0 = int(k_min), int(k_max)
        self.lo, self.hi = self.k_min0, self.k_max0
        self.d = self.hi - self.lo
        self.extended, self.window, self.expand = extended, window, expand
        self.m0, self.M_prev, self.timer, self.count = 0, 0, 0, 0
        self.win_lo, self.win_hi = self.k_max0, self.k_min0  # the code's inverse start
        self.rng: np.random.Generator | None = None

    def choose_aux(self, m: int, k: int, rng: np.random.Generator) -> int | None:
        return self.k_aux if 1 <= self.k_aux < k else None

    def delta(self, m: int) -> float:
        return self.d / math.sqrt(2.0 * (m - self.m0))

    def _step(self, m: int, feedback: Feedback | None) -> tuple[int, bool]:
        """k_next and whether it moved on an estimate (or the forced step)."""
        eta, tau_hat = self.delta(m), None if feedback is None else feedback.tau_hat()
        if tau_hat is None or not math.isfinite(tau_hat):
            if self.timer <= PATIENCE:
                self.timer += 1
                return self.k, False
            self.timer = 0
            return stochastic_round(self.k + eta, self.rng), True
        self.timer = 0
        slope = (feedback.theta - tau_hat) / (self.k - self.k_aux)
        return stochastic_round(self.k - eta * np.sign(slope), self.rng), True

    def learn(self, m: int, feedback: Feedback | None) -> None:
        if m < FIRST_UPDATE:
            return
        eta = self.delta(m)
        k_next, moved = self._step(m, feedback)
        k_next = min(max(k_next, self.lo), self.hi)
        k_aux = max(stochastic_round(k_next - eta / 2.0, self.rng), math.ceil(self.lo * AUX_FLOOR))
        self.k, self.k_aux = k_next, min(k_aux, k_next - 1)
        if self.extended and moved:
            self.win_lo, self.win_hi = min(self.win_lo, k_next), max(self.win_hi, k_next)
            self.count += 1
        if self.extended and self.count >= self.window:
            self._restart(m)

    def _restart(self, m: int) -> None:
        self.count = 0
        lo = int(np.round(max(self.win_lo / self.expand, self.k_min0)))
        hi = int(np.round(min(self.win_hi * self.expand, self.k_max0)))
        b_new, b = hi - lo, self.hi - self.lo
        rounds = m - self.m0
        if b_new > 0 and rounds >= self.M_prev and b + b_new <= b * math.sqrt(2.0):
            self.lo, self.hi, self.d = lo, hi, hi - lo
            self.m0, self.M_prev = m, rounds
        self.win_lo, self.win_hi = self.k_max0, self.k_min0


class AuthorsValueOGD(AuthorsSignOGD):
    """tuning_k_grad_value: delta = d / sqrt(2 m) over the whole K; k -= delta d_hat; an
    unavailable estimate keeps k for 11 rounds, then moves k by + delta times the last
    estimate; k' = SR(k - delta |d_hat| / 2) with the last estimate when none is new."""

    def __init__(self, k_init, k_min, k_max):
        super().__init__(k_init, k_min, k_max, extended=False)
        self.slope_prev = 0.0

    def learn(self, m: int, feedback: Feedback | None) -> None:
        if m < FIRST_UPDATE:
            return
        eta = self.d / math.sqrt(2.0 * m)
        tau_hat = None if feedback is None else feedback.tau_hat()
        slope = None
        if tau_hat is None or not math.isfinite(tau_hat):
            if self.timer <= PATIENCE:
                self.timer += 1
                k_next = self.k
            else:
                self.timer = 0
                k_next = stochastic_round(self.k + eta * self.slope_prev, self.rng)
        else:
            self.timer = 0
            slope = (feedback.theta - tau_hat) / (self.k - self.k_aux)
            k_next = stochastic_round(self.k - eta * slope, self.rng)
            self.slope_prev = slope
        k_next = min(max(k_next, self.lo), self.hi)
        slope = self.slope_prev if slope is None else slope
        k_aux = stochastic_round(k_next - eta * abs(slope) / 2.0, self.rng)
        k_aux = max(k_aux, math.ceil(self.lo * AUX_FLOOR))
        self.k, self.k_aux = k_next, min(k_aux, k_next - 1)


class AuthorsExp3(_AuthorsCode):
    """EXP3 as coded: arms k_min..k_max (the code's 10..D-1), gamma = sqrt(ln D / (D T)) with
    D the model's size, the first arm drawn at random; from round 3 the played arm's weight
    times exp(gamma (r / p_arm) / n) with r = theta / (L(w(m)) - L(w(m-1))) and no guard
    (a rise in loss is rewarded), then the next arm drawn. A reward that is not finite (the
    loss unchanged) is skipped, where the code's weights would become NaN."""

    signed = False

    def __init__(self, k_min: int, k_max: int, D: int, horizon: int = HORIZON):
        self.arms = np.arange(k_min, k_max + 1)
        self.gamma = math.sqrt(math.log(D) / D / horizon)
        self.log_w = np.zeros(self.arms.size)
        self.k, self.arm, self.p_arm = 0, -1, 1.0
        self.rng: np.random.Generator | None = None

    def probabilities(self) -> np.ndarray:
        w = np.exp(self.log_w - self.log_w.max())
        return (1.0 - self.gamma) * w / w.sum() + self.gamma / w.size

    def _draw(self) -> None:
        p = self.probabilities()
        x = self.rng.random()
        self.arm = min(int(np.searchsorted(np.cumsum(p), x, "right")), p.size - 1)
        self.p_arm, self.k = float(p[self.arm]), int(self.arms[self.arm])

    def choose(self, m: int, rng: np.random.Generator) -> int:
        self.rng = rng
        if self.arm < 0:
            self._draw()
        return self.k

    def learn(self, m: int, feedback: Feedback | None) -> None:
        if m < FIRST_UPDATE or feedback is None:
            return
        with np.errstate(divide="ignore", invalid="ignore"):
            reward = np.float64(feedback.theta) / np.float64(feedback.cur - feedback.prev)
        if np.isfinite(reward):
            self.log_w[self.arm] += self.gamma * (reward / self.p_arm) / self.arms.size
        self._draw()


class AuthorsBandit(_AuthorsCode):
    """CONTINUOUS_BANDIT as coded on [k_min, k_max] (the code's [10, D]): delta = T^(-1/4),
    eta = (k_max - k_min + 1) / T^(3/4), x_1 = (k_max + k_min) / 200; play SR(x + delta u);
    from round 3, with cost = theta / (L(w(m-1)) - L(w(m))) (no guard: negative when the loss
    rose), x <- P(x - eta cost u / delta) and a new u; an unchanged loss plays SR(x)."""

    signed = False

    def __init__(self, k_min: int, k_max: int, horizon: int = HORIZON):
        self.delta = horizon**-0.25
        self.eta = (k_max - k_min + 1) / horizon**0.75
        self.lo, self.hi = k_min + self.delta, k_max - self.delta
        self.x = (k_max + k_min) / 200.0
        self.k, self.started = 0, False
        self.rng: np.random.Generator | None = None

    def _u(self) -> int:
        return 1 if self.rng.random() <= 0.5 else -1

    def choose(self, m: int, rng: np.random.Generator) -> int:
        self.rng = rng
        if not self.started:
            self.started, self.u = True, self._u()
            self.k = stochastic_round(min(max(self.x + self.delta * self.u, self.lo), self.hi), rng)
        return self.k

    def learn(self, m: int, feedback: Feedback | None) -> None:
        if m < FIRST_UPDATE or feedback is None:
            return
        if feedback.prev == feedback.cur:
            self.k = stochastic_round(self.x, self.rng)
            return
        cost = feedback.theta / (feedback.prev - feedback.cur)
        self.x = min(max(self.x - self.eta * cost * self.u / self.delta, self.lo), self.hi)
        self.u = self._u()
        self.k = stochastic_round(self.x + self.delta * self.u, self.rng)
