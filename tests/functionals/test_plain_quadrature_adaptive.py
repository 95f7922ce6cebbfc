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
