"""gpexplain.likelihoods: class probabilities through the links, the registry and the errors
users see (expected log likelihoods against Monte Carlo: tests/contracts/test_likelihoods.py)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import ndtr

from gpexplain import likelihoods, links


def test_registry_names_every_observation_model_and_finds_it_by_link():
    assert set(likelihoods.LIKELIHOODS.names()) == {"gaussian", "bernoulli", "categorical"}
    assert isinstance(likelihoods.likelihood_for_link("probit"), likelihoods.Bernoulli)
    assert isinstance(likelihoods.likelihood_for_link("softmax"), likelihoods.Categorical)
    assert likelihoods.likelihood_for_link("logit").link.name == "logit"


def test_gaussian_predictive_moments_add_the_noise():
    rng = np.random.default_rng(2)
    mean, var = rng.normal(size=(1, 6)), rng.uniform(0.1, 2.0, size=(1, 6))
    predictive_mean, predictive_var = likelihoods.Gaussian(noise=0.3).predictive_moments(mean, var)
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
