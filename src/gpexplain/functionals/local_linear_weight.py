"""GPX's local linear weights and feature contributions as linear functionals of f.

With the locally linear kernel (``gpexplain.kernels.locally_linear``), f(x, z) = w(x)^T z is
linear in z, so each weight is the derivative ``w_l(x) = d f / d z_l``, exactly, at any z.
Applied to the kernel (Yoshikawa and Iwata 2020, eq. 18; docs/errata.md):

    cross[p, l, n] = d/dz_l k((x_p, z), (x_n, z_n)) = k_x(x_p, x_n) z_nl
    prior[p, l, m] = delta_lm (k_x(x_p, x_p) + weight_noise)

so the generic formula gives ``E[w] = Z^T (k* o a)`` and ``Cov[w] = (k** + weight_noise) I -
B^T (K + diag(noise))^{-1} B`` with ``B = diag(k*) Z``. The contributions ``w_l z_l`` are the
same functional with output weights z: they sum to the prediction ``f(x, z)`` (base value 0;
the model has no intercept) and their covariance sums to its posterior variance.
"""

from __future__ import annotations

import numpy as np

from gpexplain.functionals.base import LinearFunctional, Scheme, refuse
from gpexplain.functionals.gradient import Gradient
from gpexplain.functionals.integrated_gradient import IntegratedGradient
from gpexplain.kernels.locally_linear import LocallyLinear

__all__ = ["LocalLinearWeight"]

WHAT = ("contributions", "weights")


class LocalLinearWeight(LinearFunctional):
    """The local weights ``w(x)`` of GPX, or the contributions ``w_l(x) z_l``.

    Parameters
    ----------
    n_inputs : int
        Number of kernel-input columns x at the front of the concatenated query ``[x, z]``.
    what : {"contributions", "weights"}
    feature_names : list of str, optional
        Names of the z columns; by default the posterior's names of those columns.
    """

    def __init__(self, n_inputs: int, what: str = "contributions", feature_names=None):
        if what not in WHAT:
            raise ValueError(f"unknown what={what!r}; use one of {WHAT}.")
        self.n_inputs, self.what, self.feature_names = n_inputs, what, feature_names
        self.name = f"GPX {what}"

    def output_weights(self, X: np.ndarray) -> np.ndarray | None:
        return X[:, self.n_inputs :] if self.what == "contributions" else None

    def completeness_target(self, posterior, X: np.ndarray, return_var: bool):
        if self.what == "weights":
            return None, None
        variance = posterior.predict(X)[1] if return_var else None
        return 0.0, variance

    def output_names(self, posterior) -> list[str]:
        if self.feature_names is not None:
            return list(self.feature_names)
        return list(posterior.feature_names[self.n_inputs :])

    def explained_inputs(self, X: np.ndarray) -> np.ndarray:
        return X[:, self.n_inputs :]

    def describe(self, scheme: Scheme) -> str:
        return self.name


@LocalLinearWeight.register(LocallyLinear)
class LocalLinearWeightScheme(Scheme):
    """Closed form on the locally linear kernel."""

    def cross(self, X: np.ndarray) -> np.ndarray:
        kernel = self.kernel
        (x, _), (x_train, z_train) = kernel.split(X), kernel.split(self.Z)
        gram = kernel.input_kernel(x, x_train)  # (p, n)
        return gram[:, None, :] * z_train.T[None, :, :]

    def prior(self, X: np.ndarray) -> np.ndarray:
        x, z = self.kernel.split(X)
        variance = self.kernel.input_kernel.diag(x) + self.kernel.weight_noise
        return variance[:, None, None] * np.eye(z.shape[1])[None]

    def prior_between(self, X1: np.ndarray, X2: np.ndarray) -> np.ndarray:
        """``delta_lm (k_x(x_p, x'_q) + weight_noise [x_p = x'_q])``: the weight noise is white
        noise in x, shared only by identical kernel inputs. Shape (n1, n2, D, D)."""
        (x1, z1), (x2, _) = self.kernel.split(X1), self.kernel.split(X2)
        same = np.all(x1[:, None, :] == x2[None, :, :], axis=2)
        gram = self.kernel.input_kernel(x1, x2) + self.kernel.weight_noise * same
        return gram[:, :, None, None] * np.eye(z1.shape[1])[None, None]

    # No mean-only override: ``cross @ alpha`` on both paths keeps the mean-only result
    # bit-identical to the mean of a call with covariance.


# The weight noise is white noise in f(x, z) = w(x)^T z, so f has no derivative in x and the
# generic gradient and integrated-gradient schemes (over any Kernel) do not apply.
Gradient.register(LocallyLinear)(refuse)
IntegratedGradient.register(LocallyLinear)(refuse)
