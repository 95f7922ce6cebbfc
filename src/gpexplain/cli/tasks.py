"""The tasks ``gpexplain explain`` knows (``--task``), and the guess of ``--task auto``.

A task object (``Regression``, ``Classification``) says how its target is validated, which
options apply, how its estimator is built and fitted, how the held-out split is scored, how
the rows are explained and which files are written; the command runs the same stages for
both.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from gpexplain._registry import Registry
from gpexplain.cli.classification import Classification
from gpexplain.cli.regression import Regression

__all__ = ["MAX_CODED_CLASSES", "TASKS", "guess_task"]

MAX_CODED_CLASSES = 10

TASKS = Registry("task")
TASKS.register("classification", Classification())
TASKS.register("regression", Regression())


def guess_task(y: pd.Series, task: str) -> str:
    """``"classification"`` or ``"regression"`` for the target column ``y``.

    A target is a classification target when ``--task classification`` says so, or (``--task
    auto``) when it is text or booleans, or integer codes ``0..k-1`` / ``1..k`` with ``k <=
    MAX_CODED_CLASSES`` (other integer sets, e.g. wine quality scores 3..8, stay regression
    targets; ``--task`` overrides the guess).

    Raises
    ------
    ValueError
        An unknown ``--task``.
    """
    text = task.strip().lower()
    choices = ("auto", *TASKS.names())
    if text not in choices:
        raise ValueError(f"unknown --task {task!r}; use {', '.join(choices)}")
    if text != "auto":
        return text
    if pd.api.types.is_bool_dtype(y) or not pd.api.types.is_numeric_dtype(y):
        return "classification"
    values = y.dropna().to_numpy(dtype=np.float64)
    if values.size == 0 or not np.all(np.isfinite(values)) or np.any(values != np.round(values)):
        return "regression"
    levels = np.unique(values)
    coded = levels.size <= MAX_CODED_CLASSES and (
        np.array_equal(levels, np.arange(levels.size))
        or np.array_equal(levels, np.arange(1, levels.size + 1))
    )
    return "classification" if coded else "regression"
