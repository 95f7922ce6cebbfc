"""Independent reference integrated-gradient functionals of Matern, RQ and SE kernels (mpmath).

Straight from the definitions, with the kernels' derivatives written out analytically here
(nothing from gpexplain or GPyTorch). A kernel is a product of "leaves" or a sum of such
products; a leaf is ``s2 * phi(r)`` with ``r = |(x - x')_dims / l|`` and

    SE:          phi = exp(-r^2/2)
    Matern 3/2:  phi = (1 + sqrt3 r) exp(-sqrt3 r)
    Matern 5/2:  phi = (1 + sqrt5 r + 5 r^2 / 3) exp(-sqrt5 r)
    RQ(alpha):   phi = (1 + r^2 / (2 alpha))^(-alpha)

With ``w = (x - x')/l`` (zero off ``dims``), ``psi(r) = phi'(r)/r`` and ``chi(r) = psi'(r)/r``:

    d k / d x_i          =  s2 psi(r) w_i / l_i
    d^2 k / d x_i d x'_j = -s2 [psi(r) delta_ij + chi(r) w_i w_j] / (l_i l_j)

and for a product the product rule (``d/dx'_j = -d/dx_j`` on each stationary factor).

Functionals (x, baseline xt, training point z, d = x - xt):

    cross_i  = d_i int_0^1 d_i k(xt + t d, z) dt
    prior_ij = d_i e_j int_0^1 int_0^1 d^2 k(xt_a + t d, xt_b + s e) / dx_i dx'_j dt ds

(``e = x - xt_b``; the same path when xt_b = xt_a). The cross term uses ``mpmath.quad``
(tanh-sinh, 25 digits) with break points where the integrand is not analytic: the closest
approach of the path to z in each leaf's metric. The prior term uses float64 adaptive nested
``scipy.integrate.quad`` at a stated tolerance with break points along the kink lines of the
(t, s) square (the diagonal t = s for one path).
"""

from __future__ import annotations

import math

import mpmath
from mpmath import mp, mpf

DPS = 25


def leaf(kind: str, lengthscale, dims, variance=1.0, alpha=1.0) -> dict:
    """A radial leaf: kind in {"se", "matern32", "matern52", "rq"}."""
    return {
        "kind": kind,
        "lengthscale": [float(v) for v in lengthscale],
        "dims": list(dims),
        "variance": float(variance),
        "alpha": float(alpha),
    }


def _profile(leaf_, r, lib):
    """phi(r), psi(r) = phi'(r)/r, chi(r) = psi'(r)/r for one leaf."""
    kind = leaf_["kind"]
    if kind == "se":
        e = lib.exp(-r * r / 2)
        return e, -e, e
    if kind == "matern32":
        c = lib.sqrt(3)
        e = lib.exp(-c * r)
        return (1 + c * r) * e, -3 * e, 3 * c * e / r
    if kind == "matern52":
        c = lib.sqrt(5)
        e = lib.exp(-c * r)
        return (1 + c * r + 5 * r * r / 3) * e, -5 * (1 + c * r) * e / 3, 25 * e / 3
    if kind == "rq":
        a = leaf_["alpha"]
        base = 1 + r * r / (2 * a)
        return base**-a, -(base ** (-a - 1)), (a + 1) / a * base ** (-a - 2)
    raise ValueError(kind)


def _leaf_terms(leaf_, x, y, n_features, lib):
    """Value, gradient in x (list) and mixed Hessian d^2/dx dx' (nested list) of one leaf."""
    w = [0 * x[0]] * n_features
    scale = [1.0] * n_features
    for position, dim in enumerate(leaf_["dims"]):
        scale[dim] = leaf_["lengthscale"][position]
        w[dim] = (x[dim] - y[dim]) / scale[dim]
    r = lib.sqrt(sum(v * v for v in w))
    phi, psi, chi = _profile(leaf_, r, lib)
    s2 = leaf_["variance"]
    active = set(leaf_["dims"])
    grad = [s2 * psi * w[i] / scale[i] if i in active else 0 * r for i in range(n_features)]
    mixed = [
        [
            -s2 * ((psi if i == j else 0) + chi * w[i] * w[j]) / (scale[i] * scale[j])
            if i in active and j in active
            else 0 * r
            for j in range(n_features)
        ]
        for i in range(n_features)
    ]
    return s2 * phi, grad, mixed


def kernel_terms(kernel, x, y, n_features, lib=mpmath):
    """Value, gradient and mixed Hessian of a sum (list) of products (lists) of leaves.

    ``lib``: ``mpmath`` (mpf inputs) or ``math`` (float inputs).
    """
    value = 0
    grad = [0] * n_features
    mixed = [[0] * n_features for _ in range(n_features)]
    for product in kernel:
        v, g, m = 1, [0] * n_features, [[0] * n_features for _ in range(n_features)]
        for leaf_ in product:
            lv, lg, lm = _leaf_terms(leaf_, x, y, n_features, lib)
            # d/dx' of a stationary factor is minus its d/dx.
            m = [
                [m[i][j] * lv + g[i] * (-lg[j]) + lg[i] * (-g[j]) + v * lm[i][j]
                 for j in range(n_features)]
                for i in range(n_features)
            ]
            g = [g[i] * lv + v * lg[i] for i in range(n_features)]
            v = v * lv
        value += v
        grad = [grad[i] + g[i] for i in range(n_features)]
        mixed = [[mixed[i][j] + m[i][j] for j in range(n_features)] for i in range(n_features)]
    return value, grad, mixed


def _closest_approaches(kernel, xt, d, z):
    """Closest-approach parameters t0 in (0, 1) of the path to z, one per leaf."""
    points = set()
    for product in kernel:
        for leaf_ in product:
            pairs = list(zip(leaf_["dims"], leaf_["lengthscale"], strict=True))
            u = [d[dim] / s for dim, s in pairs]
            v = [(xt[dim] - z[dim]) / s for dim, s in pairs]
            uu = sum(a * a for a in u)
            if uu > 0:
                t0 = -sum(a * b for a, b in zip(u, v, strict=True)) / uu
                if 0 < t0 < 1:
                    points.add(t0)
    return sorted(points)


def cross_term(kernel, x, xt, z, dps=DPS):
    """``[d_i int_0^1 d_i k(xt + t d, z) dt for i]`` as floats."""
    with mp.workdps(dps):
        x, xt, z = ([mpf(float(v)) for v in a] for a in (x, xt, z))
        n = len(x)
        d = [x[i] - xt[i] for i in range(n)]
        breaks = [mpf(0), *_closest_approaches(kernel, xt, d, z), mpf(1)]
        out = []
        for i in range(n):
            def integrand(t, i=i):
                point = [xt[k] + t * d[k] for k in range(n)]
                return kernel_terms(kernel, point, z, n)[1][i]

            out.append(float(d[i] * mpmath.quad(integrand, breaks)))
        return out


def _kinks(kernel, start, step, other_start, other_step):
    """Where (in s) the point other_start + s other_step is closest to start + t step, as
    (alpha, beta) with s* = alpha + beta t, one per Matern leaf (its kink line in (t, s))."""
    lines = []
    for product in kernel:
        for leaf_ in product:
            if not leaf_["kind"].startswith("matern"):
                continue
            pairs = list(zip(leaf_["dims"], leaf_["lengthscale"], strict=True))
            e = [other_step[k] / s for k, s in pairs]
            ee = sum(v * v for v in e)
            if ee == 0:
                continue
            gap = [(start[k] - other_start[k]) / s for k, s in pairs]
            d = [step[k] / s for k, s in pairs]
            lines.append((sum(g * v for g, v in zip(gap, e, strict=True)) / ee,
                          sum(a * v for a, v in zip(d, e, strict=True)) / ee))
    return lines


def prior_term(kernel, x, xt_a, xt_b=None, tolerance=1e-12):
    """``[[d_i e_j int int d^2 k / dx_i dx'_j dt ds]]`` (xt_b defaults to xt_a).

    Float64 adaptive quadrature (nested ``scipy.integrate.quad``, absolute and relative
    tolerance ``tolerance``; the double integral in mpmath takes minutes). Both levels get
    break points at the kinks of every Matern leaf: the inner integral over s at the s where
    the two path points are closest in the leaf's metric (for one path that is the diagonal
    s = t), the outer integral at the t where that line leaves the square.
    """
    from scipy.integrate import quad

    xt_b = xt_a if xt_b is None else xt_b
    x, xa, xb = ([float(v) for v in a] for a in (x, xt_a, xt_b))
    n = len(x)
    d = [x[k] - xa[k] for k in range(n)]
    e = [x[k] - xb[k] for k in range(n)]
    lines = _kinks(kernel, xa, d, xb, e)
    outer_points = sorted(
        {t for alpha, beta in lines if beta != 0 for t in (-alpha / beta, (1 - alpha) / beta)
         if 0 < t < 1}
    )
    options = {"epsabs": tolerance, "epsrel": tolerance, "limit": 200}
    out = [[0.0] * n for _ in range(n)]
    for i in range(n):
        for j in range(n):
            if d[i] == 0 or e[j] == 0:
                continue

            def inner(t, i=i, j=j):
                left = [xa[k] + t * d[k] for k in range(n)]
                points = sorted({a + b * t for a, b in lines if 0 < a + b * t < 1})

                def integrand(s):
                    right = [xb[k] + s * e[k] for k in range(n)]
                    return kernel_terms(kernel, left, right, n, math)[2][i][j]

                return quad(integrand, 0, 1, points=points or None, **options)[0]

            value = quad(inner, 0, 1, points=outer_points or None, **options)[0]
            out[i][j] = d[i] * e[j] * value
    return out


def lag_prior_term(kernel, x, xt, dps=DPS):
    """One path's prior term through the lag: ``d_i d_j 2 int_0^1 (1 - tau) H_ij(tau d) dtau``.

    ``H_ij(w) = d^2 k(w, 0) / dx_i dx'_j``: for a stationary kernel the double integral over
    (t, s) depends on ``t - s`` only, and the pairs with ``|t - s| = tau`` have measure
    ``2 (1 - tau)``. ``mpmath.quad`` (tanh-sinh) at ``dps`` digits, with break points at
    every power of ten down to ``1e-16`` so that a path of up to 1e14 lengthscales, whose
    integrand lives within ``tau ~ 1 / |d / l|``, is resolved; the quadrature's error estimate
    is checked.
    """
    n = len(x)
    with mp.workdps(dps):
        d = [mpf(float(a)) - mpf(float(b)) for a, b in zip(x, xt, strict=True)]
        zero = [mpf(0)] * n
        points = [mpf(0)] + [mpf(10) ** -k for k in range(16, 0, -1)] + [mpf(1)]
        out = [[0.0] * n for _ in range(n)]
        for i in range(n):
            for j in range(i, n):
                if d[i] == 0 or d[j] == 0:
                    continue

                def integrand(tau, i=i, j=j):
                    left = [tau * dk for dk in d]
                    return (1 - tau) * kernel_terms(kernel, left, zero, n)[2][i][j]

                value, error = mpmath.quad(integrand, points, error=True)
                scale = mpmath.quad(lambda tau, f=integrand: abs(f(tau)), points)
                if error > mpf(10) ** (-(dps - 12)) * scale:
                    raise RuntimeError(f"lag reference did not converge: {value} +- {error}")
                out[i][j] = out[j][i] = float(2 * d[i] * d[j] * value)
        return out
