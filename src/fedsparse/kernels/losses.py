"""Loss values and gradients for least squares, logistic and softmax models.

The model parameter is always a matrix ``W`` of shape (n_outputs, n_features):
one row for least squares and logistic regression, one row per class for
softmax, so the sparsity constraint is per row. Per-sample losses:

* least squares: ``(z.w - y)**2`` (the papers' form, no 1/2);
* logistic: ``log(1 + exp(-y z.w))`` with ``y`` in {-1, +1};
* softmax: ``logsumexp(W z) - (W z)[y]`` with ``y`` a class index stored as float.

Every loss adds ``l2/2 * ||W||**2`` to the per-client mean. ``X`` is dense or a
CSR triple (see :mod:`fedsparse.kernels.rows`).
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from .rows import row_axpy, row_axpy3, row_dot, row_dot3

LEAST_SQUARES = 0
LOGISTIC = 1
SOFTMAX = 2
LOSS_CODES = {"least_squares": LEAST_SQUARES, "logistic": LOGISTIC, "softmax": SOFTMAX}


@njit(cache=True)
def sample_loss_grad(X, y, i, W, loss, scale, G, s):
    """Loss of sample ``i`` at ``W``; also ``G += scale * grad``.

    ``s`` is scratch of shape (n_outputs,) for softmax scores.
    """
    if loss != SOFTMAX:
        value, a = _value_coef(loss, row_dot(X, i, W[0]), y[i], scale)
        row_axpy(X, i, a, G[0])
        return value
    # softmax
    c = W.shape[0]
    label = int(y[i])
    top = -np.inf
    for r in range(c):
        s[r] = row_dot(X, i, W[r])
        if s[r] > top:
            top = s[r]
    true_score = s[label]
    total = 0.0
    for r in range(c):
        s[r] = np.exp(s[r] - top)
        total += s[r]
    value = np.log(total) + top - true_score
    for r in range(c):
        p = s[r] / total
        if r == label:
            p -= 1.0
        row_axpy(X, i, scale * p, G[r])
    return value


@njit(cache=True)
def _value_coef(loss, z, yi, scale):
    """Loss of a sample with score ``z`` and label ``yi``, and ``scale * d loss / d z``
    (least squares or logistic)."""
    if loss == LEAST_SQUARES:
        r = z - yi
        return r * r, scale * 2.0 * r
    m = yi * z
    if m > 0.0:
        e = np.exp(-m)
        value = np.log1p(e)
        sig = e / (1.0 + e)  # sigmoid(-m)
    else:
        e = np.exp(m)
        value = -m + np.log1p(e)
        sig = 1.0 / (1.0 + e)
    return value, -scale * yi * sig


@intrinsic
def _double_from_bits(typingctx, bits):
    """The float64 whose IEEE bits are the int64 ``bits``."""
    sig = types.float64(types.int64)

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.DoubleType())

    return sig, codegen


# log1p_exp_neg's constants: fdlibm's e_exp.c (ln 2 split in two, the polynomial of exp's
# remainder) and s_log1p.c (the polynomial of log(1 + f))
_LN2_HI = 6.93147180369123816490e-01  # trailing zeros: k * _LN2_HI is exact for k < 2^20
_LN2_LO = 1.90821492927058770002e-10
_INV_LN2 = 1.44269504088896338700e00
_P1, _P2, _P3 = 1.66666666666666019037e-01, -2.77777777770155933842e-03, 6.61375632143793436117e-05
_P4, _P5 = -1.65339022054652515390e-06, 4.13813679705723846039e-08
_LP1, _LP2, _LP3 = 6.666666666666735130e-01, 3.999999999940941908e-01, 2.857142874366239149e-01
_LP4, _LP5, _LP6 = 2.222219843214978396e-01, 1.818357216161805012e-01, 1.531383769920937332e-01
_LP7 = 1.479819860511658591e-01
_SQRT2 = 1.4142135623730951


@njit(inline="always", error_model="numpy")
def log1p_exp_neg(a):
    """``log(1 + exp(-a))`` for ``a >= 0`` (a logistic loss ``log(1 + e^-|m|)``), within
    about one ulp, NaN for NaN.

    Arithmetic only (``+ - * /``, floor, selects and exponent bits; no calls), so a loop of
    it vectorises (glibc's ``exp`` and ``log1p`` cost 16-28 ns a sample here, a loop of
    this 6) and its bits are the same on every machine and libm. fdlibm's exp and log1p:
    ``exp(-a) = 2^-k exp(r)``, ``r = k ln2 - a`` in [-ln2/2, ln2/2]; then ``log(1 + e)``
    from ``u = 1 + e = 2^j (1 + f)`` and the rounding error of ``1 + e``.
    """
    x = min(a, 746.0) if a == a else 0.0  # exp(-746) is below the smallest subnormal
    k = np.floor(x * _INV_LN2 + 0.5)
    hi = k * _LN2_HI - x
    lo = k * _LN2_LO
    r = hi + lo
    t = r * r
    c = r - t * (_P1 + t * (_P2 + t * (_P3 + t * (_P4 + t * _P5))))
    er = 1.0 - ((-lo - (r * c) / (2.0 - c)) - hi)  # exp(r)
    ki = np.int64(k)  # 0 <= k <= 1077: 2^-k as two normal powers of two
    ka = ki >> 1
    e = (er * _double_from_bits((1023 - ka) << 52)) * _double_from_bits((1023 - ki + ka) << 52)
    u = 1.0 + e
    upper = u >= _SQRT2
    f = (0.5 * u - 1.0) if upper else (u - 1.0)  # exact
    j = 1.0 if upper else 0.0
    correction = (e - (u - 1.0)) / u  # what 1 + e lost to rounding, relative to u
    hfsq = 0.5 * f * f
    s = f / (2.0 + f)
    z = s * s
    R = z * (_LP1 + z * (_LP2 + z * (_LP3 + z * (_LP4 + z * (_LP5 + z * (_LP6 + z * _LP7))))))
    value = j * _LN2_HI - ((hfsq - (s * (hfsq + R) + (j * _LN2_LO + correction))) - f)
    return value if a == a else a


@njit(cache=True)
def _add_ridge(W, l2, G):
    """``G += l2 * W``; return ``l2/2 * ||W||^2``."""
    sq = 0.0
    for r in range(W.shape[0]):
        for j in range(W.shape[1]):
            w = W[r, j]
            sq += w * w
            G[r, j] += l2 * w
    return 0.5 * l2 * sq


@njit(cache=True)
def batch_grad(X, y, rows, W, loss, l2, G, s):
    """Mean loss over ``rows`` plus ridge, and its gradient written into ``G``.

    Parameters
    ----------
    X : array, shape (n_samples, n_features), or CSR triple
    y : array, shape (n_samples,)
    rows : int array, shape (b,), b >= 1
        The sample indices of the minibatch.
    W : array, shape (n_outputs, n_features)
    loss : int
        One of ``LEAST_SQUARES``, ``LOGISTIC``, ``SOFTMAX``.
    l2 : float
    G : array, shape (n_outputs, n_features)
        Output, overwritten.
    s : array, shape (n_outputs,)
        Scratch.
    """
    G[:, :] = 0.0
    b = rows.shape[0]
    scale = 1.0 / b
    total = 0.0
    k = 0
    if loss != SOFTMAX:  # three rows at a time (see row_dot3), the rest one by one
        w, g = W[0], G[0]
        while k + 3 <= b:
            i0, i1, i2 = rows[k], rows[k + 1], rows[k + 2]
            z0, z1, z2 = row_dot3(X, i0, i1, i2, w)
            v0, a0 = _value_coef(loss, z0, y[i0], scale)
            v1, a1 = _value_coef(loss, z1, y[i1], scale)
            v2, a2 = _value_coef(loss, z2, y[i2], scale)
            total += v0
            total += v1
            total += v2
            row_axpy3(X, i0, i1, i2, a0, a1, a2, g)
            k += 3
    while k < b:
        total += sample_loss_grad(X, y, rows[k], W, loss, scale, G, s)
        k += 1
    reg = 0.0
    if l2 != 0.0:
        reg = _add_ridge(W, l2, G)
    return total / b + reg


@njit(cache=True)
def weighted_sum(values, p):
    """``sum_i p[i] * values[i]`` in a fixed order (thread-count independent)."""
    total = 0.0
    for i in range(values.shape[0]):
        total += p[i] * values[i]
    return total
