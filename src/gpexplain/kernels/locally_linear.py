"""The locally linear kernel of GPX: a GP over the weights of a linear model in z.

Yoshikawa and Iwata, *Gaussian process regression with local explanation* (preprint, 2020),
eqs. 10-14: ``y = w(x)^T z + noise`` with independent weight functions
``w_l ~ GP(0, k_x + weight_noise delta)``. Then f(x, z) = w(x)^T z is a GP over the
concatenated inputs ``(x, z)`` with

    k((x, z), (x', z')) = k_x(x, x') z . z'          (distinct points)
    k((x, z), (x, z))   = (k_x(x, x) + weight_noise) |z|^2

The weight noise is white noise on the weights: it enters the prior variance of every point
(``diag``) and, for the training rows, the noise variance of the exact posterior
(``noise + weight_noise |z_i|^2`` per row, docs/errata.md, "Yoshikawa and Iwata"), but never
a covariance between two different points.
"""

from __future__ import annotations

import numpy as np

from gpexplain._torch import as_tensor
from gpexplain.kernels.base import Kernel
from gpexplain.kernels.rbf import RBF

__all__ = ["LocallyLinear"]


class LocallyLinear(Kernel):
    """``k_x(x, x') z . z'`` over inputs ``[x, z]`` (the first ``n_inputs`` columns are x).

    Parameters
    ----------
    input_kernel : gpexplain.kernels.RBF
        ``k_x``, the covariance of each weight function over the kernel inputs x.
    n_inputs : int
        Number of kernel-input columns x; the remaining columns are the representation z.
    weight_noise : float, default 0.0
        Variance of the white noise on each weight, in squared units of y per unit of z.
    """

    explanation_hint = "GPXRegressor explains itself: use model.explain(X, Z)."

    def __init__(self, input_kernel: RBF, n_inputs: int, weight_noise: float = 0.0):
        if not isinstance(input_kernel, RBF):
            raise TypeError(
                f"input_kernel must be a gx.kernels.RBF, got {type(input_kernel).__name__}."
            )
        if isinstance(n_inputs, bool) or not isinstance(n_inputs, int | np.integer) or n_inputs < 1:
            raise ValueError(f"n_inputs must be a positive integer, got {n_inputs!r}.")
        weight_noise = float(weight_noise)
        if not np.isfinite(weight_noise) or weight_noise < 0:
            raise ValueError(f"weight_noise must be a finite variance >= 0, got {weight_noise}.")
        self.input_kernel, self.n_inputs = input_kernel, int(n_inputs)
        self.weight_noise = weight_noise

    def __repr__(self) -> str:
        return (
            f"LocallyLinear(input_kernel={self.input_kernel!r}, n_inputs={self.n_inputs}, "
            f"weight_noise={self.weight_noise!r})"
        )

    def split(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(x, z)`` columns of concatenated inputs of shape (n, n_inputs + n_z)."""
        return X[:, : self.n_inputs], X[:, self.n_inputs :]

    def __call__(self, X1: np.ndarray, X2: np.ndarray) -> np.ndarray:
        (x1, z1), (x2, z2) = self.split(X1), self.split(X2)
        return self.input_kernel(x1, x2) * (z1 @ z2.T)

    def diag(self, X: np.ndarray) -> np.ndarray:
        x, z = self.split(X)
        return (self.input_kernel.diag(x) + self.weight_noise) * np.sum(z * z, axis=1)

    def torch_kernel(self, n_features: int):
        """``ScaleKernel(RBF on x) * Linear on z`` (the weight noise, a nugget, is left out)."""
        import gpytorch
        import torch

        x_part = self.input_kernel.torch_kernel(self.n_inputs)
        z_dims = as_tensor(np.arange(self.n_inputs, n_features), dtype=torch.long)
        z_part = gpytorch.kernels.LinearKernel(active_dims=z_dims).double()
        z_part.variance = as_tensor(1.0, like=z_part)
        return gpytorch.kernels.ProductKernel(x_part, z_part).double()
