"""``gpexplain._torch``: tensors on the device and in the dtype of the model they are made for.

No GPU is needed: torch's "meta" device (shapes and dtypes, no data) stands in for one, so a
helper that fell back to the CPU would be caught here. A CUDA run is checked where one exists.
"""

import gpytorch
import numpy as np
import pytest
import torch

import gpexplain as gx
from gpexplain._torch import as_tensor, device_of, dtype_of, to_numpy
from gpexplain.functionals.quadrature import _path
from gpexplain.kernels import GPyTorchKernel


def test_without_like_a_cpu_float64_tensor_sharing_memory():
    values = np.arange(6.0).reshape(2, 3)
    tensor = as_tensor(values)
    assert (tensor.device.type, tensor.dtype) == ("cpu", torch.float64)
    values[0, 0] = 7.0  # shared, as torch.as_tensor shares
    assert tensor[0, 0] == 7.0
    assert as_tensor(2.5).shape == ()


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_follows_the_device_and_dtype_of_a_tensor(dtype):
    like = torch.empty(2, dtype=dtype, device="meta")
    tensor = as_tensor(np.ones((3, 2)), like=like)
    assert (tensor.device.type, tensor.dtype, tensor.shape) == ("meta", dtype, (3, 2))
    assert as_tensor(np.arange(3), like=like, dtype=torch.long).dtype == torch.long


def test_follows_a_module_through_its_parameters_and_buffers():
    module = gpytorch.kernels.RBFKernel().double().to("meta")
    assert (device_of(module).type, dtype_of(module)) == ("meta", torch.float64)
    assert as_tensor(np.ones(2), like=module).device.type == "meta"
    buffers_only = torch.nn.Module()
    buffers_only.register_buffer("shift", torch.zeros(2, dtype=torch.float32, device="meta"))
    assert (device_of(buffers_only).type, dtype_of(buffers_only)) == ("meta", torch.float32)
    empty = torch.nn.Module()
    assert (device_of(empty).type, dtype_of(empty)) == ("cpu", torch.float64)


def test_a_tensor_is_moved_and_negative_strides_are_copied():
    like = torch.empty(0, dtype=torch.float64, device="meta")
    moved = as_tensor(torch.ones(2, dtype=torch.float32), like=like)
    assert (moved.device.type, moved.dtype) == ("meta", torch.float64)
    values = np.arange(4.0)
    np.testing.assert_array_equal(as_tensor(values[::-1]).numpy(), values[::-1])


def test_like_of_another_type_is_refused():
    with pytest.raises(TypeError, match="like must be a torch.Tensor"):
        as_tensor(np.ones(2), like=np.ones(2))


def test_to_numpy_detaches_and_passes_other_values_through():
    tensor = torch.ones(3, dtype=torch.float64, requires_grad=True)
    values = to_numpy(tensor * 2.0)
    assert isinstance(values, np.ndarray) and values.tolist() == [2.0, 2.0, 2.0]
    assert to_numpy([1, 2]) == [1, 2]


def test_gpytorch_kernel_and_quadrature_build_inputs_on_the_module_device():
    module = gpytorch.kernels.ScaleKernel(gpytorch.kernels.MaternKernel(nu=2.5))
    kernel = GPyTorchKernel(module)
    kernel.module.to("meta")
    inputs = kernel._module_input(np.ones((4, 2)))
    assert (inputs.device.type, inputs.dtype) == ("meta", torch.float64)
    path, delta = _path(np.ones((2, 3)), np.zeros(3), np.linspace(0, 1, 5), kernel.module)
    assert {path.device.type, delta.device.type} == {"meta"}


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")
def test_from_gpytorch_explains_a_cuda_model_as_its_cpu_copy():
    rng = np.random.default_rng(0)
    X, Xq = rng.normal(size=(20, 2)), rng.normal(size=(3, 2))
    y = np.sin(X[:, 0]) + X[:, 1]

    def model_on(device):
        likelihood = gpytorch.likelihoods.GaussianLikelihood().double()
        train = torch.as_tensor(X, device=device), torch.as_tensor(y, device=device)

        class Model(gpytorch.models.ExactGP):
            def __init__(self):
                super().__init__(*train, likelihood)
                self.mean_module = gpytorch.means.ConstantMean()
                self.covar_module = gpytorch.kernels.ScaleKernel(
                    gpytorch.kernels.MaternKernel(nu=2.5)
                )

            def forward(self, x):
                return gpytorch.distributions.MultivariateNormal(
                    self.mean_module(x), self.covar_module(x)
                )

        return gx.from_gpytorch(Model().double().to(device), likelihood.to(device))

    on_gpu = gx.integrated_gradients(model_on("cuda"), Xq, n_steps=16)
    on_cpu = gx.integrated_gradients(model_on("cpu"), Xq, n_steps=16)
    np.testing.assert_allclose(on_gpu.mean, on_cpu.mean, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(on_gpu.cov, on_cpu.cov, rtol=1e-9, atol=1e-12)
