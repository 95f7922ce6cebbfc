"""Probability-level explanations (the driver's link step) against independent references."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

import gpexplain as gx
from gpexplain import links


def _posterior(seed, n=25, d=3, shift=0.0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.sin(X[:, 0]) + 0.5 * X[:, 1] + shift + 0.1 * rng.normal(size=n)
    return gx.ExactPosterior(X, 2.0 * y, gx.kernels.RBF([1.0, 1.5, 2.0][:d], 1.5), 0.3)


@pytest.fixture(scope="module")
def posterior():
    return _posterior(0)


@pytest.fixture(scope="module")
def points():
    return np.random.default_rng(9).normal(size=(4, 3))


def _expected_probability(link, posterior, X):
    mean, var = posterior.predict(X)
    return link.expected_response(mean, var)


@pytest.mark.parametrize("name", ["logit", "probit"])
def test_expected_gradient_is_the_derivative_of_the_expected_probability(posterior, points,
                                                                         name):
    """Central finite differences of E[sigma(f(x))] in x (h = 1e-5: error ~1e-10)."""
    link = links.get_link(name)
    result = gx.gradients(posterior, points, link=name)
    h = 1e-5
    for k in range(3):
        step = np.zeros(3)
        step[k] = h
        difference = (_expected_probability(link, posterior, points + step)
                      - _expected_probability(link, posterior, points - step)) / (2 * h)
        np.testing.assert_allclose(result.mean[:, k], difference, rtol=0, atol=1e-8)
    np.testing.assert_allclose(result.prediction, _expected_probability(link, posterior, points),
                               atol=1e-13)
    assert result.cov is not None and np.all(np.linalg.eigvalsh(result.cov) > -1e-12)


def test_joint_moments_match_the_posterior(posterior, points):
    """E grad f and Cov(grad f) are the Gaussian gradient explanation's; Cov(f, d_k f) the
    finite-difference derivative of the posterior covariance c(x, x + h e_k)."""
    from gpexplain.explain.linked.moments import latent_gradient_moments
    from gpexplain.functionals.gradient import Gradient

    scheme = Gradient().bind(posterior.kernel, posterior.train_inputs)
    mean, var, grad_mean, grad_cov, grad_grad_cov = latent_gradient_moments(
        posterior, scheme, points, full=True)
    latent = gx.gradients(posterior, points)
    np.testing.assert_allclose(grad_mean, latent.mean, atol=1e-12)
    np.testing.assert_allclose(grad_grad_cov, latent.cov, atol=1e-12)
    reference_mean, reference_var = posterior.predict(points)
    np.testing.assert_allclose(mean, reference_mean, atol=1e-12)
    np.testing.assert_allclose(var, reference_var, atol=1e-12)
    h = 1e-5
    for p, x in enumerate(points):
        for k in range(3):
            step = np.zeros(3)
            step[k] = h
            _, cov = posterior.predict(np.stack([x, x + step, x - step]), return_cov=True)
            assert grad_cov[p, k] == pytest.approx((cov[0, 1] - cov[0, 2]) / (2 * h), abs=1e-8)


def test_a_linear_kernel_has_a_prior_value_gradient_covariance():
    """Non-stationary: Cov(f, d_k f) has a prior part (x_k for a linear kernel)."""
    import gpytorch

    from gpexplain.explain.linked.moments import latent_gradient_moments
    from gpexplain.functionals.gradient import Gradient

    rng = np.random.default_rng(2)
    X = rng.normal(size=(10, 2))
    posterior = gx.ExactPosterior(X, X @ [1.0, -2.0], gpytorch.kernels.LinearKernel().double(),
                                  0.5)
    x = np.array([[0.7, -1.2]])
    scheme = Gradient().bind(posterior.kernel, posterior.train_inputs)
    *_, grad_cov, _ = latent_gradient_moments(posterior, scheme, x, full=False)
    h = 1e-5
    for k in range(2):
        step = np.zeros(2)
        step[k] = h
        _, cov = posterior.predict(np.vstack([x, x + step, x - step]), return_cov=True)
        assert grad_cov[0, k] == pytest.approx((cov[0, 1] - cov[0, 2]) / (2 * h), abs=1e-7)


@pytest.mark.parametrize("name", ["logit", "probit"])
def test_integrated_gradients_of_probabilities_are_complete(posterior, points, name):
    baseline = np.array([0.5, -0.3, 1.0])
    result = gx.integrated_gradients(posterior, points, baseline=baseline, link=name)
    link = links.get_link(name)
    assert result.prediction == pytest.approx(_expected_probability(link, posterior, points),
                                              abs=1e-13)
    assert result.baseline_prediction == pytest.approx(
        _expected_probability(link, posterior, baseline[None])[0], abs=1e-13)
    assert result.completeness_gap()["mean"] <= 1e-10
    # the covariance (binary links) is tested in test_link_covariance.py
    assert result.cov.shape == (len(points), 3, 3)


def test_integrated_gradients_match_the_path_integral_by_an_independent_rule(posterior):
    """Composite Simpson along the path of the expected gradient (finite differences of
    E[p] along each axis), on one point: agreement to the rule's 1e-7."""
    link = links.Logit()
    x, xt = np.array([1.2, -0.4, 0.3]), np.zeros(3)
    result = gx.integrated_gradients(posterior, x[None], baseline=xt, link="logit")
    t = np.linspace(0, 1, 201)
    path = xt + t[:, None] * (x - xt)
    h = 1e-5
    gradient = np.stack([
        (_expected_probability(link, posterior, path + h * e)
         - _expected_probability(link, posterior, path - h * e)) / (2 * h)
        for e in np.eye(3)], 1)
    weights = np.full(201, 2.0)
    weights[1::2], weights[[0, -1]] = 4.0, 1.0
    expected = (x - xt) * ((weights / (3 * 200)) @ gradient)
    np.testing.assert_allclose(result.mean[0], expected, atol=1e-7)


def test_an_estimator_stand_in_defaults_to_probabilities_of_its_positive_class(posterior,
                                                                               points):
    model = SimpleNamespace(classes_=np.array(["benign", "malignant"]), link_="logit",
                            posterior_=posterior, fit=None)
    probability = gx.integrated_gradients(model, points)
    assert probability.method.startswith("integrated gradients of E[p] (logit link, class "
                                         "'malignant'")
    explicit = gx.integrated_gradients(posterior, points, link="logit")
    np.testing.assert_allclose(probability.mean, explicit.mean, atol=0)
    latent = gx.integrated_gradients(model, points, output="latent")
    np.testing.assert_allclose(latent.mean, gx.integrated_gradients(posterior, points).mean)
    negative = gx.integrated_gradients(model, points, target_class="benign")
    np.testing.assert_allclose(negative.mean, -probability.mean, atol=1e-15)
    assert negative.prediction == pytest.approx(1 - probability.prediction)
    gradient = gx.gradients(model, points, target_class="benign")
    np.testing.assert_allclose(gradient.cov, gx.gradients(model, points).cov, atol=0)
    with pytest.raises(ValueError, match="not a class of the model"):
        gx.gradients(model, points, target_class="unknown")
    with pytest.raises(ValueError, match="log-odds of class 'malignant'"):
        gx.gradients(model, points, output="latent", target_class="benign")


@pytest.fixture(scope="module")
def three_class():
    return [_posterior(seed, shift=shift) for seed, shift in ((1, 0.5), (2, 0.0), (3, -0.3))]


def test_multiclass_stand_in_explains_each_class_completely(three_class, points):
    model = SimpleNamespace(classes_=np.array(["a", "b", "c"]), link_="softmax",
                            posteriors_=three_class, fit=None)
    baseline, points = np.zeros(3), points[:2]
    totals = np.zeros(len(points))
    for label in "abc":
        result = gx.integrated_gradients(model, points, baseline=baseline, target_class=label)
        assert result.completeness_gap()["mean"] <= 1e-10
        totals += result.mean.sum(1)
    # the class probabilities sum to one at x and at the baseline: attributions sum to zero
    np.testing.assert_allclose(totals, 0.0, atol=1e-9)
    latent = gx.integrated_gradients(model, points, baseline=baseline, output="latent",
                                     target_class="b")
    np.testing.assert_allclose(
        latent.mean, gx.integrated_gradients(three_class[1], points, baseline=baseline).mean)
    with pytest.raises(ValueError, match="target_class is required"):
        gx.gradients(model, points)


def test_multiclass_gradient_is_the_derivative_of_the_expected_probability(three_class,
                                                                          points):
    link = links.Softmax()
    result = gx.gradients(three_class, points[:2], link="softmax", target_class=2)

    def expected(X):
        moments = [post.predict(X) for post in three_class]
        return link.expected_response(np.stack([m for m, _ in moments], 1),
                                      np.stack([v for _, v in moments], 1))[:, 2]

    h = 1e-4
    for k in range(3):
        step = np.zeros(3)
        step[k] = h
        difference = (expected(points[:2] + step) - expected(points[:2] - step)) / (2 * h)
        np.testing.assert_allclose(result.mean[:, k], difference, atol=1e-7)


def test_multiclass_gradient_covariance_is_the_links_at_the_joint_moments(three_class,
                                                                          points):
    """gx.gradients of a softmax model returns Cov[grad p_c] (n, d, d): Softmax's covariance
    at each class's joint moments of (f_j, grad f_j) (tested against the posterior above),
    symmetric PSD; gradient x input weighs it like the binary case; Taylor gives none."""
    from gpexplain.explain.linked.moments import latent_gradient_moments
    from gpexplain.functionals.gradient import Gradient

    result = gx.gradients(three_class, points, link="softmax", target_class=1)
    moments = [latent_gradient_moments(post, Gradient().bind(post.kernel, post.train_inputs),
                                       points, full=True) for post in three_class]
    stacked = [np.stack([m[i] for m in moments], 1) for i in range(5)]
    expected = links.Softmax().gradient_covariance(*stacked, 1)
    assert result.cov.shape == (len(points), 3, 3)
    np.testing.assert_allclose(result.cov, expected, rtol=0, atol=1e-14)
    assert np.all(np.linalg.eigvalsh(result.cov) > -1e-12 * np.abs(result.cov).max())
    mean_only = gx.gradients(three_class, points, link="softmax", target_class=1,
                             return_cov=False)
    # the same rule; with the covariance's rows checked too a point may refine its grid
    np.testing.assert_allclose(mean_only.mean, result.mean, rtol=0, atol=1e-12)
    assert mean_only.cov is None
    weighted = gx.gradients(three_class, points, link="softmax", target_class=1,
                            gradient_x_input=True, baseline=np.zeros(3))
    np.testing.assert_allclose(weighted.cov, points[:, :, None] * result.cov
                               * points[:, None, :], atol=1e-15)
    taylor = gx.gradients(three_class, points, link="softmax", target_class=1,
                          approximation="taylor")
    assert taylor.cov is None


def test_taylor_integrated_gradients_complete_to_the_taylor_probabilities(posterior, points):
    """The corrected eq. 33 is exactly the x-derivative of sigma(m) + s2 sigma''(m) / 2
    (d s2 / dx_k = 2 c_k), so its path integral completes to the Taylor probabilities."""
    result = gx.integrated_gradients(posterior, points, link="logit", approximation="taylor")
    assert result.completeness_gap()["mean"] <= 1e-10
    assert "Taylor" in result.method


def test_bad_requests_are_refused(posterior, points):
    with pytest.raises(ValueError, match="needs a link"):
        gx.gradients(posterior, points, output="probability")
    with pytest.raises(ValueError, match="output must be one of"):
        gx.gradients(posterior, points, output="odds")
    with pytest.raises(ValueError, match="Gauss-Legendre"):
        gx.integrated_gradients(posterior, points, link="logit", rule="trapezoid")
    with pytest.raises(ValueError, match="softmax needs one per class"):
        gx.gradients(posterior, points, link="softmax")
    with pytest.raises(ValueError, match="unknown link"):
        gx.gradients(posterior, points, link="tanh")


def test_gradient_x_input_weighs_the_probability_gradient(posterior, points):
    plain = gx.gradients(posterior, points, link="logit")
    weighted = gx.gradients(posterior, points, link="logit", gradient_x_input=True,
                            baseline=np.zeros(3))
    np.testing.assert_allclose(weighted.mean, points * plain.mean, atol=1e-15)
    np.testing.assert_allclose(weighted.cov, points[:, :, None] * plain.cov * points[:, None, :],
                               atol=1e-15)
    assert weighted.baseline_prediction == pytest.approx(
        _expected_probability(links.Logit(), posterior, np.zeros((1, 3)))[0])


def test_a_mixture_posterior_is_refused_on_the_probability_scale(posterior, points):
    other = gx.ExactPosterior(posterior.train_inputs, posterior.train_targets,
                              gx.kernels.RBF(0.7, 1.0), 0.2)
    mixture = gx.MixturePosterior([posterior, other], [0.5, 0.5])
    with pytest.raises(TypeError, match="MixturePosterior"):
        gx.integrated_gradients(mixture, points, link="logit")


def test_probability_integrated_gradients_are_invariant_to_affine_rescaling(posterior, points):
    """The same latent function of x' = 2 x + 1 (lengthscales doubled) explains alike."""
    scale, shift = np.array([2.0, 0.5, 3.0]), np.array([1.0, -2.0, 0.0])
    kernel = posterior.kernel
    rescaled = gx.ExactPosterior(posterior.train_inputs * scale + shift,
                                 posterior.train_targets,
                                 gx.kernels.RBF(kernel.lengthscale * scale, kernel.variance), 0.3)
    baseline = np.array([0.5, -0.3, 1.0])
    original = gx.integrated_gradients(posterior, points, baseline=baseline, link="logit")
    moved = gx.integrated_gradients(rescaled, points * scale + shift,
                                    baseline=baseline * scale + shift, link="logit")
    np.testing.assert_allclose(moved.mean, original.mean, atol=1e-10)
    np.testing.assert_allclose(moved.cov, original.cov, atol=1e-10)


def test_many_classes_use_randomised_qmc_and_state_its_error(points):
    """C = 5 > 3: randomised QMC; completeness within 10 standard errors (as documented),
    the standard error stated in ``method``."""
    import re

    five = [_posterior(seed, shift=0.2 * seed) for seed in range(5)]
    result = gx.integrated_gradients(five, points[:2], baseline=np.zeros(3), link="softmax",
                                     target_class=3)
    error = float(re.search(r"standard error ([0-9.e+-]+)\)", result.method).group(1))
    assert 0 < error < 1e-4
    assert result.completeness_gap()["mean"] <= 1e-10 + 10 * error
