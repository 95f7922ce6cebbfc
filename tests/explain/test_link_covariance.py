"""Posterior covariance of probability-level integrated gradients (binary links) against
Monte Carlo over joint posterior sample paths, its completeness, and on fitted classifiers."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import gpexplain as gx
from tests.reference.link_ig_monte_carlo import integrated_gradient_samples

Z_SCORE = 5.0  # a false alarm has probability below 1e-6 per check
LENGTHSCALE, VARIANCE, NOISE = np.array([1.0, 1.5, 2.0]), 4.0, 0.3


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(20, 3))
    y = 2.0 * (np.sin(X[:, 0]) + 0.5 * X[:, 1]) + 0.1 * rng.normal(size=20)
    return X, y


@pytest.fixture(scope="module")
def posterior(data):
    return gx.ExactPosterior(*data, gx.kernels.RBF(LENGTHSCALE, VARIANCE), NOISE)


BASELINE = np.array([0.5, -0.3, 1.0])
POINTS = np.array([[1.2, 0.4, -0.6], [-2.5, 1.8, 0.9]])  # the second far from the data: wide


@pytest.mark.parametrize("name", ["logit", "probit"])
def test_covariance_matches_monte_carlo_over_joint_sample_paths(data, posterior, name):
    """400k joint posterior samples of (f, grad f) along the path per point: mean and every
    covariance entry within 5 standard errors (the entry's own, from the samples)."""
    result = gx.integrated_gradients(posterior, POINTS, baseline=BASELINE, link=name)
    for p, x in enumerate(POINTS):
        samples = integrated_gradient_samples(name, *data, LENGTHSCALE, VARIANCE, NOISE, x,
                                              BASELINE, 400_000, seed=p)
        mean = samples.mean(0)
        assert np.all(np.abs(mean - result.mean[p])
                      <= Z_SCORE * samples.std(0) / np.sqrt(len(samples)))
        centred = samples - mean
        products = centred[:, :, None] * centred[:, None, :]
        error = products.std(0) / np.sqrt(len(samples))
        np.testing.assert_array_less(np.abs(products.mean(0) - result.cov[p]), Z_SCORE * error)


@pytest.mark.parametrize("name", ["logit", "probit"])
def test_covariance_is_complete_symmetric_and_psd(posterior, name):
    """sum_kl Cov(IG_k, IG_l) = Var(sigma(f(x)) - sigma(f(xt))), computed separately (a
    bivariate expectation of the link at x and xt); the negative class has the same
    covariance and the opposite mean."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = gx.integrated_gradients(posterior, POINTS, baseline=BASELINE, link=name)
        negative = gx.integrated_gradients(posterior, POINTS, baseline=BASELINE, link=name,
                                           target_class=0)
    assert result.completeness_gap()["variance"] <= 1e-9 * result.difference_variance.max()
    np.testing.assert_array_equal(result.cov, np.swapaxes(result.cov, 1, 2))
    eigenvalues = np.linalg.eigvalsh(result.cov)
    assert np.all(eigenvalues[:, 0] > -1e-12 * eigenvalues[:, -1])
    np.testing.assert_allclose(negative.cov, result.cov, rtol=0, atol=1e-15)
    np.testing.assert_allclose(negative.mean, -result.mean, rtol=0, atol=1e-15)
    assert "covariance by second-order Stein" in result.method
