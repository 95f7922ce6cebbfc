"""gpexplain.likelihoods: expected log likelihoods against Monte Carlo, class probabilities
through the links, the registry and the errors users see."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.special import expit, log_softmax, ndtr
from scipy.stats import norm

from gpexplain import likelihoods, links

Z_SCORE = 5.0  # Monte Carlo tolerance: a false alarm has probability below 1e-6 per check
RNG_SAMPLES = 400_000


def _monte_carlo(log_likelihood, mean, var, rng):
    """sum_i E[log p(y_i | f_i)] by sampling f (L, n) ~ N(mean, var), with its standard
    error."""
    f = mean[..., None] + np.sqrt(var)[..., None] * rng.normal(size=mean.shape + (RNG_SAMPLES,))
    values = log_likelihood(f).sum(0)  # (samples,)
    return values.mean(), values.std() / np.sqrt(RNG_SAMPLES)


def test_registry_names_every_observation_model_and_finds_it_by_link():
    assert set(likelihoods.LIKELIHOODS.names()) == {"gaussian", "bernoulli", "categorical"}
    assert isinstance(likelihoods.likelihood_for_link("probit"), likelihoods.Bernoulli)
    assert isinstance(likelihoods.likelihood_for_link("softmax"), likelihoods.Categorical)
    assert likelihoods.likelihood_for_link("logit").link.name == "logit"


@pytest.mark.parametrize("link", ["logit", "probit"])
def test_bernoulli_expected_log_likelihood_matches_monte_carlo(link):
    rng = np.random.default_rng(0)
    mean, var = rng.normal(size=(1, 5)), rng.uniform(0.1, 2.0, size=(1, 5))
    y = np.array([0, 1, 1, 0, 1])
    likelihood = likelihoods.Bernoulli(link)
    value = likelihood.expected_log_likelihood(
        torch.as_tensor(mean), torch.as_tensor(var), likelihood.targets(y))
    sign = 2.0 * y - 1.0
    log_sigma = (lambda f: np.log(expit(f))) if link == "logit" else (lambda f: norm.logcdf(f))
    reference, error = _monte_carlo(lambda f: log_sigma(sign[:, None] * f[0]), mean, var, rng)
    assert abs(float(value) - reference) < Z_SCORE * error


@pytest.mark.parametrize("n_classes", [3, 4])
def test_categorical_expected_log_likelihood_matches_monte_carlo(n_classes):
    rng = np.random.default_rng(1)
    mean, var = rng.normal(size=(n_classes, 4)), rng.uniform(0.1, 1.0, size=(n_classes, 4))
    y = np.arange(4) % n_classes
    likelihood = likelihoods.Categorical()
    value = likelihood.expected_log_likelihood(
        torch.as_tensor(mean), torch.as_tensor(var), likelihood.targets(y))
    reference, error = _monte_carlo(
        lambda f: log_softmax(f, axis=0)[y, np.arange(4)], mean, var, rng)
    # C = 4: the fit's fixed 1024-point Sobol rule errs by about 1e-3 relative
    rule_error = 0.0 if n_classes == 3 else 1e-2
    assert abs(float(value) - reference) < Z_SCORE * error + rule_error


def test_gaussian_closed_forms_match_monte_carlo():
    rng = np.random.default_rng(2)
    mean, var, y = rng.normal(size=(1, 6)), rng.uniform(0.1, 2.0, size=(1, 6)), rng.normal(size=6)
    likelihood = likelihoods.Gaussian(noise=0.3)
    value = likelihood.expected_log_likelihood(
        torch.as_tensor(mean), torch.as_tensor(var), likelihood.targets(y))
    reference, error = _monte_carlo(
        lambda f: norm.logpdf(y[:, None], f[0], np.sqrt(0.3)), mean, var, rng)
    assert abs(float(value) - reference) < Z_SCORE * error
    predictive_mean, predictive_var = likelihood.predictive_moments(mean, var)
    np.testing.assert_array_equal(predictive_mean, mean)
    np.testing.assert_allclose(predictive_var, var + 0.3, rtol=1e-15)


def test_class_probabilities_are_the_links_expectations():
    mean, var = np.array([[-1.0, 0.2, 3.0]]), np.array([[0.5, 2.0, 30.0]])
    probit = likelihoods.Bernoulli("probit").predict_proba(mean, var)
    np.testing.assert_allclose(probit[:, 1], ndtr(mean[0] / np.sqrt(1.0 + var[0])), atol=1e-15)
    logit = likelihoods.Bernoulli("logit").predict_proba(mean, var)
    np.testing.assert_array_equal(logit[:, 1], links.Logit().expected_response(mean[0], var[0]))
    means, variances = np.vstack([mean, -mean, mean / 2]), np.vstack([var, var, var])
    softmax = likelihoods.Categorical().predict_proba(means, variances)
    np.testing.assert_array_equal(softmax,
                                  links.Softmax().expected_response(means.T, variances.T))
    np.testing.assert_allclose(softmax.sum(1), 1.0, atol=1e-12)


def test_many_rows_are_computed_in_blocks_with_the_same_values():
    rng = np.random.default_rng(3)
    mean, var = rng.normal(size=(1, 600)), rng.uniform(0.0, 0.9, size=(1, 600))
    likelihood = likelihoods.Bernoulli("probit")
    together = likelihood.predict_proba(mean, var)
    np.testing.assert_array_equal(together[300:301], likelihood.predict_proba(mean[:, 300:301],
                                                                              var[:, 300:301]))
    assert likelihoods.Categorical().predict_proba(np.zeros((3, 0)), np.zeros((3, 0))).shape \
        == (0, 3)


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="takes the link"):
        likelihoods.Bernoulli("softmax")
    with pytest.raises(ValueError, match="unknown link 'logt'.*'logit'"):
        likelihoods.Bernoulli("logt")
    with pytest.raises(ValueError, match="noise"):
        likelihoods.Gaussian(noise=-1.0)
    with pytest.raises(ValueError, match="no likelihood takes"):
        likelihoods.likelihood_for_link("identity")
