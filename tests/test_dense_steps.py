"""The cohort's local step on dense rows (kernels.dense_steps): its documented arithmetic,
transcribed in exact rational arithmetic, bit for bit; NumPy's gradient step to rounding."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

from fedsparse.kernels import dense_steps, simd
from fedsparse.kernels.losses import LEAST_SQUARES, LOGISTIC


def fma(a: float, b: float, c: float) -> float:
    """``a * b + c`` rounded once: exact rationals, then Python's correctly rounded float."""
    return float(Fraction(a) * Fraction(b) + Fraction(c))


def score(x: np.ndarray, w: np.ndarray) -> float:
    """Lane l sums the terms j = l (mod 8) below the last multiple of 8, by fma from +0.0;
    the lanes are added pairwise; the last d mod 8 terms follow by fma."""
    d = len(w)
    d8 = d - d % 8
    lanes = [0.0] * 8
    for j in range(d8):
        lanes[j % 8] = fma(float(x[j]), float(w[j]), lanes[j % 8])
    z = ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3])) + (
        (lanes[4] + lanes[5]) + (lanes[6] + lanes[7])
    )
    for j in range(d8, d):
        z = fma(float(x[j]), float(w[j]), z)
    return z


def coefficient(loss: int, z: float, yi: float, scale: float) -> float:
    """``scale * d loss / d z``, as kernels.losses computes it (libm's exp: math.exp)."""
    if loss == LEAST_SQUARES:
        return scale * 2.0 * (z - yi)
    m = yi * z
    if m > 0.0:
        e = math.exp(-m)
        sig = e / (1.0 + e)
    else:
        sig = 1.0 / (1.0 + math.exp(m))
    return -scale * yi * sig


def step(X, y, rows, w, loss, l2, stepsize) -> np.ndarray:
    """The documented step of one model, coordinate by coordinate."""
    scale = 1.0 / len(rows)
    a = [coefficient(loss, score(X[r], w), float(y[r]), scale) for r in rows]
    out = np.empty(len(w))
    for j in range(len(w)):
        g = 0.0
        for q, r in enumerate(rows):
            g = fma(a[q], float(X[r, j]), g)
        if l2 != 0.0:
            g = fma(l2, float(w[j]), g)
        out[j] = fma(-stepsize, g, float(w[j]))
    return out


def numpy_step(X, y, rows, w, loss, l2, stepsize) -> np.ndarray:
    Xr, yr = X[rows], y[rows]
    z = Xr @ w
    if loss == LEAST_SQUARES:
        grad = 2.0 * Xr.T @ (z - yr) / len(rows)
    else:
        grad = -Xr.T @ (yr / (1.0 + np.exp(yr * z))) / len(rows)
    return w - stepsize * (grad + l2 * w)


def data(rs, d: int, loss: int, n: int = 40):
    X = rs.standard_normal((n, d))
    y = rs.standard_normal(n) if loss == LEAST_SQUARES else np.sign(rs.standard_normal(n))
    return X, y


def run(X, y, rows, W_local, members, loss, l2, stepsizes, client=1):
    """descend_members on client ``client``'s models of a (C, clients, 1, d) stack (a strided
    view, as the cohort round passes it)."""
    C = W_local.shape[0]
    coef, lanes, grad = (a[0] for a in dense_steps.work_space(1, C, len(rows)))
    members = np.asarray(members, dtype=np.int64)
    dense_steps.descend_members(
        X, y, rows, W_local[:, client, 0], members, loss, l2, stepsizes, coef, lanes, grad
    )


# d: no full lane block, a tail, one block, blocks and a tail, two and three coordinate chunks
@pytest.mark.parametrize("d", [3, 8, 13, 136, 300])
@pytest.mark.parametrize("loss", [LEAST_SQUARES, LOGISTIC])
@pytest.mark.parametrize("l2", [0.0, 0.05])
def test_each_member_steps_by_the_documented_arithmetic_bit_for_bit(d, loss, l2):
    rs = np.random.default_rng(d * 10 + loss)
    X, y = data(rs, d, loss)
    C = 5
    W = rs.standard_normal((C, 3, 1, d))
    stepsizes = rs.uniform(0.05, 0.5, C)
    # blocks of four rows and each remainder; repeated rows; all members, odd subsets, one
    for rows in ([7], [3, 0, 11], [1, 2, 3, 4], [5, 9, 5, 30, 2], list(range(10)), list(range(17))):
        rows = np.array(rows, dtype=np.int64)
        for members in ([0, 1, 2, 3, 4], [3], [4, 0, 2], [1, 3]):
            got = W.copy()
            run(X, y, rows, got, members, loss, l2, stepsizes)
            for m in range(C):
                if m in members:
                    want = step(X, y, rows, W[m, 1, 0], loss, l2, stepsizes[m])
                    np.testing.assert_array_equal(got[m, 1, 0].view(np.int64), want.view(np.int64))
                    close = numpy_step(X, y, rows, W[m, 1, 0], loss, l2, stepsizes[m])
                    np.testing.assert_allclose(got[m, 1, 0], close, rtol=1e-12, atol=1e-12)
                else:
                    np.testing.assert_array_equal(got[m], W[m])
            np.testing.assert_array_equal(got[:, [0, 2]], W[:, [0, 2]])  # other clients


def test_a_member_with_infinite_weights_leaves_the_others_bits_alone():
    rs = np.random.default_rng(5)
    X, y = data(rs, 140, LOGISTIC)
    rows = np.arange(10, dtype=np.int64)
    W = rs.standard_normal((4, 3, 1, 140))
    stepsizes = np.array([0.1, 0.2, 0.3, 0.4])
    alone = W.copy()
    for m in range(4):
        run(X, y, rows, alone, [m], LOGISTIC, 0.01, stepsizes)
    W[1, 1, 0, 17] = np.inf
    together = W.copy()
    run(X, y, rows, together, [0, 1, 2, 3], LOGISTIC, 0.01, stepsizes)
    assert not np.isfinite(together[1, 1, 0]).all()
    for m in (0, 2, 3):
        np.testing.assert_array_equal(together[m].view(np.int64), alone[m].view(np.int64))


def test_fma_rounds_once():
    """The scalar and the vector fma are one rounding: 1 + 2^-60 is lost by a product rounded
    first and kept by an fma (here against exact rationals over random operands, too)."""
    from numba import njit

    @njit
    def both(a, b, c, out):
        out[0] = simd.fma(a, b, c)
        v = simd.vfma(simd.vsplat(a), simd.vsplat(b), simd.vsplat(c))
        out[1] = simd.lane(v, 5)
        out[2] = simd.hsum(v)

    out = np.empty(3)
    eps = 2.0**-30
    both(1.0 + eps, 1.0 - eps, -1.0, out)  # exactly -2^-60, which a rounded product loses
    assert out[0] == out[1] == -(2.0**-60)
    rs = np.random.default_rng(0)
    for a, b, c in rs.standard_normal((200, 3)):
        both(a, b, c, out)
        assert out[0] == out[1] == fma(a, b, c)
        assert out[2] == 8 * out[0]  # eight equal lanes: an exact sum of powers of two times it


_STEPS_SCRIPT = """
import sys
import numpy as np
from fedsparse.kernels.dense_steps import descend_members, work_space
rs = np.random.default_rng(3)
out = []
for d in (13, 300):
    X = rs.standard_normal((100, d))
    y = np.sign(rs.standard_normal(100))
    W = rs.standard_normal((3, d)) * 0.1
    for loss in (0, 1):
        rows = rs.integers(0, 100, 10).astype(np.int64)
        coef, lanes, grad = (a[0] for a in work_space(1, 3, 10))
        descend_members(X, y, rows, W, np.arange(3), loss, 0.01, np.array([0.1, 0.2, 0.3]),
                        coef, lanes, grad)
        out.append(W.ravel().copy())
np.save(sys.argv[1], np.concatenate(out))
"""


@pytest.mark.parametrize("cpu", ["haswell", "nehalem"])
def test_the_bits_do_not_depend_on_the_cpus_vector_width(tmp_path, cpu):
    """The kernels compiled for AVX2 (haswell: four lanes a register) and for a CPU without
    FMA (nehalem: llvm.fma becomes libm's fma) give this machine's bits."""
    import os
    import subprocess
    import sys

    script = tmp_path / "steps.py"
    script.write_text(_STEPS_SCRIPT)
    here, there = tmp_path / "here.npy", tmp_path / f"{cpu}.npy"
    argv = sys.argv
    try:  # this machine's kernels: the ones this process has compiled
        sys.argv = [str(script), str(here)]
        exec(compile(_STEPS_SCRIPT, str(script), "exec"), {"__name__": "__main__"})
    finally:
        sys.argv = argv
    env = {"FEDSPARSE_NUMBA_CACHE": str(tmp_path / "cache"), "NUMBA_CPU_NAME": cpu}
    subprocess.run([sys.executable, str(script), str(there)], env={**os.environ, **env}, check=True)
    np.testing.assert_array_equal(np.load(here).view(np.int64), np.load(there).view(np.int64))
