"""Sparse variational GP (SVGP) posterior in representer form.

With inducing points Z, prior ``u = f(Z) ~ N(m0, Kzz)`` and a Gaussian variational
distribution ``q(u) = N(m, S)``, the approximate posterior ``q(f) = int p(f | u) q(u) du`` is
a GP with (Titsias 2009; Hensman et al. 2013; Seitz 2022, Sec. 2.2, eq. 7 as corrected in
docs/errata.md)

    mean  m(x)     = m0 + k(x, Z) Kzz^{-1} (m - m0)
    cov   c(x, x') = k(x, x') - k(x, Z) Kzz^{-1} (Kzz - S) Kzz^{-1} k(Z, x')

which is the representer form with ``a = Kzz^{-1} (m - m0)`` and
``Q = Kzz^{-1} - Kzz^{-1} S Kzz^{-1}``. In the whitened parametrisation (``u = m0 + Lz v``,
``Lz Lz^T = Kzz``, ``q(v) = N(m_v, S_v)``, GPyTorch's ``VariationalStrategy``) the same
posterior has ``a = Lz^{-T} m_v`` and ``Q = Lz^{-T} (I - S_v) Lz^{-1}``. Both are applied
through the Cholesky factor of Kzz and a square root of S; nothing is inverted explicitly.
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy.linalg import solve_triangular

from gpexplain._torch import to_numpy
from gpexplain._validation import as_feature_matrix, check_feature_count
from gpexplain.kernels import as_kernel
from gpexplain.posterior.base import Posterior
from gpexplain.posterior.exact import cholesky_with_jitter

__all__ = ["VariationalPosterior"]

# Relative tolerances on the variational covariance: asymmetry and negative eigenvalues this
# small (times its largest eigenvalue) are round-off from a float32/float64 factorisation.
_SYMMETRY_TOLERANCE = 1e-8
_PSD_TOLERANCE = 1e-8


def _psd_square_root(S: np.ndarray, name: str) -> np.ndarray:
    """A square root R with ``R R^T = S`` of a symmetric PSD matrix (possibly singular).

    An eigendecomposition, not a Cholesky factor, because an optimal S can be singular.

    Raises
    ------
    ValueError
        S not symmetric or with a clearly negative eigenvalue (relative tolerance 1e-8).
    """
    scale = max(float(np.max(np.abs(S))), np.finfo(float).tiny)
    asymmetry = float(np.max(np.abs(S - S.T)))
    if asymmetry > _SYMMETRY_TOLERANCE * scale:
        raise ValueError(
            f"{name} must be symmetric; its largest |S - S^T| entry is {asymmetry:.3g} "
            f"(relative {asymmetry / scale:.3g})."
        )
    eigenvalues, eigenvectors = np.linalg.eigh(0.5 * (S + S.T))
    if eigenvalues[0] < -_PSD_TOLERANCE * max(eigenvalues[-1], 0.0) or eigenvalues[-1] < 0:
        raise ValueError(
            f"{name} must be positive semi-definite (a covariance matrix); its smallest "
            f"eigenvalue is {eigenvalues[0]:.3g} against a largest of {eigenvalues[-1]:.3g}."
        )
    return eigenvectors * np.sqrt(np.clip(eigenvalues, 0.0, None))


class VariationalPosterior(Posterior):
    """Posterior of a sparse variational GP with Gaussian q(u), in representer form.

    Parameters
    ----------
    inducing_points : array-like of shape (n_inducing, n_features)
        Z, in the units of the inputs.
    variational_mean : array-like of shape (n_inducing,)
        Unwhitened: the mean m of ``q(u)``, ``u = f(Z)`` (prior mean included, units of y).
        Whitened: the mean ``m_v`` of ``q(v)``, ``u = m0 + Lz v`` (dimensionless).
    variational_covariance : array-like of shape (n_inducing, n_inducing)
        S (unwhitened, squared units of y) or ``S_v`` (whitened); symmetric positive
        semi-definite.
    kernel : gpexplain kernel or gpytorch.kernels.Kernel
        Prior covariance k (``gx.kernels.RBF`` gives closed-form explanations).
    mean : float, default 0.0
        Constant prior mean m0.
    whitened : bool, default False
        Whether ``variational_mean`` and ``variational_covariance`` are whitened.
    jitter : float, default 0.0
        Fixed diagonal jitter that the model adds to Kzz, part of its definition (GPyTorch's
        variational strategies add ``jitter_val``, 1e-6 in float64); Kzz below means
        ``k(Z, Z) + jitter I``. More jitter is added (with a warning) only if Kzz is still not
        numerically positive definite.
    data_inputs : array-like of shape (n_data, n_features), optional
        The training inputs, summarised by the "mean" and "median" baselines. Without them
        those baselines summarise the inducing points instead, with a warning here.
    feature_names : sequence of str, optional
        Used when ``inducing_points`` carries no column names.

    Attributes
    ----------
    train_inputs : ndarray (n_inducing, n_features)
        Z.
    alpha : ndarray (n_inducing,)
        ``a = Kzz^{-1} (m - m0)`` (unwhitened) or ``Lz^{-T} m_v`` (whitened).
    cholesky : ndarray (n_inducing, n_inducing)
        Lz, the lower Cholesky factor of Kzz (with the jitter).
    variational_root : ndarray (n_inducing, n_inducing)
        R with ``R R^T`` equal to the variational covariance given.

    Raises
    ------
    ValueError
        Shapes that do not agree (argument named), non-finite values, a variational
        covariance that is not symmetric PSD, a negative jitter, or a Kzz that is not
        positive definite even with jitter.

    Notes
    -----
    Seitz (2022) eqs. 7 and 21 misprint the predictive covariance; the form implemented is
    ``K** - K*Z Kzz^{-1} (Kzz - S) Kzz^{-1} KZ*`` (docs/errata.md). Q is indefinite in general (S
    can
    exceed Kzz in some directions), so variances from ``quadratic_form`` can fall below zero
    by round-off; ``predict`` clips them at zero.
    """

    def __init__(
        self,
        inducing_points,
        variational_mean,
        variational_covariance,
        kernel,
        mean: float = 0.0,
        *,
        whitened: bool = False,
        jitter: float = 0.0,
        data_inputs=None,
        feature_names=None,
    ):
        Z, names = as_feature_matrix(inducing_points, "inducing_points", feature_names)
        n_inducing = Z.shape[0]
        m = np.asarray(to_numpy(variational_mean), dtype=np.float64)
        if m.shape != (n_inducing,):
            raise ValueError(
                f"variational_mean must have shape ({n_inducing},), one value per inducing "
                f"point, got {m.shape}."
            )
        S = np.asarray(to_numpy(variational_covariance), dtype=np.float64)
        if S.shape != (n_inducing, n_inducing):
            raise ValueError(
                f"variational_covariance must have shape ({n_inducing}, {n_inducing}), got "
                f"{S.shape}."
            )
        for label, value in (("variational_mean", m), ("variational_covariance", S)):
            if not np.all(np.isfinite(value)):
                raise ValueError(f"{label} has non-finite entries.")
        mean, jitter = float(mean), float(jitter)
        if not np.isfinite(mean):
            raise ValueError(f"mean must be a finite constant, got {mean}.")
        if not np.isfinite(jitter) or jitter < 0:
            raise ValueError(f"jitter must be a finite value >= 0, got {jitter}.")
        if data_inputs is None:
            warnings.warn(
                "no data_inputs given: the 'mean' and 'median' baselines will summarise the "
                "inducing points, not the training data; pass data_inputs=X_train.",
                UserWarning,
                stacklevel=2,
            )
            self._data_inputs = Z
        else:
            self._data_inputs, _ = as_feature_matrix(data_inputs, "data_inputs")
            check_feature_count(self._data_inputs, Z.shape[1], "data_inputs")

        self.kernel = as_kernel(kernel)
        self.train_inputs = Z
        self.mean = mean
        self.whitened = bool(whitened)
        self.variational_mean = m
        self.variational_covariance = S
        self.variational_root = _psd_square_root(S, "variational_covariance")
        self.jitter = jitter
        self.feature_names = names
        gram = self.kernel(Z, Z)
        gram[np.diag_indices_from(gram)] += jitter
        try:
            self.cholesky, extra_jitter = cholesky_with_jitter(gram)
        except np.linalg.LinAlgError as error:
            raise ValueError(f"k(inducing_points, inducing_points): {error}") from None
        self.jitter += extra_jitter
        # a = Lz^{-T} Lz^{-1} (m - m0) unwhitened, Lz^{-T} m_v whitened.
        whitened_mean = m if self.whitened else self._solve_lower(m - mean)
        self.alpha = solve_triangular(self.cholesky, whitened_mean, lower=True, trans="T")

    def __repr__(self) -> str:
        n, d = self.train_inputs.shape
        return (
            f"VariationalPosterior(n_inducing={n}, n_features={d}, kernel={self.kernel!r}, "
            f"whitened={self.whitened})"
        )

    @property
    def data_inputs(self) -> np.ndarray:
        """The training inputs (n_data, n_features), or Z when none were given."""
        return self._data_inputs

    def _solve_lower(self, rhs: np.ndarray) -> np.ndarray:
        return solve_triangular(self.cholesky, rhs, lower=True, check_finite=False)

    def _factors(self, cross: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Both square-root factors of ``cross Q cross^T`` for ``cross`` (..., n_inducing).

        Returns ``W = (Lz^{-1} cross^T)^T`` and ``V = (R^T B)^T`` with ``B = Lz^{-T} W^T``
        (unwhitened: ``B = Kzz^{-1} cross^T``, ``R R^T = S``) or ``B = W^T`` (whitened,
        ``R R^T = S_v``), each of shape (..., n_inducing), so that
        ``cross Q cross'^T = W W'^T - V V'^T``.
        """
        flat = cross.reshape(-1, cross.shape[-1]).T  # (n_inducing, batch)
        whitened = self._solve_lower(flat)
        projected = (
            whitened
            if self.whitened
            else solve_triangular(self.cholesky, whitened, lower=True, trans="T")
        )
        reduced = self.variational_root.T @ projected
        return whitened.T.reshape(cross.shape), reduced.T.reshape(cross.shape)

    def quadratic_form(self, left: np.ndarray, right: np.ndarray | None = None) -> np.ndarray:
        """``left Q right^T``, batched: the Kzz term minus the variational-covariance term.

        ``left`` is (..., m, n_inducing) and ``right`` (..., k, n_inducing); returns
        (..., m, k). Each term is a product of square-root factors, so with ``right`` omitted
        both are Gram matrices; their difference is not sign-definite in general.
        """
        W_left, V_left = self._factors(left)
        W_right, V_right = (W_left, V_left) if right is None else self._factors(right)
        return W_left @ np.swapaxes(W_right, -1, -2) - V_left @ np.swapaxes(V_right, -1, -2)
