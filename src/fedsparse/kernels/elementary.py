"""Our own ``exp`` and ``log(1 + e^-a)``: arithmetic only, so loops over them vectorise.

libm's ``exp`` and ``log1p`` are calls per element that LLVM cannot vectorise (numba has no
SVML here), and their bits are the machine's libm's. These use plain IEEE ``+ - * /``, a
floor and exponent bits (no FMA contraction: numba does not contract without fastmath), so
they give the same bits on every machine, within about an ulp of libm (tests check).
Used by the networks' activations (:mod:`fedsparse.kernels.layers`) and the logistic loss of
exact evaluation (:mod:`fedsparse.kernels.evaluate`).

Names say the argument's domain: ``exp_le0(x)`` takes ``x <= 0``; the ``_minus`` functions take
``a >= 0`` and work on ``-a`` (``exp_minus(a) = exp(-a)``, ``log1p_exp_minus(a) =
log(1 + exp(-a))``); ``log1p_from_exp(e, a)`` finishes the latter from ``e = exp_minus(a)``.
"""

from __future__ import annotations

import math

from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

# exp_le0: swish through libm's exp is, after the first layer's GEMM, the largest cost
# of a swish network's evaluation, and libm's exp does not vectorise (docs/performance.md has
# the figures). Cody-Waite reduction x = k ln2 + r,
# |r| <= ln2/2, the Taylor polynomial of degree 13 (truncation < 1e-17) and 2**k from its
# bits: plain IEEE arithmetic (no FMA contraction in numba), so the same bits on every
# machine; within 1 ulp of libm (tests check).
_LOG2E = 1.4426950408889634
_LN2_HI = 6.93147180369123816490e-01  # fdlibm's split of ln 2: k * _LN2_HI is exact
_LN2_LO = 1.90821492927058770002e-10
_ROUND = 6755399441055744.0  # 1.5 * 2**52: x + _ROUND - _ROUND rounds x to an integer
_EXP_FLOOR = -708.0  # exp(-708) is still a normal number; below it exp is clamped there
_INV_FACT = tuple(1.0 / math.factorial(n) for n in range(14))


@intrinsic
def double_from_bits(typingctx, i):
    """The float64 whose bit pattern is the int64 ``i``."""

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.DoubleType())

    return types.float64(types.int64), codegen


@intrinsic
def bits_of_double(typingctx, x):
    """The int64 bit pattern of the float64 ``x``."""

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(64))

    return types.int64(types.float64), codegen


_C2, _C3, _C4, _C5, _C6, _C7, _C8, _C9, _C10, _C11, _C12, _C13 = _INV_FACT[2:]


@njit(inline="always")
def exp_le0(x):
    """``exp(x)`` for ``x <= 0`` (NaN stays NaN; below -708 it returns exp(-708) ~ 3e-308,
    where libm's result would be subnormal or 0): branch-free, so loops over it vectorise."""
    xc = x if x >= _EXP_FLOOR else _EXP_FLOOR  # NaN too: k must stay a valid integer
    shifted = xc * _LOG2E + _ROUND  # its low mantissa bits hold the integer k (2**51 + k)
    k = shifted - _ROUND
    r = (xc - k * _LN2_HI) - k * _LN2_LO
    p = _C13
    p = p * r + _C12
    p = p * r + _C11
    p = p * r + _C10
    p = p * r + _C9
    p = p * r + _C8
    p = p * r + _C7
    p = p * r + _C6
    p = p * r + _C5
    p = p * r + _C4
    p = p * r + _C3
    p = p * r + _C2
    p = p * r + 1.0
    p = p * r + 1.0
    # 2**k from the bits of shifted + 1023 (2**51 + k + 1023, exact): shifted left by 52 only
    # k + 1023 (1..2046) is left, the exponent field of 2**k; no float-to-integer conversion,
    # which AVX2 has no vector instruction for
    e = p * double_from_bits(bits_of_double(shifted + 1023.0) << 52)
    return e if x == x else x


@njit(cache=True, error_model="numpy")
def exp_le0_array(x, out):
    """``out = exp(x)`` elementwise for ``x <= 0`` by :func:`exp_le0` (for tests)."""
    for j in range(x.shape[0]):
        out[j] = exp_le0(x[j])


# log1p_exp_minus: fdlibm's s_log1p.c, log(1 + f) = 2 atanh(f / (2 + f)), its polynomial
_LP1, _LP2, _LP3 = 6.666666666666735130e-01, 3.999999999940941908e-01, 2.857142874366239149e-01
_LP4, _LP5, _LP6 = 2.222219843214978396e-01, 1.818357216161805012e-01, 1.531383769920937332e-01
_LP7 = 1.479819860511658591e-01
_SQRT2 = 1.4142135623730951
_EXP_M400 = 1.9151695967140057e-174  # exp(-400), correctly rounded (tests check)


@njit(inline="always", error_model="numpy")
def log1p_exp_minus(a):
    """``log(1 + exp(-a))`` for ``a >= 0`` (a logistic loss, ``a = |margin|``), NaN for NaN.

    ``e = exp(-a)`` by :func:`exp_minus` then fdlibm's log1p by :func:`log1p_from_exp`:
    faster than glibc's ``log1p(exp(-a))`` and the same bits on every machine; a loop of the
    first then a loop of the second (the same bits) is faster still (see
    ``evaluate._sample_losses``).
    """
    return log1p_from_exp(exp_minus(a), a)


@njit(inline="always", error_model="numpy")
def exp_minus(a):
    """``exp(-a)`` for ``a >= 0`` by :func:`exp_le0` (beyond its floor, ``-708``, as
    ``exp(-(a - 400)) exp(-400)``, so that subnormal results stay right; 0 beyond 746; not
    NaN for NaN: :func:`log1p_from_exp` takes ``a`` to give NaN)."""
    x = a if a <= 746.0 else 746.0  # exp(-746) rounds to 0; NaN goes this way too
    far = x > 700.0
    return exp_le0(-(x - 400.0) if far else -x) * (_EXP_M400 if far else 1.0)


@njit(inline="always", error_model="numpy")
def log1p_from_exp(e, a):
    """``log(1 + e)`` for ``e = exp_minus(a)`` (NaN for NaN ``a``): fdlibm's log1p,
    ``u = 1 + e = 2^j (1 + f)`` with ``1 + f`` in [sqrt(2)/2, sqrt(2)), plus what ``1 + e``
    lost to rounding, relative to ``u``."""
    u = 1.0 + e
    upper = u >= _SQRT2
    f = (0.5 * u - 1.0) if upper else (u - 1.0)  # exact
    j = 1.0 if upper else 0.0
    correction = (e - (u - 1.0)) / u
    hfsq = 0.5 * f * f
    s = f / (2.0 + f)
    z = s * s
    R = z * (_LP1 + z * (_LP2 + z * (_LP3 + z * (_LP4 + z * (_LP5 + z * (_LP6 + z * _LP7))))))
    value = j * _LN2_HI - ((hfsq - (s * (hfsq + R) + (j * _LN2_LO + correction))) - f)
    return value if a == a else a
