"""The Gaussian observation model ``y = f(x) + eps``, ``eps ~ N(0, noise)``."""

from __future__ import annotations

import math

import numpy as np
import torch

from gpexplain.likelihoods.base import LIKELIHOODS, Likelihood

__all__ = ["Gaussian"]


@LIKELIHOODS.register("gaussian")
class Gaussian(Likelihood):
    """Gaussian likelihood ``p(y | f) = N(y; f, noise)``: both of its answers in closed form.

    For ``f ~ N(m, v)``: ``E[log p(y | f)] = -log(2 pi noise) / 2 - ((y - m)^2 + v) /
    (2 noise)`` (Hensman, Fusi and Lawrence, "Gaussian processes for big data", 2013, eq. 7)
    and the predictive ``y ~ N(m, v + noise)``.

    Parameters
    ----------
    noise : float
        Observation noise variance, > 0 (units of y squared).

    Raises
    ------
    ValueError
        ``noise`` not a positive finite number.
    """

    def __init__(self, noise: float):
        if not (isinstance(noise, int | float | np.floating) and math.isfinite(noise)
                and noise > 0):
            raise ValueError(f"noise must be a positive finite variance, got {noise!r}.")
        self.noise = float(noise)

    def __repr__(self) -> str:
        return f"Gaussian(noise={self.noise!r})"

    def targets(self, y: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(np.asarray(y, dtype=np.float64))

    def expected_log_likelihood(self, mean, var, target):
        """``mean, var``: (1, n) tensors; ``target``: the observations y (n,)."""
        squared = (target - mean[0]) ** 2 + var[0]
        return (-0.5 * math.log(2.0 * math.pi * self.noise) - 0.5 * squared / self.noise).sum()

    def predictive_moments(self, mean: np.ndarray, var: np.ndarray):
        """Mean and variance of a new observation y at latent moments ``mean, var`` (any
        shape): ``(mean, var + noise)``."""
        return np.asarray(mean, dtype=np.float64), np.asarray(var, dtype=np.float64) + self.noise
