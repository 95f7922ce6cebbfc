"""High-precision reference values for the RBF integrated-gradient functionals (mpmath).

Everything here is computed by numerical quadrature straight from the definitions, with no use
of the closed forms in ``gpexplain.kernels``. Kernel convention::

    k(x, x') = s2 * exp(-0.5 * sum_i (x_i - x'_i)^2 / l_i^2)

An infinite lengthscale ``l_i`` gives the inverse squared lengthscale ``1 / l_i^2 = 0``: feature
``i`` drops out of the exponent and every derivative with respect to it vanishes.

Inputs are converted from Python/NumPy floats to ``mpf`` exactly, so a reference value is the
exact functional of the given float inputs, up to the quadrature error (relative error
estimates are checked to be below ``10**-(dps - 10)``).

Quadrature: the integrands are Gaussians along a line and can be much narrower than the
integration interval (small lengthscales, points far apart). ``mpmath.quad`` is therefore given
break points at the level sets where the exponent has risen by 1/4, 1, 4, 16, 32, 64, 96, ...
above its minimum on the interval (up to where the integrand is negligible at the working
precision), and at the zeros of the prefactor of the Gaussian, so every
subinterval holds a smooth piece of constant sign that Gauss-Legendre quadrature resolves.

Cancellation: a functional can be far smaller than the integral of the absolute value of its
integrand (e.g. the path passes through the training point, so the integrand is odd about the
closest approach and the result is a difference of two tiny kernel values). The sum of the
absolute values of the pieces measures this; the working precision is raised until the result
still carries about ``dps - 15`` correct digits.
"""

from __future__ import annotations

import math

import mpmath
from mpmath import mp, mpf

DEFAULT_DPS = 35
METHOD = "gauss-legendre"
_MAX_DPS = 400


def _levels():
    """Exponent increments (above the minimum on the interval) that become break points.

    1/4, 1, 4, 16, then steps of 32 (each piece then needs only a modest Gauss-Legendre degree)
    up to a cut-off ``L`` where ``exp(-L) < 10**-(dps + 30)``.
    """
    cutoff = math.log(10) * (mp.dps + 30)
    levels = [mpf(1) / 4, mpf(1), mpf(4), mpf(16)]
    while levels[-1] < cutoff:
        levels.append(mpf(32) * (len(levels) - 3))
    return levels


def _to_mpf(value):
    """Exact conversion: floats (and NumPy floats) through ``float``; ``mpf`` kept as is."""
    return value if isinstance(value, mpmath.mpf) else mpf(float(value))


def _mpf_vector(values, n=None):
    try:
        return [_to_mpf(v) for v in values]
    except TypeError:  # a scalar
        return [_to_mpf(values)] * n


def _inverse_squared_lengthscales(lengthscale, n):
    ls = _mpf_vector(lengthscale, n)
    if len(ls) != n:
        raise ValueError("lengthscale length does not match the number of features")
    return [mpf(0) if mpmath.isinf(li) else 1 / (li * li) for li in ls]


def _integrate(f, points):
    """``(int f, sum |int over piece|)`` over the sorted break points, checking the quadrature.

    mpmath's convergence test and error estimate are absolute (made for integrands of order
    one), so ``f`` is divided by the largest ``|f|`` sampled at the break points and midpoints
    first. (Not piece by piece: a piece where ``f`` is tiny would then chase rounding noise.)
    """
    samples = list(points) + [(lo + hi) / 2 for lo, hi in zip(points[:-1], points[1:], strict=True)]
    size = max(abs(f(t)) for t in samples) or mpf(1)
    total, error, scale = mpf(0), mpf(0), mpf(0)
    for lo, hi in zip(points[:-1], points[1:], strict=True):
        value, err = mpmath.quad(
            lambda t: f(t) / size, [lo, hi], error=True, maxdegree=10, method=METHOD
        )
        total, error, scale = total + value, error + err, scale + abs(value)
    if error > mpf(10) ** (-(mp.dps - 10)) * scale:
        raise RuntimeError(f"reference quadrature did not converge: {total} +- {error}")
    return total * size, scale * size


def _with_enough_digits(compute, dps):
    """Run ``compute()`` (a list of ``(value, scale)`` pairs) at rising precision.

    :func:`_integrate` guarantees ``10**-(working - 10)`` relative to ``scale``; a value that
    cancels down to ``scale * 10**-lost`` keeps about ``working - 10 - lost`` digits. The
    precision is raised until every value keeps ``dps - 15`` digits (20 at the default).
    """
    digits = dps - 15
    working = dps
    while True:
        with mp.workdps(working):
            pairs = compute()
            lost = 0.0
            for value, scale in pairs:
                if scale == 0:
                    continue
                ratio = scale / abs(value) if value != 0 else mpmath.inf
                lost = max(lost, float(mpmath.log10(ratio)))
        if working - 10 - lost >= digits or working >= _MAX_DPS:
            return [value for value, _ in pairs]
        working = min(_MAX_DPS, digits + 12 + math.ceil(lost))


def _quadratic_break_points(q_min_line, t_star, r2, lo, hi, extra=()):
    """Break points for ``exp(-q(t))`` on ``[lo, hi]``, ``q(t) = q_min_line + r2 (t - t*)^2 / 2``.

    ``q_min_line`` is the minimum of ``q`` over the whole line (at ``t*``); the levels are taken
    relative to the minimum ``q_c`` over ``[lo, hi]``, which is returned as well (the caller
    integrates ``exp(-(q - q_c))`` and multiplies by ``exp(-q_c)``). ``extra`` points inside the
    interval (sign changes of a prefactor) are added.

    The returned points stop at the last level of :func:`_levels`: beyond, the integrand is
    below ``10**-(dps + 30)`` of its peak, and a piece reaching further would only be a
    numerical delta at one end that costs mpmath a high quadrature degree.
    """
    t_c = min(max(t_star, lo), hi)
    q_c = q_min_line + r2 * (t_c - t_star) ** 2 / 2
    points = {lo, hi, t_c}
    if r2 > 0:
        for level in _levels():
            half_width = mpmath.sqrt(2 * (q_c - q_min_line + level) / r2)
            points.update((t_star - half_width, t_star + half_width))
        lo, hi = max(lo, t_star - half_width), min(hi, t_star + half_width)
    points.update(extra)
    # Merge points closer than 10**-(dps/2) (e.g. t* and a sign change that coincide up to
    # rounding): a piece that narrow holds only rounding noise and defeats the quadrature.
    gap = mpf(10) ** (-(mp.dps // 2)) * (hi - lo)
    merged = [lo]
    for t in sorted(t for t in points if lo < t <= hi):
        if t - merged[-1] > gap:
            merged.append(t)
    if len(merged) > 1:
        merged[-1] = hi
    else:
        merged.append(hi)
    return merged, q_c


def rbf_kernel(x, z, lengthscale, variance, dps=DEFAULT_DPS):
    """``k(x, z)`` at high precision."""
    with mp.workdps(dps):
        x, z = _mpf_vector(x), _mpf_vector(z)
        w = _inverse_squared_lengthscales(lengthscale, len(x))
        s2 = mpf(float(variance))
        return s2 * mpmath.exp(
            -sum(wi * (xi - zi) ** 2 for wi, xi, zi in zip(w, x, z, strict=True)) / 2
        )


def ig_cross(x, baseline, z, lengthscale, variance, dps=DEFAULT_DPS):
    """Cross term for one point ``x`` and one training point ``z``; a list over features.

    ``A_i = (x_i - xt_i) int_0^1 d/dx_i k(g(t), z) dt`` with ``g(t) = xt + t (x - xt)`` and
    ``d/dx_i k(x, z) = -s2 (x_i - z_i) / l_i^2 * exp(-0.5 sum_j (x_j - z_j)^2 / l_j^2)``.
    """

    def compute():
        xs, xts, zs = _mpf_vector(x), _mpf_vector(baseline), _mpf_vector(z)
        n = len(xs)
        w = _inverse_squared_lengthscales(lengthscale, n)
        s2 = mpf(float(variance))
        delta = [xi - ti for xi, ti in zip(xs, xts, strict=True)]

        def path(t):
            return [ti + t * di for ti, di in zip(xts, delta, strict=True)]

        def exponent(t):
            return sum(wj * (gj - zj) ** 2 for wj, gj, zj in zip(w, path(t), zs, strict=True)) / 2

        # exponent(t) = q_min_line + r2 (t - t*)^2 / 2 exactly (a quadratic in t).
        r2 = sum(wj * dj * dj for wj, dj in zip(w, delta, strict=True))
        if r2 > 0:
            t_star = (
                -sum(wj * dj * (tj - zj) for wj, dj, tj, zj in zip(w, delta, xts, zs, strict=True))
                / r2
            )
            q_min_line = exponent(t_star)
        else:
            t_star, q_min_line = mpf(0), exponent(mpf(0))

        result = []
        for i in range(n):
            if delta[i] == 0 or w[i] == 0:
                result.append((mpf(0), mpf(0)))
                continue
            crossing = (zs[i] - xts[i]) / delta[i]  # g_i(t) = z_i: the integrand changes sign
            points, q_c = _quadratic_break_points(
                q_min_line, t_star, r2, mpf(0), mpf(1), extra=[crossing]
            )

            def integrand(t, i=i, q_c=q_c):
                g = path(t)
                return -(g[i] - zs[i]) * w[i] * mpmath.exp(q_c - exponent(t))

            value, scale = _integrate(integrand, points)
            factor = s2 * mpmath.exp(-q_c) * delta[i]
            result.append((factor * value, abs(factor) * scale))
        return result

    return _with_enough_digits(compute, dps)


def _prior_entry_integrand(i, j, delta, w, s2):
    """``d^2 k(g(s), g(t)) / dx_i dx'_j`` as a function of ``tau = s - t``.

    ``g(s) - g(t) = (s - t)(x - xt)``, and ``d^2 k(x, x')/dx_i dx'_j = s2 [delta_ij / l_i^2 -
    (x_i - x'_i)(x_j - x'_j) / (l_i^2 l_j^2)] exp(-0.5 |(x - x')/l|^2)``.
    """

    def second_derivative(tau):
        diff = [tau * dk for dk in delta]  # g(s) - g(t)
        quad_form = sum(wk * dk * dk for wk, dk in zip(w, diff, strict=True))
        kron = w[i] if i == j else 0
        return s2 * (kron - diff[i] * diff[j] * w[i] * w[j]) * mpmath.exp(-quad_form / 2)

    return second_derivative


def ig_prior(x, baseline, lengthscale, variance, dps=DEFAULT_DPS):
    """Prior term for one point ``x``: a nested list ``P[i][j]``.

    ``P_ij = (x_i - xt_i)(x_j - xt_j) int_0^1 int_0^1 d^2 k(g(s), g(t)) / dx_i dx'_j ds dt``.

    The integrand depends on ``(s, t)`` only through ``tau = s - t`` (``g(s) - g(t) = tau (x -
    xt)``) and is even in ``tau``. The pairs ``(s, t)`` in the unit square with ``s - t = tau``
    form a segment of measure ``1 - |tau|``, so ``int int f(s - t) ds dt = int_{-1}^{1} (1 -
    |tau|) f(tau) dtau = 2 int_0^1 (1 - tau) f(tau) dtau``. :func:`ig_prior_2d` does the plain
    double integral instead (slow; used to check this reduction).
    """
    n = len(x)

    def compute():
        xs, xts = _mpf_vector(x), _mpf_vector(baseline)
        w = _inverse_squared_lengthscales(lengthscale, n)
        s2 = mpf(float(variance))
        delta = [xi - ti for xi, ti in zip(xs, xts, strict=True)]
        a = sum(
            wk * dk * dk for wk, dk in zip(w, delta, strict=True)
        )  # the exponent is a tau^2 / 2
        entries = []
        for i in range(n):
            for j in range(i, n):
                if delta[i] * delta[j] * w[i] * w[j] == 0:
                    entries.append((mpf(0), mpf(0)))
                    continue
                # The diagonal prefactor w_i (1 - tau^2 delta_i^2 w_i) vanishes at this tau.
                extra = [1 / mpmath.sqrt(w[i] * delta[i] ** 2)] if i == j else []
                points, _ = _quadratic_break_points(mpf(0), mpf(0), a, mpf(0), mpf(1), extra)
                f = _prior_entry_integrand(i, j, delta, w, s2)
                value, scale = _integrate(lambda tau, f=f: (1 - tau) * f(tau), points)
                factor = 2 * delta[i] * delta[j]
                entries.append((factor * value, abs(factor) * scale))
        return entries

    values = iter(_with_enough_digits(compute, dps))
    P = [[mpf(0)] * n for _ in range(n)]
    for i in range(n):
        for j in range(i, n):
            P[i][j] = P[j][i] = next(values)
    return P


def ig_prior_2d(x, baseline, lengthscale, variance, dps=20):
    """:func:`ig_prior` by a plain two-dimensional quadrature over ``[0, 1]^2`` (moderate cases)."""
    with mp.workdps(dps):
        xs, xts = _mpf_vector(x), _mpf_vector(baseline)
        n = len(xs)
        w = _inverse_squared_lengthscales(lengthscale, n)
        s2 = mpf(float(variance))
        delta = [xi - ti for xi, ti in zip(xs, xts, strict=True)]
        P = [[mpf(0)] * n for _ in range(n)]
        for i in range(n):
            for j in range(i, n):
                f = _prior_entry_integrand(i, j, delta, w, s2)
                # The integrand in (s, t) is f(s - t); split along the diagonal s = t.
                P[i][j] = P[j][i] = delta[i] * delta[j] * _square_integral(f)
        return P


def _square_integral(f):
    """``int_0^1 int_0^1 f(s - t) ds dt`` by nested quadrature, split along ``s = t``."""
    lower = mpmath.quad(lambda s: mpmath.quad(lambda t: f(s - t), [0, s]), [0, 1])
    upper = mpmath.quad(lambda s: mpmath.quad(lambda t: f(s - t), [s, 1]), [0, 1])
    return lower + upper


def segment_m0(a, dps=DEFAULT_DPS):
    """``M0(a) = int_0^1 int_0^1 exp(-a (s - t)^2 / 2) ds dt`` (via ``tau = s - t``)."""
    with mp.workdps(dps):
        a = mpf(float(a))
        points, _ = _quadratic_break_points(mpf(0), mpf(0), a, mpf(0), mpf(1))
        value, _ = _integrate(lambda tau: (1 - tau) * mpmath.exp(-a * tau**2 / 2), points)
        return 2 * value


def segment_m2(a, dps=DEFAULT_DPS):
    """``M2(a) = int_0^1 int_0^1 (s - t)^2 exp(-a (s - t)^2 / 2) ds dt`` (via ``tau = s - t``)."""
    with mp.workdps(dps):
        a = mpf(float(a))
        points, _ = _quadratic_break_points(mpf(0), mpf(0), a, mpf(0), mpf(1))
        value, _ = _integrate(lambda tau: (1 - tau) * tau**2 * mpmath.exp(-a * tau**2 / 2), points)
        return 2 * value


def segment_moments_2d(a, dps=20):
    """``(M0(a), M2(a))`` by a plain double integral over the unit square (moderate ``a``)."""
    with mp.workdps(dps):
        a = mpf(float(a))
        return (
            _square_integral(lambda tau: mpmath.exp(-a * tau**2 / 2)),
            _square_integral(lambda tau: tau**2 * mpmath.exp(-a * tau**2 / 2)),
        )


def path_integral(u, v, dps=DEFAULT_DPS):
    """``|u| * int_0^1 exp(-|v + t u|^2 / 2) dt`` for vectors ``u``, ``v``."""
    with mp.workdps(dps):
        u, v = _mpf_vector(u), _mpf_vector(v)
        r2 = sum(ui * ui for ui in u)

        def exponent(t):
            return sum((vi + t * ui) ** 2 for ui, vi in zip(u, v, strict=True)) / 2

        if r2 > 0:
            t_star = -sum(ui * vi for ui, vi in zip(u, v, strict=True)) / r2
            q_min_line = exponent(t_star)
        else:
            t_star, q_min_line = mpf(0), exponent(mpf(0))
        points, q_c = _quadratic_break_points(q_min_line, t_star, r2, mpf(0), mpf(1))
        integral, _ = _integrate(lambda t: mpmath.exp(q_c - exponent(t)), points)
        return mpmath.sqrt(r2) * mpmath.exp(-q_c) * integral
