"""The network kernels callers use: minibatch gradients, local SGD rounds, blocked
evaluation and their work space, for an MLP or a cnn alike.

A network reaches these as ``sizes``: an MLP's 1-D layer widths (the parameter layout of
:mod:`fedsparse.kernels.mlp`) or the 2-D layer table of :func:`fedsparse.kernels.cnn.cnn_spec`
(a cnn, or a float32 MLP as a table of dense layers). Each kernel branches on that rank: in
Python for the work space and evaluation, and, inside compiled code, when numba compiles
``_step``, ``_check`` and ``_offsets`` for the argument types, which call
:mod:`fedsparse.kernels.mlp`'s or :mod:`fedsparse.kernels.cnn`'s kernels directly; each
rank's specialisation holds only its own network's code. Work space is allocated once by
:func:`mlp_work` (one thread) or :func:`mlp_thread_work` (one slot per numba thread).

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

from .cnn import H_PARAMS, cnn_check, cnn_dtype, cnn_eval, cnn_step, cnn_work_lengths
from .layers import WORK_E, WORK_X0, as_work
from .mlp import (
    mlp_check,
    mlp_eval_blocks,
    mlp_n_params,
    mlp_offsets,
    mlp_step,
    mlp_work_lengths,
)
from .rng import sample_without_replacement
from .threshold import SCRATCH_EXTRA, hard_threshold, hard_threshold_rows

# ---------------------------------------------------------------------------
# Work space


def n_params(sizes, bias: bool) -> int:
    """Length of the flat parameter vector of an MLP with layer widths ``sizes`` (or of the
    cnn of a 2-D layer table, whose bias is part of the table)."""
    if np.ndim(sizes) == 2:
        return int(sizes[0, H_PARAMS])
    return mlp_n_params(sizes, bias)


def _work_lengths(sizes, max_batch: int, dense: bool) -> tuple[int, ...]:
    """Lengths of the work tuple ``(X0, A, D, E)`` for batches of <= ``max_batch`` rows."""
    if np.ndim(sizes) == 2:  # a cnn: its input rows are always gathered dense
        return cnn_work_lengths(sizes, max_batch)
    return mlp_work_lengths(sizes, max_batch, dense)


def work_dtype(sizes) -> type:
    """The dtype the kernels compute in for ``sizes``: float64, or a layer table's own (a
    float32 network's table, :func:`fedsparse.kernels.cnn.cnn_spec`)."""
    if np.ndim(sizes) == 2:
        return cnn_dtype(sizes)
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
# float32 work space: the algorithms' float64 parameters converted at the kernels' edge


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
            return _step(X, y, rows, theta, sizes, bias, act, loss, off, work, (1.0, 1.0, G))

        return same

    def cast(X, y, rows, theta, sizes, bias, act, loss, off, work, E, G):
        P = theta.shape[0]
        n = E.shape[0]
        t = as_work(theta, E[n - 2 * P : n - P])
        g = E[n - P :]
        g[:] = 0.0
        value = _step(X, y, rows, t, sizes, bias, act, loss, off, work, (1.0, 1.0, g))
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
            off[1] = sizes[0, H_PARAMS]
            return off

        return table
    return lambda sizes, bias: mlp_offsets(sizes, bias)


# ---------------------------------------------------------------------------
# Dispatch on the rank of ``sizes``, resolved when numba compiles the caller


@njit(cache=True)
def _init_ridge(theta, l2, G):
    """``G = l2 * theta`` (the gradient then accumulates onto it); return ``l2/2 ||theta||^2``."""
    sq = 0.0
    for j in range(theta.shape[0]):
        t = theta[j]
        sq += t * t
        G[j] = l2 * t
    return 0.5 * l2 * sq


def _check(X0, X_dense, rows, theta, sizes, bias, work):
    """Raise on work space too small for ``rows`` or a parameter of the wrong length
    (compiled only; dispatches on the dimension of ``sizes``)."""


@overload(_check)
def _check_impl(X0, X_dense, rows, theta, sizes, bias, work):
    if sizes.ndim == 2:
        return lambda X0, X_dense, rows, theta, sizes, bias, work: cnn_check(
            X0, rows, theta, sizes, work
        )
    return lambda X0, X_dense, rows, theta, sizes, bias, work: mlp_check(
        X0, X_dense, rows, theta, sizes, bias, work
    )


def _is_dense(X):
    """True for a dense ``X`` (compiled only)."""


@overload(_is_dense)
def _is_dense_impl(X):
    value = isinstance(X, types.Array)
    return lambda X: value


def _step(X, y, rows, theta, sizes, bias, act, loss, off, work, update):
    """Forward, output deltas and ``T = shrink * T + alpha * data_grad`` for ``update = (alpha,
    shrink, T)``; return the mean data loss over ``rows`` (compiled only: an MLP, or a cnn for
    a 2-D ``sizes``)."""


@overload(_step)
def _step_impl(X, y, rows, theta, sizes, bias, act, loss, off, work, update):
    if sizes.ndim == 2:

        def table(X, y, rows, theta, sizes, bias, act, loss, off, work, update):
            alpha, shrink, T = update
            return cnn_step(X, y, rows, theta, sizes, act, loss, work, alpha, shrink, T)

        return table

    def widths(X, y, rows, theta, sizes, bias, act, loss, off, work, update):
        return mlp_step(X, y, rows, theta, sizes, bias, act, loss, off, work, update)

    return widths


# ---------------------------------------------------------------------------
# Public kernels


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
        Flat parameters (the layout of :mod:`fedsparse.kernels.mlp`, or of the layer table).
    sizes : int64 array, shape (n_layers + 1,), or a cnn's layer table
        ``[d, h_1, ..., h_k, n_out]``, or :func:`fedsparse.kernels.cnn.cnn_spec`'s table.
    bias : bool
        An MLP's (a layer table holds its own).
    act : int
        One of ``RELU``, ``SWISH``, ``TANH``, ``SIGMOID`` (:mod:`fedsparse.kernels.layers`).
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
    _check(work[WORK_X0], _is_dense(X), rows, theta, sizes, bias, work)
    off = _offsets(sizes, bias)
    ridge = _init_ridge(theta, l2, G)
    return _grad_into(X, y, rows, theta, sizes, bias, act, loss, off, work, work[WORK_E], G) + ridge


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
        cnn_eval(X, y, ptr, thetas, which, sizes, act, loss, block, loss_sum, correct)
        return
    lanes = numba.get_num_threads()  # read here: inside, it would stop numba's caching
    mlp_eval_blocks(
        X, y, ptr, thetas, which, sizes, bias, act, loss, (block, lanes), loss_sum, correct
    )


@njit(parallel=True, cache=True)
def mlp_local_sgd_round(
    X, y, ptr, theta, theta_local, perm, rng, constants, model, work, layer_bounds
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
    constants : :class:`fedsparse.kernels.SGDConstants` with a float ``stepsize``
    model : :class:`fedsparse.kernels.prox.StepModel` (``Problem.step_model``)
        Its ``sizes``, ``bias``, ``act``, ``loss`` and ``l2`` (as in :func:`mlp_batch_grad`)
        are read; its ``network`` flag is not.
    work : tuple from :func:`mlp_thread_work` with ``max_batch >= min(batch, max n_i)``
    layer_bounds : int64 array
        Segment bounds ``[0, e_1, ..., n_params]``: the local H_tau keeps ``tau_local``
        entries in each segment (``threshold: per_layer``); ``[0, n_params]``: one segment
        (an argument, never omitted, so that both cases share one compiled kernel).
    Other parameters as in :func:`mlp_batch_grad`.
    """
    steps, batch, tau_local, stepsize = constants
    _, sizes, bias, act, loss, l2 = model
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
                    (-stepsize, keep, loc),
                )
            if tau_local > 0:
                # selection on float64 values (float32 ones are exact in float64)
                _copy_if_cast(loc, ti)
                if layer_bounds.shape[0] == 2:
                    hard_threshold_rows(ti.reshape((1, P)), tau_local, scratch[t])
                else:
                    for s in range(layer_bounds.shape[0] - 1):
                        seg = ti[layer_bounds[s] : layer_bounds[s + 1]]
                        hard_threshold(seg, tau_local, scratch[t])
                _copy_if_cast(ti, loc)
        _copy_if_cast(loc, ti)
