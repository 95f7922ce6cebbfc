"""Random-feature GP regression posterior in weight space: O(n M^2), no n x n matrix.

With a finite-rank kernel ``k(x, x') = phi(x) . phi(x')`` (``RandomFeatureKernel``, F = 2M
features) the training Gram matrix is ``Phi Phi^T`` with ``Phi = phi(Z)`` of shape (n, F).
Take the thin QR factorisation ``Phi = U R`` (U: n x r orthonormal columns, r = min(n, F)).
Then ``Phi Phi^T + noise I = U (R R^T + noise I) U^T + noise (I - U U^T)``, two blocks acting
on orthogonal subspaces, so its inverse is

    Q = U C^{-1} U^T + (I - U U^T) / noise,        C = R R^T + noise I_r   (r x r)

exactly, with both terms positive semi-definite. ``left Q right^T`` is therefore a sum of
two Gram products, of ``L_C^{-1} U^T left^T`` (L_C the Cholesky factor of C) and of the part
of ``left`` orthogonal to the span of Phi divided by ``sqrt(noise)``: variances are sums of
squares, as for ``ExactPosterior``. The textbook Woodbury form ``(I - Phi A^{-1} Phi^T) / noise``
(A = Phi^T Phi + noise I, Butler et al. eqs. 21-22, Lazaro-Gredilla et al. 2010) subtracts two
terms of size ``|left|^2 |Phi|^2 / noise`` to get one of size ``|left|^2``, losing
``log10(cond A)`` digits; the QR split does not.

Why a posterior of its own rather than ``ExactPosterior`` with the random-feature kernel: both
give the same numbers (tested to 1e-9), but ExactPosterior factorises the n x n Gram matrix,
O(n^3) time and O(n^2) memory, which defeats the purpose of random features. Here fitting is
O(n F^2) time and the posterior keeps O(n F) numbers (U); every functional of the generic
formula costs O(rows x n x F). Z stays the training inputs so that the explanations' generic
representer-form path (``cross @ alpha``, ``prior - quadratic_form(cross)``) applies unchanged.
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy.linalg import cho_solve, solve_triangular

from gpexplain._validation import as_feature_matrix, as_target
from gpexplain.kernels.random_features import RandomFeatureKernel
from gpexplain.posterior.base import Posterior
from gpexplain.posterior.exact import cholesky_with_jitter

__all__ = ["RandomFeaturePosterior"]


class RandomFeaturePosterior(Posterior):
    """Exact posterior of a GP with a random-feature kernel, computed in weight space.

    Model: ``y = f(x) + eps``, ``f(x) = m0 + phi(x) . w``, ``w ~ N(0, I_F)`` (so that
    ``Cov f = k``), ``eps ~ N(0, noise)``. In representer form ``Z`` = training inputs,
    ``a = (Phi Phi^T + noise I)^{-1} (y - m0)`` and ``Q = (Phi Phi^T + noise I)^{-1}``, both
    applied through the QR / Cholesky split of the module docstring.

    Parameters
    ----------
    X : array-like of shape (n_train, n_features)
        Training inputs (NumPy, pandas or torch).
    y : array-like of shape (n_train,)
    kernel : RandomFeatureKernel
    noise : float
        Gaussian observation-noise *variance* (> 0: with more rows than features the Gram
        matrix ``Phi Phi^T`` is singular), squared units of y.
    mean : float, default 0.0
        Constant prior mean m0.
    feature_names : sequence of str, optional

    Attributes
    ----------
    train_inputs : ndarray (n_train, n_features)
    alpha : ndarray (n_train,)
    basis : ndarray (n_train, r)
        U, orthonormal basis of the span of ``phi(Z)``'s columns.
    cholesky : ndarray (r, r)
        Lower Cholesky factor of ``C = R R^T + noise I`` (plus ``jitter`` if needed).
    weight_mean : ndarray (2 n_frequencies,)
        Posterior mean of the feature weights, ``E[w] = Phi^T a``; ``m(x) = m0 + phi(x) . E[w]``.
    jitter : float

    Raises
    ------
    TypeError
        ``kernel`` is not a ``RandomFeatureKernel``.
    ValueError
        Bad inputs (named), noise not a positive finite variance, feature-count mismatch.
    """

    def __init__(self, X, y, kernel, noise: float, mean: float = 0.0, feature_names=None):
        if not isinstance(kernel, RandomFeatureKernel):
            raise TypeError(
                f"kernel must be a RandomFeatureKernel, got {type(kernel).__name__}; use "
                "ExactPosterior for other kernels."
            )
        X, names = as_feature_matrix(X, "X", feature_names)
        y = as_target(y, X.shape[0])
        if X.shape[1] != kernel.n_features:
            raise ValueError(
                f"X has {X.shape[1]} features but the kernel's frequencies have "
                f"{kernel.n_features}."
            )
        noise = float(noise)
        if not np.isfinite(noise) or noise <= 0:
            raise ValueError(f"noise must be a positive finite variance, got {noise}.")
        mean = float(mean)
        if not np.isfinite(mean):
            raise ValueError(f"mean must be a finite constant, got {mean}.")
        self.kernel = kernel
        self.train_inputs = X
        self.train_targets = y
        self.noise = noise
        self.mean = mean
        self.feature_names = names

        design = kernel.features(X)  # (n, F)
        self.basis, upper = np.linalg.qr(design)  # Householder QR: backward stable
        # The complement (I - U U^T) is empty when U is square (n <= F).
        self._has_complement = self.basis.shape[1] < self.basis.shape[0]
        inner = upper @ upper.T
        inner[np.diag_indices_from(inner)] += noise
        try:
            self.cholesky, self.jitter = cholesky_with_jitter(inner)
        except np.linalg.LinAlgError as error:
            raise ValueError(str(error)) from None
        residual = y - mean
        projected = self.basis.T @ residual
        # a = Q (y - m0) would add (I - U U^T)(y - m0) / noise, but every k(x, Z) and every
        # functional L k(., Z) is a combination of Phi's columns, orthogonal to that term: it
        # changes no mean, only adds rounding amplified by 1 / noise (with noise 1e-10,
        # identical rows were predicted 4e-4 apart). So a keeps the span-of-Phi part only.
        self.alpha = self.basis @ cho_solve((self.cholesky, True), projected)
        self._complement_energy = float(np.sum((residual - self.basis @ projected) ** 2))
        self.weight_mean = design.T @ self.alpha
        _warn_rounding(self.alpha, kernel.variance, residual)

    def __repr__(self) -> str:
        n, d = self.train_inputs.shape
        return (
            f"RandomFeaturePosterior(n_train={n}, n_features={d}, kernel={self.kernel!r}, "
            f"noise={self.noise:.4g})"
        )

    def _whiten(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """``(L_C^{-1} U^T rows^T)^T`` (K, r) and the orthogonal part / sqrt(noise) (K, n)."""
        coefficients = rows @ self.basis  # (K, r)
        whitened = solve_triangular(
            self.cholesky, coefficients.T, lower=True, check_finite=False
        ).T
        if not self._has_complement:
            return whitened, None
        complement = (rows - coefficients @ self.basis.T) / np.sqrt(self.noise)
        return whitened, complement

    def quadratic_form(self, left: np.ndarray, right: np.ndarray | None = None) -> np.ndarray:
        """``left (Phi Phi^T + noise I)^{-1} right^T``, batched, as a sum of two Gram products.

        Parameters
        ----------
        left : ndarray (..., m, n_train)
        right : ndarray (..., k, n_train), optional
            Defaults to ``left``; the result is then a positive semi-definite Gram matrix.

        Returns
        -------
        ndarray (..., m, k)
        """
        n_train = self.train_inputs.shape[0]
        batch = left.shape[:-1]
        left_w, left_c = self._whiten(left.reshape(-1, n_train))
        if right is None:
            right_batch, right_w, right_c = batch, left_w, left_c
        else:
            right_batch = right.shape[:-1]
            right_w, right_c = self._whiten(right.reshape(-1, n_train))

        def gram(a, b):
            a = a.reshape(batch + (a.shape[-1],))
            b = b.reshape(right_batch + (b.shape[-1],))
            return a @ np.swapaxes(b, -1, -2)

        result = gram(left_w, right_w)
        if left_c is not None:
            result += gram(left_c, right_c)
        return result

    def log_marginal_likelihood(self) -> float:
        """``log N(y | m0, Phi Phi^T + noise I)``.

        ``log det = log det C + (n - r) log noise`` (the determinant splits over the two
        orthogonal blocks).
        """
        residual = self.train_targets - self.mean
        n, r = self.basis.shape
        log_det = 2.0 * np.sum(np.log(np.diag(self.cholesky))) + (n - r) * np.log(self.noise)
        # (y - m0)^T Q (y - m0): the span part through alpha, the complement part / noise.
        quadratic = residual @ self.alpha + self._complement_energy / self.noise
        return float(-0.5 * quadratic - 0.5 * log_det - 0.5 * n * np.log(2 * np.pi))


# Means are accurate to this fraction of the targets' spread, or a warning says how far.
_MEAN_RTOL = 1e-8


def _warn_rounding(alpha: np.ndarray, variance: float, residual: np.ndarray) -> None:
    """Warn when rounding in ``m(x) = m0 + k(x, Z) a`` can exceed 1e-8 of the targets' spread.

    ``|k(x, z_n)| <= variance`` (``|phi(x)|^2 = variance``), so the sum over n of ``k a`` is
    exact to about ``n eps variance sum_n |a_n|``: the bound reached when ``C = R R^T +
    noise I`` is nearly singular (rows repeated while frequencies outnumber them, noise near
    zero). Identical rows can then be predicted that far apart, and explanation covariances
    (prior term minus a reduction of the same size) lose as many digits.
    """
    rounding = len(alpha) * np.finfo(float).eps * variance * float(np.sum(np.abs(alpha)))
    scale = max(float(np.max(np.abs(residual))), np.finfo(float).tiny)
    if rounding > _MEAN_RTOL * scale:
        warnings.warn(
            f"random-feature posterior is ill-conditioned (noise variance too small for "
            f"repeated or nearly repeated rows) and loses accuracy: predictions and "
            f"explanation means are exact only to about {rounding:.2g} in the units of y "
            f"({rounding / scale:.1e} of the targets' spread), and explanation covariances "
            "may be indefinite; increase the noise variance or the number of distinct rows.",
            RuntimeWarning,
            stacklevel=3,
        )
