"""Output i of an intrinsic coregionalisation model (ICM) as a single-output posterior, written
with NumPy (explicit inverse of the task-augmented kernel matrix), sharing no code with
``gpexplain.posterior.multi_output``.

ICM: ``k((x, i), (x', j)) = B_ij k(x, x')`` with k the squared exponential
``variance * exp(-0.5 sum((x - x')^2 / lengthscale^2))``; on observations ``(x_n, task_n,
y_n)`` with noise variance ``noise``, ``K = B[task, task] * k(X, X) + noise I``. Output i's
posterior is the representer form with kernel ``B_ii k``, ``alpha = r K^{-1} (y - m0[task])``
and ``Q = diag(r) K^{-1} diag(r)``, ``r = B[i, task] / B_ii``.
"""

from __future__ import annotations

import numpy as np

import gpexplain as gx
from gpexplain.posterior.base import Posterior


def squared_exponential(A, C, lengthscale, variance):
    """``variance * exp(-0.5 sum((a - c)^2 / lengthscale^2))``, (len(A), len(C))."""
    diff = (A[:, None, :] - C[None, :, :]) / np.asarray(lengthscale)
    return variance * np.exp(-0.5 * np.sum(diff**2, axis=-1))


class NumpyMarginal(Posterior):
    """Output i of the ICM as a single-output posterior, by explicit inverse."""

    def __init__(self, X, tasks, y, B, i, *, lengthscale, variance, noise, means,
                 feature_names):
        K = (B[np.ix_(tasks, tasks)] * squared_exponential(X, X, lengthscale, variance)
             + noise * np.eye(len(X)))
        self.inverse = np.linalg.inv(K)
        self.kernel = gx.kernels.RBF(np.asarray(lengthscale), variance * B[i, i])
        self.ratio = B[i, tasks] / B[i, i]
        self.train_inputs = X
        self.alpha = self.ratio * (self.inverse @ (y - means[tasks]))
        self.mean = float(means[i])
        self.feature_names = list(feature_names)

    def quadratic_form(self, left, right=None):
        right = left if right is None else right
        return (left * self.ratio) @ self.inverse @ np.swapaxes(right * self.ratio, -1, -2)
