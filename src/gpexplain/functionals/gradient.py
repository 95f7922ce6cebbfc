"""The gradient functional (derivative process), and gradient x input, per kernel type.

Seitz, *Gradient-based explanations for Gaussian process regression and classification
models* (2022), Sec. 4, eqs. 15-20: the input gradient ``L_i f = d_i f(x)`` is a linear
functional of f, with cross term ``d_i k(x, z_n)`` (derivative in the query argument) and
prior term ``d_i d'_j k(x, x')`` at ``x = x'`` (the derivative kernel, not k; both as
corrected in docs/errata.md). Gradient x input (Shrikumar et al. 2016; Seitz 2022, eq. 10) is the
functional ``w_i d_i f(x)`` with ``w = x`` (or ``x - baseline``): the schemes evaluate the
gradient, and the driver weighs its moments by ``w`` (``output_weights``): mean ``w_i m_i``,
covariance ``w_i w_j C_ij``.

Schemes: the closed form of ``gx.kernels.RBF``; for every other kernel, autograd for the cross
term and the derivative recursion over the kernel's GPyTorch tree for the prior term
(``gpexplain.kernels.derivatives``, which lists the supported GPyTorch kernels).
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

from gpexplain.functionals.base import LinearFunctional, Scheme
from gpexplain.functionals.terms import CoregionalTerms, term_scheme
from gpexplain.kernels import derivatives
from gpexplain.kernels.base import Kernel
from gpexplain.kernels.rbf import RBF

__all__ = ["Gradient"]


class Gradient(LinearFunctional):
    """``w_i d_i f(x)`` at each query point: the gradient (w = 1) or gradient x input.

    Parameters
    ----------
    gradient_x_input : bool, default False
        Weigh each partial derivative by the input, ``x_i`` (or ``x_i - baseline_i``).
    baseline : ndarray (n_features,), optional
        Only with ``gradient_x_input``: weigh by ``x - baseline``; the attributions then
        complete (to first order) to ``f(x) - f(baseline)``.
    """

    name = "posterior gradient (derivative process)"

    #: (x - baseline) x gradient completes only to first order: nothing to measure.
    complete = False

    def __init__(self, gradient_x_input: bool = False, baseline: np.ndarray | None = None):
        self.gradient_x_input = gradient_x_input
        self.baseline = baseline

    def output_weights(self, X: np.ndarray) -> np.ndarray | None:
        """``w`` (n_points, n_features) of gradient x input, or None for the plain gradient."""
        if not self.gradient_x_input:
            return None
        return X if self.baseline is None else X - self.baseline[None, :]

    def completeness_target(self, posterior, X: np.ndarray, return_var: bool):
        """``(f(baseline), None)`` for (x - baseline) x gradient, a first-order Taylor estimate
        of ``f(x) - f(baseline)``; ``(None, None)`` otherwise (no completeness)."""
        if self.gradient_x_input and self.baseline is not None:
            return float(posterior.predict_mean(self.baseline[None, :])[0]), None
        return None, None

    def describe(self, scheme: Scheme) -> str:
        if not self.gradient_x_input:
            return self.name
        if self.baseline is None:
            return "gradient x input (derivative process)"
        return "(x - baseline) x gradient (derivative process)"


@Gradient.register(RBF)
class ClosedFormGradient(Scheme):
    """``gx.kernels.RBF.gradient_cross`` and ``gradient_prior``."""

    label = "closed form"

    def cross(self, X):
        return self.kernel.gradient_cross(X, self.Z)

    def prior(self, X):
        return self.kernel.gradient_prior(X)

    def prior_between(self, X1, X2):
        return self.kernel.gradient_prior_between(X1, X2)


@Gradient.register(Kernel)
class DerivativeProcessGradient(Scheme):
    """Autograd cross term and derivative-recursion prior term over the kernel's GPyTorch
    module (any kernel; unsupported GPyTorch node types raise ``ValueError``)."""

    label = "autograd"

    @cached_property
    def module(self):
        return self.kernel.torch_kernel(self.Z.shape[1])

    def cross(self, X):
        return derivatives.gradient_cross(self.module, X, self.Z)

    def prior(self, X):
        return derivatives.gradient_prior(self.module, X)

    def prior_between(self, X1, X2):
        """Autograd between distinct points; points within 1e-8 of the basis points' range
        (per feature) of each other take the same-point value (``gradient_prior_between``)."""
        scale = np.ptp(self.Z, axis=0) if len(self.Z) > 1 else np.ones(self.Z.shape[1])
        return derivatives.gradient_prior_between(self.module, X1, X2, 1e-8 * scale)


# An output of a linear model of coregionalisation: each term's scheme, summed.
Gradient.register(CoregionalTerms)(term_scheme)
