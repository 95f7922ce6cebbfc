"""The one explanation driver: posterior + linear functional (+ link) -> ``Attribution``.

Every explanation of a Gaussian posterior goes through ``explain``; the public functions
(``integrated_gradients``, ``gradients``, ``shapley_values``) only validate their arguments,
build a ``LinearFunctional`` (``gpexplain.functionals``) and call it:

1. resolve the posterior (a fitted estimator's ``posterior_``, or a posterior); a
   ``MixturePosterior`` is explained component by component and combined into the exact
   moments of the mixture (``gpexplain.explain._mixture``);
2. validate the query points against the posterior's features;
3. bind the functional to the posterior's kernel once (``LinearFunctional.bind``: the closed
   form or quadrature scheme registered for that kernel type);
4. chunk the query points so memory stays bounded (``gpexplain.parallel``), and per chunk
   apply the generic formula of DESIGN.md,

       E[L f]   = (L k(., Z)) a
       Cov[L f] = L L' k - (L k(., Z)) Q (L k(., Z))^T,

   (the mean always from the cross term, with or without the covariance), the
   functional's output weights (gradient x input), the latent prediction
   ``m0 + k(x, Z) a`` and the functional's completeness target;
5. check every result is finite, and return one ``Attribution``, with a
   ``CompletenessWarning`` stating the measured gaps when it is not complete to the
   documented tolerance (``gpexplain.accuracy``).

The **link** step (GP classifiers, ``link=``): class probabilities are not linear in f, so a
``LinkedPosterior`` takes its own path (``gpexplain.explain._link.explain_linked``): the joint
Gaussian moments of f and its gradient per point, mapped through the link's expectations
(``gpexplain.links``), with integrated gradients by an adaptive path rule.

Seam left open on purpose (not implemented yet, nothing here anticipates it beyond the
shape of ``explain_chunk``):

* an **executor** (Dask): ``explain_chunk`` depends only on its block of points, the
  posterior and the bound scheme, so a distributed executor replaces ``map_chunks`` with the
  posterior and scheme shipped once and the blocks mapped remotely.
"""

from __future__ import annotations

import numpy as np

from gpexplain._validation import check_finite_result
from gpexplain.accuracy import warn_if_incomplete
from gpexplain.attribution import Attribution
from gpexplain.explain._link import LinkedPosterior, explain_linked
from gpexplain.explain._mixture import mixture_attribution
from gpexplain.functionals.base import LinearFunctional
from gpexplain.parallel import default_chunk_size, map_chunks
from gpexplain.posterior import as_posterior
from gpexplain.posterior.mixture import MixturePosterior

__all__ = ["explain", "gaussian_moments"]


def gaussian_moments(posterior, cross: np.ndarray, prior: np.ndarray | None):
    """The generic formula: mean ``C a`` and covariance ``P - C Q C^T`` (exactly symmetric).

    Parameters
    ----------
    posterior : gpexplain.posterior.Posterior
    cross : ndarray (n_points, D, n_basis)
    prior : ndarray (n_points, D, D) or None (mean only)

    Returns
    -------
    mean : ndarray (n_points, D)
    cov : ndarray (n_points, D, D) or None
    """
    mean = cross @ posterior.alpha
    if prior is None:
        return mean, None
    cov = prior - posterior.quadratic_form(cross)
    return mean, 0.5 * (cov + np.swapaxes(cov, 1, 2))


def check_chunk_size(chunk_size) -> None:
    if chunk_size is not None and (
        isinstance(chunk_size, bool)
        or not isinstance(chunk_size, int | np.integer)
        or chunk_size < 1
    ):
        raise ValueError(f"chunk_size must be a positive integer or None, got {chunk_size!r}.")


def explain(
    model_or_posterior,
    X,
    functional: LinearFunctional,
    *,
    return_cov: bool = True,
    chunk_size: int | None = None,
    caller: str = "explain",
) -> Attribution:
    """Posterior of a linear functional of f at each query point, as an ``Attribution``.

    Parameters
    ----------
    model_or_posterior : fitted estimator, ``Posterior`` / ``MixturePosterior``, or a
        ``LinkedPosterior`` (probability-level explanations of a classifier, see
        ``gpexplain.explain._link.resolve_output``)
    X : array-like (n_points, n_features)
        Query points in the original units (NumPy, pandas or torch).
    functional : LinearFunctional
        What to compute (e.g. ``IntegratedGradient``); it must have a scheme for the
        posterior's kernel.
    return_cov : bool, default True
        Also compute the (n_points, D, D) covariance; False returns ``cov=None``.
    chunk_size : int, optional
        Points per chunk (bounds memory); chosen from the scheme's memory per point by default.
    caller : str
        Public function name used in error messages.

    Returns
    -------
    Attribution

    Raises
    ------
    ValueError
        Bad query points or ``chunk_size``.
    TypeError
        Not an estimator or posterior, or no scheme for the kernel type.
    FloatingPointError
        A non-finite result (never returned silently).

    Warns
    -----
    gpexplain.accuracy.CompletenessWarning
        The result misses completeness (or a covariance is indefinite) beyond
        ``COMPLETENESS_RTOL``; the message gives the measured gaps.
    """
    check_chunk_size(chunk_size)
    # -- link step (GP classifiers): probability-level explanations -------------------------
    if isinstance(model_or_posterior, LinkedPosterior):
        return explain_linked(model_or_posterior, X, functional, return_cov=return_cov,
                              chunk_size=chunk_size, caller=caller)
    # -- end of the link step ---------------------------------------------------------------
    posterior = as_posterior(model_or_posterior)
    if isinstance(posterior, MixturePosterior):
        parts = [
            explain(part, X, functional, return_cov=return_cov, chunk_size=chunk_size,
                    caller=caller)
            for part in posterior.components
        ]
        return mixture_attribution(parts, posterior.weights)
    Z, alpha = posterior.train_inputs, posterior.alpha
    # The kernel first: a model this explanation does not apply to is named before its inputs.
    scheme = functional.bind(posterior.kernel, Z)
    X = posterior.check_inputs(X)

    def explain_chunk(block):
        prediction = posterior.mean + scheme.kernel_matrix(block) @ alpha
        # One code path for the mean, ``C a`` from the same cross term with or without the
        # covariance: a separate mean-only contraction rounded differently, and an
        # ill-conditioned posterior (|a| ~ 1e10) turned that into different means (issue 10,
        # class 5); ``C a`` also completes term by term, since the rows of C sum to
        # k(x, Z) - k(xt, Z).
        if return_cov:
            mean, cov = gaussian_moments(posterior, *scheme.cross_and_prior(block))
        else:
            mean, cov = gaussian_moments(posterior, scheme.cross(block), None)
        weights = functional.output_weights(block)
        if weights is not None:
            mean = weights * mean
            cov = None if cov is None else weights[:, :, None] * cov * weights[:, None, :]
        reference, difference_variance = functional.completeness_target(
            posterior, block, return_cov
        )
        # The reference value does not depend on the block; carried per row to fit map_chunks.
        reference = None if reference is None else np.full(len(block), reference)
        return mean, cov, prediction, reference, difference_variance

    if chunk_size is None:
        chunk_size = default_chunk_size(*Z.shape, copies_per_point=scheme.copies_per_point())
    mean, cov, prediction, reference, difference_variance = map_chunks(
        explain_chunk, X, chunk_size
    )
    check_finite_result(caller, mean, cov, prediction, difference_variance)
    attribution = Attribution(
        mean=mean,
        cov=cov,
        X=functional.explained_inputs(X),
        prediction=prediction,
        baseline=functional.baseline,
        baseline_prediction=None if reference is None else float(reference[0]),
        feature_names=functional.output_names(posterior),
        method=functional.describe(scheme),
        difference_variance=difference_variance,
    )
    if functional.complete:  # accuracy is measured on every result, never assumed
        warn_if_incomplete(attribution, caller, posterior=posterior)
    return attribution
