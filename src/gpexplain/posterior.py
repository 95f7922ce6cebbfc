"""Gaussian posteriors in representer form, the interface every explanation consumes.

A posterior over the latent function f is written as

    mean  m(x)     = m0 + k(x, Z) a
    cov   c(x, x') = k(x, x') - k(x, Z) Q k(Z, x')

so that any linear functional L of f is Gaussian with ``E[L f] = L m0 + (L k(., Z)) a`` and
``Cov[L1 f, L2 f] = L1 L2' k - (L1 k(., Z)) Q (L2 k(., Z))^T`` (DESIGN.md). For the exact GP,
``Z = X``, ``a = (K + noise I)^{-1} (y - m0)`` and ``Q = (K + noise I)^{-1}``, applied through a
Cholesky factor and never formed.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
from scipy.linalg import cho_solve, solve_triangular

from gpexplain._validation import (
    as_feature_matrix,
    as_target,
    check_feature_count,
    check_finite_result,
)
from gpexplain.kernels import as_kernel

__all__ = ["ExactPosterior", "as_posterior", "cholesky_with_jitter"]

_MAX_RELATIVE_JITTER = 1e-4


def cholesky_with_jitter(matrix: np.ndarray) -> tuple[np.ndarray, float]:
    """Lower Cholesky factor of a symmetric PSD matrix, adding diagonal jitter only if needed.

    Jitter starts at 1e-10 times the mean diagonal and grows tenfold up to 1e-4 times it.

    Returns
    -------
    L : ndarray of shape (n, n), lower triangular
    jitter : float
        The jitter added (0.0 when none was needed).

    Raises
    ------
    np.linalg.LinAlgError
        Not positive definite even with the largest jitter.
    """
    try:
        return np.linalg.cholesky(matrix), 0.0
    except np.linalg.LinAlgError:
        pass
    scale = float(np.mean(np.diag(matrix)))
    jitter = 1e-10 * scale
    while jitter <= _MAX_RELATIVE_JITTER * scale:
        try:
            L = np.linalg.cholesky(matrix + jitter * np.eye(matrix.shape[0]))
        except np.linalg.LinAlgError:
            jitter *= 10.0
            continue
        warnings.warn(
            f"kernel matrix was not numerically positive definite; added jitter {jitter:.3g} "
            "to its diagonal.",
            RuntimeWarning,
            stacklevel=3,
        )
        return L, jitter
    raise np.linalg.LinAlgError(
        "kernel matrix is not positive definite even with jitter "
        f"{_MAX_RELATIVE_JITTER:g} x its mean diagonal; increase the noise variance."
    )


class ExactPosterior:
    """Exact GP regression posterior with fixed hyperparameters (no fitting).

    Parameters
    ----------
    X : array-like of shape (n_train, n_features)
        Training inputs (NumPy, pandas or torch).
    y : array-like of shape (n_train,)
        Training targets.
    kernel : gpexplain kernel or gpytorch.kernels.Kernel
        Prior covariance, e.g. ``gx.kernels.RBF(lengthscale=[0.8, 1.5], variance=1.2)``.
    noise : float
        Gaussian observation-noise *variance* (>= 0), in squared units of y.
    mean : float, default 0.0
        Constant prior mean m0.
    feature_names : sequence of str, optional
        Used when X carries no column names.

    Attributes
    ----------
    train_inputs : ndarray (n_train, n_features)
        Z in the representer form (here the training inputs).
    alpha : ndarray (n_train,)
        ``a = (K + noise I)^{-1} (y - m0)``.
    cholesky : ndarray (n_train, n_train)
        Lower Cholesky factor of ``K + noise I`` (plus ``jitter`` when it was needed).
    jitter : float
        Diagonal jitter that had to be added (0.0 normally).

    Raises
    ------
    ValueError
        Bad inputs (named), negative noise, or a matrix that is not positive definite.
    """

    def __init__(self, X, y, kernel, noise: float, mean: float = 0.0, feature_names=None):
        X, names = as_feature_matrix(X, "X", feature_names)
        y = as_target(y, X.shape[0])
        noise = float(noise)
        if not np.isfinite(noise) or noise < 0:
            raise ValueError(f"noise must be a finite variance >= 0, got {noise}.")
        mean = float(mean)
        if not np.isfinite(mean):
            raise ValueError(f"mean must be a finite constant, got {mean}.")
        self.kernel = as_kernel(kernel)
        self.train_inputs = X
        self.train_targets = y
        self.noise = noise
        self.mean = mean
        self.feature_names = names
        gram = self.kernel(X, X)
        gram[np.diag_indices_from(gram)] += noise
        try:
            self.cholesky, self.jitter = cholesky_with_jitter(gram)
        except np.linalg.LinAlgError as error:
            raise ValueError(str(error)) from None
        self.alpha = cho_solve((self.cholesky, True), y - mean)

    def __repr__(self) -> str:
        n, d = self.train_inputs.shape
        return (
            f"ExactPosterior(n_train={n}, n_features={d}, kernel={self.kernel!r}, "
            f"noise={self.noise:.4g})"
        )

    @property
    def n_features(self) -> int:
        return self.train_inputs.shape[1]

    def check_inputs(self, X, name: str = "X") -> np.ndarray:
        """Validate query points against the training features; return float64 (n, n_features)."""
        values, names = as_feature_matrix(X, name)
        check_feature_count(values, self.n_features, name)
        default_names = [f"x{i}" for i in range(self.n_features)]
        if (
            isinstance(X, pd.DataFrame)
            and self.feature_names != default_names
            and names != self.feature_names
        ):
            # A reordered or renamed table would be explained column by column silently wrong.
            raise ValueError(
                f"{name} columns {names} do not match the training features "
                f"{self.feature_names}; select them in that order, e.g. X[{self.feature_names}]."
            )
        return values

    def whiten(self, cross: np.ndarray) -> np.ndarray:
        """``L^{-1} cross^T`` for ``cross`` of shape (..., n_train); returns (n_train, ...).

        ``cross Q cross'^T = whiten(cross)^T whiten(cross')`` for the exact posterior, which
        gives variances as sums of squares (never negative by cancellation).
        """
        flat = cross.reshape(-1, cross.shape[-1])
        solved = solve_triangular(self.cholesky, flat.T, lower=True, check_finite=False)
        return solved.reshape((self.cholesky.shape[0],) + cross.shape[:-1])

    def predict_mean(self, X) -> np.ndarray:
        """Latent posterior mean ``m0 + k(X, Z) a`` only, shape (n_points,)."""
        X = self.check_inputs(X)
        mean = self.mean + self.kernel(X, self.train_inputs) @ self.alpha
        check_finite_result("predict_mean", mean)
        return mean

    def predict(self, X, return_cov: bool = False):
        """Latent posterior mean and variance (or full covariance) of f at X.

        Parameters
        ----------
        X : array-like of shape (n_points, n_features)
        return_cov : bool
            Return the (n_points, n_points) covariance instead of the variances.

        Returns
        -------
        mean : ndarray (n_points,)
        var_or_cov : ndarray (n_points,) or (n_points, n_points)
            Latent (noise-free) posterior variance, clipped at zero.
        """
        X = self.check_inputs(X)
        cross = self.kernel(X, self.train_inputs)
        mean = self.mean + cross @ self.alpha
        W = self.whiten(cross)
        if return_cov:
            cov = self.kernel(X, X) - W.T @ W
            cov = 0.5 * (cov + cov.T)
            check_finite_result("predict", mean, cov)
            return mean, cov
        var = np.maximum(self.kernel.diag(X) - np.sum(W * W, axis=0), 0.0)
        check_finite_result("predict", mean, var)
        return mean, var

    def difference_variance(self, X, baseline: np.ndarray) -> np.ndarray:
        """Posterior ``Var[f(x) - f(baseline)]`` for each row of X, shape (n_points,).

        This is what ``1^T Cov(attributions) 1`` must equal (completeness of the covariance).
        """
        X = self.check_inputs(X)
        base = baseline[None, :]
        prior = (
            self.kernel.diag(X)
            + self.kernel.diag(base)[0]
            - 2.0 * self.kernel(X, base)[:, 0]
        )
        W = self.whiten(self.kernel(X, self.train_inputs) - self.kernel(base, self.train_inputs))
        return np.maximum(prior - np.sum(W * W, axis=0), 0.0)

    def log_marginal_likelihood(self) -> float:
        """``log N(y | m0, K + noise I)`` of the training targets."""
        residual = self.train_targets - self.mean
        n = residual.shape[0]
        return float(
            -0.5 * residual @ self.alpha
            - np.sum(np.log(np.diag(self.cholesky)))
            - 0.5 * n * np.log(2.0 * np.pi)
        )


def as_posterior(model_or_posterior):
    """Return the posterior of a fitted estimator (its ``posterior_``) or the posterior itself.

    Raises
    ------
    TypeError
        Neither a posterior nor an estimator with ``posterior_``.
    ValueError
        An estimator that has not been fitted.
    """
    if isinstance(model_or_posterior, ExactPosterior):
        return model_or_posterior
    if hasattr(type(model_or_posterior), "posterior_") or hasattr(model_or_posterior, "fit"):
        posterior = getattr(model_or_posterior, "posterior_", None)
        if posterior is None:
            raise ValueError(
                f"{type(model_or_posterior).__name__} is not fitted yet; call fit(X, y) first."
            )
        return posterior
    raise TypeError(
        "expected a fitted gpexplain estimator or a posterior (e.g. gx.ExactPosterior), got "
        f"{type(model_or_posterior).__name__}."
    )
