"""Pixel scaling and per-feature standardisation of image data (``dataset.preprocess``)."""

from __future__ import annotations

from typing import Any

import numpy as np

_CHUNK_ROWS = 256  # rows scaled in float64 at a time on the way to float32 (in L2)


def preprocess(
    X: np.ndarray, X_test: np.ndarray | None, spec: dict[str, Any], dtype: type = np.float64
) -> tuple[np.ndarray, np.ndarray | None]:
    """Scale image rows and, if asked, standardise each feature on the training rows.

    Nothing about the test rows leaks into training: the statistics are the training rows'.
    Float64 inputs are changed in place (callers pass fresh row selections). The values are
    computed in float64 whatever ``dtype``; float32 results are those values rounded once
    (``float32(x)``), scaled a few hundred rows at a time without a whole float64 copy
    (unless standardising, whose statistics need every row).

    Parameters
    ----------
    X
        The training rows (dense).
    X_test
        The test rows (dense), or None.
    spec
        ``{scale, standardize}``: every value is divided by ``scale``; with ``standardize``,
        each feature is centred and divided by its standard deviation over ``X`` (a constant
        feature is only centred: std 1).
    dtype
        float64, or float32 (the rows of a float32 network).

    Returns
    -------
    tuple
        ``(X, X_test)`` as C-contiguous ``dtype`` (``X_test`` None if it was).
    """
    if np.dtype(dtype) == np.float32 and not spec["standardize"]:
        return _scaled_float32(X, spec["scale"]), (
            _scaled_float32(X_test, spec["scale"]) if X_test is not None else None
        )
    X = _scaled(X, spec["scale"])
    X_test = _scaled(X_test, spec["scale"]) if X_test is not None else None
    if spec["standardize"]:
        mean = X.mean(axis=0)
        std = X.std(axis=0)
        # a constant feature (the pixels of a corner, say) is only centred, exactly
        const = np.ptp(X, axis=0) == 0
        mean[const], std[const] = X[0, const], 1.0
        for A in (X, X_test):
            if A is not None:
                A -= mean
                A /= std
    if np.dtype(dtype) == np.float32:
        return X.astype(np.float32), None if X_test is None else X_test.astype(np.float32)
    return X, X_test


def _scaled(A: np.ndarray, scale: float) -> np.ndarray:
    A = np.ascontiguousarray(A, dtype=np.float64)
    if scale != 1.0:
        A /= scale
    return A


def _scaled_float32(A: np.ndarray, scale: float) -> np.ndarray:
    out = np.empty(A.shape, np.float32)
    # one float64 buffer of a few rows, reused: a fresh temporary a chunk would cost the
    # kernel's page faults for the whole float64 size again
    buf = np.empty((min(_CHUNK_ROWS, A.shape[0]), *A.shape[1:]), np.float64)
    for lo in range(0, A.shape[0], _CHUNK_ROWS):
        part = buf[: min(_CHUNK_ROWS, A.shape[0] - lo)]
        part[...] = A[lo : lo + part.shape[0]]
        if scale != 1.0:
            part /= scale
        out[lo : lo + part.shape[0]] = part
    return out
