"""High-precision per-feature integrals of the posterior variance of Sobol indices (mpmath).

For one feature with squared-exponential correlations ``k_l(a, b) = exp(-(a - b)^2 / (2 l^2))``
of up to three lengthscales (left q, middle p, right r; one kernel: all equal) and a Gaussian
measure ``p = N(mean, std^2)`` or a uniform one on [low, high], straight from the definitions
(no closed form from ``gpexplain.kernels``): the measure is replaced by a Gauss-Hermite rule
computed at the working precision (Newton on the probabilists' Hermite recurrence, seeded by
NumPy's nodes), or by mpmath's Gauss-Legendre rule, and every centred quantity is an explicit
sum over its atoms at that precision, so the subtractions that cancel in float64 for wide
lengthscales are harmless here (c: centred sections ``k(s, a) - mu(a)``):

* ``C(a, b) = E_s c_q(s, a) c_r(s, b)``;
* ``lam(a) = E_s[c_r(s, a) mu_p(s)]``;
* ``G(a, b) = E_{s, s'}[c_q(s, a) k_p(s, s') c_r(s', b)]``;
* ``T_PP = M_q M_r``, ``T_PE = E_s (mu_q(s) - M_q) (mu_r(s) - M_r)``, ``T_EE = E_{s, s'}
  kc_q(s, s') kc_r(s, s')`` with ``kc(s, s') = k(s, s') - mu(s) - mu(s') + M``.

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


def feature_pair_integrals(points, mean, std, lengthscales, n_nodes=80, dps=50):
    """``pair_integrals`` under N(mean, std^2) (the Hermite rule above)."""
    with mp.workdps(dps):
        unit, weights = hermite_rule(n_nodes, dps)
        atoms = [mpf(mean) + mpf(std) * x for x in unit]
        return pair_integrals(points, atoms, weights, lengthscales, dps)


def pair_integrals(points, atoms, weights, lengthscales, dps=50):
    """Three SE kernels ``k_q, k_p, k_r`` (``lengthscales = (l_q, l_p, l_r)``) mixed, as mpf
    values under the atoms: ``C (n, n) = E_s c_q(s, a) c_r(s, b)``, ``lam (n,) = E_s c_r(s,
    a) mu_p(s)``, ``G (n, n) = E_{s, s'} c_q(s, a) k_p(s, s') c_r(s', b)`` and ``(M_q M_r,
    E_s (mu_q - M_q)(mu_r - M_r), E kc_q kc_r)`` (c: centred sections, kc: doubly centred)."""
    with mp.workdps(dps):
        def kernel(lengthscale):
            ell2 = mpf(lengthscale) ** 2
            return lambda a, b: mp.exp(-((a - b) ** 2) / (2 * ell2))

        def expect(values):
            return sum(w * v for w, v in zip(weights, values, strict=True))

        zs = [mpf(float(z)) for z in points]
        k_q, k_p, k_r = (kernel(ls) for ls in lengthscales)

        def pieces(k):  # gram, mu at the atoms, M, centred sections (per point, per atom)
            gram = [[k(s, t) for t in atoms] for s in atoms]
            mu_atoms = [expect(row) for row in gram]
            sections = [[k(s, z) for s in atoms] for z in zs]
            centred = [[v - expect(row) for v in row] for row in sections]
            return gram, mu_atoms, expect(mu_atoms), centred

        gram_q, mu_q, M_q, centred_q = pieces(k_q)
        gram_p, mu_p, _, _ = pieces(k_p)
        gram_r, mu_r, M_r, centred_r = pieces(k_r)
        C = [[expect([c * v for c, v in zip(left, right, strict=True)]) for right in centred_r]
             for left in centred_q]
        lam = [expect([c * m for c, m in zip(row, mu_p, strict=True)]) for row in centred_r]
        # E_{s'} k_p(s, s') c_r(s', b), per b and s
        smoothed = [[expect([g * c for g, c in zip(gram_row, row, strict=True)])
                     for gram_row in gram_p] for row in centred_r]
        G = [[expect([c * v for c, v in zip(left, right, strict=True)]) for right in smoothed]
             for left in centred_q]
        T_PE = expect([(a - M_q) * (b - M_r) for a, b in zip(mu_q, mu_r, strict=True)])
        n = len(atoms)
        T_EE = expect([expect([(gram_q[i][j] - mu_q[i] - mu_q[j] + M_q)
                               * (gram_r[i][j] - mu_r[i] - mu_r[j] + M_r)
                               for j in range(n)]) for i in range(n)])
        return C, lam, G, (M_q * M_r, T_PE, T_EE)
