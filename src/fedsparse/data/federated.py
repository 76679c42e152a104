"""The in-memory form of a federated data set: all rows, grouped by client."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from ..kernels import as_kernel_matrix, column_checks, transpose


@dataclass(eq=False)
class FederatedData:
    """Rows of every client stacked, client ``i`` owning rows ``client_ptr[i]:client_ptr[i+1]``.

    Attributes
    ----------
    name : str
        Data set name (the ``dataset`` column of a trace).
    task : str
        ``regression``, ``binary`` (labels -1/+1) or ``multiclass`` (labels 0..c-1).
    X : array, shape (n_samples, n_features), or scipy CSR matrix
    y : float64 array, shape (n_samples,)
    client_ptr : int64 array, shape (n_clients + 1,)
    x_true : array, shape (n_features,), optional
        Reference model of synthetic data (support recovery and distance metrics).
    n_classes : int
        Number of classes of multiclass data (0 otherwise).
    Xt : array, shape (n_features, n_samples), optional
        Column-major copy of dense X (see :attr:`columns`); built on demand if absent.
    X_test, y_test : optional
        Held-out test rows (same storage as X) and labels; ``test_ptr`` groups them
        by client (a single group for a global test split).
    """

    name: str
    task: str
    X: np.ndarray | sp.csr_matrix
    y: np.ndarray
    client_ptr: np.ndarray
    x_true: np.ndarray | None = None
    n_classes: int = 0
    Xt: np.ndarray | None = field(default=None, repr=False)
    _kernel_X: object = field(default=None, repr=False)
    _kernel_csc: object = field(default=None, repr=False)
    _column_checks: np.ndarray | None = field(default=None, repr=False)
    _kernel_X_test: object = field(default=None, repr=False)
    X_test: np.ndarray | sp.csr_matrix | None = field(default=None, repr=False)
    y_test: np.ndarray | None = field(default=None, repr=False)
    test_ptr: np.ndarray | None = field(default=None, repr=False)
    _in_dtype: dict = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self.y = np.ascontiguousarray(self.y, dtype=np.float64)
        self.client_ptr = np.ascontiguousarray(self.client_ptr, dtype=np.int64)
        if self.X.shape[0] != self.y.shape[0] or self.client_ptr[-1] != self.y.shape[0]:
            raise ValueError("X, y and client_ptr disagree on the number of samples")
        if np.any(np.diff(self.client_ptr) <= 0):
            raise ValueError("every client needs at least one sample")
        if self.X_test is not None:
            self.y_test = np.ascontiguousarray(self.y_test, dtype=np.float64)
            if self.test_ptr is None:
                self.test_ptr = np.array([0, self.y_test.shape[0]], dtype=np.int64)
            self.test_ptr = np.ascontiguousarray(self.test_ptr, dtype=np.int64)
            if (
                self.X_test.shape[0] != self.y_test.shape[0]
                or self.test_ptr[-1] != self.y_test.shape[0]
                or self.X_test.shape[1] != self.X.shape[1]
            ):
                raise ValueError("X_test, y_test and test_ptr disagree")

    @property
    def has_test(self) -> bool:
        return self.X_test is not None and self.y_test is not None and self.y_test.shape[0] > 0

    @property
    def n_clients(self) -> int:
        return len(self.client_ptr) - 1

    @property
    def n_samples(self) -> int:
        return self.y.shape[0]

    @property
    def n_features(self) -> int:
        return self.X.shape[1]

    @property
    def client_sizes(self) -> np.ndarray:
        return np.diff(self.client_ptr)

    @property
    def is_sparse(self) -> bool:
        return sp.issparse(self.X)

    @property
    def rows_dtype(self) -> np.dtype:
        """The dtype of the kernels' dense rows (:attr:`kernel_X`): float32 for rows stored
        in float32 (:meth:`in_dtype`), float64 otherwise (sparse rows: always float64)."""
        if not self.is_sparse and self.X.dtype == np.float32:
            return np.dtype(np.float32)
        return np.dtype(np.float64)

    def in_dtype(self, dtype) -> FederatedData:
        """This data set with its dense rows (``X``, ``X_test``) in ``dtype`` (float64 or
        float32), built once and kept with this object; itself if they already are, or sparse.

        A float32 network reads its rows in float32 (:mod:`fedsparse.kernels.network`): its
        kernels convert each float64 value to float32 as they gather a batch, so rows stored
        as ``float32(x)`` give the same bits at half the memory and no per-batch conversion.
        """
        dtype = np.dtype(dtype)
        if dtype not in (np.float64, np.float32):
            raise ValueError(f"rows are float64 or float32, not {dtype}")
        if self.is_sparse or dtype == self.rows_dtype:
            return self
        if dtype not in self._in_dtype:
            self._in_dtype[dtype] = FederatedData(
                name=self.name,
                task=self.task,
                X=_read_only(self.X.astype(dtype)),
                y=self.y,
                client_ptr=self.client_ptr,
                x_true=self.x_true,
                n_classes=self.n_classes,
                X_test=None if self.X_test is None else _read_only(self.X_test.astype(dtype)),
                y_test=self.y_test,
                test_ptr=self.test_ptr,
            )
        return self._in_dtype[dtype]

    @property
    def columns(self) -> np.ndarray:
        """Dense data transposed, C-contiguous (n_features, n_samples), built once.

        Lets evaluation of a sparse model read only its support's columns. Read-only, as when
        loaded from a data folder: the kernels compile one signature for both.
        """
        if self.is_sparse:
            raise ValueError("columns() is for dense data")
        if self.Xt is None:
            Xt = np.empty((self.X.shape[1], self.X.shape[0]), self.X.dtype)
            transpose(self.X, Xt)
            Xt.flags.writeable = False
            self.Xt = Xt
        return self.Xt

    @property
    def column_checks(self) -> np.ndarray:
        """Which blocks of :attr:`columns` are finite, as evaluation finds out (the record of
        :func:`fedsparse.kernels.column_checks`, kept for the data set's lifetime)."""
        if self._column_checks is None:
            self._column_checks = column_checks(self.columns)
        return self._column_checks

    @property
    def kernel_csc(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Sparse data by columns, ``(data, row indices, indptr)``, built once.

        Lets evaluation of a sparse model read only its support's columns.
        """
        if not self.is_sparse:
            raise ValueError("kernel_csc is for sparse data")
        if self._kernel_csc is None:
            self._kernel_csc = as_kernel_matrix(self.X.T)  # CSR of X^T is CSC of X
        return self._kernel_csc

    @property
    def kernel_X(self):
        """``X`` in the form the kernels take (dense array or CSR triple), built once."""
        if self._kernel_X is None:
            self._kernel_X = as_kernel_matrix(self.X, self.rows_dtype)
        return self._kernel_X

    @property
    def kernel_X_test(self):
        """``X_test`` in the form the kernels take, built once (None without test rows)."""
        if self.X_test is None:
            return None
        if self._kernel_X_test is None:
            self._kernel_X_test = as_kernel_matrix(self.X_test, self.rows_dtype)
        return self._kernel_X_test


def _read_only(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a
