"""High-precision per-feature integrals of the posterior variance of Sobol indices (mpmath).

For one feature with a squared-exponential correlation ``k(a, b) = exp(-(a - b)^2 / (2 l^2))``
and a Gaussian measure ``p = N(mean, std^2)`` or a uniform one on [low, high], straight from the
definitions (no closed form from ``gpexplain.kernels.product``): the measure is replaced by a
Gauss-Hermite rule computed at the working precision (Newton on the probabilists' Hermite
recurrence, seeded by NumPy's nodes), or by mpmath's Gauss-Legendre rule, and every centred
quantity is an explicit sum over its atoms at that precision, so the
subtractions that cancel in float64 for wide lengthscales are harmless here:

* ``mu(a) = E_s k(a, s)``, ``M = E_{s, s'} k(s, s')``;
* ``lam(a) = E_s[(k(s, a) - mu(a)) mu(s)]``;
* ``G(a, b) = E_{s, s'}[(k(s, a) - mu(a)) k(s, s') (k(s', b) - mu(b))]``;
* ``T_PP = M^2``, ``T_PE = E_s (mu(s) - M)^2``, ``T_EE = E_{s, s'} kc(s, s')^2`` with
  ``kc(s, s') = k(s, s') - mu(s) - mu(s') + M``.

The rule's error is checked by the caller against a rule with more nodes.
"""

from __future__ import annotations

import numpy as np
from mpmath import mp, mpf


def hermite_rule(n_nodes: int, dps: int = 50):
    """Nodes and weights (summing to 1) of the n-point rule for N(0, 1), at ``dps`` digits."""
    with mp.workdps(dps + 10):
        seeds, _ = np.polynomial.hermite_e.hermegauss(n_nodes)
        nodes, weights = [], []
        for seed in seeds:
            x = mpf(float(seed))
            for _ in range(100):
                previous, current = mpf(1), x  # He_0, He_1
                for k in range(1, n_nodes):
                    previous, current = current, x * current - k * previous
                # current = He_n(x), previous = He_{n-1}(x); He_n' = n He_{n-1}
                step = current / (n_nodes * previous)
                x -= step
                if abs(step) < mpf(10) ** (-dps - 5):
                    break
            previous, current = mpf(1), x
            for k in range(1, n_nodes - 1):
                previous, current = current, x * current - k * previous
            nodes.append(x)
            weights.append(1 / (n_nodes * current**2))  # He_{n-1}(x)^2, up to normalisation
        total = sum(weights)
        return nodes, [w / total for w in weights]


def legendre_rule(low, high, degree: int = 6, dps: int = 50):
    """Gauss-Legendre nodes in [low, high] and weights summing to 1 (the uniform density), at
    ``dps`` digits: mpmath's rule of 3 * 2^(degree - 1) nodes (96 for degree 6)."""
    from mpmath.calculus.quadrature import GaussLegendre

    with mp.workdps(dps + 10):
        rule = GaussLegendre(mp).calc_nodes(degree, mp.prec)
        a, b = mpf(low), mpf(high)
        return [a + (b - a) * (x + 1) / 2 for x, _ in rule], [w / 2 for _, w in rule]


def feature_integrals(points, mean, std, lengthscale, n_nodes=80, dps=50):
    """``(lam (n,), G (n, n), (T_PP, T_PE, T_EE))`` as mpf values, for float ``points``, under
    N(mean, std^2) (the Hermite rule above)."""
    with mp.workdps(dps):
        unit, weights = hermite_rule(n_nodes, dps)
        atoms = [mpf(mean) + mpf(std) * x for x in unit]
        return rule_integrals(points, atoms, weights, lengthscale, dps)


def rule_integrals(points, atoms, weights, lengthscale, dps=50):
    """``(lam (n,), G (n, n), (T_PP, T_PE, T_EE))`` as mpf values under the measure given by
    mpf ``atoms`` and ``weights`` (summing to 1)."""
    with mp.workdps(dps):
        ell2 = mpf(lengthscale) ** 2

        def k(a, b):
            return mp.exp(-((a - b) ** 2) / (2 * ell2))

        def expect(values):
            return sum(w * v for w, v in zip(weights, values, strict=True))

        zs = [mpf(float(z)) for z in points]
        gram = [[k(s, t) for t in atoms] for s in atoms]
        mu_atoms = [expect(row) for row in gram]
        M = expect(mu_atoms)
        sections = [[k(s, z) for s in atoms] for z in zs]
        mus = [expect(row) for row in sections]
        centred = [[v - m for v in row] for row, m in zip(sections, mus, strict=True)]
        lam = [expect([c * m for c, m in zip(row, mu_atoms, strict=True)]) for row in centred]
        # E_{s'} k(s, s') c(s', b), per b and s
        smoothed = [[expect([g * c for g, c in zip(gram_row, row, strict=True)])
                     for gram_row in gram] for row in centred]
        G = [[expect([c * v for c, v in zip(left, right, strict=True)]) for right in smoothed]
             for left in centred]
        T_PE = expect([(m - M) ** 2 for m in mu_atoms])
        T_EE = expect([expect([(gram[i][j] - mu_atoms[i] - mu_atoms[j] + M) ** 2
                               for j in range(len(atoms))]) for i in range(len(atoms))])
        return lam, G, (M * M, T_PE, T_EE)
