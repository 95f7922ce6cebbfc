"""Independent references for softmax expectations over independent Gaussian latents.

Two rules, neither using the identities ``gpexplain.links`` relies on:

* ``brute_force_moments``: tensor Gauss-Legendre over +-10 sd of every latent f_j (narrow
  latents only), the gradients g_j entering through their Gaussian conditional on f_j
  (Seitz 2022, Proposition 2): ``E[g_j | f_j] = mu_j + c_j (f_j - m_j) / s2_j`` and
  ``Cov[g_j | f_j] = G_j - c_j c_j^T / s2_j``, independent across classes, so that
  ``E[grad S_c grad S_c^T] = E[a a^T + sum_j s_j^2 Cov[g_j | f_j]]`` with
  ``a = sum_j s_j E[g_j | f_j]`` needs first derivatives of S only (no Stein's lemma);
* ``difference_plane_expectations``: a function of the latent differences
  ``d = f[1:] - f[0]`` (S_c and its derivatives, obtained symbolically by sympy) integrated
  against their normal density written out, by composite Gauss-Legendre (16 nodes) on panels
  at most 3 wide in value and 1.5 sd over +-9 sd. The softmax is analytic in the strip
  |Im d| < pi (a panel of width 3: Bernstein ellipse rho = 2 pi / 3 + sqrt((2 pi / 3)^2 + 1)
  = 4.4, so rho^-32 = 3e-21 before the Gaussian's growth off the real axis); measured, 10
  nodes per panel still differ from 16 by up to 2e-11; the range misses a mass of 2e-19.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import sympy


def _softmax_slopes(f, target):
    """``S_c`` and ``s_j = d S_c / d f_j`` at latents f (..., C), straight from the definition."""
    shifted = f - f.max(-1, keepdims=True)
    exp = np.exp(shifted)
    S = exp / exp.sum(-1, keepdims=True)
    slopes = -S[..., target:target + 1] * S
    slopes[..., target] += S[..., target]
    return S[..., target], slopes


def brute_force_moments(mean, var, mu, c, G, target, n_nodes):
    """``E[S_c]``, ``E[grad S_c]`` (d,) and ``E[grad S_c grad S_c^T]`` (d, d) for one point:
    mean, var (C,), mu, c (C, d), G (C, d, d); every var > 0."""
    t, w = np.polynomial.legendre.leggauss(n_nodes)
    n_classes = len(mean)
    axes = [mean[j] + 10 * np.sqrt(var[j]) * t for j in range(n_classes)]
    factors = [10 * np.sqrt(var[j]) * w * np.exp(-0.5 * (axes[j] - mean[j]) ** 2 / var[j])
               / np.sqrt(2 * np.pi * var[j]) for j in range(n_classes)]
    grid = np.stack(np.meshgrid(*axes, indexing="ij"), -1).reshape(-1, n_classes)
    weight = np.prod(np.stack(np.meshgrid(*factors, indexing="ij"), -1).reshape(
        -1, n_classes), 1)
    response, slopes = _softmax_slopes(grid, target)
    z = (grid - mean) / var  # (N, C)
    conditional = mu[None] + c[None] * z[:, :, None]  # E[g_j | f_j], (N, C, d)
    a = np.einsum("nj,njk->nk", slopes, conditional)
    residual = G - c[:, :, None] * c[:, None, :] / var[:, None, None]  # Cov[g_j | f_j]
    second = (np.einsum("n,nk,nl->kl", weight, a, a)
              + np.einsum("n,nj,jkl->kl", weight, slopes**2, residual))
    return weight @ response, weight @ a, second


@cache
def _symbolic_rows(n_classes: int, target: int):
    """A numpy function of f_0..f_{C-1} returning the list S_c, d_j S_c, d_j^2 S_c and the
    C x C blocks s_j s_l, d_l (s_j s_l), d_j d_l (s_j s_l) (s_j = d_j S_c), by sympy
    differentiation, and the number of rows."""
    f = sympy.symbols(f"f0:{n_classes}", real=True)
    S = sympy.exp(f[target]) / sum(sympy.exp(x) for x in f)
    s = [sympy.diff(S, x) for x in f]
    rows = [S] + s + [sympy.diff(S, x, 2) for x in f]
    pairs = [(j, k) for j in range(n_classes) for k in range(n_classes)]
    rows += [s[j] * s[k] for j, k in pairs]
    rows += [sympy.diff(s[j] * s[k], f[k]) for j, k in pairs]
    rows += [sympy.diff(s[j] * s[k], f[j], f[k]) for j, k in pairs]
    return sympy.lambdify(f, rows, "numpy", cse=True), len(rows)


def _panels(sd: float, n_nodes: int = 16):
    """Composite Gauss-Legendre over standardised offsets [-9, 9], panels at most 3 wide in
    value (sd units: 3 / sd) and at most 1.5 sd: nodes u and weights (each (n,))."""
    t, w = np.polynomial.legendre.leggauss(n_nodes)
    edges = np.linspace(-9.0, 9.0, int(np.ceil(max(6.0 * sd, 12.0))) + 1)
    mid, width = 0.5 * (edges[1:] + edges[:-1]), np.diff(edges)
    return (mid[:, None] + 0.5 * width[:, None] * t).ravel(), (0.5 * width[:, None] * w).ravel()


def difference_plane_expectations(mean, var, target):
    """All rows of ``_symbolic_rows`` in expectation, (1 + 2C + 3C^2,), for one point with
    C = 2 or 3 classes (mean, var (C,), positive-definite difference covariance).

    Iterated: the first difference over its marginal, the second over its conditional given
    the first (``N(m_2 + r (d_1 - m_1), S_22 - r S_12)``, ``r = S_12 / S_11``), each by the
    composite rule of ``_panels`` against the normal density written out."""
    n_classes = len(mean)
    centre = mean[1:] - mean[0]
    cov = np.diag(var[1:]) + var[0]
    sd = np.sqrt(cov[0, 0])
    u, w = _panels(sd)
    grid, weight = (centre[0] + sd * u)[:, None], w * np.exp(-0.5 * u * u) / np.sqrt(2 * np.pi)
    if n_classes == 3:
        ratio = cov[0, 1] / cov[0, 0]
        sd2 = np.sqrt(cov[1, 1] - ratio * cov[0, 1])
        u2, w2 = _panels(sd2)
        inner = centre[1] + ratio * (grid[:, 0, None] - centre[0]) + sd2 * u2[None]
        grid = np.stack([np.repeat(grid[:, 0], len(u2)), inner.ravel()], 1)
        weight = np.outer(weight, w2 * np.exp(-0.5 * u2 * u2) / np.sqrt(2 * np.pi)).ravel()
    # the functions depend on differences only: evaluate at f = (0, d), shifted so max f = 0
    f = np.concatenate([np.zeros((len(grid), 1)), grid], 1)
    f = f - f.max(1, keepdims=True)
    columns = [f[:, j] for j in range(n_classes)]
    rows, n_rows = _symbolic_rows(n_classes, target)
    values = rows(*columns)
    return np.array([weight @ np.broadcast_to(values[r], weight.shape) for r in range(n_rows)])
