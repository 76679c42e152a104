"""Pixel scaling and per-feature standardisation of image data (``dataset.preprocess``)."""

from __future__ import annotations

from typing import Any

import numpy as np


def preprocess(
    X: np.ndarray, X_test: np.ndarray | None, spec: dict[str, Any]
) -> tuple[np.ndarray, np.ndarray | None]:
    """Scale image rows and, if asked, standardise each feature on the training rows.

    Nothing about the test rows leaks into training: the statistics are the training rows'.
    Float64 inputs are changed in place (callers pass fresh row selections).

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

    Returns
    -------
    tuple
        ``(X, X_test)`` as C-contiguous float64 (``X_test`` None if it was).
    """
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
    return X, X_test


def _scaled(A: np.ndarray, scale: float) -> np.ndarray:
    A = np.ascontiguousarray(A, dtype=np.float64)
    if scale != 1.0:
        A /= scale
    return A
