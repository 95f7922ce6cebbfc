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
   With ``return_cov="points"`` the ``Attribution`` also carries ``point_cov``, the
   covariance across points (``gpexplain.explain._points.PointCovariance``: the same generic
   formula with the scheme's two-point prior term, evaluated lazily block by block).

The **link** step (GP classifiers, ``link=``): class probabilities are not linear in f, so a
``LinkedPosterior`` (``gpexplain.posterior.linked``) takes its own path
(``gpexplain.explain.linked``, one evaluator per functional): the joint Gaussian moments of f
and its gradient per point, mapped through the link's expectations (``gpexplain.links``),
with integrated gradients by an adaptive path rule; it ends in the same result building
(``gpexplain.explain._result``). It runs in this process (no ``client=`` / ``output_path=``
yet).

The **executor** (``gpexplain.parallel.iter_chunks``): ``explain_chunk``
(``gpexplain.explain._chunks``) depends only on its block of points and a ``ChunkTask``
(posterior, bound scheme, functional), so with ``client=`` the task is scattered to a Dask
cluster once and the blocks run there; with ``output_path=`` the chunks stream to Parquet
(``gpexplain.explain._parquet``), for several outputs too.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from gpexplain.explain._chunks import ChunkTask, explain_chunk
from gpexplain.explain._mixture import mixture_attribution
from gpexplain.explain._parquet import check_output_path, write_parquet
from gpexplain.explain._points import (
    MixturePointCovariance,
    PointCovariance,
    check_return_cov,
)
from gpexplain.explain._result import finished_attribution
from gpexplain.explain.linked import explain_linked
from gpexplain.explain.multi_output import explain_multi_output
from gpexplain.functionals.base import LinearFunctional
from gpexplain.parallel import check_client, concatenate_chunks, default_chunk_size, iter_chunks
from gpexplain.posterior import as_posterior
from gpexplain.posterior.linked import LinkedPosterior
from gpexplain.posterior.mixture import MixturePosterior
from gpexplain.posterior.multi_output import MultiOutputPosterior

__all__ = ["explain"]


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
    return_cov: bool | str = True,
    chunk_size: int | None = None,
    client=None,
    output_path=None,
    caller: str = "explain",
    outputs=None,
):
    """Posterior of a linear functional of f at each query point, as an ``Attribution``.

    Parameters
    ----------
    model_or_posterior : fitted estimator or ``Posterior`` / ``MixturePosterior``
    X : array-like (n_points, n_features)
        Query points in the original units (NumPy, pandas or torch).
    functional : LinearFunctional
        What to compute (e.g. ``IntegratedGradient``); it must have a scheme for the
        posterior's kernel.
    return_cov : bool or "points", default True
        Also compute the (n_points, D, D) covariance; False returns ``cov=None``; "points"
        also attaches ``Attribution.point_cov``, the covariance across points and features
        (``gpexplain.explain._points.PointCovariance``, evaluated lazily in memory-bounded
        blocks, on ``client`` when given; its cost is stated there; a mixture: the law of total
        covariance over its components). Not for probability-level explanations, nor with
        ``output_path``.
    chunk_size : int, optional
        Points per chunk (bounds memory); chosen from the scheme's memory per point by default.
    client : distributed.Client, optional
        Compute the chunks on this Dask cluster (posterior and scheme scattered once); the
        results are the serial ones to round-off (the same operations on the same blocks).
    output_path : str or pathlib.Path ending in ``.parquet``, optional
        Stream the results to this Parquet file chunk by chunk (layout in
        ``gpexplain.explain._parquet``) instead of returning them; memory then stays bounded
        by the chunk size whatever the number of points. A ``MultiOutputPosterior`` writes
        every selected output per row (``prediction[<output>]``, ``mean[<output>/<feature>]``
        and the joint covariance at each point, between outputs too where the model has one;
        the multi-output layout there). Not for a ``MixturePosterior``, nor with
        ``return_cov="points"``; the completeness check of the in-memory result is not made
        (each chunk is checked finite).
    caller : str
        Public function name used in error messages.
    outputs : output name or index, or a sequence of them, optional
        For a ``MultiOutputPosterior`` only: the outputs to explain (default all); the result
        is then a ``MultiOutputAttribution`` (``gpexplain.explain.multi_output``).

    Returns
    -------
    Attribution, MultiOutputAttribution for a multi-output posterior, or the
    ``pathlib.Path`` written when ``output_path`` is given.

    Raises
    ------
    ValueError
        Bad query points, ``chunk_size`` or ``output_path``; ``output_path`` with a mixture,
        or for several outputs whose ``mean[<output>/<feature>]`` columns two (output,
        feature) pairs would share (slashes in both names; refused before any work).
    NotImplementedError
        ``return_cov="points"`` with ``output_path`` or a probability-level explanation.
    TypeError
        Not an estimator or posterior, no scheme for the kernel type, ``client`` not a
        ``distributed.Client``, ``output_path`` not a path.
    FloatingPointError
        A non-finite result (never returned silently).
    """
    check_chunk_size(chunk_size)
    check_return_cov(return_cov)
    check_client(client)
    output_path = check_output_path(output_path)
    points = return_cov == "points"
    if points and (output_path is not None or isinstance(model_or_posterior, LinkedPosterior)):
        raise NotImplementedError(
            "return_cov='points' (covariance across points) is not yet supported for "
            "probability-level explanations or output_path=: explain the "
            "latent GP of one posterior in memory, or use return_cov=True."
        )
    return_cov = bool(return_cov)
    # -- link step (GP classifiers): probability-level explanations -------------------------
    if isinstance(model_or_posterior, LinkedPosterior):
        if client is not None or output_path is not None:
            raise ValueError(
                "client= and output_path= apply to latent (Gaussian) explanations; "
                "probability-level explanations (link=, output='probability') run in this "
                "process: drop them, or explain output='latent'."
            )
        return explain_linked(model_or_posterior, X, functional, return_cov=return_cov,
                              chunk_size=chunk_size, caller=caller)
    # -- end of the link step ---------------------------------------------------------------
    posterior = as_posterior(model_or_posterior)
    # -- multi-output step (issue 24) -------------------------------------------------------
    if isinstance(posterior, MultiOutputPosterior):
        return explain_multi_output(posterior, X, functional, explain_one=explain,
                                    outputs=outputs,
                                    return_cov="points" if points else return_cov,
                                    chunk_size=chunk_size, client=client, caller=caller,
                                    output_path=output_path)
    if outputs is not None:
        raise ValueError(f"outputs= applies to multi-output posteriors; {caller} got a "
                         f"single-output {type(posterior).__name__}.")
    # -- end of the multi-output step -------------------------------------------------------
    if isinstance(posterior, MixturePosterior):
        if output_path is not None:
            raise ValueError(
                "output_path is not available for a MixturePosterior (its components are "
                "combined in memory); explain each component of posterior.components instead."
            )
        parts = [
            explain(part, X, functional, return_cov="points" if points else return_cov,
                    chunk_size=chunk_size, client=client, caller=caller)
            for part in posterior.components
        ]
        result = mixture_attribution(parts, posterior.weights)
        if points:  # the law of total covariance, block by block
            result = replace(result, point_cov=MixturePointCovariance(
                [(part.mean, part.cov, part.point_cov) for part in parts], posterior.weights))
        return result
    Z = posterior.train_inputs
    # The kernel first: a model this explanation does not apply to is named before its inputs.
    scheme = functional.bind(posterior.kernel, Z)
    X = posterior.check_inputs(X)
    if points and len(X):  # refused by name before any work when the scheme has no such term
        scheme.prior_between(X[:1], X[:1])
    if chunk_size is None:
        chunk_size = default_chunk_size(*Z.shape, copies_per_point=scheme.copies_per_point())
    chunks = iter_chunks(
        explain_chunk, ChunkTask(posterior, scheme, functional, return_cov), X, chunk_size,
        client=client, training_rows=len(Z),
    )
    if output_path is not None:
        return write_parquet(output_path, chunks, functional.output_names(posterior), caller)
    mean, cov, prediction, reference, difference_variance = concatenate_chunks(chunks)
    attribution = finished_attribution(
        caller, functional, X, mean=mean, cov=cov, prediction=prediction,
        baseline_prediction=None if reference is None else float(reference[0]),
        feature_names=functional.output_names(posterior), method=functional.describe(scheme),
        difference_variance=difference_variance, check_completeness=functional.complete,
        posterior=posterior,
    )
    if points:
        attribution = replace(
            attribution, point_cov=PointCovariance(posterior, scheme, functional, X, client=client)
        )
    return attribution
