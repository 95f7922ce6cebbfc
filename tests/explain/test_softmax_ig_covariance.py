"""Posterior covariance of probability-level integrated gradients of a softmax. Two classes:
the logit's of the latent difference, against an explicit difference posterior and Monte
Carlo over joint posterior sample paths of both latents. Three and more: the randomised-QMC
Stein estimate, against the same Monte Carlo and the exact two-class covariance, within its
stated standard error. Completeness, PSD, refusals and warnings."""

from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

import gpexplain as gx
from gpexplain.explain.linked import softmax_covariance as _softmax_covariance
from gpexplain.functionals.gradient import Gradient
from tests.reference.link_ig_monte_carlo import (
    assert_moments_match,
    softmax_integrated_gradient_samples,
)

Z_SCORE = 5.0  # a false alarm has probability below 1e-6 per check
BASELINE = np.array([0.5, -0.3, 1.0])
POINTS = np.array([[1.2, 0.4, -0.6], [-2.5, 1.8, 0.9]])  # the second far from the data: wide
# Per class: (lengthscale, variance, noise, data seed); different kernels and training inputs.
LATENTS = (([1.0, 1.5, 2.0], 4.0, 0.3, 0), ([0.8, 1.2, 1.0], 2.5, 0.2, 1),
           ([1.2, 0.9, 1.5], 3.0, 0.25, 2))


def _data(seed, n=20):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    y = 2.0 * (np.sin(X[:, 0]) + (0.5 - seed) * X[:, 1]) + 0.1 * rng.normal(size=n)
    return X, y


@pytest.fixture(scope="module")
def latents():
    """(train_inputs, targets, lengthscale, variance, noise) per class."""
    return [(*_data(seed), np.array(lengthscale), variance, noise)
            for lengthscale, variance, noise, seed in LATENTS]


@pytest.fixture(scope="module")
def three(latents):
    """Three independent exact posteriors, different kernels and training inputs."""
    return [gx.ExactPosterior(X, y, gx.kernels.RBF(lengthscale, variance), noise)
            for X, y, lengthscale, variance, noise in latents]


@pytest.fixture(scope="module")
def posteriors(three):
    return three[:2]


def _stated_error(result):
    return float(re.search(r"covariance standard error ([0-9.e+-]+)", result.method).group(1))


def _explain(posteriors, target_class, link="softmax", **options):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return gx.integrated_gradients(posteriors, POINTS, baseline=BASELINE, link=link,
                                       target_class=target_class, **options)


class _DifferencePosterior(gx.posterior.Posterior):
    """``f_plus - f_minus`` of two independent exact posteriors with one kernel k and one
    training set, in representer form: prior ``2 k``, ``alpha = (a+ - a-) / 2``,
    ``Q = (Q+ + Q-) / 4`` (so ``(2 k) Q (2 k) = k (Q+ + Q-) k``)."""

    def __init__(self, plus, minus):
        self.plus, self.minus = plus, minus
        kernel = plus.kernel
        self.kernel = gx.kernels.RBF(kernel.lengthscale, 2.0 * kernel.variance)
        self.train_inputs = plus.train_inputs
        self.alpha = 0.5 * (plus.alpha - minus.alpha)
        self.mean = plus.mean - minus.mean
        self.feature_names = plus.feature_names

    def quadratic_form(self, left, right=None):
        return 0.25 * (self.plus.quadratic_form(left, right)
                       + self.minus.quadratic_form(left, right))


def test_two_classes_equal_the_logit_of_the_latent_difference():
    """S_1(f_0, f_1) = sigma(f_1 - f_0): mean and covariance equal the logit integrated
    gradients of an explicit posterior of the difference (shared kernel and inputs, different
    targets and noise); class 0 has the opposite mean and the same covariance."""
    X, y = _data(0)
    kernel = gx.kernels.RBF([1.0, 1.5, 2.0], 3.0)
    pair = [gx.ExactPosterior(X, y, kernel, 0.3), gx.ExactPosterior(X, -0.5 * y + 1, kernel, 0.1)]
    softmax = _explain(pair, 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        logit = gx.integrated_gradients(_DifferencePosterior(pair[1], pair[0]), POINTS,
                                        baseline=BASELINE, link="logit")
    scale = np.abs(logit.cov).max()
    np.testing.assert_allclose(softmax.mean, logit.mean, rtol=0, atol=1e-10)
    np.testing.assert_allclose(softmax.cov, logit.cov, rtol=0, atol=1e-12 * scale)
    np.testing.assert_allclose(softmax.difference_variance, logit.difference_variance,
                               rtol=1e-12)
    negative = _explain(pair, 0)
    np.testing.assert_allclose(negative.mean, -softmax.mean, rtol=0, atol=1e-10)
    np.testing.assert_allclose(negative.cov, softmax.cov, rtol=0, atol=1e-12 * scale)
    assert "logistic of the latent difference" in softmax.method


def test_covariance_matches_monte_carlo_over_joint_sample_paths(latents, posteriors):
    """200k joint posterior samples of (f_j, grad f_j) along the path for both classes
    (independent GPs with different kernels and training inputs): mean and every covariance
    entry within 5 standard errors (the entry's own, from the samples). Class 0 is class 1
    negated (previous test)."""
    result = _explain(posteriors, 1)
    for p, x in enumerate(POINTS):
        samples = softmax_integrated_gradient_samples(latents[:2], 1, x, BASELINE, 200_000,
                                                      seed=p)
        assert_moments_match(samples, result.mean[p], result.cov[p], Z_SCORE)


def test_covariance_is_complete_symmetric_and_psd(posteriors):
    """sum_kl Cov(IG_k, IG_l) = Var(S_c(x) - S_c(xt)) (computed separately, a bivariate
    expectation) to 1e-9 relative; symmetric; PSD up to rounding."""
    result = _explain(posteriors, 1)
    assert result.completeness_gap()["variance"] <= 1e-9 * result.difference_variance.max()
    assert result.completeness_gap()["mean"] <= 1e-10
    np.testing.assert_array_equal(result.cov, np.swapaxes(result.cov, 1, 2))
    eigenvalues = np.linalg.eigvalsh(result.cov)
    assert np.all(eigenvalues[:, 0] > -1e-12 * eigenvalues[:, -1])


def test_mean_only_taylor_and_several_baselines(posteriors, three):
    """return_cov=False keeps the mean-only path; Taylor has no covariance; several
    baselines with the covariance are refused as for binary links (any C)."""
    full = _explain(posteriors, 1)
    mean_only = _explain(posteriors, 1, return_cov=False)
    assert mean_only.cov is None
    np.testing.assert_array_equal(mean_only.mean, full.mean)
    taylor = gx.integrated_gradients(posteriors, POINTS, baseline=BASELINE, link="softmax",
                                     target_class=1, approximation="taylor")
    assert taylor.cov is None
    for latents in (posteriors, three):
        with pytest.raises(ValueError, match="one baseline"):
            gx.integrated_gradients(latents, POINTS, link="softmax", target_class=1,
                                    baseline=np.stack([BASELINE, -BASELINE]))


# -- C >= 3: the randomised-QMC estimate --------------------------------------------------------
def test_three_classes_match_monte_carlo_over_joint_sample_paths(latents, three):
    """Independent joint sample paths (200k, the reference's own standard errors) against the
    estimate: every covariance entry within 5 combined standard errors (the estimate's stated
    largest one); the mean is the deterministic product rule's."""
    result = _explain(three, 2)
    error = _stated_error(result)
    assert 0 < error < 1e-2 * np.abs(result.cov).max()
    for p, x in enumerate(POINTS):
        samples = softmax_integrated_gradient_samples(latents, 2, x, BASELINE, 200_000, seed=p)
        assert_moments_match(samples, result.mean[p], result.cov[p], Z_SCORE, error)


def test_the_estimator_agrees_with_the_exact_two_class_covariance(posteriors):
    """The C >= 3 estimator run on two classes: within 5 of its standard errors of the exact
    covariance (second-order Stein with bivariate quadrature), and Var(S_c(x) - S_c(xt))
    estimated from the same samples close to the exact one."""
    exact = _explain(posteriors, 0)
    schemes = [Gradient().bind(post.kernel, post.train_inputs) for post in posteriors]
    cov, variance, _, error = _softmax_covariance.softmax_integrated_gradient_covariance(
        gx.links.Softmax(), posteriors, schemes, 0, POINTS, BASELINE)
    assert 0 < error < 1e-2 * np.abs(exact.cov).max()
    np.testing.assert_array_less(np.abs(cov - exact.cov), Z_SCORE * error)
    np.testing.assert_allclose(variance, exact.difference_variance, rtol=1e-2)


def test_three_class_estimate_is_complete_symmetric_reproducible_and_shrinks(three):
    """No CompletenessWarning (the sum within 4 standard errors of Var(S_c(x) - S_c(xt))
    from the same samples); symmetric; PSD up to its error; the same seed gives the same
    numbers, another seed agrees within the stated errors; 1/16 of the QMC points give a larger
    standard error (the largest entry's, estimated from 8 replicates: not exactly 4x); a
    point at the baseline has zero covariance."""
    result = _explain(three, 0)
    error = _stated_error(result)
    np.testing.assert_array_equal(result.cov, np.swapaxes(result.cov, 1, 2))
    assert np.all(np.linalg.eigvalsh(result.cov)[:, 0] > -Z_SCORE * error)
    assert result.completeness_gap()["mean"] <= 1e-10
    np.testing.assert_array_equal(_explain(three, 0).cov, result.cov)
    other_seed = _explain(three, 0, link=gx.links.Softmax(seed=1))
    np.testing.assert_array_less(np.abs(other_seed.cov - result.cov),
                                 Z_SCORE * np.hypot(error, _stated_error(other_seed)))
    assert error < _stated_error(_explain(three, 0, link=gx.links.Softmax(n_qmc=256)))
    at_baseline = gx.integrated_gradients(three, BASELINE[None], baseline=BASELINE,
                                          link="softmax", target_class=0)
    np.testing.assert_array_equal(at_baseline.cov, 0.0)


def test_an_unconverged_path_rule_warns_with_the_gap(three, monkeypatch):
    """Two path nodes cannot resolve the path: the estimate's completeness misses by more
    than its standard errors allow, and a CompletenessWarning states the gap."""
    monkeypatch.setattr(_softmax_covariance, "PATH_NODES", (2,))
    with pytest.warns(gx.CompletenessWarning, match="only within"):
        gx.integrated_gradients(three, POINTS, baseline=BASELINE, link="softmax",
                                target_class=0)
