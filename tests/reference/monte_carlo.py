"""Monte Carlo reference for a variance, with the standard error that sets the tolerance."""

from __future__ import annotations

import numpy as np


def variance_with_standard_error(values: np.ndarray) -> tuple[float, float]:
    """Sample variance of ``values`` and its standard error ``sqrt((m4 - s^4) / N)``."""
    centred = values - values.mean()
    variance = float(np.mean(centred**2))
    return variance, float(np.sqrt((np.mean(centred**4) - variance**2) / len(values)))
