"""Probability-level gradients: the posterior mean and covariance of ``grad p(x)``.

``E[grad p(x)]`` and ``Cov[grad p(x)]`` by the link's expectations (Stein's lemma,
``gpexplain.links``); the covariance where the link gives one (its exact form; None for
Taylor). Gradient x input weighs them by ``w`` as in the Gaussian case.
"""

from __future__ import annotations

import numpy as np

from gpexplain.explain.linked.driver import EVALUATORS, LinkedContext, LinkedResult
from gpexplain.functionals.gradient import Gradient

__all__ = ["expected_gradients"]


def expected_gradients(context: LinkedContext, X: np.ndarray, functional: Gradient,
                       return_cov: bool) -> LinkedResult:
    """Mean ``E[grad p(x)]`` (n, d), covariance ``Cov[grad p(x)]`` (n, d, d) or None, and
    ``E[p]`` at the functional's baseline, if it has one."""
    linked = context.linked
    full = return_cov and linked.link.gives_covariance
    prediction, mean, cov = context.at(X, full)
    weights = functional.output_weights(X)
    if weights is not None:
        mean = weights * mean
        cov = None if cov is None else weights[:, :, None] * cov * weights[:, None, :]
    baseline_prediction = None
    if functional.baseline is not None:
        baseline_prediction = float(context.at(functional.baseline[None, :])[0][0])
    return LinkedResult(prediction, mean, cov, baseline_prediction,
                        f"expected gradient of p ({linked.describe()})")


EVALUATORS.register(Gradient.__name__, expected_gradients)
