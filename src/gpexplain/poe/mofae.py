"""MOFAE: multi-objective feature-attribution explanations by a genetic algorithm.

Wang, Huang, Li and Yao, *Multi-objective feature attribution explanation for explainable
machine learning* (2024), as used by Tadesse et al. (2025, Sec. 6.1): a genetic algorithm
searches the explanations W (all N x D entries are the genome) for the Pareto front of several
property losses at once, starting from a population of base explanations (SmoothGrad and
LIME). The GA is pymoo's NSGA-II (Deb et al. 2002) with its default simulated-binary
crossover and polynomial mutation; the search box of each entry is the range of that entry
over the initial population, widened by its spread on both sides.

MOFAE returns *a set* of non-dominated explanations and offers no control over where on the
front they land; POE instead returns the optimum of a stated mix.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpexplain._optional import require
from gpexplain._validation import as_feature_matrix, check_finite_result
from gpexplain.attribution import Attribution
from gpexplain.poe._inputs import PROPERTIES, as_gradients, as_values
from gpexplain.poe.losses import _losses
from gpexplain.poe.similarity import as_similarity

__all__ = ["MOFAEResult", "mofae"]


@dataclass(frozen=True)
class MOFAEResult:
    """The non-dominated explanations MOFAE found.

    Attributes
    ----------
    explanations : list of Attribution
        One per solution on the final front.
    losses : ndarray (n_solutions, n_objectives)
        Their property losses, in the order of ``objectives``.
    objectives : tuple of str
    generations : int
    evaluations : int
    """

    explanations: list
    losses: np.ndarray
    objectives: tuple
    generations: int
    evaluations: int


def mofae(
    base,
    X,
    gradients,
    values=None,
    S=None,
    S_tilde=None,
    objectives=("F_grad", "R_avg"),
    *,
    population_size: int = 100,
    generations: int = 100,
    seed: int = 0,
) -> MOFAEResult:
    """Pareto-optimal explanations by NSGA-II (pymoo), seeded with base explanations.

    Parameters
    ----------
    base : sequence of Attribution or arrays (n_points, n_features)
        Initial explanations (the paper: 3 SmoothGrad + 3 LIME + 100 SmoothGrad). If fewer
        than ``population_size``, the population is filled with random convex combinations
        of them.
    X, gradients, values, S, S_tilde
        As in ``gx.poe.transductive``.
    objectives : sequence of property names
        Two or more of ``"F_grad", "F_func", "R_avg", "R_max", "S", "C"``.
    population_size, generations : int >= 2 and >= 1
    seed : int

    Returns
    -------
    MOFAEResult

    Raises
    ------
    ValueError, TypeError
        Unknown or repeated objectives, fewer than two, F_func without values, bad shapes.
    """
    NSGA2 = require("pymoo.algorithms.moo.nsga2", "poe", "mofae").NSGA2
    Problem = require("pymoo.core.problem", "poe", "mofae").Problem
    minimize = require("pymoo.optimize", "poe", "mofae").minimize

    X, names = as_feature_matrix(X, "X")
    G = as_gradients(gradients, X)
    f = None if values is None else as_values(values, X.shape[0])
    objectives = tuple(objectives)
    unknown = [name for name in objectives if name not in PROPERTIES]
    if unknown or len(set(objectives)) != len(objectives) or len(objectives) < 2:
        raise ValueError(f"objectives must be two or more distinct names among "
                         f"{', '.join(PROPERTIES)}, got {objectives!r}.")
    if "F_func" in objectives and f is None:
        raise ValueError("the F_func objective needs values.")
    for name, value, low in (("population_size", population_size, 2),
                             ("generations", generations, 1)):
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < low:
            raise ValueError(f"{name} must be an integer >= {low}, got {value!r}.")
    bases = [b.mean if isinstance(b, Attribution) else b for b in base]
    if not bases:
        raise ValueError("base must hold at least one explanation.")
    bases = np.stack([as_gradients(b, X, f"base[{m}]").ravel() for m, b in enumerate(bases)])
    points = as_similarity(S, X.shape[0], "S")
    features = as_similarity(S_tilde, X.shape[1], "S_tilde")
    rng = np.random.default_rng(seed)
    population = bases[:population_size]
    if population.shape[0] < population_size:
        mixes = rng.dirichlet(np.ones(bases.shape[0]), size=population_size - bases.shape[0])
        population = np.vstack([population, mixes @ bases])
    spread = population.max(axis=0) - population.min(axis=0)
    spread = np.maximum(spread, 1e-6 * max(float(np.abs(population).max()), 1.0))
    lower, upper = population.min(axis=0) - spread, population.max(axis=0) + spread
    shape = X.shape

    class Losses(Problem):
        def __init__(self):
            super().__init__(n_var=population.shape[1], n_obj=len(objectives), xl=lower,
                             xu=upper)

        def _evaluate(self, genomes, out, *args, **kwargs):
            out["F"] = np.array([
                list(_losses(g.reshape(shape), X, G, f, points, features, objectives).values())
                for g in genomes
            ])

    outcome = minimize(Losses(), NSGA2(pop_size=population_size, sampling=population),
                       ("n_gen", int(generations)), seed=seed, verbose=False)
    genomes = np.atleast_2d(outcome.X)
    losses = np.atleast_2d(outcome.F)
    check_finite_result("MOFAE", genomes, losses)
    prediction = f.copy() if f is not None else np.zeros(X.shape[0])
    explanations = [
        Attribution(g.reshape(shape), None, X, prediction, None, None, names,
                    f"MOFAE (NSGA-II, {generations} generations)")
        for g in genomes
    ]
    return MOFAEResult(explanations, losses, objectives, int(generations),
                       int(outcome.algorithm.evaluator.n_eval))
