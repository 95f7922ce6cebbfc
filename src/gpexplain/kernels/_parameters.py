"""Validation of the kernel hyperparameters shared by several kernels (units of the inputs/y)."""

from __future__ import annotations

import numpy as np

__all__ = ["as_lengthscale", "as_variance"]


def as_lengthscale(lengthscale) -> np.ndarray:
    """A scalar (isotropic) or 1-D (ARD) positive lengthscale as float64; ``np.inf`` allowed.

    Raises
    ------
    ValueError
        More than one dimension, a NaN, a value <= 0, or one below 1e-150.
    """
    lengthscale = np.asarray(lengthscale, dtype=np.float64)
    if lengthscale.ndim > 1:
        raise ValueError(
            f"lengthscale must be a scalar or a 1-D vector, got shape {lengthscale.shape}."
        )
    if np.any(np.isnan(lengthscale)) or np.any(lengthscale <= 0):
        raise ValueError(f"lengthscale must be positive (np.inf allowed), got {lengthscale}.")
    if np.any(lengthscale < _SMALLEST_LENGTHSCALE):
        # Derivatives carry 1 / lengthscale^2, which overflows below this: the explanations
        # would be inf * 0 = NaN instead of numbers.
        raise ValueError(
            f"lengthscale must be at least {_SMALLEST_LENGTHSCALE:g} (its inverse square must "
            f"be a finite float64), got {lengthscale}; rescale the inputs instead."
        )
    return lengthscale


_SMALLEST_LENGTHSCALE = 1e-150


def as_variance(variance) -> float:
    """A positive finite output variance as a float.

    Raises
    ------
    TypeError
        Not a real number (a string, a bool, an array).
    ValueError
        Not positive, or not finite.
    """
    if isinstance(variance, str | bool) or np.ndim(variance) != 0 or (
        np.asarray(variance).dtype.kind not in "iuf"
    ):
        raise TypeError(f"variance must be a positive finite number, got {variance!r}.")
    variance = float(variance)
    if not np.isfinite(variance) or variance <= 0:
        raise ValueError(f"variance must be a positive finite number, got {variance}.")
    return variance
