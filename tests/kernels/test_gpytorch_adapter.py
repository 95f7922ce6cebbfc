"""GPyTorch kernels behind gpexplain's interface; squared exponentials become ``gx RBF`` exactly."""

from __future__ import annotations

import gpytorch
import numpy as np
import pytest
import torch

from gpexplain.kernels.gpytorch_adapter import GPyTorchKernel, as_kernel, squared_exponential
from gpexplain.kernels.rbf import RBF
from tests.functionals.test_quadrature_stationary import gpytorch_rbf


def _values(module, X1, X2):
    with torch.no_grad():
        return module.double()(torch.as_tensor(X1), torch.as_tensor(X2)).to_dense().numpy()


@pytest.mark.parametrize(
    ("module", "lengthscale", "variance"),
    [
        (gpytorch_rbf([0.7, 1.9, 3.0], 2.5), [0.7, 1.9, 3.0], 2.5),
        (gpytorch_rbf([0.7, 1.9, 3.0]), [0.7, 1.9, 3.0], 1.0),
        (gpytorch_rbf(1.3, 0.4), 1.3, 0.4),
        (
            gpytorch.kernels.ScaleKernel(
                gpytorch.kernels.RBFKernel(
                    ard_num_dims=3,
                    lengthscale_prior=gpytorch.priors.GammaPrior(3.0, 6.0),
                    lengthscale_constraint=gpytorch.constraints.Interval(0.1, 5.0),
                ),
                outputscale_prior=gpytorch.priors.GammaPrior(2.0, 0.15),
            ),
            None,
            None,
        ),
    ],
    ids=["scaled-ard", "ard", "isotropic", "priors-and-constraints"],
)
def test_squared_exponential_converts_exactly(module, lengthscale, variance):
    converted = as_kernel(module)
    assert isinstance(converted, RBF)
    if lengthscale is not None:
        np.testing.assert_allclose(converted.lengthscale, lengthscale, rtol=1e-15)
        assert converted.variance == pytest.approx(variance, rel=1e-15)
        assert converted.ard == (np.size(lengthscale) > 1)
    rng = np.random.default_rng(0)
    X1, X2 = rng.normal(size=(7, 3)), rng.normal(size=(5, 3))
    np.testing.assert_allclose(converted(X1, X2), _values(module, X1, X2), rtol=0, atol=1e-14)


@pytest.mark.parametrize(
    "module",
    [
        gpytorch.kernels.MaternKernel(nu=2.5),
        gpytorch.kernels.RQKernel(),
        gpytorch_rbf([0.8], 1.0, active_dims=[1]),
        gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel(), active_dims=[0, 2]),
        gpytorch.kernels.RBFKernel(batch_shape=torch.Size([2])),
        gpytorch_rbf([0.8, 1.0, 1.2], 1.0) + gpytorch_rbf([0.3, 0.3, 0.3], 1.0),
        gpytorch.kernels.ScaleKernel(gpytorch.kernels.MaternKernel(nu=1.5)),
    ],
    ids=["matern", "rq", "active-dims", "scale-active-dims", "batch", "sum", "scaled-matern"],
)
def test_other_kernels_stay_gpytorch(module):
    assert squared_exponential(module) is None
    wrapped = as_kernel(module)
    assert isinstance(wrapped, GPyTorchKernel)


def test_subclass_of_rbf_kernel_is_not_assumed_squared_exponential():
    class Warped(gpytorch.kernels.RBFKernel):
        def forward(self, x1, x2, **params):
            return super().forward(x1**3, x2**3, **params)

    assert isinstance(as_kernel(Warped()), GPyTorchKernel)


def test_gpexplain_kernels_pass_through_and_junk_is_rejected():
    kernel = RBF([1.0, 2.0], 0.5)
    assert as_kernel(kernel) is kernel
    with pytest.raises(TypeError, match=r"gpexplain kernel .* or a gpytorch.kernels.Kernel"):
        as_kernel("rbf")
