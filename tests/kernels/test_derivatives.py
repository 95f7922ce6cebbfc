"""Kernel input derivatives (gradient cross term and derivative-kernel prior term).

Every value is checked against ``tests.reference.kernel_derivatives_mpmath``: the kernels'
textbook formulas differentiated by central differences at 80 digits with step 1e-20 (error
bound there: below 1e-19 relative), so the tolerance 1e-10 relative is set by float64 round-off
in the code under test, not by the reference.
"""

from __future__ import annotations

import gpytorch.kernels as gk
import numpy as np
import pytest
import torch

from gpexplain.functionals.gradient import Gradient
from gpexplain.kernels.derivatives import SUPPORTED_KERNELS, check_differentiable
from gpexplain.kernels.gpytorch_adapter import GPyTorchKernel, input_scaled
from gpexplain.kernels.rbf import RBF
from tests.reference import kernel_derivatives_mpmath as ref

RTOL = 1e-10


def gradient_cross(kernel, X, Z):
    """``d/dx_i k(x_p, z_n)`` by the scheme the Gradient functional picks for the kernel."""
    return Gradient().bind(kernel, Z).cross(X)


def gradient_prior(kernel, X):
    """``d_i d'_j k(x_p, x_p)`` by the scheme the Gradient functional picks for the kernel."""
    return Gradient().bind(kernel, X).prior(X)


def _points():
    rng = np.random.default_rng(3)
    X = rng.uniform(-2.0, 2.0, size=(3, 3))
    Z = rng.uniform(-2.0, 2.0, size=(4, 3))
    Z[0] = X[1]  # a query coinciding with a training point: zero distance in the cross term
    return X, Z


def _values(parameter):
    """The float64 hyperparameters the module actually uses (after its constraint transform)."""
    return parameter.detach().numpy().reshape(-1)


def _set(module, **values):
    module.double()
    for name, value in values.items():
        setattr(module, name, torch.as_tensor(value, dtype=torch.float64))
    return module


def _matern52_ard():
    base = _set(gk.MaternKernel(nu=2.5, ard_num_dims=3), lengthscale=[0.7, 1.3, 2.1])
    module = _set(gk.ScaleKernel(base), outputscale=1.6)
    return module, ref.matern(2.5, _values(base.lengthscale), _values(module.outputscale)[0])


def _matern32_isotropic():
    module = _set(gk.MaternKernel(nu=1.5), lengthscale=0.9)
    return module, ref.matern(1.5, [_values(module.lengthscale)[0]] * 3)


def _rational_quadratic():
    base = _set(gk.RQKernel(ard_num_dims=3), lengthscale=[0.8, 1.5, 1.1], alpha=0.7)
    module = _set(gk.ScaleKernel(base), outputscale=0.6)
    kernel = ref.rational_quadratic(
        _values(base.alpha)[0], _values(base.lengthscale), _values(module.outputscale)[0]
    )
    return module, kernel


def _periodic():
    module = _set(
        gk.PeriodicKernel(ard_num_dims=3),
        period_length=[1.5, 2.0, 3.0],
        lengthscale=[0.8, 1.1, 1.6],
    )
    return module, ref.periodic(_values(module.period_length), _values(module.lengthscale))


def _random_fourier_features():
    base = _set(gk.RFFKernel(num_samples=4, ard_num_dims=3), lengthscale=[0.9, 1.3, 0.6])
    weights = np.random.default_rng(8).normal(size=(3, 4))
    base.register_buffer("randn_weights", torch.as_tensor(weights))
    module = _set(gk.ScaleKernel(base), outputscale=1.4)
    kernel = ref.random_fourier(
        weights, _values(base.lengthscale), _values(module.outputscale)[0]
    )
    return module, kernel


def _sum_with_active_dims():
    rbf = _set(gk.RBFKernel(ard_num_dims=2, active_dims=[0, 2]), lengthscale=[0.6, 1.7])
    scaled = _set(gk.ScaleKernel(rbf), outputscale=2.0)
    matern = _set(gk.MaternKernel(nu=2.5, active_dims=[1]), lengthscale=0.5)
    module = gk.AdditiveKernel(scaled, matern)
    kernel = ref.add(
        ref.on_dims(ref.rbf(_values(rbf.lengthscale), _values(scaled.outputscale)[0]), [0, 2]),
        ref.on_dims(ref.matern(2.5, _values(matern.lengthscale)), [1]),
    )
    return module, kernel


def _product_overlapping_dims():
    rbf = _set(gk.RBFKernel(ard_num_dims=2, active_dims=[0, 1]), lengthscale=[0.9, 1.2])
    matern = _set(
        gk.MaternKernel(nu=1.5, ard_num_dims=2, active_dims=[1, 2]), lengthscale=[0.8, 1.4]
    )
    module = gk.ProductKernel(rbf, matern)
    kernel = ref.multiply(
        ref.on_dims(ref.rbf(_values(rbf.lengthscale)), [0, 1]),
        ref.on_dims(ref.matern(1.5, _values(matern.lengthscale)), [1, 2]),
    )
    return module, kernel


def _product_with_linear_plus_constant():
    rbf = _set(gk.RBFKernel(ard_num_dims=3), lengthscale=[1.1, 0.7, 1.9])
    linear = _set(gk.LinearKernel(), variance=0.4)
    constant = _set(gk.ConstantKernel(), constant=0.3)
    module = gk.ScaleKernel(rbf) * linear + constant
    module.double()
    outputscale = _values(module.kernels[0].kernels[0].outputscale)[0]
    constant_value = float(_values(constant.constant)[0])
    kernel = ref.add(
        ref.multiply(
            ref.rbf(_values(rbf.lengthscale), outputscale), ref.linear(_values(linear.variance)[0])
        ),
        lambda x, z: ref.mpf(constant_value),
    )
    return module, kernel


def _product_of_linears_times_rbf():
    # Linear factors have nonzero first derivatives at x = x', so the product rule's
    # d_i k1 d'_j k2 terms matter here (they vanish when a factor is stationary).
    first = _set(gk.LinearKernel(active_dims=[0, 1]), variance=0.7)
    second = _set(gk.LinearKernel(active_dims=[1, 2]), variance=1.3)
    rbf = _set(gk.RBFKernel(), lengthscale=1.5)
    module = gk.ProductKernel(first, second, rbf)
    kernel = ref.multiply(
        ref.on_dims(ref.linear(_values(first.variance)[0]), [0, 1]),
        ref.on_dims(ref.linear(_values(second.variance)[0]), [1, 2]),
        ref.rbf([_values(rbf.lengthscale)[0]] * 3),
    )
    return module, kernel


def _input_scaled_matern():
    # GPRegressor wraps a user kernel fitted on standardised data this way.
    module, kernel = _matern52_ard()
    shift, scale = np.array([0.3, -1.2, 2.0]), np.array([0.5, 2.5, 1.7])
    return input_scaled(module, shift, scale, 3.1), ref.input_scaled(kernel, shift, scale, 3.1)


def _input_scaled_sum_restricted_by_scale_kernel():
    # active_dims on composite nodes and an input scaling above them: the tree walk composes
    # the slices and the affine map down to each leaf.
    rbf = _set(gk.RBFKernel(ard_num_dims=2, active_dims=[0, 1]), lengthscale=[0.6, 1.7])
    matern = _set(gk.MaternKernel(nu=1.5, active_dims=[1]), lengthscale=0.5)
    inner = gk.ScaleKernel(gk.AdditiveKernel(rbf, matern), active_dims=[2, 0]).double()
    inner.outputscale = torch.tensor(0.8, dtype=torch.float64)
    shift, scale = np.array([0.1, 0.2, -0.3]), np.array([1.5, 0.7, 2.0])
    kernel = ref.on_dims(
        ref.add(
            ref.on_dims(ref.rbf(_values(rbf.lengthscale)), [0, 1]),
            ref.on_dims(ref.matern(1.5, _values(matern.lengthscale)), [1]),
        ),
        [2, 0],
    )
    kernel = ref.input_scaled(ref.multiply(kernel, lambda x, z: ref.mpf(0.8)), shift, scale)
    return input_scaled(inner, shift, scale), kernel


CASES = {
    "matern52-ard-scaled": _matern52_ard,
    "matern32-isotropic": _matern32_isotropic,
    "rational-quadratic": _rational_quadratic,
    "periodic": _periodic,
    "random-fourier-features": _random_fourier_features,
    "sum-active-dims": _sum_with_active_dims,
    "product-overlapping-dims": _product_overlapping_dims,
    "product-linear-plus-constant": _product_with_linear_plus_constant,
    "product-of-linears-times-rbf": _product_of_linears_times_rbf,
    "input-scaled-matern": _input_scaled_matern,
    "input-scaled-sum-restricted": _input_scaled_sum_restricted_by_scale_kernel,
}


def _close(actual, expected):
    expected = np.asarray(expected, dtype=float)
    scale = max(float(np.max(np.abs(expected))), 1e-300)
    np.testing.assert_allclose(actual, expected, rtol=0, atol=RTOL * scale)


@pytest.mark.parametrize("case", list(CASES))
def test_prior_matches_mpmath_mixed_derivative(case):
    module, reference = CASES[case]()
    X, _ = _points()
    prior = gradient_prior(GPyTorchKernel(module), X)
    assert prior.shape == (3, 3, 3)
    _close(prior, ref.mixed_derivative_same_point(reference, X))
    # A covariance: symmetric positive semi-definite.
    np.testing.assert_array_equal(prior, np.swapaxes(prior, 1, 2))
    assert np.linalg.eigvalsh(prior).min() >= -1e-12 * np.abs(prior).max()


@pytest.mark.parametrize("case", list(CASES))
def test_cross_matches_mpmath_first_derivative(case):
    module, reference = CASES[case]()
    X, Z = _points()
    cross = gradient_cross(GPyTorchKernel(module), X, Z)
    assert cross.shape == (3, 3, 4)
    _close(cross, ref.cross_derivative(reference, X, Z))


def test_rbf_closed_form_matches_autograd_and_mpmath():
    X, Z = _points()
    kernel = RBF(lengthscale=[0.8, 1.9, 1.2], variance=1.7)
    wrapped = GPyTorchKernel(
        _set(
            gk.ScaleKernel(_set(gk.RBFKernel(ard_num_dims=3), lengthscale=kernel.lengthscale)),
            outputscale=kernel.variance,
        )
    )
    cross, prior = kernel.gradient_cross(X, Z), kernel.gradient_prior(X)
    np.testing.assert_allclose(cross, gradient_cross(wrapped, X, Z), rtol=0, atol=1e-13)
    np.testing.assert_allclose(prior, gradient_prior(wrapped, X), rtol=0, atol=1e-13)
    reference = ref.rbf(kernel.lengthscale, kernel.variance)
    _close(cross, ref.cross_derivative(reference, X, Z))
    _close(prior, ref.mixed_derivative_same_point(reference, X))
    # The dispatching functions use the closed form for gpexplain's RBF.
    np.testing.assert_array_equal(gradient_cross(kernel, X, Z), cross)
    np.testing.assert_array_equal(gradient_prior(kernel, X), prior)


def test_rbf_isotropic_and_infinite_lengthscale():
    X, Z = _points()
    isotropic = RBF(lengthscale=1.3, variance=0.5)
    _close(isotropic.gradient_prior(X), np.broadcast_to(0.5 / 1.3**2 * np.eye(3), (3, 3, 3)))
    switched_off = RBF(lengthscale=[0.8, np.inf, 1.2], variance=1.1)
    cross, prior = switched_off.gradient_cross(X, Z), switched_off.gradient_prior(X)
    np.testing.assert_array_equal(cross[:, 1, :], 0.0)
    np.testing.assert_array_equal(prior[:, 1, :], 0.0)
    np.testing.assert_array_equal(prior[:, :, 1], 0.0)
    # Through its torch kernel (active_dims without feature 1) the same zeros come out.
    wrapped = GPyTorchKernel(switched_off.torch_kernel(3))
    np.testing.assert_allclose(gradient_cross(wrapped, X, Z), cross, rtol=0, atol=1e-13)
    np.testing.assert_allclose(gradient_prior(wrapped, X), prior, rtol=0, atol=1e-13)


# -- kernels without a derivative process, unsupported kernels ---------------------------------
@pytest.mark.parametrize(
    "module",
    [
        gk.MaternKernel(nu=0.5),
        gk.ScaleKernel(gk.MaternKernel(nu=0.5, ard_num_dims=3)),
        gk.ProductKernel(gk.RBFKernel(), gk.MaternKernel(nu=0.5, active_dims=[1])),
    ],
    ids=["bare", "scaled", "in-product"],
)
def test_matern_one_half_has_no_derivative_process(module):
    X, Z = _points()
    kernel = GPyTorchKernel(module)
    for compute in (lambda: gradient_prior(kernel, X), lambda: gradient_cross(kernel, X, Z)):
        with pytest.raises(ValueError, match=r"MaternKernel.*nu=0\.5.*not mean-square"):
            compute()


def test_unsupported_kernel_is_named_and_supported_ones_listed():
    kernel = GPyTorchKernel(gk.PolynomialKernel(power=2))
    X, Z = _points()
    with pytest.raises(ValueError, match="PolynomialKernel") as error:
        gradient_prior(kernel, X)
    assert "Supported kernels" in str(error.value) and SUPPORTED_KERNELS[2] in str(error.value)
    with pytest.raises(ValueError, match="PolynomialKernel"):
        gradient_cross(kernel, X, Z)


def test_random_fourier_kernel_without_frequencies_is_refused():
    with pytest.raises(ValueError, match="RFFKernel has not drawn its random frequencies"):
        check_differentiable(gk.RFFKernel(num_samples=3).double(), 3)


def test_batched_and_mismatched_kernels_are_refused():
    with pytest.raises(ValueError, match="batch_shape"):
        check_differentiable(GPyTorchKernel(gk.RBFKernel(batch_shape=torch.Size([2]))).module, 3)
    with pytest.raises(ValueError, match="2 lengthscale values but reads 3 features"):
        check_differentiable(GPyTorchKernel(gk.RBFKernel(ard_num_dims=2)).module, 3)
    with pytest.raises(ValueError, match=r"active_dims \[0, 5\]"):
        check_differentiable(GPyTorchKernel(gk.RBFKernel(active_dims=[0, 5])).module, 3)


@pytest.mark.parametrize("make", [
    lambda: gk.LinearKernel(),
    lambda: gk.ScaleKernel(gk.MaternKernel(nu=2.5)),
    lambda: gk.ProductKernel(gk.RBFKernel(), gk.LinearKernel()),
])
def test_cross_term_when_every_query_row_equals_every_basis_row(make):
    # GPyTorch's equal-arguments shortcut used to double a linear kernel's gradient here.
    from gpexplain.kernels import GPyTorchKernel
    from gpexplain.kernels.derivatives import gradient_cross

    kernel = GPyTorchKernel(make().double())
    point = np.array([[0.7, -1.2]])
    X, Z = np.repeat(point, 2, axis=0), np.repeat(point, 3, axis=0)
    cross = gradient_cross(kernel.module, X, Z)
    step = 1e-6
    for i in range(2):
        shift = np.zeros(2)
        shift[i] = step
        expected = (kernel(X + shift, Z) - kernel(X - shift, Z)) / (2 * step)
        np.testing.assert_allclose(cross[:, i, :], expected, rtol=1e-6, atol=1e-8)
