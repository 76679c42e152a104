"""Convolutional networks: minibatch gradients, local SGD steps and blocked evaluation.

A cnn reaches the network kernels (:mod:`fedsparse.kernels.network`) as their ``sizes``
argument, but two-dimensional: the int64 layer table of :func:`cnn_spec`. Those kernels
dispatch on that dimension to the ones here (:func:`cnn_step`, :func:`cnn_check`,
:func:`cnn_eval`, :func:`cnn_work_lengths`, :func:`cnn_dtype`), so every algorithm that runs
on an MLP (``mlp_batch_grad``, ``mlp_local_sgd_round``, ``mlp_eval``, ``mlp_thread_work``
...) runs on a cnn unchanged.

Layout: one sample's feature map is (h, w, c) row-major ("HWC"), the samples of a
batch back to back; the first layer reads the input rows with the strides of their
order (CHW or HWC). A convolution is ``im2col`` + one BLAS ``dgemm`` per chunk of
samples: the patches of a chunk, ``(chunk * oh * ow) x (k * k * c_in)``, times
``W^T`` (``W`` is (c_out, k, k, c_in)), straight into the (oh, ow, c_out) outputs;
chunks keep the patch matrix near ``COLS_BUDGET`` values whatever the batch. Backward:
``dW += delta^T @ patches`` and ``d patches = delta @ W`` added back into the input's
delta (``col2im``). Pools tile their input (size = stride); max pools keep each
output's winner (the first maximum in the window) in ``D``. Dense layers, activations and
the loss are the building blocks the MLP uses too (:mod:`fedsparse.kernels.layers`).

Work space (the network kernels' 4-tuple, other lengths, see :func:`cnn_work_lengths`):
``X0`` the batch's input rows (dense even for CSR data, which is scattered into it),
``A``/``D`` every hidden layer's outputs and activation derivatives (max pools: winners),
``E`` two delta buffers of ``b * widest`` values then two patch buffers. Evaluation
(:func:`cnn_eval`) keeps only two feature maps of a block of rows per thread.
Threads: as the MLP kernels (clients or blocks per numba thread, BLAS on one thread,
results independent of the number of threads).

float32: a table built with ``dtype="float32"`` (header ``H_F32``) gets float32 work space
from ``mlp_work``/``mlp_thread_work``, and every kernel here then runs in float32 (the
input rows are rounded as they are gathered into ``X0``; products by ``sgemm``), with
``E`` two parameter-length buffers longer (the float32 copies of theta and of a gradient,
see :mod:`fedsparse.kernels.network`). An MLP in float32 is such a table of dense layers.
Evaluation converts each model to float32 once per thread; losses and sums stay float64.
"""

from __future__ import annotations

import numba
import numpy as np
from numba import njit, prange

from .layers import BLAS_N as _N
from .layers import BLAS_T as _T
from .layers import add_bias as _add_bias
from .layers import as_work as _as_work
from .layers import bias_activate as _bias_activate
from .layers import bias_grad as _bias_grad
from .layers import gather as _gather
from .layers import gemm as _gemm
from .layers import row_loss as _row_loss
from .layers import scale as _scale

CONV, MAXPOOL, AVGPOOL, DENSE = 0, 1, 2, 3
_KIND_CODES = {"conv": CONV, "max": MAXPOOL, "avg": AVGPOOL, "dense": DENSE}
# Columns of a layer row (rows 1..L of the table): kind, input and output (h, w, c);
# kernel or pool size, stride, top and left padding, where W and b start in theta (-1:
# none), activation after it; strides (row, column, channel) of its input; where its
# outputs start in a sample's hidden block (-1: the scores), samples per im2col chunk,
# input and output values per sample.
C_KIND, C_IH, C_IW, C_IC, C_OH, C_OW, C_OC = range(7)
C_K, C_S, C_PT, C_PL, C_WOFF, C_BOFF, C_ACT = range(7, 14)
C_SH, C_SW, C_SC, C_AOFF, C_CHUNK, C_ISZ, C_OSZ = range(14, 21)
N_COLS = 21
# Header row 0: layers, parameters, input length, outputs, bias, widest map, hidden
# total per sample, patch buffer length, float32 (1) or float64 (0).
H_LAYERS, H_PARAMS, H_IN, H_OUT, H_BIAS, H_WIDEST, H_HIDDEN, H_COLS, H_F32 = range(9)
DTYPES = {"float64": np.float64, "float32": np.float32}
# Values of one chunk's patch matrix (2 MB; 1 MB in float32, where twice the values measured
# no faster): the per-sample patches of 5x5x32 on 14x14 are 1.25 MB, so a chunk is one
# sample there and 13 samples of a 28x28x1 first layer.
COLS_BUDGET = 1 << 18
EVAL_FEATURES = 1 << 20  # values per thread's feature-map buffer in evaluation (8 MB)


def cnn_spec(layers, input_order: str, bias: bool, dtype: str = "float64") -> np.ndarray:
    """The kernels' layer table of resolved layers (:class:`fedsparse.objective.model.Layer`, the
    dense output layer last) on input rows in ``input_order`` (chw | hwc), computed in ``dtype``
    (float64 | float32)."""
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be float64 or float32, got {dtype!r}")
    L = len(layers)
    spec = np.zeros((L + 1, N_COLS), dtype=np.int64)
    pos = hidden = widest = cols = 0
    for n, layer in enumerate(layers):
        row = spec[n + 1]
        (ih, iw, ic), (oh, ow, oc) = layer.ins, layer.outs
        row[C_KIND : C_OC + 1] = (_KIND_CODES[layer.kind], *layer.ins, *layer.outs)
        row[[C_K, C_S, C_PT, C_PL]] = layer.size, layer.stride, *layer.pad
        row[C_ACT] = int(layer.act)
        if n == 0 and input_order == "chw":
            row[[C_SH, C_SW, C_SC]] = iw, 1, ih * iw
        else:
            row[[C_SH, C_SW, C_SC]] = iw * ic, ic, 1
        row[C_ISZ], row[C_OSZ] = ih * iw * ic, oh * ow * oc
        row[C_WOFF] = row[C_BOFF] = -1
        if layer.params is not None:
            out, fan_in = layer.params
            row[C_WOFF] = pos
            pos += out * fan_in
            if bias:
                row[C_BOFF] = pos
                pos += out
        if n < L - 1:
            row[C_AOFF] = hidden
            hidden += oh * ow * oc
        else:
            row[C_AOFF] = -1
        widest = max(widest, oh * ow * oc)
        if layer.kind == "conv":
            per_sample = oh * ow * layer.size * layer.size * ic
            row[C_CHUNK] = max(1, COLS_BUDGET // per_sample)
            cols = max(cols, row[C_CHUNK] * per_sample)
    f32 = int(dtype == "float32")
    if f32 and max((int(r[C_ISZ]) for r in spec[1:] if r[C_KIND] == MAXPOOL), default=0) > 1 << 24:
        # max pools keep their winners' offsets in D, a float32 array here: exact below 2**24
        raise ValueError("float32: a max pool's input has more than 2**24 values per sample")
    spec[0, : H_F32 + 1] = (
        L,
        pos,
        spec[1, C_ISZ],
        spec[L, C_OSZ],
        int(bias),
        widest,
        hidden,
        cols,
        f32,
    )
    return spec


def cnn_dtype(spec: np.ndarray) -> type:
    """The dtype the kernels compute in for this table (np.float32 or np.float64)."""
    return np.float32 if spec[0, H_F32] else np.float64


def cnn_work_lengths(spec: np.ndarray, max_batch: int) -> tuple[int, ...]:
    """Lengths of (X0, A, D, E) for batches of <= ``max_batch`` rows."""
    h = spec[0]
    b = int(max_batch)
    return (
        b * int(h[H_IN]),
        b * int(h[H_HIDDEN]),
        b * int(h[H_HIDDEN]),
        2 * b * int(h[H_WIDEST]) + 2 * int(h[H_COLS]) + 2 * int(h[H_PARAMS]) * int(h[H_F32]),
    )


# ---------------------------------------------------------------------------
# Convolution and pooling on one layer


@njit(cache=True)
def im2col(inp, row, r0, n, cols):
    """Patches of samples ``r0..r0+n-1`` of the layer input ``inp`` (samples of ``row[C_ISZ]``
    values read with strides ``row[C_SH], row[C_SW], row[C_SC]``) into ``cols``, one row of
    ``k * k * c_in`` values (row, column, channel of the patch) per output pixel; zeros
    where the patch lies in the padding. A patch row's in-bounds values are one contiguous
    run of the input when its (column, channel) order is the patch's (HWC, or one channel
    read along rows), and are copied as such."""
    ih, iw, ic, oh, ow = row[C_IH], row[C_IW], row[C_IC], row[C_OH], row[C_OW]
    k, s, pt, pl = row[C_K], row[C_S], row[C_PT], row[C_PL]
    sh, sw, sc, isz = row[C_SH], row[C_SW], row[C_SC], row[C_ISZ]
    kkc = k * k * ic
    contiguous = (sc == 1 and sw == ic) or (ic == 1 and sw == 1)
    j = 0
    for r in range(r0, r0 + n):
        base = r * isz
        for oy in range(oh):
            for ox in range(ow):
                at0 = j * kkc
                j += 1
                ix0 = ox * s - pl
                lo = max(0, -ix0)  # the patch's first and last in-bounds columns
                hi = min(k, iw - ix0)
                for ky in range(k):
                    iy = oy * s - pt + ky
                    at = at0 + ky * k * ic
                    if iy < 0 or iy >= ih or lo >= hi:
                        cols[at : at + k * ic] = 0.0
                        continue
                    if lo > 0:
                        cols[at : at + lo * ic] = 0.0
                    if hi < k:
                        cols[at + hi * ic : at + k * ic] = 0.0
                    src = base + iy * sh + (ix0 + lo) * sw
                    at += lo * ic
                    if contiguous:
                        m = (hi - lo) * ic
                        cols[at : at + m] = inp[src : src + m]
                    else:
                        for kx in range(hi - lo):
                            for c in range(ic):
                                cols[at + kx * ic + c] = inp[src + kx * sw + c * sc]


@njit(cache=True)
def col2im(dcols, row, r0, n, dinp):
    """The adjoint of :func:`im2col` on an HWC input: add each patch value of ``dcols`` into
    ``dinp`` where it was read from (padding dropped)."""
    ih, iw, ic, oh, ow = row[C_IH], row[C_IW], row[C_IC], row[C_OH], row[C_OW]
    k, s, pt, pl = row[C_K], row[C_S], row[C_PT], row[C_PL]
    isz = row[C_ISZ]
    kkc = k * k * ic
    j = 0
    for r in range(r0, r0 + n):
        base = r * isz
        for oy in range(oh):
            for ox in range(ow):
                src = dcols[j * kkc : (j + 1) * kkc]
                j += 1
                for ky in range(k):
                    iy = oy * s - pt + ky
                    if iy < 0 or iy >= ih:
                        continue
                    for kx in range(k):
                        ix = ox * s - pl + kx
                        if ix < 0 or ix >= iw:
                            continue
                        at = (ky * k + kx) * ic
                        dst = dinp[base + (iy * iw + ix) * ic : base + (iy * iw + ix + 1) * ic]
                        for c in range(ic):
                            dst[c] += src[at + c]


@njit(cache=True)
def _conv_forward(inp, row, theta, b, out, cols):
    """``out (b*oh*ow x c_out) = patches @ W^T``, chunk by chunk (no bias, no activation)."""
    P = row[C_OH] * row[C_OW]
    oc = row[C_OC]
    kkc = row[C_K] * row[C_K] * row[C_IC]
    chunk = row[C_CHUNK]
    w = theta[row[C_WOFF] :]
    for r0 in range(0, b, chunk):
        n = min(chunk, b - r0)
        im2col(inp, row, r0, n, cols)
        _gemm(_N, _T, n * P, oc, kkc, 1.0, cols, w, 0.0, out[r0 * P * oc :])


@njit(cache=True)
def _pool_forward(inp, row, b, out, D):
    """Max or average over each size x size tile; ``D`` (if non-empty) gets a max pool's
    winners, as offsets into the sample's input (the first maximum in row-major order)."""
    ic, oh, ow = row[C_IC], row[C_OH], row[C_OW]
    q = row[C_K]
    sh, sw, sc, isz, osz = row[C_SH], row[C_SW], row[C_SC], row[C_ISZ], row[C_OSZ]
    is_max = row[C_KIND] == MAXPOOL
    keep = D.shape[0] > 0
    inv = 1.0 / (q * q)
    for r in range(b):
        base = r * isz
        for oy in range(oh):
            for ox in range(ow):
                o = r * osz + (oy * ow + ox) * ic
                for c in range(ic):
                    first = base + (oy * q) * sh + (ox * q) * sw + c * sc
                    if is_max:
                        best = inp[first]
                        arg = first
                        for ky in range(q):
                            for kx in range(q):
                                at = first + ky * sh + kx * sw
                                v = inp[at]
                                if v > best:
                                    best = v
                                    arg = at
                        out[o + c] = best
                        if keep:
                            D[o + c] = arg - base
                    else:
                        total = 0.0
                        for ky in range(q):
                            for kx in range(q):
                                total += inp[first + ky * sh + kx * sw]
                        out[o + c] = total * inv


@njit(cache=True)
def _pool_backward(row, b, delta, D, dinp):
    """``dinp`` (zeroed here) = the adjoint of :func:`_pool_forward` applied to ``delta``
    (an HWC input: only layers after the first need it)."""
    iw, ic, oh, ow = row[C_IW], row[C_IC], row[C_OH], row[C_OW]
    q = row[C_K]
    isz, osz = row[C_ISZ], row[C_OSZ]
    dinp[: b * isz] = 0.0
    if row[C_KIND] == MAXPOOL:
        for r in range(b):
            for j in range(osz):
                dinp[r * isz + np.int64(D[r * osz + j])] += delta[r * osz + j]
        return
    inv = 1.0 / (q * q)
    for r in range(b):
        for oy in range(oh):
            for ox in range(ow):
                o = r * osz + (oy * ow + ox) * ic
                for ky in range(q):
                    for kx in range(q):
                        at = r * isz + ((oy * q + ky) * iw + ox * q + kx) * ic
                        for c in range(ic):
                            dinp[at + c] += delta[o + c] * inv


# ---------------------------------------------------------------------------
# Whole network


@njit(cache=True)
def _layer_forward(spec, n, inp, theta, b, dst, Dl, cols, act):
    """Layer ``n`` (1-based row of ``spec``) on ``b`` samples: ``dst`` = its outputs, ``Dl``
    (if non-empty) the activation derivatives or max-pool winners."""
    row = spec[n]
    kind = row[C_KIND]
    oc = row[C_OC]
    bias = spec[0, H_BIAS] != 0
    if kind == CONV or kind == DENSE:
        if kind == CONV:
            _conv_forward(inp, row, theta, b, dst, cols)
            m = b * row[C_OH] * row[C_OW]
        else:
            _gemm(_N, _T, b, oc, row[C_IC], 1.0, inp, theta[row[C_WOFF] :], 0.0, dst)
            m = b
        if row[C_ACT] != 0:
            _bias_activate(dst, m, oc, theta, row[C_BOFF], bias, act, Dl)
        elif bias:
            _add_bias(dst, m, oc, theta, row[C_BOFF])
    else:
        _pool_forward(inp, row, b, dst, Dl)


@njit(cache=True)
def _forward_train(X0, spec, theta, b, act, A, D, Z, cols):
    """Every hidden layer's outputs into ``A`` (and derivatives/winners into ``D``), layer
    ``n``'s at ``b * row[C_AOFF]``; the output scores into ``Z``."""
    L = spec[0, H_LAYERS]
    inp = X0
    for n in range(1, L + 1):
        row = spec[n]
        if n == L:
            _layer_forward(spec, n, inp, theta, b, Z, Z[:0], cols, act)
        else:
            lo = b * row[C_AOFF]
            hi = lo + b * row[C_OSZ]
            _layer_forward(spec, n, inp, theta, b, A[lo:hi], D[lo:hi], cols, act)
            inp = A[lo:hi]


@njit(cache=True)
def _backward(X0, spec, theta, b, A, D, E, cols, dcols, alpha, shrink, T):
    """``T = shrink * T + alpha * d(loss)/d(theta)`` given the output deltas in ``E[:b*c]``,
    layer by layer from the top; each layer's delta to the layer below is taken before its
    own weights change (``T`` may be ``theta``: the SGD step in place)."""
    L = spec[0, H_LAYERS]
    half = b * spec[0, H_WIDEST]
    cur = E[:half]
    nxt = E[half : 2 * half]
    bias = spec[0, H_BIAS] != 0
    for n in range(L, 0, -1):
        row = spec[n]
        kind = row[C_KIND]
        below = n > 1
        prev = spec[n - 1]  # the header row for the first layer (unused there)
        inp = X0
        if below:
            lo = b * prev[C_AOFF]
            inp = A[lo : lo + b * prev[C_OSZ]]
        oc = row[C_OC]
        if kind == DENSE:
            fan_in = row[C_IC]
            if below:
                _gemm(_N, _N, b, fan_in, oc, 1.0, cur, theta[row[C_WOFF] :], 0.0, nxt)
            _shrink(row, oc * fan_in, shrink, bias, T)
            _gemm(_T, _N, oc, fan_in, b, alpha, cur, inp, 1.0, T[row[C_WOFF] :])
            if bias:
                _bias_grad(cur, b, oc, alpha, T[row[C_BOFF] : row[C_BOFF] + oc])
        elif kind == CONV:
            P = row[C_OH] * row[C_OW]
            kkc = row[C_K] * row[C_K] * row[C_IC]
            chunk = row[C_CHUNK]
            w = theta[row[C_WOFF] :]
            if below:
                nxt[: b * row[C_ISZ]] = 0.0
                for r0 in range(0, b, chunk):
                    m = min(chunk, b - r0)
                    _gemm(_N, _N, m * P, kkc, oc, 1.0, cur[r0 * P * oc :], w, 0.0, dcols)
                    col2im(dcols, row, r0, m, nxt)
            _shrink(row, oc * kkc, shrink, bias, T)
            for r0 in range(0, b, chunk):
                m = min(chunk, b - r0)
                im2col(inp, row, r0, m, cols)
                _gemm(
                    _T,
                    _N,
                    oc,
                    kkc,
                    m * P,
                    alpha,
                    cur[r0 * P * oc :],
                    cols,
                    1.0,
                    T[row[C_WOFF] :],
                )
            if bias:
                _bias_grad(cur, b * P, oc, alpha, T[row[C_BOFF] : row[C_BOFF] + oc])
        elif below:  # a pool (never the last layer); its winners are in D
            _pool_backward(row, b, cur, D[b * row[C_AOFF] :], nxt)
        if below:
            if prev[C_ACT] != 0:
                lo = b * prev[C_AOFF]
                d_in = D[lo : lo + b * prev[C_OSZ]]
                for j in range(b * prev[C_OSZ]):
                    nxt[j] *= d_in[j]
            cur, nxt = nxt, cur


@njit(cache=True)
def _shrink(row, n_weights, shrink, bias, T):
    """``T *= shrink`` over the layer's weights and bias."""
    if shrink != 1.0:
        end = row[C_WOFF] + n_weights + (row[C_OC] if bias else 0)
        _scale(T[row[C_WOFF] : end], shrink)


@njit(cache=True)
def cnn_step(X, y, rows, theta, spec, act, loss, work, alpha, shrink, T):
    """Forward, output deltas and ``T = shrink * T + alpha * data_grad``; return the mean
    data loss over ``rows`` (the cnn twin of :func:`fedsparse.kernels.mlp.mlp_step`)."""
    X0, A, D, E = work
    b = rows.shape[0]
    c = spec[0, H_OUT]
    half = b * spec[0, H_WIDEST]
    ncols = spec[0, H_COLS]
    cols = E[2 * half : 2 * half + ncols]
    dcols = E[2 * half + ncols : 2 * half + 2 * ncols]
    _gather(X, rows, X0[: b * spec[0, H_IN]], True)
    Z = E[: b * c]
    _forward_train(X0, spec, theta, b, act, A, D, Z, cols)
    scale = 1.0 / b
    total = 0.0
    for r in range(b):
        z = Z[r * c : (r + 1) * c]
        total += _row_loss(z, c, y[rows[r]], loss, scale, z)[0]
    _backward(X0, spec, theta, b, A, D, E, cols, dcols, alpha, shrink, T)
    return total / b


@njit(cache=True)
def cnn_check(X0, rows, theta, spec, work):
    """Raise on work space too small for ``rows`` or a parameter of the wrong length."""
    b = rows.shape[0]
    h = spec[0]
    if b < 1:
        raise ValueError("cnn: empty minibatch")
    if theta.shape[0] != h[H_PARAMS]:
        raise ValueError("cnn: theta has the wrong length for the layer table")
    if (
        X0.shape[0] < b * h[H_IN]
        or work[1].shape[0] < b * h[H_HIDDEN]
        or work[2].shape[0] < b * h[H_HIDDEN]
        or work[3].shape[0] < 2 * b * h[H_WIDEST] + 2 * h[H_COLS] + 2 * h[H_PARAMS] * h[H_F32]
    ):
        raise ValueError("cnn: work space too small for this batch (see mlp_work)")


def cnn_eval(X, y, ptr, thetas, which, spec, act, loss, block, loss_sum, correct):
    """:func:`fedsparse.kernels.network.mlp_eval` for a cnn: blocks of at most ``block`` rows (fewer
    where a block's widest feature map would pass ``EVAL_FEATURES`` values), forward only."""
    widest = int(spec[0, H_WIDEST])
    bb = max(1, min(int(block), EVAL_FEATURES // max(widest, 1)))
    lanes = numba.get_num_threads()
    dtype = cnn_dtype(spec)
    # a model of another dtype is converted once per thread and model (P values each)
    n_convert = int(spec[0, H_PARAMS]) if thetas.dtype != dtype else 0
    proto = np.empty(n_convert, dtype)
    _eval(X, y, ptr, thetas, which, spec, act, loss, (bb, lanes), loss_sum, correct, proto)


@njit(parallel=True, cache=True)
def _eval(X, y, ptr, thetas, which, spec, act, loss, blocking, loss_sum, correct, proto):
    """:func:`cnn_eval`'s loop: blocks of ``bb`` rows dealt out to ``lanes`` loop iterations,
    ``blocking = (bb, lanes)``; ``proto``'s dtype is the one the layers compute in."""
    bb, lanes = blocking
    n_clients = ptr.shape[0] - 1
    L = spec[0, H_LAYERS]
    c = spec[0, H_OUT]
    d = spec[0, H_IN]
    widest = spec[0, H_WIDEST]
    first = np.zeros(n_clients + 1, dtype=np.int64)
    for i in range(n_clients):
        first[i + 1] = first[i] + (ptr[i + 1] - ptr[i] + bb - 1) // bb
    n_blocks = first[n_clients]
    base = ptr[0]
    values = np.empty(ptr[n_clients] - base)
    hits = np.zeros(ptr[n_clients] - base, dtype=np.bool_)
    lanes = max(1, min(lanes, n_blocks))
    no_d = np.empty(0)
    for lane in prange(lanes):
        X0 = np.empty(bb * d, proto.dtype)
        buf = np.empty(2 * bb * widest, proto.dtype)
        cols = np.empty(spec[0, H_COLS], proto.dtype)
        rows = np.empty(bb, dtype=np.int64)
        tbuf = np.empty(proto.shape[0], proto.dtype)
        theta = _as_work(thetas[0][:0], tbuf[:0])  # typed; set before the first block
        model = -1
        i = 0
        for blk in range(lane, n_blocks, lanes):
            while first[i + 1] <= blk:
                i += 1
            start = ptr[i] + (blk - first[i]) * bb
            stop = min(start + bb, ptr[i + 1])
            n = stop - start
            for r in range(n):
                rows[r] = start + r
            _gather(X, rows[:n], X0[: n * d], True)
            if which[i] != model:
                model = which[i]
                theta = _as_work(thetas[model], tbuf)
            inp = X0
            half = bb * widest
            Z = buf[:0]
            for layer in range(1, L + 1):
                dst = buf[(layer % 2) * half : (layer % 2) * half + n * spec[layer, C_OSZ]]
                _layer_forward(spec, layer, inp, theta, n, dst, no_d, cols, act)
                inp = dst
                Z = dst
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
