"""The fit stage every command shares, and the held-out split of ``explain``.

Commands call ``stages.fit`` through the module (``from gpexplain.cli import stages``), so a
test can substitute it for a run.
"""

from __future__ import annotations

import time
import warnings

import pandas as pd

from gpexplain.cli.choices import Choice
from gpexplain.cli.common import HOLDOUT_FRACTION, fail
from gpexplain.cli.tasks import TASKS
from gpexplain.models import FitError

__all__ = ["fit", "fit_quietly", "holdout"]


def fit(choice: Choice, X: pd.DataFrame, y: pd.Series, callback, task: str = "regression",
        warm_start=None):
    """Build and fit the estimator of ``choice`` for ``task``, reporting progress through
    ``callback``; ``warm_start``: a fitted model of the same rows (``Regression.build``)."""
    handler = TASKS.get(task)
    model = handler.build(choice, len(X), warm_start)
    return model.fit(X, y, callback=callback)


def fit_quietly(choice: Choice, X: pd.DataFrame, y: pd.Series | pd.DataFrame,
                task: str = "regression"):
    """``(model, seconds)``: a ``fit`` for ``task`` (a regression, or ``"multi-output"`` for
    several target columns) without progress or optimiser warnings; bad data or a failed fit
    exit with code 2 (the ``poe`` and ``sensitivity`` commands)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", module=r"(gpytorch|linear_operator)(\.|$)")
        start = time.perf_counter()
        try:
            model = fit(choice, X, y, lambda step, total: None, task)
        except (ValueError, TypeError, FitError) as error:
            fail(str(error))
    return model, time.perf_counter() - start


def holdout(X: pd.DataFrame, y: pd.Series, choice: Choice, callback, task="regression",
            full_model=None) -> dict:
    """The task's scores (R^2; accuracy, log loss, Brier score) on a seeded 20% split of a
    second model fitted on the other 80% (stratified as the task says; started from
    ``full_model`` where the task can)."""
    from sklearn.model_selection import train_test_split

    handler = TASKS.get(task)
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=HOLDOUT_FRACTION, random_state=choice.seed, stratify=handler.stratify(y)
    )
    result = {"n_train": len(X_train), "n_test": len(X_test)}
    if len(X_test) < 2 or len(X_train) < 2:
        result["skipped"] = "too few rows for a 80/20 split with 2 or more rows on each side"
        return result
    try:
        model = fit(choice, X_train, y_train, callback, task, warm_start=full_model)
    except (ValueError, FitError) as error:  # e.g. every column constant in the split
        result["skipped"] = " ".join(str(error).split())
        return result
    result.update(handler.holdout_scores(model, X_test, y_test))
    return result
