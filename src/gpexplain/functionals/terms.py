"""Linear functionals of a coregionalised GP, term by term (the LMC's term form, issue 24).

A linear model of coregionalisation (LMC; Journel and Huijbregts, *Mining Geostatistics*,
1978; Goovaerts, *Geostatistics for Natural Resources Evaluation*, 1997; Alvarez, Rosasco and
Lawrence, *Kernels for vector-valued functions: a review*, 2012, Sec. 4.2) has the covariance

    k((x, i), (x', j)) = sum_q B^q_ij k_q(x, x'),     q = 1 .. Q,  each B^q t x t PSD,

with its own input kernel k_q per term (its own ARD lengthscales), fitted to task-augmented
observations ``(x_n, task_n)``. No single kernel and basis express output i's posterior: its
cross covariance with the observations is ``sum_q B^q[i, task_n] k_q(x, x_n)``, whose weights
differ per term. A linear functional L acting on x is linear in the kernel, so it is applied
to each term's kernel by that kernel's own scheme (closed form or quadrature) and summed:

    C_i[p, a, n]             = sum_q B^q[i, task_n] (L_a k_q(., x_n))(x_p)        cross term
    P_ij[p, a, b]            = sum_q B^q_ij (L_a L_b' k_q)(x_p)                   prior term
    E[L_a f_i]               = C_i[p, a, :] alpha
    Cov[L_a f_i, L_b f_j]    = P_ij[p, a, b] - C_i[p, a, :] K^{-1} C_j[p, b, :]^T

(the generic formula of DESIGN.md on the augmented representer form; the intrinsic
coregionalisation model is Q = 1). Two pieces, used by every explanation that needs these
terms:

* ``TermSum``: the sums above for a selection of t outputs at once (cross (m, t, D, N), prior
  (m, t, D, t, D), two-point prior, kernel matrix), the only place they are formed;
* ``CoregionalTerms``: the kernel of *one* output's marginal posterior (its prior kernel
  ``sum_q B^q_ii k_q`` and its weights ``B^q[i, task_n]`` per basis point), for which
  integrated gradients, gradients, product-kernel Shapley values and Shapley interactions
  register ``term_scheme`` (``TermSum`` for one output), each next to its functional. Every
  other functional has no scheme for it and is refused by ``LinearFunctional.bind`` with a
  ``TypeError`` that names these four.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from gpexplain.functionals.base import LinearFunctional, Scheme
from gpexplain.kernels.base import Kernel

__all__ = ["CoregionalTerms", "TermScheme", "TermSum", "explainable",
           "sum_terms", "term_scheme"]


def explainable() -> list[str]:
    """Names of the functionals registered for ``CoregionalTerms`` (read from their
    registries, e.g. "integrated gradients"), sorted."""
    found, classes = set(), list(LinearFunctional.__subclasses__())
    while classes:
        functional = classes.pop()
        classes.extend(functional.__subclasses__())
        if CoregionalTerms in functional._schemes:
            found.add(functional.name or functional.__name__)
    return sorted(found)


def sum_terms(values):
    """``values[0] + values[1] + ...`` of an iterable (the first term itself when Q = 1, so
    that one term gives the intrinsic coregionalisation model's numbers bit for bit)."""
    iterator = iter(values)
    total = next(iterator)
    for value in iterator:
        total = total + value
    return total


class CoregionalTerms(Kernel):
    """The kernel of one output i of a linear model of coregionalisation, in term form.

    As a covariance function it is output i's prior kernel ``k_i(x, x') = sum_q B^q_ii
    k_q(x, x')``; its cross covariance with the posterior's basis points is
    ``cross(X, Z)[p, n] = sum_q B^q[i, task_n] k_q(x_p, z_n)`` (weights per basis point, so
    it belongs to one posterior). Integrated gradients, gradients, product-kernel Shapley
    values and interactions register ``term_scheme`` for it; the generic quadrature schemes of
    ``Kernel`` never apply, since it has no GPyTorch view (``torch_kernel`` refuses).

    Parameters
    ----------
    kernels : sequence of Q gpexplain kernels
        The input kernels k_q.
    prior_weights : array-like (Q,)
        ``B^q_ii``, each >= 0.
    cross_weights : array-like (Q, n_basis) or (Q, 1)
        ``B^q[i, task_n]``; one column: the same weight at every basis point (then the cross
        covariance is ``sum_q w_q k_q(X, Z)`` for any Z).

    Raises
    ------
    ValueError
        Shapes that do not match Q (named), non-finite or negative prior weights.
    """

    @property
    def explanation_hint(self) -> str:
        """Named in refusals: the explanations registered for this term form."""
        return ("An output of a linear model of coregionalisation (LMC) is explained term by "
                f"term; available: {'; '.join(explainable())}.")

    def __init__(self, kernels: Sequence, prior_weights, cross_weights):
        self.kernels = list(kernels)
        n_terms = len(self.kernels)
        self.prior_weights = np.asarray(prior_weights, dtype=np.float64).reshape(-1)
        self.cross_weights = np.asarray(cross_weights, dtype=np.float64)
        if n_terms < 1 or self.prior_weights.shape != (n_terms,) or (
            self.cross_weights.ndim != 2 or len(self.cross_weights) != n_terms
        ):
            raise ValueError(
                f"CoregionalTerms needs Q >= 1 kernels, prior_weights (Q,) and cross_weights "
                f"(Q, n_basis) or (Q, 1); got {n_terms} kernels, prior_weights "
                f"{self.prior_weights.shape}, cross_weights {self.cross_weights.shape}."
            )
        if not (np.all(np.isfinite(self.prior_weights)) and np.all(self.prior_weights >= 0)
                and np.all(np.isfinite(self.cross_weights))):
            raise ValueError("CoregionalTerms weights must be finite, prior_weights >= 0.")

    def __repr__(self) -> str:
        return f"CoregionalTerms({len(self.kernels)} terms: {self.kernels!r})"

    @property
    def terms(self) -> list[tuple[Kernel, float, np.ndarray]]:
        """``[(k_q, B^q_ii, B^q[i, task_n])]``, one per term."""
        return list(zip(self.kernels, self.prior_weights, self.cross_weights, strict=True))

    def __call__(self, X1: np.ndarray, X2: np.ndarray) -> np.ndarray:
        """Prior covariance ``sum_q B^q_ii k_q(X1, X2)``, (n1, n2)."""
        return sum_terms(w * k(X1, X2) for w, k in zip(self.prior_weights, self.kernels,
                                                       strict=True))

    def diag(self, X: np.ndarray) -> np.ndarray:
        """Prior variance ``sum_q B^q_ii k_q(x, x)``, (n,)."""
        return sum_terms(w * k.diag(X) for w, k in zip(self.prior_weights, self.kernels,
                                                       strict=True))

    def cross(self, X: np.ndarray, Z: np.ndarray) -> np.ndarray:
        """``sum_q B^q[i, task_n] k_q(X, Z)``, (n_points, n_basis)."""
        return sum_terms(k(X, Z) * w for w, k in zip(self.cross_weights, self.kernels,
                                                     strict=True))

    def torch_kernel(self, n_features: int):
        """Refused: a sum of coregionalised terms is no single GPyTorch kernel of x.

        Raises
        ------
        TypeError
            Always, naming the explanations that apply.
        """
        raise TypeError(f"{self!r} has no single GPyTorch kernel. {self.explanation_hint}")


class TermSum:
    """The cross and prior terms of a functional for t outputs of a coregionalised GP.

    Parameters
    ----------
    functional : LinearFunctional
    kernels : sequence of Q gpexplain kernels
        k_q; each is bound to ``functional`` once (``LinearFunctional.bind``).
    Z : ndarray (n_basis, n_features)
        The task-augmented training inputs.
    cross_weights : array-like (Q, t, n_basis)
        ``B^q[i, task_n]`` for the selected outputs i.
    prior_weights : array-like (Q, t, t)
        ``B^q_ij`` for the selected outputs.

    Raises
    ------
    TypeError
        ``functional`` has no scheme for one of the kernels (from ``bind``).
    """

    def __init__(self, functional: LinearFunctional, kernels, Z: np.ndarray, cross_weights,
                 prior_weights):
        self.functional, self.Z = functional, Z
        self.schemes = [functional.bind(kernel, Z) for kernel in kernels]
        self.cross_weights = np.asarray(cross_weights, dtype=np.float64)
        self.prior_weights = np.asarray(prior_weights, dtype=np.float64)

    @property
    def label(self) -> str:
        labels = list(dict.fromkeys(scheme.label for scheme in self.schemes))
        return "; ".join(label for label in labels if label)

    @property
    def kernel(self):
        """The first term's kernel (what ``LinearFunctional.describe`` may read)."""
        return self.schemes[0].kernel

    @property
    def torch_kernel(self):  # named in PointCovariance's refusal of slow quadrature
        return self.schemes[0].torch_kernel

    def _weighted(self, crosses) -> np.ndarray:
        return sum_terms(cross[:, None, :, :] * w[None, :, None, :]
                         for cross, w in zip(crosses, self.cross_weights, strict=True))

    def _joint(self, priors) -> np.ndarray:
        return sum_terms(np.einsum("ij,pab->piajb", B, prior)
                         for B, prior in zip(self.prior_weights, priors, strict=True))

    def cross(self, X: np.ndarray) -> np.ndarray:
        """``C[p, i, a, n]``, (m, t, D, n_basis)."""
        return self._weighted(scheme.cross(X) for scheme in self.schemes)

    def cross_and_prior(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Cross (m, t, D, n_basis) and prior ``P[p, i, a, j, b]`` (m, t, D, t, D) terms."""
        pairs = [scheme.cross_and_prior(X) for scheme in self.schemes]
        return self._weighted(pair[0] for pair in pairs), self._joint(pair[1] for pair in pairs)

    def prior_between(self, X1: np.ndarray, X2: np.ndarray) -> np.ndarray:
        """``sum_q B^q_ij (L_a(x_p) L_b'(x'_q) k_q)``, (n1, n2, t, D, t, D).

        Raises
        ------
        NotImplementedError
            A term's scheme has no two-point prior term.
        """
        return sum_terms(np.einsum("ij,pqab->pqiajb", B, scheme.prior_between(X1, X2))
                         for B, scheme in zip(self.prior_weights, self.schemes, strict=True))

    def kernel_matrix(self, X: np.ndarray) -> np.ndarray:
        """``sum_q B^q[i, task_n] k_q(x_p, z_n)``, (m, t, n_basis)."""
        return sum_terms(scheme.kernel_matrix(X)[:, None, :] * w
                         for scheme, w in zip(self.schemes, self.cross_weights, strict=True))

    def copies_per_point(self) -> int:
        return max(scheme.copies_per_point() for scheme in self.schemes) + len(self.schemes) - 1

    def point_pair_seconds(self) -> float:
        return sum(scheme.point_pair_seconds() for scheme in self.schemes)


class TermScheme(Scheme):
    """A functional on one output's ``CoregionalTerms`` kernel: ``TermSum`` for that output.

    Cross term ``sum_q B^q[i, task_n] (L k_q(., x_n))`` (n_points, D, n_basis), prior term
    ``sum_q B^q_ii L L' k_q`` (n_points, D, D), against the posterior's own alpha and K^{-1}
    (``gpexplain.posterior.lmc``'s marginal).
    """

    def __init__(self, functional: LinearFunctional, kernel: CoregionalTerms, Z: np.ndarray):
        super().__init__(functional, kernel, Z)
        self.terms = TermSum(functional, kernel.kernels, Z, kernel.cross_weights[:, None, :],
                             kernel.prior_weights[:, None, None])
        self.label = self.terms.label

    @property
    def torch_kernel(self):
        return self.terms.torch_kernel

    def cross(self, X):
        return self.terms.cross(X)[:, 0]

    def prior(self, X):
        return self.cross_and_prior(X)[1]

    def cross_and_prior(self, X):
        cross, prior = self.terms.cross_and_prior(X)
        return cross[:, 0], prior[:, 0, :, 0, :]

    def prior_between(self, X1, X2):
        return self.terms.prior_between(X1, X2)[:, :, 0, :, 0, :]

    def kernel_matrix(self, X):
        return self.terms.kernel_matrix(X)[:, 0]

    def copies_per_point(self) -> int:
        return self.terms.copies_per_point()

    def point_pair_seconds(self) -> float:
        return self.terms.point_pair_seconds()


def term_scheme(functional: LinearFunctional, kernel: CoregionalTerms, Z: np.ndarray):
    """The scheme factory each functional that applies registers for ``CoregionalTerms``
    (``@TheFunctional.register(CoregionalTerms)``): ``TermScheme``."""
    return TermScheme(functional, kernel, Z)
