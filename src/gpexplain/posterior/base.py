"""The representer form every Gaussian posterior over f is written in, and what it offers.

A posterior over the latent function f is written as

    mean  m(x)     = m0 + k(x, Z) a
    cov   c(x, x') = k(x, x') - k(x, Z) Q k(Z, x')

so that any linear functional L of f is Gaussian with ``E[L f] = L m0 + (L k(., Z)) a`` and
``Cov[L1 f, L2 f] = L1 L2' k - (L1 k(., Z)) Q (L2 k(., Z))^T`` (DESIGN.md). A concrete
posterior supplies ``Z`` (``train_inputs``), ``a`` (``alpha``), the constant ``m0`` (``mean``)
and the quadratic form of ``Q`` (``quadratic_form``); everything else (prediction, the
variance of a difference, input checks) is shared here, and the explanations only ever use
this interface.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Protocol, runtime_checkable

import numpy as np

from gpexplain._validation import (
    as_feature_matrix,
    check_feature_count,
    check_feature_names,
    check_finite_result,
    check_within_reach,
)
from gpexplain.parallel import default_chunk_size, map_chunks

__all__ = ["Posterior", "PosteriorProtocol"]


@runtime_checkable
class PosteriorProtocol(Protocol):
    """What an explanation may ask of any posterior over f: one Gaussian (``Posterior``) or a
    finite mixture of them (``MixturePosterior``), which has no single representer form.

    Wrappers take any object satisfying this (checked by ``tests/contracts``); the driver asks
    a ``Posterior`` for its representer form and a mixture for its ``components``.

    Attributes
    ----------
    feature_names : list of str
    n_features : int
    data_inputs : ndarray (n_data, n_features)
        The training inputs (statistics such as a "mean" baseline are taken over them).
    """

    feature_names: list[str]

    @property
    def n_features(self) -> int: ...

    @property
    def data_inputs(self) -> np.ndarray: ...

    def check_inputs(self, X, name: str = "X") -> np.ndarray:
        """Query points as float64 (n, n_features), checked against the features."""

    def predict_mean(self, X) -> np.ndarray:
        """Posterior mean of f at X, (n_points,)."""

    def predict(self, X, return_cov: bool = False):
        """Posterior mean and variance (or covariance) of f at X."""

    def difference_variance(self, X, baseline: np.ndarray) -> np.ndarray:
        """``Var[f(x) - mean_b f(xt_b)]`` for each row of X, (n_points,)."""


class Posterior(ABC):
    """Gaussian posterior over a latent function in representer form (abstract).

    Attributes (set by subclasses)
    ------------------------------
    kernel : gpexplain kernel
        Prior covariance k, with ``__call__(X1, X2)``, ``diag(X)`` and ``torch_kernel``.
    train_inputs : ndarray (n_basis, n_features)
        Z: training inputs (exact GP) or inducing points (sparse GP).
    alpha : ndarray (n_basis,)
        a in ``m(x) = m0 + k(x, Z) a``.
    mean : float
        Constant prior mean m0.
    feature_names : list of str
    """

    kernel: object
    train_inputs: np.ndarray
    alpha: np.ndarray
    mean: float
    feature_names: list[str]

    #: ``gx.save`` saves a posterior as the tree of its attributes (``gpexplain.persistence``,
    #: which cannot import this layer to ask ``isinstance``).
    _save_kind = "model"

    @abstractmethod
    def quadratic_form(self, left: np.ndarray, right: np.ndarray | None = None) -> np.ndarray:
        """``left Q right^T``, batched over leading axes.

        Parameters
        ----------
        left : ndarray (..., m, n_basis)
        right : ndarray (..., k, n_basis), optional
            Defaults to ``left`` (and the result is then computed as a Gram matrix where the
            posterior allows, so that variances are not lost to cancellation).

        Returns
        -------
        ndarray (..., m, k)
        """

    @property
    def n_features(self) -> int:
        return self.train_inputs.shape[1]

    @property
    def data_inputs(self) -> np.ndarray:
        """The inputs the model was trained on, (n_data, n_features).

        What data-dependent baselines ("mean", "median") summarise. Equal to ``train_inputs``
        for an exact GP; a sparse posterior overrides it, since its Z are inducing points.
        """
        return self.train_inputs

    def check_inputs(self, X, name: str = "X") -> np.ndarray:
        """Validate query points against the training features; return float64 (n, n_features).

        Raises
        ------
        ValueError
            Wrong number of features, non-finite values, DataFrame columns that do not match
            the training feature names, or a value astronomically far from the training
            inputs (``gpexplain._validation.check_within_reach``).
        """
        values, names = as_feature_matrix(X, name)
        check_feature_count(values, self.n_features, name)
        check_feature_names(X, names, self.feature_names, name)
        check_within_reach(values, self.train_inputs, self.feature_names, name)
        return values

    def cross_kernel(self, X: np.ndarray) -> np.ndarray:
        """``Cov_prior[f(X), basis]``: ``k(X, Z)`` (n_points, n_basis), what ``alpha`` and
        ``quadratic_form`` contract with.

        A posterior whose cross covariance is not one kernel of x against Z (an output of a
        linear model of coregionalisation, ``gpexplain.posterior.lmc``) overrides this; every
        prediction and variance here goes through it.
        """
        return self.kernel(X, self.train_inputs)

    def _chunk_size(self) -> int:
        """Query rows per block, so that ``k(block, Z)`` stays within the memory budget."""
        return default_chunk_size(*self.train_inputs.shape)

    def predict_mean(self, X) -> np.ndarray:
        """Latent posterior mean ``m0 + k(X, Z) a`` only, shape (n_points,).

        Computed block by block (``gpexplain.parallel``): memory does not grow with n_points.
        """
        X = self.check_inputs(X)
        (mean,) = map_chunks(
            lambda rows: (self.mean + self.cross_kernel(rows) @ self.alpha,),
            X, self._chunk_size(),
        )
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
            Latent (noise-free) posterior variance, clipped at zero. The variances are
            computed block by block (memory does not grow with n_points); the covariance is
            (n_points, n_points) by nature.
        """
        X = self.check_inputs(X)
        if return_cov:
            cross = self.cross_kernel(X)
            mean = self.mean + cross @ self.alpha
            cov = self.kernel(X, X) - self.quadratic_form(cross)
            cov = 0.5 * (cov + cov.T)
            check_finite_result("predict", mean, cov)
            return mean, cov

        def moments(rows):
            cross = self.cross_kernel(rows)
            reduction = self.quadratic_form(cross[:, None, :])[:, 0, 0]
            variance = np.maximum(self.kernel.diag(rows) - reduction, 0.0)
            return self.mean + cross @ self.alpha, variance

        mean, var = map_chunks(moments, X, self._chunk_size())
        check_finite_result("predict", mean, var)
        return mean, var

    def difference_variance(self, X, baseline: np.ndarray) -> np.ndarray:
        """Posterior ``Var[f(x) - mean_b f(xt_b)]`` for each row of X, shape (n_points,).

        ``baseline`` is one point (n_features,) or a baseline distribution
        (n_baselines, n_features). This is what ``1^T Cov(attributions) 1`` must equal
        (completeness of the covariance). Computed as the prior variance of the difference
        minus the quadratic form of the averaged cross vector ``k(x, Z) - mean_b k(xt_b, Z)``.
        """
        X = self.check_inputs(X)
        baselines = np.atleast_2d(baseline)
        baseline_prior = self.kernel(baselines, baselines).mean()
        baseline_cross = self.cross_kernel(baselines).mean(axis=0)[None, :]

        def variance(rows):
            prior = (
                self.kernel.diag(rows) - 2.0 * self.kernel(rows, baselines).mean(axis=1)
                + baseline_prior
            )
            cross = self.cross_kernel(rows) - baseline_cross
            reduction = self.quadratic_form(cross[:, None, :])[:, 0, 0]
            return (np.maximum(prior - reduction, 0.0),)

        return map_chunks(variance, X, self._chunk_size())[0]
