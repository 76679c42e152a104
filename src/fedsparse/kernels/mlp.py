"""Multilayer perceptrons: the forward and backward passes of a minibatch, and blocked
forward-only evaluation.

The parameter is one flat float64 vector ``theta``: for each layer ``l`` in order,
``W_l`` of shape (out_l, in_l) row-major, then ``b_l`` (out_l) if ``bias``.
``sizes = [d, h_1, ..., h_k, n_out]`` (int64; ``n_out`` = 1 for least squares and
logistic, the number of classes for softmax). Forward: ``z_l = W_l a_{l-1} + b_l``,
``a_l = act(z_l)`` on hidden layers; the last ``z`` goes into the loss (the
per-sample losses of :mod:`fedsparse.kernels.losses`). No hidden layer is a
linear model with the same layout.

A minibatch is handled as matrices of ``b`` rows, so every layer product is one
BLAS ``dgemm`` (:func:`fedsparse.kernels.layers.gemm`, with ``alpha`` and ``beta`` so
that gradients accumulate where they land: into ``G``, or straight into ``theta`` for an
SGD step); only the first layer of CSR data uses sparse loops.

These kernels take an MLP's 1-D ``sizes`` only; the public kernels that take either an
MLP's widths or a cnn's layer table (``mlp_batch_grad``, ``mlp_local_sgd_round``,
``mlp_eval``, ``mlp_work`` ...) are :mod:`fedsparse.kernels.network`'s. A float32 MLP
reaches the kernels as a layer table of dense layers (:mod:`fedsparse.kernels.cnn`), so
everything here computes in float64.
"""

from __future__ import annotations

import numpy as np
from numba import njit, prange, types
from numba.extending import overload

from .layers import BLAS_N as _N
from .layers import BLAS_T as _T
from .layers import WORK_A, WORK_E
from .layers import add_bias as _add_bias
from .layers import bias_activate as _bias_activate
from .layers import bias_grad as _bias_grad
from .layers import gather as _gather
from .layers import gemm as _gemm
from .layers import row_loss as _row_loss
from .layers import scale as _scale


def mlp_n_params(sizes, bias: bool) -> int:
    """Length of the flat parameter vector of an MLP with layer widths ``sizes``."""
    sizes = [int(s) for s in sizes]
    return sum(o * i + (o if bias else 0) for i, o in zip(sizes[:-1], sizes[1:], strict=True))


def mlp_work_lengths(sizes, max_batch: int, dense: bool) -> tuple[int, ...]:
    """Lengths of the work tuple ``(X0, A, D, E)`` for batches of <= ``max_batch`` rows:
    the gathered dense input rows (none if not ``dense``: CSR rows are read in place),
    hidden activations, their derivatives, two delta buffers of the widest layer."""
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


@njit(cache=True)
def mlp_offsets(sizes, bias):
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


# ---------------------------------------------------------------------------
# First layer: dense rows through BLAS, CSR rows by sparse loops (dispatch on X's type)


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
    ``X0`` holds the dense input rows (see :func:`fedsparse.kernels.layers.gather`)."""
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
def _backward(X, rows, theta, sizes, bias, off, work, alpha, shrink, T):
    """``T = shrink * T + alpha * grad``, layer by layer, where ``grad`` is the data gradient
    whose output deltas (d loss / d z_L, already divided by b) are in ``E[:b * n_out]`` of the
    work tuple ``work = (X0, A, D, E)``.

    ``T`` may be ``theta`` itself (an in-place SGD step): each layer's delta to the
    layer below is taken with the old ``W_l`` before ``W_l`` changes. BLAS always
    accumulates (beta = 1): OpenBLAS scales C by beta != 1 in a pass of its own that
    took longer than our loop, and beta = 0 costs a zeroing pass too (the callers
    initialise T instead).
    """
    X0, A, D, E = work
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


# ---------------------------------------------------------------------------
# One minibatch, and blocked evaluation


@njit(cache=True)
def mlp_check(X0, X_dense, rows, theta, sizes, bias, work):
    """Raise on work space too small for ``rows`` or a parameter of the wrong length
    (``X_dense``: the rows are gathered into ``X0``)."""
    b = rows.shape[0]
    hidden = 0
    widest = 0
    for layer in range(1, sizes.shape[0]):
        widest = max(widest, sizes[layer])
        if layer < sizes.shape[0] - 1:
            hidden += sizes[layer]
    if b < 1:
        raise ValueError("mlp: empty minibatch")
    if theta.shape[0] != mlp_offsets(sizes, bias)[-1]:
        raise ValueError("mlp: theta has the wrong length for sizes and bias")
    if X_dense and X0.shape[0] < b * sizes[0]:
        raise ValueError("mlp: work space too small for dense rows (mlp_work(..., dense=True))")
    if work[WORK_A].shape[0] < b * hidden or work[WORK_E].shape[0] < 2 * b * widest:
        raise ValueError("mlp: work space too small for this batch (see mlp_work)")


@njit(cache=True)
def mlp_step(X, y, rows, theta, sizes, bias, act, loss, off, work, update):
    """Forward, output deltas and ``T = shrink * T + alpha * data_grad``; return the mean data
    loss over ``rows``. ``off`` is :func:`mlp_offsets`'s, ``work`` a float64 work tuple
    (:func:`mlp_work_lengths`), ``update`` the triple ``(alpha, shrink, T)``; ``T`` may be
    ``theta`` (an SGD step in place)."""
    alpha, shrink, T = update
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
    _backward(X, rows, theta, sizes, bias, off, work, alpha, shrink, T)
    return total / b


@njit(parallel=True, cache=True)
def mlp_eval_blocks(X, y, ptr, thetas, which, sizes, bias, act, loss, blocking, loss_sum, correct):
    """Data loss and correct predictions of every client, ``block`` rows at a time, the
    blocks dealt out to ``lanes`` (>= 1) loop iterations, ``blocking = (block, lanes)`` (the
    contract of :func:`fedsparse.kernels.network.mlp_eval`)."""
    block, lanes = blocking
    n_clients = ptr.shape[0] - 1
    off = mlp_offsets(sizes, bias)
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
