"""Attributions of the posterior variance (gx.explain_variance) against plain references:
brute-force 2^d Shapley values of a NumPy posterior, mpmath integrated gradients, and
high-order quadrature of the plain posterior's gradient."""

from __future__ import annotations

import warnings

import gpytorch
import numpy as np
import pytest
import torch

import gpexplain as gx
from gpexplain.accuracy import CompletenessWarning
from tests.reference.variance_plain import (
    PlainPosterior,
    brute_force_shapley,
    matern52_factor,
    measure_variance_game,
    se_factor,
    variance_game,
    variance_ig_mpmath,
)


def _data(n, d, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    return X, np.sin(X[:, 0]) + 0.5 * X[:, -1], rng.normal(scale=1.3, size=(3, d))


def _se_pair(n, d, seed=0):
    X, y, query = _data(n, d, seed)
    lengthscale = np.linspace(0.8, 2.0, d)
    factors = [lambda a, b, ell=ell: se_factor(a, b, ell) for ell in lengthscale]
    plain = PlainPosterior(X, y, factors, 1.3, 0.05)
    ours = gx.ExactPosterior(X, y, gx.kernels.RBF(lengthscale, 1.3), noise=0.05)
    return plain, ours, X, query


def _check_complete(result, tolerance=1e-10):
    assert np.allclose(result.cov, 0.0)
    np.testing.assert_allclose(result.mean.sum(1), result.prediction - result.baseline_prediction,
                               rtol=0, atol=tolerance)


@pytest.mark.parametrize("d", [3, 8])
def test_baseline_game_matches_brute_force(d):
    plain, ours, X, query = _se_pair(12, d)
    baseline = X.mean(0)
    result = gx.explain_variance(ours, query)
    assert result.method.startswith("posterior variance")
    for p, x in enumerate(query):
        expected = brute_force_shapley(variance_game(plain, x, baseline[None, :]), d)
        np.testing.assert_allclose(result.mean[p], expected, rtol=0, atol=1e-10)
    np.testing.assert_allclose(result.prediction, plain.variance_at(query), atol=1e-12)
    _check_complete(result)


def test_interventional_game_matches_brute_force_for_a_matern_product():
    X, y, query = _data(10, 3, seed=1)
    lengths = (0.9, 1.4, 1.1)
    factors = [lambda a, b: matern52_factor(a, b, lengths[0]),
               lambda a, b: matern52_factor(a, b, lengths[1]),
               lambda a, b: se_factor(a, b, lengths[2])]
    plain = PlainPosterior(X, y, factors, 0.8, 0.02)
    parts = [gpytorch.kernels.MaternKernel(nu=2.5, active_dims=torch.tensor([0])),
             gpytorch.kernels.MaternKernel(nu=2.5, active_dims=torch.tensor([1])),
             gpytorch.kernels.RBFKernel(active_dims=torch.tensor([2]))]
    module = gpytorch.kernels.ScaleKernel(gpytorch.kernels.ProductKernel(*parts)).double()
    for part, ell in zip(parts, lengths, strict=True):  # float64 values: set after .double()
        part.lengthscale = ell
    module.outputscale = 0.8
    ours = gx.ExactPosterior(X, y, module, noise=0.02)
    background = X[:4]
    result = gx.explain_variance(ours, query, background=background)
    assert "interventional" in result.method
    for p, x in enumerate(query):
        expected = brute_force_shapley(variance_game(plain, x, background), 3)
        # GPyTorch's Matern distances round at sqrt(eps) near zero distance: its gram matrix
        # (so the posterior itself) differs from the plain one by ~1e-8.
        np.testing.assert_allclose(result.mean[p], expected, rtol=0, atol=1e-7)
    _check_complete(result)


def test_product_measure_game_matches_brute_force():
    plain, ours, _, query = _se_pair(10, 3, seed=2)
    mean, std = np.array([0.1, -0.2, 0.3]), np.array([0.9, 1.2, 0.7])
    result = gx.explain_variance(ours, query[:2], measure=gx.measures.Gaussian(mean, std))
    for p, x in enumerate(query[:2]):
        game = measure_variance_game(plain, x, mean, std, n_nodes=40)
        np.testing.assert_allclose(result.mean[p], brute_force_shapley(game, 3), atol=1e-9)
        np.testing.assert_allclose(result.baseline_prediction, game(()), atol=1e-9)
    _check_complete(result)


def test_closed_form_ig_matches_mpmath():
    X, y, query = _data(6, 3, seed=3)
    lengthscale, variance, noise = [0.9, 1.6, 1.2], 1.1, 0.03
    posterior = gx.ExactPosterior(X, y, gx.kernels.RBF(lengthscale, variance), noise=noise)
    baseline = np.array([0.2, -0.1, 0.4])
    result = gx.explain_variance(posterior, query[:2], method="ig", baseline=baseline)
    assert "closed form" in result.method
    for p, x in enumerate(query[:2]):
        expected = variance_ig_mpmath(X, y, lengthscale, variance, noise, x, baseline)
        np.testing.assert_allclose(result.mean[p], expected, rtol=1e-9, atol=1e-12)
    _check_complete(result)


def _matern_plain_gradient(plain, lengthscale, point):
    """Gradient of the plain posterior's s2 (Matern 5/2 over the joint distance), analytic."""
    diff = point[None, :] - plain.X  # (n, d)
    r = np.sqrt(np.sum((diff / lengthscale) ** 2, axis=1))
    s = np.sqrt(5.0) * r
    k = plain.variance * (1 + s + s * s / 3) * np.exp(-s)
    # dk/dx = -variance (5/3) (1 + s) exp(-s) diff / l^2
    dk = -plain.variance * (5.0 / 3.0) * ((1 + s) * np.exp(-s))[:, None] * diff / lengthscale**2
    return -2.0 * dk.T @ plain.K_inverse @ k


def test_quadrature_ig_matches_high_order_reference_for_a_joint_matern():
    X, y, query = _data(8, 2, seed=4)
    lengthscale, variance, noise = 1.2, 0.9, 0.04
    module = gpytorch.kernels.ScaleKernel(gpytorch.kernels.MaternKernel(nu=2.5)).double()
    module.base_kernel.lengthscale = lengthscale
    module.outputscale = variance
    ours = gx.ExactPosterior(X, y, module, noise=noise)

    class Joint(PlainPosterior):
        def kernel(self, A, B):
            r = np.sqrt(5.0) * np.sqrt(((A[:, None, :] - B[None]) ** 2).sum(-1)) / lengthscale
            return self.variance * (1 + r + r * r / 3) * np.exp(-r)

    plain = Joint(X, y, [], variance, noise)
    with pytest.raises(TypeError, match="method='ig'"):
        gx.explain_variance(ours, query)
    baseline = np.zeros(2)
    result = gx.explain_variance(ours, query, method="ig", baseline=baseline)
    assert "quadrature" in result.method
    nodes, weights = np.polynomial.legendre.leggauss(400)
    nodes, weights = 0.5 * (nodes + 1), 0.5 * weights
    for p, x in enumerate(query):
        integral = sum(w * _matern_plain_gradient(plain, lengthscale, baseline + t * (x - baseline))
                       for t, w in zip(nodes, weights, strict=True))
        # GPyTorch's Matern distances round at sqrt(eps) near zero distance: the posterior
        # variance itself differs from the plain one by ~4e-8.
        np.testing.assert_allclose(result.mean[p], (x - baseline) * integral, atol=1e-7)
    _check_complete(result, tolerance=1e-8)


def test_standard_deviation_is_complete_and_matches_the_variance_path():
    plain, ours, X, query = _se_pair(10, 3, seed=5)
    baseline = X.mean(0)
    result = gx.explain_variance(ours, query, method="ig", what="std", baseline=baseline)
    assert result.method.startswith("posterior standard deviation")
    np.testing.assert_allclose(result.prediction, np.sqrt(plain.variance_at(query)), atol=1e-12)
    np.testing.assert_allclose(result.baseline_prediction,
                               np.sqrt(plain.variance_at(baseline[None, :]))[0], atol=1e-12)
    _check_complete(result, tolerance=1e-8)


def test_standard_deviation_shapley_values_match_brute_force():
    """Baseline game of s(x) = sqrt(s2(x)), by the subset formula on the plain posterior."""
    plain, ours, X, query = _se_pair(10, 4, seed=8)
    baseline = X.mean(0)
    result = gx.explain_variance(ours, query, what="std", baseline=baseline)
    assert result.method.startswith("posterior standard deviation: exact Shapley")
    for p, x in enumerate(query):
        def std_game(S, x=x):
            row = baseline.copy()
            row[list(S)] = x[list(S)]
            return float(np.sqrt(plain.variance_at(row[None, :])[0]))

        np.testing.assert_allclose(result.mean[p], brute_force_shapley(std_game, 4), rtol=0,
                                   atol=1e-10)
    np.testing.assert_allclose(result.prediction, np.sqrt(plain.variance_at(query)), atol=1e-12)
    _check_complete(result, tolerance=1e-12)
    with pytest.raises(ValueError, match="baseline game only"):
        gx.explain_variance(ours, query, what="std", background=X[:3])


def test_classifier_latent_variance():
    from sklearn.gaussian_process import GaussianProcessClassifier
    from sklearn.gaussian_process.kernels import RBF

    X, _, query = _data(30, 2, seed=6)
    labels = (X[:, 0] + X[:, 1] > 0).astype(int)
    fitted = GaussianProcessClassifier(RBF([1.0, 1.0]), optimizer=None).fit(X, labels)
    model = gx.from_sklearn(fitted)
    result = gx.explain_variance(model, query)
    assert "latent" in result.method
    _check_complete(result)
    with pytest.raises(TypeError, match="integrated_gradients"):
        gx.explain_variance(model, query, output="probability")


def test_refusals_name_what_applies():
    _, ours, X, query = _se_pair(8, 2)
    with pytest.raises(ValueError, match="unknown method"):
        gx.explain_variance(ours, query, method="lime")
    with pytest.raises(ValueError, match="belong to method='shapley'"):
        gx.explain_variance(ours, query, method="ig", background=X)
    mixture = gx.MixturePosterior([ours, ours], [0.5, 0.5])
    with pytest.raises(TypeError, match="MixturePosterior"):
        gx.explain_variance(mixture, query)


def test_no_warning_on_exact_paths():
    _, ours, X, query = _se_pair(15, 4, seed=7)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CompletenessWarning)
        gx.explain_variance(ours, query, background=X[:3])
        gx.explain_variance(ours, query, method="ig")


def test_waterfall_and_summary_label_the_variance():
    import matplotlib

    matplotlib.use("Agg")
    from gpexplain.plot import plot_summary, plot_waterfall

    _, ours, _, query = _se_pair(10, 3, seed=8)
    result = gx.explain_variance(ours, query)
    waterfall = plot_waterfall(result, 1).axes[0]
    assert waterfall.get_xlabel().startswith("posterior variance (squared units of the target)")
    assert "posterior variance" in waterfall.get_title()
    assert not waterfall.collections  # no error bars: a deterministic function
    summary = plot_summary(result).axes[0]
    assert "of the posterior variance" in summary.get_title()
    assert "attribution of the posterior variance" in summary.get_xlabel()
