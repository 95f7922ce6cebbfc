"""Several regression targets: the columns of a 2-D y, by name, and the independent fit of
each (issue 24)."""

from __future__ import annotations

import numpy as np
from sklearn.base import clone

from gpexplain._torch import to_numpy
from gpexplain.posterior import IndependentOutputs

__all__ = ["IndependentOutputsFit", "target_columns"]


def target_columns(y) -> dict[str, object] | None:
    """``{output name: column}`` for a y of more than one column; None for one column.

    A DataFrame's columns keep their names (and stay pandas Series); other 2-D arrays (NumPy,
    torch, lists of rows) give ``y0, y1, ...``. The columns are validated by the fit of each
    output.

    Raises
    ------
    ValueError
        A y with more than two dimensions, or repeated DataFrame column names.
    """
    if hasattr(y, "columns") and hasattr(y, "iloc"):
        if y.shape[1] <= 1:
            return None
        names = [str(name) for name in y.columns]
        if len(set(names)) != len(names):
            raise ValueError(f"y has repeated column names {names}; name each output once.")
        return {name: y.iloc[:, j] for j, name in enumerate(names)}
    if hasattr(y, "detach"):
        y = to_numpy(y)
    if hasattr(y, "shape") or isinstance(y, list | tuple):
        values = y if hasattr(y, "shape") else np.asarray(y)
        if values.ndim > 2:
            raise ValueError(f"y must be 1-D or 2-D (one column per output), got shape "
                             f"{values.shape}.")
        if values.ndim == 2 and values.shape[1] > 1:
            return {f"y{j}": np.asarray(values[:, j]) for j in range(values.shape[1])}
    return None


class IndependentOutputsFit:
    """``fit`` on a 2-D y for a posterior estimator: one independent fit per column.

    Mixed in before ``PosteriorEstimator`` by the regressors that fit several outputs (their
    ``multi_output`` parameter, first value ``"independent"``). A y of one column goes to the
    single-output fit; a y of t > 1 columns (``target_columns``) is fitted column by column by
    clones of the estimator with the same parameters (so each equals a single-output fit of
    that column, bit for bit): ``estimators_`` holds them, ``output_names_`` their names,
    ``posterior_`` is ``gx.IndependentOutputs`` of their posteriors, and the fitted attributes
    named in ``_output_lists`` / ``_output_arrays`` become lists / NumPy arrays over the
    outputs (first axis). Another ``multi_output`` form is the estimator's own
    ``_fit_joint(X, columns)``.
    """

    _output_lists: tuple[str, ...] = ()
    _output_arrays: tuple[str, ...] = ()

    def fit(self, X, y, *, callback=None):
        """Fit (``PosteriorEstimator.fit``); a 2-D y of several columns fits one independent
        model per column (or, for another ``multi_output`` form, one joint model)."""
        columns = target_columns(y)
        if columns is None:
            return super().fit(X, y, callback=callback)
        self._validate_params()
        if self.multi_output != "independent":
            return self._fit_joint(X, columns)
        self.estimators_ = [clone(self).fit(X, column, callback=callback)
                            for column in columns.values()]
        first = self.estimators_[0]
        self.output_names_ = list(columns)
        self.posterior_ = IndependentOutputs([e.posterior_ for e in self.estimators_],
                                             self.output_names_)
        for name in self._output_lists:
            setattr(self, name, [getattr(e, name) for e in self.estimators_])
        for name in self._output_arrays:
            setattr(self, name, np.array([getattr(e, name) for e in self.estimators_]))
        self.n_features_in_ = first.n_features_in_
        if hasattr(first, "feature_names_in_"):
            self.feature_names_in_ = first.feature_names_in_
        return self

    def _fit_joint(self, X, columns):
        raise NotImplementedError
