"""Input validation with errors that name the offending argument, column or row.

Every public entry point (estimators, posteriors, explainers, the command line) funnels its
array inputs through these helpers, so that a user always sees the same kind of message:
what was wrong, where, and what would be accepted.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from gpexplain._torch import to_numpy

__all__ = [
    "as_class_labels",
    "as_feature_matrix",
    "as_target",
    "check_feature_count",
    "check_feature_names",
    "check_finite_result",
    "check_spread",
    "check_within_reach",
    "order_by_name",
]

# Every integer of magnitude up to 2**53 is a float64; above it, not every one.
_EXACT_INTEGER = 2**53


def as_feature_matrix(
    X, name: str = "X", feature_names: Sequence[str] | None = None, min_rows: int = 1
) -> tuple[np.ndarray, list[str]]:
    """Validate a feature matrix and return it as float64 with its feature names.

    Parameters
    ----------
    X : array-like of shape (n_rows, n_features)
        NumPy array, pandas DataFrame or torch tensor. A 1-D input is refused, because it is
        ambiguous between one row and one feature.
    name : str
        Argument name used in error messages.
    feature_names : sequence of str, optional
        Names to use when ``X`` carries none (NumPy, torch). Defaults to ``x0, x1, ...``.
    min_rows : int
        Smallest accepted number of rows.

    Returns
    -------
    X : ndarray of shape (n_rows, n_features), float64
    feature_names : list of str

    Raises
    ------
    TypeError
        A column is not numeric (the column is named and an encoding suggested).
    ValueError
        Wrong dimensionality, too few rows, no columns, or a NaN/inf entry (row and column
        named).
    """
    if isinstance(X, pd.Series):
        raise ValueError(
            f"{name} is a pandas Series; pass a DataFrame with one column per feature "
            f"(e.g. {name}.to_frame())."
        )
    if isinstance(X, pd.DataFrame):
        names = [str(c) for c in X.columns]
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ValueError(
                f"{name} has duplicate column names {repeated}; features are matched by name, "
                "so each column needs its own."
            )
        for column in X.columns:
            dtype = X[column].dtype
            if not (pd.api.types.is_numeric_dtype(dtype) or pd.api.types.is_bool_dtype(dtype)):
                raise TypeError(
                    f"{name} column {str(column)!r} is not numeric (dtype {dtype}); encode it "
                    "first, e.g. one-hot with pandas.get_dummies or ordinal codes, or drop it."
                )
        integers = [
            (j, X.iloc[:, j].fillna(0).to_numpy())
            for j, column in enumerate(X.columns)
            if pd.api.types.is_integer_dtype(X[column].dtype)
        ]
        values = X.to_numpy(dtype=np.float64)
        row_labels = list(X.index)
    else:
        try:
            values = np.asarray(to_numpy(X))
        except ValueError:  # NumPy refuses ragged nested sequences
            raise ValueError(
                f"{name} is ragged (rows of different lengths); pass an (n_rows, n_features) "
                "array."
            ) from None
        if values.dtype == object or not (
            np.issubdtype(values.dtype, np.number) or values.dtype == bool
        ):
            raise TypeError(
                f"{name} must hold numbers, got dtype {values.dtype}; encode categorical "
                "columns (one-hot or ordinal) before passing them."
            )
        integers = (
            list(enumerate(values.T))
            if values.ndim == 2 and np.issubdtype(values.dtype, np.integer)
            else []
        )
        values = values.astype(np.float64, copy=True)
        row_labels = None
        names = None
    if values.ndim != 2:
        raise ValueError(
            f"{name} must be 2-D (n_rows, n_features), got shape {values.shape}; reshape a "
            "single row with x.reshape(1, -1) or a single feature with x.reshape(-1, 1)."
        )
    n_rows, n_features = values.shape
    if n_features == 0:
        raise ValueError(f"{name} has no feature columns.")
    if n_rows < min_rows:
        raise ValueError(f"{name} has {n_rows} row(s); at least {min_rows} are needed.")
    if names is None:
        names = (
            [str(f) for f in feature_names]
            if feature_names is not None
            else [f"x{i}" for i in range(n_features)]
        )
    if len(names) != n_features:
        raise ValueError(
            f"{name} has {n_features} columns but {len(names)} feature names were given."
        )
    _check_exact_integers(integers, names, row_labels, name)
    bad = ~np.isfinite(values)
    if bad.any():
        row, col = np.argwhere(bad)[0]
        label = row_labels[int(row)] if row_labels is not None else int(row)
        kind = "NaN" if np.isnan(values[row, col]) else "inf"
        raise ValueError(
            f"{name} has {kind} at row {label!r}, column {names[int(col)]!r} "
            f"({int(bad.sum())} non-finite entries in all); impute or drop those rows."
        )
    return values, names


def _check_exact_integers(integers, names, row_labels, name: str) -> None:
    """Refuse an integer column with a value beyond 2**53: float64 holds every integer up to
    that magnitude and no more, so larger ones would be rounded, and nearby values (64-bit
    identifiers, e.g. from Parquet) collapse into one, a silently "constant" column."""
    for j, column in integers:
        beyond = (column > _EXACT_INTEGER) | (column < -_EXACT_INTEGER)
        if beyond.any():
            row = int(np.argmax(beyond))
            label = row_labels[row] if row_labels is not None else row
            raise ValueError(
                f"{name} column {names[j]!r} holds integers beyond 2**53 ({column[row]} at row "
                f"{label!r}, {int(beyond.sum())} in all), which float64 cannot hold exactly; "
                "an identifier carries no information to learn from: drop it, or subtract an "
                "offset if its values are measurements."
            )


def _as_column(y, name: str) -> np.ndarray:
    """``y`` (NumPy, pandas, torch; 1-D or one column) as a 1-D array, or a ValueError."""
    values = to_numpy(y.to_numpy() if isinstance(y, pd.Series | pd.DataFrame) else y)
    values = np.asarray(values)
    if values.ndim == 2 and values.shape[1] == 1:
        values = values[:, 0]
    if values.ndim != 1:
        raise ValueError(f"{name} must be 1-D with one value per row, got shape {values.shape}.")
    return values


def as_target(y, n_rows: int, name: str = "y") -> np.ndarray:
    """Validate a regression target: finite, numeric, one value per row of ``X``.

    Returns
    -------
    y : ndarray of shape (n_rows,), float64

    Raises
    ------
    ValueError
        Wrong length, more than one column, or a NaN/inf entry (row named).
    TypeError
        Non-numeric values.
    """
    values = _as_column(y, name)
    if not (np.issubdtype(values.dtype, np.number) or values.dtype == bool):
        raise TypeError(f"{name} must be numeric, got dtype {values.dtype}.")
    values = values.astype(np.float64, copy=True)
    if values.shape[0] != n_rows:
        raise ValueError(f"{name} has {values.shape[0]} values but X has {n_rows} rows.")
    bad = np.flatnonzero(~np.isfinite(values))
    if bad.size:
        raise ValueError(
            f"{name} has a non-finite value at row {int(bad[0])} ({bad.size} in all); "
            "drop or impute those rows."
        )
    # Fitting squares the target (its variance, the kernel's scale): beyond about 1e154 that
    # overflows to inf and the failure surfaces far away (a ZeroDivisionError in GPX).
    largest = float(np.max(np.abs(values))) if values.size else 0.0
    with np.errstate(over="ignore"):
        if not np.isfinite(largest * largest):
            row = int(np.argmax(np.abs(values)))
            raise ValueError(
                f"{name} has the value {values[row]:.3g} at row {row}, beyond what float64 can "
                "square (about 1e154); rescale it, e.g. into other units."
            )
    return values


def check_spread(X: np.ndarray, names: list[str]) -> None:
    """Refuse a column whose standard deviation overflows float64 (values beyond about 1e154).

    Its squared deviations are infinite: standardised by an infinite scale, the column would
    become zeros and be silently ignored, and the kernel's squared distances in original units
    overflow too. ValueError names the column.
    """
    with np.errstate(over="ignore", invalid="ignore"):
        spread = X.std(axis=0)
    overflowing = ~np.isfinite(spread)
    if overflowing.any():
        j = int(np.argmax(overflowing))
        raise ValueError(
            f"column {names[j]!r} has values up to {np.max(np.abs(X[:, j])):.3g}, beyond what "
            "float64 can square (about 1e154); rescale it, e.g. into other units."
        )


def as_class_labels(y, n_rows: int, name: str = "y") -> np.ndarray:
    """Validate a classification target: one label per row, none missing, discrete.

    Returns
    -------
    labels : ndarray of shape (n_rows,), the dtype given (text, integers, booleans)

    Raises
    ------
    ValueError
        Wrong shape or length, a missing/non-finite label (row named), or non-integer
        numbers (a continuous target).
    TypeError
        Labels of mixed types that cannot be ordered.
    """
    values = _as_column(y, name)
    if values.shape[0] != n_rows:
        raise ValueError(f"{name} has {values.shape[0]} labels but X has {n_rows} rows.")
    missing = np.flatnonzero(pd.isna(values))
    if np.issubdtype(values.dtype, np.floating):
        missing = np.flatnonzero(~np.isfinite(values))
        if missing.size == 0 and not np.all(values == np.round(values)):
            raise ValueError(
                f"{name} has non-integer numbers, a continuous target; a classifier needs class "
                "labels (text, integers or booleans); use a regressor for a continuous target."
            )
    if missing.size:
        raise ValueError(
            f"{name} has a missing or non-finite label at row {int(missing[0])} "
            f"({missing.size} in all); drop or label those rows."
        )
    try:
        np.unique(values)
    except TypeError:
        raise TypeError(
            f"{name} mixes label types that cannot be ordered (e.g. text and numbers); give "
            "every label the same type."
        ) from None
    return values

#: Farthest a query value may lie from the training inputs' range, in the feature's units:
#: squared distances (over squared lengthscales down to 1e-4) must stay finite in float64.
MAX_DISTANCE_FROM_DATA = 1e150


def check_within_reach(X: np.ndarray, reference: np.ndarray, feature_names: Sequence[str],
                       name: str = "X") -> None:
    """Refuse query values too far from the training inputs for float64 to square the distance.

    Parameters
    ----------
    X : ndarray (n_rows, n_features), finite
    reference : ndarray (n_reference, n_features)
        The training inputs (or inducing points) the kernel compares X with.
    feature_names : sequence of str
    name : str
        Argument name used in the message.

    Raises
    ------
    ValueError
        A value more than ``MAX_DISTANCE_FROM_DATA`` outside its column's training range (row,
        column and value named): kernels would overflow there (NaN, or an IndexError from the
        quadrature), and the model predicts its prior mean anyway.
    """
    if not (X.size and reference.size):
        return
    low, high = reference.min(axis=0), reference.max(axis=0)
    with np.errstate(over="ignore", invalid="ignore"):
        distance = np.maximum(np.maximum(X - high, low - X), 0.0)
    far = np.argwhere(~(distance <= MAX_DISTANCE_FROM_DATA))
    if far.size:
        row, column = (int(i) for i in far[0])
        raise ValueError(
            f"{name} has the value {X[row, column]:.3g} at row {row}, column "
            f"{feature_names[column]!r}, more than {MAX_DISTANCE_FROM_DATA:g} from the training "
            f"range [{low[column]:.3g}, {high[column]:.3g}] ({len(far)} such value(s) in all): "
            "float64 cannot square distances that large; the model predicts its prior mean "
            "there. Rescale the inputs or drop those rows."
        )


def check_feature_count(X: np.ndarray, n_features: int, name: str = "X") -> None:
    """Raise a ValueError when ``X`` does not have the ``n_features`` columns the model expects."""
    if X.shape[1] != n_features:
        raise ValueError(
            f"{name} has {X.shape[1]} features but the model was fitted on {n_features}."
        )


def check_feature_names(
    table, names: list[str], expected: list[str], name: str = "X", what: str = "features"
) -> None:
    """Refuse a DataFrame whose columns differ from the training ones (order included).

    ``names`` are the columns of ``table`` as returned by ``as_feature_matrix``; nothing is
    checked for arrays. A model trained without names (on an array: ``x0, x1, ...``) takes a
    DataFrame by position unless one of its columns is such a default name: then they are the
    model's own labels and must be exactly the defaults in order (a reordered ``[x1, x0]``
    was used by position, silently wrong). ``what`` names the training columns in the message
    ("features", "columns").
    """
    default = [f"x{i}" for i in range(len(expected))]
    labelled = expected != default or not set(names).isdisjoint(default)
    if isinstance(table, pd.DataFrame) and labelled and names != expected:
        # A reordered or renamed table would be used column by column, silently wrong.
        raise ValueError(
            f"{name} columns {names} do not match the training {what} {expected}; select "
            f"them in that order, e.g. {name}[{expected}]."
        )


def order_by_name(labelled, feature_names: Sequence[str], name: str):
    """A labelled vector or table (Series index or DataFrame columns) in ``feature_names`` order.

    Labels are matched by name, never by position: a reordered ``X.mean()[["b", "a"]]`` gets
    each feature its own value. An unlabelled pandas object (a default integer index) is
    positional, like an array.

    Parameters
    ----------
    labelled : pandas.Series or pandas.DataFrame
    feature_names : sequence of str
        The order wanted.
    name : str
        Argument name used in error messages.

    Raises
    ------
    ValueError
        Labels that are not exactly the features (missing and unknown ones listed).
    """
    labels = labelled.index if isinstance(labelled, pd.Series) else labelled.columns
    if isinstance(labels, pd.RangeIndex):
        return labelled
    names, feature_names = [str(label) for label in labels], list(feature_names)
    if names == feature_names:
        return labelled
    missing = [feature for feature in feature_names if feature not in names]
    unknown = [label for label in names if label not in feature_names]
    if missing or unknown or len(set(names)) != len(names):
        raise ValueError(
            f"{name} labels {names} do not match the features {feature_names} (missing: "
            f"{missing}, unknown: {unknown}); label a pandas {name} with the feature names, or "
            "pass a plain array in the features' order."
        )
    order = [names.index(feature) for feature in feature_names]
    if isinstance(labelled, pd.Series):
        return labelled.iloc[order]
    return labelled.iloc[:, order]


def check_finite_result(name: str, *arrays: np.ndarray) -> None:
    """Refuse to return a non-finite result: raise FloatingPointError naming the quantity."""
    for array in arrays:
        if array is not None and not np.all(np.isfinite(array)):
            raise FloatingPointError(
                f"{name} produced a non-finite value; this is a bug in gpexplain or an "
                "ill-conditioned model (try a larger noise variance). Please report it."
            )
