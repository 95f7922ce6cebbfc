"""The link step of the explanation driver: one registered evaluator per functional.

``explain_linked`` does what every probability-level explanation shares (validate the query
points, bind the gradient functional to each latent's kernel, evaluate ``E[p]``,
``E[grad p]`` and ``Cov[grad p]`` chunk by chunk, state the Monte Carlo standard error,
check the numbers and build the result with the Gaussian driver's
``gpexplain.explain._result.finished_attribution``); what differs per functional is an
evaluator registered in ``EVALUATORS`` under the functional's class name (gradients:
``gpexplain.explain.linked.gradient``; integrated gradients:
``gpexplain.explain.linked.integrated_gradient``). A functional without one has no
probability-level form.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import NamedTuple

import numpy as np

from gpexplain._registry import Registry
from gpexplain._threads import native_threads
from gpexplain.attribution import Attribution
from gpexplain.explain._result import finished_attribution
from gpexplain.explain.linked.moments import expected_probability_and_gradient
from gpexplain.functionals.base import LinearFunctional
from gpexplain.functionals.gradient import Gradient
from gpexplain.parallel import default_chunk_size, map_chunks
from gpexplain.posterior.linked import LinkedPosterior

__all__ = ["EVALUATORS", "LinkedContext", "LinkedResult", "explain_linked", "name_latent"]

#: Probability-level evaluators, by the name of the functional class they explain.
EVALUATORS = Registry("probability-level explanation")


class LinkedContext(NamedTuple):
    """What an evaluator is given besides the points and the functional.

    Attributes
    ----------
    linked : LinkedPosterior
    schemes : list
        The gradient functional bound to each latent's kernel and basis points.
    at : callable
        ``at(points, full=False)``: ``E[p]`` (m,), ``E[grad p]`` (m, d) and, if ``full``,
        ``Cov[grad p]`` (m, d, d) else None at (m, d) points, computed in chunks.
    """

    linked: LinkedPosterior
    schemes: list
    at: Callable


class LinkedResult(NamedTuple):
    """What an evaluator returns (``explain_linked`` makes the ``Attribution``).

    Attributes
    ----------
    prediction : ndarray (n,)
        ``E[p(x)]``.
    mean : ndarray (n, d)
    cov : ndarray (n, d, d) or None
    baseline_prediction : float or None
    method : str
        Ends with ")" (the standard error, if any, is inserted before it).
    difference_variance : ndarray (n,) or None
    check_completeness : bool
        Whether ``explain_linked`` measures completeness on the result (an estimated
        covariance is checked within its standard error by its evaluator instead).
    """

    prediction: np.ndarray
    mean: np.ndarray
    cov: np.ndarray | None
    baseline_prediction: float | None
    method: str
    difference_variance: np.ndarray | None = None
    check_completeness: bool = False


def _evaluator(functional: LinearFunctional):
    """The evaluator registered for the functional's class or its closest base class.

    Raises
    ------
    TypeError
        None registered (e.g. Shapley values): no probability-level form.
    """
    for cls in type(functional).__mro__:
        if cls.__name__ in EVALUATORS:
            return EVALUATORS.get(cls.__name__)
    raise TypeError(
        f"{functional.name or type(functional).__name__} has no probability-level form; "
        "use output='latent' (the Gaussian explanation of the log-odds)."
    )


def explain_linked(linked: LinkedPosterior, X, functional, *, return_cov: bool = True,
                   chunk_size: int | None = None, caller: str = "explain") -> Attribution:
    """Probability-level ``gradients`` or ``integrated_gradients`` of a ``LinkedPosterior``.

    ``prediction`` is ``E[p(x)]``; mean, covariance and ``baseline_prediction`` as the
    functional's evaluator documents them (``gpexplain.explain.linked.gradient``,
    ``gpexplain.explain.linked.integrated_gradient``).

    Raises
    ------
    TypeError
        A functional without an evaluator (e.g. Shapley values).
    ValueError
        Bad X, or what the evaluator refuses (e.g. an integrated-gradient rule other than
        Gauss-Legendre, several baselines with ``return_cov=True``).
    FloatingPointError
        A non-finite result.

    Warns
    -----
    gpexplain.CompletenessWarning
        The mean or the covariance misses completeness (measured gaps in the message; an
        estimated covariance by more than 4 of its standard errors).
    """
    X = linked.check_inputs(X)
    schemes = [Gradient().bind(post.kernel, post.train_inputs) for post in linked.posteriors]
    n_basis = max(post.train_inputs.shape[0] for post in linked.posteriors)
    per_point = default_chunk_size(n_basis * len(schemes), X.shape[1], 2)

    def at(points, full=False):
        return map_chunks(
            lambda block: expected_probability_and_gradient(linked, schemes, block, full),
            points, chunk_size or per_point,
        )

    with native_threads(n_basis):
        result = _evaluator(functional)(LinkedContext(linked, schemes, at), X, functional,
                                        return_cov)
    method, error = result.method, linked.link.standard_error_
    if error:
        method = method[:-1] + f"; Monte Carlo standard error {error:.2g})"
    return finished_attribution(
        caller, functional, X, mean=result.mean, cov=result.cov,
        prediction=result.prediction, baseline_prediction=result.baseline_prediction,
        feature_names=linked.feature_names, method=method,
        difference_variance=result.difference_variance,
        check_completeness=result.check_completeness,
    )


def name_latent(result, latent: str | None):
    """``result`` with "of the <latent>" appended to its ``method`` when it explains a
    classifier's latent (``latent`` from ``resolve_output`` or ``latent_posterior``), so the
    log-odds of one class is never mistaken for a regression's output. Results written to a
    file (``output_path``) and regressions (``latent`` None) pass unchanged."""
    if latent is None or not isinstance(result, Attribution):
        return result
    return replace(result, method=f"{result.method} of the {latent}")
