"""Exact posterior of a linear model of coregionalisation (LMC) over t outputs (issue 24).

The LMC (Journel and Huijbregts, *Mining Geostatistics*, 1978; Goovaerts, *Geostatistics for
Natural Resources Evaluation*, 1997; Alvarez, Rosasco and Lawrence, *Kernels for
vector-valued functions: a review*, 2012, Sec. 4.2, eq. 4.6) is a sum of Q intrinsic terms,
each with its own input kernel:

    k((x, i), (x', j)) = sum_q B^q_ij k_q(x, x'),     B^q t x t symmetric PSD.

Conditioned on task-augmented observations ``(x_n, task_n, y_n)``, n = 1..N, with
``K = sum_q B^q[tasks, tasks] * k_q(X, X) + diag(noise)`` and ``a = K^{-1} (y - m0[tasks])``,
output i has

    m_i(x)      = m0_i + sum_n u_i(x)_n a_n,      u_i(x)_n = sum_q B^q[i, task_n] k_q(x, x_n)
    c_ij(x, x') = sum_q B^q_ij k_q(x, x') - u_i(x)^T K^{-1} u_j(x').

``marginal(i)`` is a single-output ``Posterior`` whose kernel is the term form
``gpexplain.functionals.terms.CoregionalTerms`` (prior ``sum_q B^q_ii k_q``, cross ``u_i``):
integrated gradients, gradients, product-kernel Shapley values and interactions of one output
apply each term's closed form and sum (``TermScheme``); the joint explanation of several
outputs, with their covariance, is ``gpexplain.explain.multi_output`` through the same
``TermSum``. Sobol indices and Shapley effects (``gx.global_sensitivity``), quadratic in f,
mix the terms pairwise instead (``gpexplain.kernels.product_pairs``). With Q = 1 this is
the intrinsic coregionalisation model (``CoregionalizedPosterior``), to round-off.
"""

from __future__ import annotations

import numpy as np

from gpexplain.functionals.terms import CoregionalTerms
from gpexplain.kernels import as_kernel
from gpexplain.posterior.base import Posterior
from gpexplain.posterior.multi_output import TaskAugmentedPosterior, check_coregionalization

__all__ = ["LMCPosterior"]


class LMCPosterior(TaskAugmentedPosterior):
    """Exact posterior of a linear model of coregionalisation on task-augmented data.

    Parameters
    ----------
    X, tasks, y : array-like (n_train, n_features), (n_train,) ints, (n_train,)
        The task-augmented observations: row n observes output ``tasks[n]`` at ``X[n]``,
        value ``y[n]`` (as ``CoregionalizedPosterior``).
    kernels : sequence of Q gpexplain kernels (``gx.kernels.RBF``) or GPyTorch kernels
        The input kernel k_q of each term.
    coregionalizations : array-like (Q, n_outputs, n_outputs)
        B^q of each term: symmetric positive semi-definite with a positive diagonal.
    noise : float or array-like (n_train,)
        Observation-noise variance, one or per row.
    mean : float or array-like (n_outputs,), default 0.0
        Constant prior mean of each output.
    output_names, feature_names : sequence of str, optional

    Attributes
    ----------
    kernels : list of Q kernels
    coregionalizations : ndarray (Q, n_outputs, n_outputs)
    train_inputs, train_tasks, train_targets, noise, mean, alpha, cholesky
        As ``TaskAugmentedPosterior``.

    Raises
    ------
    ValueError
        No terms, a number of kernels other than the number of matrices, matrices of
        different sizes, a B^q not symmetric PSD with positive diagonal (named
        ``coregionalizations[q]``), bad data (named), K not positive definite.
    """

    def __init__(self, X, tasks, y, kernels, coregionalizations, noise, mean=0.0,
                 output_names=None, feature_names=None):
        kernels = list(kernels)
        try:
            matrices = list(coregionalizations)
        except TypeError:
            raise ValueError(f"coregionalizations must be a sequence of t x t matrices, got "
                             f"{coregionalizations!r}.") from None
        if not kernels or len(kernels) != len(matrices):
            raise ValueError(
                f"an LMC needs one coregionalization matrix per kernel, at least one term; got "
                f"{len(kernels)} kernels and {len(matrices)} matrices."
            )
        matrices = [check_coregionalization(B, f"coregionalizations[{q}]")
                    for q, B in enumerate(matrices)]
        sizes = {B.shape[0] for B in matrices}
        if len(sizes) != 1:
            raise ValueError(f"coregionalizations must all be t x t for one t; got sizes "
                             f"{[B.shape[0] for B in matrices]}.")
        self.kernels = [as_kernel(kernel) for kernel in kernels]
        self.coregionalizations = np.stack(matrices)
        self._condition(X, tasks, y, noise, mean, sizes.pop(), output_names, feature_names)

    def __repr__(self) -> str:
        n, d = self.train_inputs.shape
        return (f"LMCPosterior(n_train={n}, n_features={d}, outputs={self.output_names}, "
                f"kernels={self.kernels!r})")

    @property
    def n_components(self) -> int:
        """Q, the number of terms."""
        return len(self.kernels)

    @property
    def coregionalization_terms(self):
        return list(zip(self.kernels, self.coregionalizations, strict=True))

    def marginal(self, output) -> Posterior:
        return _LMCMarginal(self, self.output_index(output)[0])


class _LMCMarginal(Posterior):
    """Output i of an ``LMCPosterior`` as a single-output posterior in term form.

    Kernel ``CoregionalTerms`` (prior ``sum_q B^q_ii k_q``; cross ``u_i(x)_n = sum_q
    B^q[i, task_n] k_q(x, x_n)`` through ``cross_kernel``), basis the augmented inputs,
    ``alpha`` and ``quadratic_form`` the parent's (``a`` and ``K^{-1}``).
    """

    def __init__(self, parent: LMCPosterior, index: int):
        self.parent = parent
        self.output = index
        self.kernel = CoregionalTerms(parent.kernels, parent.coregionalizations[:, index, index],
                                      parent.term_task_weights([index])[:, 0, :])
        self.train_inputs = parent.train_inputs
        self.alpha = parent.alpha
        self.mean = float(parent.mean[index])
        self.feature_names = parent.feature_names

    def __repr__(self) -> str:
        return f"marginal {self.parent.output_names[self.output]!r} of {self.parent!r}"

    def cross_kernel(self, X: np.ndarray) -> np.ndarray:
        return self.kernel.cross(X, self.train_inputs)

    def quadratic_form(self, left, right=None):
        return self.parent.quadratic_form(left, right)
