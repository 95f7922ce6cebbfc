"""The multi-output regression task of ``gpexplain explain``: several numeric ``--target``
columns explained jointly.

One model of all the targets (a family with ``multi_output`` forms: the exact GP, independent
GPs per target by default or ``--multi-output icm``, an intrinsic coregionalisation model; the
sparse variational GP, independent SVGPs per target) is
fitted on the other columns; each target's rows are explained (integrated gradients or exact
Shapley values) through its marginal posterior, and for a coregionalised model the
attributions of different targets at the same row are correlated, with the covariance given by
the joint posterior (``gx.MultiOutputAttribution``). The outputs are ``attributions.csv`` with
an ``output`` column (one table, as the classification task's ``class`` column),
``summary.json`` with per-output entries, ``attributions_<output>.png`` /
``importance_<output>.png`` per target, and for a coregionalised model
``output_correlations.csv``: the posterior correlation between two targets' attributions of
the same feature at each explained row, and ``importance_correlations.csv``: the posterior
covariance and correlation between two targets' mean |attribution| importance of a column
over the explained rows (``gx.MultiOutputImportance`` of the joint explanation grouped into
the file's columns; ``summary.json`` says why where it is left out).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from sklearn.metrics import r2_score

from gpexplain.attribution import group_matrix
from gpexplain.cli import methods, output
from gpexplain.cli.choices import MULTI_OUTPUT_CHOICES, family
from gpexplain.cli.classification import file_label
from gpexplain.cli.common import HOLDOUT_FRACTION, finite_or_none, say, write_json
from gpexplain.cli.regression import Regression
from gpexplain.models.families import FAMILIES, kernel_hyperparameters

__all__ = [
    "CORRELATIONS_FILE",
    "MultiOutputRegression",
    "check_targets",
    "file_labels",
    "multi_output_hyperparameters",
    "output_correlations",
]

CORRELATIONS_FILE = "output_correlations.csv"
IMPORTANCE_FILE = "importance_correlations.csv"
# Methods whose per-target results the writer lays out (``--method interactions`` writes a
# table of pairs per target, not yet joined across targets).
_METHODS = ("ig", "shapley")


def check_targets(choice, n_targets: int) -> None:
    """ValueError for ``--multi-output`` options that the number of ``--target`` columns rules
    out (``explain`` and ``sensitivity``): a form other than the default with one target, a
    ``--rank`` above the number of targets."""
    if n_targets == 1 and choice.multi_output != MULTI_OUTPUT_CHOICES[0]:
        raise ValueError(f"--multi-output {choice.multi_output} applies to several --target "
                         "columns")
    if choice.rank is not None and choice.rank > n_targets:
        raise ValueError(f"--rank {choice.rank} is above the number of --target columns, "
                         f"{n_targets}; give 1 to {n_targets}")


def file_labels(names) -> list[str]:
    """A label per target for file names (``attributions_<label>.png``,
    ``sensitivity_<label>.png``): the name with unsafe characters replaced, numbered when two
    names would give the same label."""
    labels = [file_label(name) for name in names]
    if len(set(labels)) < len(labels):  # two names that file names cannot tell apart
        labels = [f"{label}_{k}" for k, label in enumerate(labels)]
    return labels


def output_correlations(explanation, encoder) -> pd.DataFrame | None:
    """Posterior correlation between two targets' attributions of the same (file) column at
    each explained point: one row per (point, feature, output pair), columns ``point``,
    ``feature``, ``output_i``, ``output_j``, ``correlation``; None for independent outputs
    (zero by the model) or without covariances.

    The joint covariance of the encoded columns' attributions is grouped to the file's columns
    as the attributions are (a text column's indicators summed: ``A C A^T``). A correlation
    with an attribution of zero variance (e.g. a feature equal to its baseline) is undefined
    and left empty.
    """
    cov = explanation.joint_cov
    if explanation.independent or cov is None:
        return None
    names, A = group_matrix(encoder.groups_, explanation.feature_names)
    grouped = np.einsum("fa,pianb,gb->pifng", A, cov, A)  # (points, t, d, t, d)
    n_points, t, d = grouped.shape[:3]
    variance = np.einsum("pifif->pif", grouped)
    frames = []
    for i in range(t):
        for j in range(i + 1, t):
            product = variance[:, i] * variance[:, j]
            defined = product > 0
            correlation = np.full((n_points, d), np.nan)
            cross = np.einsum("pff->pf", grouped[:, i, :, j, :])
            correlation[defined] = cross[defined] / np.sqrt(product[defined])
            frames.append(pd.DataFrame({
                "point": np.repeat(np.arange(n_points), d),
                "feature": np.tile(np.asarray(names, dtype=object), n_points),
                "output_i": explanation.output_names[i],
                "output_j": explanation.output_names[j],
                "correlation": correlation.ravel(),
            }))
    return pd.concat(frames, ignore_index=True)


def multi_output_hyperparameters(model, names: list[str], chosen) -> dict:
    """summary.json's ``hyperparameters`` (``explain`` and ``sensitivity``): per target the
    single-output report (independent GPs), or the shared kernel with the coregionalisation
    matrix B, per-target noise and mean (ICM); for an LMC, ``terms``: each term's kernel and
    B^q, then the same noise and mean."""
    posterior = model.posterior_
    if posterior.independent:
        return {name: chosen.hyperparameters(estimator, names)
                for name, estimator in zip(model.output_names_, model.estimators_, strict=True)}
    outputs = model.output_names_
    if model.multi_output == "lmc":
        shared = {"terms": [_coregionalized_term(kernel, B, outputs, names) for kernel, B in
                            zip(model.kernel_, model.coregionalization_, strict=True)]}
        units = "sum_q k_q(x, x') B^q_ij"
    else:
        shared = _coregionalized_term(model.kernel_, model.coregionalization_, outputs, names)
        units = "k(x, x') B_ij"
    return {
        **shared,
        "rank": len(outputs) if model.rank is None else int(model.rank),  # columns of W
        "noise": dict(zip(outputs, map(float, model.noise_), strict=True)),
        "mean": dict(zip(outputs, map(float, model.mean_), strict=True)),
        "units": f"{units}: the kernel's variance is 1 and B_ij is in units of target i "
                 "times target j; lengthscales in units of X; noise in squared units of each "
                 "target",
    }


def _coregionalized_term(kernel, B, outputs, names) -> dict:
    """One term's kernel hyperparameters, its B and the correlation B_ij / sqrt(B_ii B_jj)."""
    scale = np.sqrt(np.diag(B))
    return {
        **kernel_hyperparameters(kernel, names),
        "coregionalization": {a: dict(zip(outputs, map(float, row), strict=True))
                              for a, row in zip(outputs, B, strict=True)},
        "output_correlation": {a: dict(zip(outputs, map(float, row), strict=True))
                               for a, row in zip(outputs, B / np.outer(scale, scale),
                                                 strict=True)},
    }


class MultiOutputRegression(Regression):
    """What ``gpexplain explain`` does with several numeric ``--target`` columns (the held-out
    split and its entry as for one target)."""

    holdout_score = "R^2 per target"

    @staticmethod
    def target(Y: pd.DataFrame, names: list[str]) -> pd.DataFrame:
        """Each column validated as a regression target (float64); TypeError/ValueError name
        the column."""
        return pd.DataFrame({name: Regression.target(Y[name], name) for name in names},
                            index=Y.index)

    @staticmethod
    def check(choice, executor) -> None:
        """ValueError for a family that fits one target, a ``--multi-output`` form it lacks,
        ``icm`` with a kernel other than ``ard`` or ``--method interactions``."""
        forms = family(choice.model).multi_output
        if not forms:
            taking = ", ".join(name for name, entry in FAMILIES.items() if entry.multi_output)
            raise ValueError(f"several --target columns need --model {taking}; --model "
                             f"{choice.model} fits one target")
        if choice.multi_output not in forms:
            raise ValueError(f"--model {choice.model} takes --multi-output "
                             f"{' or '.join(forms)}, not {choice.multi_output}")
        joint = choice.multi_output != MULTI_OUTPUT_CHOICES[0]
        if joint and choice.kernel != "ard":  # GPRegressor._fit_joint
            raise ValueError(f"--multi-output {choice.multi_output} fits an ARD "
                             f"squared-exponential kernel: use --kernel ard, not "
                             f"{choice.kernel}")
        if choice.method not in _METHODS:
            raise ValueError(f"--method {choice.method} explains one target; with several "
                             f"--target columns use --method {' or '.join(_METHODS)}")

    @staticmethod
    def fit_label(choice) -> str:
        return f"{choice.model} GP of several targets ({choice.multi_output})"

    @staticmethod
    def build(choice, n_rows: int, warm_start=None):
        """An unfitted estimator of ``--model``'s family for a 2-D target in the
        ``--multi-output`` form, with ``--rank`` (an ICM's or LMC's) and ``--n-components``
        (an LMC's) when given (``warm_start`` is not used: the held-out fit starts afresh)."""
        model = family(choice.model).build(choice.settings(n_rows))
        given = {"rank": choice.rank, "n_components": choice.n_components}
        return model.set_params(multi_output=choice.multi_output,
                                **{name: value for name, value in given.items()
                                   if value is not None})

    @staticmethod
    def holdout_scores(model, X_test, Y_test) -> dict:
        """R^2 of each target on the held-out rows."""
        predicted = model.predict(X_test)
        return {"r2": {name: finite_or_none(r2_score(Y_test[name], predicted[:, j]))
                       for j, name in enumerate(Y_test.columns)}}

    @staticmethod
    def explain(choice, model, X_model, X, positions, baseline, encoder, client):
        """``(attributions of X's columns per target, the MultiOutputAttribution of the
        model's columns, output_correlations or None, global importance per target, the
        importance's covariance between targets or None and why)``; on the Dask cluster of
        ``client`` when it is not None."""
        explained = X_model.iloc[positions]
        encoded = methods.explain(choice, model, explained, baseline, client)
        shown = X.iloc[positions]
        grouped = {name: encoder.group(encoded[name], shown) for name in encoded.output_names}
        # while the cluster is up: the importance evaluates the covariance across points there
        importances = {name: methods.importance(attr) for name, attr in grouped.items()}
        between = (None, "the targets are independent GPs: zero by the model")
        if encoded.joint_point_cov is not None and all(
                found is not None for found, _ in importances.values()):
            between = methods.importance_between(encoded, grouped, encoder)
        return (grouped, encoded, output_correlations(encoded, encoder), importances,
                between)

    @staticmethod
    def write(model, explanation, X, X_model, record, context, out, stdout, report, saved):
        """Write ``attributions.csv`` (an ``output`` column after ``row``), ``summary.json``
        (per-target completeness, predictions, base values, global importance, held-out R^2
        and hyperparameters; ``cross_output_correlation``, ``cross_output_importance``), the
        figures per target and, for a coregionalised model, ``output_correlations.csv`` and
        ``importance_correlations.csv``; print each target's top features; return the names of
        the files written."""
        attributions, encoded, correlations, importances, (between, why) = explanation
        explained = record.explained
        tables = []
        for name, attr in attributions.items():
            table = output.attribution_table(attr, explained)
            table.insert(1, "output", name)
            tables.append(table)
        output.write_csv(pd.concat(tables, ignore_index=True), out / "attributions.csv")
        written = ["attributions.csv", "summary.json"]

        chosen = family(record.choice.model)
        names = list(X_model.columns)
        first = encoded.attributions[0]
        result = output.summary(model, multi_output_hyperparameters(model, names, chosen),
                                first, {}, X_model, record)
        result.update({
            "task": "multi-output regression",
            "outputs": list(attributions),
            "multi_output": record.choice.multi_output,
            "completeness_gap": {name: {key: attr.completeness_gap()[key]
                                        for key in ("mean", "variance")}
                                 for name, attr in attributions.items()},
            "predictions": {name: [float(p) for p in attr.prediction]
                            for name, attr in attributions.items()},
            "global_importance": {name: output.importance_summary(*found)
                                  for name, found in importances.items()},
            **context,
        })
        if result["baseline"] is not None:
            result["baseline"]["prediction"] = {
                name: float(attr.baseline_prediction) for name, attr in attributions.items()}
        if correlations is None:
            result["cross_output_correlation"] = {
                "independent": True,
                "note": "the targets are fitted as independent GPs: their attributions are "
                        "uncorrelated by the model (zero, not computed)",
            }
        else:
            correlations.insert(0, "row", np.asarray(explained, dtype=object)[
                correlations["point"].to_numpy()])
            output.write_csv(correlations, out / CORRELATIONS_FILE)
            written.append(CORRELATIONS_FILE)
            means = correlations.groupby(["output_i", "output_j", "feature"], sort=False)[
                "correlation"].mean()
            result["cross_output_correlation"] = {
                "independent": False,
                "file": CORRELATIONS_FILE,
                "note": "posterior correlation between two targets' attributions of the same "
                        "feature at a row (joint posterior of the coregionalised model); "
                        "mean_correlation averages it over the explained rows",
                "mean_correlation": [
                    {"output_i": a, "output_j": b,
                     "features": {feature: finite_or_none(means[a, b, feature])
                                  for feature in attributions[a].feature_names}}
                    for a, b in dict.fromkeys(zip(correlations["output_i"],
                                                  correlations["output_j"], strict=True))
                ],
            }
        if between is None:
            result["cross_output_importance"] = {"skipped": why}
        else:
            output.write_csv(between.between_outputs_frame(), out / IMPORTANCE_FILE)
            written.append(IMPORTANCE_FILE)
            result["cross_output_importance"] = {
                "file": IMPORTANCE_FILE,
                "note": "posterior covariance and correlation between two targets' mean "
                        "|attribution| importance of the same feature over the explained rows "
                        "(joint posterior of the coregionalised model)",
            }
        write_json(out / "summary.json", result)

        for label, (name, attr) in zip(file_labels(attributions), attributions.items(),
                                       strict=True):
            units = f"units of {name!r}"
            written += output.save_attribution_figures(
                attr, explained, out, suffix=f"_{label}", title=f"target {name}: {attr.method}",
                xlabels=(f"attribution ({units})", f"mean |attribution| ({units})"),
                importance=importances[name][0],
            )
            say(stdout, f"Target {name}")
            stdout.print(output.top_features_table(attr, explained[0]))
        scores = record.holdout.get("r2")
        if scores:
            shown = ", ".join(f"{name} {value:.3f}" if value is not None else f"{name} n/a"
                              for name, value in scores.items())
            stdout.print(f"Held-out R^2 (seeded {HOLDOUT_FRACTION:.0%} split): {shown}")
        return output.finish(out, written + saved, report)
