"""What ``gpexplain explain`` does with a categorical target: the classification mode.

A target is a classification target when ``--task classification`` says so, or (``--task
auto``) when it is text or booleans, or integer codes ``0..k-1`` / ``1..k`` with ``k <=
MAX_CODED_CLASSES`` (other integer sets, e.g. wine quality scores 3..8, stay regression
targets; ``--task`` overrides the guess). The model is a ``GPClassifier``; each class gets
integrated gradients (``--method ig``, also of its expected probability) or exact Shapley values
(``--method shapley``, latent only: the probability is not linear in the latent) of its latent
function (binary: the log-odds of the second class; softmax: each class's own latent); the
held-out split reports accuracy, log loss and the Brier score.
Estimators and explanations are imported when used, so ``gpexplain --help`` stays fast.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

__all__ = [
    "MAX_CODED_CLASSES",
    "TASKS",
    "build_classifier",
    "check_choice",
    "describe_output",
    "explained_classes",
    "file_label",
    "json_label",
    "explain_by_class",
    "probability_by_class",
    "guess_task",
    "holdout_metrics",
]

TASKS = ("auto", "classification", "regression")
MAX_CODED_CLASSES = 10


def guess_task(y: pd.Series, task: str) -> str:
    """``"classification"`` or ``"regression"`` for the target column ``y``.

    Raises
    ------
    ValueError
        An unknown ``--task``.
    """
    text = task.strip().lower()
    if text not in TASKS:
        raise ValueError(f"unknown --task {task!r}; use {', '.join(TASKS)}")
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


def check_choice(choice) -> None:
    """The command-line options the classification mode accepts (ValueError otherwise)."""
    if choice.model not in ("exact", "sparse"):
        raise ValueError(
            f"--model {choice.model} is a regression model; a classification target is fitted "
            "by the sparse variational GP classifier (leave --model at its default, or use "
            "--task regression)"
        )
    if choice.method not in ("ig", "shapley"):
        raise ValueError(
            f"--method {choice.method} does not apply to classification; use ig or shapley"
        )


def json_label(label):
    """A class label as JSON writes it (int, bool or str)."""
    if isinstance(label, bool | np.bool_):
        return bool(label)
    if isinstance(label, int | np.integer):
        return int(label)
    if isinstance(label, float | np.floating):
        return int(label)  # integer-coded labels (validated integral)
    return str(label)


def file_label(label) -> str:
    """A class label usable in a file name."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", str(json_label(label))).strip("_") or "class"


def describe_output(model, choice) -> str:
    """What the explanations of ``explain_by_class`` are of, for summary.json and figures."""
    method = "integrated gradients" if choice.method == "ig" else (
        f"exact Shapley values ({choice.options['game']} game)")
    if model.link_ == "softmax":
        return f"latent function of each class (softmax input), {method}"
    return f"latent {model.link_} of class {json_label(model.classes_[1])}, {method}"


def explained_classes(model) -> list:
    """The classes with an explained latent: every class (softmax), else ``classes_[1]``."""
    return list(model.classes_) if model.link_ == "softmax" else [model.classes_[1]]


def build_classifier(kernel: str, n_inducing: int, n_rows: int, seed: int):
    """An unfitted ``GPClassifier`` (sparse variational; at most ``n_rows`` inducing points)."""
    from gpexplain.models.gp_classifier import GPClassifier

    return GPClassifier(kernel=kernel, n_inducing=min(n_inducing, n_rows), random_state=seed)


def explain_by_class(model, X, baseline, choice) -> dict:
    """Latent explanations per explained class: ``{class label: Attribution}``.

    Binary links explain the one latent, the log-odds (probit) of ``classes_[1]``; the
    softmax explains every class's latent. This is the one place that chooses the level of
    the explanation (with ``describe_output``): the latent, an exact Gaussian, by integrated
    gradients or (``--method shapley``) the exact Shapley values of ``choice``'s game.
    """
    from gpexplain._cli_models import product_shapley
    from gpexplain.explain import integrated_gradients

    if choice.method == "shapley":
        return {
            label: product_shapley(model, X, baseline, target_class=label, **choice.options)
            for label in explained_classes(model)
        }
    return {
        label: integrated_gradients(model, X, baseline=baseline, output="latent",
                                    target_class=label)
        for label in explained_classes(model)
    }


def probability_by_class(model, X, baseline, choice) -> dict:
    """Integrated gradients of the expected class probability E[p_c(x)] per explained class
    (the classes of ``explain_by_class``): ``{class label: Attribution}``, means only (the
    binary covariance costs G^2 path-node pairs per row; the CLI's intervals are the
    latent's). Empty for ``--method shapley``: Shapley values exist for the latent only."""
    from gpexplain.explain import integrated_gradients

    if choice.method != "ig":
        return {}
    return {
        label: integrated_gradients(model, X, baseline=baseline, target_class=label,
                                    return_cov=False)
        for label in explained_classes(model)
    }


def holdout_metrics(model, X_test, y_test) -> dict:
    """Accuracy, log loss (nats) and Brier score of ``model`` on the held-out rows.

    Brier score: the mean over rows of ``sum_c (p_c - 1[y = c])^2`` (Brier 1950), which for
    two classes is twice the binary form ``(p_1 - y_1)^2``; both are reported as
    ``brier_score`` and ``brier_score_binary`` (None for more classes).
    """
    from sklearn.metrics import log_loss

    probabilities = model.predict_proba(X_test)
    truth = np.asarray(y_test)[:, None] == model.classes_[None, :]
    brier = float(np.mean(np.sum((probabilities - truth) ** 2, axis=1)))
    accuracy = float(np.mean(model.classes_[probabilities.argmax(axis=1)] == np.asarray(y_test)))
    return {
        "accuracy": accuracy,
        "log_loss": float(log_loss(np.asarray(y_test), probabilities, labels=model.classes_)),
        "brier_score": brier,
        "brier_score_binary": brier / 2 if model.classes_.size == 2 else None,
    }
