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
