"""Kernels (subclasses of ``Kernel``) and the math of their closed-form linear functionals;
which functional uses which closed form is registered in ``gpexplain.functionals``."""

from gpexplain.kernels import measures
from gpexplain.kernels.base import Kernel
from gpexplain.kernels.gpytorch_adapter import GPyTorchKernel, as_kernel
from gpexplain.kernels.locally_linear import LocallyLinear
from gpexplain.kernels.orthogonal_additive import OrthogonalAdditive
from gpexplain.kernels.random_features import RandomFeatureKernel
from gpexplain.kernels.rbf import RBF

__all__ = [
    "RBF",
    "GPyTorchKernel",
    "Kernel",
    "LocallyLinear",
    "OrthogonalAdditive",
    "RandomFeatureKernel",
    "as_kernel",
    "measures",
]
