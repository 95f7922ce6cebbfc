"""mixture_attribution: exact mixture moments of attributions, completeness, errors."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from gpexplain.attribution import Attribution
from gpexplain.explain._mixture import mixture_attribution
from gpexplain.explain.gradients import gradients
from gpexplain.explain.integrated_gradients import integrated_gradients
from gpexplain.kernels.random_features import RandomFeatureKernel
from gpexplain.kernels.rbf import RBF
from gpexplain.posterior.mixture import MixturePosterior
from gpexplain.posterior.random_features import RandomFeaturePosterior


def _mixture(n_components=4, seed=2):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(30, 3))
    y = np.sin(X[:, 0]) * X[:, 1] + 0.5 * X[:, 2] + 0.1 * rng.normal(size=30)
    components = [
        RandomFeaturePosterior(
            X, y, RandomFeatureKernel.from_rbf(RBF([0.9, 1.3, 2.0], 1.1), 8, random_state=r), 0.02
        )
        for r in range(n_components)
    ]
    return MixturePosterior(components, np.array([0.1, 0.2, 0.3, 0.4])), rng.normal(size=(3, 3))


def test_moments_match_brute_force_and_completeness_holds():
    mixture, Xq = _mixture()
    parts = [integrated_gradients(c, Xq, "mean") for c in mixture.components]
    combined = mixture_attribution(parts, mixture.weights)
    # Raw-moment reference: E[a a^T] - E[a] E[a]^T.
    w = mixture.weights
    first = sum(wr * a.mean for wr, a in zip(w, parts, strict=True))
    second = sum(
        wr * (a.cov + a.mean[:, :, None] * a.mean[:, None, :])
        for wr, a in zip(w, parts, strict=True)
    )
    np.testing.assert_allclose(combined.mean, first, rtol=0, atol=1e-13)
    np.testing.assert_allclose(
        combined.cov, second - first[:, :, None] * first[:, None, :], rtol=0, atol=1e-13
    )
    # Completeness of the mean and the covariance, against the mixture posterior itself.
    xt = mixture.data_inputs.mean(0)
    np.testing.assert_allclose(combined.prediction, mixture.predict_mean(Xq), atol=1e-13)
    assert abs(combined.baseline_prediction - mixture.predict_mean(xt[None])[0]) < 1e-13
    np.testing.assert_allclose(
        combined.difference_variance, mixture.difference_variance(Xq, xt), rtol=0, atol=1e-13
    )
    gaps = combined.completeness_gap()
    assert gaps["mean"] < 1e-12 and gaps["variance"] < 1e-12
    np.testing.assert_array_equal(combined.baseline, xt)
    assert "mixture of 4 components" in combined.method


def test_covariance_matches_monte_carlo():
    mixture, Xq = _mixture()
    parts = [integrated_gradients(c, Xq[:1], "mean") for c in mixture.components]
    combined = mixture_attribution(parts, mixture.weights)
    rng = np.random.default_rng(9)
    N = 200_000
    picks = rng.choice(4, size=N, p=mixture.weights)
    samples = np.empty((N, 3))
    for r, part in enumerate(parts):
        chosen = picks == r
        samples[chosen] = rng.multivariate_normal(part.mean[0], part.cov[0], size=chosen.sum())
    # Sample mean: 5 standard errors. Sample covariance entries: 5 standard errors of
    # (a_i - mean_i)(a_j - mean_j), estimated from the sample.
    se_mean = samples.std(0) / np.sqrt(N)
    assert np.all(np.abs(samples.mean(0) - combined.mean[0]) < 5 * se_mean)
    centred = samples - samples.mean(0)
    products = centred[:, :, None] * centred[:, None, :]
    se_cov = products.std(0) / np.sqrt(N)
    assert np.all(np.abs(products.mean(0) - combined.cov[0]) < 5 * se_cov)


def test_mean_only_and_equal_weights():
    mixture, Xq = _mixture()
    parts = [integrated_gradients(c, Xq, return_cov=False) for c in mixture.components]
    combined = mixture_attribution(parts)
    assert combined.cov is None and combined.difference_variance is None
    np.testing.assert_allclose(combined.mean, np.mean([a.mean for a in parts], axis=0), atol=1e-14)
    assert combined.completeness_gap()["mean"] < 1e-12


def test_one_component_is_returned_unchanged():
    mixture, Xq = _mixture()
    part = integrated_gradients(mixture.components[0], Xq)
    combined = mixture_attribution([part])
    np.testing.assert_array_equal(combined.mean, part.mean)
    np.testing.assert_allclose(combined.cov, part.cov, rtol=0, atol=0)
    np.testing.assert_array_equal(combined.difference_variance, part.difference_variance)


def test_errors():
    mixture, Xq = _mixture()
    a = integrated_gradients(mixture.components[0], Xq)
    b = integrated_gradients(mixture.components[1], Xq)
    with pytest.raises(TypeError, match="non-empty"):
        mixture_attribution([])
    with pytest.raises(TypeError, match=r"attributions\[1\] is a dict"):
        mixture_attribution([a, {}])
    with pytest.raises(ValueError, match="explained points"):
        mixture_attribution([a, integrated_gradients(mixture.components[1], Xq + 1)])
    with pytest.raises(ValueError, match="baseline"):
        mixture_attribution([a, integrated_gradients(mixture.components[1], Xq, "zeros")])
    with pytest.raises(ValueError, match="covariance"):
        mixture_attribution([a, integrated_gradients(mixture.components[1], Xq, return_cov=False)])
    with pytest.raises(ValueError, match="sum to 1"):
        mixture_attribution([a, b], [0.6, 0.6])
    renamed = dataclasses.replace(b, feature_names=["p", "q", "r"])
    with pytest.raises(ValueError, match="feature names"):
        mixture_attribution([a, renamed])
    assert isinstance(mixture_attribution([a, b], [0.5, 0.5]), Attribution)


def test_gradients_of_a_mixture_posterior_combine_the_components():
    """``gradients`` on a MixturePosterior equals mixture_attribution of per-component runs."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(40, 2))
    y = np.sin(X[:, 0]) + 0.5 * X[:, 1]
    components = [
        RandomFeaturePosterior(
            X, y, RandomFeatureKernel.from_rbf(RBF([1.0, 1.5]), 30, random_state=seed), 0.05
        )
        for seed in range(3)
    ]
    weights = [0.2, 0.3, 0.5]
    mixture = MixturePosterior(components, weights)
    Xq = rng.normal(size=(4, 2))
    combined = gradients(mixture, Xq)
    parts = [gradients(c, Xq) for c in components]
    expected = mixture_attribution(parts, weights)
    np.testing.assert_allclose(combined.mean, expected.mean, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(combined.cov, expected.cov, rtol=1e-12, atol=1e-14)
    # The between-component spread makes the mixture covariance exceed the average one.
    average = sum(w * part.cov for w, part in zip(weights, parts, strict=True))
    assert np.all(np.linalg.eigvalsh(combined.cov - average) > -1e-12)


def test_integrated_gradients_of_a_mixture_with_a_baseline_distribution():
    """Direct call on a MixturePosterior = combination of component runs; still complete."""
    rng = np.random.default_rng(4)
    X = rng.normal(size=(40, 2))
    y = np.sin(X[:, 0]) + 0.5 * X[:, 1] + 0.1 * rng.normal(size=40)
    components = [
        RandomFeaturePosterior(
            X, y, RandomFeatureKernel.from_rbf(RBF([1.0, 1.5]), 30, random_state=seed), 0.05
        )
        for seed in range(3)
    ]
    mixture = MixturePosterior(components)
    Xq, baselines = rng.normal(size=(4, 2)), rng.normal(size=(3, 2))
    combined = integrated_gradients(mixture, Xq, baseline=baselines)
    parts = [integrated_gradients(c, Xq, baseline=baselines) for c in components]
    expected = mixture_attribution(parts)
    np.testing.assert_allclose(combined.mean, expected.mean, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(combined.cov, expected.cov, rtol=1e-12, atol=1e-14)
    gaps = combined.completeness_gap()
    assert gaps["mean"] < 1e-10 and gaps["variance"] < 1e-10
    # The mixture's difference variance is its own computation (law of total variance).
    np.testing.assert_allclose(
        combined.difference_variance, mixture.difference_variance(Xq, baselines), rtol=1e-12
    )
