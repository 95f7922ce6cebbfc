"""The kernel contract: what every gpexplain kernel offers to posteriors and functionals.

A kernel is a covariance function ``k(x, x')`` on R^d evaluated in NumPy (float64). Every
kernel also gives an equivalent GPyTorch module (``torch_kernel``), which the quadrature
schemes of ``gpexplain.functionals`` differentiate with autograd when no closed form exists.

Which linear functionals (gradient, integrated gradient, Shapley value, ...) a kernel supports
is *not* declared here: each functional keeps a registry from kernel types to the scheme that
evaluates it (``gpexplain.functionals.base.LinearFunctional.register``), so a kernel with a
new closed form adds one registration next to that functional, and explanation code never asks
``hasattr``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

__all__ = ["Kernel"]


class Kernel(ABC):
    """Covariance function ``k(x, x')`` of a Gaussian process (abstract).

    Subclasses implement ``__call__``, ``diag`` and ``torch_kernel``; all inputs are float64
    arrays of shape (n, n_features) in the units the kernel was defined in.

    Attributes
    ----------
    explanation_hint : str
        Appended to the error raised when an explanation has no scheme for this kernel, or
        would cost too much by quadrature, to point users at the explanation that does apply
        (empty by default).
    """

    explanation_hint: str = ""

    @abstractmethod
    def __call__(self, X1: np.ndarray, X2: np.ndarray) -> np.ndarray:
        """Kernel matrix ``k(X1, X2)``, shape (n1, n2)."""

    @abstractmethod
    def diag(self, X: np.ndarray) -> np.ndarray:
        """``k(x, x)`` for each row of X, shape (n,)."""

    @abstractmethod
    def torch_kernel(self, n_features: int):
        """An equivalent float64 ``gpytorch.kernels.Kernel`` over ``n_features`` inputs."""
