"""Brute-force Shapley games with a reference distribution (small d only).

Written from the definitions, independently of ``gpexplain.functionals.product_shapley``: the
game ``v(S) = sum_r w_r f(x_S, r_-S)`` over explicit reference rows r with weights w (one
baseline point; a background sample, w = 1/B; or the tensor grid of a product measure's
atoms), enumerated over all 2^d coalitions, and the Shapley values as one explicit stencil
``phi_i = W[i] @ f(points)`` with the classical weights ``|S|! (d - |S| - 1)! / d!``.
"""

from __future__ import annotations

import itertools
from math import factorial

import numpy as np


def game_points(x, references, weights=None):
    """Points ``(x_S, r_-S)`` for every coalition S and reference row r.

    Returns ``(points, index)`` with ``index[S] = (rows, weights)``, so that ``v(S) =
    f(points[rows]) @ weights``."""
    references = np.atleast_2d(references)
    n_references, d = references.shape
    if weights is None:
        weights = np.full(n_references, 1.0 / n_references)
    points, index = [], {}
    for size in range(d + 1):
        for S in itertools.combinations(range(d), size):
            block = references.copy()
            block[:, list(S)] = x[list(S)]
            start = sum(len(p) for p in points)
            index[frozenset(S)] = (np.arange(start, start + n_references), weights)
            points.append(block)
    return np.vstack(points), index


def shapley_stencil(index, d, n_points):
    """``W`` (d, n_points) with ``phi_i = W[i] @ f(points)`` (the subset formula)."""
    W = np.zeros((d, n_points))
    for i in range(d):
        others = [j for j in range(d) if j != i]
        for size in range(d):
            share = factorial(size) * factorial(d - size - 1) / factorial(d)
            for S in itertools.combinations(others, size):
                for subset, sign in ((frozenset(S) | {i}, 1.0), (frozenset(S), -1.0)):
                    rows, weights = index[subset]
                    W[i, rows] += sign * share * weights
    return W


def product_measure_references(atoms):
    """Tensor grid of per-feature (nodes, weights) atoms as reference rows with their weights."""
    grid = np.array(list(itertools.product(*[nodes for nodes, _ in atoms])))
    weights = np.array([np.prod(w) for w in itertools.product(*[w for _, w in atoms])])
    return grid, weights
