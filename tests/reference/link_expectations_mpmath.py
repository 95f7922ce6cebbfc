"""High-precision references for Gaussian expectations of classifier links (mpmath).

Straight from the definitions, with none of the identities ``gpexplain.links`` relies on
(Stein's lemma, closed forms, polynomial derivatives): f ~ N(m, s2) is integrated against its
density by ``mpmath.quad`` on break points at m + {0, +-2, +-5, +-10, +-20} s; the gradient g
enters through its Gaussian conditional on f (Seitz 2022, Proposition 2),
``E[g | f] = mu + c (f - m) / s2`` and ``Cov[g | f] = G - c c^T / s2``.
"""

from __future__ import annotations

import mpmath as mp
import numpy as np

DPS = 20


def _sigma(link: str):
    if link == "logit":
        return lambda f: 1 / (1 + mp.exp(-f))
    if link == "probit":
        return lambda f: mp.ncdf(f)
    raise ValueError(link)


def sigma_derivative(link: str, f, order: int):
    """The order-th derivative of the link at f, by mpmath's numerical differentiation."""
    with mp.workdps(DPS):
        return mp.diff(_sigma(link), mp.mpf(f), order)


def _slope(link: str):
    if link == "logit":
        return lambda f: mp.exp(-f) / (1 + mp.exp(-f)) ** 2
    return lambda f: mp.npdf(f)


def _expect(function, m, s2):
    m, s = mp.mpf(m), mp.sqrt(mp.mpf(s2))
    points = [m + k * s for k in (-20, -10, -5, -2, 0, 2, 5, 10, 20)]
    return mp.quad(lambda f: function(f) * mp.npdf(f, m, s), [-mp.inf, *points, mp.inf])


def expected_response(link: str, m: float, s2: float) -> float:
    with mp.workdps(DPS):
        return float(_expect(_sigma(link), m, s2))


def expected_gradient(link: str, m, s2, mu, c) -> np.ndarray:
    """``E[sigma'(f) g]`` for scalar (m, s2) and vectors mu, c (s2 > 0)."""
    with mp.workdps(DPS):
        slope = _slope(link)
        base = _expect(slope, m, s2)
        tilt = _expect(lambda f: slope(f) * (f - m), m, s2) / mp.mpf(s2)
        return np.array([float(mu_k * base + c_k * tilt) for mu_k, c_k in zip(mu, c, strict=True)])


def gradient_second_moment(link: str, m, s2, mu, c, G) -> np.ndarray:
    """``E[sigma'(f)^2 g g^T]`` through the conditional moments of g given f."""
    with mp.workdps(DPS):
        slope = _slope(link)
        s2m = mp.mpf(s2)
        moments = [
            _expect(lambda f, p=p: slope(f) ** 2 * ((f - m) / s2m) ** p, m, s2) for p in (0, 1, 2)
        ]
        d = len(mu)
        out = np.empty((d, d))
        for k in range(d):
            for j in range(d):
                conditional = mp.mpf(G[k][j]) - mp.mpf(c[k]) * c[j] / s2m
                out[k, j] = float(
                    moments[0] * (conditional + mp.mpf(mu[k]) * mu[j])
                    + moments[1] * (mp.mpf(mu[k]) * c[j] + mp.mpf(c[k]) * mu[j])
                    + moments[2] * mp.mpf(c[k]) * c[j]
                )
        return out



def _explicit_derivative(link: str, order: int):
    """sigma^(order) differentiated by hand: logit with e = exp(-f),
    ``e / (1 + e)^2``, ``e (e - 1) / (1 + e)^3``, ``e (e^2 - 4 e + 1) / (1 + e)^4``; probit
    ``phi``, ``-f phi``, ``(f^2 - 1) phi``."""
    if link == "logit":
        numerators = {0: lambda e: 1 + 0 * e, 1: lambda e: e, 2: lambda e: e * (e - 1),
                      3: lambda e: e * (e * e - 4 * e + 1)}
        return lambda f: numerators[order](mp.exp(-f)) / (1 + mp.exp(-f)) ** (order + 1)
    polynomials = {1: lambda f: 1, 2: lambda f: -f, 3: lambda f: f * f - 1}
    if order == 0:
        return mp.ncdf
    return lambda f: polynomials[order](f) * mp.npdf(f)


def pair_expectation(link: str, p: int, q: int, mean_a, mean_b, var_a, var_b, cov_ab) -> float:
    """``E[sigma^(p)(a) sigma^(q)(b)]`` for jointly Gaussian (a, b), straight from the
    definition: b given a is N(mean_b + beta (a - mean_a), var_b - beta cov_ab) with
    ``beta = cov_ab / var_a`` (var_a > 0), a nested mpmath quadrature at 15 digits (the inner
    one a point evaluation when b is a function of a)."""
    with mp.workdps(15):
        m_a, m_b, v_a = mp.mpf(mean_a), mp.mpf(mean_b), mp.mpf(var_a)
        beta = mp.mpf(cov_ab) / v_a
        rest = mp.mpf(var_b) - beta * mp.mpf(cov_ab)
        outer, inner = _explicit_derivative(link, p), _explicit_derivative(link, q)

        def conditional(u):
            centre = m_b + beta * (u - m_a)
            if rest <= mp.mpf(var_b) * mp.mpf(1e-14):
                return inner(centre)
            return _truncated_expect(inner, centre, mp.sqrt(rest))

        return float(_truncated_expect(lambda u: outer(u) * conditional(u), m_a, mp.sqrt(v_a)))


def _truncated_expect(function, m, s):
    """E[function(f)], f ~ N(m, s^2), over m +- 9 s (the Gaussian mass outside is 2e-19),
    Gauss-Legendre on pieces of width s/2 (the link varies on the scale 1, so pieces of a
    wide Gaussian are also cut at every unit of f)."""
    width = min(s / 2, mp.mpf(1))
    n_pieces = int(mp.ceil(18 * s / width))
    edges = [m - 9 * s + k * 18 * s / n_pieces for k in range(n_pieces + 1)]
    return mp.quad(lambda f: function(f) * mp.npdf(f, m, s), edges, method="gauss-legendre")


def _composite_legendre(centre, scale, n_nodes=16):
    """Nodes and weights (..., N) of composite 16-point Gauss-Legendre over centre +- 9 scale,
    pieces no wider than min(scale / 2, 0.5) (the link varies on the scale 1)."""
    n_pieces = int(np.ceil(18.0 / min(0.5, 0.5 / max(np.max(scale), 1e-300))))
    x, w = np.polynomial.legendre.leggauss(n_nodes)
    edges = np.linspace(-9.0, 9.0, n_pieces + 1)
    half = 0.5 * np.diff(edges)
    z = (0.5 * (edges[:-1] + edges[1:])[:, None] + half[:, None] * x).ravel()
    weights = (half[:, None] * w).ravel() * np.exp(-0.5 * z * z) / np.sqrt(2.0 * np.pi)
    return np.asarray(centre)[..., None] + np.asarray(scale)[..., None] * z, weights


def pair_expectation_float(link: str, p: int, q: int, mean_a, mean_b, var_a, var_b,
                           cov_ab) -> float:
    """``pair_expectation`` in float64 (fast enough for wide variances): the same nested
    conditional integral by composite Gauss-Legendre (``_composite_legendre``) over the
    standardised variables, with the hand-differentiated derivatives of
    ``_explicit_derivative`` in NumPy (``_numpy_derivative``)."""
    beta = cov_ab / var_a
    rest = max(var_b - beta * cov_ab, 0.0)
    u, w_outer = _composite_legendre(mean_a, np.sqrt(var_a))
    v, w_inner = _composite_legendre(mean_b + beta * (u - mean_a), np.full_like(u, np.sqrt(rest)))
    inner = _numpy_derivative(link, q, v) @ w_inner if rest > 0 else _numpy_derivative(
        link, q, mean_b + beta * (u - mean_a))
    return float(np.sum(w_outer * _numpy_derivative(link, p, u) * inner))


def _numpy_derivative(link: str, order: int, f):
    from scipy.special import ndtr

    if link == "logit":
        e = np.exp(-f)
        numerator = {0: np.ones_like(e), 1: e, 2: e * (e - 1), 3: e * (e * e - 4 * e + 1)}[order]
        return numerator / (1 + e) ** (order + 1)
    density = np.exp(-0.5 * f * f) / np.sqrt(2.0 * np.pi)
    return {0: ndtr(f), 1: density, 2: -f * density, 3: (f * f - 1) * density}[order]
