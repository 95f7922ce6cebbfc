"""The regression task of ``gpexplain explain``: a numeric target, any regression family.

Fits the ``--model`` family, explains the rows (on a Dask cluster with ``--dask-scheduler`` or
``--workers``), scores R^2 on the held-out split, and writes ``attributions.csv``,
``summary.json``, ``attributions.png`` and ``importance.png`` (plus ``weights.csv`` for GPX and
``global_shapley.png`` for the additive GP).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from gpexplain._validation import as_target
from gpexplain.cli import methods
from gpexplain.cli.choices import family
from gpexplain.cli.common import HOLDOUT_FRACTION, finite_or_none, write_json
from gpexplain.cli.output import (
    finish,
    importance_summary,
    save_attribution_figures,
    summary,
    top_features_table,
    write_table,
)
from gpexplain.interactions import ShapleyInteractions

__all__ = ["Regression"]


class Regression:
    """What ``gpexplain explain`` does with a numeric target."""

    holdout_score = "R^2"

    @staticmethod
    def target(y: pd.Series, name: str) -> pd.Series:
        """The target as float64; TypeError/ValueError for text or a missing/infinite value."""
        if not (pd.api.types.is_numeric_dtype(y) or pd.api.types.is_bool_dtype(y)):
            raise TypeError(
                f"target column {name!r} is not numeric (e.g. {y.dropna().iloc[0]!r}); "
                "a regression needs numbers (--task classification fits a classifier)"
            )
        as_target(y, len(y), name=f"target column {name!r}")
        return y.astype(np.float64)

    @staticmethod
    def check(choice, executor) -> None:
        """Every regression family applies; every executor but for ``--method interactions``
        (computed in this process), which is refused before fitting."""
        if choice.method == "interactions" and executor != (None, None):
            raise ValueError("--dask-scheduler and --workers do not apply to --method "
                             "interactions (it runs in this process; drop them)")

    @staticmethod
    def empty_holdout(seed: int) -> dict:
        """The held-out entry of ``summary.json`` before it is scored."""
        return {"r2": None, "test_fraction": HOLDOUT_FRACTION, "seed": seed}

    @staticmethod
    def fit_label(choice) -> str:
        return f"{choice.model} GP"

    @staticmethod
    def build(choice, n_rows: int, warm_start=None):
        """An unfitted estimator of ``--model``'s family.

        ``warm_start``: a fitted exact ARD ``GPRegressor`` whose hyperparameters are the one
        start of this fit (the held-out fit on 80% of the same rows: its optimum is close, so
        the random restarts would only repeat the full fit's search). Other models ignore it:
        their fitted kernels are not starting points of the same parameterisation.
        """
        model = family(choice.model).build(choice.settings(n_rows))
        if warm_start is not None and choice.model == "exact" and choice.kernel == "ard":
            model.set_params(kernel=warm_start.kernel_, noise=warm_start.noise_, n_restarts=0)
        return model

    @staticmethod
    def stratify(y):
        """Regression splits are not stratified."""
        return None

    @staticmethod
    def holdout_scores(model, X_test, y_test) -> dict:
        return {"r2": finite_or_none(model.score(X_test, y_test))}

    @staticmethod
    def explain(choice, model, X_model, X, positions, baseline, encoder, client):
        """``(attribution of X's columns, attribution of the model's columns, extras)``;
        on the Dask cluster of ``client`` (``parallel.dask_client``) when it is not None."""
        explained = X_model.iloc[positions]
        encoded = methods.explain(choice, model, explained, baseline, client)
        interactions = None
        if isinstance(encoded, ShapleyInteractions):  # --method interactions
            # attributions.csv holds the exact Shapley values (a linear map of the values)
            interactions, encoded = encoded, encoded.shapley_values()
        attr = encoder.group(encoded, X.iloc[positions])
        importance = methods.importance(attr)  # while the cluster is up
        extras = methods.extras(family(choice.model), model, explained)
        if interactions is not None:
            extras["interactions"] = interactions
        extras["importance"] = importance
        return attr, encoded, extras

    @staticmethod
    def write(model, explanation, X, X_model, record, context, out, stdout, report, saved):
        """Write the outputs into the folder ``out``, print the top features and R^2; the
        names of the files written. The table and figures name ``X``'s columns, the summary
        the model's (``X_model``)."""
        # matplotlib loads with the first figure, not with every command (gpexplain --version)
        from gpexplain.plot import plot_global_shapley, plot_interactions
        attr, encoded, extras = explanation
        explained = record.explained
        written = ["attributions.csv", "summary.json", "attributions.png", "importance.png",
                   *saved]
        write_table(attr, explained, out / "attributions.csv")
        if "weights" in extras:
            write_table(extras["weights"], explained, out / "weights.csv", value_name="weight")
            written.append("weights.csv")
        hyperparameters = family(record.choice.model).hyperparameters(model, X_model.columns)
        result = summary(model, hyperparameters, encoded, extras, X_model, record)
        result.update(context)
        result["predictions"] = [float(p) for p in attr.prediction]  # for the report
        result["global_importance"] = importance_summary(*extras["importance"])
        write_json(out / "summary.json", result)
        save_attribution_figures(attr, explained, out, importance=extras["importance"][0])
        if "global" in extras:
            plot_global_shapley(extras["global"]).savefig(out / "global_shapley.png", dpi=120)
            written.append("global_shapley.png")
        if "interactions" in extras:
            write_table(extras["interactions"], explained, out / "interactions.csv",
                        value_name="value")
            plot_interactions(extras["interactions"]).savefig(out / "interactions.png", dpi=120)
            written += ["interactions.csv", "interactions.png"]
        stdout.print(top_features_table(attr, explained[0]))
        r2 = record.holdout.get("r2")
        if r2 is not None:
            stdout.print(f"Held-out R^2 (seeded {HOLDOUT_FRACTION:.0%} split): {r2:.3f}")
        return finish(out, written, report)
