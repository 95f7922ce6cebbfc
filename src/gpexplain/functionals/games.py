"""The Shapley-game registry: which cooperative games of a GP have exact Shapley values.

Each game is ``v(S) = E_{r ~ R} f(x_S, r_{-S})``: the features outside a coalition S are
filled from a reference distribution R (``gpexplain.functionals.product_shapley``). A game is
named, takes R through one keyword argument of ``gx.shapley_values`` (which implies the game
when ``game=`` is not given), and turns that argument into the ``ProductShapley`` functional.
A new game whose value is such an expectation is one entry here (its references or measure),
with the case ``tests/contracts/`` asks for.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from gpexplain._baselines import resolve_baseline, warn_if_off_data
from gpexplain._registry import Registry
from gpexplain.functionals.product_shapley import ProductShapley
from gpexplain.kernels.measures import check_measure

__all__ = ["GAMES", "ShapleyGame"]


@dataclass(frozen=True)
class ShapleyGame:
    """One cooperative game over the features.

    Attributes
    ----------
    argument : str
        The keyword of ``gx.shapley_values`` that carries the reference distribution.
    reference : str
        What R is, in words (documentation and error messages).
    functional : callable(name, posterior, value) -> ProductShapley
        Validates the argument's value (None: the game's default, or a ValueError saying
        what to pass) against the posterior's features and builds the functional.
    """

    argument: str
    reference: str
    functional: Callable


def _baseline(name, posterior, baseline):
    point = resolve_baseline("mean" if baseline is None else baseline, posterior.data_inputs,
                             posterior.feature_names)
    warn_if_off_data(posterior, point[None, :], "the baseline game")
    return ProductShapley(name, references=point[None, :])


def _interventional(name, posterior, background):
    if background is None:
        raise ValueError(
            "game='interventional' needs background= (rows whose values fill the absent "
            "features, e.g. a sample of the training inputs)."
        )
    rows = posterior.check_inputs(background, "background")
    if rows.shape[0] == 0:
        raise ValueError("background must have at least one row.")
    return ProductShapley(name, references=rows)


def _product_measure(name, posterior, measure):
    if measure is None:
        raise ValueError(
            "game='product-measure' needs measure= (gx.measures.Gaussian(mean, std), "
            "gx.measures.Empirical(X) or gx.measures.Uniform(low, high))."
        )
    return ProductShapley(name, measure=check_measure(measure).resolve(
        posterior.n_features, posterior.feature_names))


GAMES: Registry[ShapleyGame] = Registry("Shapley game")
GAMES.register("baseline", ShapleyGame("baseline", "one point xt", _baseline))
GAMES.register("interventional", ShapleyGame(
    "background", "the rows of a background sample, averaged jointly (shap's Exact, "
    "Permutation and Kernel explainers)", _interventional,
))
GAMES.register("product-measure", ShapleyGame(
    "measure", "a product measure prod_j p_j over the features", _product_measure,
))
