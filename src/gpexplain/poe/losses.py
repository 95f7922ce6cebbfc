"""The six explanation properties of Tadesse et al. (2025) as losses (Table 2, d-i).

Tadesse, Hüyük, Yacoby, Pan and Doshi-Velez, *Transparent trade-offs between properties of
explanations* (2025). For N explained points with explanations W (N, D), gradients
G = grad f(X), values f(X), a similarity S (N, N) between points and S~ (D, D) between
features:

* ``F_grad = sum_n |w_n - g_n|^2``                          (faithfulness, gradient matching)
* ``F_func = sum_n (w_n . x_n - f(x_n))^2``                  (faithfulness, function matching)
* ``R_avg  = sum over ordered pairs (n, n') S_nn' |w_n - w_n'|^2``   (robustness, average)
* ``R_max  = sum_n max_n' |w_n - w_n'|^2`` over the given points      (robustness, maximum)
* ``S      = sum_n sum over ordered (d, d') S~_dd' (w_nd - w_nd')^2`` (smoothness)
* ``C      = sum_n |w_n|_1``                                         (complexity)

Ordered pairs count each unordered pair twice, so ``R_avg = 2 tr(W^T Lap(S) W)`` and
``S = 2 tr(W Lap(S~) W^T)`` (``docs/errata.md``, "POE (Tadesse et al.)").
"""

from __future__ import annotations

import numpy as np

from gpexplain._validation import as_feature_matrix
from gpexplain.poe._inputs import PROPERTIES, as_gradients, as_lambdas, as_values
from gpexplain.poe.similarity import as_similarity

__all__ = ["losses", "objective"]


def losses(W, X, gradients, values=None, S=None, S_tilde=None) -> dict[str, float]:
    """All six property losses of explanations W (Tadesse et al. 2025, Table 2 d-i).

    Parameters
    ----------
    W : array-like (n_points, n_features)
        Explanations, one row per explained point (units of f per unit of x).
    X : array-like (n_points, n_features)
        The explained points.
    gradients : array-like (n_points, n_features)
        ``grad f(x_n)``.
    values : array-like (n_points,), optional
        ``f(x_n)``; without it ``F_func`` is None.
    S : None, "uniform", Similarity or array (n_points, n_points)
        Similarity between points for ``R_avg`` (default uniform 1).
    S_tilde : None, "uniform", Similarity or array (n_features, n_features)
        Similarity between features for ``S`` (default uniform 1).

    Returns
    -------
    dict
        ``{"F_grad", "F_func", "R_avg", "R_max", "S", "C"}`` -> float (``F_func`` None
        without ``values``).

    Raises
    ------
    ValueError, TypeError
        Shapes that do not match X, non-finite entries, or bad similarities (named).
    """
    X, _ = as_feature_matrix(X, "X")
    W = as_gradients(W, X, "W")
    G = as_gradients(gradients, X)
    f = None if values is None else as_values(values, X.shape[0])
    point_similarity = as_similarity(S, X.shape[0], "S")
    feature_similarity = as_similarity(S_tilde, X.shape[1], "S_tilde")
    return _losses(W, X, G, f, point_similarity, feature_similarity)


def _losses(W, X, G, f, point_similarity, feature_similarity, names=PROPERTIES) -> dict:
    """``losses`` on validated inputs, for the properties in ``names`` (solvers, MOFAE)."""
    compute = {
        "F_grad": lambda: float(np.sum((W - G) ** 2)),
        "F_func": lambda: None if f is None else float(np.sum((np.sum(W * X, axis=1) - f) ** 2)),
        "R_avg": lambda: point_similarity.pair_sum(W),
        "R_max": lambda: float(np.sum(largest_squared_distances(W))),
        "S": lambda: feature_similarity.pair_sum(W.T),
        "C": lambda: float(np.sum(np.abs(W))),
    }
    return {name: compute[name]() for name in names}


def largest_squared_distances(W: np.ndarray, chunk: int = 1024) -> np.ndarray:
    """``max_n' |w_n - w_n'|^2`` for each row n, (n_points,), in row chunks of bounded memory.

    ``cdist`` forms the differences directly: the expansion ``|a|^2 + |b|^2 - 2 a.b`` would
    cancel for nearly equal explanations.
    """
    from scipy.spatial.distance import cdist

    return np.concatenate(
        [cdist(W[start:start + chunk], W, "sqeuclidean").max(axis=1)
         for start in range(0, W.shape[0], chunk)]
    )


def objective(property_losses: dict, lambdas) -> float:
    """``sum_i lambda_i L_i``: the POE objective (Tadesse et al. 2025, eq. 1).

    Raises
    ------
    ValueError
        A property with a positive weight has no loss (e.g. ``F_func`` without values), or
        bad ``lambdas`` (unknown name, negative weight).
    """
    weights = as_lambdas(lambdas)
    total = 0.0
    for name in PROPERTIES:
        if weights[name] == 0.0:
            continue
        if property_losses.get(name) is None:
            raise ValueError(f"lambdas[{name!r}] > 0 but the {name} loss is missing (pass values).")
        total += weights[name] * property_losses[name]
    return float(total)
