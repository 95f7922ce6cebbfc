"""Kernels and their closed-form linear functionals (value, integrated gradient, ...)."""

from gpexplain.kernels.gpytorch_adapter import GPyTorchKernel, as_kernel
from gpexplain.kernels.rbf import RBF

__all__ = ["RBF", "GPyTorchKernel", "as_kernel"]
