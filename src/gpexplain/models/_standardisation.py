"""Internal standardisation of the estimators, and the exact way back to original units.

Estimators fit on standardised columns (population standard deviations) and report every
number in the original units of X and y. Constant columns carry no information: they are
detected once, reported in one warning, and given an infinite lengthscale, so that their
attributions are exactly zero.
"""

from __future__ import annotations

import warnings

import numpy as np

from gpexplain._validation import check_spread

__all__ = [
    "FeatureScaling",
    "constant_columns",
    "original_lengthscales",
    "target_scaling",
    "warn_constant_columns",
]

IGNORED = "the model ignores them (zero attribution)"


def warn_constant_columns(
    names: list[str], constant: np.ndarray, consequence: str, where: str = "", stacklevel=3
) -> None:
    """Warn that the columns flagged in ``constant`` carry no information (if any are).

    ``stacklevel`` counts from this function; the default points at the caller of the
    caller (the user's ``fit`` call).
    """
    if constant.any():
        warnings.warn(
            "constant column(s) "
            + ", ".join(repr(names[i]) for i in np.flatnonzero(constant))
            + f"{where} carry no information; {consequence}.",
            UserWarning,
            stacklevel=stacklevel,
        )


def constant_columns(X: np.ndarray, names: list[str], consequence: str = IGNORED) -> np.ndarray:
    """Boolean mask of the constant columns of X; warns about them, refuses all-constant X
    and a column that cannot be standardised (``check_spread``).

    Call it from ``fit`` directly: the warning points at the caller of ``fit``.
    """
    check_spread(X, names)
    constant = np.ptp(X, axis=0) == 0
    if constant.all():
        raise ValueError("every column of X is constant; there is nothing to learn from.")
    warn_constant_columns(names, constant, consequence, stacklevel=4)
    return constant


def target_scaling(y: np.ndarray) -> tuple[float, float]:
    """(mean, standard deviation) of y; the scale is 1.0 for a constant y."""
    y_mean, y_std = float(y.mean()), float(y.std())
    return y_mean, (y_std if y_std > 0 else 1.0)


def original_lengthscales(
    lengthscale, x_scale: np.ndarray, active: np.ndarray, n_features: int
) -> np.ndarray:
    """Lengthscales in the units of X from standardised ones over the ``active`` columns.

    An SE kernel on ``(x - mean) / scale`` is exactly an SE kernel on x with lengthscales
    multiplied by ``scale``; the other columns get ``np.inf`` (ignored). A scalar (isotropic)
    ``lengthscale`` broadcasts.
    """
    full = np.full(n_features, np.inf)
    full[active] = lengthscale * x_scale
    return full


class FeatureScaling:
    """Standardisation of the ``active`` columns of X, and its inverse.

    Parameters
    ----------
    X : ndarray (n_samples, n_features)
    active : ndarray of int
        Columns the model sees; a column with zero spread among them gets scale 1.
    """

    def __init__(self, X: np.ndarray, active: np.ndarray):
        self.n_features = X.shape[1]
        self.active = active
        self.constant_values = X[0]
        x_scale = X[:, active].std(axis=0)
        self.x_mean = X[:, active].mean(axis=0)
        self.x_scale = np.where(x_scale > 0, x_scale, 1.0)

    def features(self, X: np.ndarray) -> np.ndarray:
        return (X[:, self.active] - self.x_mean) / self.x_scale

    def unstandardise(self, Xs: np.ndarray) -> np.ndarray:
        """Points in original units, with the other columns at their (constant) training value."""
        X = np.tile(self.constant_values, (Xs.shape[0], 1))
        X[:, self.active] = Xs * self.x_scale + self.x_mean
        return X

    def original_lengthscales(self, lengthscale) -> np.ndarray:
        """Standardised lengthscale(s) in the units of X, ``np.inf`` off the active columns."""
        return original_lengthscales(lengthscale, self.x_scale, self.active, self.n_features)

    def standardised_lengthscales(self, kernel, ard: bool) -> np.ndarray:
        """A given ``RBF``'s lengthscales on the standardised active columns.

        Not ARD: one lengthscale, the geometric mean (a scalar in original units differs per
        standardised column, so it is tied there).
        """
        given = kernel._lengthscales(self.n_features)[self.active] / self.x_scale
        return given if ard else np.array([float(np.exp(np.mean(np.log(given))))])


def choice_scaling(X: np.ndarray, names: list[str], sees_constant_columns: bool):
    """``(constant, scaling)``: the constant columns (warned about once) and the
    ``FeatureScaling`` of the columns the kernel sees: all of them for a user-supplied
    kernel, which indexes columns itself (``active_dims``), else the non-constant ones."""
    consequence = (
        "a user-supplied kernel still sees them (standardised by 1)"
        if sees_constant_columns
        else IGNORED
    )
    constant = constant_columns(X, names, consequence)
    active = np.arange(X.shape[1]) if sees_constant_columns else np.flatnonzero(~constant)
    return constant, FeatureScaling(X, active)
