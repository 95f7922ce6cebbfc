"""Issue 27 item 15: Sobol indices of nearly interpolating GPs (noise variance 1e-10,
scikit-learn's default ``alpha``), whose representer weights ``a = K^-1 y`` reach ~1e9.

In float64 their quadratic forms keep no digit (negative total indices, first order above
total, Shapley effects off the variance); ``global_sensitivity`` then recomputes them in
binary128. References, independent of ``gpexplain``: the posterior mean evaluated at 40
digits (mpmath) on a tensor grid — Gauss-Hermite (30 nodes per feature) for a Gaussian
measure, Gauss-Legendre (40) for a uniform box, the atoms themselves for an empirical
measure — and the closed Sobol game and brute-force Shapley effects over that grid
(``tests.reference.shapley_brute_force``). The coefficients ``a`` and training points are
the posterior's (they define the function explained); the measure's mean 0 and std 1 and
the lengthscale 8 are exact in binary, so library and reference explain the same function.
"""

from __future__ import annotations

import warnings

import mpmath
import numpy as np
import pytest

import gpexplain as gx
from gpexplain.kernels import RBF
from gpexplain.kernels.measures import Empirical, Gaussian, Uniform
from tests.reference import shapley_brute_force as brute

LENGTHSCALE = 8.0


def _interpolating_posterior(n=60, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n, 2))
    y = np.sin(X[:, 0]) + 0.3 * X[:, 1] ** 2
    return gx.ExactPosterior(X, y, kernel=RBF(LENGTHSCALE, 1.0), noise=1e-10)


def _rule(kind, posterior):
    """Per feature (nodes, weights) as mpmath numbers, and the measure they stand for."""
    mpmath.mp.dps = 40
    if kind == "gaussian":
        nodes, weights = mpmath.gauss_quadrature(30, "hermite")  # weight exp(-t^2)
        rule = ([mpmath.sqrt(2) * t for t in nodes], [w / mpmath.sqrt(mpmath.pi)
                                                      for w in weights])
        return [rule, rule], Gaussian(0.0, 1.0)
    if kind == "uniform":
        nodes, weights = mpmath.gauss_quadrature(40, "legendre")  # on [-1, 1]
        rule = ([2 * t for t in nodes], [w / 2 for w in weights])
        return [rule, rule], Uniform(-2.0, 2.0)
    atoms = posterior.train_inputs[:25]
    return [([mpmath.mpf(v) for v in atoms[:, j]], [mpmath.mpf(1) / 25] * 25)
            for j in range(2)], Empirical(atoms)


def _reference(posterior, rule):
    """(variance, first (2,), total (2,), Shapley (2,)) of ``m(x) = sum_n a_n k(x, z_n)``."""
    a = [mpmath.mpf(v) for v in posterior.alpha]
    Z = posterior.train_inputs
    factors = [[[mpmath.exp(-(x - mpmath.mpf(z)) ** 2 / (2 * LENGTHSCALE**2)) for z in Z[:, j]]
                for x in nodes] for j, (nodes, _) in enumerate(rule)]
    values = np.array([[float(mpmath.fsum(a_n * f0[n] * f1[n] for n, a_n in enumerate(a)))
                        for f1 in factors[1]] for f0 in factors[0]])
    atoms = [(np.array([float(x) for x in nodes]), np.array([float(w) for w in weights]))
             for nodes, weights in rule]
    v = brute.variance_game(values, atoms)
    everything = frozenset({0, 1})
    first = np.array([v({0}), v({1})])
    total = np.array([v(everything) - v(everything - {i}) for i in (0, 1)])
    return v(everything), first, total, brute.shapley_from_game(v, 2)


@pytest.mark.parametrize("kind", ["gaussian", "empirical", "uniform"])
def test_interpolating_gp_indices_match_a_40_digit_reference(kind):
    posterior = _interpolating_posterior()
    assert np.sum(np.abs(posterior.alpha)) > 1e8  # float64 rounding ~1e-16 * 1e16+: no digit
    rule, measure = _rule(kind, posterior)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no CompletenessWarning: the identities hold
        result = gx.global_sensitivity(posterior, measure, interactions=True)
    assert "quadruple precision" in result.method
    variance, first, total, shapley = _reference(posterior, rule)
    # binary128 rounding ~2e-34 |a|_1^2 ~ 1e-16 of the variance; the reference's grid and
    # float64 game ~1e-15 (measured: 3e-16 to 5e-16 in all; float64 alone: 2e-3 to 3e-3)
    tolerance = 1e-13 * variance
    assert abs(result.total_variance - variance) <= tolerance
    np.testing.assert_allclose(result.first_order, first, rtol=0, atol=tolerance)
    np.testing.assert_allclose(result.total, total, rtol=0, atol=tolerance)
    np.testing.assert_allclose(result.shapley_effects, shapley, rtol=0, atol=tolerance)
    # d = 2: the pair's interaction variance is what the first orders leave of the variance
    assert abs(result.second_order[0, 1] - (variance - first.sum())) <= tolerance


@pytest.mark.parametrize("kind", ["gaussian", "empirical"])
def test_interpolating_gp_posterior_moments_are_consistent(kind):
    """Every index is the variance of a component of f = m + g, so its posterior expectation
    is the mean's index plus E[index of g] >= 0; in float64 it came out below it (and the
    stds were clamped to 0 from negative variances). The Shapley effects' expectations sum
    to the expected variance (linearity)."""
    posterior = _interpolating_posterior()
    result = gx.global_sensitivity(posterior, _rule(kind, posterior)[1], interactions=True)
    slack = 1e-12 * result.total_variance
    for mean, expected in (
        (result.total_variance, result.expected_total_variance),
        (result.first_order, result.expected_first_order),
        (result.total, result.expected_total),
        (result.shapley_effects, result.expected_shapley_effects),
        (result.second_order, result.expected_second_order),
    ):
        assert np.all(np.asarray(expected) - mean >= -slack)
    assert abs(result.expected_shapley_effects.sum() - result.expected_total_variance) <= slack
    assert np.all(result.total_std > 0) and np.all(result.first_order_std > 0)
    # the posterior uncertainty of an interpolating GP is small but not zero
    assert result.total_variance_std < 1e-3 * result.total_variance


def test_binary128_and_float64_agree_on_a_well_conditioned_gp(monkeypatch):
    """The binary128 path is the float64 code on other arrays: forced on a GP with noise 0.05
    (where float64 is accurate), every field agrees with the float64 result to ~1e-13."""
    from gpexplain.explain import sensitivity

    rng = np.random.default_rng(4)
    X = rng.normal(size=(25, 3))
    posterior = gx.ExactPosterior(X, np.sin(2 * X[:, 0]) + X[:, 1] * X[:, 2],
                                  kernel=RBF([0.9, 1.3, 2.0], 1.1), noise=0.05, mean=0.2)
    for measure in (None, Empirical(X[:12]), Uniform(-1.5, 1.5)):
        plain = gx.global_sensitivity(posterior, measure, interactions=True)
        monkeypatch.setattr(sensitivity, "_QUAD_TRIGGER", 0.0)
        quad = gx.global_sensitivity(posterior, measure, interactions=True)
        monkeypatch.undo()
        assert "quadruple precision" in quad.method and "quadruple" not in plain.method
        scale = plain.total_variance
        for name in ("first_order", "total", "shapley_effects", "expected_first_order",
                     "expected_total", "expected_shapley_effects", "first_order_std",
                     "total_std", "shapley_effects_std", "second_order",
                     "expected_second_order", "second_order_std"):
            np.testing.assert_allclose(getattr(quad, name), getattr(plain, name), rtol=0,
                                       atol=1e-12 * scale, err_msg=name)


def test_stds_too_costly_in_binary128_stay_float64_with_a_warning(monkeypatch):
    """The stds need one n x n binary128 product per index (~5e-8 s per multiply-add);
    above ``_QUAD_STD_SECONDS`` they are the float64 ones, said so with the estimate, while
    the indices and expectations are still binary128 (and still match the reference)."""
    from gpexplain.accuracy import CompletenessWarning
    from gpexplain.explain import sensitivity

    monkeypatch.setattr(sensitivity, "_QUAD_STD_SECONDS", 0.0)
    posterior = _interpolating_posterior()
    rule, measure = _rule("gaussian", posterior)
    with pytest.warns(CompletenessWarning, match=r"would take an estimated \d+ s"):
        result = gx.global_sensitivity(posterior, measure, interactions=True)
    variance, first, total, shapley = _reference(posterior, rule)
    np.testing.assert_allclose(result.total, total, rtol=0, atol=1e-13 * variance)
    assert abs(result.second_order[0, 1] - (variance - first.sum())) <= 1e-13 * variance
    assert np.all(result.expected_total - result.total >= -1e-12 * variance)
