"""Joint posterior sample paths of a GP in representer form, and attributions of each path.

Independent of ``gpexplain``'s functionals: a sample path is a function we can evaluate and
differentiate in closed form, and each attribution of it is computed by its definition
(integrated gradients by a fine Gauss-Legendre sum of the path's exact gradient; Shapley
values by enumerating all coalitions). The Monte Carlo covariance of the attributions over
paths then estimates the covariance across points without any two-point prior term.

Sample paths (pathwise conditioning, Wilson et al. 2020, *Efficiently sampling functions from
Gaussian process posteriors*): for a posterior ``m(x) = m0 + k(x, Z) a``, ``c = k - k(., Z) Q
k(Z, .)``, with ``S = Kzz - Kzz Q Kzz`` (PSD for every posterior here),

    f(x) = m0 + k(x, Z) a + f0(x) + k(x, Z) Kzz^{-1} (S^{1/2} e - f0(Z)),   e ~ N(0, I),

has mean m and covariance ``k - k Kzz^{-1} k + k Kzz^{-1} S Kzz^{-1} k = c`` exactly, for any
prior path f0 whose covariance is k (not necessarily Gaussian). For the squared exponential,
f0 is a random-Fourier-feature path with *fresh* frequencies per path: its covariance is
exactly k (Rahimi and Recht 2007), so second moments over paths are exact and only the Monte
Carlo error remains (z-scores use the empirical fourth moments).
"""

from __future__ import annotations

from itertools import combinations
from math import factorial

import numpy as np


class SEPrior:
    """Squared exponential ``s2 exp(-|x - x'|^2 / (2 l^2))``; paths with fresh frequencies."""

    def __init__(self, lengthscale, variance, n_features, n_frequencies=200):
        self.l = np.broadcast_to(np.asarray(lengthscale, float), (n_features,))
        self.s2, self.d, self.R = float(variance), n_features, n_frequencies

    def kernel(self, X, Z):
        diff = (X[:, None, :] - Z[None, :, :]) / self.l
        return self.s2 * np.exp(-0.5 * np.sum(diff**2, axis=2))

    def kernel_grad(self, X, Z):  # d/dx k(x, z): (n, m, d)
        return -self.kernel(X, Z)[:, :, None] * (X[:, None, :] - Z[None, :, :]) / self.l**2

    def sample(self, n_paths, rng):
        omega = rng.normal(size=(n_paths, self.R, self.d)) / self.l
        phase = rng.uniform(0, 2 * np.pi, size=(n_paths, self.R))
        weight = rng.normal(size=(n_paths, self.R)) * np.sqrt(2 * self.s2 / self.R)
        return omega, phase, weight

    @staticmethod
    def path_value(paths, X):  # (N, n)
        omega, phase, weight = paths
        return np.einsum("nr,nxr->nx", weight, np.cos(np.einsum("nrd,xd->nxr", omega, X)
                                                      + phase[:, None, :]))

    @staticmethod
    def path_grad(paths, X):  # (N, n, d)
        omega, phase, weight = paths
        sines = np.sin(np.einsum("nrd,xd->nxr", omega, X) + phase[:, None, :])
        return -np.einsum("nr,nxr,nrd->nxd", weight, sines, omega)


class Matern52Prior(SEPrior):
    """Matern 5/2 ``s2 (1 + sqrt5 r + 5 r^2 / 3) exp(-sqrt5 r)``, ``r = |(x - x') / l|``.

    Its spectral density is a multivariate Student t with 2 nu = 5 degrees of freedom
    (Rasmussen and Williams 2006, eq. 4.15), so the frequencies are ``z / l * sqrt(5 / u)``,
    z ~ N(0, I), u ~ chi^2(5): fresh per path, the paths' covariance is exactly k.
    """

    def kernel(self, X, Z):
        r = self._distance(X, Z)
        return self.s2 * (1 + np.sqrt(5) * r + 5 * r**2 / 3) * np.exp(-np.sqrt(5) * r)

    def kernel_grad(self, X, Z):  # dk/dr dr/dx = -5/3 s2 (1 + sqrt5 r) e^(-sqrt5 r) (x - z)/l^2
        r = self._distance(X, Z)
        factor = -5 / 3 * self.s2 * (1 + np.sqrt(5) * r) * np.exp(-np.sqrt(5) * r)
        return factor[:, :, None] * (X[:, None, :] - Z[None, :, :]) / self.l**2

    def _distance(self, X, Z):
        return np.sqrt(np.sum(((X[:, None, :] - Z[None, :, :]) / self.l) ** 2, axis=2))

    def sample(self, n_paths, rng):
        omega, phase, weight = super().sample(n_paths, rng)  # omega: z / l
        return omega * np.sqrt(5 / rng.chisquare(5, size=(n_paths, self.R, 1))), phase, weight


class RandomFeaturePrior(SEPrior):
    """``k(x, x') = s2 / M sum_m cos(v_m . (x - x'))``: paths ``phi(x)^T w``, w ~ N(0, I)."""

    def __init__(self, frequencies, variance):
        self.v, self.s2 = np.asarray(frequencies, float), float(variance)
        self.d = self.v.shape[1]

    def kernel(self, X, Z):
        return self.s2 / len(self.v) * np.cos(
            np.einsum("md,xzd->xzm", self.v, X[:, None, :] - Z[None, :, :])).sum(2)

    def kernel_grad(self, X, Z):
        sines = np.sin(np.einsum("md,xzd->xzm", self.v, X[:, None, :] - Z[None, :, :]))
        return -self.s2 / len(self.v) * np.einsum("xzm,md->xzd", sines, self.v)

    def sample(self, n_paths, rng):
        M = len(self.v)
        omega = np.broadcast_to(np.concatenate([self.v, self.v]), (n_paths, 2 * M, self.d))
        phase = np.broadcast_to(np.r_[np.zeros(M), np.full(M, -np.pi / 2)], (n_paths, 2 * M))
        weight = rng.normal(size=(n_paths, 2 * M)) * np.sqrt(self.s2 / M)
        return omega, phase, weight


class PosteriorPaths:
    """Posterior sample paths from a prior and a representer form (Z, a, m0, Q)."""

    def __init__(self, prior, Z, alpha, m0, Q, n_paths, rng):
        self.prior, self.Z, self.m0 = prior, Z, m0
        Kzz = prior.kernel(Z, Z)
        S = Kzz - Kzz @ Q @ Kzz
        values, vectors = np.linalg.eigh(0.5 * (S + S.T))
        root = vectors * np.sqrt(np.clip(values, 0, None))
        self.paths = prior.sample(n_paths, rng)
        noise = rng.normal(size=(n_paths, len(Z))) @ root.T  # S^{1/2} e
        self.beta = alpha[None, :] + np.linalg.solve(
            Kzz, (noise - prior.path_value(self.paths, Z)).T).T  # (N, m)

    def value(self, X):  # (N, n)
        return (self.m0 + self.prior.path_value(self.paths, X)
                + self.beta @ self.prior.kernel(X, self.Z).T)

    def grad(self, X):  # (N, n, d)
        return self.prior.path_grad(self.paths, X) + np.einsum(
            "nm,xmd->nxd", self.beta, self.prior.kernel_grad(X, self.Z))


def integrated_gradients(paths, X, baseline, n_nodes=96):
    """``(x - xt) * sum_s w_s grad f(xt + s (x - xt))`` per path: (N, n, d)."""
    nodes, weights = np.polynomial.legendre.leggauss(n_nodes)
    nodes, weights = 0.5 * (nodes + 1), 0.5 * weights
    total = 0.0
    for s, w in zip(nodes, weights, strict=True):
        total = total + w * paths.grad(baseline + s * (X - baseline))
    return (X - baseline)[None] * total


def baseline_shapley(paths, X, baseline):
    """Shapley values of ``v(S) = f(x_S, xt_{-S})`` by enumerating coalitions: (N, n, d)."""
    n, d = X.shape
    values = {}
    for size in range(d + 1):
        for S in combinations(range(d), size):
            mixed = np.tile(baseline, (n, 1))
            mixed[:, list(S)] = X[:, list(S)]
            values[S] = paths.value(mixed)
    phi = np.zeros((values[()].shape[0], n, d))
    for i in range(d):
        others = [j for j in range(d) if j != i]
        for size in range(d):
            weight = factorial(size) * factorial(d - size - 1) / factorial(d)
            for S in combinations(others, size):
                with_i = tuple(sorted(S + (i,)))
                phi[:, :, i] += weight * (values[with_i] - values[S])
    return phi


def covariance_z_scores(samples, exact_mean, exact_cov):
    """z-scores of the Monte Carlo mean and covariance of ``samples`` (N, k) against exact
    values; the covariance's standard error is the empirical one of the centred products."""
    N = samples.shape[0]
    centred = samples - samples.mean(0)
    mean_z = (samples.mean(0) - exact_mean) / np.sqrt(np.maximum(samples.var(0), 1e-300) / N)
    products = centred[:, :, None] * centred[:, None, :]
    mc_cov = products.mean(0)
    se = np.sqrt(np.maximum(products.var(0), 1e-300) / N)
    scale = np.sqrt(np.outer(np.diag(exact_cov), np.diag(exact_cov)))
    # entries whose covariance is zero to round-off (a switched-off feature) are skipped
    keep = scale > 1e-12 * scale.max()
    return mean_z, np.where(keep, (mc_cov - exact_cov) / se, 0.0)
