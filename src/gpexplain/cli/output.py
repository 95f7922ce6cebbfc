"""Output writers both tasks share: the attribution table, ``summary.json``'s common entries,
the attribution figures, the console table, and the closing line (``--report`` included)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from gpexplain._version import __version__
from gpexplain.cli.choices import Choice
from gpexplain.cli.common import INTERVAL_LEVEL, finite_or_none, say
from gpexplain.cli.methods import method_id
from gpexplain.explain.methods import METHODS

__all__ = [
    "TOP_FEATURES",
    "RunRecord",
    "attribution_table",
    "finish",
    "importance_summary",
    "save_attribution_figures",
    "say_written",
    "summary",
    "spreadsheet_safe",
    "top_features_table",
    "write_csv",
    "write_table",
]

TOP_FEATURES = 8
SHOWN_POINTS = 4


@dataclass
class RunRecord:
    """What a run was asked and did, as ``summary.json`` records it.

    Attributes
    ----------
    data_label : str
        The data file (or ``bundled:NAME``).
    shape : tuple of int
        Rows and columns of the table the model saw (after ``--drop`` and ``--missing``).
    target : str or None
    choice : Choice
    rows : str
        The ``--rows`` specification.
    explained : list
        Data-row labels of the explained points.
    baseline_label : str
        The ``--baseline`` as reported (``"mean"``, ``"row 12"``, ``"none"``).
    holdout : dict
        The held-out split's scores, or why it was skipped.
    timings : dict
        Seconds per stage (``fit``, ``explain``, ...).
    """

    data_label: str
    shape: tuple
    target: str | None
    choice: Choice
    rows: str
    explained: list
    baseline_label: str
    holdout: dict = field(default_factory=dict)
    timings: dict = field(default_factory=dict)


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def spreadsheet_safe(table: pd.DataFrame) -> pd.DataFrame:
    """``table`` with its text cells that a spreadsheet would run as a formula (starting with
    ``=``, ``+``, ``-``, ``@``, tab or carriage return) prefixed with a single quote, as OWASP
    recommends for CSV files; numbers stay numbers. Feature names, row labels and category
    values come from the user's file, which may come from anyone."""

    def neutral(cell):
        return "'" + cell if isinstance(cell, str) and cell.startswith(FORMULA_STARTS) else cell

    table = table.copy()
    for column in table.select_dtypes(include="object").columns:
        table[column] = table[column].map(neutral)
    return table


def write_csv(table: pd.DataFrame, path: Path) -> None:
    """``table`` as CSV, spreadsheet-safe (``spreadsheet_safe``), without the index."""
    spreadsheet_safe(table).to_csv(path, index=False)


def attribution_table(attr, explained: list, value_name: str = "attribution") -> pd.DataFrame:
    """``Attribution.to_frame`` with the data-row label of each explained point first.

    An explanation without a posterior (``attr.cov is None``, e.g. POE's weights) has no
    ``std``, ``lower`` and ``upper`` columns: zeros there would read as certainty.
    """
    table = attr.to_frame(INTERVAL_LEVEL).rename(columns={"attribution": value_name})
    if attr.cov is None:
        table = table.drop(columns=["std", "lower", "upper"])
    table.insert(0, "row", np.asarray(explained, dtype=object)[table["point"].to_numpy()])
    return table


def write_table(attr, explained: list, path: Path, value_name: str = "attribution") -> None:
    """``attribution_table`` as a spreadsheet-safe CSV."""
    write_csv(attribution_table(attr, explained, value_name), path)


def summary(model, hyperparameters: dict, attr, extras: dict, X: pd.DataFrame,
            record: RunRecord) -> dict:
    """``summary.json``'s entries shared by both tasks and ``poe``: the data, the model, its
    ``hyperparameters`` (the family's report), the explanation ``attr`` of the model's
    features ``X`` and its completeness, and ``extras`` (the additive GP's global values)."""
    names = list(X.columns)
    gaps = attr.completeness_gap()
    method = method_id(record.choice.method)  # the report cites this entry's references
    shape = record.shape
    result = {
        "data_file": record.data_label,
        "shape": {"rows": int(shape[0]), "columns": int(shape[1]), "features": len(names)},
        "target": record.target,
        "feature_names": names,
        "model": record.choice.model,
        "kernel": record.choice.kernel_label,
        "seed": record.choice.seed,
        # where the exact GP conditioned and solved (--device); "cpu" is NumPy's path
        "device": record.choice.device or "cpu",
        "hyperparameters": hyperparameters,
        "constant_features": list(getattr(model, "constant_features_", [])),
        # Independent GPs of several targets have one per target; the joint's is their sum.
        "log_marginal_likelihood": finite_or_none(
            np.sum(getattr(model, "log_marginal_likelihood_value_", np.nan))
        ),
        "holdout": record.holdout,
        "rows": record.rows,
        "explained_rows": record.explained,
        "method": attr.method,
        "method_id": method,
        "references": [str(reference) for reference in METHODS.get(method).references],
        "interval_level": INTERVAL_LEVEL,
        "baseline": None,
        "completeness_gap": {"mean": gaps["mean"], "variance": gaps["variance"]},
        "timings_seconds": record.timings,
        "gpexplain_version": __version__,
    }
    if attr.baseline is not None and np.ndim(attr.baseline) == 2:  # a background sample
        result["baseline"] = {
            "spec": f"{len(attr.baseline)} background rows drawn with the seed",
            "prediction": float(attr.baseline_prediction),
        }
    elif attr.baseline is not None:
        result["baseline"] = {
            "spec": record.baseline_label,
            "vector": dict(zip(names, (float(v) for v in attr.baseline), strict=True)),
            "prediction": float(attr.baseline_prediction),
        }
    elif attr.baseline_prediction is not None:
        result["baseline"] = {"spec": "base value", "prediction": float(attr.baseline_prediction)}
    if "interactions" in extras:
        result["interactions"] = interactions_summary(extras["interactions"])
    if "global" in extras:
        values = extras["global"]
        result["global_shapley"] = {
            "values": dict(zip(names, map(float, values.values), strict=True)),
            "first_order": dict(zip(names, map(float, values.first_order), strict=True)),
            "total_variance": float(values.total_variance),
            "units": "squared units of y (a decomposition of the variance of the prediction)",
        }
    return result


def interactions_summary(interactions, top: int = 10) -> dict:
    """``summary.json``'s ``interactions`` entry: the index, the efficiency gap and the
    ``top`` pairs by mean |value| over the explained rows (mean value, mean std, and the
    number of rows whose 95% interval excludes zero)."""
    d = interactions.n_features
    pairs = interactions.mean[:, d:]
    lower, upper = interactions.interval(INTERVAL_LEVEL)
    excluded = ((lower[:, d:] > 0) | (upper[:, d:] < 0)).sum(axis=0)
    order = np.argsort(-np.abs(pairs).mean(axis=0), kind="stable")[:top]
    names = interactions.feature_names
    return {
        "index": interactions.index,
        "method": interactions.method,
        "efficiency_gap": interactions.efficiency_gap(),
        "file": "interactions.csv",
        "top_pairs": [
            {"feature_i": names[interactions.pairs[p][0]],
             "feature_j": names[interactions.pairs[p][1]],
             "mean_value": float(pairs[:, p].mean()),
             "mean_abs_value": float(np.abs(pairs[:, p]).mean()),
             "mean_std": float(interactions.std[:, d + p].mean()),
             "rows_interval_excludes_zero": int(excluded[p])}
            for p in order
        ],
    }


def importance_summary(importance, reason: str = "") -> dict:
    """summary.json's ``global_importance``: the exact posterior mean and standard deviation of
    each feature's mean |attribution| over the explained rows and the pairwise probabilities
    (``gx.global_importance``), or ``{"skipped": reason}``."""
    if importance is None:
        return {"skipped": reason}
    names = list(importance.feature_names)
    probability = importance.probability_greater
    return {
        "summary": "mean |attribution| over the explained rows (posterior)",
        "mean": dict(zip(names, map(float, importance.mean), strict=True)),
        "std": dict(zip(names, map(float, importance.std), strict=True)),
        "probability_greater": None if probability is None else {
            a: {b: float(probability[i, j]) for j, b in enumerate(names) if j != i}
            for i, a in enumerate(names)
        },
        "probability_standard_error": float(importance.probability_standard_error),
        "n_samples": int(importance.n_samples),
        "n_points": int(importance.n_points),
        "note": importance.note,
    }


def save_attribution_figures(attr, explained: list, out: Path, suffix: str = "",
                             title: str | None = None,
                             xlabels: tuple[str, str] | None = None,
                             importance=None) -> list[str]:
    """``attributions<suffix>.png`` (the first few points) and ``importance<suffix>.png``;
    returns their names. ``xlabels``: their x-axis labels, where not the plots' own
    (attributions in units of the target); ``importance``: the exact ``GlobalImportance``
    drawn in the importance figure."""
    # matplotlib loads with the first figure, not with every command (gpexplain --version)
    from gpexplain.plot import plot_attributions, plot_global_importance
    per_point, importance_label = xlabels or (None, None)
    shown = min(SHOWN_POINTS, attr.n_points)
    figure = plot_attributions(
        attr, max_points=shown, point_labels=[f"row {r}" for r in explained[:shown]],
        xlabel=per_point,
    )
    if title is not None:
        figure.suptitle(title, fontsize=9)
    names = [f"attributions{suffix}.png", f"importance{suffix}.png"]
    figure.savefig(out / names[0], dpi=120)
    plot_global_importance(attr, xlabel=importance_label,
                           importance=importance).savefig(out / names[1], dpi=120)
    return names


def _format_value(value) -> str:
    """A feature value for the console: numbers to 4 digits, category labels as they are."""
    return f"{value:.4g}" if isinstance(value, int | float | np.number) else str(value)


def top_features_table(attr, row_label) -> Table:
    """Rich table of the largest |attribution| features of the first explained point; a
    caption counts the features left out, which a reader would otherwise take as absent."""
    lower, upper = attr.interval(INTERVAL_LEVEL)
    order = np.argsort(-np.abs(attr.mean[0]), kind="stable")[:TOP_FEATURES]
    title = f"Row {escape(str(row_label))}: prediction {attr.prediction[0]:.4g}"
    if attr.baseline_prediction is not None:
        title += f", baseline prediction {attr.baseline_prediction:.4g}"
    hidden = len(attr.feature_names) - len(order)
    caption = (f"({hidden} more feature{'s' if hidden > 1 else ''} in attributions.csv)"
               if hidden else None)
    table = Table(title=title, caption=caption)
    table.add_column("feature")
    table.add_column("value", justify="right")
    table.add_column("attribution", justify="right")
    table.add_column(f"{INTERVAL_LEVEL:.0%} interval", justify="right")
    for i in order:
        table.add_row(
            escape(attr.feature_names[i]),  # names and labels are the user's, not markup
            escape(_format_value(attr.X[0, i])),
            f"{attr.mean[0, i]:+.4g}",
            f"[{lower[0, i]:+.3g}, {upper[0, i]:+.3g}]",
        )
    return table


def finish(folder: Path, written: list, report: bool) -> list:
    """Write report.html into ``folder`` when ``--report`` asks (from the files just written
    there); the names of the files written, for the closing line (``say_written``)."""
    # matplotlib loads with the first figure, not with every command (gpexplain --version)
    from gpexplain.report import write_report
    return [*written, write_report(folder).name] if report else list(written)


def say_written(stdout: Console, written: list, out: Path) -> None:
    """The closing line, once the files are in place in ``out``."""
    say(stdout, f"Wrote {', '.join(written)} to {out}")
