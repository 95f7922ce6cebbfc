"""The tasks ``gpexplain explain`` knows (``--task``), and the guess of ``--task auto``.

A task object (``Regression``, ``Classification``, ``MultiOutputRegression`` for several
``--target`` columns) says how its target is validated, which
options apply, how its estimator is built and fitted, how the held-out split is scored, how
the rows are explained and which files are written; the command runs the same stages for
both.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from gpexplain._registry import Registry
from gpexplain.cli.classification import Classification
from gpexplain.cli.multi_output import MultiOutputRegression
from gpexplain.cli.regression import Regression

__all__ = ["MAX_CODED_CLASSES", "MAX_TEXT_CLASSES", "TASKS", "guess_task"]

MAX_CODED_CLASSES = 10
# A softmax GP classifier has one latent function per class: at hundreds of classes (a numeric
# column read as text) it ran for over 10 minutes at 8.6 GB without a word.
MAX_TEXT_CLASSES = 50
# A text target with at least this share of distinct values is an identifier, not a label.
IDENTIFIER_SHARE = 0.9

TASKS = Registry("task")
TASKS.register("classification", Classification())
TASKS.register("regression", Regression())
TASKS.register("multi-output", MultiOutputRegression())


def guess_task(y: pd.Series | pd.DataFrame, task: str) -> str:
    """``"classification"`` or ``"regression"`` for the target column ``y``; ``"multi-output"``
    for several target columns (a DataFrame), each of which must be a regression target.

    A target is a classification target when ``--task classification`` says so, or (``--task
    auto``) when it is text or booleans, or integer codes ``0..k-1`` / ``1..k`` with ``k <=
    MAX_CODED_CLASSES`` (other integer sets, e.g. wine quality scores 3..8, stay regression
    targets; ``--task`` overrides the guess). A text target is refused rather than guessed
    when it has more than ``MAX_TEXT_CLASSES`` classes, or is identifier-like (more than two
    values, at least ``IDENTIFIER_SHARE`` of them distinct): ``--task classification``
    insists.

    Raises
    ------
    ValueError
        An unknown ``--task``; under ``auto``, a text target with too many classes or one
        like an identifier (the count is named); several targets with ``--task
        classification``, or one of them a class target under ``auto`` (named); ``--task
        multi-output`` with one target.
    """
    text = task.strip().lower()
    choices = ("auto", *TASKS.names())
    if text not in choices:
        raise ValueError(f"unknown --task {task!r}; use {', '.join(choices)}")
    if isinstance(y, pd.DataFrame):
        return _several_targets(y, text)
    if text == "multi-output":
        raise ValueError("--task multi-output needs two or more --target columns")
    if text != "auto":
        return text
    if pd.api.types.is_bool_dtype(y):
        return "classification"
    if not pd.api.types.is_numeric_dtype(y):
        _check_text_classes(y)
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


def _several_targets(Y: pd.DataFrame, task: str) -> str:
    """``"multi-output"``: several targets are explained jointly as a regression only."""
    if task == "classification":
        raise ValueError("several --target columns are explained jointly as a regression; a "
                         "classifier takes one --target")
    for name in Y.columns:
        if task == "auto" and guess_task(Y[name], "auto") == "classification":
            raise ValueError(
                f"target column {str(name)!r} holds class labels, and several --target columns "
                "are explained jointly as a regression only: give it as the only --target to "
                "fit a classifier (or --task regression if its values are numbers)"
            )
    return "multi-output"


def _check_text_classes(y: pd.Series) -> None:
    """Refuse, under ``--task auto``, a text target no classifier can sensibly fit."""
    labels = y.dropna()
    n_classes = int(labels.nunique())
    insist = "use --task classification to fit a classifier anyway"
    numbers_as_text = "numbers read as text? see --decimal"
    if n_classes > MAX_TEXT_CLASSES:
        raise ValueError(
            f"target column {str(y.name)!r} is text with {n_classes} classes (more than "
            f"{MAX_TEXT_CLASSES}, one latent function each); {numbers_as_text}; or {insist}"
        )
    if len(labels) > 2 and n_classes >= IDENTIFIER_SHARE * len(labels):
        raise ValueError(
            f"target column {str(y.name)!r} is text with {n_classes} distinct values in "
            f"{len(labels)} rows, like an identifier; {numbers_as_text}; or {insist}"
        )
