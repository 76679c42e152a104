"""Minibatch gradients, blocked evaluation and local SGD rounds for multilayer perceptrons.

The parameter is one flat float64 vector ``theta``: for each layer ``l`` in order,
``W_l`` of shape (out_l, in_l) row-major, then ``b_l`` (out_l) if ``bias``.
``sizes = [d, h_1, ..., h_k, n_out]`` (int64; ``n_out`` = 1 for least squares and
logistic, the number of classes for softmax). Forward: ``z_l = W_l a_{l-1} + b_l``,
``a_l = act(z_l)`` on hidden layers; the last ``z`` goes into the loss (the
per-sample losses of :mod:`fedsparse.kernels.losses`). No hidden layer is a
linear model with the same layout.

A minibatch is handled as matrices of ``b`` rows, so every layer product is one
BLAS ``dgemm`` (:mod:`fedsparse.kernels.blas`, with ``alpha`` and
``beta`` so that gradients accumulate where they land: into ``G``, or straight
into ``theta`` for an SGD step); only the first layer of CSR data uses sparse
loops. Work space is allocated once by :func:`mlp_work`
(one thread) or :func:`mlp_thread_work` (one slot per numba thread).

Convolutional networks use the same public kernels: their ``sizes`` is the 2-D layer
table of :func:`fedsparse.kernels.cnn.cnn_spec`, and ``_step``, ``_check`` and
``_offsets`` (and :func:`mlp_eval`, :func:`mlp_work`, :func:`n_params`) dispatch on its
dimension when numba compiles them, to :mod:`fedsparse.kernels.cnn`; the 1-D (MLP)
specialisations are compiled from the same code as before.

float32 (``model.dtype: float32``): a float32 network reaches the kernels as a layer table
(an MLP's as dense layers only) whose work space (:func:`mlp_work`) is float32, and the
kernels compute in the work space's dtype: float32 parameters, input rows, activations and
deltas, products by BLAS ``sgemm``. The callers' parameters stay float64: each client's
local steps run on a float32 copy of the broadcast model, written back (exactly) into its
float64 row of ``theta_local`` at the end; :func:`mlp_batch_grad` rounds ``theta`` to
float32 and adds the float32 gradient into float64 ``G``. Per-row losses (softmax, its
log-sum-exp), their sums, the ridge term and H_tau's selection run in float64.

Threads: :func:`mlp_eval` runs blocks of rows, :func:`mlp_local_sgd_round` clients, in
parallel numba threads, each calling BLAS, so BLAS itself should run one thread
(``OPENBLAS_NUM_THREADS=1``, set before NumPy and SciPy load). With a
multithreaded OpenBLAS inside numba's threads the two thread pools fight over the
cores and a round takes several times longer (``benchmarks/mlp.py``).
Results are bit-identical for any number of numba threads; OpenBLAS's own
thread count changes the last bits of its products.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import njit, prange, types
from numba.extending import overload

from . import blas
from .elementary import exp_nonpositive
from .losses import LEAST_SQUARES, SOFTMAX
from .rng import sample_without_replacement
from .threshold import SCRATCH_EXTRA, hard_threshold, hard_threshold_rows

RELU = 0
SWISH = 1
TANH = 2
SIGMOID = 3
ACTIVATIONS = {"relu": RELU, "swish": SWISH, "tanh": TANH, "sigmoid": SIGMOID}

_N = ord("n")
_T = ord("t")
BLAS_N, BLAS_T = _N, _T  # BLAS's "no transpose" and "transpose" flags (kernels.cnn uses them)

# The kernels of a 2-D layer table (a CNN), put here by fedsparse.kernels.cnn when it is
# imported (the kernels package imports it): this module dispatches to them by the table's
# rank without importing them, so neither module imports the other in a cycle.
CNN_KERNELS: dict[str, object] = {}

# Work-tuple positions (see mlp_work): gathered input rows, hidden activations,
# their derivatives, two delta buffers back to back (BLAS's alpha/beta slots follow).
_X0, _A, _E = 0, 1, 3


def n_params(sizes, bias: bool) -> int:
    """Length of the flat parameter vector of an MLP with layer widths ``sizes`` (or of the
    cnn of a 2-D layer table, whose bias is part of the table)."""
    if np.ndim(sizes) == 2:
        return int(sizes[0, 1])  # cnn.H_PARAMS
    sizes = [int(s) for s in sizes]
    return sum(o * i + (o if bias else 0) for i, o in zip(sizes[:-1], sizes[1:], strict=True))


def _work_lengths(sizes, max_batch: int, dense: bool) -> tuple[int, ...]:
    if np.ndim(sizes) == 2:  # a cnn: its input rows are always gathered dense
        return CNN_KERNELS["cnn_work_lengths"](sizes, max_batch)
    sizes = [int(s) for s in sizes]
    if len(sizes) < 2 or min(sizes) <= 0 or max_batch <= 0:
        raise ValueError(f"invalid MLP sizes {sizes} or batch {max_batch}")
    hidden = sum(sizes[1:-1])
    return (
        max_batch * sizes[0] if dense else 0,
        max_batch * hidden,
        max_batch * hidden,
        2 * max_batch * max(sizes[1:]),
    )


def work_dtype(sizes) -> type:
    """The dtype the kernels compute in for ``sizes``: float64, or a layer table's own (a
    float32 network's table, :func:`fedsparse.kernels.cnn.cnn_spec`)."""
    if np.ndim(sizes) == 2:
        return CNN_KERNELS["cnn_dtype"](sizes)
    return np.float64


def mlp_work(sizes, max_batch: int, *, dense: bool = True) -> tuple[np.ndarray, ...]:
    """Work space of :func:`mlp_batch_grad` for one thread and batches of <= ``max_batch`` rows.

    Returns ``(X0, A, D, E)``, 1-D arrays of :func:`work_dtype` (float64 for an
    MLP's widths): the minibatch's rows gathered from dense ``X`` (empty if
    ``dense=False``: CSR data is read in place), hidden activations and their
    derivatives, and two delta buffers. The kernels compute in the dtype
    of this work space (float32: a float32 layer table's, whose ``E`` ends with two
    parameter-length buffers for the float32 copies of theta and of the gradient).
    """
    dtype = work_dtype(sizes)
    return tuple(np.zeros(n, dtype) for n in _work_lengths(sizes, max_batch, dense))


def mlp_thread_work(sizes, max_batch: int, *, dense: bool = True) -> tuple[np.ndarray, ...]:
    """Per-thread work space for :func:`mlp_local_sgd_round`, one slot per possible thread.

    Returns ``(X0, A, D, E, G, scratch)``, each of shape (n_threads, ...): row
    ``t`` of the first four is an :func:`mlp_work` tuple (in :func:`work_dtype`), ``G`` a
    float64 gradient buffer (for callers' own parallel loops: the round applies its steps
    without one) and ``scratch`` the float64 threshold scratch, both sized for
    ``bias=True`` (enough either way).
    """
    n = numba.config.NUMBA_NUM_THREADS
    p = n_params(sizes, True)
    dtype = work_dtype(sizes)
    work = tuple(np.zeros((n, m), dtype) for m in _work_lengths(sizes, max_batch, dense))
    return (*work, np.zeros((n, p)), np.zeros((n, p + SCRATCH_EXTRA)))


# ---------------------------------------------------------------------------
# BLAS and layout helpers


@njit(cache=True)
def _gemm(ta, tb, m, n, k, alpha, A, B, beta, C):
    """Row-major ``C (m x n) = alpha * op(A) @ op(B) + beta * C`` on flat, packed arrays, by
    :mod:`fedsparse.kernels.blas` (``sgemm`` for float32 ``C``, else ``dgemm``).

    ``A``, ``B``, ``C`` are 1-D views starting at each matrix, stored row-major with
    no padding (``A`` is m x k, or k x m if ``ta`` is ord("t"); likewise ``B``).
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


def _as_work(theta, buf):
    """``theta`` if it has ``buf``'s dtype, else ``buf[:len(theta)]`` filled with it
    (rounded to ``buf``'s dtype) (compiled only)."""


@overload(_as_work)
def _as_work_impl(theta, buf):
    if theta.dtype == buf.dtype:
        return lambda theta, buf: theta

    def cast(theta, buf):
        out = buf[: theta.shape[0]]
        for j in range(theta.shape[0]):
            out[j] = theta[j]
        return out

    return cast


def _local_model(theta, ti, E):
    """The model a client's local steps update, starting at ``theta``: its row ``ti`` of
    theta_local if that has the work's dtype (``E``'s), else a float32 copy in the first
    of ``E``'s two parameter-length tail buffers (compiled only)."""


@overload(_local_model)
def _local_model_impl(theta, ti, E):
    if ti.dtype == E.dtype:

        def same(theta, ti, E):
            ti[:] = theta
            return ti

        return same

    def cast(theta, ti, E):
        P = ti.shape[0]
        loc = E[E.shape[0] - 2 * P : E.shape[0] - P]
        for j in range(P):
            loc[j] = theta[j]
        return loc

    return cast


def _copy_if_cast(src, dst):
    """``dst[:] = src`` if they are different arrays of different dtypes; nothing if the
    dtypes agree (then they are one array: see :func:`_local_model`) (compiled only)."""


@overload(_copy_if_cast)
def _copy_if_cast_impl(src, dst):
    if src.dtype == dst.dtype:
        return lambda src, dst: None

    def cast(src, dst):
        for j in range(src.shape[0]):
            dst[j] = src[j]

    return cast


def _grad_into(X, y, rows, theta, sizes, bias, act, loss, off, work, E, G):
    """``G += data_grad`` at ``theta``, computed in the work's dtype (``E``'s); return the
    mean data loss (compiled only). float32 work: theta and the gradient go through the
    two tail buffers of ``E``, and the float32 gradient is added into float64 ``G``."""


@overload(_grad_into)
def _grad_into_impl(X, y, rows, theta, sizes, bias, act, loss, off, work, E, G):
    if theta.dtype == E.dtype and G.dtype == E.dtype:

        def same(X, y, rows, theta, sizes, bias, act, loss, off, work, E, G):
            return _step(X, y, rows, theta, sizes, bias, act, loss, off, work, 1.0, 1.0, G)

        return same

    def cast(X, y, rows, theta, sizes, bias, act, loss, off, work, E, G):
        P = theta.shape[0]
        n = E.shape[0]
        t = _as_work(theta, E[n - 2 * P : n - P])
        g = E[n - P :]
        g[:] = 0.0
        value = _step(X, y, rows, t, sizes, bias, act, loss, off, work, 1.0, 1.0, g)
        for j in range(P):
            G[j] += g[j]
        return value

    return cast


def _offsets(sizes, bias):
    """Start of each layer's ``W_l`` in theta (compiled only; a cnn: ``[0, n_params]``)."""


@overload(_offsets)
def _offsets_impl(sizes, bias):
    if sizes.ndim == 2:

        def table(sizes, bias):
            off = np.zeros(2, dtype=np.int64)
            off[1] = sizes[0, 1]  # cnn.H_PARAMS
            return off

        return table
    return lambda sizes, bias: _mlp_offsets(sizes, bias)


@njit(cache=True)
def _mlp_offsets(sizes, bias):
    """Start of each layer's ``W_l`` in theta; entry L is the total length."""
    n_layers = sizes.shape[0] - 1
    off = np.empty(n_layers + 1, dtype=np.int64)
    off[0] = 0
    for layer in range(n_layers):
        block = sizes[layer + 1] * sizes[layer]
        if bias:
            block += sizes[layer + 1]
        off[layer + 1] = off[layer] + block
    return off


@njit(inline="always")
def _sigmoid(z, e):
    """sigma(z) from ``e = exp(-|z|)``: never overflows."""
    return (1.0 if z >= 0.0 else e) / (1.0 + e)


@njit(cache=True, error_model="numpy")
def _activate(act, A, D):
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
                s = _sigmoid(z, exp_nonpositive(-abs(z)))
                A[j] = s
                D[j] = s * (1.0 - s)
        else:  # SWISH
            for j in range(n):
                z = A[j]
                s = _sigmoid(z, exp_nonpositive(-abs(z)))
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
            A[j] = _sigmoid(z, exp_nonpositive(-abs(z)))
    else:
        for j in range(n):
            z = A[j]
            A[j] = z * _sigmoid(z, exp_nonpositive(-abs(z)))


@njit(cache=True)
def _bias_activate(A, b, width, theta, boff, bias, act, D):
    """``A = act(A + b_l)`` in place and ``D = act'(A + b_l)`` (``b`` rows of ``width``;
    ``D`` may be skipped: pass an empty array)."""
    n = b * width
    if bias:
        for r in range(b):
            a = A[r * width : (r + 1) * width]
            bl = theta[boff : boff + width]
            for o in range(width):
                a[o] += bl[o]
    _activate(act, A[:n], D[:n] if D.shape[0] > 0 else D)


@njit(cache=True)
def _add_bias(Z, b, width, theta, boff):
    for r in range(b):
        out = Z[r * width : (r + 1) * width]
        bl = theta[boff : boff + width]
        for o in range(width):
            out[o] += bl[o]


# ---------------------------------------------------------------------------
# First layer: dense rows through BLAS, CSR rows by sparse loops (dispatch on X's type)


def _gather(X, rows, X0, densify_csr):
    """Copy the rows ``X[rows]`` into ``X0`` (b x d): always for dense ``X``, for CSR only if
    ``densify_csr`` (a cnn's layers read dense rows; an MLP's first layer reads CSR in place)
    (compiled only)."""


@overload(_gather)
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


def _first_forward(X, rows, X0, theta, out, d, Z):
    """``Z (b x out) = X[rows] @ W_1^T`` (compiled only)."""


@overload(_first_forward)
def _first_forward_impl(X, rows, X0, theta, out, d, Z):
    if isinstance(X, types.Array):

        def dense(X, rows, X0, theta, out, d, Z):
            _gemm(_N, _T, rows.shape[0], out, d, 1.0, X0, theta, 0.0, Z)

        return dense

    def csr(X, rows, X0, theta, out, d, Z):
        data, indices, indptr = X
        for r in range(rows.shape[0]):
            lo, hi = indptr[rows[r]], indptr[rows[r] + 1]
            for o in range(out):
                w = theta[o * d : (o + 1) * d]
                s = 0.0
                for k in range(lo, hi):
                    s += data[k] * w[indices[k]]
                Z[r * out + o] = s

    return csr


def _first_backward(X, rows, X0, delta, out, d, alpha, T):
    """``T (out x d) += alpha * delta^T @ X[rows]`` (compiled only)."""


@overload(_first_backward)
def _first_backward_impl(X, rows, X0, delta, out, d, alpha, T):
    if isinstance(X, types.Array):

        def dense(X, rows, X0, delta, out, d, alpha, T):
            _gemm(_T, _N, out, d, rows.shape[0], alpha, delta, X0, 1.0, T)

        return dense

    def csr(X, rows, X0, delta, out, d, alpha, T):
        data, indices, indptr = X
        b = rows.shape[0]
        for o in range(out):
            t = T[o * d : (o + 1) * d]
            for r in range(b):
                c = alpha * delta[r * out + o]
                if c != 0.0:
                    for k in range(indptr[rows[r]], indptr[rows[r] + 1]):
                        t[indices[k]] += c * data[k]

    return csr


def _block_rows(X, lo, hi, rows):
    """Input rows ``lo..hi-1`` as ``X0`` for :func:`_first_forward`: a view of dense ``X``
    (contiguous rows need no copy); for CSR, ``rows[:hi-lo]`` is filled instead."""


@overload(_block_rows)
def _block_rows_impl(X, lo, hi, rows):
    if isinstance(X, types.Array):

        def dense(X, lo, hi, rows):
            d = X.shape[1]
            return X.reshape(X.shape[0] * d)[lo * d : hi * d]

        return dense

    def csr(X, lo, hi, rows):
        for r in range(hi - lo):
            rows[r] = lo + r
        return np.empty(0)

    return csr


# ---------------------------------------------------------------------------
# Forward and backward passes on one minibatch


@njit(cache=True)
def _forward(X, rows, X0, theta, sizes, bias, act, off, A, D, Z):
    """Hidden activations (and derivatives, if ``D`` is non-empty) into ``A``/``D``,
    layer after layer at offsets ``b * sum(h_1..h_{l-1})``; the output scores into ``Z``.
    ``X0`` holds the dense input rows (see :func:`_gather`)."""
    b = rows.shape[0]
    n_layers = sizes.shape[0] - 1
    prev = X0
    pos = 0
    for layer in range(n_layers):
        fan_in, out = sizes[layer], sizes[layer + 1]
        boff = off[layer] + out * fan_in
        last = layer == n_layers - 1
        dst = Z if last else A[pos : pos + b * out]
        if layer == 0:
            _first_forward(X, rows, X0, theta, out, fan_in, dst)
        else:
            _gemm(_N, _T, b, out, fan_in, 1.0, prev, theta[off[layer] :], 0.0, dst)
        if last:
            if bias:
                _add_bias(Z, b, out, theta, boff)
        else:
            Dl = D[pos : pos + b * out] if D.shape[0] > 0 else D
            _bias_activate(dst, b, out, theta, boff, bias, act, Dl)
            prev = dst
            pos += b * out


@njit(cache=True)
def _backward(X, rows, X0, theta, sizes, bias, off, A, D, E, alpha, shrink, T):
    """``T = shrink * T + alpha * grad``, layer by layer, where ``grad`` is the data gradient
    whose output deltas (d loss / d z_L, already divided by b) are in ``E[:b * n_out]``.

    ``T`` may be ``theta`` itself (an in-place SGD step): each layer's delta to the
    layer below is taken with the old ``W_l`` before ``W_l`` changes. BLAS always
    accumulates (beta = 1): OpenBLAS scales C by beta != 1 in a pass of its own that
    took longer than our loop, and beta = 0 costs a zeroing pass too (the callers
    initialise T instead).
    """
    b = rows.shape[0]
    n_layers = sizes.shape[0] - 1
    half = E.shape[0] // 2
    cur = E[:half]
    nxt = E[half:]
    pos = 0  # end of the hidden activations' region
    for layer in range(1, n_layers):
        pos += b * sizes[layer]
    for layer in range(n_layers - 1, -1, -1):
        fan_in, out = sizes[layer], sizes[layer + 1]
        woff = off[layer]
        if layer > 0:
            pos -= b * fan_in
            a_in = A[pos : pos + b * fan_in]
            # delta below: (cur @ W_l) * act'(z_{l-1}), before W_l changes
            _gemm(_N, _N, b, fan_in, out, 1.0, cur, theta[woff:], 0.0, nxt)
        if shrink != 1.0:
            _scale(T[woff : off[layer + 1]], shrink)
        if layer > 0:
            _gemm(_T, _N, out, fan_in, b, alpha, cur, a_in, 1.0, T[woff:])
        else:
            _first_backward(X, rows, X0, cur, out, fan_in, alpha, T[woff:])
        if bias:
            _bias_grad(cur, b, out, alpha, T[woff + out * fan_in : off[layer + 1]])
        if layer > 0:
            d_in = D[pos : pos + b * fan_in]
            for j in range(b * fan_in):
                nxt[j] *= d_in[j]
            cur, nxt = nxt, cur


@njit(cache=True)
def _scale(t, c):
    """``t *= c`` (vectorised)."""
    for j in range(t.shape[0]):
        t[j] *= c


@njit(cache=True)
def _bias_grad(delta, b, out, alpha, t):
    """``t += alpha * (column sums of delta (b x out))``."""
    for r in range(b):
        row = delta[r * out : (r + 1) * out]
        for o in range(out):
            t[o] += alpha * row[o]


# ---------------------------------------------------------------------------
# Output layer: losses on a block of scores


@njit(cache=True)
def _row_loss(z, c, yi, loss, scale, g):
    """Loss of one row with scores ``z`` (length c) and label ``yi``; if ``g`` is non-empty,
    ``g = scale * d loss / d z`` (``g`` may be ``z``). Returns (loss, correct)."""
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


@njit(cache=True)
def _init_ridge(theta, l2, G):
    """``G = l2 * theta`` (the gradient then accumulates onto it); return ``l2/2 ||theta||^2``."""
    sq = 0.0
    for j in range(theta.shape[0]):
        t = theta[j]
        sq += t * t
        G[j] = l2 * t
    return 0.5 * l2 * sq


# ---------------------------------------------------------------------------
# Public kernels


def _check(X0, X_dense, rows, theta, sizes, bias, work):
    """Raise on work space too small for ``rows`` or a parameter of the wrong length
    (compiled only; dispatches on the dimension of ``sizes``)."""


@overload(_check)
def _check_impl(X0, X_dense, rows, theta, sizes, bias, work):
    if sizes.ndim == 2:
        cnn_check = CNN_KERNELS["cnn_check"]

        return lambda X0, X_dense, rows, theta, sizes, bias, work: cnn_check(
            X0, rows, theta, sizes, work
        )
    return lambda X0, X_dense, rows, theta, sizes, bias, work: _mlp_check(
        X0, X_dense, rows, theta, sizes, bias, work
    )


@njit(cache=True)
def _mlp_check(X0, X_dense, rows, theta, sizes, bias, work):
    """:func:`_check` of an MLP."""
    b = rows.shape[0]
    hidden = 0
    widest = 0
    for layer in range(1, sizes.shape[0]):
        widest = max(widest, sizes[layer])
        if layer < sizes.shape[0] - 1:
            hidden += sizes[layer]
    if b < 1:
        raise ValueError("mlp: empty minibatch")
    if theta.shape[0] != _mlp_offsets(sizes, bias)[-1]:
        raise ValueError("mlp: theta has the wrong length for sizes and bias")
    if X_dense and X0.shape[0] < b * sizes[0]:
        raise ValueError("mlp: work space too small for dense rows (mlp_work(..., dense=True))")
    if work[_A].shape[0] < b * hidden or work[_E].shape[0] < 2 * b * widest:
        raise ValueError("mlp: work space too small for this batch (see mlp_work)")


def _is_dense(X):
    """True for a dense ``X`` (compiled only)."""


@overload(_is_dense)
def _is_dense_impl(X):
    value = isinstance(X, types.Array)
    return lambda X: value


def _step(X, y, rows, theta, sizes, bias, act, loss, off, work, alpha, shrink, T):
    """Forward, output deltas and ``T = shrink * T + alpha * data_grad``; return the mean data
    loss over ``rows`` (compiled only: an MLP, or a cnn for a 2-D ``sizes``)."""


@overload(_step)
def _step_impl(X, y, rows, theta, sizes, bias, act, loss, off, work, alpha, shrink, T):
    if sizes.ndim == 2:
        cnn_step = CNN_KERNELS["cnn_step"]

        def table(X, y, rows, theta, sizes, bias, act, loss, off, work, alpha, shrink, T):
            return cnn_step(X, y, rows, theta, sizes, act, loss, work, alpha, shrink, T)

        return table

    def layers(X, y, rows, theta, sizes, bias, act, loss, off, work, alpha, shrink, T):
        return _mlp_step(X, y, rows, theta, sizes, bias, act, loss, off, work, alpha, shrink, T)

    return layers


@njit(cache=True)
def _mlp_step(X, y, rows, theta, sizes, bias, act, loss, off, work, alpha, shrink, T):
    """:func:`_step` of an MLP."""
    X0, A, D, E = work
    b = rows.shape[0]
    c = sizes[-1]
    _gather(X, rows, X0, False)
    Z = E[: b * c]
    _forward(X, rows, X0, theta, sizes, bias, act, off, A, D, Z)
    scale = 1.0 / b
    total = 0.0
    for r in range(b):
        z = Z[r * c : (r + 1) * c]
        total += _row_loss(z, c, y[rows[r]], loss, scale, z)[0]
    _backward(X, rows, X0, theta, sizes, bias, off, A, D, E, alpha, shrink, T)
    return total / b


@njit(cache=True)
def mlp_batch_grad(X, y, rows, theta, sizes, bias, act, loss, l2, G, work):
    """Mean loss over ``rows`` plus ridge, and its gradient written into ``G``.

    Parameters
    ----------
    X : array, shape (n_samples, n_features), or CSR triple
    y : array, shape (n_samples,)
    rows : int64 array, shape (b,), b >= 1
        The sample indices of the minibatch (repeats count repeatedly).
    theta : array, shape (n_params,)
        Flat parameters (see the module docstring for the layout).
    sizes : int64 array, shape (n_layers + 1,)
        ``[d, h_1, ..., h_k, n_out]``.
    bias : bool
    act : int
        One of ``RELU``, ``SWISH``, ``TANH``, ``SIGMOID``.
    loss : int
        One of ``LEAST_SQUARES``, ``LOGISTIC``, ``SOFTMAX``.
    l2 : float
        Adds ``l2/2 * ||theta||^2`` (all parameters, biases included).
    G : array, shape (n_params,)
        Output, overwritten.
    work : tuple from :func:`mlp_work` with ``max_batch >= b``

    Returns
    -------
    float
    """
    _check(work[_X0], _is_dense(X), rows, theta, sizes, bias, work)
    off = _offsets(sizes, bias)
    ridge = _init_ridge(theta, l2, G)
    return _grad_into(X, y, rows, theta, sizes, bias, act, loss, off, work, work[_E], G) + ridge


def mlp_eval(X, y, ptr, thetas, which, sizes, bias, act, loss, block, loss_sum, correct):
    """Data loss and correct predictions of every client, forward only, ``block`` rows at a time.

    Client ``i`` owns rows ``ptr[i]..ptr[i+1]-1`` and is scored with
    ``thetas[which[i]]``. Each client's rows are cut into blocks of ``block`` rows from
    its first row, and the blocks of all clients are dealt out to the threads in turn
    (so one large group, such as a test set scored as one client, still uses every
    thread). Every row's loss is kept and each client's sum is taken in row order
    afterwards, so results do not depend on the number of threads. Memory is
    O(block * widest layer) per thread plus O(1) per row, never O(n_samples * hidden).

    Parameters
    ----------
    X : array, shape (n_samples, n_features), or CSR triple
    y : array, shape (n_samples,)
    ptr : int64 array, shape (n_clients + 1,)
    thetas : array, shape (n_models, n_params)
    which : int64 array, shape (n_clients,)
    sizes, bias, act, loss
        As in :func:`mlp_batch_grad`.
    block : int
        Rows per forward pass (>= 1).
    loss_sum : array, shape (n_clients,)
        Output: sum over the client's rows of the data loss (no ridge term).
    correct : int64 array, shape (n_clients,)
        Output: correctly classified rows (softmax: argmax, ties to the lowest
        index; logistic: sign of z, z > 0 -> +1; least squares: 0).
    """
    if np.ndim(sizes) == 2:
        CNN_KERNELS["cnn_eval"](
            X, y, ptr, thetas, which, sizes, act, loss, block, loss_sum, correct
        )
        return
    lanes = numba.get_num_threads()  # read here: inside, it would stop numba's caching
    _eval(X, y, ptr, thetas, which, sizes, bias, act, loss, block, loss_sum, correct, lanes)


@njit(parallel=True, cache=True)
def _eval(X, y, ptr, thetas, which, sizes, bias, act, loss, block, loss_sum, correct, lanes):
    """:func:`mlp_eval` with its blocks dealt out to ``lanes`` (>= 1) loop iterations."""
    n_clients = ptr.shape[0] - 1
    off = _offsets(sizes, bias)
    c = sizes[-1]
    widest = 0
    for layer in range(1, sizes.shape[0]):
        widest = max(widest, sizes[layer])
    bb = max(1, block)
    first = np.zeros(n_clients + 1, dtype=np.int64)  # client i's blocks: first[i]..first[i+1]-1
    for i in range(n_clients):
        first[i + 1] = first[i] + (ptr[i + 1] - ptr[i] + bb - 1) // bb
    n_blocks = first[n_clients]
    base = ptr[0]
    values = np.empty(ptr[n_clients] - base)
    hits = np.zeros(ptr[n_clients] - base, dtype=np.bool_)
    lanes = max(1, min(lanes, n_blocks))
    no_d = np.empty(0)
    for lane in prange(lanes):
        # two ping-pong halves: hidden layers alternate, the scores land in either
        buf = np.empty(2 * bb * widest)
        rows = np.empty(bb, dtype=np.int64)
        i = 0
        for blk in range(lane, n_blocks, lanes):
            while first[i + 1] <= blk:
                i += 1
            start = ptr[i] + (blk - first[i]) * bb
            stop = min(start + bb, ptr[i + 1])
            n = stop - start
            X0 = _block_rows(X, start, stop, rows)
            Z = _forward_eval(X, rows[:n], X0, thetas[which[i]], sizes, bias, act, off, buf)
            for r in range(n):
                value, ok = _row_loss(Z[r * c : (r + 1) * c], c, y[start + r], loss, 1.0, no_d)
                values[start - base + r] = value
                hits[start - base + r] = ok
    for i in range(n_clients):
        total = 0.0
        good = 0
        for j in range(ptr[i] - base, ptr[i + 1] - base):
            total += values[j]
            good += hits[j]
        loss_sum[i] = total
        correct[i] = good


@njit(cache=True)
def _forward_eval(X, rows, X0, theta, sizes, bias, act, off, buf):
    """Forward pass keeping only the current layer (two halves of ``buf``); return the scores."""
    b = rows.shape[0]
    n_layers = sizes.shape[0] - 1
    half = buf.shape[0] // 2
    no_d = np.empty(0)
    prev = X0
    dst = buf[:0]
    for layer in range(n_layers):
        fan_in, out = sizes[layer], sizes[layer + 1]
        dst = buf[(layer % 2) * half : (layer % 2) * half + b * out]
        if layer == 0:
            _first_forward(X, rows, X0, theta, out, fan_in, dst)
        else:
            _gemm(_N, _T, b, out, fan_in, 1.0, prev, theta[off[layer] :], 0.0, dst)
        boff = off[layer] + out * fan_in
        if layer == n_layers - 1:
            if bias:
                _add_bias(dst, b, out, theta, boff)
        else:
            _bias_activate(dst, b, out, theta, boff, bias, act, no_d)
        prev = dst
    return dst


@njit(parallel=True, cache=True)
def mlp_local_sgd_round(
    X,
    y,
    ptr,
    theta,
    theta_local,
    perm,
    rng,
    steps,
    batch,
    stepsize,
    sizes,
    bias,
    act,
    loss,
    l2,
    tau_local,
    work,
    layer_bounds=None,
):
    """Run ``steps`` local SGD steps on every client's MLP, starting from ``theta``.

    The MLP twin of :func:`fedsparse.kernels.local_sgd_round`: client ``i`` owns
    rows ``ptr[i]..ptr[i+1]-1``; each step draws ``min(batch, n_i)`` rows without
    replacement (``batch <= 0``: all rows, no randomness), takes
    ``theta_i -= stepsize * grad`` (grad including ``l2 * theta_i``) and, if
    ``tau_local > 0``, keeps the ``tau_local`` entries of ``theta_i`` largest in
    magnitude (FedIter-HT). The step is applied inside the backward pass:
    ``theta_i = (1 - stepsize * l2) * theta_i - stepsize * data_grad``, one
    BLAS update per layer and no separate gradient buffer pass.

    Parameters
    ----------
    theta : array, shape (n_params,)
        The global model broadcast this round.
    theta_local : array, shape (n_clients, n_params)
        Output: each client's model at the end of the round.
    perm : int64 array, shape (n_samples,)
        Per-client row permutations, persistent across rounds.
    rng : uint64 array, shape (n_clients,)
        Per-client random states, advanced in place.
    work : tuple from :func:`mlp_thread_work` with ``max_batch >= min(batch, max n_i)``
    layer_bounds : int64 array, optional
        Segment bounds ``[0, e_1, ..., n_params]``: the local H_tau keeps ``tau_local``
        entries in each segment (``threshold: per_layer``); omitted: one segment.
    Other parameters as in :func:`mlp_batch_grad`.
    """
    n_clients = ptr.shape[0] - 1
    P = theta.shape[0]
    off = _offsets(sizes, bias)
    X0, A, D, E, G, scratch = work
    largest = 0
    for i in range(n_clients):
        largest = max(largest, ptr[i + 1] - ptr[i])
    if batch > 0:
        largest = min(largest, batch)
    if theta_local.shape[1] != P or scratch.shape[1] < P:
        raise ValueError("mlp: theta_local or the work space does not match theta")
    if largest > 0:
        _check(
            X0[0],
            _is_dense(X),
            perm[:largest],
            theta,
            sizes,
            bias,
            (X0[0], A[0], D[0], E[0]),
        )
    keep = 1.0 - stepsize * l2
    for i in prange(n_clients):
        t = numba.get_thread_id()
        lo = ptr[i]
        n = ptr[i + 1] - lo
        b = n if batch <= 0 or batch >= n else batch
        ti = theta_local[i]
        # float32 work: the steps update a float32 copy, written back into ti at the end
        loc = _local_model(theta, ti, E[t])
        wt = (X0[t], A[t], D[t], E[t])
        for _ in range(steps):
            if b == 0:  # no rows: the ridge term alone, as local_sgd_round does
                for j in range(P):
                    loc[j] *= keep
            else:
                if b < n:
                    sample_without_replacement(perm, lo, n, b, rng, i)
                _step(
                    X,
                    y,
                    perm[lo : lo + b],
                    loc,
                    sizes,
                    bias,
                    act,
                    loss,
                    off,
                    wt,
                    -stepsize,
                    keep,
                    loc,
                )
            if tau_local > 0:
                # selection on float64 values (float32 ones are exact in float64)
                _copy_if_cast(loc, ti)
                if layer_bounds is None:
                    hard_threshold_rows(ti.reshape((1, P)), tau_local, scratch[t])
                else:
                    for s in range(layer_bounds.shape[0] - 1):
                        seg = ti[layer_bounds[s] : layer_bounds[s + 1]]
                        hard_threshold(seg, tau_local, scratch[t])
                _copy_if_cast(ti, loc)
        _copy_if_cast(loc, ti)


# The building blocks kernels.cnn shares with these kernels, under public names.
gemm, add_bias, bias_activate, bias_grad = _gemm, _add_bias, _bias_activate, _bias_grad
row_loss, scale, as_work, gather = _row_loss, _scale, _as_work, _gather
