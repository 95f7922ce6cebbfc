"""A GP estimator behind a one-hot encoder: fit, predict and explain tables with text columns.

``gx.make_pipeline(estimator)`` returns a ``CategoricalPipeline``: it one-hot encodes the
categorical columns of a DataFrame (``gpexplain.encoding.CategoricalEncoder``, with the
categories scikit-learn's ``OneHotEncoder`` learns), fits the estimator on the encoded table
and explains rows in terms of the original columns, by ``explain`` or by passing the fitted
pipeline to ``gx.integrated_gradients``, ``gx.shapley_values`` or ``gx.global_sensitivity``.
``save`` writes the encoder with the estimator (``gx.load`` reads it back).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable

import pandas as pd
from sklearn.base import clone

from gpexplain.attribution import Attribution
from gpexplain.encoding import CategoricalEncoder
from gpexplain.explain import integrated_gradients
from gpexplain.kernels.measures import Empirical
from gpexplain.persistence import save

__all__ = ["CategoricalPipeline", "make_pipeline"]


class CategoricalPipeline:
    """One-hot encoding of the categorical columns, then a gpexplain GP estimator.

    Parameters
    ----------
    estimator : gpexplain estimator
        Unfitted, e.g. ``gx.GPRegressor()``; a clone is fitted on the encoded table.

    Attributes
    ----------
    encoder_ : CategoricalEncoder
    estimator_ : fitted clone of ``estimator``, over ``encoder_.feature_names_out_``.
    """

    def __init__(self, estimator):
        self.estimator = estimator

    def fit(self, X: pd.DataFrame, y, **fit_params) -> CategoricalPipeline:
        """Encode ``X`` (a DataFrame) and fit the estimator; returns ``self``.

        Raises
        ------
        TypeError
            ``X`` is not a DataFrame, or ``estimator`` has no ``fit``.
        ValueError
            As ``CategoricalEncoder.fit`` and the estimator's ``fit``.
        """
        if not hasattr(self.estimator, "fit"):
            raise TypeError(
                f"estimator must be a gpexplain estimator, got {type(self.estimator).__name__}."
            )
        self.encoder_ = CategoricalEncoder().fit(X)
        self.estimator_ = clone(self.estimator).fit(self.encoder_.transform(X), y, **fit_params)
        return self

    def transform(self, X: pd.DataFrame) -> pd.DataFrame:
        """The encoded table the estimator sees (float64, one-hot blocks in column order)."""
        self._check_fitted()
        return self.encoder_.transform(X)

    def predict(self, X: pd.DataFrame, **kwargs):
        """The estimator's prediction on the encoded rows (keyword arguments passed on)."""
        return self.estimator_.predict(self.transform(X), **kwargs)

    def score(self, X: pd.DataFrame, y) -> float:
        """R^2 of the prediction (the estimator's ``score``)."""
        return self.estimator_.score(self.transform(X), y)

    def explain(
        self, X: pd.DataFrame, baseline="typical", *, method: Callable = integrated_gradients,
        **kwargs,
    ) -> Attribution:
        """Explain rows in terms of the original columns, with uncertainty.

        The explanation ``method`` runs on the encoded rows; ``CategoricalEncoder.group`` then
        sums each categorical column's indicator attributions, means and covariance blocks
        alike, so completeness is exact. For integrated gradients (the default) this sum is the
        integrated gradient of the block along the same straight path.

        Baselines of one-hot columns: ``"typical"`` (default) is each numeric column's mean
        and each text column's most frequent category (``CategoricalEncoder.typical_``), so
        a text column's attribution reads "this category rather than the most common one".
        ``"mean"`` is the mean of the encoded training table, whose indicator entries are
        the category frequencies: a mixture of categories no row has; where an indicator's
        fitted lengthscale is short the model knows only its prior there (measured on a
        real 86-row table: posterior variance 100% of the prior's at the "mean" row, 5% at
        the "typical" one, median 11% over the training rows), and the attributions carry
        that uncertainty (``BaselineWarning`` says so). ``"median"`` and ``"zeros"`` are
        taken per indicator (``"zeros"``: no category at all). A pandas Series or one-row
        DataFrame of original column values is encoded like a row: its categories are real
        ones.

        Parameters
        ----------
        X : pandas.DataFrame of shape (n_points, n_columns)
            Rows to explain, the columns ``fit`` saw (matched by name).
        baseline : {"typical", "mean", "median", "zeros"}, pandas Series or DataFrame,
            default "typical"
            As above; passed to ``method`` when it takes one.
        method : callable, default ``gx.integrated_gradients``
            ``method(estimator, X_encoded, baseline=..., **kwargs)`` or, for
            ``gx.shapley_values`` (additive models; the sum over a block is then the sum of
            its indicators' Shapley values), ``method(estimator, X_encoded, **kwargs)``.
        **kwargs
            Passed to ``method``.

        Returns
        -------
        Attribution
            Over the original columns; ``X`` holds category labels for categorical columns
            and ``baseline`` a category -> indicator value mapping for them.

        Raises
        ------
        TypeError
            ``X`` not a DataFrame or a baseline of the wrong type.
        ValueError
            Unknown columns or categories (named), a baseline for a method without one, and
            whatever ``method`` raises.
        """
        self._check_fitted()
        encoded = self.encoder_.transform(X)
        if not isinstance(baseline, str | pd.Series | pd.DataFrame):
            raise TypeError(
                "baseline must be 'typical', 'mean', 'median', 'zeros' or a pandas "
                f"Series/DataFrame of original column values, got {type(baseline).__name__}."
            )
        asked = baseline
        baseline = self._encode_rows(baseline)
        if "baseline" in inspect.signature(method).parameters:
            attribution = method(self.estimator_, encoded, baseline=baseline, **kwargs)
        elif isinstance(asked, str) and asked == "typical":  # the default: nothing asked
            attribution = method(self.estimator_, encoded, **kwargs)
        else:
            raise ValueError(f"{getattr(method, '__name__', method)} takes no baseline.")
        return self.encoder_.group(attribution, X)

    def _encode_rows(self, rows):
        """A pandas Series (one row) or DataFrame of original column values, encoded;
        ``"typical"`` as ``encoder_.typical_``; anything else as it is."""
        if isinstance(rows, str) and rows == "typical":
            return self.encoder_.typical_
        if isinstance(rows, pd.Series):
            rows = rows.to_frame().T
        if isinstance(rows, pd.DataFrame):
            return self.encoder_.transform(rows.infer_objects())
        return rows

    def _explain_through(self, function: Callable, *args, **kwargs):
        """``function(pipeline, ...)`` for an explanation function of ``gpexplain.explain``
        (``gx.integrated_gradients``, ``gx.shapley_values``, ``gx.global_sensitivity``).

        A local explanation (the function takes ``X``) runs on the encoded rows with the
        arguments as given (pandas ``baseline`` and ``background`` rows of original column
        values are encoded like ``X``; arrays must hold the encoded columns; ``"typical"``
        is ``encoder_.typical_``, and the default of a function whose own default baseline
        is ``"mean"``, as ``explain``'s) and is summed
        back per original column (``CategoricalEncoder.group``), as ``explain`` does. A global
        one (``global_sensitivity``) is of the encoded columns: each indicator is one feature,
        and Sobol indices and Shapley effects of a one-hot block are not the sums of its
        indicators', so they are not summed. Its default ``measure`` is then the empirical
        measure of the encoded training rows (each indicator's own frequencies; the Gaussian
        default would put mass between 0 and 1).

        Raises
        ------
        ValueError
            The pipeline is not fitted, and whatever ``function`` raises.
        """
        self._check_fitted()
        arguments = inspect.signature(function).bind(self.estimator_, *args, **kwargs).arguments
        if "X" not in arguments:
            if arguments.get("measure") is None:
                arguments["measure"] = Empirical(self.estimator_.posterior_.data_inputs)
            return function(**arguments)
        X = arguments["X"]
        arguments["X"] = self.encoder_.transform(X)
        if _default_baseline(function) == "mean" and "baseline" not in arguments:
            arguments["baseline"] = "typical"  # as ``explain``: a real category per block
        for name in ("baseline", "background"):
            if name in arguments:
                arguments[name] = self._encode_rows(arguments[name])
        return self.encoder_.group(function(**arguments), X)

    def save(self, path):
        """Save the fitted pipeline, its encoder with its estimator; ``gx.load`` reads it back.

        The format of ``gpexplain.persistence`` (JSON and ``.npz`` arrays, no pickle): the
        encoder's categories and indicator names travel with the model, so the loaded pipeline
        encodes, predicts and explains tables with text columns as the original does.

        Parameters
        ----------
        path : str or os.PathLike
            A directory, or a single file ending in ``.npz``.

        Returns
        -------
        pathlib.Path

        Raises
        ------
        ValueError
            The pipeline is not fitted.
        TypeError
            As ``gx.save``.
        """
        self._check_fitted()
        return save(self, path)

    def _check_fitted(self) -> None:
        if not hasattr(self, "estimator_"):
            raise ValueError("this CategoricalPipeline is not fitted; call fit(X, y) first.")


def make_pipeline(estimator) -> CategoricalPipeline:
    """A ``CategoricalPipeline``: one-hot encoding of text/category columns, then ``estimator``.

    Examples
    --------
    >>> pipeline = gx.make_pipeline(gx.GPRegressor()).fit(X, y)  # X: DataFrame with text
    >>> attribution = pipeline.explain(X.iloc[:5])  # one attribution per original column
    """
    return CategoricalPipeline(estimator)



def _default_baseline(function: Callable):
    """The default of ``function``'s ``baseline`` parameter (None without one)."""
    parameter = inspect.signature(function).parameters.get("baseline")
    return None if parameter is None else parameter.default
