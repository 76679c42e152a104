"""Layer building blocks the network kernels share: BLAS products, activations, bias terms,
the gathering of input rows, the float32 work copy of parameters and the per-row losses.

:mod:`fedsparse.kernels.mlp` (dense layers) and :mod:`fedsparse.kernels.cnn` (convolutions
and pools, then dense layers) are both built from these; neither imports the other.

Matrices are flat, packed, row-major 1-D views (a batch of ``b`` rows of ``width`` values
is ``b * width`` values back to back). Every function computes in the dtype of the arrays it
writes (float32 or float64); the losses of a row are float64 whatever its scores' dtype.
"""

from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.extending import overload

from . import blas
from .elementary import exp_le0
from .losses import LEAST_SQUARES, SOFTMAX

RELU = 0
SWISH = 1
TANH = 2
SIGMOID = 3
ACTIVATIONS = {"relu": RELU, "swish": SWISH, "tanh": TANH, "sigmoid": SIGMOID}

BLAS_N = ord("n")  # gemm's "no transpose" flag
BLAS_T = ord("t")  # gemm's "transpose" flag
_N, _T = BLAS_N, BLAS_T

# Positions in a network's work tuple (X0, A, D, E): gathered input rows, hidden
# activations, their derivatives, delta buffers (each network kernel fixes their lengths).
WORK_X0, WORK_A, WORK_D, WORK_E = 0, 1, 2, 3


# ---------------------------------------------------------------------------
# BLAS


@njit(cache=True)
def gemm(ta, tb, m, n, k, alpha, A, B, beta, C):
    """Row-major ``C (m x n) = alpha * op(A) @ op(B) + beta * C`` on flat, packed arrays, by
    :mod:`fedsparse.kernels.blas` (``sgemm`` for float32 ``C``, else ``dgemm``).

    ``A``, ``B``, ``C`` are 1-D views starting at each matrix, stored row-major with
    no padding (``A`` is m x k, or k x m if ``ta`` is ``BLAS_T``; likewise ``B``).
    ``alpha`` and ``beta`` are rounded to ``C``'s dtype.
    """
    lda = k if ta == _N else m
    ldb = n if tb == _N else k
    a = blas.TRANS if ta == _T else blas.NO_TRANS
    b = blas.TRANS if tb == _T else blas.NO_TRANS
    _cblas_gemm(a, b, m, n, k, alpha, A, lda, B, ldb, beta, C)


def _cblas_gemm(ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C):
    """``cblas_?gemm``, row-major, of ``C``'s dtype (compiled only)."""


@overload(_cblas_gemm)
def _cblas_gemm_impl(ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C):
    single = C.dtype == types.float32
    call = blas.sgemm if single else blas.dgemm
    real = np.float32 if single else np.float64

    def impl(ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C):
        call(
            blas.ROW_MAJOR, ta, tb, m, n, k,
            real(alpha), A.ctypes, lda, B.ctypes, ldb, real(beta), C.ctypes, n,
        )  # fmt: skip

    return impl


# ---------------------------------------------------------------------------
# float32 work space: the algorithms' float64 parameters converted at the kernels' edge


def as_work(theta, buf):
    """``theta`` if it has ``buf``'s dtype, else ``buf[:len(theta)]`` filled with it
    (rounded to ``buf``'s dtype) (compiled only)."""


@overload(as_work)
def _as_work_impl(theta, buf):
    if theta.dtype == buf.dtype:
        return lambda theta, buf: theta

    def cast(theta, buf):
        out = buf[: theta.shape[0]]
        for j in range(theta.shape[0]):
            out[j] = theta[j]
        return out

    return cast


# ---------------------------------------------------------------------------
# Activations and bias terms


@njit(inline="always")
def _sigmoid(z, e):
    """sigma(z) from ``e = exp(-|z|)``: never overflows."""
    return (1.0 if z >= 0.0 else e) / (1.0 + e)


@njit(cache=True, error_model="numpy")
def activate(act, A, D):
    """``A = act(A)`` in place and, if ``D`` is non-empty, ``D = act'(A)`` (the input's);
    relu'(0) = 0. One loop per case without calls or branches, so LLVM vectorises them:
    in place on one array (two arrays that might overlap would be checked at run time,
    and an exact overlap sends the loop to its scalar version) and with
    ``error_model="numpy"`` (no zero-division checks)."""
    n = A.shape[0]
    if D.shape[0] > 0:
        if act == 0:  # RELU
            for j in range(n):
                z = A[j]
                A[j] = z if z > 0.0 else 0.0
                D[j] = 1.0 if z > 0.0 else 0.0
        elif act == 2:  # TANH
            for j in range(n):
                a = np.tanh(A[j])
                A[j] = a
                D[j] = 1.0 - a * a
        elif act == 3:  # SIGMOID
            for j in range(n):
                z = A[j]
                s = _sigmoid(z, exp_le0(-abs(z)))
                A[j] = s
                D[j] = s * (1.0 - s)
        else:  # SWISH
            for j in range(n):
                z = A[j]
                s = _sigmoid(z, exp_le0(-abs(z)))
                A[j] = z * s
                D[j] = s * (1.0 + z * (1.0 - s))
    elif act == 0:
        for j in range(n):
            z = A[j]
            A[j] = z if z > 0.0 else 0.0
    elif act == 2:
        for j in range(n):
            A[j] = np.tanh(A[j])
    elif act == 3:
        for j in range(n):
            z = A[j]
            A[j] = _sigmoid(z, exp_le0(-abs(z)))
    else:
        for j in range(n):
            z = A[j]
            A[j] = z * _sigmoid(z, exp_le0(-abs(z)))


@njit(cache=True)
def bias_activate(A, b, width, theta, boff, bias, act, D):
    """``A = act(A + b_l)`` in place and ``D = act'(A + b_l)`` (``b`` rows of ``width``;
    ``b_l`` is ``theta[boff:boff + width]``, added only if ``bias``; ``D`` may be skipped:
    pass an empty array)."""
    n = b * width
    if bias:
        for r in range(b):
            a = A[r * width : (r + 1) * width]
            bl = theta[boff : boff + width]
            for o in range(width):
                a[o] += bl[o]
    activate(act, A[:n], D[:n] if D.shape[0] > 0 else D)


@njit(cache=True)
def add_bias(Z, b, width, theta, boff):
    """``Z += b_l`` on each of its ``b`` rows of ``width`` (``b_l = theta[boff:boff + width]``)."""
    for r in range(b):
        out = Z[r * width : (r + 1) * width]
        bl = theta[boff : boff + width]
        for o in range(width):
            out[o] += bl[o]


@njit(cache=True)
def scale(t, c):
    """``t *= c`` (vectorised)."""
    for j in range(t.shape[0]):
        t[j] *= c


@njit(cache=True)
def bias_grad(delta, b, out, alpha, t):
    """``t += alpha * (column sums of delta (b x out))``."""
    for r in range(b):
        row = delta[r * out : (r + 1) * out]
        for o in range(out):
            t[o] += alpha * row[o]


# ---------------------------------------------------------------------------
# Input rows


def gather(X, rows, X0, densify_csr):
    """Copy the rows ``X[rows]`` into ``X0`` (b x d): always for dense ``X``, for CSR only if
    ``densify_csr`` (a cnn's layers read dense rows; an MLP's first layer reads CSR in place)
    (compiled only)."""


@overload(gather)
def _gather_impl(X, rows, X0, densify_csr):
    if isinstance(X, types.Array):

        def dense(X, rows, X0, densify_csr):
            d = X.shape[1]
            for r in range(rows.shape[0]):
                X0[r * d : (r + 1) * d] = X[rows[r]]

        return dense

    def csr(X, rows, X0, densify_csr):
        if not densify_csr:
            return
        data, indices, indptr = X
        b = rows.shape[0]
        d = X0.shape[0] // b if b > 0 else 0
        X0[: b * d] = 0.0
        for r in range(b):
            for k in range(indptr[rows[r]], indptr[rows[r] + 1]):
                X0[r * d + indices[k]] = data[k]

    return csr


# ---------------------------------------------------------------------------
# Output layer: losses on a block of scores


@njit(cache=True)
def row_loss(z, c, yi, loss, scale, g):
    """Loss of one row with scores ``z`` (length c) and label ``yi``; if ``g`` is non-empty,
    ``g = scale * d loss / d z`` (``g`` may be ``z``). Returns (loss, correct): softmax's
    prediction is the argmax (ties to the lowest index), logistic's the sign of z (z > 0 ->
    +1); least squares is never correct."""
    if loss == SOFTMAX:
        label = int(yi)
        top = np.float64(z[0])
        best = 0
        for r in range(1, c):
            if z[r] > top:  # strict: ties go to the lowest index
                top = np.float64(z[r])
                best = r
        true_score = np.float64(z[label])
        total = 0.0
        for r in range(c):
            total += np.exp(np.float64(z[r]) - top)
        value = np.log(total) + top - true_score
        if g.shape[0] > 0:
            for r in range(c):
                p = np.exp(np.float64(z[r]) - top) / total
                g[r] = scale * (p - 1.0 if r == label else p)
        return value, best == label
    zi = np.float64(z[0])
    if loss == LEAST_SQUARES:
        res = zi - yi
        if g.shape[0] > 0:
            g[0] = scale * 2.0 * res
        return res * res, False
    m = yi * zi  # logistic, stable for both signs of the margin
    if m > 0.0:
        e = np.exp(-m)
        value = np.log1p(e)
        sig = e / (1.0 + e)
    else:
        e = np.exp(m)
        value = -m + np.log1p(e)
        sig = 1.0 / (1.0 + e)
    if g.shape[0] > 0:
        g[0] = -scale * yi * sig
    return value, (1.0 if zi > 0.0 else -1.0) == yi
