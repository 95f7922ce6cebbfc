"""Local Shapley values of an orthogonal additive GP, a linear functional of f.

Lu, Boukouvalas and Hensman, *Additive Gaussian processes revisited* (2022), and the exact
Shapley values of additive GPs (the additive-Shapley paper, Lemma 1 / eq. 9, with the
docs/errata.md corrections):
for the orthogonal additive kernel ``k = sum_q sigma_q^2 e_q(kt_1, ..., kt_d)``
(``gx.kernels.OrthogonalAdditive``) f splits into independent functional-ANOVA components
``f = f_0 + sum_{S != {}} f_S`` that integrate to zero under the kernel's product measure, and
the Shapley value of feature i at x in the marginal game under that measure,
``v(S) = E_{x_-S ~ prod_{j not in S} p_j} f(x_S, x_-S)``, is
``phi_i(x) = sum_{S ni i} f_S(x) / |S|``.
The cross term ``A`` and prior term ``P`` are ``OrthogonalAdditive.shapley_cross`` and
``shapley_prior`` (O(n d Q) per point by leave-one-out elementary symmetric polynomials).

Completeness: the base value is ``v({}) = m0 + sigma_0^2 1^T a`` (Lemma 2 corrected, plus the
constant prior mean), ``sum_i phi_i(x) = m(x) - v({})`` and ``1^T Cov 1 = Var[f(x) - f_0]``
(f_0 the random constant).
"""

from __future__ import annotations

import numpy as np

from gpexplain.functionals.base import LinearFunctional, Scheme
from gpexplain.kernels.orthogonal_additive import OrthogonalAdditive

__all__ = ["AdditiveShapley", "not_additive_message"]


def not_additive_message(kernel) -> str:
    """The error for a kernel that is not ``OrthogonalAdditive`` (local and global values)."""
    return (
        "exact Shapley values need a posterior with the orthogonal additive kernel "
        "(gx.kernels.OrthogonalAdditive, e.g. from gx.AdditiveGPRegressor); got kernel "
        f"{kernel!r}. For other kernels use gx.integrated_gradients."
    )


class AdditiveShapley(LinearFunctional):
    """Local Shapley values ``phi_i(x) = sum_{S ni i} f_S(x) / |S|`` (marginal game under the
    kernel's product measure)."""

    name = "exact Shapley values"

    def unsupported_kernel_message(self, kernel) -> str:
        return not_additive_message(kernel)

    def completeness_target(self, posterior, X: np.ndarray, return_var: bool):
        """``(v({}), Var[f(x) - f_0])``, the variance straight from the kernel (prior
        ``k(x, x) - sigma_0^2``, cross ``k(x, Z) - sigma_0^2``), independently of A and P."""
        constant_variance = float(posterior.kernel.order_variances[0])
        base_value = posterior.mean + constant_variance * float(np.sum(posterior.alpha))
        if not return_var:
            return base_value, None
        gram = posterior.kernel(X, posterior.train_inputs)
        reduction = posterior.quadratic_form((gram - constant_variance)[:, None, :])[:, 0, 0]
        difference = posterior.kernel.diag(X) - constant_variance - reduction
        return base_value, np.maximum(difference, 0.0)

    def describe(self, scheme: Scheme) -> str:
        measure = type(scheme.kernel.measure).__name__.lower()
        return f"{self.name} (orthogonal additive GP, {measure} measure)"


@AdditiveShapley.register(OrthogonalAdditive)
class AdditiveShapleyScheme(Scheme):
    """Closed form of ``OrthogonalAdditive``; one set of kernel components per chunk.

    The driver asks for ``k(X, Z)`` and the cross term of the same chunk; both come from the
    constrained components of that chunk, which are computed once and kept until the next
    chunk (the components are most of the cost of the mean).
    """

    label = "closed form"

    def __init__(self, functional, kernel, Z):
        super().__init__(functional, kernel, Z)
        self._chunk, self._components = None, None

    def components(self, X: np.ndarray) -> np.ndarray:
        """``kernel.components_by_feature(X, Z)``, reused while X is the same array."""
        if X is not self._chunk:
            self._chunk, self._components = X, self.kernel.components_by_feature(X, self.Z)
        return self._components

    def kernel_matrix(self, X):
        return self.kernel.kernel_from_components(self.components(X))

    def cross(self, X):
        return self.kernel.shapley_cross_from_components(self.components(X))

    def prior(self, X):
        return self.kernel.shapley_prior(X)

    def prior_between(self, X1, X2):
        return self.kernel.shapley_prior_between(X1, X2)

    def copies_per_point(self) -> int:
        # The recursion holds prefix polynomials of every (point, training point, feature).
        return self.kernel.order + 2
