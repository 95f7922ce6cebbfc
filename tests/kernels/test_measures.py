"""Product measures: validation, and the SE integrals against quadrature / explicit sums."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
from scipy.integrate import quad
from scipy.stats import norm

from gpexplain.kernels.measures import Empirical, Gaussian


def test_gaussian_validation_and_broadcast():
    measure = Gaussian(0.5, [1.0, 2.0])
    assert measure.n_features == 2
    resolved = measure.resolve(2)
    np.testing.assert_array_equal(resolved.mean, [0.5, 0.5])
    assert Gaussian().n_features is None and Gaussian().resolve(3).std.shape == (3,)
    with pytest.raises(ValueError, match="std must be positive"):
        Gaussian(0.0, [1.0, 0.0])
    with pytest.raises(ValueError, match="mean must be finite"):
        Gaussian(np.nan)
    with pytest.raises(ValueError, match="mean has 3 entries but std has 2"):
        Gaussian([0.0, 1.0, 2.0], [1.0, 1.0])
    with pytest.raises(ValueError, match="2 features but the inputs have 3"):
        measure.resolve(3)


def test_empirical_validation():
    with pytest.raises(ValueError, match="NaN at row 1"):
        Empirical(np.array([[0.0, 1.0], [np.nan, 2.0]]))
    with pytest.raises(ValueError, match="2-D"):
        Empirical(np.zeros(3))
    with pytest.raises(ValueError, match="2 features but the inputs have 4"):
        Empirical(np.zeros((3, 2))).resolve(4)


def _mp_constrained(a, b, lengthscale, mu, sigma):
    """Eq. 4 with the integrals done by mpmath quadrature (30 digits). The double integral
    M uses s - t ~ N(0, 2 sigma^2) for independent s, t ~ N(mu, sigma^2)."""
    mpmath.mp.dps = 30
    ell = mpmath.mpf(lengthscale)

    def k(u, v):
        return mpmath.exp(-((u - v) ** 2) / (2 * ell**2))

    def m(u):
        density = lambda s: mpmath.npdf(s, mu, sigma)  # noqa: E731
        return mpmath.quad(lambda s: k(u, s) * density(s), [-mpmath.inf, u, mpmath.inf])

    M = mpmath.quad(lambda t: k(t, 0) * mpmath.npdf(t, 0, sigma * mpmath.sqrt(2)),
                    [-mpmath.inf, 0, mpmath.inf])
    return k(a, b) - m(a) * m(b) / M


def test_gaussian_embedding_gives_eq4_constrained_kernel():
    """kt = k - h(a) h(b) from the closed form equals eq. 4 integrated by mpmath."""
    measure = Gaussian([0.3], [1.7])
    lengthscale = np.array([0.8])
    for a, b in [(0.1, -0.4), (2.5, 3.0), (-4.0, 1.0)]:
        h = measure.se_embedding(np.array([[a], [b]]), lengthscale)[:, 0]
        closed = np.exp(-0.5 * (a - b) ** 2 / 0.64) - h[0] * h[1]
        expected = float(_mp_constrained(a, b, 0.8, 0.3, 1.7))
        assert closed == pytest.approx(expected, abs=1e-14)


@pytest.mark.parametrize("lengthscale", [0.3, 1.0, 4.0])
def test_gaussian_second_moment_against_adaptive_quadrature(lengthscale):
    """E_s[kt(s, a) kt(s, b)] closed form vs scipy's adaptive quadrature of the product."""
    measure = Gaussian([0.2, -1.0], [0.9, 2.0])
    ls = np.array([lengthscale, 1.5 * lengthscale])
    rng = np.random.default_rng(0)
    X1, X2 = rng.normal(size=(3, 2)), rng.normal(size=(2, 2)) * 2
    closed = measure.constrained_se_second_moment(X1, X2, ls)
    for i in range(2):
        mu, sd = measure.mean[i], measure.std[i]

        def kt(s, x, i=i):
            h = measure.se_embedding(np.array([[s, s], [x, x]]), ls)[:, i]
            return np.exp(-0.5 * (s - x) ** 2 / ls[i] ** 2) - h[0] * h[1]

        for p, a in enumerate(X1[:, i]):
            for q, b in enumerate(X2[:, i]):
                value, _ = quad(
                    lambda s, a=a, b=b, mu=mu, sd=sd: kt(s, a) * kt(s, b) * norm.pdf(s, mu, sd),
                    mu - 12 * sd, mu + 12 * sd, points=sorted({a, b}), epsabs=1e-14,
                    epsrel=1e-12, limit=400,
                )
                assert closed[p, q, i] == pytest.approx(value, abs=1e-12)


def test_empirical_integrals_are_explicit_averages():
    rng = np.random.default_rng(1)
    atoms = rng.normal(size=(7, 2))
    measure = Empirical(atoms)
    ls = np.array([0.7, 1.3])
    X = rng.normal(size=(3, 2))
    for i in range(2):
        k = lambda u, v, i=i: np.exp(-0.5 * np.subtract.outer(u, v) ** 2 / ls[i] ** 2)  # noqa: E731
        m = k(X[:, i], atoms[:, i]).mean(1)
        M = k(atoms[:, i], atoms[:, i]).mean()
        np.testing.assert_allclose(measure.se_embedding(X, ls)[:, i], m / np.sqrt(M), atol=1e-15)
        kt_atoms = k(atoms[:, i], X[:, i]) - np.outer(
            k(atoms[:, i], atoms[:, i]).mean(1), m
        ) / M
        expected = kt_atoms.T @ kt_atoms / 7
        np.testing.assert_allclose(
            measure.constrained_se_second_moment(X, X, ls)[:, :, i], expected, atol=1e-14
        )


def _second_moment_mpmath(a, b, lengthscale, mean, std, dps=50):
    """E_{s ~ N(mean, std^2)}[kt(s, a) kt(s, b)] at ``dps`` digits from the definitions."""
    import mpmath

    with mpmath.workdps(dps):
        L, D = mpmath.mpf(lengthscale) ** 2, mpmath.mpf(std) ** 2
        mu = mpmath.mpf(mean)
        amplitude = (L * (L + 2 * D)) ** mpmath.mpf(0.25) / mpmath.sqrt(L + D)

        def h(x):
            return amplitude * mpmath.exp(-((x - mu) ** 2) / (2 * (L + D)))

        def kt(s, x):
            return mpmath.exp(-((s - x) ** 2) / (2 * L)) - h(s) * h(x)

        def integrand(s):
            density = mpmath.exp(-((s - mu) ** 2) / (2 * D)) / mpmath.sqrt(2 * mpmath.pi * D)
            return kt(s, a) * kt(s, b) * density

        points = sorted({mu - 40 * mpmath.sqrt(D), mpmath.mpf(a), mpmath.mpf(b),
                         mu + 40 * mpmath.sqrt(D)})
        return float(mpmath.quad(integrand, points))


@pytest.mark.parametrize("ratio", [1e-2, 0.3, 1.0, 10.0, 30.0, 1e2, 1e3, 1e4])
def test_constrained_second_moment_against_mpmath_for_any_lengthscale(ratio):
    # The closed form cancels like eps (lengthscale / std)^4 for wide kernels (23% off at a
    # ratio of 1000 before the Gauss-Hermite path); the result must keep its relative digits.
    mean, std = 0.4, 1.3
    measure = Gaussian(mean, std).resolve(1)
    lengthscale = np.array([ratio * std])
    a = np.array([[mean - 0.7 * std], [mean + 1.1 * std]])
    b = np.array([[mean + 0.2 * std], [mean - 2.0 * std], [mean + 3.1 * std]])
    moments = measure.constrained_se_second_moment(a, b, lengthscale)[:, :, 0]
    for i in range(2):
        for j in range(3):
            reference = _second_moment_mpmath(a[i, 0], b[j, 0], lengthscale[0], mean, std)
            assert abs(moments[i, j] - reference) <= 1e-8 * abs(reference) + 1e-300
