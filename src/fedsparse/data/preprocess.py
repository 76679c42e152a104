"""Pixel scaling and per-feature standardisation of image data (``dataset.preprocess``)."""

from __future__ import annotations

from typing import Any

import numpy as np


def preprocess(
    X: np.ndarray, X_test: np.ndarray | None, spec: dict[str, Any]
) -> tuple[np.ndarray, np.ndarray | None]:
    """``X`` and ``X_test`` as float64, divided by ``spec['scale']`` and, if
    ``spec['standardize']``, centred and scaled by the mean and standard deviation of
    each feature over the TRAINING rows ``X`` only (a constant feature: std 1), so
    nothing about the test rows leaks into training.

    Float64 inputs are changed in place (callers pass fresh row selections).
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
