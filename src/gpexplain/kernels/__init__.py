"""Kernels and their closed-form linear functionals (value, integrated gradient, ...)."""

from gpexplain.kernels import measures
from gpexplain.kernels.gpytorch_adapter import GPyTorchKernel, as_kernel
from gpexplain.kernels.orthogonal_additive import OrthogonalAdditive
from gpexplain.kernels.random_features import RandomFeatureKernel
from gpexplain.kernels.rbf import RBF

__all__ = [
    "RBF",
    "GPyTorchKernel",
    "OrthogonalAdditive",
    "RandomFeatureKernel",
    "as_kernel",
    "measures",
]
