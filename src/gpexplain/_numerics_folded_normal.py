"""Moments of absolute values of Gaussians (folded normal), univariate and bivariate.

For X ~ N(mu, s^2) (Leone, Nelson and Nottingham, *The folded normal distribution*, 1961):

    E|X| = s sqrt(2/pi) exp(-mu^2 / (2 s^2)) + mu (1 - 2 Phi(-mu/s)),   E|X|^2 = mu^2 + s^2.

For (X, Y) jointly Gaussian with means (m1, m2), standard deviations (s1, s2) and correlation
r, ``E|X||Y|`` is the sum over the four sign quadrants of ``E[(e1 X)(e2 Y); e1 X > 0, e2 Y > 0]``
(e1, e2 = +-1: means e1 m1, e2 m2, correlation e1 e2 r), each a truncated product moment of a
bivariate normal (Rosenbaum, *Moments of a truncated bivariate normal distribution*, JRSS B
1961). With U, V standard bivariate normal of correlation r, a, b the truncation points and
c = sqrt(1 - r^2):

    P(U > a, V > b)        = L = Phi2(-a, -b; r)
    E[U; U > a, V > b]     = phi(a) Phi((r a - b)/c) + r phi(b) Phi((r b - a)/c)
    E[UV; U > a, V > b]    = r L + r a phi(a) Phi((r a - b)/c) + r b phi(b) Phi((r b - a)/c)
                             + c phi(b) phi((a - r b)/c),

and ``Phi2`` from Owen's T function (Owen, *Tables for computing bivariate normal
probabilities*, 1956), vectorised (``scipy.special.owens_t``):

    Phi2(h, k; r) = (Phi(h) + Phi(k))/2 - T(h, (k - r h)/(h c)) - T(k, (h - r k)/(k c)) - beta,

beta = 0 when h k > 0 or (h k = 0 and h + k >= 0), else 1/2. A zero variance is exact (E|X||Y|
= |m1| E|Y|), |r| is kept below 1 - 1e-12 (the moments are continuous in r), and nothing
returns NaN. Checked against mpmath double integrals and Monte Carlo in
``tests/test_folded_normal.py``.
"""

from __future__ import annotations

import numpy as np
from scipy.special import ndtr, owens_t

__all__ = ["bivariate_normal_cdf", "mean_abs", "mean_abs_product"]

_SQRT_2_OVER_PI = np.sqrt(2.0 / np.pi)
_MAX_CORRELATION = 1.0 - 1e-12


def _phi(x):
    return np.exp(-0.5 * x * x) / np.sqrt(2.0 * np.pi)


def mean_abs(mu, var):
    """``E|X|`` for X ~ N(mu, var), elementwise; ``|mu|`` where var = 0 (no NaN)."""
    mu, var = np.asarray(mu, float), np.maximum(np.asarray(var, float), 0.0)
    sd = np.sqrt(var)
    safe = np.where(sd > 0, sd, 1.0)
    folded = sd * _SQRT_2_OVER_PI * np.exp(-0.5 * (mu / safe) ** 2) + mu * (
        1.0 - 2.0 * ndtr(-mu / safe))
    return np.where(sd > 0, folded, np.abs(mu))


def bivariate_normal_cdf(h, k, r):
    """``P(U < h, V < k)`` for standard normals of correlation r, elementwise (|r| < 1)."""
    h, k, r = np.broadcast_arrays(*(np.asarray(v, float) for v in (h, k, r)))
    r = np.clip(r, -_MAX_CORRELATION, _MAX_CORRELATION)
    c = np.sqrt((1.0 - r) * (1.0 + r))
    # Phi2 is continuous in h and k: a zero is moved off the branch point of the formula.
    h = np.where(h == 0.0, 1e-300, h)
    k = np.where(k == 0.0, 1e-300, k)
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        ah = np.clip((k - r * h) / (h * c), -1e300, 1e300)
        ak = np.clip((h - r * k) / (k * c), -1e300, 1e300)
    beta = np.where((h > 0) == (k > 0), 0.0, 0.5)  # h k underflows for tiny h, k
    value = 0.5 * (ndtr(h) + ndtr(k)) - owens_t(h, ah) - owens_t(k, ak) - beta
    return np.clip(value, 0.0, 1.0)


def _positive_quadrant_product(m1, m2, s1, s2, r):
    """``E[XY; X > 0, Y > 0]`` (s1, s2 > 0)."""
    a, b = -m1 / s1, -m2 / s2
    c = np.sqrt((1.0 - r) * (1.0 + r))
    tail_a = _phi(a) * ndtr((r * a - b) / c)
    tail_b = _phi(b) * ndtr((r * b - a) / c)
    L = bivariate_normal_cdf(-a, -b, r)
    EU = tail_a + r * tail_b
    EV = tail_b + r * tail_a
    EUV = r * L + r * a * tail_a + r * b * tail_b + c * _phi(b) * _phi((a - r * b) / c)
    return m1 * m2 * L + m1 * s2 * EV + s1 * m2 * EU + s1 * s2 * EUV


def mean_abs_product(m1, m2, var1, var2, cov):
    """``E|X||Y|`` for (X, Y) jointly Gaussian, elementwise over broadcast arrays.

    Parameters
    ----------
    m1, m2 : array-like
        Means.
    var1, var2 : array-like
        Variances (>= 0; negatives from round-off are treated as 0).
    cov : array-like
        Covariance of X and Y (the correlation is clipped to [-1 + 1e-12, 1 - 1e-12]).

    Returns
    -------
    ndarray: ``E|X||Y|``; ``|m1| E|Y|`` (or ``|m2| E|X|``) where a variance is 0.
    """
    m1, m2, var1, var2, cov = np.broadcast_arrays(
        *(np.asarray(v, float) for v in (m1, m2, var1, var2, cov)))
    s1, s2 = np.sqrt(np.maximum(var1, 0.0)), np.sqrt(np.maximum(var2, 0.0))
    degenerate = (s1 == 0) | (s2 == 0)
    t1, t2 = np.where(degenerate, 1.0, s1), np.where(degenerate, 1.0, s2)
    r = np.clip(np.where(degenerate, 0.0, cov / (t1 * t2)), -_MAX_CORRELATION, _MAX_CORRELATION)
    total = 0.0
    for e1 in (1.0, -1.0):
        for e2 in (1.0, -1.0):
            total = total + _positive_quadrant_product(e1 * m1, e2 * m2, t1, t2, e1 * e2 * r)
    fallback = np.where(s1 == 0, np.abs(m1) * mean_abs(m2, var2), np.abs(m2) * mean_abs(m1, var1))
    return np.where(degenerate, fallback, total)
