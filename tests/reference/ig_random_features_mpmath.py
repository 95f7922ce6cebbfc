"""High-precision reference values for the random-feature integrated-gradient functionals.

Computed by mpmath quadrature straight from the kernel's definition, with no use of the closed
forms (nor the feature map) in ``gpexplain.kernels.random_features``::

    k(x, z) = s2 / M * sum_m cos(v_m . (x - z))
    d/dx_i k(x, z)            = -s2 / M * sum_m v_mi sin(v_m . (x - z))
    d^2/dx_i dx'_j k(x, x')   =  s2 / M * sum_m v_mi v_mj cos(v_m . (x - x'))

Float inputs are converted to ``mpf`` exactly, so ``u = x - xt`` is exact even when x is
within 1e-12 of the baseline and a reference value is the exact functional of the given floats
up to the quadrature error (mpmath's estimate, checked below ``10**-(dps - 10)`` of the sum of
the pieces' absolute values).

Quadrature: the integrands are trigonometric polynomials in t whose fastest angular frequency
is ``w = max_m |v_m . u|`` (cross) or the same in ``tau`` (prior); [0, 1] is split into pieces
of at most one period, on which Gauss-Legendre converges geometrically.
"""

from __future__ import annotations

import math

import mpmath
from mpmath import mp, mpf

DEFAULT_DPS = 30


def _vector(values):
    return [mpf(float(v)) for v in values]


def _matrix(rows):
    return [_vector(row) for row in rows]


def _dot(a, b):
    return mpmath.fsum(ai * bi for ai, bi in zip(a, b, strict=True))


def _pieces(angular_frequency):
    """Break points on [0, 1]: pieces of at most one period (at least one piece)."""
    count = max(1, math.ceil(float(angular_frequency) / (2 * math.pi)))
    return [mpf(k) / count for k in range(count + 1)]


def _integrate(f, points):
    """``int f`` over the break points, checking mpmath's error estimate per piece."""
    total, error, scale = mpf(0), mpf(0), mpf(0)
    for lo, hi in zip(points[:-1], points[1:], strict=True):
        value, err = mpmath.quad(f, [lo, hi], error=True, method="gauss-legendre")
        total, error, scale = total + value, error + err, scale + abs(value)
    if error > mpf(10) ** (-(mp.dps - 10)) * max(scale, mpf(10) ** (-mp.dps * 3)):
        raise RuntimeError(f"reference quadrature did not converge: {total} +- {error}")
    return total


def rf_kernel(x, z, frequencies, variance, dps=DEFAULT_DPS):
    """``k(x, z) = s2 / M * sum_m cos(v_m . (x - z))`` at high precision."""
    with mp.workdps(dps):
        V = _matrix(frequencies)
        diff = [a - b for a, b in zip(_vector(x), _vector(z), strict=True)]
        return mpf(float(variance)) / len(V) * mpmath.fsum(mpmath.cos(_dot(v, diff)) for v in V)


def ig_cross(x, baseline, z, frequencies, variance, dps=DEFAULT_DPS):
    """``A_i = (x_i - xt_i) int_0^1 d/dx_i k(xt + t (x - xt), z) dt``; a list over features."""
    with mp.workdps(dps):
        V = _matrix(frequencies)
        xs, xts, zs = _vector(x), _vector(baseline), _vector(z)
        s2 = mpf(float(variance))
        u = [a - b for a, b in zip(xs, xts, strict=True)]
        offset = [a - b for a, b in zip(xts, zs, strict=True)]  # g(t) - z = offset + t u
        projected = [_dot(v, u) for v in V]
        base_phase = [_dot(v, offset) for v in V]
        points = _pieces(max(abs(p) for p in projected))
        result = []
        for i in range(len(xs)):
            if u[i] == 0:
                result.append(mpf(0))
                continue

            def derivative(t, i=i):
                return -s2 / len(V) * mpmath.fsum(
                    v[i] * mpmath.sin(b + t * p)
                    for v, b, p in zip(V, base_phase, projected, strict=True)
                )

            result.append(u[i] * _integrate(derivative, points))
        return result


def ig_prior(x, baseline, frequencies, variance, dps=DEFAULT_DPS):
    """``P_ij = u_i u_j int_0^1 int_0^1 d^2 k(g(s), g(t)) / dx_i dx'_j ds dt``; nested lists.

    ``g(s) - g(t) = (s - t) u``, so the integrand is ``f(s - t)`` with f even, and
    ``int int f(s - t) ds dt = 2 int_0^1 (1 - tau) f(tau) dtau`` (the pairs with ``s - t = tau``
    form a segment of length ``1 - |tau|``). ``ig_prior_2d`` checks this reduction.
    """
    with mp.workdps(dps):
        V = _matrix(frequencies)
        u = [a - b for a, b in zip(_vector(x), _vector(baseline), strict=True)]
        s2 = mpf(float(variance))
        projected = [_dot(v, u) for v in V]
        points = _pieces(max(abs(p) for p in projected))
        n = len(u)
        P = [[mpf(0)] * n for _ in range(n)]
        for i in range(n):
            for j in range(i, n):
                if u[i] * u[j] == 0:
                    continue

                def f(tau, i=i, j=j):
                    return (1 - tau) * mpmath.fsum(
                        v[i] * v[j] * mpmath.cos(tau * p)
                        for v, p in zip(V, projected, strict=True)
                    )

                P[i][j] = P[j][i] = 2 * u[i] * u[j] * s2 / len(V) * _integrate(f, points)
        return P


def ig_prior_2d(x, baseline, frequencies, variance, dps=20):
    """:func:`ig_prior` by plain nested quadrature over the unit square (slow, small cases)."""
    with mp.workdps(dps):
        V = _matrix(frequencies)
        xs, xts = _vector(x), _vector(baseline)
        u = [a - b for a, b in zip(xs, xts, strict=True)]
        s2 = mpf(float(variance))
        n = len(u)

        def path(t):
            return [b + t * d for b, d in zip(xts, u, strict=True)]

        P = [[mpf(0)] * n for _ in range(n)]
        for i in range(n):
            for j in range(i, n):

                def mixed(s, t, i=i, j=j):
                    diff = [a - b for a, b in zip(path(s), path(t), strict=True)]
                    return s2 / len(V) * mpmath.fsum(
                        v[i] * v[j] * mpmath.cos(_dot(v, diff)) for v in V
                    )

                value = mpmath.quad(mixed, [0, 1], [0, 1])
                P[i][j] = P[j][i] = u[i] * u[j] * value
        return P
