"""Validation shared by the POE solvers: property weights, gradients and function values."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from gpexplain._torch import to_numpy
from gpexplain._validation import as_feature_matrix

__all__ = ["PROPERTIES", "POESolverError", "as_lambdas", "as_gradients", "as_values"]

#: The six properties of Tadesse et al. (2025), Table 2, in the order the results list them.
PROPERTIES = ("F_grad", "F_func", "R_avg", "R_max", "S", "C")


class POESolverError(RuntimeError):
    """A POE solve did not reach its certified accuracy (status, gap or residual attached)."""


def as_lambdas(lambdas, allowed=PROPERTIES) -> dict[str, float]:
    """Validate property weights: a mapping from names in ``allowed`` to finite numbers >= 0.

    Missing names get weight 0. Raises TypeError (not a mapping, non-numeric weight) or
    ValueError (unknown name, negative or non-finite weight, all weights zero).
    """
    if not isinstance(lambdas, Mapping):
        raise TypeError(
            f"lambdas must be a mapping from property names to weights, e.g. "
            f"{{'F_grad': 1, 'R_avg': 0.1}}, got {type(lambdas).__name__}."
        )
    weights = dict.fromkeys(allowed, 0.0)
    for name, value in lambdas.items():
        if name not in allowed:
            raise ValueError(
                f"lambdas has unknown property {name!r}; accepted names: {', '.join(allowed)}."
            )
        if isinstance(value, bool) or not isinstance(value, int | float | np.integer | np.floating):
            raise TypeError(f"lambdas[{name!r}] must be a number, got {value!r}.")
        value = float(value)
        if not np.isfinite(value) or value < 0:
            raise ValueError(
                f"lambdas[{name!r}] must be a finite number >= 0, got {value!r}; a property "
                "weight is a penalty and cannot be negative."
            )
        weights[name] = value
    if all(value == 0.0 for value in weights.values()):
        raise ValueError("every property weight in lambdas is 0; give at least one weight > 0.")
    return weights


def as_gradients(gradients, X: np.ndarray, name: str = "gradients") -> np.ndarray:
    """Gradients (n_points, n_features) matching ``X``, float64 and finite."""
    G, _ = as_feature_matrix(gradients, name)
    if G.shape != X.shape:
        raise ValueError(
            f"{name} must have the shape of X {X.shape} (one gradient per explained point), "
            f"got {G.shape}."
        )
    return G


def as_values(values, n_points: int, name: str = "values") -> np.ndarray:
    """Function values (n_points,), float64 and finite."""
    f = np.asarray(to_numpy(values), dtype=np.float64)
    if f.ndim == 2 and f.shape[1] == 1:
        f = f[:, 0]
    if f.shape != (n_points,):
        raise ValueError(
            f"{name} must have shape ({n_points},) (f(x_n) at each explained point), got "
            f"{f.shape}."
        )
    if not np.all(np.isfinite(f)):
        position = int(np.argmin(np.isfinite(f)))
        raise ValueError(f"{name} has a NaN or inf entry at position {position}.")
    return f
