"""Errors that used to come from torch, GPyTorch or linear_operator now name our argument and
what to change (issue 10, "unclear errors"); the original exception is kept as __cause__."""

from __future__ import annotations

import gpytorch
import numpy as np
import pytest
from linear_operator.utils.errors import NotPSDError

import gpexplain as gx
from gpexplain.models import FitError

rng = np.random.default_rng(0)
X = rng.normal(size=(12, 2)) * [1.0, 3.0]
y = np.sin(X[:, 0])


@pytest.mark.parametrize("lengthscale", [1e-9, [1e-7, 1.0]])
def test_starting_lengthscale_below_the_bound_is_named(lengthscale):
    # GPyTorch raised a RuntimeError about a *noise* constraint.
    with pytest.raises(ValueError, match=r"kernel lengthscale .* below the optimiser's lower "
                                         r"bound, 0.0001 standard deviations"):
        gx.GPRegressor(kernel=gx.kernels.RBF(lengthscale)).fit(X, y)
    # Kept as given, it is no start and is accepted.
    gx.GPRegressor(kernel=gx.kernels.RBF(lengthscale), optimizer=None, noise=0.1).fit(X, y)


def test_negative_stride_arrays_with_gpytorch_kernels():
    # torch refuses views with negative strides ("At least one stride ... is negative").
    kernel = gx.kernels.as_kernel(gpytorch.kernels.MaternKernel(nu=2.5))
    np.testing.assert_array_equal(kernel(X[::-1], X[:, ::-1]),
                                  kernel(X[::-1].copy(), X[:, ::-1].copy()))
    np.testing.assert_array_equal(kernel.diag(X[::-1]), np.ones(len(X)))


def test_svgp_not_psd_becomes_a_fit_error_with_our_message(monkeypatch):
    def collapse(*args, **kwargs):
        raise NotPSDError("Matrix not positive definite after repeatedly adding jitter")

    monkeypatch.setattr(gx.SparseGPRegressor, "_train", collapse)
    with pytest.raises(FitError, match="n_inducing") as caught:
        gx.SparseGPRegressor(n_inducing=4, n_epochs=1).fit(X, y)
    assert "Matrix not positive definite" not in str(caught.value)
    assert isinstance(caught.value.__cause__, NotPSDError)


def test_gpx_failed_starts_carry_no_torch_text(monkeypatch):
    from gpexplain.models import gpx_regressor

    def singular(*args, **kwargs):
        raise NotPSDError("Matrix not positive definite after repeatedly adding jitter up to 1e-06")

    monkeypatch.setattr(gpx_regressor, "run_lbfgs", singular)
    with pytest.raises(FitError) as caught:
        gx.GPXRegressor(n_restarts=1).fit(X, y)
    message = str(caught.value)
    assert "failed from every starting point" in message and "n_restarts" in message
    assert "Matrix not positive definite" not in message


def test_lengthscales_whose_powers_overflow_are_refused():
    # RBF(1e-300): gradients were inf * 0 = NaN, refused as "a bug in gpexplain".
    with pytest.raises(ValueError, match="lengthscale must be at least 1e-150"):
        gx.kernels.RBF([1e-300, 1.0])
    # A GPyTorch kernel with such a lengthscale gives NaN kernel values; the Cholesky solve
    # failed with "array must not contain infs or NaNs".
    import torch

    base = gpytorch.kernels.MaternKernel(nu=2.5, ard_num_dims=2).double()
    base.lengthscale = torch.tensor([1e-300, 1.0], dtype=torch.float64)
    with pytest.raises(ValueError, match=r"(?s)kernel .* gives non-finite values on X"):
        gx.ExactPosterior(X, y, base, noise=0.1)


@pytest.mark.parametrize("kind", ["matern52", "periodic"])
def test_every_lengthscale_infinite_gives_zero_attributions_not_a_torch_error(kind):
    # A kernel whose every lengthscale is infinite is constant: f(x) - f(xt) = 0 exactly, so
    # every attribution and its covariance are 0 (torch's autograd used to raise "One of the
    # differentiated Tensors appears to not have been used in the graph").
    import gpytorch
    import torch

    base = (gpytorch.kernels.MaternKernel(nu=2.5, ard_num_dims=2) if kind == "matern52"
            else gpytorch.kernels.PeriodicKernel(ard_num_dims=2))
    kernel = gpytorch.kernels.ScaleKernel(base).double()
    kernel.base_kernel.lengthscale = torch.full((1, 2), float("inf"), dtype=torch.float64)
    X = np.random.default_rng(0).normal(size=(10, 2))
    posterior = gx.ExactPosterior(X, X[:, 0], kernel, 0.1)
    attr = gx.integrated_gradients(posterior, X[:2], X.mean(0))
    assert np.all(attr.mean == 0.0) and np.all(attr.cov == 0.0)


@pytest.mark.parametrize("estimator", [
    lambda: gx.GPRegressor(n_restarts=0), lambda: gx.GPXRegressor(),
    lambda: gx.SparseGPRegressor(n_inducing=4), lambda: gx.AdditiveGPRegressor(),
])
def test_a_target_float64_cannot_square_is_refused_naming_its_row(estimator):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(12, 2))
    y = X[:, 0].copy()
    y[7] = -3e155
    with pytest.raises(ValueError, match=r"y has the value -3e\+155 at row 7, beyond what float64"):
        estimator().fit(X, y)


@pytest.mark.parametrize("kernel", [
    gx.kernels.RBF([1.0, 2.0]),
    gpytorch.kernels.ScaleKernel(gpytorch.kernels.MaternKernel(nu=2.5)).double(),
], ids=["rbf", "matern"])
@pytest.mark.parametrize("explain", [gx.integrated_gradients, gx.gradients])
def test_a_point_astronomically_far_from_the_data_is_refused_naming_row_and_column(
    kernel, explain
):
    """Issue 27 item 20c: at 1e200 the quadrature failed with an IndexError (an overflow in
    its rule) and the RBF closed form with 'produced a non-finite value ... a bug'."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(12, 2))
    posterior = gx.ExactPosterior(X, X[:, 0], kernel, 0.1, feature_names=["age", "dose"])
    query = np.array([[0.1, 0.2], [0.3, -1e200]])
    with pytest.raises(ValueError, match=r"X has the value -1e\+200 at row 1, column 'dose', "
                                         r"more than 1e\+150 from the training range"):
        explain(posterior, query)
    with pytest.raises(ValueError, match=r"at row 1, column 'dose'"):
        posterior.predict(query)
    with pytest.raises(ValueError, match=r"baseline has the value -1e\+200 at row 0, column "
                                         r"'dose'"):
        gx.integrated_gradients(posterior, query[:1], baseline=query[1])


def test_a_point_far_but_within_reach_explains_to_the_prior():
    """At 1e150 units (the edge of what is accepted) the RBF closed form is still finite:
    k(x, Z) = 0, so the attributions complete to 0 - f(baseline)."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(12, 2))
    posterior = gx.ExactPosterior(X, X[:, 0], gx.kernels.RBF([1.0, 2.0]), 0.1)
    attr = gx.integrated_gradients(posterior, np.array([[1e150, 0.0]]), X[0])
    f_baseline = posterior.predict_mean(X[:1])[0]
    np.testing.assert_allclose(attr.mean.sum(), posterior.mean - f_baseline, atol=1e-12)
    assert np.all(np.isfinite(attr.cov))
