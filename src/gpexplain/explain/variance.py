"""Why the model is unsure: attributions of the posterior variance (or standard deviation).

The posterior variance ``s2(x) = k(x, x) - k(x, Z) Q k(Z, x)`` is a deterministic function of
x, explained as a function (DESIGN.md, "deterministic summaries"): the result has no
posterior over it (its ``cov`` is zero). Which method is exact where:

* ``method="shapley"``: exact Shapley values of the baseline, interventional and
  product-measure games of s2 for product kernels, a sum of product games over pairs of
  training points (``gpexplain.functionals.variance``);
* ``method="ig"``: integrated gradients of s2 along the straight path from a baseline, in
  closed form (erf) for squared-exponential kernels; for any other differentiable kernel, and
  for the standard deviation ``s(x)`` (``what="std"``), Gauss-Legendre quadrature with
  autograd whose completeness is measured at every point
  (``gpexplain.functionals.function_paths``);
* ``method="shapley", what="std"``: the baseline game of ``s(x)``, exact by enumerating the
  ``2^d`` coalitions (``gpexplain.functionals.function_shapley``).

Everything else is refused by name.
"""

from __future__ import annotations

import warnings

import numpy as np

from gpexplain._baselines import resolve_baseline
from gpexplain.accuracy import COMPLETENESS_RTOL, CompletenessWarning
from gpexplain.attribution import Attribution
from gpexplain.explain.linked import name_latent
from gpexplain.functionals.function_paths import function_integrated_gradients
from gpexplain.functionals.function_shapley import function_shapley_values
from gpexplain.functionals.games import GAMES
from gpexplain.functionals.integrated_gradient import _refuse_matern_half
from gpexplain.functionals.product_shapley import not_product_message
from gpexplain.functionals.terms import CoregionalTerms, sum_terms
from gpexplain.functionals.variance import (
    StructureKernel,
    product_measure_variance,
    squared_exponential_equivalent,
    variance_ig_rbf,
    variance_shapley_product,
)
from gpexplain.kernels.product import product_structure
from gpexplain.posterior.base import Posterior
from gpexplain.posterior.linked import latent_posterior

__all__ = ["explain_variance", "posterior_variance_function"]

METHODS = ("shapley", "ig")
WHATS = ("variance", "std")


def explain_variance(
    model_or_posterior,
    X,
    *,
    method: str = "shapley",
    what: str = "variance",
    game: str | None = None,
    baseline=None,
    background=None,
    measure=None,
    n_steps: int = 64,
    target_class=None,
    output: str | None = None,
) -> Attribution:
    """Attributions of the posterior variance ``s2(x)`` (or standard deviation) to the features.

    Parameters
    ----------
    model_or_posterior : fitted estimator or ``Posterior``
        Regressions, and classifiers' latents (``target_class`` as in
        ``gx.shapley_values``). A ``MixturePosterior`` is refused (its variance is not one
        quadratic form).
    X : array-like (n_points, n_features)
    method : {"shapley", "ig"}, default "shapley"
        ``shapley``: exact Shapley values for product kernels (ARD squared exponential,
        GPyTorch products of one-dimensional RBF/Matern/RQ factors). ``ig``: integrated
        gradients; closed form for squared-exponential kernels, Gauss-Legendre quadrature
        with autograd otherwise.
    what : {"variance", "std"}, default "variance"
        The latent posterior variance ``s2(x)`` (noise excluded), or ``s(x) = sqrt(s2(x))``:
        ``s`` is not a sum of product games, so its integrated gradients are by quadrature
        and its Shapley values those of the baseline game by enumerating the ``2^d``
        coalitions (at most 16 features; any differentiable kernel).
    game : {"baseline", "interventional", "product-measure"}, optional
        Shapley values: the game, implied by ``baseline=``, ``background=`` or ``measure=``
        as in ``gx.shapley_values`` (default: baseline game at the training mean).
    baseline : {"mean", "median", "zeros"} or array-like (n_features,), optional
        Reference point of the baseline game and of integrated gradients (default "mean").
    background : array-like (n_background, n_features), optional
        Rows of the interventional game (cost linear in their number).
    measure : gx.measures.Gaussian, Empirical or Uniform, optional
        The product measure (Gaussian needs squared-exponential factors).
    n_steps : int, default 64
        Starting Gauss-Legendre nodes of the quadrature (doubled, up to 16 times, at points
        that miss completeness by more than 1e-8 of the prior variance).
    target_class, output : optional
        Classifiers: the latent explained; ``output="probability"`` is refused.

    Returns
    -------
    Attribution
        ``mean`` (n_points, n_features) in squared units of the target (``what="std"``: its
        units); ``cov`` zeros (a deterministic function has no posterior over its
        explanation); ``prediction`` = ``s2(x)`` (or ``s(x)``); ``baseline_prediction`` = the
        base value (``s2(baseline)``, the average over the background, or the expectation
        under the measure), so ``mean.sum(1) == prediction - baseline_prediction``;
        ``method`` starts with "posterior variance" (or "posterior standard deviation").

    Raises
    ------
    TypeError
        A kernel without the structure the method needs, named with what applies; a
        mixture posterior; ``output="probability"``.
    ValueError
        Unknown method, what, game; arguments that do not belong to the game; bad inputs.

    Warns
    -----
    CompletenessWarning
        With the measured gap, when the quadrature misses completeness by more than 1e-8 of
        the prior variance.
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose one of {METHODS}.")
    if what not in WHATS:
        raise ValueError(f"unknown what {what!r}; choose one of {WHATS}.")
    posterior, latent = latent_posterior(model_or_posterior, target_class, output,
                                         "explain_variance")
    if not isinstance(posterior, Posterior):
        raise TypeError(
            "explain_variance needs one Gaussian posterior in representer form (e.g. of "
            "gx.GPRegressor, gx.SparseGPRegressor, gx.ExactPosterior); the variance of a "
            "MixturePosterior is not one quadratic form: explain its components."
        )
    structure = product_structure(posterior.kernel, posterior.n_features)
    if method == "shapley" and what == "std":
        result = _std_shapley(posterior, X, game, baseline, background, measure)
    elif method == "shapley":
        result = _shapley(posterior, structure, X, game, baseline, background, measure)
    else:
        if game is not None or background is not None or measure is not None:
            raise ValueError("game=, background= and measure= belong to method='shapley'.")
        result = _integrated_gradients(posterior, structure, X, baseline, what, n_steps)
    return name_latent(result, latent)


def _q_matrix(posterior) -> np.ndarray:
    n_basis = posterior.train_inputs.shape[0]
    Q = posterior.quadratic_form(np.eye(n_basis))
    return 0.5 * (Q + Q.T)


def _game(posterior, game, baseline, background, measure):
    """The game's name and its ``ProductShapley`` functional (references or measure), from
    the Shapley-game registry's own validation."""
    given = {name: value for name, value in
             {"baseline": baseline, "background": background, "measure": measure}.items()
             if value is not None}
    implied = {entry.argument: name for name, entry in GAMES.items()}
    if game is None:
        if len(given) > 1:
            raise ValueError(f"pass one of baseline=, background=, measure= (got "
                             f"{sorted(given)}), or name the game with game=.")
        game = implied[next(iter(given))] if given else "baseline"
    entry = GAMES.get(game)
    for name in given:
        if implied[name] != game:
            raise ValueError(f"{name}= does not apply to the {game} game; it belongs to "
                             f"game={implied[name]!r}.")
    return game, entry.functional(game, posterior, given.get(entry.argument))


def _shapley(posterior, structure, X, game, baseline, background, measure) -> Attribution:
    if structure is None:
        raise TypeError(
            not_product_message(posterior.kernel, "exact Shapley values of the posterior "
                                "variance") + " For this kernel use "
            "gx.explain_variance(..., method='ig')."
        )
    game, functional = _game(posterior, game, baseline, background, measure)
    X = posterior.check_inputs(X)
    Z, Q = posterior.train_inputs, _q_matrix(posterior)
    values = variance_shapley_product(structure, Z, Q, X, functional.references,
                                      functional.measure)
    # s2 from the product structure the values come from (a GPyTorch kernel's own distances
    # round at sqrt(eps) near zero distance), so completeness measures the method alone.
    kernel = StructureKernel(structure)
    if functional.references is not None:
        base_value = float(np.mean(_variance(kernel, Z, Q, functional.references)))
    else:
        base_value = product_measure_variance(structure, Z, Q, functional.measure)
    return _finished(posterior, X, values, _variance(kernel, Z, Q, X), base_value,
                     functional.baseline,
                     f"posterior variance: exact Shapley values ({game} game, product kernel, "
                     "closed form)")


def _std_shapley(posterior, X, game, baseline, background, measure) -> Attribution:
    """Baseline-game Shapley values of ``s(x)`` by enumerating the 2^d coalitions: ``s`` is
    not a sum of product games, so the other games have no exact route here."""
    if game not in (None, "baseline") or background is not None or measure is not None:
        raise ValueError(
            "what='std' has exact Shapley values in the baseline game only (by enumerating "
            "the 2^d coalitions: s(x) is not a sum of product games); pass baseline= or use "
            "what='variance' for the interventional and product-measure games."
        )
    terms = _torch_terms(posterior, "Shapley values of the posterior standard deviation")
    point = resolve_baseline("mean" if baseline is None else baseline,
                             posterior.data_inputs, posterior.feature_names)
    X = posterior.check_inputs(X)
    function = posterior_variance_function(posterior, terms, std=True)
    values, prediction, base_value, gap = function_shapley_values(function, X, point,
                                                                  like=terms[0][0])
    scale = float(np.sqrt(np.max(posterior.kernel.diag(np.vstack([X, point[None, :]])))))
    return _finished(posterior, X, values, prediction, base_value, point,
                     "posterior standard deviation: exact Shapley values (baseline game, all "
                     "2^d coalitions)", gap=gap, scale=scale)


def _torch_terms(posterior, what: str) -> list:
    """The posterior's kernel as GPyTorch modules ``[(module, prior weight, cross weight)]``:
    one module with weights None (1) for a kernel; for an output of a linear model of
    coregionalisation each term's ``(k_q, B^q_ii, B^q[i, task_n])``. TypeError names what
    needs them."""
    kernel = posterior.kernel
    parts = kernel.terms if isinstance(kernel, CoregionalTerms) else [(kernel, None, None)]
    try:
        return [(k.torch_kernel(posterior.n_features), prior, cross) for k, prior, cross in parts]
    except (NotImplementedError, AttributeError, TypeError):
        raise TypeError(
            f"{what} need a differentiable kernel (gx.kernels.RBF, or a GPyTorch kernel); "
            f"got {posterior.kernel!r}."
        ) from None


def _variance(kernel, Z, Q, X) -> np.ndarray:
    """``s2(x)`` unclipped, from the same Q the attributions use."""
    cross = kernel(X, Z)
    return kernel.diag(X) - np.einsum("pn,nm,pm->p", cross, Q, cross)


def _integrated_gradients(posterior, structure, X, baseline, what, n_steps) -> Attribution:
    rbf = squared_exponential_equivalent(structure)
    point = resolve_baseline("mean" if baseline is None else baseline,
                             posterior.data_inputs, posterior.feature_names)
    if rbf is not None and what == "variance":
        X = posterior.check_inputs(X)
        Z, Q = posterior.train_inputs, _q_matrix(posterior)
        values = variance_ig_rbf(rbf, Z, Q, X, point)
        prediction = _variance(rbf, Z, Q, X)
        base_value = float(_variance(rbf, Z, Q, point[None, :])[0])
        return _finished(posterior, X, values, prediction, base_value, point,
                         "posterior variance: integrated gradients (closed form, squared "
                         "exponential)")
    terms = _torch_terms(posterior, "integrated gradients of the posterior variance")
    for module, _, _ in terms:
        _refuse_matern_half(module)
    X = posterior.check_inputs(X)
    function = posterior_variance_function(posterior, terms, std=what == "std")
    prior = float(np.max(posterior.kernel.diag(np.vstack([X, point[None, :]]))))
    scale = np.sqrt(prior) if what == "std" else prior
    values, prediction, base_value, gap = function_integrated_gradients(
        function, X, point, n_steps=n_steps, like=terms[0][0], scale=scale,
    )
    label = "standard deviation" if what == "std" else "variance"
    return _finished(posterior, X, values, prediction, base_value, point,
                     f"posterior {label}: integrated gradients (Gauss-Legendre quadrature, "
                     f"from n_steps={n_steps})", gap=gap, scale=scale)


def posterior_variance_function(posterior, terms, std: bool = False):
    """``x -> s2(x)`` (or ``s(x)``) as a differentiable torch function of rows (n, d).

    ``terms``: ``[(module, prior weight, cross weight)]`` (``_torch_terms``): ``s2(x) =
    sum_q p_q k_q(x, x) - u(x)^T Q u(x)`` with ``u(x) = sum_q w_q k_q(x, Z)`` (one term of
    weights None: ``k(x, x) - k(x, Z) Q k(Z, x)``).
    """
    import torch

    from gpexplain._torch import as_tensor

    like = terms[0][0]
    Z = as_tensor(posterior.train_inputs, like=like)
    Q = as_tensor(_q_matrix(posterior), like=like)
    weights = [(module, None if prior is None else as_tensor(np.asarray(prior), like=like),
                None if cross is None else as_tensor(cross, like=like))
               for module, prior, cross in terms]

    def function(x):
        cross = sum_terms(module(x, Z).to_dense() if w is None else w * module(x, Z).to_dense()
                          for module, _, w in weights)
        prior = sum_terms(module(x, x, diag=True) if p is None else p * module(x, x, diag=True)
                          for module, p, _ in weights)
        variance = prior - torch.einsum("pn,nm,pm->p", cross, Q, cross)
        if std:
            return torch.sqrt(torch.clamp(variance, min=1e-300))
        return variance

    return function


def _finished(posterior, X, values, prediction, base_value, baseline, method, gap=None,
              scale=None) -> Attribution:
    """The deterministic ``Attribution`` (zero covariance), its completeness measured."""
    if not (np.all(np.isfinite(values)) and np.all(np.isfinite(prediction))):
        raise FloatingPointError(f"explain_variance ({method}) produced non-finite values.")
    if gap is None:
        gap = np.abs(values.sum(1) - (prediction - base_value))
    if scale is None:
        scale = float(np.max(posterior.kernel.diag(X), initial=0.0))
    relative = gap / max(scale, 1e-300)
    if np.any(relative > COMPLETENESS_RTOL):
        warnings.warn(
            f"explain_variance ({method}) misses completeness at "
            f"{int(np.sum(relative > COMPLETENESS_RTOL))} of {len(X)} points: the "
            f"attributions' sum differs from the change in the explained function by up to "
            f"{np.max(gap):.3g} ({np.max(relative):.2g} of the prior scale); raise n_steps.",
            CompletenessWarning, stacklevel=3,
        )
    n_points, n_features = values.shape
    return Attribution(
        mean=values, cov=np.zeros((n_points, n_features, n_features)), X=X,
        prediction=np.asarray(prediction, float), baseline=baseline,
        baseline_prediction=float(base_value), feature_names=list(posterior.feature_names),
        method=method,
    )
