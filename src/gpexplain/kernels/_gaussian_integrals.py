"""Numerically safe one-dimensional Gaussian integrals used by the squared-exponential functionals.

The printed closed forms of Butler et al. (2024, Sec. 4.1 / App. B) overflow near the baseline
and cancel in the tails (see ``docs/errata.md``). The forms here never exponentiate a
large positive number, never subtract two nearly equal erf values and never divide by a
vanishing distance: each regime has its own stable evaluation.
"""

from __future__ import annotations

import numpy as np
from scipy.special import erf, erfcx

_SQRT_HALF_PI = np.sqrt(np.pi / 2.0)
# Gauss-Legendre on a short interval is accurate to round-off when the log-integrand varies by
# O(1) over it: the error of n nodes is about 1/(2n)!, so 12 nodes leave a wide margin
# (checked against mpmath in the tests).
_GL_NODES, _GL_WEIGHTS = np.polynomial.legendre.leggauss(12)
# Series of M0, M2 below this argument; closed forms (which cancel for small a) above.
_SERIES_LIMIT = 2.0
_SERIES_TERMS = 30


def exp_difference(E0: np.ndarray, E1: np.ndarray, c: np.ndarray) -> np.ndarray:
    """``E0 - E1`` where ``E1 = E0 * exp(-c)``, without cancellation when ``c`` is small.

    Parameters
    ----------
    E0, E1, c : ndarray, broadcastable
        ``E0 = exp(-e0)``, ``E1 = exp(-e0 - c)`` computed by the caller.

    Returns
    -------
    ndarray
        ``E0 - E1``; uses ``-E0 * expm1(-c)`` for ``|c| <= 1`` and the plain difference
        elsewhere (where at most one bit is lost and ``expm1`` could overflow).
    """
    small = np.abs(c) <= 1.0
    return np.where(small, -E0 * np.expm1(-np.where(small, c, 0.0)), E0 - E1)


def path_integral_unit_gaussian(
    r: np.ndarray,
    z0: np.ndarray,
    h2: np.ndarray,
    E0: np.ndarray,
    E1: np.ndarray,
    z1: np.ndarray | None = None,
) -> np.ndarray:
    """``r * int_0^1 exp(-|v + t u|^2 / 2) dt`` for ``r = |u| > 0``, in a stable form.

    With ``u`` split into its direction and ``v = v_perp + (u.v/|u|^2) u``, the exponent is
    ``h2/2 + s^2`` with ``s = z0 + t r / sqrt(2)`` and ``h2 = |v_perp|^2``; hence

        r J0 = sqrt(pi/2) exp(-h2/2) [erf(z1) - erf(z0)],   z1 = z0 + r / sqrt(2).

    Regimes: short interval (``w (|m| + w) <= 1`` with width ``w`` and midpoint ``m``):
    12-point Gauss-Legendre; both limits positive: ``E0 [erfcx(z0) - e^{-(z1^2-z0^2)}
    erfcx(z1)]``; both negative: the mirror image with ``E1``; straddling zero: the plain erf
    sum (no cancellation).

    Parameters
    ----------
    r : ndarray
        ``|u| = |(x - baseline) / lengthscale|``; must be positive where the result is used.
    z0 : ndarray
        ``(u.v) / (sqrt(2) |u|)``.
    h2 : ndarray
        ``|v_perp|^2 >= 0``.
    E0, E1 : ndarray
        ``exp(-|v|^2/2)`` and ``exp(-|v + u|^2/2)`` (the path end points).
    z1 : ndarray, optional
        ``((u + v).u) / (sqrt(2) |u|)``, the upper limit; by default ``z0 + r / sqrt(2)``,
        which loses ``eps r`` absolutely to cancellation when the far end of a long path is
        near the training point (pass it computed from that end instead).

    Returns
    -------
    ndarray, broadcast shape of the inputs
    """
    width = r / np.sqrt(2.0)
    z1 = z0 + width if z1 is None else z1
    r, z0, z1, h2, E0, E1, width = np.broadcast_arrays(r, z0, z1, h2, E0, E1, width)
    mid = 0.5 * (z0 + z1)
    short = width * (np.abs(mid) + width) <= 1.0
    both_positive = (z0 >= 0.0) & ~short
    both_negative = (z1 <= 0.0) & ~short
    straddle = ~(short | both_positive | both_negative)

    # Each regime is evaluated only on its own elements (boolean indexing), never on all.
    result = np.empty(r.shape)
    w, m = width[short], mid[short]
    s = m[:, None] + 0.5 * w[:, None] * _GL_NODES
    result[short] = 0.5 * r[short] * (np.exp(-0.5 * h2[short][:, None] - s * s) @ _GL_WEIGHTS)
    a0, a1 = z0[both_positive], z1[both_positive]
    ratio = np.exp(-width[both_positive] * (a0 + a1))  # exp(z0^2 - z1^2) <= exp(-1/2)
    result[both_positive] = _SQRT_HALF_PI * E0[both_positive] * (
        erfcx(a0) - ratio * erfcx(a1)
    )
    b0, b1 = -z1[both_negative], -z0[both_negative]
    ratio = np.exp(-width[both_negative] * (b0 + b1))
    result[both_negative] = _SQRT_HALF_PI * E1[both_negative] * (
        erfcx(b0) - ratio * erfcx(b1)
    )
    result[straddle] = (
        _SQRT_HALF_PI * np.exp(-0.5 * h2[straddle]) * (erf(z1[straddle]) - erf(z0[straddle]))
    )
    return result


def _series(a: np.ndarray, offset: int) -> np.ndarray:
    """``2 sum_k (-a/2)^k / (k! (2k+1+offset)(2k+2+offset))`` (alternating, |a| < 2)."""
    total = np.zeros_like(a)
    term = np.ones_like(a)
    for k in range(_SERIES_TERMS):
        total = total + term / ((2 * k + 1 + offset) * (2 * k + 2 + offset))
        term = term * (-0.5 * a) / (k + 1)
    return 2.0 * total


def segment_moments(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Moments of ``exp(-a tau^2 / 2)`` over ``tau = s - t``, ``s, t`` uniform on ``[0, 1]``.

    ``M0(a) = int int exp(-a (s-t)^2 / 2) ds dt
            = sqrt(2 pi / a) erf(sqrt(a/2)) - 2 (1 - exp(-a/2)) / a``
    ``M2(a) = int int (s-t)^2 exp(-a (s-t)^2 / 2) ds dt
            = [sqrt(2 pi / a) erf(sqrt(a/2)) - 4 (1 - exp(-a/2)) / a] / a``

    Both closed forms cancel catastrophically for small ``a``; there the (alternating, rapidly
    converging) Taylor series is used.

    Parameters
    ----------
    a : ndarray, ``a >= 0``

    Returns
    -------
    M0, M2 : ndarray, same shape as ``a``
    """
    a = np.asarray(a, dtype=np.float64)
    small = a < _SERIES_LIMIT
    a_small = np.where(small, a, 0.0)
    a_large = np.where(small, _SERIES_LIMIT, a)
    root = np.sqrt(2.0 * np.pi / a_large) * erf(np.sqrt(0.5 * a_large))
    one_minus = -np.expm1(-0.5 * a_large)
    M0 = np.where(small, _series(a_small, 0), root - 2.0 * one_minus / a_large)
    M2 = np.where(small, _series(a_small, 2), (root - 4.0 * one_minus / a_large) / a_large)
    return M0, M2
