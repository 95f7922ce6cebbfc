"""Exact Shapley interactions of GPs (order 2), local, with their posterior covariance.

Every interaction index is a linear combination of the game's values ``v(S)``, which are
linear in f for the games of ``gpexplain.functionals.games``, so the order-1 values and all
pairwise interactions are one Gaussian vector per point: mean ``C a`` and covariance ``P -
C Q C^T`` (the driver's generic formula), with the closed forms of
``gpexplain.functionals.product_interactions`` (product kernels: Gauss-Legendre on the
diagonal of the multilinear extension, never 2^d) and
``gpexplain.functionals.additive_interactions`` (orthogonal additive GPs).
"""

from __future__ import annotations

from gpexplain.accuracy import warn_if_incomplete
from gpexplain.attribution import Attribution
from gpexplain.explain._driver import explain
from gpexplain.explain._pipeline import through_pipeline
from gpexplain.explain.linked import name_latent
from gpexplain.explain.shapley import _shapley_functional
from gpexplain.functionals.additive_interactions import AdditiveShapleyInteraction
from gpexplain.functionals.product_interactions import (
    INTERACTION_INDICES,
    ProductShapleyInteraction,
)
from gpexplain.functionals.shapley import AdditiveShapley
from gpexplain.interactions import ShapleyInteractions
from gpexplain.multi_output_attribution import MultiOutputAttribution
from gpexplain.posterior.linked import latent_posterior

__all__ = ["shapley_interactions"]


def check_index(index) -> str:
    """The interaction index, validated (``ValueError`` naming the accepted ones)."""
    if not isinstance(index, str) or index not in INTERACTION_INDICES:
        raise ValueError(f"index must be one of {list(INTERACTION_INDICES)}, got {index!r}.")
    return index


@through_pipeline
def shapley_interactions(
    model_or_posterior,
    X,
    *,
    index: str = "k-SII",
    game: str | None = None,
    baseline=None,
    background=None,
    measure=None,
    chunk_size: int | None = None,
    return_cov: bool = True,
    target_class=None,
    output: str | None = None,
    outputs=None,
) -> ShapleyInteractions:
    """Exact order-1 values and pairwise Shapley interactions of a GP, with their covariance.

    For each point, the ``D = d + d (d - 1) / 2`` values of an interaction index of order 2 of
    the game ``v(S) = E_{r ~ R} f(x_S, r_-S)`` played by the latent function f:

    * ``"k-SII"`` (default; Bordt and von Luxburg 2023, *From Shapley values to generalized
      additive models and back*): pairs ``SII_ij``, order-1 values ``phi_i - 1/2 sum_j
      SII_ij``; efficient: all D values sum to ``f(x) - v({})``;
    * ``"SII"`` (Grabisch and Roubens 1999, *An axiomatic approach to the concept of
      interaction among players in cooperative games*): order-1 values the Shapley values
      (efficient), pairs ``SII_ij = sum_S |S|! (d - |S| - 2)! / (d - 1)! D_ij v(S)``;
    * ``"STII"`` (Sundararajan, Dhamdhere and Agarwal 2020, *The Shapley Taylor interaction
      index*): order-1 values ``v({i}) - v({})``, pairs ``(2 / d) sum_S D_ij v(S) /
      C(d - 1, |S|)``; efficient.

    Product kernels (ARD squared exponential; GPyTorch products of one-dimensional RBF /
    Matern / RQ factors; exact, sparse variational and adapted posteriors): ``SII_ij =
    delta_i delta_j int_0^1 prod_{k != i, j} (q_k + t delta_k) dt`` per kernel section
    (``STII``: weight ``2 (1 - t)``), exact with ``ceil(d / 2)`` Gauss-Legendre nodes
    (derivation in ``gpexplain.functionals.product_interactions``). Orthogonal additive GPs
    (``AdditiveGPRegressor``; their own product-measure game): a component ``f_T`` gives
    each pair in T the SII ``f_T / (|T| - 1)`` (``gpexplain.functionals.additive_interactions``).

    The efficiency identity of the index is measured on every result, for the mean and the
    covariance (``ShapleyInteractions.efficiency_gap``), and a ``CompletenessWarning`` states
    the gap when it misses ``gpexplain.accuracy.COMPLETENESS_RTOL``. Mixtures are combined
    exactly; classifiers are explained on their latent (as ``gx.shapley_values``).

    Parameters
    ----------
    model_or_posterior : fitted estimator, posterior or MixturePosterior
    X : array-like (n_points, n_features)
        Points to explain, in the original units.
    index : {"k-SII", "SII", "STII"}, default "k-SII"
    game, baseline, background, measure
        The game and its reference distribution, as for ``gx.shapley_values``.
    return_cov : bool or "points", default True
        Also compute the (n_points, D, D) covariance ("points": also ``point_cov``, across
        points, for the baseline and product-measure games of product kernels; O(n_points^2
        m^2 D^2) when evaluated). The prior term costs
        O(n_references^2 ceil(d/2)^2 (d^2/2)^2) per point: use few background rows.
    chunk_size : int, optional
        Points processed at once (bounds memory).
    target_class, output
        Classifiers' latent, as for ``gx.shapley_values`` (``output="probability"`` is
        refused).

    outputs : output name or index, or a sequence of them, optional
        A multi-output posterior only: the outputs to explain (default all); the result is
        then a ``MultiOutputAttribution`` of one ``ShapleyInteractions`` per output, with the
        covariance across outputs (issue 24).

    Returns
    -------
    ShapleyInteractions
        ``mean`` (n_points, D), ``cov`` (n_points, D, D) or None, in units of y (the
        classifier's latent units); ``baseline_prediction`` the base value ``v({})``;
        ``difference_variance`` ``Var[f(x) - v({})]``.

    Raises
    ------
    ValueError
        Unknown ``index`` or game; arguments that do not belong to the game; bad points,
        baseline, background; as ``gx.shapley_values``.
    TypeError
        A kernel without the product or orthogonal additive structure (the message names
        integrated gradients), not a model or posterior, ``output="probability"``.

    Warns
    -----
    gpexplain.CompletenessWarning
        The efficiency identity misses the documented tolerance (measured gaps stated).
    """
    index = check_index(index)
    posterior, latent = latent_posterior(model_or_posterior, target_class, output,
                                         "shapley_interactions")
    values = _shapley_functional(posterior, game, baseline, background, measure)
    if isinstance(values, AdditiveShapley):
        functional = AdditiveShapleyInteraction(index)
    else:
        functional = ProductShapleyInteraction(index, values.game, values.references,
                                                values.measure)
    result = name_latent(explain(posterior, X, functional, return_cov=return_cov,
                                 chunk_size=chunk_size, caller="shapley_interactions",
                                 outputs=outputs), latent)
    if isinstance(result, MultiOutputAttribution):  # issue 24: one result per output
        return MultiOutputAttribution(
            [_interactions(part, posterior.marginal(name), index)
             for name, part in zip(result.output_names, result.attributions, strict=True)],
            result.output_names, result.joint_cov, result.independent,
            joint_point_cov=result.joint_point_cov,
        )
    return _interactions(result, posterior, index)


def _interactions(result: Attribution, posterior, index: str) -> ShapleyInteractions:
    """The driver's result as ``ShapleyInteractions``, checked for efficiency."""
    interactions = ShapleyInteractions(
        mean=result.mean, cov=result.cov, X=result.X, prediction=result.prediction,
        baseline=result.baseline, baseline_prediction=result.baseline_prediction,
        feature_names=list(posterior.feature_names), index=index, method=result.method,
        difference_variance=result.difference_variance, point_cov=result.point_cov,
    )
    _warn_if_inefficient(interactions, posterior)
    return interactions


def _warn_if_inefficient(interactions: ShapleyInteractions, posterior) -> None:
    """``warn_if_incomplete`` on the values weighted by the index's efficiency weights ``e``
    (their sum is ``e^T mean``, the sum of their covariance ``e^T cov e``)."""
    e = interactions.efficiency_weights
    cov = interactions.cov
    weighted = Attribution(
        mean=interactions.mean * e,
        cov=None if cov is None else e[:, None] * cov * e[None, :],
        X=interactions.X, prediction=interactions.prediction,
        baseline=interactions.baseline, baseline_prediction=interactions.baseline_prediction,
        feature_names=interactions.term_names, method=interactions.method,
        difference_variance=interactions.difference_variance,
    )
    components = getattr(posterior, "components", None)
    warn_if_incomplete(weighted, "shapley_interactions",
                       posterior=None if components else posterior)
