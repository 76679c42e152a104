"""Numba kernels: pure functions on arrays, no I/O, no configuration.

Compiled kernels are cached on disk, each kernel module's in a directory keyed by its source
and the sources it imports (:mod:`fedsparse.kernels.cache`), installed here before any kernel
module loads.
"""

from __future__ import annotations

from pathlib import Path

from ..plugins import builtin_kernel_sources
from ..threads import configure_waiting
from .cache import configure as _configure_cache

configure_waiting()  # before numba loads OpenMP (at the first parallel kernel call)
_configure_cache([*sorted(Path(__file__).parent.glob("*.py")), *builtin_kernel_sources()])

from .evaluate import (  # noqa: E402
    client_losses_from_margins,
    column_checks,
    correct_from_margins,
    margins_columns,
    margins_csc,
    ridge_term,
    transpose,
)
from .layers import ACTIVATIONS, RELU, SIGMOID, SWISH, TANH  # noqa: E402
from .losses import (  # noqa: E402
    LEAST_SQUARES,
    LOGISTIC,
    LOSS_CODES,
    SOFTMAX,
    batch_grad,
    descend,
    sample_loss_grad,
    weighted_sum,
)
from .network import (  # noqa: E402
    mlp_batch_grad,
    mlp_eval,
    mlp_local_sgd_round,
    mlp_thread_work,
    mlp_work,
    n_params,
)
from .rng import client_states, randbelow, sample_without_replacement  # noqa: E402
from .rounds import (  # noqa: E402
    SGDConstants,
    aggregate,
    local_sgd_cohort_round,
    local_sgd_round,
    nnz_above,
    nnz_per_client,
    thread_buffers,
)
from .rows import as_kernel_matrix, row_axpy, row_axpy3, row_dot, row_dot3  # noqa: E402
from .sparse_rounds import (  # noqa: E402
    aggregate_active,
    dense_models,
    local_sgd_round_csr,
    nnz_active,
    sparse_buffers,
)
from .threshold import (  # noqa: E402
    hard_threshold,
    hard_threshold_rows,
    select_kth_largest,
    threshold_scratch,
)

__all__ = [
    "ACTIVATIONS",
    "LEAST_SQUARES",
    "LOGISTIC",
    "LOSS_CODES",
    "RELU",
    "SGDConstants",
    "SIGMOID",
    "SOFTMAX",
    "SWISH",
    "TANH",
    "aggregate",
    "aggregate_active",
    "as_kernel_matrix",
    "batch_grad",
    "client_losses_from_margins",
    "client_states",
    "column_checks",
    "correct_from_margins",
    "dense_models",
    "descend",
    "hard_threshold",
    "hard_threshold_rows",
    "local_sgd_cohort_round",
    "local_sgd_round",
    "local_sgd_round_csr",
    "margins_columns",
    "margins_csc",
    "mlp_batch_grad",
    "mlp_eval",
    "mlp_local_sgd_round",
    "mlp_thread_work",
    "mlp_work",
    "n_params",
    "nnz_active",
    "nnz_above",
    "nnz_per_client",
    "randbelow",
    "ridge_term",
    "row_axpy",
    "row_axpy3",
    "row_dot",
    "row_dot3",
    "sample_loss_grad",
    "sample_without_replacement",
    "select_kth_largest",
    "sparse_buffers",
    "thread_buffers",
    "threshold_scratch",
    "transpose",
    "weighted_sum",
]
