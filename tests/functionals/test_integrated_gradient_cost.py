"""Quadrature combinations that would run for minutes per point are refused up front, with the
reason (issue 10, class 9: trapezoid on 30 features and huge n_steps ran with no progress)."""

from __future__ import annotations

import time

import gpytorch
import numpy as np
import pytest

import gpexplain as gx
from gpexplain.functionals.integrated_gradient import MAX_N_STEPS, MAX_PRIOR_EVALUATIONS


@pytest.fixture(scope="module")
def wide_posterior():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(12, 30))
    kernel = gpytorch.kernels.ScaleKernel(gpytorch.kernels.MaternKernel(nu=2.5)).double()
    return gx.ExactPosterior(X, X[:, 0], kernel, 0.1), X


@pytest.mark.parametrize("n_steps", [MAX_N_STEPS + 1, 10**9])
def test_n_steps_above_the_documented_maximum_is_refused(wide_posterior, n_steps):
    posterior, X = wide_posterior
    with pytest.raises(ValueError, match=rf"n_steps must be at most {MAX_N_STEPS}, got {n_steps}"):
        gx.integrated_gradients(posterior, X[:1], n_steps=n_steps)


def test_quadratic_prior_cost_is_refused_quickly_with_the_estimate(wide_posterior):
    posterior, X = wide_posterior
    # Trapezoid, 1024 intervals, 30 features: 1025 x 1026 node pairs x 30 derivatives per
    # point (the staggered prior term), 40 s to 2 min per row on one core.
    expected = 1025 * 1026 * 30
    assert expected > MAX_PRIOR_EVALUATIONS
    start = time.perf_counter()
    with pytest.raises(ValueError, match=r"would cost 3\.15e\+07 kernel second derivatives.*"
                                          r"rule 'trapezoid', n_steps=1024, 30 features"):
        gx.integrated_gradients(posterior, X[:1] + 0.5, rule="trapezoid", n_steps=1024)
    assert time.perf_counter() - start < 5.0  # refused before the work, not after
    # The mean alone stays available at that resolution (trapezoid: with a measured gap).
    with pytest.warns(gx.CompletenessWarning, match=r"trapezoid quadrature, n_steps=1024"):
        mean_only = gx.integrated_gradients(
            posterior, X[:1] + 0.5, rule="trapezoid", n_steps=1024, return_cov=False
        )
    assert mean_only.cov is None and np.all(np.isfinite(mean_only.mean))


def test_baseline_distribution_cost_is_refused(wide_posterior):
    posterior, X = wide_posterior
    # 12 baselines: 66 two-path terms of 2 x 64^2 node pairs x 30 features each.
    with pytest.raises(ValueError, match=r"12 baseline\(s\).*fewer baselines"):
        gx.integrated_gradients(posterior, X[:1] + 0.5, baseline=X, n_steps=128)


def test_mean_only_skips_the_prior_term(wide_posterior, monkeypatch):
    # The prior term's node pairs (its staggered rule) are the expensive part; the mean does
    # not need them (they made the mean-only call above take 90 s per point).
    from gpexplain.functionals import quadrature

    posterior, X = wide_posterior
    with_cov = gx.integrated_gradients(posterior, X[:2] + 0.5, rule="trapezoid", n_steps=64)

    def refuse(nodes):
        raise AssertionError("the prior term was computed for return_cov=False")

    monkeypatch.setattr(quadrature, "staggered_rule", refuse)
    with pytest.warns(gx.CompletenessWarning):
        mean_only = gx.integrated_gradients(posterior, X[:2] + 0.5, rule="trapezoid",
                                            n_steps=64, return_cov=False)
    np.testing.assert_allclose(mean_only.mean, with_cov.mean, rtol=0,
                               atol=1e-12 * np.abs(with_cov.mean).max())
