"""Laplace approximation of a binary GP classifier as a latent posterior in representer form.

Rasmussen and Williams, *Gaussian Processes for Machine Learning* (2006), Alg. 3.2: at the
mode f_hat of the latent posterior, with ``pi = sigma(f_hat)`` (logistic),
``W = diag(pi (1 - pi))`` and ``B = I + W^1/2 K W^1/2 = L L^T``,

    E[f(x)]   = k(x, X) (y - pi)                                  (line 4)
    Var[f(x)] = k(x, x) - v^T v,   v = L^{-1} W^1/2 k(X, x)       (lines 5-6)

which is the representer form with ``Z = X``, ``a = y - pi`` and
``Q = W^1/2 B^{-1} W^1/2 = (K + W^{-1})^{-1}``, applied through L (never formed, and without
dividing by W, which underflows for confidently classified points).
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import solve_triangular

from gpexplain._validation import as_feature_matrix, as_target
from gpexplain.kernels import as_kernel
from gpexplain.posterior.base import Posterior
from gpexplain.posterior.exact import cholesky_with_jitter

__all__ = ["LaplacePosterior"]


class LaplacePosterior(Posterior):
    """Latent (log-odds) posterior of a binary GP classifier under the Laplace approximation.

    Parameters
    ----------
    X : array-like of shape (n_train, n_features)
        Training inputs.
    y : array-like of shape (n_train,)
        Training labels as 0/1 (1 = the positive class, ``classes[1]``).
    pi : array-like of shape (n_train,)
        ``sigma(f_hat)`` at the posterior mode, each in [0, 1] (a confidently classified
        row rounds to 0 or 1: its W is 0 and it drops out of Q, as in scikit-learn).
    kernel : gpexplain kernel or gpytorch.kernels.Kernel
        Prior covariance of the latent function.
    classes : array-like of shape (2,), optional
        The class labels, negative first (default ``[0, 1]``).
    feature_names : sequence of str, optional

    Attributes
    ----------
    link : str
        ``"logit"``: explanations default to the probability of ``classes[1]``.
    alpha : ndarray (n_train,)
        ``y - pi``.
    sqrt_w : ndarray (n_train,)
        ``W^1/2 = sqrt(pi (1 - pi))``.
    cholesky : ndarray (n_train, n_train)
        Lower Cholesky factor of B.

    Raises
    ------
    ValueError
        Labels other than 0/1, ``pi`` outside [0, 1], shapes that do not match.
    """

    link = "logit"

    def __init__(self, X, y, pi, kernel, classes=None, feature_names=None):
        X, names = as_feature_matrix(X, "X", feature_names)
        y = as_target(y, X.shape[0])
        pi = as_target(pi, X.shape[0], "pi")
        if not np.all((y == 0) | (y == 1)):
            raise ValueError("y must hold 0/1 labels (1 = the positive class).")
        if not np.all((pi >= 0) & (pi <= 1)):
            raise ValueError("pi must lie in [0, 1] (sigma at the mode).")
        self.kernel = as_kernel(kernel)
        self.train_inputs, self.feature_names, self.mean = X, names, 0.0
        self.classes = np.asarray([0, 1] if classes is None else classes)
        self.alpha = y - pi
        self.sqrt_w = np.sqrt(pi * (1.0 - pi))
        B = self.sqrt_w[:, None] * self.kernel(X, X) * self.sqrt_w[None, :]
        B[np.diag_indices_from(B)] += 1.0
        self.cholesky, _ = cholesky_with_jitter(B)

    def __repr__(self) -> str:
        n, d = self.train_inputs.shape
        return f"LaplacePosterior(n_train={n}, n_features={d}, kernel={self.kernel!r})"

    def _whiten(self, cross: np.ndarray) -> np.ndarray:
        """``L^{-1} W^1/2 cross^T`` as (..., m, n_train)."""
        flat = cross.reshape(-1, cross.shape[-1]) * self.sqrt_w[None, :]
        solved = solve_triangular(self.cholesky, flat.T, lower=True, check_finite=False)
        return np.moveaxis(solved.reshape((-1,) + cross.shape[:-1]), 0, -1)

    def quadratic_form(self, left: np.ndarray, right: np.ndarray | None = None) -> np.ndarray:
        """``left W^1/2 B^{-1} W^1/2 right^T``, a Gram matrix (sum of squares) for one side."""
        W_left = self._whiten(left)
        W_right = W_left if right is None else self._whiten(right)
        return W_left @ np.swapaxes(W_right, -1, -2)
