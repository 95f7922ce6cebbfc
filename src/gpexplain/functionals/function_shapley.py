"""Exact Shapley values of a deterministic function's baseline game, over all coalitions.

For a deterministic summary of a posterior that is not a sum of product games (an acquisition
function, whose standard deviation term ``s(x) = sqrt(s2(x))`` is not: DESIGN.md), the
baseline game

    v(S) = g(x_S, xt_-S),    phi_i = sum_{S not containing i} |S|! (d - |S| - 1)! / d!
                                     (v(S + i) - v(S))

(Shapley 1953; the game of shap's Exact explainer with one background row) is computed
exactly by evaluating ``g`` at the ``2^d`` hybrid points. The cost is ``2^d`` evaluations per
point, so ``d`` is bounded (``MAX_FEATURES``); efficiency ``sum_i phi_i = v(N) - v(empty)``
holds up to rounding by construction, and is returned as a check.
"""

from __future__ import annotations

from collections.abc import Callable
from math import factorial

import numpy as np

from gpexplain._torch import as_tensor, to_numpy

__all__ = ["MAX_FEATURES", "function_shapley_values"]

#: Most features enumerated: 2^16 = 65,536 evaluations per explained point.
MAX_FEATURES = 16

#: Hybrid points per evaluation of the function.
_BATCH = 8192


def _coalitions(n_features: int) -> np.ndarray:
    """Boolean (2^d, d): row ``s`` holds feature i where bit i of ``s`` is set."""
    codes = np.arange(2**n_features)
    return (codes[:, None] >> np.arange(n_features)[None, :]) & 1 == 1


def _shapley_matrix(members: np.ndarray) -> np.ndarray:
    """(2^d, d) weights with ``phi = v @ W`` for the game values ``v`` over ``members``: column
    i holds ``+w(|S|)`` at ``S + i`` and ``-w(|S|)`` at ``S`` for every S without i."""
    n_features = members.shape[1]
    weights = np.array([factorial(s) * factorial(n_features - s - 1) / factorial(n_features)
                        for s in range(n_features)])
    sizes = members.sum(1)
    matrix = np.zeros(members.shape)
    for i in range(n_features):
        without = np.flatnonzero(~members[:, i])
        matrix[without + 2**i, i] = weights[sizes[without]]
        matrix[without, i] = -weights[sizes[without]]
    return matrix


def _values(function: Callable, points: np.ndarray, like) -> np.ndarray:
    import torch

    out = []
    with torch.no_grad():
        for start in range(0, len(points), _BATCH):
            out.append(to_numpy(function(as_tensor(points[start:start + _BATCH], like=like))))
    return np.concatenate(out).reshape(-1)


def function_shapley_values(function: Callable, X: np.ndarray, baseline: np.ndarray, *,
                            like=None) -> tuple[np.ndarray, np.ndarray, float, np.ndarray]:
    """Shapley values of ``S -> g(x_S, xt_-S)`` at each row of X, by full enumeration.

    Parameters
    ----------
    function : callable(tensor (n, d)) -> tensor (n,)
        Evaluated row by row (no coupling between rows).
    X : ndarray (n_points, n_features)
    baseline : ndarray (n_features,)
    like : torch.Tensor or torch.nn.Module, optional
        Device and dtype of the tensors (``gpexplain._torch.as_tensor``).

    Returns
    -------
    values : ndarray (n_points, n_features)
    predictions : ndarray (n_points,)
        ``g(x)``.
    baseline_value : float
        ``g(xt)``.
    gap : ndarray (n_points,)
        ``|sum_i phi_i - (g(x) - g(xt))|`` (rounding only).

    Raises
    ------
    ValueError
        More than ``MAX_FEATURES`` features.
    """
    X = np.asarray(X, dtype=np.float64)
    baseline = np.asarray(baseline, dtype=np.float64)
    n_points, n_features = X.shape
    if n_features > MAX_FEATURES:
        raise ValueError(
            f"exact Shapley values of a general function enumerate 2^d coalitions; "
            f"{n_features} features would need 2^{n_features} evaluations per point (at most "
            f"{MAX_FEATURES} features are enumerated): use method='ig', or group features."
        )
    members = _coalitions(n_features)
    baseline_value = float(_values(function, baseline[None, :], like)[0])
    # The hybrid points of as many explained points as fill one evaluation batch at a time.
    per_block = max(_BATCH // len(members), 1)
    values = np.concatenate([
        np.empty((0, len(members))),  # no explained points: no values
        *(_values(function, np.where(members[None], X[start:start + per_block, None, :],
                                   baseline).reshape(-1, n_features), like)
          .reshape(-1, len(members))
          for start in range(0, n_points, per_block)),
    ])  # (n_points, 2^d): the game's values
    phi = values @ _shapley_matrix(members)
    predictions = values[:, -1]  # the grand coalition: x itself
    gap = np.abs(phi.sum(1) - (predictions - baseline_value))
    return phi, predictions, baseline_value, gap
