"""Explanation functions called with a fitted ``gx.make_pipeline(...)``.

A pipeline one-hot encodes the text columns of a table before its estimator sees them, so it
is not itself a model of the table's columns: its rows are explained by encoding them,
explaining the estimator on the encoded rows and summing each text column's indicators back
(``CategoricalPipeline._explain_through``). The explanation layer sits below the pipeline
(DESIGN.md's layer table), so it knows a pipeline only by that method.
"""

from __future__ import annotations

import functools

__all__ = ["through_pipeline"]


def through_pipeline(function):
    """``function(model_or_posterior, ...)`` that hands a pipeline to its
    ``_explain_through(function, ...)`` and anything else to ``function`` itself."""

    @functools.wraps(function)
    def explain(model_or_posterior, *args, **kwargs):
        route = getattr(model_or_posterior, "_explain_through", None)
        if route is None:
            return function(model_or_posterior, *args, **kwargs)
        return route(function, *args, **kwargs)

    return explain
