"""The documented accuracy of explanations, checked on every result: ``CompletenessWarning``.

Every explanation with a completeness target (integrated gradients, Shapley values) must sum
to it: ``sum_i mean_i == prediction - baseline_prediction`` and ``1^T cov 1 ==
difference_variance`` (``Attribution.completeness_gap``), and its covariance must be positive
semi-definite. Closed forms and the graded Gauss-Legendre quadrature meet this to
``COMPLETENESS_RTOL`` relative to the size of what they sum to; low-order rules (trapezoid,
Simpson, right-hand sums), kernels with kinks under plain quadrature, or paths at the limits
of float64 may not. Then the result is still returned, but never quietly: a
``CompletenessWarning`` states the measured gaps.
"""

from __future__ import annotations

import warnings

import numpy as np

__all__ = [
    "COMPLETENESS_RTOL", "CompletenessWarning", "prediction_rounding", "warn_if_incomplete",
    "warn_if_sobol_inconsistent",
]

#: Documented completeness tolerance, relative to the size of what the attributions sum to,
#: the largest over the explained points: for the mean ``max(|prediction|,
#: |baseline_prediction|, sqrt(difference_variance))`` (and never below the prediction's own
#: rounding), for the variance ``difference_variance`` or, when larger, the prior variance
#: of ``f(x) - f(baseline)``. Not relative to the attributions themselves: on paths many
#: lengthscales long they grow and cancel (variances O(|x - baseline| / lengthscale)), and
#: float64 then cannot keep their sum to 1e-8, which the warning says. The smallest
#: covariance eigenvalue must be above ``-COMPLETENESS_RTOL`` times the largest.
COMPLETENESS_RTOL = 1e-8


class CompletenessWarning(UserWarning):
    """An explanation misses completeness (or positive semi-definiteness) beyond
    ``COMPLETENESS_RTOL``; the message gives the measured gaps and what to change."""


def _relative(gap: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """Gap per point relative to the largest scale of the call (a point at the baseline has
    nothing of its own to be relative to)."""
    scale = np.full_like(scale, scale.max(initial=0.0))
    return np.divide(gap, scale, out=np.zeros_like(gap), where=scale > 0)


# The posterior mean m(x) = m0 + sum_n k(x, z_n) a_n is itself only known to about
# eps sum_n |k(x, z_n) a_n| (the terms cancel for ill-conditioned posteriors, e.g. additive
# GPs with small noise); a mean gap within this many times that is round-off, not a miss.
_ROUNDING_FACTOR = 16


def prediction_rounding(posterior, X: np.ndarray) -> np.ndarray:
    """``eps sum_n |k(x, z_n) a_n|`` per row of X: the rounding floor of the prediction."""
    terms = np.abs(posterior.cross_kernel(X)) @ np.abs(posterior.alpha)
    return np.finfo(float).eps * terms


def warn_if_incomplete(
    attribution, caller: str, rtol: float = COMPLETENESS_RTOL, posterior=None
) -> None:
    """Warn with the measured gaps when ``attribution`` is not complete to ``rtol``.

    Parameters
    ----------
    attribution : gpexplain.Attribution
        Checked only where it has targets: the mean when ``baseline_prediction`` is set, the
        covariance when ``cov`` and ``difference_variance`` are.
    caller : str
        Public function named in the message.
    rtol : float
        Relative tolerance (see ``COMPLETENESS_RTOL``).
    posterior : gpexplain.posterior.Posterior, optional
        When given, a mean gap below the rounding floor of the prediction itself
        (``prediction_rounding``, times 16, at the explained points and the baseline) is
        not reported: no explanation can be more complete than the prediction is accurate;
        and the variance gap is relative to the prior variance of ``f(x) - f(baseline)``
        when that is larger than the posterior's.

    Warns
    -----
    CompletenessWarning
        With the number of points concerned, the largest absolute and relative gaps of the
        mean and of the variance, and the most negative covariance eigenvalue.
    """
    failures = []
    bad = np.zeros(attribution.n_points, dtype=bool)

    def measure(total, target, scale, what, floor=None):
        gap = np.abs(total - target)
        relative = _relative(gap, scale)
        if floor is not None and np.any(relative > rtol):
            relative = np.where(gap <= floor(relative > rtol), 0.0, relative)
        if np.any(relative > rtol):
            bad[:] |= relative > rtol
            failures.append(f"{what} up to {gap.max():.3g} ({relative.max():.2g} relative)")

    if attribution.baseline_prediction is not None:
        target = attribution.prediction - attribution.baseline_prediction
        scale = np.maximum(np.abs(attribution.prediction), abs(attribution.baseline_prediction))
        if attribution.difference_variance is not None:
            scale = np.maximum(scale, np.sqrt(attribution.difference_variance))
        floor = None
        if posterior is not None:
            def floor(rows):
                points = attribution.X if attribution.baseline is None else np.vstack(
                    [attribution.X, np.atleast_2d(attribution.baseline)])
                rounding = prediction_rounding(posterior, points)
                own, base = rounding[: attribution.n_points], rounding[attribution.n_points:]
                return np.where(rows, _ROUNDING_FACTOR * (own + base.max(initial=0.0)), 0.0)
        measure(attribution.mean.sum(axis=1), target, scale,
                "mean: sum of attributions minus (prediction - baseline prediction)", floor)
    if attribution.cov is not None and attribution.difference_variance is not None:
        target = attribution.difference_variance
        scale = target
        if posterior is not None and attribution.baseline is not None:
            # The posterior variance is the prior's minus the data's share: it is known to
            # round-off of the prior variance of f(x) - f(baseline), not of its own size.
            baseline_diag = posterior.kernel.diag(np.atleast_2d(attribution.baseline)).max()
            scale = np.maximum(target, posterior.kernel.diag(attribution.X) + baseline_diag)
        measure(attribution.cov.sum(axis=(1, 2)), target, scale,
                "variance: 1^T cov 1 minus Var[f(x) - f(baseline)]")
        eigenvalues = np.linalg.eigvalsh(attribution.cov)
        indefinite = eigenvalues[:, 0] < -rtol * np.abs(eigenvalues).max(axis=1)
        if np.any(indefinite):
            bad |= indefinite
            failures.append(f"covariance eigenvalue down to {eigenvalues[:, 0].min():.3g}")
    if failures:
        warnings.warn(
            f"{caller} ({attribution.method}) misses completeness beyond the documented "
            f"relative tolerance {rtol:g} at {int(bad.sum())} of {attribution.n_points} "
            f"points: {'; '.join(failures)}. For quadrature, raise n_steps or use "
            "rule='gauss-legendre'; otherwise the path is beyond what float64 resolves "
            "(rescale the inputs or move the baseline closer).",
            CompletenessWarning,
            stacklevel=4,
        )


def warn_if_sobol_inconsistent(
    result, caller: str, rounding: float, rtol: float = COMPLETENESS_RTOL
) -> None:
    """Warn with the measured gaps when the indices of the posterior mean in ``result`` break
    the identities of a variance decomposition by more than ``rtol``.

    Every function's Sobol indices satisfy ``0 <= first_order_i <= shapley_effects_i <=
    total_i <= Var``, ``sum_i first_order_i <= Var <= sum_i total_i`` and ``sum_i
    shapley_effects_i == Var`` (Owen 2014). The closed forms are quadratic forms ``a^T H a``
    in the representer weights ``a``; for a nearly interpolating GP (e.g. scikit-learn's
    default ``alpha=1e-10``) ``|a|`` reaches 1e6-1e10 and their rounding, about ``eps
    s2^2 |a|_1^2``, swamps the O(1) result (``global_sensitivity`` then recomputes them in
    binary128, whose eps is 1.9e-34). A result that still breaks them is returned, but never
    quietly.

    Parameters
    ----------
    result : gpexplain.GlobalSensitivity
    caller : str
        Public function named in the message.
    rounding : float
        The rounding scale of the quadratic forms (``eps s2^2 |a|_1^2``), reported as the
        likely cause.
    rtol : float
        Tolerance relative to the variance of the posterior mean (or, when that is smaller,
        to its posterior expectation: a mean that is nearly constant has no scale of its
        own).

    Warns
    -----
    CompletenessWarning
        With every identity missed, its largest gap (absolute and relative) and the feature
        concerned, and the rounding scale.
    """
    first, shapley, total = result.first_order, result.shapley_effects, result.total
    variance = result.total_variance
    scale = max(variance, result.expected_total_variance, 0.0)
    names = result.feature_names
    checks = {
        "first order below 0": -first,
        "first order above Shapley effect": first - shapley,
        "Shapley effect above total": shapley - total,
        "total above the variance": total - variance,
    }
    failures = []
    for what, excess in checks.items():
        worst = int(np.argmax(excess))
        if excess[worst] > rtol * scale:
            failures.append(f"{what} by up to {excess[worst]:.3g} "
                            f"({excess[worst] / scale:.2g} relative, {names[worst]!r})")
    for what, gap in (
        ("sum of Shapley effects minus the variance", abs(shapley.sum() - variance)),
        ("sum of first order above the variance", first.sum() - variance),
        ("variance above the sum of totals", variance - total.sum()),
    ):
        if gap > rtol * scale:
            failures.append(f"{what} {gap:.3g} ({gap / scale:.2g} relative)")
    if failures:
        warnings.warn(
            f"{caller} ({result.method}): the indices of the posterior mean break the "
            f"identities of a variance decomposition beyond the documented relative tolerance "
            f"{rtol:g} of the variance {variance:.6g}: {'; '.join(failures)}. Their quadratic "
            f"forms round at about {rounding:.3g} (the representer weights a = K^-1 y are "
            "large: a nearly interpolating GP); give the model a larger noise variance (e.g. "
            "scikit-learn's alpha) to get indices accurate to that tolerance.",
            CompletenessWarning,
            stacklevel=3,
        )
