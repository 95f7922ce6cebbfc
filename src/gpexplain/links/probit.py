"""The probit link ``Phi(f)``, the standard normal CDF: every expectation in closed form."""

from __future__ import annotations

import numpy as np
import torch
from scipy.special import ndtr

from gpexplain.links.base import LINKS, SQRT_2PI
from gpexplain.links.binary import BinaryLink

__all__ = ["Probit"]

# Orders (p, q) of E[Phi^(p)(a) Phi^(q)(b)] in closed form (``Probit._pair_quadrature``); the
# others (a 0: the response itself) go to the base class's quadrature.
_CLOSED_FORM_ORDERS = ((1, 1), (2, 1), (1, 2), (3, 1), (1, 3), (2, 2))


@LINKS.register("probit")
class Probit(BinaryLink):
    """Probit link ``Phi(f)`` (standard normal CDF); every expectation in closed form.

    With ``t = 1 + s2``, ``z = m / sqrt(t)``: ``E[Phi(f)] = Phi(z)`` and, differentiating in m,
    ``E[Phi'(f)] = phi(z) / sqrt(t)``, ``E[Phi''(f)] = -z phi(z) / t``. For ``h = phi^2``,
    ``E[h(f)] = exp(-m^2 / u) / (2 pi sqrt(u))`` with ``u = 1 + 2 s2``, and
    ``E[h'] = -2 m / u E[h]``, ``E[h''] = (4 m^2 / u^2 - 2 / u) E[h]``.
    """

    name = "probit"
    rule = "closed form"

    def log_response(self, f):
        return torch.special.log_ndtr(f)

    def derivatives(self, f, order):
        density = np.exp(-0.5 * f * f) / SQRT_2PI
        return [ndtr(f), density, -f * density, (f * f - 1.0) * density][: order + 1]

    def response_expectations(self, mean, var):
        t = 1.0 + var
        z = mean / np.sqrt(t)
        density = np.exp(-0.5 * z * z) / SQRT_2PI
        return np.stack([ndtr(z), density / np.sqrt(t), -z * density / t])

    def _closed_form(self, orders) -> bool:
        return all(tuple(order) in _CLOSED_FORM_ORDERS for order in orders)

    def _pair_quadrature(self, orders, mean_a, mean_b, var_a, var_b, cov_ab):
        """Closed form for p, q >= 1: ``Phi^(p)(a) Phi^(q)(b) = phi(a) phi(b) He_{p-1}(a)
        He_{q-1}(b)`` up to sign, and a Gaussian times the bivariate N(m, S) is
        ``N(m; 0, I + S)`` times N(m', S') with ``m' = (I + S)^{-1} m``,
        ``S' = S (I + S)^{-1} = I - (I + S)^{-1}`` (no inverse of S: singular S is fine); the
        polynomial's expectation under N(m', S') is then exact. Orders with a 0 (the
        response itself) go to the quadrature of the base class."""
        if not self._closed_form(orders):
            return super()._pair_quadrature(orders, mean_a, mean_b, var_a, var_b, cov_ab)
        det = (1.0 + var_a) * (1.0 + var_b) - cov_ab**2
        inv_aa, inv_bb, inv_ab = (1.0 + var_b) / det, (1.0 + var_a) / det, -cov_ab / det
        density = np.exp(-0.5 * (inv_aa * mean_a**2 + 2.0 * inv_ab * mean_a * mean_b
                                 + inv_bb * mean_b**2)) / (2.0 * np.pi * np.sqrt(det))
        m_a = inv_aa * mean_a + inv_ab * mean_b
        m_b = inv_ab * mean_a + inv_bb * mean_b
        s_aa, s_bb, s_ab = 1.0 - inv_aa, 1.0 - inv_bb, -inv_ab
        # E[P_p(a) P_q(b)] under N(m', S') for P_1 = 1, P_2 = -x, P_3 = x^2 - 1
        moments = {
            (1, 1): np.ones_like(m_a), (2, 1): -m_a, (1, 2): -m_b,
            (3, 1): m_a**2 + s_aa - 1.0, (1, 3): m_b**2 + s_bb - 1.0,
            (2, 2): m_a * m_b + s_ab,
        }
        return np.stack([density * moments[order] for order in orders])

    def slope_square_expectations(self, mean, var):
        u = 1.0 + 2.0 * var
        h0 = np.exp(-mean * mean / u) / (2.0 * np.pi * np.sqrt(u))
        return np.stack([h0, -2.0 * mean / u * h0, (4.0 * mean**2 / u**2 - 2.0 / u) * h0])
