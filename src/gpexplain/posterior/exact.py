"""Exact GP regression posterior: ``Z = X``, ``a = (K + noise I)^{-1} (y - m0)``,
``Q = (K + noise I)^{-1}``, applied through a Cholesky factor and never formed."""

from __future__ import annotations

import warnings

import numpy as np
from scipy.linalg import cho_solve, solve_triangular

from gpexplain._torch import to_numpy
from gpexplain._validation import as_feature_matrix, as_target
from gpexplain.kernels import as_kernel
from gpexplain.posterior.base import Posterior
from gpexplain.posterior.device import (
    check_device,
    device_cholesky,
    device_gram,
    device_solve_lower,
)

__all__ = ["ExactPosterior", "cholesky_with_jitter"]

_MAX_RELATIVE_JITTER = 1e-4


def cholesky_with_jitter(matrix: np.ndarray) -> tuple[np.ndarray, float]:
    """Lower Cholesky factor of a symmetric PSD matrix, adding diagonal jitter only if needed.

    Jitter starts at 1e-10 times the mean diagonal and grows tenfold up to 1e-4 times it (at
    most seven tries, ``with_jitter``). A matrix whose diagonal is zero or not finite has no
    scale to set a jitter by and is refused at once (it used to loop forever).

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
    def attempt(jitter):
        try:
            return np.linalg.cholesky(matrix + jitter * np.eye(matrix.shape[0]) if jitter
                                      else matrix)
        except np.linalg.LinAlgError:
            return None

    return with_jitter(attempt, float(np.mean(np.diag(matrix))))


def with_jitter(attempt, scale: float):
    """``(factor, jitter)`` from ``attempt(jitter)`` (a factor, or None where the matrix plus
    ``jitter I`` is not numerically positive definite): no jitter first, then ``scale``
    times 1e-10, 1e-9, ..., 1e-4 (``scale``: the mean diagonal), with a ``RuntimeWarning``
    naming the jitter that was needed. Shared by the CPU and the device factorisations.

    Raises
    ------
    np.linalg.LinAlgError
        ``scale`` is not positive and finite, or no jitter up to 1e-4 ``scale`` helps.
    """
    factor = attempt(0.0)
    if factor is not None:
        return factor, 0.0
    if not (np.isfinite(scale) and scale > 0):
        raise np.linalg.LinAlgError(
            f"kernel matrix is not positive definite and its mean diagonal is {scale:g}, so no "
            "jitter relative to it can help (e.g. a linear kernel on all-zero inputs); use a "
            "positive noise variance or another kernel."
        )
    for jitter in scale * np.logspace(-10, np.log10(_MAX_RELATIVE_JITTER), 7):
        factor = attempt(float(jitter))
        if factor is None:
            continue
        warnings.warn(
            f"kernel matrix was not numerically positive definite; added jitter {jitter:.3g} "
            "to its diagonal.",
            RuntimeWarning,
            stacklevel=4,
        )
        return factor, float(jitter)
    raise np.linalg.LinAlgError(
        "kernel matrix is not positive definite even with jitter "
        f"{_MAX_RELATIVE_JITTER:g} x its mean diagonal; increase the noise variance."
    )


def _as_noise(noise, n_train: int) -> float | np.ndarray:
    """A noise variance >= 0: a float, or a float64 vector with one entry per training row."""
    if isinstance(noise, str) or noise is None or isinstance(noise, bool):
        raise TypeError(
            f"noise must be a variance >= 0 (a number, or one per training row), got {noise!r}."
        )
    values = np.asarray(noise, dtype=np.float64)
    if values.ndim == 0:
        value = float(values)
        if not np.isfinite(value) or value < 0:
            raise ValueError(f"noise must be a finite variance >= 0, got {value}.")
        return value
    if values.shape != (n_train,):
        raise ValueError(
            f"noise must be a scalar variance or have one entry per training row ({n_train}), "
            f"got shape {values.shape}."
        )
    bad = np.flatnonzero(~np.isfinite(values) | (values < 0))
    if bad.size:
        raise ValueError(
            f"noise must be finite variances >= 0; row {int(bad[0])} has {values[bad[0]]}."
        )
    return values.copy()


class ExactPosterior(Posterior):
    """Exact GP regression posterior with fixed hyperparameters (no fitting).

    Parameters
    ----------
    X : array-like of shape (n_train, n_features)
        Training inputs (NumPy, pandas or torch).
    y : array-like of shape (n_train,)
        Training targets.
    kernel : gpexplain kernel or gpytorch.kernels.Kernel
        Prior covariance, e.g. ``gx.kernels.RBF(lengthscale=[0.8, 1.5], variance=1.2)``.
    noise : float or array-like of shape (n_train,)
        Gaussian observation-noise *variance* (>= 0), in squared units of y: one for every
        row, or one per training row (heteroscedastic noise, e.g. GPX's
        ``noise + weight_noise |z_i|^2``).
    mean : float, default 0.0
        Constant prior mean m0.
    feature_names : sequence of str, optional
        Used when X carries no column names.
    device : str or torch.device, optional
        Where the kernel matrix is built and factorised and every triangular solve runs
        (float64 torch, e.g. "cuda"; ``gpexplain.posterior.device``): the GPU path for tens of
        thousands of rows. None (default): NumPy/SciPy on the CPU. Results come back as
        NumPy either way.

    Attributes
    ----------
    train_inputs : ndarray (n_train, n_features)
        Z in the representer form (here the training inputs).
    alpha : ndarray (n_train,)
        ``a = (K + diag(noise))^{-1} (y - m0)``.
    cholesky : ndarray or torch.Tensor (n_train, n_train)
        Lower Cholesky factor of ``K + noise I`` (plus ``jitter`` when it was needed); a
        tensor on ``device`` when one was given.
    jitter : float
        Diagonal jitter that had to be added (0.0 normally).

    Raises
    ------
    ValueError
        Bad inputs (named), negative noise, a matrix that is not positive definite, or a
        device this machine does not have.
    TypeError
        ``device`` neither a string nor a ``torch.device``.
    """

    def __init__(self, X, y, kernel, noise: float, mean: float = 0.0, feature_names=None,
                 device=None):
        X, names = as_feature_matrix(X, "X", feature_names)
        y = as_target(y, X.shape[0])
        noise = _as_noise(noise, X.shape[0])
        mean = float(mean)
        if not np.isfinite(mean):
            raise ValueError(f"mean must be a finite constant, got {mean}.")
        self.kernel = as_kernel(kernel)
        self.train_inputs = X
        self.train_targets = y
        self.noise = noise
        self.mean = mean
        self.feature_names = names
        if device is not None:
            self._factor_on(check_device(device))
            return
        gram = self.kernel(X, X)
        if not np.all(np.isfinite(gram)):
            # np.linalg.cholesky does not check, and the solve then failed with a message
            # naming no argument.
            raise ValueError(self._non_finite_message())
        gram[np.diag_indices_from(gram)] += noise
        try:
            self.cholesky, self.jitter = cholesky_with_jitter(gram)
        except np.linalg.LinAlgError as error:
            raise ValueError(str(error)) from None
        self.alpha = cho_solve((self.cholesky, True), y - mean)

    def _non_finite_message(self) -> str:
        return (f"kernel {self.kernel!r} gives non-finite values on X (e.g. a lengthscale so "
                "small or large that its powers overflow); choose hyperparameters on the "
                "scale of the inputs, or rescale X.")

    def _factor_on(self, device) -> None:
        """``cholesky`` (a tensor on ``device``), ``jitter`` and ``alpha`` by torch there."""
        gram = device_gram(self.kernel, self.train_inputs, device)
        if gram is None:
            raise ValueError(self._non_finite_message())
        try:
            self.cholesky, self.jitter = device_cholesky(gram, self.noise, with_jitter)
        except np.linalg.LinAlgError as error:
            raise ValueError(str(error)) from None
        residual = self.train_targets - self.mean
        self.alpha = device_solve_lower(
            self.cholesky, device_solve_lower(self.cholesky, residual), transpose=True)

    def __repr__(self) -> str:
        n, d = self.train_inputs.shape
        noise = (
            f"{self.noise:.4g}" if np.ndim(self.noise) == 0
            else f"per row {np.min(self.noise):.4g}..{np.max(self.noise):.4g}"
        )
        return (
            f"ExactPosterior(n_train={n}, n_features={d}, kernel={self.kernel!r}, "
            f"noise={noise})"
        )

    def whiten(self, cross: np.ndarray) -> np.ndarray:
        """``L^{-1} cross^T`` for ``cross`` of shape (..., n_train); returns (n_train, ...).

        ``cross Q cross'^T = whiten(cross)^T whiten(cross')`` for the exact posterior, which
        gives variances as sums of squares (never negative by cancellation).
        """
        flat = cross.reshape(-1, cross.shape[-1])
        if isinstance(self.cholesky, np.ndarray):
            solved = solve_triangular(self.cholesky, flat.T, lower=True, check_finite=False)
        else:  # a factor on a device
            solved = device_solve_lower(self.cholesky, flat.T)
        return solved.reshape((self.cholesky.shape[0],) + cross.shape[:-1])

    def quadratic_form(self, left: np.ndarray, right: np.ndarray | None = None) -> np.ndarray:
        """``left (K + noise I)^{-1} right^T`` through the Cholesky factor, batched.

        ``left`` is (..., m, n_train) and ``right`` (..., k, n_train); with ``right`` omitted
        the result is the Gram matrix of ``whiten(left)``, a sum of squares.
        """
        W_left = np.moveaxis(self.whiten(left), 0, -1)  # (..., m, n_train)
        W_right = W_left if right is None else np.moveaxis(self.whiten(right), 0, -1)
        return W_left @ np.swapaxes(W_right, -1, -2)

    def log_marginal_likelihood(self) -> float:
        """``log N(y | m0, K + noise I)`` of the training targets."""
        residual = self.train_targets - self.mean
        n = residual.shape[0]
        return float(
            -0.5 * residual @ self.alpha
            - np.sum(np.log(np.diag(to_numpy(self.cholesky))))
            - 0.5 * n * np.log(2.0 * np.pi)
        )

