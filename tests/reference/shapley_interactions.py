"""Brute-force order-2 Shapley interaction indices of an explicit game (small d only).

Written from the definitions, independently of ``gpexplain.functionals.product_interactions``:
each index is a stencil ``W`` (D, n_points) over the game's points
(``tests.reference.shapley_games.game_points``), ``values = W @ f(points)``, with the values
ordered as the features, then the pairs ``(i, j)``, ``i < j``, lexicographically.

* SII (Grabisch and Roubens 1999): ``SII_ij = sum_{S in N - ij} |S|! (d - |S| - 2)! / (d - 1)!
  D_ij v(S)``, order-1 values the Shapley values (``|S|! (d - |S| - 1)! / d!``);
* k-SII of order 2 (Bordt and von Luxburg 2023): ``Phi_S = sum_{l=0}^{2 - |S|} B_l sum_{T in
  N - S, |T| = l} SII_{S + T}`` with the Bernoulli numbers ``B_0 = 1``, ``B_1 = -1/2``;
* STII of order 2 (Sundararajan, Dhamdhere and Agarwal 2020): order-1 values the discrete
  derivatives ``v({i}) - v({})``, pairs ``(2 / d) sum_{S in N - ij} D_ij v(S) / C(d - 1, |S|)``.
"""

from __future__ import annotations

import itertools
from math import comb, factorial

import numpy as np


def _add(W, row, index, subset, coefficient):
    rows, weights = index[frozenset(subset)]
    W[row, rows] += coefficient * weights


def _second_difference(W, row, index, S, i, j, coefficient):
    for extra, sign in (((i, j), 1.0), ((i,), -1.0), ((j,), -1.0), ((), 1.0)):
        _add(W, row, index, set(S) | set(extra), sign * coefficient)


def interaction_stencil(index, d, n_points, which):
    """``W`` (d + d (d - 1) / 2, n_points) of index ``which`` in {"SII", "k-SII", "STII"}."""
    pairs = list(itertools.combinations(range(d), 2))
    W = np.zeros((d + len(pairs), n_points))
    for i in range(d):  # order 1
        if which == "STII":
            _add(W, i, index, {i}, 1.0)
            _add(W, i, index, set(), -1.0)
            continue
        others = [j for j in range(d) if j != i]
        for size in range(d):
            share = factorial(size) * factorial(d - size - 1) / factorial(d)
            for S in itertools.combinations(others, size):
                _add(W, i, index, set(S) | {i}, share)
                _add(W, i, index, S, -share)
    for p, (i, j) in enumerate(pairs):
        others = [k for k in range(d) if k not in (i, j)]
        for size in range(d - 1):
            if which == "STII":
                share = 2.0 / d / comb(d - 1, size)
            else:
                share = factorial(size) * factorial(d - size - 2) / factorial(d - 1)
            for S in itertools.combinations(others, size):
                _second_difference(W, d + p, index, S, i, j, share)
    if which == "k-SII":
        for p, (i, j) in enumerate(pairs):
            W[i] -= 0.5 * W[d + p]
            W[j] -= 0.5 * W[d + p]
    return W
