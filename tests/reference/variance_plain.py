"""Plain references for attributions of the posterior variance, sharing no code with
``gpexplain.functionals.variance``: a NumPy GP posterior written from the textbook formula
``s2(x) = k(x, x) - k(x, X) (K + noise I)^{-1} k(X, x)``, Shapley values by enumerating all
2^d coalitions, product-measure games by tensor Gauss-Hermite quadrature, and integrated
gradients by mpmath quadrature of the analytic gradient of s2 (squared exponential).
"""

from __future__ import annotations

import itertools
from math import factorial

import mpmath
import numpy as np


def se_factor(a, b, lengthscale):
    return np.exp(-0.5 * (a - b) ** 2 / lengthscale**2)


def matern52_factor(a, b, lengthscale):
    r = np.sqrt(5.0) * np.abs(a - b) / lengthscale
    return (1.0 + r + r * r / 3.0) * np.exp(-r)


class PlainPosterior:
    """Exact GP with ``k(x, z) = variance prod_j factor_j(x_j, z_j)``."""

    def __init__(self, X, y, factors, variance, noise):
        self.X, self.factors, self.variance = X, factors, variance
        K = self.kernel(X, X) + noise * np.eye(len(X))
        self.K_inverse = np.linalg.inv(K)
        self.alpha = self.K_inverse @ y

    def kernel(self, A, B):
        out = np.full((len(A), len(B)), self.variance)
        for j, factor in enumerate(self.factors):
            out *= factor(A[:, j][:, None], B[:, j][None, :])
        return out

    def variance_at(self, A):
        cross = self.kernel(A, self.X)
        return self.variance - np.einsum("pn,nm,pm->p", cross, self.K_inverse, cross)


def brute_force_shapley(value, d):
    """Shapley values of the game ``value(coalition as a tuple)`` by the subset formula."""
    values = {S: value(S) for r in range(d + 1) for S in itertools.combinations(range(d), r)}
    phi = np.zeros(d)
    for i in range(d):
        for S, v in values.items():
            if i in S:
                continue
            with_i = tuple(sorted(S + (i,)))
            weight = factorial(len(S)) * factorial(d - len(S) - 1) / factorial(d)
            phi[i] += weight * (values[with_i] - v)
    return phi


def variance_game(posterior, x, references):
    """``v(S) = mean_r s2(x_S, r_-S)`` over reference rows (baseline: one row)."""
    def value(S):
        rows = references.copy()
        rows[:, list(S)] = x[list(S)]
        return float(np.mean(posterior.variance_at(rows)))
    return value


def measure_variance_game(posterior, x, mean, std, n_nodes=24):
    """``v(S) = E s2(x_S, r_-S)`` with ``r_j ~ N(mean_j, std_j^2)`` independent, by a
    tensor Gauss-Hermite rule over the absent features."""
    nodes, weights = np.polynomial.hermite_e.hermegauss(n_nodes)
    weights = weights / weights.sum()
    d = len(x)

    def value(S):
        absent = [j for j in range(d) if j not in S]
        if not absent:
            return float(posterior.variance_at(x[None, :])[0])
        grid = np.array(list(itertools.product(range(n_nodes), repeat=len(absent))))
        rows = np.tile(x, (len(grid), 1))
        rows[:, absent] = mean[absent] + std[absent] * nodes[grid]
        w = np.prod(weights[grid], axis=1)
        return float(w @ posterior.variance_at(rows))
    return value


def variance_ig_mpmath(X, y, lengthscale, variance, noise, x, baseline, dps=30):
    """Integrated gradients of s2 for the ARD squared exponential, by mpmath quadrature of
    ``d_i s2 = -2 sum_nm Q_nm k_m d_i k_n`` along the path (all in mpmath)."""
    with mpmath.workdps(dps):
        n, d = X.shape
        ell = [mpmath.mpf(v) for v in lengthscale]
        s2 = mpmath.mpf(variance)

        def k(a, b):
            return s2 * mpmath.exp(-sum((a[j] - b[j]) ** 2 / (2 * ell[j] ** 2)
                                        for j in range(d)))

        Xm = [[mpmath.mpf(v) for v in row] for row in X]
        K = mpmath.matrix(n, n)
        for a in range(n):
            for b in range(n):
                K[a, b] = k(Xm[a], Xm[b]) + (mpmath.mpf(noise) if a == b else 0)
        Q = K**-1
        x = [mpmath.mpf(v) for v in x]
        xt = [mpmath.mpf(v) for v in baseline]

        def gradient(t, i):
            point = [xt[j] + t * (x[j] - xt[j]) for j in range(d)]
            ks = [k(point, Xm[a]) for a in range(n)]
            dks = [-ks[a] * (point[i] - Xm[a][i]) / ell[i] ** 2 for a in range(n)]
            return -2 * sum(Q[a, b] * dks[a] * ks[b] for a in range(n) for b in range(n))

        return np.array([float((x[i] - xt[i]) * mpmath.quad(lambda t, i=i: gradient(t, i), [0, 1]))
                         for i in range(d)])
