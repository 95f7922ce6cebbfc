"""Probability-level integrated gradients: the path integral of the expected gradient.

    IG_k(x) = (x_k - xt_k) int_0^1 E[d_k p(xt + t (x - xt))] dt,

by Gauss-Legendre along the path, the node count doubled (16 .. 1024) until completeness,
``sum_k IG_k = E[p(x)] - E[p(xt)]``, holds to 1e-10 at every point (expectation and path
integral commute, so this is exact up to the rule; a warning reports any remaining gap).
With softmax by randomised QMC the expected gradient and E[p] are separate Monte Carlo
estimates, so the tolerance is widened by 10 standard errors (stated in ``method``); a
``CompletenessWarning`` reports any remaining gap.

The covariance (one baseline, a link that gives covariances): where the class probability is
a binary link of one Gaussian latent (``Link.binary_reduction``: logit, probit, and the
2-class softmax as the logistic of ``f_c - f_other``), exact by second-order Stein over pairs
of path nodes (``gpexplain.explain.linked.link_covariance``: its own node doubling until
``cov.sum((1, 2))`` equals ``Var(p(x) - p(xt))`` to 1e-9 relative, then completeness is
measured on the result); otherwise (softmax with C >= 3) the same Stein expansion with its
2C-dimensional expectations estimated by randomised QMC
(``gpexplain.explain.linked.softmax_covariance``; standard error in ``method``, completeness
checked within it). The Taylor approximation returns ``cov=None``; several baselines with
``return_cov=True`` are refused (pairs of paths would couple).
"""

from __future__ import annotations

import warnings

import numpy as np

from gpexplain.accuracy import CompletenessWarning
from gpexplain.explain.linked.driver import EVALUATORS, LinkedContext, LinkedResult
from gpexplain.explain.linked.link_covariance import LatentTerm, integrated_gradient_covariance
from gpexplain.explain.linked.softmax_covariance import softmax_integrated_gradient_covariance
from gpexplain.functionals.integrated_gradient import IntegratedGradient

__all__ = ["COMPLETENESS_TOLERANCE", "integrated_gradients_of_probability"]

COMPLETENESS_TOLERANCE = 1e-10
_PATH_NODES = (16, 32, 64, 128, 256, 512, 1024)


def integrated_gradients_of_probability(context: LinkedContext, X: np.ndarray,
                                        functional: IntegratedGradient,
                                        return_cov: bool) -> LinkedResult:
    """Mean as in the module docstring, averaged over baselines; covariance exact for a
    binary reduction (with ``difference_variance`` ``Var(p(x) - p(xt))``), estimated by
    randomised QMC for softmax with C >= 3, None for Taylor. ``baseline_prediction`` is the
    average ``E[p(xt_b)]``.

    Raises
    ------
    ValueError
        A rule other than Gauss-Legendre, or several baselines with a covariance requested.
    """
    linked, link = context.linked, context.linked.link
    if functional.rule != "gauss-legendre":
        raise ValueError(
            "probability-level integrated gradients use Gauss-Legendre along the path; "
            f"rule={functional.rule!r} is not available with a link."
        )
    reduction = (link.binary_reduction(linked.target_class, len(linked.posteriors))
                 if return_cov else None)
    # Softmax with C >= 3: the covariance estimated by randomised QMC (see module docs).
    sampled_cov = return_cov and reduction is None and link.gives_covariance
    if (reduction or sampled_cov) and len(functional.baselines) > 1:
        raise ValueError(
            "the covariance of probability-level integrated gradients is available for one "
            f"baseline; got {len(functional.baselines)}. Pass return_cov=False for the "
            "mean over a baseline distribution, or explain against one baseline."
        )
    prediction, mean, baseline_prediction, nodes = _integrated(linked, context.at, X,
                                                                functional.baselines)
    cov, difference_variance = None, None
    method = (f"integrated gradients of E[p] ({linked.describe()}; Gauss-Legendre path, up "
              f"to {nodes} nodes")
    if reduction:
        terms = [LatentTerm(coefficient, linked.posteriors[i], context.schemes[i])
                 for coefficient, i in reduction.terms]
        cov, difference_variance, cov_nodes = integrated_gradient_covariance(
            reduction.link, terms, X, functional.baselines[0])
        method += f"; covariance by second-order Stein{reduction.description}, {cov_nodes}"
    if sampled_cov:
        cov, difference_variance, cov_nodes, cov_error = softmax_integrated_gradient_covariance(
            link, linked.posteriors, context.schemes, linked.target_class, X,
            functional.baselines[0], first_nodes=nodes)
        method += (f"; covariance by second-order Stein over up to {cov_nodes}^2 node "
                   f"pairs, randomised QMC ({link.n_replicates} x {link.n_qmc} samples), "
                   f"covariance standard error {cov_error:.2g}")
    # (an estimated covariance was checked within its standard error when computed)
    return LinkedResult(prediction, mean, cov, baseline_prediction, method + ")",
                        difference_variance,
                        check_completeness=difference_variance is not None and not sampled_cov)


def _integrated(linked, at, X, baselines):
    """Gauss-Legendre path integral of the expected gradient, nodes doubled until complete."""
    prediction = at(X)[0]
    n, d = X.shape
    attributions, baseline_values, used = np.zeros((n, d)), [], 0
    for baseline in baselines:
        baseline_value = float(at(baseline[None, :])[0][0])
        target = prediction - baseline_value
        for n_nodes in _PATH_NODES:
            t, w = np.polynomial.legendre.leggauss(n_nodes)
            t, w = 0.5 * (t + 1.0), 0.5 * w
            path = baseline[None, None, :] + t[None, :, None] * (X - baseline)[:, None, :]
            gradient = at(path.reshape(-1, d))[1].reshape(n, n_nodes, d)
            ig = (X - baseline) * np.einsum("g,pgk->pk", w, gradient)
            gap = float(np.max(np.abs(ig.sum(1) - target), initial=0.0))
            tolerance = COMPLETENESS_TOLERANCE + 10.0 * linked.link.standard_error_
            if gap <= tolerance:
                break
        else:
            warnings.warn(
                f"integrated gradients of the expected probability complete only to {gap:.3g} "
                f"(> {tolerance:.3g}) with {n_nodes} Gauss-Legendre nodes along the path.",
                CompletenessWarning, stacklevel=4,
            )
        used = max(used, n_nodes)
        attributions += ig / len(baselines)
        baseline_values.append(baseline_value)
    return prediction, attributions, float(np.mean(baseline_values)), used


EVALUATORS.register(IntegratedGradient.__name__, integrated_gradients_of_probability)
