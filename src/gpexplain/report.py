"""A static, self-contained HTML report of one ``gpexplain explain`` output directory.

``write_report(out_dir)`` reads ``summary.json`` and ``attributions.csv`` and writes
``report.html``: data and model summary, fit quality, global importance with error bars,
per-row explanations with credible intervals, completeness checks, and the method with its
references. Figures are inlined as base64 PNG and the styles are inline: the page loads no
external resource, so it can be mailed or archived as one file. The output of the
classification mode (a ``class`` column) gets the explanation sections once per explained
class, in latent units, and held-out accuracy, log loss and Brier score as fit quality; that
of several targets (an ``output`` column) once per target, with R^2 per target and the
correlation of the attributions across targets.

A ``gpexplain sensitivity`` output directory (``sensitivity.csv``, no ``attributions.csv``)
gets its own page: data and model, then per target the Sobol indices and Shapley effects with
their posterior uncertainty (the table and the figure the command wrote, the strongest pairs
with ``--interactions``), the note on the covariance across targets, and the references.
"""

from __future__ import annotations

import base64
import html
import io
import json
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd

from gpexplain.attribution import Attribution
from gpexplain.plot import plot_dependence, plot_global_importance, plot_summary, plot_waterfall

__all__ = ["write_report", "REPORT_NAME", "MAX_ROWS", "SENSITIVITY_TABLE"]

REPORT_NAME = "report.html"
MAX_ROWS = 10  # per-row sections drawn; the table of all rows stays in attributions.csv
_DEPENDENCE_FEATURES = 3
_COLUMNS = ["row", "point", "feature", "value", "attribution", "std", "lower", "upper"]
# The column that splits attributions.csv into one explanation each, with the summary.json
# list of its labels, the word for one, and the units (None: those of the target named).
_PER_GROUP = {"class": ("explained_classes", "class", "latent units"),
              "output": ("outputs", "target", None)}

_STYLE = """
body { font-family: sans-serif; max-width: 1100px; margin: 2em auto; color: #222; }
h1 { font-size: 1.6em; } h2 { border-bottom: 1px solid #ccc; padding-bottom: .2em; }
table { border-collapse: collapse; margin: .5em 0 1em; font-size: .9em; }
th, td { border: 1px solid #ddd; padding: .25em .6em; text-align: right; }
th { background: #f3f3f3; } td.name { text-align: left; }
figure { margin: 1em 0; } img { max-width: 100%; }
.ok { color: #1e7d32; } .bad { color: #b71c1c; font-weight: bold; }
.note { color: #555; font-size: .9em; }
"""


def _png(figure) -> str:
    """A figure as an inline ``<img>`` (base64 PNG data URI)."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=96)
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    return f'<img alt="figure" src="data:image/png;base64,{data}">'


def _saved_png(path: Path) -> str:
    """A PNG the command line wrote, inlined as a ``<figure>``; "" when it is absent."""
    if not path.is_file():
        return ""
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    return f'<figure><img alt="figure" src="data:image/png;base64,{data}"></figure>'


def _text(value) -> str:
    """A cell: numbers (also numbers read back as text) to 4 digits, other text escaped."""
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return html.escape(value)
    if isinstance(value, float | np.floating):
        return f"{value:.4g}"
    return html.escape(str(value))


def _number(value, spec: str) -> str:
    """``value`` formatted with ``spec`` when it is a number, else escaped as text: a summary
    from elsewhere may hold anything in a numeric field."""
    if isinstance(value, int | float | np.number) and not isinstance(value, bool):
        return format(value, spec)
    return _text(value)


def _table(header: list[str], rows: list[list], name_columns: int = 1) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    head = f"<tr>{head}</tr>" if any(header) else ""  # a key-value table needs no header
    body = "".join(
        "<tr>" + "".join(
            f'<td class="name">{_text(v)}</td>' if j < name_columns else f"<td>{_text(v)}</td>"
            for j, v in enumerate(row)
        ) + "</tr>"
        for row in rows
    )
    return f"<table>{head}{body}</table>"


def _feature_values(column: pd.Series) -> np.ndarray:
    """A feature's values: numbers when every value parses as one, else labels (categories)."""
    numbers = pd.to_numeric(column, errors="coerce")
    if numbers.notna().all():
        return numbers.to_numpy(np.float64)
    return column.astype(str).to_numpy(dtype=object)


def _attribution(table: pd.DataFrame, summary: dict, predictions, baseline_prediction
                 ) -> Attribution:
    """The explained rows as an ``Attribution`` with the per-feature variances of the table.

    ``attributions.csv`` keeps each attribution's standard deviation, not the covariance
    across features, so the covariance here is diagonal: enough for every figure of the report
    (each draws per-feature intervals), and the report never sums across features with it.
    """
    features = list(dict.fromkeys(table["feature"]))
    wide = {
        name: table.pivot(index="point", columns="feature", values=name)[features]
        for name in ("attribution", "std")
    }
    values = table.pivot(index="point", columns="feature", values="value")[features]
    X = np.empty(values.shape, dtype=object)
    for j, feature in enumerate(features):
        X[:, j] = _feature_values(values[feature])
    if all(isinstance(v, float) for v in X.ravel()):
        X = X.astype(np.float64)
    std = wide["std"].to_numpy(np.float64)
    return Attribution(
        mean=wide["attribution"].to_numpy(np.float64),
        cov=np.einsum("pi,ij->pij", std**2, np.eye(len(features))),
        X=X,
        prediction=np.asarray(predictions, dtype=np.float64),
        baseline=None,
        baseline_prediction=baseline_prediction,
        feature_names=features,
        method=summary["method"],
    )


def _read(out_dir: Path) -> tuple[dict, pd.DataFrame]:
    summary_path, table_path = out_dir / "summary.json", out_dir / "attributions.csv"
    for path in (summary_path, table_path):
        if not path.is_file():
            raise ValueError(
                f"{str(out_dir)!r} has no {path.name}; give the output directory of "
                "gpexplain explain"
            )
    try:
        summary = json.loads(summary_path.read_text(encoding="utf-8"))
        table = pd.read_csv(table_path, dtype={"value": str})
    except (ValueError, pd.errors.ParserError) as error:
        raise ValueError(f"cannot read the explain output in {str(out_dir)!r}: {error}") from None
    missing = [c for c in _COLUMNS if c not in table.columns]
    absent = [k for k in ("method", "predictions", "explained_rows") if k not in summary]
    if missing or absent:
        raise ValueError(
            f"{str(out_dir)!r} was not written by this version of gpexplain explain "
            f"(missing {missing + absent}); run explain again"
        )
    return summary, table


def _overview(summary: dict) -> list[str]:
    """Data and model, fit quality."""
    parts = []
    shape = summary["shape"]
    hyper = summary.get("hyperparameters", {})
    classification = summary.get("task") == "classification"
    rows = [
        ["data file", summary.get("data_file")],
        ["rows x columns", f"{shape['rows']} x {shape['columns']}"],
        ["target", summary.get("target")],
        ["model", f"{summary.get('model')}{'' if classification else ' GP'}, kernel "
                  f"{summary.get('kernel')}"],
        ["explanation", summary.get("explained_output") if classification else summary["method"]],
    ]
    if classification:
        rows += [["classes", ", ".join(map(str, summary.get("classes", [])))],
                 ["link", summary.get("link")], ["ELBO", summary.get("elbo")]]
    else:
        rows.append(["log marginal likelihood", summary.get("log_marginal_likelihood")])
    rows += [[name, hyper[name]] for name in ("variance", "noise", "mean") if name in hyper]
    categorical = summary.get("categorical_columns") or {}
    if categorical:
        rows.append(["one-hot encoded", ", ".join(categorical)])
    missing = summary.get("missing") or {}
    if missing.get("dropped_rows"):
        rows.append(["rows dropped (missing values)", ", ".join(map(str, missing["dropped_rows"]))])
    parts.append("<h2>Data and model</h2>" + _table(["", ""], rows, name_columns=2))
    lengthscales = hyper.get("lengthscales")
    if lengthscales:
        parts.append(
            "<p>Fitted lengthscales (original units of each feature; none: constant column)</p>"
            + _table(["feature", "lengthscale"],
                     [[k, "none" if v is None else float(v)] for k, v in lengthscales.items()])
        )

    holdout = summary.get("holdout") or {}
    fraction = _number(holdout.get("test_fraction", 0.2), ".0%")
    split = f"{_text(holdout.get('n_train'))} train, {_text(holdout.get('n_test'))} test"
    if holdout.get("accuracy") is not None:
        quality = (
            f"<p>On a seeded {fraction} held-out split (a second fit on the other rows; "
            f"{split}): accuracy <b>{_number(holdout['accuracy'], '.3f')}</b>, log loss "
            f"{_number(holdout.get('log_loss'), '.3f')} nats, Brier score "
            f"{_number(holdout.get('brier_score'), '.3f')}</p>"
        )
    elif classification:
        quality = f"<p>No held-out scores: {_text(holdout.get('skipped', 'not run'))}.</p>"
    elif isinstance(holdout.get("r2"), dict):  # several targets
        scores = ", ".join(f"{_text(name)} <b>{_number(value, '.3f')}</b>"
                           for name, value in holdout["r2"].items())
        quality = (f"<p>R<sup>2</sup> of each target on a seeded {fraction} held-out split (a "
                   f"second fit on the other rows; {split}): {scores}</p>")
    elif holdout.get("r2") is not None:
        quality = (
            f"<p>R<sup>2</sup> on a seeded {fraction} held-out split (a second fit on the other "
            f"rows; {split}): <b>{_number(holdout['r2'], '.3f')}</b></p>"
        )
    else:
        quality = f"<p>No held-out R<sup>2</sup>: {_text(holdout.get('skipped', 'not run'))}.</p>"
    parts.append("<h2>Fit quality</h2>" + quality)
    return parts


def _explanations(summary: dict, table: pd.DataFrame, attr: Attribution, gaps: dict,
                  title: str = "", units: str = "units of the target",
                  class_key: str | None = None) -> list[str]:
    """Global importance, dependence, per-row explanations and completeness of one
    ``Attribution`` (``title``: e.g. " of class b", appended to each heading)."""
    parts = []
    importance, note = _importance(summary, attr, class_key)
    parts.append(
        f"<h2>Global importance{title}</h2><p class='note'>Mean |attribution| over the "
        f"{attr.n_points} explained rows; {note}.</p>"
        f"<figure>{_png(plot_global_importance(attr, importance=importance))}</figure>"
        + _ranking_table(importance)
        + f"<figure>{_png(plot_summary(attr))}</figure>"
    )
    order = np.argsort(-np.mean(np.abs(attr.mean), axis=0), kind="stable")
    dependence = "".join(
        f"<figure>{_png(plot_dependence(attr, int(j)))}</figure>"
        for j in order[:_DEPENDENCE_FEATURES]
    )
    parts.append(f"<h2>Dependence of the leading features{title}</h2>" + dependence)

    level = summary.get("interval_level", 0.95)
    per_row = [
        f"<h2>Per-row explanations{title}</h2><p class='note'>Posterior mean of each "
        f"attribution ({units}) with its {level:.0%} credible interval"
        + (f"; the first {MAX_ROWS} of {attr.n_points} rows (all in attributions.csv)"
           if attr.n_points > MAX_ROWS else "") + ".</p>"
    ]
    explained = summary["explained_rows"]
    for point in range(min(attr.n_points, MAX_ROWS)):
        rows_of_point = table[table["point"] == point]
        per_row.append(
            f"<h3>Row {_text(explained[point])}: prediction {attr.prediction[point]:.4g}</h3>"
        )
        if attr.baseline_prediction is not None:
            per_row.append(
                f"<figure>{_png(plot_waterfall(attr, point, max_features=attr.n_features))}"
                "</figure>"
            )
        per_row.append(_table(
            ["feature", "value", "attribution", "std", "lower", "upper"],
            rows_of_point[["feature", "value", "attribution", "std", "lower", "upper"]]
            .to_numpy().tolist(),
            name_columns=2,
        ))
    parts.append("".join(per_row))
    parts.append(_completeness(summary, attr, gaps, title))
    return parts


def _interactions(entry: dict, out_dir: Path) -> str:
    """The Shapley-interactions section (``--method interactions``): the index, its efficiency
    gap, the strongest pairs over the explained rows, and ``interactions.png`` inlined."""
    figure = _saved_png(out_dir / "interactions.png")
    pairs = [p for p in entry.get("top_pairs") or [] if isinstance(p, dict)]
    rows = [[p.get("feature_i"), p.get("feature_j"), p.get("mean_value"), p.get("mean_std"),
             p.get("rows_interval_excludes_zero")] for p in pairs]
    gap = entry.get("efficiency_gap") or {}
    return (
        "<h2>Pairwise Shapley interactions</h2>"
        f"<p>{_text(entry.get('method', ''))}: order-1 values and all pairwise interactions "
        "with their joint posterior covariance (the table of all of them is "
        "<code>interactions.csv</code>). Efficiency gap: mean "
        f"{_number(gap.get('mean'), '.2g')}, variance {_number(gap.get('variance'), '.2g')}."
        "</p>"
        + _table(["feature i", "feature j", "mean value", "mean std",
                  "rows with 95% interval excluding 0"], rows, name_columns=2)
        + figure
    )


def _variance(out_dir: Path) -> str:
    """The section of ``--explain variance``: what made the model unsure at each explained row
    (``variance.json``, ``importance_variance.png``, ``waterfall_variance.png``); "" without
    those files."""
    path = out_dir / "variance.json"
    if not path.is_file():
        return ""
    try:
        entry = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as error:
        raise ValueError(f"cannot read {str(path)!r}: {error}") from None
    if not isinstance(entry, dict):
        raise ValueError(f"{str(path)!r} is not a JSON object; run explain again")
    rows = entry.get("explained_rows") or []
    variances = entry.get("posterior_variance") or []
    table = [[row, variance] for row, variance in zip(rows, variances, strict=False)]
    return (
        "<h2>Why the model is unsure: attributions of the posterior variance</h2>"
        f"<p>{_text(entry.get('method', ''))}. Each row's attributions sum to its posterior "
        f"variance minus the base value {_number(entry.get('base_value'), '.4g')} (squared "
        "units of the target; largest completeness gap "
        f"{_number(entry.get('completeness_gap'), '.2g')}). The posterior variance is a "
        "deterministic function of the inputs, so these attributions have no interval "
        "(<code>variance_attributions.csv</code> has all of them).</p>"
        + _table(["row", "posterior variance"], table)
        + _saved_png(out_dir / "importance_variance.png")
        + _saved_png(out_dir / "waterfall_variance.png")
    )


def _cross_output(entry: dict) -> str:
    """Several targets: the mean posterior correlation between two targets' attributions of
    each feature over the explained rows (a coregionalised model), or the note that
    independent targets have none."""
    pairs = [p for p in entry.get("mean_correlation") or [] if isinstance(p, dict)]
    rows = [[p.get("output_i"), p.get("output_j"), feature, value]
            for p in pairs for feature, value in (p.get("features") or {}).items()]
    table = (_table(["target i", "target j", "feature", "mean correlation"], rows,
                    name_columns=3) if rows else "")
    return ("<h2>Correlation of the attributions across targets</h2>"
            f"<p>{_text(entry.get('note', ''))}.</p>" + table)


def _importance(summary: dict, attr: Attribution, class_key: str | None = None):
    """The exact ``GlobalImportance`` the command line wrote into summary.json (its
    ``global_importance``, per class for a classifier: posterior mean and std of each
    feature's mean |attribution|, from the covariance across rows), and the sentence
    describing the error bars."""
    from gpexplain.global_attribution import GlobalImportance

    written = summary.get("global_importance") or {}
    if class_key is not None:
        written = written.get(class_key) or {}
    names = list(attr.feature_names)
    if "mean" not in written or list(written["mean"]) != names:
        reason = written.get("skipped", "not computed for this run")
        return None, f"no error bars ({_text(reason)})"
    given = written.get("probability_greater")
    probability = None if given is None else np.array(
        [[0.0 if a == b else given[a][b] for b in names] for a in names])
    importance = GlobalImportance(
        mean=np.array([written["mean"][n] for n in names]),
        std=np.array([written["std"][n] for n in names]), cov=None,
        probability_greater=probability,
        probability_standard_error=written["probability_standard_error"], summary="mean_abs",
        n_points=written["n_points"], n_samples=written["n_samples"], feature_names=names,
        method=summary.get("method", ""), note=written.get("note", ""))
    return importance, ("bars are posterior means and error bars &plusmn;1.96 &times; the exact "
                        "posterior standard deviation of each feature's mean |attribution|, "
                        "from the covariance of the attributions across rows")


def _ranking_table(importance, leading: int = 5) -> str:
    """``P(importance of the row's feature > the column's)`` among the leading features, with
    its Monte Carlo standard error; "" without probabilities."""
    if importance is None or importance.probability_greater is None:
        return ""
    order = np.argsort(-importance.mean, kind="stable")[:leading]
    names = [importance.feature_names[i] for i in order]
    rows = [[names[a]] + ["" if a == b else f"{importance.probability_greater[i, j]:.3f}"
                          for b, j in enumerate(order)] for a, i in enumerate(order)]
    return ("<p class='note'>Posterior probability that the row's feature is more important "
            "than the column's (mean |attribution|; Monte Carlo over the exact joint posterior, "
            f"standard error at most {importance.probability_standard_error:.3f}).</p>"
            + _table(["", *names], rows))


def _method(summary: dict) -> str:
    """Method and references: those the command recorded from the method registry
    (``gpexplain.explain.methods``) in ``summary.json``; never guessed from the method's text."""
    return _cited(
        summary,
        "Every attribution of a GP regression model (and of a GP classifier's latent function) "
        "is a linear functional of the latent function, hence Gaussian under the posterior; its "
        "mean and covariance are computed in closed form (or by accurate quadrature), not by "
        f"sampling.</p><p>{_text(summary['method'])}",
    )


def _cited(summary: dict, text: str) -> str:
    """The "Method and references" section: ``text`` (HTML, one paragraph's content), the
    references ``summary.json`` records, the version and the date."""
    references = summary.get("references")
    cited = (
        "<ul>" + "".join(f"<li>{_text(reference)}</li>" for reference in references) + "</ul>"
        if references else
        "<p class='note'>This summary records no references (it was written by a gpexplain "
        "older than 0.3); see docs/errata.md for the papers.</p>"
    )
    return (
        f"<h2>Method and references</h2><p>{text}</p>{cited}"
        f"<p class='note'>gpexplain {html.escape(str(summary.get('gpexplain_version', '')))}; "
        f"report written {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}.</p>"
    )


def _completeness(summary: dict, attr: Attribution, gaps: dict, title: str = "") -> str:
    """Completeness as written by explain (means and variances, with the full covariance) and
    re-checked here on the table: attributions sum to prediction minus the base value."""
    text = f"<h2>Completeness checks{title}</h2>"
    if attr.baseline_prediction is None:
        return text + "<p>This explanation has no base value; completeness does not apply.</p>"
    sums = attr.mean.sum(axis=1)
    target = attr.prediction - attr.baseline_prediction
    scale = max(float(np.max(np.abs(target))), float(np.max(np.abs(attr.mean))), 1e-300)
    tolerance = 1e-6 * scale  # the CSV keeps about 15 digits; the math reaches ~1e-12
    rows = []
    for point in range(attr.n_points):
        gap = abs(sums[point] - target[point])
        verdict = '<span class="ok">ok</span>' if gap <= tolerance else (
            '<span class="bad">violated</span>')
        rows.append([summary["explained_rows"][point], float(sums[point]),
                     float(target[point]), f"{gap:.2e}", verdict])
    body = "".join(
        "<tr>" + "".join(f"<td>{_text(v) if j < 4 else v}</td>" for j, v in enumerate(row))
        + "</tr>" for row in rows
    )
    header = "".join(
        f"<th>{h}</th>" for h in ("row", "sum of attributions", "prediction - base value",
                                  "gap", "")
    )
    return (
        text
        + f"<p>Largest gaps computed with the full covariance by explain: means "
        f"{_number(gaps.get('mean', 0.0), '.2e')}, variances "
        f"{_number(gaps.get('variance', 0.0), '.2e')} "
        f"(base value {attr.baseline_prediction:.6g}).</p>"
        + f"<table><tr>{header}</tr>{body}</table>"
    )


def write_report(out_dir, path=None) -> Path:
    """Write the HTML report of a ``gpexplain explain`` (or ``gpexplain sensitivity``)
    output directory.

    Parameters
    ----------
    out_dir : str or os.PathLike
        Directory holding ``summary.json`` and ``attributions.csv`` (``gpexplain explain
        --out``), or ``summary.json`` and ``sensitivity.csv`` (``gpexplain sensitivity
        --out``).
    path : str or os.PathLike, optional
        Where to write; default ``out_dir / "report.html"``.

    Returns
    -------
    pathlib.Path
        The report written: one HTML file with inline styles and base64 PNG figures.

    Raises
    ------
    ValueError
        ``out_dir`` is not a directory, lacks or cannot parse the explain (or sensitivity)
        files (named), or was written by an older version without the entries the page
        needs.
    """
    out_dir = Path(out_dir)
    if not out_dir.is_dir():
        raise ValueError(f"{str(out_dir)!r} is not a directory; give the output of explain")
    if (out_dir / SENSITIVITY_TABLE).is_file() and not (out_dir / "attributions.csv").is_file():
        return _write_page(out_dir, path, *_sensitivity_page(out_dir))
    summary, table = _read(out_dir)
    baseline = summary.get("baseline") or {}
    sections = _overview(summary)
    grouping = next((column for column in _PER_GROUP if column in table.columns), None)
    if grouping is not None:  # one explanation per class (latent) or per target
        labels_key, word, units = _PER_GROUP[grouping]
        for label in summary.get(labels_key, []):
            key = str(label)
            rows = table[table[grouping].astype(str) == key]
            attr = _attribution(rows, summary, summary["predictions"][key],
                                (baseline.get("prediction") or {}).get(key))
            sections += _explanations(summary, rows, attr,
                                      (summary.get("completeness_gap") or {}).get(key, {}),
                                      f" of {word} {html.escape(key)}",
                                      units or f"units of {html.escape(key)}", key)
    else:
        attr = _attribution(table, summary, summary["predictions"], baseline.get("prediction"))
        sections += _explanations(summary, table, attr, summary.get("completeness_gap") or {})
    if isinstance(summary.get("interactions"), dict):
        sections.append(_interactions(summary["interactions"], out_dir))
    if isinstance(summary.get("cross_output_correlation"), dict):
        sections.append(_cross_output(summary["cross_output_correlation"]))
    sections.append(_variance(out_dir))
    sections.append(_method(summary))
    return _write_page(out_dir, path, _title(summary), sections)


def _title(summary: dict) -> str:
    """The page's title: the target (several: their names) and the data file's name."""
    target = summary.get("target")
    shown = ", ".join(map(str, target)) if isinstance(target, list) else target
    return f"gpexplain report: {shown} ({Path(str(summary['data_file'])).name})"


def _write_page(out_dir: Path, path, title: str, sections: list[str]) -> Path:
    """Write the page of ``sections`` to ``path`` (default ``out_dir / REPORT_NAME``)."""
    page = (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body>"
        f"<h1>{html.escape(title)}</h1>" + "".join(sections) + "</body></html>\n"
    )
    path = out_dir / REPORT_NAME if path is None else Path(path)
    path.write_text(page, encoding="utf-8")
    return path


# -- gpexplain sensitivity ------------------------------------------------------------------
SENSITIVITY_TABLE = "sensitivity.csv"
_SENSITIVITY_COLUMNS = {  # sensitivity.csv column -> heading
    "feature": "feature", "first_order_index": "first-order index",
    "total_index": "total index", "shapley_index": "Shapley index",
    "expected_shapley_effect": "Shapley effect (posterior expectation)",
    "shapley_effect_std": "its posterior std",
}
# The summary.json entries of each target (keyed by target name when there are several).
_PER_TARGET = ("variance_of_posterior_mean", "expected_variance_over_posterior",
               "std_of_variance_over_posterior", "interactions")


def _sensitivity_page(out_dir: Path) -> tuple[str, list[str]]:
    """``(title, sections)`` of a ``gpexplain sensitivity`` output directory."""
    try:
        summary = json.loads((out_dir / "summary.json").read_text(encoding="utf-8"))
        table = pd.read_csv(out_dir / SENSITIVITY_TABLE)
    except (OSError, ValueError, pd.errors.ParserError) as error:
        raise ValueError(f"cannot read the sensitivity output in {str(out_dir)!r}: "
                         f"{error}") from None
    several = isinstance(summary, dict) and "outputs" in summary
    needed = [*_SENSITIVITY_COLUMNS, *(["output"] if several else [])]
    missing = [c for c in needed if c not in table.columns] + [
        k for k in ("figures", "variance_of_posterior_mean", "data_file")
        if not isinstance(summary, dict) or k not in summary]
    if missing:
        raise ValueError(f"{str(out_dir)!r} was not written by this version of gpexplain "
                         f"sensitivity (missing {missing}); run sensitivity again")
    rows = [["data file", summary.get("data_file")], ["rows", summary.get("rows")],
            ["target", summary.get("target")],
            ["model", f"{summary.get('model')} GP, kernel {summary.get('kernel')}"],
            ["measure", summary.get("measure")]]
    if several:
        rows.append(["several targets", summary.get("multi_output")])
    sections = ["<h2>Data and model</h2>" + _table(["", ""], rows, name_columns=2)]
    for name, figure in summary["figures"].items():
        # Several targets: each entry keyed by target name; one target: the entries as they are.
        entry = {key: (summary[key] or {}).get(name) if several else summary[key]
                 for key in _PER_TARGET if key in summary}
        rows = table[table["output"].astype(str) == name] if several else table
        sections.append(_sensitivity_section(entry, rows, out_dir / str(figure),
                                             name if several else None))
    if isinstance(summary.get("cross_output"), dict):
        sections.append("<h2>Indices across targets</h2>"
                        f"<p>{_text(summary['cross_output'].get('note', ''))}.</p>")
    sections.append(_cited(
        summary,
        "Sobol indices and Shapley effects are quadratic functionals of the latent function; "
        "their posterior expectations and standard deviations are exact moments of a "
        "quadratic form of a Gaussian, under the product measure of the inputs.",
    ))
    return _title(summary), sections


def _sensitivity_section(entry: dict, table: pd.DataFrame, figure: Path,
                         target: str | None) -> str:
    """One target's indices (``entry``: its summary.json values), ranked by total index."""
    title = "" if target is None else f" of target {html.escape(target)}"
    ranked = table.sort_values("total_index", ascending=False, kind="stable")
    pairs = [p for p in entry.get("interactions") or [] if isinstance(p, dict)]
    strongest = "" if not pairs else (
        "<p>Strongest pairs (second-order Sobol index of the posterior mean, its variance's "
        "posterior expectation and std; all pairs in <code>interactions.csv</code>)</p>"
        + _table(["feature i", "feature j", "second-order index", "expected variance", "std"],
                 [[p.get("feature_i"), p.get("feature_j"), p.get("second_order_index"),
                   p.get("expected_second_order"), p.get("second_order_std")] for p in pairs],
                 name_columns=2))
    return (
        f"<h2>Global sensitivity{title}</h2><p>Variance of the posterior mean "
        f"{_number(entry.get('variance_of_posterior_mean'), '.4g')}; over the posterior "
        f"{_number(entry.get('expected_variance_over_posterior'), '.4g')} +- "
        f"{_number(entry.get('std_of_variance_over_posterior'), '.2g')} (squared units of "
        "the target). Indices are shares of the variance of the posterior mean.</p>"
        + _table(list(_SENSITIVITY_COLUMNS.values()),
                 ranked[list(_SENSITIVITY_COLUMNS)].to_numpy().tolist())
        + _saved_png(figure) + strongest
    )
