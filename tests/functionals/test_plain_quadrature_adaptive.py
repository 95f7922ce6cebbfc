"""Plain (non-stationary) Gauss-Legendre quadrature adapts its node count (issue 10, class 3):
a periodic kernel over many periods gave ``sum(attr) = 13.9`` against ``f(x) - f(b) = 0.15``
and indefinite covariances, silently. References: completeness targets recomputed from the
posterior's joint predictive distribution, and a fixed 1024-node rule (converged)."""

from __future__ import annotations

import warnings

import gpytorch
import numpy as np
import pytest
import torch

import gpexplain as gx
from gpexplain.functionals.quadrature import integrated_gradient_functionals, quadrature_rule


@pytest.fixture(scope="module")
def periodic():
    rng = np.random.default_rng(0)
    X = rng.uniform(0.0, 3.0, size=(30, 2))
    kernel = gpytorch.kernels.ScaleKernel(gpytorch.kernels.PeriodicKernel(ard_num_dims=2))
    kernel = kernel.double()
    kernel.base_kernel.period_length = torch.tensor([[0.7, 1.1]], dtype=torch.float64)
    kernel.base_kernel.lengthscale = torch.tensor([[0.8, 1.2]], dtype=torch.float64)
    posterior = gx.ExactPosterior(X, np.sin(2 * X[:, 0]) + X[:, 1], kernel, 0.01)
    return posterior, X


def test_many_periods_converge_and_stay_silent(periodic):
    posterior, X = periodic
    Xq, baseline = X[:3] + 5.0, X.mean(0)  # ~7 and ~5 periods along the path
    with warnings.catch_warnings():
        warnings.simplefilter("error", gx.CompletenessWarning)
        attr = gx.integrated_gradients(posterior, Xq, baseline)
        mean_only = gx.integrated_gradients(posterior, Xq, baseline, return_cov=False)
    assert "gauss-legendre quadrature" in attr.method
    mean, cov = posterior.predict(np.vstack([Xq, baseline]), return_cov=True)
    target_var = np.diag(cov)[:3] - 2 * cov[:3, 3] + cov[3, 3]
    np.testing.assert_allclose(attr.mean.sum(1), mean[:3] - mean[3], rtol=0, atol=1e-9)
    np.testing.assert_allclose(attr.cov.sum((1, 2)), target_var, rtol=0, atol=1e-9)
    np.testing.assert_allclose(mean_only.mean, attr.mean, rtol=0, atol=1e-9)
    # Against a fixed rule with 1024 nodes (64 nodes alone gave a mean gap of 2.1).
    nodes, weights = quadrature_rule("gauss-legendre", 1024)
    cross, _ = integrated_gradient_functionals(
        posterior.kernel.torch_kernel(2), Xq, baseline, posterior.train_inputs, nodes, weights
    )
    np.testing.assert_allclose(attr.mean, cross @ posterior.alpha, rtol=0, atol=1e-9)


def test_beyond_the_node_budget_it_warns_with_the_gap(periodic):
    posterior, X = periodic
    with pytest.warns(gx.CompletenessWarning, match=r"gauss-legendre quadrature.* up to"):
        gx.integrated_gradients(posterior, X[:1] + 100.0, X.mean(0), n_steps=16)


def test_explicit_low_order_rules_are_not_refined(periodic):
    posterior, X = periodic
    with pytest.warns(gx.CompletenessWarning, match=r"trapezoid quadrature, n_steps=8"):
        gx.integrated_gradients(posterior, X[:2] + 5.0, X.mean(0), rule="trapezoid", n_steps=8)


def test_the_mean_does_not_depend_on_return_cov_where_the_rule_does_not_converge():
    """The fuzz campaign's case (issue 27 item 21): a periodic kernel with a 0.01 lengthscale
    on paths thousands of periods long, near-duplicate training rows, noise 8e-10. Neither
    rule converges (both warn), but the cross term was refined jointly with the prior term
    under return_cov=True: the mean was 8e-3 there and 2e-15 without the covariance, with
    predictions of 1e-16. The cross term is now refined by its own identity in both."""
    X = np.array([[99.99941562130202, 99.9930161260646, 99.99469225046425, 100.01966638651385],
                  [99.99068927755593, 99.95266330572103, 100.0032142010953, 99.9935092339204],
                  [99.99941562130198, 99.99301612606499, 99.99469225046475, 100.01966638651382]])
    y = np.array([0.24118571334898242, 0.5163109855580894, 0.27679386032538295])
    query = np.array([[102.52113850308731, 82.40952193572048, 242.89551230389606,
                       101.03231920945507],
                      [110.86606483386225, 153.7809135228365, 181.86128843820572,
                       123.50177852646596],
                      [116.51564791956514, 134.4757794351996, -15.761444257370925,
                       93.0431164866006]])
    lengthscale = torch.tensor([[0.010904695825150227, 0.04019380429470007, 0.2007827372752678,
                                 0.010904695825150227]], dtype=torch.float64)
    base = gpytorch.kernels.PeriodicKernel(ard_num_dims=4).double()
    base.lengthscale, base.period_length = lengthscale, 3.0 * lengthscale
    module = gpytorch.kernels.ScaleKernel(base).double()
    module.outputscale = torch.tensor(0.2716545144557929, dtype=torch.float64)
    posterior = gx.ExactPosterior(X, y, gx.kernels.GPyTorchKernel(module),
                                  noise=7.715934104430908e-10)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        full = gx.integrated_gradients(posterior, query, n_steps=16)
        light = gx.integrated_gradients(posterior, query, n_steps=16, return_cov=False)
    np.testing.assert_array_equal(full.mean, light.mean)
