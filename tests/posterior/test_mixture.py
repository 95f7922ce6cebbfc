"""MixturePosterior: moments of a mixture of GP posteriors against brute force and Monte Carlo."""

from __future__ import annotations

import numpy as np
import pytest

from gpexplain.kernels.random_features import RandomFeatureKernel
from gpexplain.kernels.rbf import RBF
from gpexplain.posterior.exact import ExactPosterior
from gpexplain.posterior.mixture import MixturePosterior, check_mixture_weights
from gpexplain.posterior.random_features import RandomFeaturePosterior


def _components(n_components=3, n=20, M=6, seed=1):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    y = np.cos(2 * X[:, 0]) * X[:, 1] + 0.1 * rng.normal(size=n)
    components = [
        RandomFeaturePosterior(
            X, y, RandomFeatureKernel.from_rbf(RBF([0.7, 1.5], 1.2), M, random_state=r), 0.05,
            mean=0.3, feature_names=["a", "b"],
        )
        for r in range(n_components)
    ]
    return X, y, components, rng


def _raw_moment_reference(components, weights, Xq):
    """Mixture covariance from raw moments: E[f f^T] - E[f] E[f]^T (a different formula)."""
    second, first = 0.0, 0.0
    for w, c in zip(weights, components, strict=True):
        m, C = c.predict(Xq, return_cov=True)
        second = second + w * (C + np.outer(m, m))
        first = first + w * m
    return first, second - np.outer(first, first)


def test_predict_matches_raw_moments_and_monte_carlo():
    X, _, components, rng = _components()
    weights = np.array([0.5, 0.3, 0.2])
    mixture = MixturePosterior(components, weights)
    Xq = rng.normal(size=(4, 2))
    mean, cov = mixture.predict(Xq, return_cov=True)
    ref_mean, ref_cov = _raw_moment_reference(components, weights, Xq)
    np.testing.assert_allclose(mean, ref_mean, rtol=0, atol=1e-12)
    np.testing.assert_allclose(cov, ref_cov, rtol=0, atol=1e-12)
    mean_only, var = mixture.predict(Xq)
    np.testing.assert_allclose(mean_only, mean, rtol=0, atol=1e-14)
    np.testing.assert_allclose(var, np.diag(cov), rtol=0, atol=1e-12)
    np.testing.assert_allclose(mixture.predict_mean(Xq), mean, rtol=0, atol=1e-14)

    # Monte Carlo: pick a component by weight, sample f from its Gaussian. Sample means lie
    # within 5 standard errors; sample variances within 5 standard errors of a variance
    # estimate (sqrt((m4 - s^4) / N), estimated from the sample).
    N = 200_000
    picks = rng.choice(3, size=N, p=weights)
    samples = np.empty((N, 4))
    for r, component in enumerate(components):
        m, C = component.predict(Xq, return_cov=True)
        chosen = picks == r
        L = np.linalg.cholesky(C + 1e-12 * np.eye(4))
        samples[chosen] = m + rng.normal(size=(chosen.sum(), 4)) @ L.T
    z_mean = (samples.mean(0) - mean) / (samples.std(0) / np.sqrt(N))
    assert np.all(np.abs(z_mean) < 5)
    centred = samples - samples.mean(0)
    m4 = np.mean(centred**4, axis=0)
    s2 = np.mean(centred**2, axis=0)
    z_var = (s2 - np.diag(cov)) / np.sqrt((m4 - s2**2) / N)
    assert np.all(np.abs(z_var) < 5)


def test_difference_variance_is_the_mixture_variance_of_the_difference():
    X, _, components, rng = _components()
    mixture = MixturePosterior(components)
    Xq, xt = rng.normal(size=(3, 2)), X.mean(0)
    result = mixture.difference_variance(Xq, xt)
    for p in range(3):
        _, cov = mixture.predict(np.vstack([Xq[p], xt]), return_cov=True)
        assert abs(result[p] - (cov[0, 0] + cov[1, 1] - 2 * cov[0, 1])) < 1e-12


def test_single_and_identical_components_reduce_to_the_component():
    X, _, components, rng = _components()
    Xq = rng.normal(size=(3, 2))
    m, C = components[0].predict(Xq, return_cov=True)
    for mixture in (MixturePosterior(components[:1]), MixturePosterior([components[0]] * 4)):
        mean, cov = mixture.predict(Xq, return_cov=True)
        np.testing.assert_allclose(mean, m, rtol=0, atol=1e-14)
        np.testing.assert_allclose(cov, C, rtol=0, atol=1e-14)


def test_interface_delegates_to_components():
    X, _, components, _ = _components()
    mixture = MixturePosterior(components)
    assert mixture.feature_names == ["a", "b"] and mixture.n_features == 2
    np.testing.assert_array_equal(mixture.data_inputs, X)
    np.testing.assert_array_equal(mixture.weights, np.full(3, 1 / 3))
    with pytest.raises(ValueError, match="3 features"):
        mixture.check_inputs(np.ones((2, 3)))


def test_errors():
    X, y, components, _ = _components()
    with pytest.raises(TypeError, match="non-empty"):
        MixturePosterior([])
    with pytest.raises(TypeError, match="list of posteriors"):
        MixturePosterior(components[0])
    with pytest.raises(TypeError, match=r"components\[1\] is a str"):
        MixturePosterior([components[0], "posterior"])
    renamed = ExactPosterior(X, y, RBF(1.0), 0.1, feature_names=["a", "c"])
    with pytest.raises(ValueError, match="features"):
        MixturePosterior([components[0], renamed])
    other_data = ExactPosterior(X + 1, y, RBF(1.0), 0.1, feature_names=["a", "b"])
    with pytest.raises(ValueError, match="other inputs"):
        MixturePosterior([components[0], other_data])
    with pytest.raises(ValueError, match="sum to 1"):
        MixturePosterior(components, [0.5, 0.5, 0.5])
    with pytest.raises(ValueError, match="non-negative"):
        MixturePosterior(components, [1.5, -0.5, 0.0])
    with pytest.raises(ValueError, match="2 values but there are 3"):
        MixturePosterior(components, [0.5, 0.5])
    np.testing.assert_array_equal(check_mixture_weights([0.25, 0.75], 2), [0.25, 0.75])
