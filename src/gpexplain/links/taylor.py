"""The paper's second-order Taylor approximations of the link expectations, for comparison only.

Seitz, *Gradient-based explanations for Gaussian process regression and classification models*
(2022): eq. 33 for binary links as corrected in docs/errata.md,
``sigma'(m) mu_k + (s2/2) sigma'''(m) mu_k + c_k sigma''(m)``, and eq. 37 for the softmax,
its Hessian by automatic differentiation. They err by more than 10% once the latent variance
approaches 1, and give means only (no covariance: ``Form.covariance`` refuses). A link built
with ``approximation="taylor"`` holds one of these forms instead of its exact one.

A Taylor "expected probability" can leave [0, 1] (1.65 and -0.53 were met for latent
variances of a few units). It is returned as computed, with a ``RuntimeWarning`` naming how
many values left [0, 1] and their range: clipping would hide how far the approximation is
off, and the gradient forms, which are not clipped, would then no longer integrate to the
reported probabilities.
"""

from __future__ import annotations

import warnings

import numpy as np
import torch
from scipy.special import log_softmax
from torch.func import jacfwd, jacrev, vmap

from gpexplain.links.base import Form

__all__ = ["BinaryTaylor", "SoftmaxTaylor"]

_DESCRIPTION = "second-order Taylor (Seitz 2022)"


def _warn_outside_unit_interval(probabilities: np.ndarray) -> np.ndarray:
    """``probabilities`` unchanged, after a RuntimeWarning when any is outside [0, 1]."""
    outside = (probabilities < 0.0) | (probabilities > 1.0)
    if np.any(outside):
        warnings.warn(
            f"the second-order Taylor approximation gives {int(outside.sum())} of "
            f"{probabilities.size} expected probabilities outside [0, 1] (range "
            f"{probabilities.min():.3g} to {probabilities.max():.3g}): the latent variance is "
            "too large for it; use approximation='quadrature' (exact to quadrature accuracy).",
            RuntimeWarning,
            stacklevel=3,
        )
    return probabilities


class BinaryTaylor(Form):
    """Second-order Taylor forms of a binary link's expectations at the latent mean."""

    gives_covariance = False

    def describe(self, n_latents: int) -> str:
        return _DESCRIPTION

    def response(self, mean, var):
        """``sigma(m) + (var / 2) sigma''(m)``."""
        value, _, second = self.link.derivatives(mean, 2)
        return _warn_outside_unit_interval(value + 0.5 * var * second)

    def gradient(self, mean, var, mu, c):
        """The corrected eq. 33, ``sigma'(m) mu + (s2/2) sigma'''(m) mu + c sigma''(m)``."""
        _, first, second, third = self.link.derivatives(mean, 3)
        slope = first + 0.5 * var * third
        return slope[..., None] * mu + second[..., None] * c


def _softmax_derivatives(mean: np.ndarray):
    """Jacobian, Hessian and third-derivative tensors of S at each row of ``mean`` by autograd:
    shapes (n, C, C), (n, C, C, C), (n, C, C, C, C) (output class first)."""

    def softmax(f):
        return torch.softmax(f, dim=-1)

    first = jacrev(softmax)
    second = jacfwd(first)
    third = jacfwd(second)
    f = torch.as_tensor(mean, dtype=torch.float64)
    return tuple(vmap(fn)(f).numpy() for fn in (first, second, third))


class SoftmaxTaylor(Form):
    """Second-order Taylor forms of the softmax's expectations at the latent means (eq. 37)."""

    gives_covariance = False

    def describe(self, n_latents: int) -> str:
        return _DESCRIPTION

    def response(self, mean, var):
        """``S(m) + 1/2 sum_i d_i^2 S(m) s2_i``, (n, C)."""
        _, second, _ = _softmax_derivatives(mean)
        return _warn_outside_unit_interval(
            np.exp(log_softmax(mean, axis=1)) + 0.5 * np.einsum("pcii,pi->pc", second, var))

    def gradient(self, mean, var, mu, c, target_class: int):
        """Eq. 37: kappa(m) + 1/2 sum_i H_ii(m) s2_i, where kappa (eq. 36) is
        ``sum_j d_j S_c(f) (mu_j + c_j / s2_j (f_j - m_j))``. Its second derivative in f_i at
        m is ``sum_j mu_j d_i^2 d_j S_c + 2 (c_i / s2_i) d_i^2 S_c``, so the s2_i cancel."""
        first, second, third = (t[:, target_class] for t in _softmax_derivatives(mean))
        hessian_diagonal = np.einsum("pii->pi", second)
        kappa = np.einsum("pj,pjk->pk", first, mu)
        curvature = 0.5 * np.einsum("pi,pjk,pjii->pk", var, mu, third)
        return kappa + curvature + np.einsum("pi,pik->pk", hessian_diagonal, c)

    def class_moments(self, mean, var, mu, c, target_class: int):
        """``E[S_c]`` (n,) and ``E[d S_c / dx]`` (n, d), each by its Taylor form."""
        return (self.response(mean, var)[:, target_class],
                self.gradient(mean, var, mu, c, target_class))
