"""``predict`` of the estimators whose fitted model is a posterior (``posterior_``, ``noise_``)."""

from __future__ import annotations

import numpy as np
from sklearn.utils.validation import check_is_fitted

from gpexplain._threads import native_threads
from gpexplain.models._params import ValidatedEstimator

__all__ = ["PosteriorEstimator", "PosteriorPredictMixin"]


class PosteriorPredictMixin:
    """Predictions read off ``self.posterior_`` (original units) and ``self.noise_``."""

    def predict(self, X, return_std: bool = False, noisy: bool = False):
        """Posterior predictive mean (and standard deviation) in the units of y.

        Parameters
        ----------
        X : array-like of shape (n_points, n_features), original units
        return_std : bool
            Also return the standard deviation (of the moment-matched mixture for a model
            marginalised over several posteriors).
        noisy : bool
            Include the noise variance ``noise_`` in the standard deviation (predicting a new
            observation rather than the latent function).

        Returns
        -------
        mean : ndarray (n_points,)
        std : ndarray (n_points,), only with ``return_std=True``

        Raises
        ------
        sklearn.exceptions.NotFittedError
            Before ``fit``.
        ValueError
            Wrong number of columns, non-finite values, or DataFrame columns that do not
            match the training names.
        """
        check_is_fitted(self, "posterior_")
        if not return_std:
            return self.posterior_.predict_mean(X)  # O(n) per point: no variance needed
        mean, var = self.posterior_.predict(X)
        return mean, np.sqrt(var + self.noise_ if noisy else var)


class PosteriorEstimator(ValidatedEstimator, PosteriorPredictMixin):
    """An estimator whose fitted model is a posterior (``posterior_``): one ``fit`` for all.

    ``fit`` validates the declared parameters and the data, then calls the estimator's
    ``_fit(X, y, names, callback)`` on float64 arrays.
    """

    def fit(self, X, y, *, callback=None):
        """Fit the model and build its posterior ``posterior_`` (original units of X and y).

        Parameters
        ----------
        X : array-like of shape (n_samples, n_features)
            NumPy, pandas (column names become feature names) or torch. At least 2 rows.
        y : array-like of shape (n_samples,)
        callback : callable(step, total), optional
            Called as the optimiser progresses, for a caller's progress bar; estimators
            display nothing themselves. Not called when nothing is optimised.

        Returns
        -------
        self

        Raises
        ------
        InvalidParameterError
            A constructor parameter out of its declared constraints (named).
        ValueError, TypeError
            Bad inputs (argument, row and column named).
        FitError
            The optimiser failed (from every starting point).
        """
        self._validate_params()
        X, y, names = self._validate_data(X, y)
        with native_threads(len(X)):
            self._fit(X, y, names, callback)
        return self

    def _fit(self, X, y, names, callback) -> None:
        raise NotImplementedError
