"""The BLAS the network kernels call: ``?gemm`` of the OpenBLAS that the ``scipy-openblas32``
package carries, pinned by our own dependency rather than taken from whatever SciPy bundles.

Why our own: SciPy 1.17 bundles OpenBLAS 0.3.30, whose AVX-512 (SkylakeX) ``sgemm`` takes
13.6 ms for a CNN dense layer's delta product (``delta @ W``, 32 x 2048 by 2048 x 3136) that
0.3.34 computes in 4.9 ms (the forward product of the same shape: 5.2 ms in both); a network's
bits then also follow this project's dependency, not SciPy's version. The symbols are
registered with LLVM under names of our own, so jitted kernels that call them stay cacheable
(a ctypes function pointer in a kernel would not be): :data:`sgemm` and :data:`dgemm` are
``cblas_?gemm``, with ``alpha`` and ``beta`` by value.
"""

from __future__ import annotations

import ctypes
import os

import llvmlite.binding as llvm
from numba import types


def library_path() -> str:
    """The shared library of ``scipy-openblas32`` (a one-line error if it is missing)."""
    try:
        import scipy_openblas32
    except ImportError as err:  # a dependency: only a broken installation gets here
        raise ImportError(
            "fedsparse needs the package scipy-openblas32 (its network kernels' BLAS): "
            "pip install scipy-openblas32"
        ) from err
    return os.path.join(scipy_openblas32.get_lib_dir(), scipy_openblas32.get_library(True))


def _load() -> ctypes.CDLL:
    lib = ctypes.CDLL(library_path())
    for ours, theirs in (("fedsparse_cblas_sgemm", "scipy_cblas_sgemm"),
                         ("fedsparse_cblas_dgemm", "scipy_cblas_dgemm")):  # fmt: skip
        llvm.add_symbol(ours, ctypes.cast(getattr(lib, theirs), ctypes.c_void_p).value)
    return lib


LIBRARY = _load()
ROW_MAJOR = 101  # CBLAS's CblasRowMajor
NO_TRANS, TRANS = 111, 112  # CblasNoTrans, CblasTrans

_I = types.intc


def _cblas(name: str, real: types.Type) -> types.ExternalFunction:
    ptr = types.voidptr  # an array's ``.ctypes``
    return types.ExternalFunction(
        name,
        types.void(
            _I, _I, _I,  # order, transa, transb
            _I, _I, _I,  # m, n, k
            real, ptr, _I,  # alpha, a, lda
            ptr, _I,  # b, ldb
            real, ptr, _I,  # beta, c, ldc
        ),
    )  # fmt: skip


sgemm = _cblas("fedsparse_cblas_sgemm", types.float32)
dgemm = _cblas("fedsparse_cblas_dgemm", types.float64)
