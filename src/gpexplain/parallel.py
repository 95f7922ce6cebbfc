"""Execution layer: split query points into chunks so memory stays bounded.

Explanations of ``n_points`` queries against ``n_train`` training points build intermediate
arrays of size ``n_points * n_train * n_features``; chunking over points caps them.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

__all__ = ["default_chunk_size", "map_chunks"]

_MEMORY_BUDGET_BYTES = 256 * 2**20
_ARRAYS_PER_ELEMENT = 8  # float64 arrays of size n_train * n_features alive per point


def default_chunk_size(n_train: int, n_features: int, copies_per_point: int = 1) -> int:
    """Points per chunk so that the per-chunk working set stays near 256 MiB.

    ``copies_per_point`` counts how many (n_train, n_features) slabs one point needs, e.g.
    the number of quadrature nodes along its path.
    """
    per_point = (
        8 * _ARRAYS_PER_ELEMENT * max(n_train, 1) * max(n_features, 1) * max(copies_per_point, 1)
    )
    return max(1, _MEMORY_BUDGET_BYTES // per_point)


def map_chunks(
    function: Callable[[np.ndarray], tuple], X: np.ndarray, chunk_size: int
) -> tuple:
    """Apply ``function`` to consecutive row blocks of X and concatenate each output.

    Parameters
    ----------
    function : callable
        Takes an (m, n_features) block and returns a tuple of arrays (or None) whose first axis
        has length m.
    X : ndarray of shape (n_points, n_features)
    chunk_size : int
        Rows per block (>= 1).

    Returns
    -------
    tuple of ndarray or None, one per output of ``function``.
    """
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be a positive integer, got {chunk_size}.")
    parts = [function(X[start : start + chunk_size]) for start in range(0, len(X), chunk_size)]
    return tuple(
        None if column[0] is None else np.concatenate(column, axis=0)
        for column in zip(*parts, strict=True)
    )
