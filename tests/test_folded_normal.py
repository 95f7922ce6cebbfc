"""Folded-normal moments (``gpexplain._numerics_folded_normal``) against mpmath integrals,
scipy's bivariate normal CDF and Monte Carlo (|z| < 5), including zero means, zero variances
and correlations near +-1 (no NaN)."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
from scipy.stats import multivariate_normal

from gpexplain._numerics_folded_normal import bivariate_normal_cdf, mean_abs, mean_abs_product

CASES = [  # m1, m2, var1, var2, cov
    (0.3, -0.5, 1.0, 2.0, 0.5), (0.0, 0.0, 1.0, 1.0, 0.9), (2.0, 1.0, 0.5, 0.3, -0.2),
    (0.1, 0.2, 1.0, 1.0, -0.99), (-1.5, 0.4, 0.2, 3.0, 0.1),
]


def _mpmath_abs_product(m1, m2, v1, v2, c):
    """``E|X||Y| = int |x(u)| E[|Y| | u] phi(u) du`` (mpmath): given U = u, Y is normal with
    mean ``m2 + c u / s1`` and variance ``v2 - c^2 / v1``, whose E|Y| is an mpmath integral of
    the folded normal written here, not the library's; the outer integral splits at x = 0."""
    mpmath.mp.dps = 20
    s1 = mpmath.sqrt(v1)
    conditional_sd = mpmath.sqrt(v2 - mpmath.mpf(c) ** 2 / v1)

    def inner(u):
        mu = m2 + c * u / s1
        sd = conditional_sd
        return (sd * mpmath.sqrt(2 / mpmath.pi) * mpmath.exp(-mu**2 / (2 * sd**2))
                + mu * mpmath.erf(mu / (sd * mpmath.sqrt(2))))

    return mpmath.quad(lambda u: abs(m1 + s1 * u) * inner(u) * mpmath.npdf(u),
                       [-mpmath.inf, -m1 / s1, mpmath.inf])


@pytest.mark.parametrize("case", CASES)
def test_abs_product_matches_mpmath_integral(case):
    expected = float(_mpmath_abs_product(*case))
    assert mean_abs_product(*case) == pytest.approx(expected, rel=1e-9)


def test_abs_product_and_mean_abs_match_monte_carlo():
    rng = np.random.default_rng(1)
    for m1, m2, v1, v2, c in CASES:
        draws = rng.multivariate_normal([m1, m2], [[v1, c], [c, v2]], size=400_000)
        values = np.abs(draws[:, 0] * draws[:, 1])
        standard_error = values.std() / np.sqrt(len(values))
        z = (mean_abs_product(m1, m2, v1, v2, c) - values.mean()) / standard_error
        assert abs(z) < 5
        first = np.abs(draws[:, 0])
        assert abs(mean_abs(m1, v1) - first.mean()) < 5 * first.std() / np.sqrt(len(first))


def test_mean_abs_matches_mpmath_and_zero_variance():
    mpmath.mp.dps = 20
    for mu, var in [(0.7, 2.0), (-0.2, 0.01), (0.0, 1.0)]:
        s = mpmath.sqrt(var)
        expected = mpmath.quad(lambda x, mu=mu, s=s: abs(x) * mpmath.npdf(x, mu, s),
                               [-mpmath.inf, 0, mpmath.inf])
        assert mean_abs(mu, var) == pytest.approx(float(expected), rel=1e-12)
    np.testing.assert_array_equal(mean_abs([-2.0, 0.0], [0.0, 0.0]), [2.0, 0.0])
    # one variance zero: |m1| E|Y|; both zero: |m1 m2|; finite as the variance tends to 0
    assert mean_abs_product(-2.0, 0.5, 0.0, 1.0, 0.0) == pytest.approx(2 * mean_abs(0.5, 1.0))
    assert mean_abs_product(-2.0, 0.5, 0.0, 0.0, 0.0) == 1.0
    tiny = mean_abs_product(-2.0, 0.5, 1e-300, 1.0, 1e-151)
    assert np.isfinite(tiny) and tiny == pytest.approx(2 * mean_abs(0.5, 1.0), rel=1e-9)


@pytest.mark.parametrize("r", [-0.999999, -0.5, 0.0, 0.3, 0.99, 0.999999])
def test_bivariate_cdf_matches_scipy_including_zeros(r):
    for h, k in [(0.0, 0.0), (0.0, 1.2), (-0.7, 0.0), (0.4, -1.1), (-2.5, -3.0), (3.0, 2.0)]:
        expected = multivariate_normal([0, 0], [[1, r], [r, 1]]).cdf([h, k])
        assert bivariate_normal_cdf(h, k, r) == pytest.approx(expected, abs=2e-7)


def test_perfect_correlation_is_finite_and_continuous():
    # identical attributions (duplicated rows): E|X||X| = E X^2 = mu^2 + var
    value = mean_abs_product(0.3, 0.3, 1.0, 1.0, 1.0)
    assert value == pytest.approx(0.3**2 + 1.0, rel=1e-6)
    assert mean_abs_product(0.3, -0.3, 1.0, 1.0, -1.0) == pytest.approx(1.09, rel=1e-6)
