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


@pytest.mark.parametrize("n_classes", [3, 6])
def test_softmax_expected_log_likelihood_and_gradient_equal_autograd_of_the_rule(n_classes):
    """The categorical ELBO term's closed-form gradient (a fused pass over the rule's points,
    in blocks of rows) equals autograd through ``logsumexp`` of the same points, over more
    rows than one block."""
    import torch

    from gpexplain.likelihoods.categorical import _PARTITION_ROWS, softmax_rule

    rng = np.random.default_rng(4)
    n = _PARTITION_ROWS + 37
    mean = torch.tensor(3 * rng.normal(size=(n_classes, n)), requires_grad=True)
    var = torch.tensor(rng.uniform(0.01, 4.0, size=(n_classes, n)), requires_grad=True)
    target = torch.as_tensor(rng.integers(n_classes, size=n))
    value = likelihoods.Categorical().expected_log_likelihood(mean, var, target)
    gradient = torch.autograd.grad(value, (mean, var))
    points, weights = (torch.as_tensor(a) for a in softmax_rule(n_classes))
    f = mean.T[None] + torch.sqrt(var).T[None] * points[:, None, :]
    reference = (mean.T.gather(1, target[:, None]).squeeze(1)
                 - weights @ torch.logsumexp(f, dim=-1)).sum()
    expected = torch.autograd.grad(reference, (mean, var))
    np.testing.assert_allclose(value.item(), reference.item(), rtol=1e-13)
    for ours, theirs in zip(gradient, expected, strict=True):
        np.testing.assert_allclose(ours.numpy(), theirs.numpy(), rtol=1e-11, atol=1e-14)
    assert torch.autograd.gradcheck(
        lambda m, v: likelihoods.Categorical().expected_log_likelihood(m, v, target[:2]),
        (mean[:, :2].detach().clone().requires_grad_(), var[:, :2].detach().clone()
         .requires_grad_()))
