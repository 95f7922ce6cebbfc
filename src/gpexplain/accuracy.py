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

__all__ = ["COMPLETENESS_RTOL", "CompletenessWarning", "warn_if_incomplete"]

#: Documented completeness tolerance, relative to the size of what the attributions sum to,
#: the largest over the explained points: for the mean ``max(|prediction|,
#: |baseline_prediction|, sqrt(difference_variance))``, for the variance
#: ``difference_variance``. Not relative to the attributions themselves: on paths many
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


def warn_if_incomplete(attribution, caller: str, rtol: float = COMPLETENESS_RTOL) -> None:
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

    Warns
    -----
    CompletenessWarning
        With the number of points concerned, the largest absolute and relative gaps of the
        mean and of the variance, and the most negative covariance eigenvalue.
    """
    failures = []
    bad = np.zeros(attribution.n_points, dtype=bool)

    def measure(total, target, scale, what):
        gap = np.abs(total - target)
        relative = _relative(gap, scale)
        if np.any(relative > rtol):
            bad[:] |= relative > rtol
            failures.append(f"{what} up to {gap.max():.3g} ({relative.max():.2g} relative)")

    if attribution.baseline_prediction is not None:
        target = attribution.prediction - attribution.baseline_prediction
        scale = np.maximum(np.abs(attribution.prediction), abs(attribution.baseline_prediction))
        if attribution.difference_variance is not None:
            scale = np.maximum(scale, np.sqrt(attribution.difference_variance))
        measure(attribution.mean.sum(axis=1), target, scale,
                "mean: sum of attributions minus (prediction - baseline prediction)")
    if attribution.cov is not None and attribution.difference_variance is not None:
        target = attribution.difference_variance
        measure(attribution.cov.sum(axis=(1, 2)), target, target,
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
