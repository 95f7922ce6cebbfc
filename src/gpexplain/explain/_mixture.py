"""Attributions of a mixture of posteriors: exact mean and covariance of the mixture.

An attribution is a linear functional L of f. Under a mixture ``f ~ sum_r w_r GP_r`` it is a
mixture of the component Gaussians ``N(mu_r, Sigma_r)``, whose exact first two moments are
(law of total expectation and of total covariance)::

    mean = sum_r w_r mu_r
    cov  = sum_r w_r Sigma_r + sum_r w_r (mu_r - mean)(mu_r - mean)^T

Completeness carries over: if every component has ``1^T mu_r = m_r(x) - m_r(xt)`` and
``1^T Sigma_r 1 = Var_r[f(x) - f(xt)]``, then ``1^T mean`` is the mixture's mean difference and
``1^T cov 1 = sum_r w_r Var_r + sum_r w_r (d_r - d)^2`` is the mixture's
``Var[f(x) - f(xt)]`` (``d_r = m_r(x) - m_r(xt)``). Used for the marginalised random-feature
GP of Butler et al. (2024, Sec. 5.5).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from gpexplain._validation import check_finite_result
from gpexplain.attribution import Attribution
from gpexplain.posterior.mixture import check_mixture_weights, mixture_moments

__all__ = ["mixture_attribution"]


def _check_compatible(attributions: list[Attribution]) -> None:
    """Raise ValueError unless all attributions explain the same points the same way."""
    first = attributions[0]
    for index, other in enumerate(attributions[1:], start=1):
        problems = []
        if other.mean.shape != first.mean.shape or not np.array_equal(other.X, first.X):
            problems.append("explained points X")
        if other.feature_names != first.feature_names:
            problems.append("feature names")
        if (other.baseline is None) != (first.baseline is None) or (
            first.baseline is not None and not np.array_equal(other.baseline, first.baseline)
        ):
            problems.append("baseline")
        if (other.cov is None) != (first.cov is None):
            problems.append("presence of a covariance")
        if (other.difference_variance is None) != (first.difference_variance is None):
            problems.append("presence of difference_variance")
        if (other.baseline_prediction is None) != (first.baseline_prediction is None):
            problems.append("presence of baseline_prediction")
        if problems:
            raise ValueError(
                f"attributions[{index}] differs from attributions[0] in: "
                + ", ".join(problems)
                + "; a mixture combines explanations of the same points with the same baseline."
            )


def mixture_attribution(attributions: Sequence[Attribution], weights=None) -> Attribution:
    """Combine per-component attributions into the exact moments of their mixture.

    Parameters
    ----------
    attributions : sequence of Attribution
        One per mixture component, all of the same points, features and baseline (and all
        with, or all without, a covariance).
    weights : array-like of shape (n_components,), optional
        Non-negative mixture weights summing to 1; equal weights by default.

    Returns
    -------
    Attribution
        ``mean`` (n_points, n_features), ``cov`` (n_points, n_features, n_features) or None,
        ``prediction`` and ``baseline_prediction`` the mixture means, ``difference_variance``
        the mixture's ``Var[f(x) - f(xt)]`` (law of total variance).

    Raises
    ------
    TypeError
        Empty input or an element that is not an ``Attribution``.
    ValueError
        Attributions of different points/features/baselines, or bad weights.
    """
    attributions = list(attributions)
    if not attributions:
        raise TypeError("attributions must be a non-empty sequence of Attribution objects.")
    for index, attribution in enumerate(attributions):
        if not isinstance(attribution, Attribution):
            raise TypeError(
                f"attributions[{index}] is a {type(attribution).__name__}, not an Attribution."
            )
    _check_compatible(attributions)
    weights = check_mixture_weights(weights, len(attributions))
    first = attributions[0]

    means = np.stack([a.mean for a in attributions])  # (R, p, D)
    mean = np.einsum("r,rpi->pi", weights, means)
    cov = None
    if first.cov is not None:
        spread = means - mean[None]
        cov = np.einsum("r,rpij->pij", weights, np.stack([a.cov for a in attributions]))
        cov += np.einsum("r,rpi,rpj->pij", weights, spread, spread)
        cov = 0.5 * (cov + np.swapaxes(cov, 1, 2))

    predictions = np.stack([a.prediction for a in attributions])  # (R, p)
    prediction = weights @ predictions
    baseline_prediction = None
    difference_variance = None
    if first.baseline_prediction is not None:
        baseline_predictions = np.array([a.baseline_prediction for a in attributions])
        baseline_prediction = float(weights @ baseline_predictions)
        if first.difference_variance is not None:
            _, difference_variance = mixture_moments(
                weights,
                predictions - baseline_predictions[:, None],
                np.stack([a.difference_variance for a in attributions]),
            )
    elif first.difference_variance is not None:
        raise ValueError(
            "attributions carry difference_variance but no baseline_prediction; the mixture "
            "variance of f(x) - f(baseline) needs both."
        )
    check_finite_result("mixture_attribution", mean, cov, prediction, difference_variance)
    methods = sorted({a.method for a in attributions})
    return Attribution(
        mean=mean,
        cov=cov,
        X=first.X,
        prediction=prediction,
        baseline=first.baseline,
        baseline_prediction=baseline_prediction,
        feature_names=list(first.feature_names),
        method=f"{' / '.join(methods)}, mixture of {len(attributions)} components",
        difference_variance=difference_variance,
    )
