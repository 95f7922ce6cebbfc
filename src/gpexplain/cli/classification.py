"""The classification task of ``gpexplain explain``: a target of class labels.

The model is the classifier family's ``GPClassifier`` (``--model exact`` or ``sparse`` choose
it); each class gets integrated gradients (``--method ig``, also of its expected probability)
or exact Shapley values (``--method shapley``, latent only: the probability is not linear in
the latent) of its latent function (binary: the log-odds of the second class; softmax: each
class's own latent); the held-out split reports accuracy, log loss and the Brier score. The
outputs are ``attributions.csv`` with a ``class`` column, ``summary.json`` and
``attributions_<class>.png`` / ``importance_<class>.png`` per explained class.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from gpexplain._validation import as_class_labels
from gpexplain.cli import methods
from gpexplain.cli.choices import cli_method, family
from gpexplain.cli.common import HOLDOUT_FRACTION, finite_or_none, say, write_json
from gpexplain.cli.output import (
    attribution_table,
    finish,
    importance_summary,
    save_attribution_figures,
    summary,
    top_features_table,
    write_csv,
)

__all__ = ["Classification", "describe_output", "file_label", "holdout_metrics", "json_label"]

CLASSIFIER = family("exact", "classification")


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
    """What the explanations of ``Classification.explain`` are of, for summary.json and
    figures."""
    method = "integrated gradients" if choice.method == "ig" else (
        f"exact Shapley values ({choice.options['game']} game)")
    if model.link_ == "softmax":
        return f"latent function of each class (softmax input), {method}"
    return f"latent {model.link_} of class {json_label(model.classes_[1])}, {method}"


def latent_units(model, label) -> str:
    """What the latent attributions of class ``label`` are in, for the figures' axes: the
    classifier's latent, not the target (which is a class label and has no units)."""
    name = repr(str(json_label(label)))
    if model.link_ == "softmax":
        return f"latent f of class {name}, the softmax input"
    return f"latent {'log-odds' if model.link_ == 'logit' else 'probit'} of class {name}"


def explained_classes(model) -> list:
    """The classes with an explained latent: every class (softmax), else ``classes_[1]``."""
    return list(model.classes_) if model.link_ == "softmax" else [model.classes_[1]]


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


class Classification:
    """What ``gpexplain explain`` does with a target of class labels."""

    holdout_score = "scores"

    @staticmethod
    def target(y: pd.Series, name: str) -> pd.Series:
        """The labels as they are (any dtype); ValueError for a missing label or one class."""
        as_class_labels(y, len(y), name=f"target column {name!r}")
        return y

    @staticmethod
    def check(choice, executor) -> None:
        """ValueError for options the classifier does not take."""
        family(choice.model, "classification")
        methods_ = tuple(map(cli_method, CLASSIFIER.methods))
        if choice.method not in methods_:
            raise ValueError(f"--method {choice.method} does not apply to classification; use "
                             + " or ".join(methods_))
        if executor != (None, None):
            raise ValueError(
                "--dask-scheduler and --workers apply to regressions; the classification "
                "mode explains in this process (drop them)"
            )

    @staticmethod
    def empty_holdout(seed: int) -> dict:
        return {"accuracy": None, "log_loss": None, "brier_score": None,
                "test_fraction": HOLDOUT_FRACTION, "seed": seed}

    @staticmethod
    def fit_label(choice) -> str:
        return "GP classifier"

    @staticmethod
    def build(choice, n_rows: int, warm_start=None):
        """An unfitted ``GPClassifier`` (sparse variational; at most ``n_rows`` inducing
        points); a classifier's fit does not start from another's."""
        return CLASSIFIER.build(choice.settings(n_rows))

    @staticmethod
    def stratify(y):
        """Stratified by class where every class has 2 rows."""
        return y if y.value_counts().min() >= 2 else None

    @staticmethod
    def holdout_scores(model, X_test, y_test) -> dict:
        if not set(y_test) <= set(model.classes_):
            return {"skipped": "a class of the held-out rows is missing from the training rows"}
        return holdout_metrics(model, X_test, y_test)

    @staticmethod
    def explain(choice, model, X_model, X, positions, baseline, encoder, client):
        """``(latent attributions, probability attributions, latent attributions of the
        model's columns)``, each ``{class label: Attribution}``; the first two over X's
        columns (a text column's indicators summed), the third over ``X_model``'s (what
        ``summary.json`` records, as the regression task does).

        Binary links explain the one latent, the log-odds (probit) of ``classes_[1]``; the
        softmax explains every class's latent: exact Gaussians, by integrated gradients or
        (``--method shapley``) the exact Shapley values of the game. The probability level
        (integrated gradients of E[p_c(x)], means only) exists for ``--method ig``; Shapley
        values exist for the latent only.
        """
        explained, shown = X_model.iloc[positions], X.iloc[positions]
        classes = explained_classes(model)
        encoded = {
            label: methods.explain(choice, model, explained, baseline, target_class=label)
            for label in classes
        }
        latent = {label: encoder.group(attr, shown) for label, attr in encoded.items()}
        probability = {
            label: encoder.group(
                methods.probability_attribution(model, explained, baseline, label), shown
            )
            for label in classes if choice.method == "ig"
        }
        return latent, probability, encoded

    @staticmethod
    def write(model, explanation, X, X_model, record, context, out, stdout, report, saved):
        """Write ``attributions.csv`` (a ``class`` column; ``probability_attribution`` for
        integrated gradients), ``summary.json`` (held-out accuracy, log loss and Brier score
        instead of R^2; the latent ``predictions`` per class for the report) and the figures
        per class into the folder ``out``; print each class's top features and the scores;
        return the names of the files written.

        ``explanation``: ``(latent, probability, encoded)`` of ``explain``, sharing classes
        and points in the same order; ``probability`` is empty for Shapley values, and then its
        column and summary entries are left out. The table and figures name ``X``'s columns,
        the summary the model's (``X_model``: a text column's indicators, whose baseline
        entries are numbers; ``categorical_columns`` maps them back), as for regression."""
        attributions, probabilities, encoded = explanation
        explained = record.explained
        labels = {label: json_label(label) for label in attributions}
        tables = []
        for label, attr in attributions.items():
            table = attribution_table(attr, explained)
            table.insert(1, "class", labels[label])
            if probabilities:
                table.insert(table.columns.get_loc("attribution") + 1, "probability_attribution",
                             probabilities[label].mean.ravel())
            tables.append(table)
        write_csv(pd.concat(tables, ignore_index=True), out / "attributions.csv")

        hyperparameters = {
            str(json_label(label)): report_
            for label, report_ in CLASSIFIER.hyperparameters(model, X_model.columns).items()
        }
        result = summary(model, hyperparameters, next(iter(encoded.values())), {}, X_model,
                         record)
        result.update({
            "task": "classification",
            "model": "sparse variational GP classifier",
            "classes": [json_label(label) for label in model.classes_],
            "link": model.link_,
            "explained_classes": list(labels.values()),
            "explained_output": describe_output(model, record.choice),
            "hyperparameter_units": "lengthscales in units of X; variance and mean in (squared) "
            "latent units",
            "elbo": finite_or_none(model.elbo_),
            "completeness_gap": {
                str(labels[label]): {key: attr.completeness_gap()[key]
                                     for key in ("mean", "variance")}
                for label, attr in attributions.items()
            },
            "predictions": {  # the latent means the attributions complete to, for the report
                str(labels[label]): [float(p) for p in attr.prediction]
                for label, attr in attributions.items()
            },
            **context,
        })
        importances = {label: methods.importance(attr) for label, attr in attributions.items()}
        result["global_importance"] = {  # exact, per class (latent)
            str(labels[label]): importance_summary(*found)
            for label, found in importances.items()
        }
        if probabilities:
            result.update(_probability_summary(labels, probabilities))
        if result["baseline"] is not None:
            result["baseline"]["prediction"] = {
                str(labels[label]): float(attr.baseline_prediction)
                for label, attr in attributions.items()
            }
        write_json(out / "summary.json", result)

        written = ["attributions.csv", "summary.json"]
        for label, attr in attributions.items():
            units = latent_units(model, label)
            written += save_attribution_figures(
                attr, explained, out, suffix=f"_{file_label(label)}",
                title=f"class {labels[label]}: {result['explained_output']}",
                xlabels=(f"attribution ({units})", f"mean |attribution| ({units})"),
                importance=importances[label][0],
            )
            say(stdout, f"Class {labels[label]}")
            stdout.print(top_features_table(attr, explained[0]))
        if record.holdout.get("accuracy") is not None:
            stdout.print(
                f"Held-out (seeded {HOLDOUT_FRACTION:.0%} split): accuracy "
                f"{record.holdout['accuracy']:.3f}, log loss {record.holdout['log_loss']:.3f}, "
                f"Brier score {record.holdout['brier_score']:.3f}"
            )
        return finish(out, written + saved, report)


def _probability_summary(labels: dict, probabilities: dict) -> dict:
    """summary.json entries of the probability-level integrated gradients, per class."""
    return {
        "probability_completeness_gap": {
            str(labels[label]): attr.completeness_gap()["mean"]
            for label, attr in probabilities.items()
        },
        "expected_probability": {
            str(labels[label]): [float(p) for p in attr.prediction]
            for label, attr in probabilities.items()
        },
        "baseline_expected_probability": {
            str(labels[label]): float(attr.baseline_prediction)
            for label, attr in probabilities.items()
        },
    }
