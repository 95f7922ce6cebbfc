"""``predict`` of the estimators whose fitted model is a posterior (``posterior_``, ``noise_``)."""

from __future__ import annotations

import numpy as np
from sklearn.utils.validation import check_is_fitted

__all__ = ["PosteriorPredictMixin"]


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
