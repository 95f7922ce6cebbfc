"""The logistic link ``sigma(f) = 1 / (1 + exp(-f))`` (the binary GP classifier's default)."""

from __future__ import annotations

import numpy as np
import torch
from scipy.special import expit, ndtr

from gpexplain.links.base import LINKS, SQRT_2PI, TOLERANCE, gauss_hermite_expectations, refine
from gpexplain.links.binary import BinaryLink

__all__ = ["Logit"]

# Latent variances above this: a trapezoid rule in the latent value instead of Gauss-Hermite
# (which needs thousands of nodes once the Gaussian is much wider than sigma').
_WIDE_VARIANCE = 1.0
_HALF_WIDTH = 40.0  # sigma' and its derivatives are below 5e-18 beyond |f| = 40
_TRAPEZOID_STEPS = (0.5, 0.25, 0.125, 0.0625)


@LINKS.register("logit")
class Logit(BinaryLink):
    """Logistic link ``sigma(f) = 1 / (1 + exp(-f))``; expectations by Gauss-Hermite (latent
    variance <= 1) or a trapezoid rule in the latent value (wider; see ``_expect``).

    The derivatives are polynomials in sigma (docs/errata.md corrects eq. 34, which writes
    derivatives where powers belong): ``sigma' = sigma (1 - sigma)``,
    ``sigma'' = sigma' (1 - 2 sigma)``, ``sigma''' = sigma' (1 - 6 sigma')``, evaluated from
    ``e = exp(-|f|)`` as ``e / (1 + e)^2`` and ``-sign(f) (1 - e) / (1 + e)`` (that is,
    ``-tanh(f / 2)``) so that no digits cancel in the tails.
    """

    name = "logit"
    rule = "Gauss-Hermite / latent trapezoid"

    def _expect(self, function, mean, var, what, response_row=False):
        """Gauss-Hermite for latent variances up to 1; above, the trapezoid rule in the latent
        value u over [-40, 40] of ``function(u) N(u; m, s2)``, whose rows (derivatives of
        sigma, all decaying like exp(-|u|)) are analytic in the strip |Im u| < pi, so the rule
        converges geometrically as its step halves (0.5 .. 0.0625, until two steps agree to
        1e-12). The response itself does not decay; its row uses
        ``E[sigma(f)] = int sigma'(u) Phi((m - u) / s) du`` (sigma is the CDF of the logistic
        distribution, so this is P(L < f) for an independent logistic L)."""
        shape = np.shape(mean)
        mean, var = np.ravel(mean), np.ravel(var)
        wide = var > _WIDE_VARIANCE
        parts = {}
        if np.any(~wide):
            parts[False] = gauss_hermite_expectations(function, mean[~wide], var[~wide],
                                                      what=what)
        if np.any(wide):
            m, s = mean[wide][:, None], np.sqrt(var[wide])[:, None]

            def rule(step):
                u = np.arange(-_HALF_WIDTH, _HALF_WIDTH + 0.5 * step, step)
                u = np.broadcast_to(u, (len(m), len(u)))
                density = np.exp(-0.5 * ((u - m) / s) ** 2) / (s * SQRT_2PI)
                values = function(u) * density
                if response_row:
                    values[0] = expit(u) * expit(-u) * ndtr((m - u) / s)
                return values.sum(-1) * step

            parts[True] = refine(_TRAPEZOID_STEPS, rule, TOLERANCE, lambda n, gap: (
                f"trapezoid {what} did not converge to {TOLERANCE:g} at step {n} (last "
                f"change {gap:.3g})."
            ))
        first = next(iter(parts.values()))
        out = np.empty((first.shape[0], len(mean)))
        for is_wide, values in parts.items():
            out[:, wide == is_wide] = values
        return out.reshape((first.shape[0],) + shape)

    def log_response(self, f):
        return torch.nn.functional.logsigmoid(f)

    def derivatives(self, f, order):
        # One exponential, e = exp(-|f|) <= 1: sigma = 1 / (1 + e) (f >= 0) or e / (1 + e),
        # sigma' = e / (1 + e)^2 and -tanh(f / 2) = -sign(f) (1 - e) / (1 + e), no digits
        # cancelling in either tail (the 2-D path quadrature evaluates millions of these).
        e = np.exp(-np.abs(f))
        inverse = 1.0 / (1.0 + e)
        values = [np.where(f >= 0, inverse, e * inverse)]
        if order >= 1:
            slope = e * inverse * inverse
            values.append(slope)
        if order >= 2:
            values.append(slope * -np.sign(f) * (1.0 - e) * inverse)
        if order >= 3:
            values.append(slope * (1.0 - 6.0 * slope))
        return values
