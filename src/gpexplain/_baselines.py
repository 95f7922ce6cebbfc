"""Baselines of integrated gradients, gradients and the baseline Shapley game.

A baseline is the reference point an attribution is measured from: a named statistic of the
training inputs ("mean", "median", "zeros"), a vector of feature values (labelled vectors are
matched to the model's features by name), or, for integrated gradients, a sample of such points
(a baseline distribution, explained as the expected attribution).
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from gpexplain._torch import to_numpy
from gpexplain._validation import check_within_reach, order_by_name

__all__ = ["BASELINE_NAMES", "BaselineWarning", "resolve_baseline", "resolve_baselines",
           "warn_if_off_data"]

#: A baseline whose posterior variance is above this fraction of the prior's (and above
#: ``_OFF_DATA_FACTOR`` times the median over the training rows) is warned about.
_OFF_DATA_RATIO = 0.5
_OFF_DATA_FACTOR = 2.0
#: Training rows the median is taken over (evenly spaced: deterministic, bounded cost).
_OFF_DATA_ROWS = 256


class BaselineWarning(UserWarning):
    """The baseline lies where the model knows little more than its prior (measured: the
    posterior variance there against the prior's), so attributions from it carry that
    uncertainty; the message gives the ratio and what to pass instead."""

BASELINE_NAMES = ("mean", "median", "zeros")


def resolve_baseline(baseline, train_inputs: np.ndarray, feature_names: list[str]) -> np.ndarray:
    """Turn a baseline specification into a vector of shape (n_features,).

    Parameters
    ----------
    baseline : {"mean", "median", "zeros"} or array-like of shape (n_features,)
        ``"mean"`` and ``"median"`` are taken over the training inputs, column by column.

    Raises
    ------
    ValueError
        Unknown name, wrong length, non-finite entries or entries astronomically far from the
        training inputs, or pandas labels that are not the model's feature names (labelled
        baselines are matched by name).
    """
    if isinstance(baseline, str):
        if baseline == "mean":
            return train_inputs.mean(axis=0)
        if baseline == "median":
            return np.median(train_inputs, axis=0)
        if baseline == "zeros":
            return np.zeros(train_inputs.shape[1])
        raise ValueError(
            f"unknown baseline {baseline!r}; use one of {BASELINE_NAMES} or a vector of "
            f"{train_inputs.shape[1]} feature values."
        )
    if isinstance(baseline, pd.Series | pd.DataFrame):
        baseline = order_by_name(baseline, feature_names, "baseline").to_numpy()
    vector = np.asarray(to_numpy(baseline), dtype=np.float64).reshape(-1)
    if vector.shape[0] != train_inputs.shape[1]:
        raise ValueError(
            f"baseline has {vector.shape[0]} values but the model has {train_inputs.shape[1]} "
            f"features ({', '.join(feature_names)})."
        )
    if not np.all(np.isfinite(vector)):
        bad = feature_names[int(np.flatnonzero(~np.isfinite(vector))[0])]
        raise ValueError(f"baseline has a non-finite value for feature {bad!r}.")
    check_within_reach(vector[None, :], train_inputs, feature_names, "baseline")
    return vector



def resolve_baselines(baseline, train_inputs: np.ndarray, feature_names: list[str]) -> np.ndarray:
    """Turn a baseline specification into a (n_baselines, n_features) array.

    Parameters
    ----------
    baseline : {"mean", "median", "zeros"}, array-like of shape (n_features,) or
        (n_baselines, n_features) (NumPy, pandas DataFrame/Series or torch)
        One reference point, or a sample of them (a baseline distribution).

    Raises
    ------
    ValueError
        Unknown name, wrong number of features, no rows, non-finite entries, or more than two
        dimensions.
    """
    if isinstance(baseline, str | pd.Series):
        return resolve_baseline(baseline, train_inputs, feature_names)[None, :]
    if isinstance(baseline, pd.DataFrame):
        baseline = order_by_name(baseline, feature_names, "baseline").to_numpy()
    array = np.asarray(to_numpy(baseline), dtype=np.float64)
    if array.ndim <= 1:
        return resolve_baseline(array, train_inputs, feature_names)[None, :]
    if array.ndim > 2 or array.shape[0] == 0:
        raise ValueError(
            f"baseline must be a vector of {train_inputs.shape[1]} feature values or an "
            f"(n_baselines, {train_inputs.shape[1]}) array with at least one row, got shape "
            f"{array.shape}."
        )
    for row, vector in enumerate(array):
        try:
            resolve_baseline(vector, train_inputs, feature_names)
        except ValueError as error:
            raise ValueError(f"baseline row {row}: {error}") from None
    return array


def warn_if_off_data(posterior, baselines: np.ndarray, caller: str) -> None:
    """``BaselineWarning`` when a baseline is far from the data the posterior learnt from.

    Far means the latent posterior variance there is more than half the prior variance and
    more than twice its median over (up to 256 evenly spaced) training rows: the model then
    knows the function at the baseline little better than before seeing data, and every
    attribution measured from it inherits that uncertainty. A one-hot ``"mean"`` baseline of
    a column with a short fitted lengthscale is the typical case (its indicators are category
    frequencies, a mixture no row has); ``baseline="typical"`` of a ``gx.make_pipeline`` is a
    real category of every text column.

    Parameters
    ----------
    posterior : Posterior
        One representer form (``quadratic_form``); other kinds (mixtures, several outputs)
        are not checked.
    baselines : ndarray (n_baselines, n_features)
    caller : str
        Named in the message.
    """
    # Known by its interface: this foundation module sits below the posterior layer.
    if not callable(getattr(posterior, "quadratic_form", None)) or hasattr(posterior,
                                                                          "n_outputs"):
        return
    worst = float(_variance_ratio(posterior, np.atleast_2d(baselines)).max())
    if worst <= _OFF_DATA_RATIO:
        return  # the usual case: the training rows' variances are not needed
    data = posterior.data_inputs
    rows = data[np.unique(np.linspace(0, len(data) - 1, min(len(data), _OFF_DATA_ROWS))
                          .astype(int))]
    typical = float(np.median(_variance_ratio(posterior, rows)))
    if worst > _OFF_DATA_FACTOR * typical:
        warnings.warn(
            f"{caller}: the baseline lies where the model knows little more than its prior: "
            f"its posterior variance there is {worst:.0%} of the prior variance (median over "
            f"the training rows: {typical:.0%}), so the attributions carry that uncertainty. "
            "Use a baseline near the data: a real row, or for a table with text columns "
            "baseline='typical' (each text column's most frequent category; the 'mean' of a "
            "one-hot block is a mixture of categories no row has).",
            BaselineWarning, stacklevel=3,
        )


def _variance_ratio(posterior, points: np.ndarray) -> np.ndarray:
    """Posterior over prior variance of the latent at each row of ``points`` (0 where the
    prior variance is 0)."""
    _, variance = posterior.predict(points)
    prior = np.asarray(posterior.kernel.diag(points), dtype=np.float64)
    return np.divide(variance, prior, out=np.zeros_like(prior), where=prior > 0)
