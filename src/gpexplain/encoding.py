"""One-hot encoding of the categorical columns of a table, and explanations in its terms.

The models work on numbers; users' tables hold text. ``CategoricalEncoder`` one-hot encodes
the text and category columns (the categories and indicator names as scikit-learn's
``OneHotEncoder`` learns them; the encoder saves with a model through
``gpexplain.persistence``) and maps an ``Attribution`` of the encoded model back onto the
original columns (``Attribution.group``: each categorical column's attribution is the exact
sum of its indicator columns', with the covariance summed over the block).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

if TYPE_CHECKING:  # annotations only: the data layer sits below results (DESIGN.md)
    from gpexplain.attribution import Attribution

__all__ = ["CategoricalEncoder", "is_categorical"]


def is_categorical(column: pd.Series) -> bool:
    """Text, object and category columns are categorical; numeric and boolean ones are not."""
    dtype = column.dtype
    return not (pd.api.types.is_numeric_dtype(dtype) or pd.api.types.is_bool_dtype(dtype))


class CategoricalEncoder:
    """One-hot encode the categorical columns of a DataFrame; numeric columns pass through.

    Categorical columns are those of text, object or category dtype (``is_categorical``);
    integer and boolean columns are numeric. Each categorical column ``c`` with categories
    ``v1 < v2 < ...`` (sorted, as ``OneHotEncoder`` does) becomes indicator columns
    ``c_v1, c_v2, ...`` (all of them: no category is dropped, so the block of one row sums to
    1 and no category is singled out as a reference). The encoded columns keep the order of the
    original ones.

    Attributes
    ----------
    columns_ : list of str
        The original columns, in order (set by ``fit``, as are the others).
    categorical_ : list of str
        The categorical ones.
    groups_ : dict of str to list of str
        Original column -> its encoded columns (itself for a numeric column).
    feature_names_out_ : list of str
        The encoded columns, in order.
    typical_ : ndarray of shape (n_features_out,)
        The typical encoded row of the fitted table: each numeric column's mean and the
        indicators of each categorical column's most frequent category (ties: the first in
        sorted order). A baseline that is a real category of every text column (the
        ``"mean"`` row's indicators are the category frequencies, a mixture no row has).
    """

    def fit(self, X: pd.DataFrame) -> CategoricalEncoder:
        """Learn the categories of each categorical column of ``X``.

        Raises
        ------
        TypeError
            ``X`` is not a pandas DataFrame.
        ValueError
            A categorical column has a missing value (row named) or one distinct value per row
            (an identifier: it cannot generalise; drop it).
        """
        X = self._check_frame(X, "X")
        self.columns_ = [str(c) for c in X.columns]
        self.categorical_ = [c for c in self.columns_ if is_categorical(X[c])]
        for column in self.categorical_:
            if len(X) > 2 and X[column].nunique() == len(X):
                raise ValueError(
                    f"column {column!r} has a different value in every row ({len(X)} rows), like "
                    "an identifier; drop it (a one-hot block per row cannot generalise)"
                )
        # imported here so that ``import gpexplain`` does not pay for scikit-learn's import
        from sklearn.preprocessing import OneHotEncoder

        self.groups_ = {c: [c] for c in self.columns_}
        self.categories_ = {}
        if self.categorical_:
            # OneHotEncoder learns the categories and names the indicators; only those are
            # kept (not the scikit-learn object), so that the encoder saves with the model
            # (gpexplain.persistence) and ``transform`` needs nothing else.
            encoder = OneHotEncoder().fit(self._prepare(X)[self.categorical_])
            indicators = iter(encoder.get_feature_names_out(self.categorical_))
            self.categories_ = dict(zip(self.categorical_, encoder.categories_, strict=True))
            for column in self.categorical_:
                self.groups_[column] = [next(indicators) for _ in self.categories_[column]]
        self.feature_names_out_ = [name for c in self.columns_ for name in self.groups_[c]]
        self.typical_ = self._typical(X)
        repeated = sorted({n for n in self.feature_names_out_
                           if self.feature_names_out_.count(n) > 1})
        if repeated:
            raise ValueError(
                f"one-hot column names {repeated} clash with other columns; rename the columns"
            )
        return self

    def transform(self, X: pd.DataFrame) -> pd.DataFrame:
        """Encoded table: float64, columns ``feature_names_out_``, the index of ``X``.

        Raises
        ------
        ValueError
            A fitted column is absent, a categorical value is missing, or a category was not
            seen in ``fit`` (column and value named).
        """
        X = self._check_frame(X, "X")
        absent = [c for c in self.columns_ if c not in X.columns]
        if absent:
            raise ValueError(f"X lacks the columns {absent} the encoder was fitted on.")
        X = X[self.columns_]
        for column in self.categorical_:
            unseen = sorted(set(X[column].astype(str)) - set(self.categories_[column]))
            if unseen:
                raise ValueError(
                    f"column {column!r} has categories {unseen} not seen in fit; known: "
                    f"{list(self.categories_[column])}"
                )
        X = self._prepare(X)
        columns = {}
        for column in self.columns_:
            if column in self.categorical_:
                for category, name in zip(self.categories_[column], self.groups_[column],
                                          strict=True):
                    columns[name] = (X[column] == category).to_numpy(np.float64)
            else:
                columns[column] = X[column].to_numpy(np.float64)
        return pd.DataFrame(columns, index=X.index, columns=self.feature_names_out_)

    def fit_transform(self, X: pd.DataFrame) -> pd.DataFrame:
        """``fit(X)`` then ``transform(X)``; errors as those two."""
        return self.fit(X).transform(X)

    def group(self, attribution: Attribution, X: pd.DataFrame) -> Attribution:
        """The attribution of a model of the encoded table, in terms of the original columns.

        Each categorical column's attribution is the sum of its indicator columns'
        (``Attribution.group``), so completeness is kept exactly. ``X`` (the explained rows,
        original columns) supplies the values shown for each column, the category labels for
        categorical ones. The baseline of a categorical column is shown as a mapping from
        category to its indicator's baseline value (for ``baseline="mean"``: the category
        frequencies in the training data).

        Raises
        ------
        ValueError
            ``attribution`` is not over ``feature_names_out_`` or ``X`` does not have its
            rows.
        """
        if list(attribution.feature_names) != self.feature_names_out_:
            raise ValueError(
                f"the attribution's features {attribution.feature_names} are not the encoded "
                f"columns {self.feature_names_out_}."
            )
        X = self._check_frame(X, "X")[self.columns_]
        if len(X) != attribution.n_points:
            raise ValueError(
                f"X has {len(X)} rows but the attribution has {attribution.n_points} points."
            )
        if not self.categorical_:  # nothing was encoded
            return attribution
        values = X.to_numpy(dtype=object) if self.categorical_ else X.to_numpy(np.float64)
        baseline = None
        if attribution.baseline is not None:
            encoded = pd.DataFrame(
                np.atleast_2d(attribution.baseline), columns=self.feature_names_out_
            )
            described = np.empty((len(encoded), len(self.columns_)), dtype=object)
            for j, column in enumerate(self.columns_):
                if column in self.categorical_:
                    for i, row in enumerate(encoded[self.groups_[column]].to_numpy()):
                        described[i, j] = dict(
                            zip(map(str, self.categories_[column]), map(float, row), strict=True)
                        )
                else:
                    described[:, j] = encoded[column].to_numpy()
            baseline = described.reshape(np.shape(attribution.baseline)[:-1] + (-1,))
        return attribution.group(self.groups_, X=values, baseline=baseline)

    # -- helpers -------------------------------------------------------------------------
    def _typical(self, X: pd.DataFrame) -> np.ndarray:
        """``typical_`` (class docstring) of the fitted table ``X``."""
        prepared = self._prepare(X)
        values = []
        for column in self.columns_:
            if column in self.categorical_:
                counts = prepared[column].value_counts()
                frequent = max(self.categories_[column], key=lambda c: counts.get(c, 0))
                values += [float(c == frequent) for c in self.categories_[column]]
            else:
                values.append(float(np.nanmean(X[column].to_numpy(np.float64))))
        return np.array(values)

    @staticmethod
    def _check_frame(X, name: str) -> pd.DataFrame:
        if not isinstance(X, pd.DataFrame):
            raise TypeError(
                f"{name} must be a pandas DataFrame (columns are matched by name), got "
                f"{type(X).__name__}."
            )
        return X.set_axis([str(c) for c in X.columns], axis=1)

    def _prepare(self, X: pd.DataFrame) -> pd.DataFrame:
        """Categorical columns as strings (OneHotEncoder needs one type per column)."""
        X = X.copy()
        for column in self.categorical_:
            missing = X[column].isna().to_numpy()
            if missing.any():
                raise ValueError(
                    f"categorical column {column!r} has a missing value at row "
                    f"{X.index[missing.argmax()]!r}; fill it in or drop those rows"
                )
            X[column] = X[column].astype(str).astype(object)
        return X
