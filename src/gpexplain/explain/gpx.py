"""GPX's explanation: the posterior of a fitted ``GPXRegressor``'s local weights, or of its
feature contributions (Yoshikawa and Iwata, GPX, eq. 18), through the explanation driver.

``GPXRegressor.explain`` is this function. The estimator cannot import it (explanations sit
above estimators, DESIGN.md), so this module plugs it into the estimator class when it is
imported; ``gpexplain.explain`` imports it, and so does ``import gpexplain``.
"""

from __future__ import annotations

import numpy as np
from sklearn.utils.validation import check_is_fitted

from gpexplain.attribution import Attribution
from gpexplain.explain._driver import explain as explain_functional
from gpexplain.functionals.local_linear_weight import LocalLinearWeight
from gpexplain.models.gpx_regressor import GPXRegressor

__all__ = ["gpx_explanation"]


def gpx_explanation(
    model: GPXRegressor, X, Z=None, *, what: str = "contributions", return_cov: bool = True
) -> Attribution:
    """Posterior of a fitted GPX model's local weights or feature contributions at query rows.

    The weights ``w*`` are the linear functional ``d f / d z`` of the GP over ``(x, z)``
    (``LocalLinearWeight``), so the driver's generic formula gives their exact posterior.
    Parameters, returns and errors are those of ``GPXRegressor.explain``; ``model`` that is
    not a ``GPXRegressor`` raises ``TypeError``, an unfitted one ``NotFittedError``.
    """
    if not isinstance(model, GPXRegressor):
        raise TypeError(
            "GPX contributions and weights are those of a fitted gx.GPXRegressor (a locally "
            f"linear model), got {type(model).__name__}; use gx.integrated_gradients or "
            "gx.shapley_values for other models."
        )
    check_is_fitted(model)
    functional = LocalLinearWeight(  # checks ``what``
        model.X_train_.shape[1], what, feature_names=model.feature_names_in_
    )
    inputs = np.hstack(model._check_query(X, Z))
    return explain_functional(
        model.posterior_, inputs, functional, return_cov=return_cov,
        caller="GPXRegressor.explain",
    )


GPXRegressor._explanation = gpx_explanation
