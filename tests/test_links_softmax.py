"""gx.links.Softmax: gradient covariance and wide latents, against independent references."""

from __future__ import annotations

import numpy as np
import pytest

from gpexplain import links
from tests.reference import softmax_quadrature as ref


def _joint_moments(rng, n_classes, d, var):
    """Gradient moments of a valid joint law of (f_j, g_j) per class: mu (C, d), c (C, d) and
    G (C, d, d) = a random PSD conditional covariance + c c^T / var."""
    mu = rng.normal(size=(n_classes, d))
    c = 0.4 * rng.normal(size=(n_classes, d)) * np.sqrt(var)[:, None]
    A = 0.7 * rng.normal(size=(n_classes, d, d))
    tilt = np.divide(c, np.sqrt(var)[:, None], out=np.zeros_like(c), where=var[:, None] > 0)
    G = A @ np.swapaxes(A, 1, 2) + tilt[:, :, None] * tilt[:, None, :]
    return mu, c, G


def _stein_covariance(rows, mu, c, G):
    """The covariance from expectation rows (S_c, d_j S_c, d_j^2 S_c, then the blocks of
    ``ref._symbolic_rows``) by the Stein form of the Softmax docstring."""
    C = len(mu)
    first, second = rows[1:C + 1], rows[C + 1:2 * C + 1]
    h0, h1, h2 = (rows[2 * C + 1 + i * C * C:2 * C + 1 + (i + 1) * C * C].reshape(C, C)
                  for i in range(3))
    gradient = first @ mu + second @ c
    moment = (mu.T @ h0 @ mu + mu.T @ h1 @ c + c.T @ h1.T @ mu + c.T @ h2 @ c
              + np.einsum("j,jkl->kl", np.diag(h0), G))
    return moment - np.outer(gradient, gradient)


def test_gradient_covariance_matches_monte_carlo_over_joint_samples():
    """Monte Carlo over joint (f_j, g_j) samples, independent across classes, of
    grad S_c = sum_j d_j S_c(f) g_j: mean and every covariance entry within 5 standard errors
    (z-scores of 3 x 3 + 3 x 3 entries; a 5-sigma miss has probability 1e-5)."""
    rng = np.random.default_rng(7)
    n_classes, d, target, n_samples = 3, 3, 1, 400_000
    mean, var = np.array([0.4, -0.3, 1.1]), np.array([1.3, 0.6, 2.2])
    mu, c, G = _joint_moments(rng, n_classes, d, var)
    f, g = np.empty((n_samples, n_classes)), np.empty((n_samples, n_classes, d))
    for j in range(n_classes):
        joint = np.block([[np.array([[var[j]]]), c[j][None]], [c[j][:, None], G[j]]])
        sample = rng.multivariate_normal(np.r_[mean[j], mu[j]], joint, size=n_samples)
        f[:, j], g[:, j] = sample[:, 0], sample[:, 1:]
    S = np.exp(f - f.max(1, keepdims=True))
    S /= S.sum(1, keepdims=True)
    slopes = S[:, target:target + 1] * (np.eye(n_classes)[target] - S)
    values = np.einsum("nj,njk->nk", slopes, g)
    link = links.Softmax()
    _, gradient, cov = link.gradient_moments(mean[None], var[None], mu[None], c[None],
                                             G[None], target)
    z = (values.mean(0) - gradient[0]) / (values.std(0) / np.sqrt(n_samples))
    assert np.all(np.abs(z) < 5), z
    centred = values - gradient[0]
    products = centred[:, :, None] * centred[:, None, :]
    z_cov = (products.mean(0) - cov[0]) / (products.std(0) / np.sqrt(n_samples))
    assert np.all(np.abs(z_cov) < 5), z_cov


@pytest.mark.parametrize(("mean", "var"), [((0.3, -0.4), (0.6, 0.9)), ((2.0, -1.0), (40.0, 60.0))])
def test_two_class_covariance_is_the_logits_of_the_difference(mean, var):
    """S_1(f0, f1) = sigma(f1 - f0), grad = sigma'(u) (g_1 - g_0) with u = f1 - f0:
    Logit.gradient_covariance(m1 - m0, s0 + s1, mu1 - mu0, c1 + c0, G1 + G0) (narrow: its
    Gauss-Hermite; wide: its latent trapezoid)."""
    rng = np.random.default_rng(2)
    mean, var = np.array([mean]), np.array([var])
    mu, c, G = _joint_moments(rng, 2, 3, var[0])
    mu, c, G = mu[None], c[None], G[None]
    logit_args = (mean[:, 1] - mean[:, 0], var.sum(1), mu[:, 1] - mu[:, 0], c[:, 1] + c[:, 0],
                  G[:, 1] + G[:, 0])
    softmax = links.Softmax()
    probability, gradient, cov = softmax.gradient_moments(mean, var, mu, c, G, 1)
    logit = links.Logit()
    assert probability[0] == pytest.approx(logit.expected_response(*logit_args[:2])[0],
                                           abs=1e-11)
    np.testing.assert_allclose(gradient, logit.expected_gradient(*logit_args[:4]), atol=1e-11)
    np.testing.assert_allclose(cov, logit.gradient_covariance(*logit_args), atol=1e-11)
    # class 0: the gradient flips sign, its covariance does not
    np.testing.assert_allclose(softmax.gradient_covariance(mean, var, mu, c, G, 0), cov,
                               atol=1e-11)


def test_zero_variance_is_the_plug_in_covariance():
    """All latents known (var = 0, hence c = 0): grad S_c = sum_j d_j S_c(m) g_j with g_j
    independent Gaussians, so Cov = sum_j (d_j S_c(m))^2 G_j exactly."""
    rng = np.random.default_rng(3)
    mean, var = np.array([[0.2, 1.5, -0.7]]), np.zeros((1, 3))
    mu, _, G = _joint_moments(rng, 3, 2, np.ones(3))
    c = np.zeros_like(mu)
    S = np.exp(mean[0]) / np.exp(mean[0]).sum()
    slopes = S[2] * (np.eye(3)[2] - S)
    _, gradient, cov = links.Softmax().gradient_moments(mean, var, mu[None], c[None], G[None],
                                                        2)
    np.testing.assert_allclose(gradient[0], slopes @ mu, atol=1e-15)
    np.testing.assert_allclose(cov[0], np.einsum("j,jkl->kl", slopes**2, G), atol=1e-15)


def test_covariance_is_positive_semi_definite_with_degenerate_latents():
    """Random valid joint laws, some latent variances 0 or tiny: symmetric, PSD, finite."""
    rng = np.random.default_rng(5)
    link = links.Softmax()
    covs = []
    for var in ([0.0, 0.8, 2.0], [1e-14, 0.0, 0.0], [0.3, 5.0, 50.0], [0.0, 0.0, 20.0]):
        var = np.array(var)
        mu, c, G = _joint_moments(rng, 3, 4, var)
        covs.append(link.gradient_covariance(rng.normal(size=(1, 3)), var[None], mu[None],
                                             c[None], G[None], int(rng.integers(3)))[0])
    covs = np.stack(covs)
    assert np.all(np.isfinite(covs))
    np.testing.assert_array_equal(covs, np.swapaxes(covs, 1, 2))
    scale = np.abs(covs).max((1, 2))
    assert np.all(np.linalg.eigvalsh(covs).min(1) > -1e-12 * scale)


WIDE = [
    pytest.param((0.3, -1.0, 2.0), (0.01, 0.02, 100.0), id="one-wide"),
    pytest.param((0.5, 0.1, -2.0), (5.0, 120.0, 0.3), id="mixed"),
    pytest.param((2.0, -1.0), (40.0, 60.0), id="two-classes"),
    pytest.param((0.3, -1.0, 2.0), (30.0, 80.0, 100.0), id="all-wide"),
]


@pytest.mark.parametrize(("mean", "var"), WIDE)
def test_wide_latents_match_the_difference_plane_reference(mean, var):
    """E[S_c], E[d_j S_c], E[d_j^2 S_c] to 1e-10 at latent variances up to 120 (tensor
    Gauss-Hermite stopped at about 4e-6 here), every class as the target, against composite
    Gauss-Legendre with sympy derivatives (tests/reference); the covariance, a combination of
    such expectations with coefficients up to (sum_j |mu_j| + |c_j|)^2 + |G|, to 1e-10 times
    that size."""
    rng = np.random.default_rng(11)
    mean, var = np.array(mean), np.array(var)
    n_classes = len(mean)
    mu, c, G = _joint_moments(rng, n_classes, 2, var)
    size = (np.abs(mu).sum(0) + np.abs(c).sum(0)).max() ** 2 + np.abs(G).sum(0).max()
    link = links.Softmax()
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        for target in range(n_classes):
            rows = ref.difference_plane_expectations(mean, var, target)
            probability, first, second = link.class_expectations(mean[None], var[None], target)
            got = np.concatenate([probability, first[0], second[0]])
            np.testing.assert_allclose(got, rows[:2 * n_classes + 1], rtol=0, atol=1e-10)
            cov = link.gradient_covariance(mean[None], var[None], mu[None], c[None], G[None],
                                           target)[0]
            np.testing.assert_allclose(cov, _stein_covariance(rows, mu, c, G), rtol=0,
                                       atol=1e-10 * size)


def test_narrow_and_wide_points_in_one_call_match_one_by_one():
    """Points on different grids (and refined or not) batched equal the same points alone."""
    mean = np.array([[0.1, 0.5, -0.3], [2.0, -1.0, 0.0], [0.0, 0.0, 0.0], [-3.0, 1.0, 4.0]])
    var = np.array([[0.2, 0.1, 0.5], [30.0, 80.0, 100.0], [0.0, 0.0, 0.0], [2.0, 0.0, 9.0]])
    link = links.Softmax()
    together = np.column_stack(link.class_expectations(mean, var, 2)[1:])
    alone = np.vstack([np.column_stack(link.class_expectations(mean[i:i + 1], var[i:i + 1],
                                                               2)[1:]) for i in range(4)])
    np.testing.assert_allclose(together, alone, rtol=0, atol=1e-14)


def test_randomised_qmc_covariance_is_within_its_standard_error():
    """C = 3 forced onto randomised QMC: the covariance is a linear combination of the
    expectation rows (coefficients products of mu, c, G and the gradient) plus the outer
    product of the gradient, so its error is bounded by the rows' standard error times the
    sum of absolute coefficients; checked at 6 of those."""
    rng = np.random.default_rng(4)
    mean, var = rng.normal(size=(1, 3)), rng.uniform(0.2, 1.0, (1, 3))
    mu, c, G = _joint_moments(rng, 3, 2, var[0])
    exact = links.Softmax().gradient_covariance(mean, var, mu[None], c[None], G[None], 2)
    qmc = links.Softmax(max_tensor_classes=2)
    estimate = qmc.gradient_covariance(mean, var, mu[None], c[None], G[None], 2)
    assert 0 < qmc.standard_error_ < 1e-3
    size = np.abs(mu).sum(0) + np.abs(c).sum(0)
    coefficients = np.outer(size, size) + np.abs(G).sum(0) + 2 * np.outer(size, size)
    assert np.all(np.abs(estimate - exact)[0] < 6 * qmc.standard_error_ * coefficients)


def test_extreme_variances_warn_with_the_measured_change():
    """Variances far beyond the grid's reach: finite values and a warning with the gap."""
    link = links.Softmax()
    with pytest.warns(RuntimeWarning, match="not converged .* differs by"):
        values = link.class_expectations(np.zeros((1, 3)), np.array([[1e7, 1e7, 1e7]]), 0)
    assert all(np.all(np.isfinite(v)) for v in values)


def test_bad_requests_are_refused():
    mean, var = np.zeros((1, 3)), np.ones((1, 3))
    mu, c, G = np.zeros((1, 3, 2)), np.zeros((1, 3, 2)), np.ones((1, 3, 2, 2))
    with pytest.raises(ValueError, match="Taylor"):
        links.Softmax(approximation="taylor").gradient_covariance(mean, var, mu, c, G, 0)
    with pytest.raises(ValueError, match="grad_grad_cov must have shape"):
        links.Softmax().gradient_covariance(mean, var, mu, c, G[:, :, :1], 0)
    with pytest.raises(ValueError, match="grad_grad_cov must be finite"):
        links.Softmax().gradient_covariance(mean, var, mu, c, G * np.nan, 0)
    with pytest.raises(ValueError, match="target_class"):
        links.Softmax().gradient_covariance(mean, var, mu, c, G, 3)
