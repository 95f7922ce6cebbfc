"""The last step every explanation path shares: check the numbers, build the ``Attribution``,
measure completeness (used by the Gaussian driver and by the link evaluators)."""

from __future__ import annotations

import numpy as np

from gpexplain._validation import check_finite_result
from gpexplain.accuracy import warn_if_incomplete
from gpexplain.attribution import Attribution
from gpexplain.functionals.base import LinearFunctional

__all__ = ["finished_attribution"]


def finished_attribution(
    caller: str,
    functional: LinearFunctional,
    X: np.ndarray,
    *,
    mean: np.ndarray,
    cov: np.ndarray | None,
    prediction: np.ndarray,
    baseline_prediction: float | None,
    feature_names: list[str],
    method: str,
    difference_variance: np.ndarray | None,
    check_completeness: bool,
    posterior=None,
) -> Attribution:
    """The ``Attribution`` of ``functional`` at the validated query points X.

    Parameters
    ----------
    caller : str
        Public function name used in error messages and warnings.
    functional : LinearFunctional
        Supplies the explained inputs (``explained_inputs``) and the baseline.
    X : ndarray (n_points, n_features)
    mean : ndarray (n_points, D)
    cov : ndarray (n_points, D, D) or None
    prediction : ndarray (n_points,)
    baseline_prediction : float or None
    feature_names : list of str
    method : str
    difference_variance : ndarray (n_points,) or None
    check_completeness : bool
        Measure completeness (``gpexplain.accuracy.warn_if_incomplete``) on the result.
    posterior : Posterior, optional
        Passed to ``warn_if_incomplete`` (it scales the tolerance).

    Raises
    ------
    FloatingPointError
        A non-finite mean, covariance, prediction or difference variance (never returned).

    Warns
    -----
    gpexplain.CompletenessWarning
        ``check_completeness`` and the result misses completeness (measured gaps stated).
    """
    check_finite_result(caller, mean, cov, prediction, difference_variance)
    attribution = Attribution(
        mean=mean,
        cov=cov,
        X=functional.explained_inputs(X),
        prediction=prediction,
        baseline=functional.baseline,
        baseline_prediction=baseline_prediction,
        feature_names=feature_names,
        method=method,
        difference_variance=difference_variance,
    )
    if check_completeness:  # accuracy is measured on every result, never assumed
        warn_if_incomplete(attribution, caller, posterior=posterior)
    return attribution
