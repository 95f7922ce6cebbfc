"""High-precision finite-difference references for kernel input derivatives (mpmath).

Kernels are written here from their textbook formulas (in GPyTorch's parameterisation) as
plain functions of two points, with no use of gpexplain or GPyTorch. Derivatives are central
differences at ``DPS`` significant digits with a step ``STEP`` far below double precision:

* first derivative ``d/dx_i k(x, z)``: ``(k(x + h e_i, z) - k(x - h e_i, z)) / (2h)``;
* mixed derivative at coinciding points ``d^2/(dx_i dx'_j) k(x, x')`` at ``x = x'``:
  ``(k(x+h e_i, x+h e_j) - k(x+h e_i, x-h e_j) - k(x-h e_i, x+h e_j) + k(x-h e_i, x-h e_j))
  / (4 h^2)``.

Error bound. Smooth kernels give a truncation error O(h^2). Matern kernels are smooth in the
distance r except for odd powers: Matern 3/2 has ``rho(r) = 1 - 3/2 r^2 + sqrt(3) r^3 + ...``,
so its |r|^3 term contributes O(h^3) / h^2 = O(h) to the mixed difference (Matern 5/2's first
odd term is |r|^5: O(h^3)); with h = 1e-20 that is ~1e-20 relative. Round-off is
~10^-DPS / h^2 = 1e-40 relative to the kernel scale. Both are far below the 1e-10 tolerances
the tests use, so any disagreement is an error in the code under test.
"""

from __future__ import annotations

import mpmath
from mpmath import mp, mpf

DPS = 80
STEP = mpf("1e-20")


def _vector(values):
    return [mpf(float(v)) for v in values]


def _scaled_sq_distance(x, z, lengthscale):
    return mpmath.fsum(((a - b) / s) ** 2 for a, b, s in zip(x, z, lengthscale, strict=True))


def rbf(lengthscale, variance=1.0):
    """``variance * exp(-r^2 / 2)``, r the lengthscale-scaled distance."""
    ls, s2 = _vector(lengthscale), mpf(float(variance))
    return lambda x, z: s2 * mpmath.exp(-_scaled_sq_distance(x, z, ls) / 2)


def matern(nu, lengthscale, variance=1.0):
    """GPyTorch's Matern: ``s2 * poly(sqrt(2 nu) r) exp(-sqrt(2 nu) r)`` for nu = 1/2, 3/2, 5/2."""
    ls, s2 = _vector(lengthscale), mpf(float(variance))

    def kernel(x, z):
        r = mpmath.sqrt(_scaled_sq_distance(x, z, ls))
        a = mpmath.sqrt(2 * mpf(nu)) * r
        poly = {0.5: 1, 1.5: 1 + a, 2.5: 1 + a + a * a / 3}[nu]
        return s2 * poly * mpmath.exp(-a)

    return kernel


def rational_quadratic(alpha, lengthscale, variance=1.0):
    """``s2 * (1 + r^2 / (2 alpha))^(-alpha)``."""
    ls, s2, al = _vector(lengthscale), mpf(float(variance)), mpf(float(alpha))
    return lambda x, z: s2 * (1 + _scaled_sq_distance(x, z, ls) / (2 * al)) ** (-al)


def periodic(period, lengthscale, variance=1.0):
    """GPyTorch's periodic kernel ``s2 exp(-2 sum_i sin^2(pi (x_i - z_i) / p_i) / l_i)``."""
    p, ls, s2 = _vector(period), _vector(lengthscale), mpf(float(variance))

    def kernel(x, z):
        terms = (
            mpmath.sin(mp.pi * (a - b) / period_i) ** 2 / l_i
            for a, b, period_i, l_i in zip(x, z, p, ls, strict=True)
        )
        return s2 * mpmath.exp(-2 * mpmath.fsum(terms))

    return kernel


def random_fourier(weights, lengthscale, variance=1.0):
    """``variance / M * sum_m cos(sum_i w_im (x_i - z_i) / l_i)`` for weights w of shape (d, M)."""
    w = [_vector(row) for row in weights]
    ls, s2 = _vector(lengthscale), mpf(float(variance))
    n_samples = len(w[0])

    def kernel(x, z):
        terms = (
            mpmath.cos(mpmath.fsum(w[i][m] * (x[i] - z[i]) / ls[i] for i in range(len(x))))
            for m in range(n_samples)
        )
        return s2 * mpmath.fsum(terms) / n_samples

    return kernel


def linear(variance):
    """``variance * x . z``."""
    v = mpf(float(variance))
    return lambda x, z: v * mpmath.fsum(a * b for a, b in zip(x, z, strict=True))


def on_dims(kernel, dims):
    """The kernel applied to the features ``dims`` only (GPyTorch's ``active_dims``)."""
    return lambda x, z: kernel([x[d] for d in dims], [z[d] for d in dims])


def input_scaled(kernel, shift, scale, factor=1.0):
    """``factor * k((x - shift) / scale, (x' - shift) / scale)`` (gpexplain's InputScaledKernel)."""
    m, s, c = _vector(shift), _vector(scale), mpf(float(factor))

    def scaled(x):
        return [(a - b) / d for a, b, d in zip(x, m, s, strict=True)]

    return lambda x, z: c * kernel(scaled(x), scaled(z))


def add(*kernels):
    return lambda x, z: mpmath.fsum(k(x, z) for k in kernels)


def multiply(*kernels):
    def kernel(x, z):
        result = mpf(1)
        for k in kernels:
            result *= k(x, z)
        return result

    return kernel


def _step(point, i, sign):
    moved = list(point)
    moved[i] += sign * STEP
    return moved


def cross_derivative(kernel, X, Z):
    """``d/dx_i k(x_p, z_n)`` as nested lists [p][i][n] of floats."""
    with mp.workdps(DPS):
        result = []
        for x in X:
            x = _vector(x)
            rows = []
            for i in range(len(x)):
                plus, minus = _step(x, i, 1), _step(x, i, -1)
                rows.append(
                    [
                        float((kernel(plus, _vector(z)) - kernel(minus, _vector(z))) / (2 * STEP))
                        for z in Z
                    ]
                )
            result.append(rows)
        return result


def mixed_derivative_same_point(kernel, X):
    """``d^2/(dx_i dx'_j) k(x, x')`` at ``x = x' = x_p`` as nested lists [p][i][j] of floats."""
    with mp.workdps(DPS):
        result = []
        for x in X:
            x = _vector(x)
            d = len(x)
            block = []
            for i in range(d):
                row = []
                for j in range(d):
                    value = (
                        kernel(_step(x, i, 1), _step(x, j, 1))
                        - kernel(_step(x, i, 1), _step(x, j, -1))
                        - kernel(_step(x, i, -1), _step(x, j, 1))
                        + kernel(_step(x, i, -1), _step(x, j, -1))
                    ) / (4 * STEP**2)
                    row.append(float(value))
                block.append(row)
            result.append(block)
        return result
