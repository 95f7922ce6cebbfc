"""Command line: ``gpexplain explain``, ``demo``, ``datasets``, ``poe`` and ``sensitivity``.

Files in, files out. ``explain`` reads a CSV or Parquet table, fits a GP model (``--model``:
exact, sparse variational, random-feature, orthogonal additive or GPX) on all columns except
the target, explains the chosen rows (integrated gradients, Shapley values or GPX
contributions: each attribution a Gaussian with an exact mean and covariance), and writes
``attributions.csv``, ``summary.json``, ``attributions.png`` and ``importance.png`` (plus
``weights.csv`` for GPX and ``global_shapley.png`` for the additive model).
``--save-model DIR`` also saves the fitted model; ``--model-from DIR`` explains with a saved
model instead of fitting one (``gpexplain._cli_saved``).

Bad input ends with exit code 2 and a one-line message on stderr; everything else the
library raises is a bug and keeps its traceback.
"""

from __future__ import annotations

import difflib
import json
import time
import warnings
from pathlib import Path
from typing import Annotated, NoReturn

import numpy as np
import pandas as pd
import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    SpinnerColumn,
    TaskProgressColumn,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table
from threadpoolctl import threadpool_limits

import gpexplain
from gpexplain import _cli_classification, _cli_models, _cli_saved
from gpexplain._cli_models import Choice, check_choice, finite_or_none
from gpexplain._validation import as_class_labels, as_feature_matrix, as_target
from gpexplain.datasets import list_datasets, load_dataset, read_table
from gpexplain.encoding import CategoricalEncoder, is_categorical
from gpexplain.models import FitError, GPRegressor
from gpexplain.parallel import dask_client
from gpexplain.plot import plot_attributions, plot_global_importance

__all__ = [
    "app", "drop_columns", "handle_missing", "parse_rows", "parse_baseline", "resolve_target"
]

BASELINES = ("mean", "median", "zeros")
MISSING_POLICIES = ("error", "drop")
HOLDOUT_FRACTION = 0.2
INTERVAL_LEVEL = 0.95
TOP_FEATURES = 8

app = typer.Typer(
    name="gpexplain",
    help="Fit a Gaussian process to a table and explain its predictions, with uncertainty.",
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
)


# -- small helpers -------------------------------------------------------------------------
def _fail(message: str) -> NoReturn:
    """Print ``Error: <message>`` as one line on stderr and exit with code 2."""
    typer.echo("Error: " + " ".join(str(message).split()).rstrip(".") + ".", err=True)
    raise typer.Exit(code=2)


def _non_negative_int(text: str, what: str) -> int:
    text = text.strip()
    if not text.isdigit():
        raise ValueError(f"{what} {text!r} is not a row position (an integer >= 0)")
    return int(text)


def parse_rows(spec: str, n_rows: int) -> list[int]:
    """Row positions selected by a ``--rows`` specification.

    Parameters
    ----------
    spec : str
        ``"all"``; a half-open range ``"START:STOP"`` of 0-based data-row positions (either end
        may be omitted; ``STOP`` beyond the last row is clipped, as in Python slicing); or a
        comma-separated list ``"3,7,9"`` (duplicates are dropped, order kept).
    n_rows : int
        Number of data rows in the file.

    Returns
    -------
    list of int
        Positions, each in ``0 .. n_rows - 1``; never empty.

    Raises
    ------
    ValueError
        Unparseable specification, a listed row out of range, or a range that selects no row.
    """
    text = spec.strip().lower()
    available = f"the data has {n_rows} rows (positions 0 to {n_rows - 1})"
    if text == "all":
        return list(range(n_rows))
    if ":" in text:
        parts = text.split(":")
        if len(parts) != 2:
            raise ValueError(
                f"unknown --rows {spec!r}; use START:STOP (e.g. 0:20), a list like 3,7,9, or all"
            )
        start = _non_negative_int(parts[0], "--rows start") if parts[0].strip() else 0
        stop = _non_negative_int(parts[1], "--rows stop") if parts[1].strip() else n_rows
        selected = list(range(start, min(stop, n_rows)))
        if not selected:
            raise ValueError(f"--rows {spec!r} selects no rows; {available}")
        return selected
    try:
        positions = [_non_negative_int(part, "--rows entry") for part in text.split(",")]
    except ValueError:
        raise ValueError(
            f"unknown --rows {spec!r}; use START:STOP (e.g. 0:20), a list like 3,7,9, or all"
        ) from None
    outside = [p for p in positions if p >= n_rows]
    if outside:
        raise ValueError(f"--rows {outside[0]} is out of range; {available}")
    return list(dict.fromkeys(positions))


def parse_baseline(spec: str, X: pd.DataFrame) -> tuple[str | np.ndarray, str]:
    """Baseline for ``integrated_gradients`` from a ``--baseline`` specification.

    Parameters
    ----------
    spec : str
        ``mean``, ``median`` or ``zeros`` (over the training rows, column by column), or a
        0-based data-row position whose feature vector becomes the baseline.
    X : pandas.DataFrame
        Feature table (numeric, already validated).

    Returns
    -------
    baseline : str or ndarray of shape (n_features,)
    description : str
        For the summary, e.g. ``"mean"`` or ``"row 12"``.

    Raises
    ------
    ValueError
        Unknown specification or a row position out of range.
    """
    text = spec.strip().lower()
    if text in BASELINES:
        return text, text
    if text.isdigit():
        position = int(text)
        if position >= len(X):
            raise ValueError(
                f"--baseline row {position} is out of range; the data has {len(X)} rows "
                f"(positions 0 to {len(X) - 1})"
            )
        return X.iloc[position].to_numpy(dtype=np.float64), f"row {position}"
    raise ValueError(
        f"unknown --baseline {spec!r}; use mean, median, zeros or a row position "
        f"0 to {len(X) - 1}"
    )


def _check_numeric(frame: pd.DataFrame, categorical: bool = False) -> None:
    """Name the first non-numeric column (``categorical``: accept text columns, one-hot
    encoded later); point at the offending cell when most are numbers."""
    for column in frame.columns:
        values = frame[column]
        if pd.api.types.is_numeric_dtype(values) or pd.api.types.is_bool_dtype(values):
            continue
        converted = pd.to_numeric(values, errors="coerce")
        offending = values.notna() & converted.isna()
        if offending.any() and offending.mean() <= 0.1:  # mostly numbers: a stray marker
            row = offending.idxmax()
            raise TypeError(
                f"column {str(column)!r} is not numeric: row {row} holds {values[row]!r}; "
                "leave missing cells empty and impute or drop those rows"
            )
        if categorical:
            continue
        raise TypeError(
            f"column {str(column)!r} is not numeric (e.g. {values.dropna().iloc[0]!r}); "
            "encode it first (one-hot or ordinal codes) or drop it"
        )


def _load_frame(data: str, header: bool | None = None, names: str | None = None) -> pd.DataFrame:
    """``read_table`` with the command line's ``--header/--no-header`` and ``--names``."""
    choice = {None: "auto", True: "yes", False: "no"}[header]
    column_names = None if names is None else [n.strip() for n in names.split(",")]
    try:
        frame = read_table(data, header=choice, names=column_names)
    except (ValueError, TypeError) as error:
        _fail(str(error).replace("names has", "--names has"))
    generated = [f"x{j}" for j in range(frame.shape[1])]
    if header is None and names is None and list(frame.columns) == generated:
        # Said once the input is accepted (bad input keeps its one-line error): a wrong
        # guess would otherwise only show in the column names.
        frame.attrs["note"] = (
            f"No header line detected (the first line holds numbers): columns named x0 to "
            f"x{frame.shape[1] - 1}; use --header to take it as the header, --names to name them"
        )
    return frame


def drop_columns(frame: pd.DataFrame, spec: str | None) -> pd.DataFrame:
    """Apply ``--drop a,b``: remove those columns (names, or 0-based positions as for
    ``--target``); ValueError names an unknown one."""
    if spec is None:
        return frame
    names = [
        resolve_target(frame, part.strip(), "--drop") for part in spec.split(",") if part.strip()
    ]
    return frame.drop(columns=names)


def resolve_target(frame: pd.DataFrame, target: str, option: str = "--target") -> str:
    """The name of the column ``target`` designates: itself, or else a 0-based position.

    A name wins over a position (a column may be called ``"3"``); a negative position counts
    from the last column (``-1``: the last). ValueError (naming ``option``) lists the columns
    otherwise.
    """
    columns = [str(c) for c in frame.columns]
    if target in columns:
        return target
    text = target.strip()
    if text.lstrip("-").isdigit():
        position = int(text)
        if -len(columns) <= position < len(columns):
            return columns[position]
        raise ValueError(
            f"{option} position {position} is out of range; the file has {len(columns)} "
            f"columns (positions 0 to {len(columns) - 1}, or -1 for the last)"
        )
    close = difflib.get_close_matches(target, columns, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    what = "target column" if option == "--target" else f"{option} column"
    raise ValueError(
        f"{what} {target!r} not found{hint}; give a column name or a 0-based position; "
        "available columns: " + ", ".join(repr(c) for c in columns)
    )


def handle_missing(frame: pd.DataFrame, missing: str) -> tuple[pd.DataFrame, list]:
    """Apply ``--missing``: ``error`` refuses a missing cell (row and column named), ``drop``
    removes every row with one and returns the labels (0-based data-row numbers) it dropped.

    Kept rows keep their labels, so outputs name rows as they are numbered in the file.
    """
    policy = missing.strip().lower()
    if policy not in MISSING_POLICIES:
        raise ValueError(f"unknown --missing {missing!r}; use {' or '.join(MISSING_POLICIES)}")
    absent = frame.isna().to_numpy()
    rows_with_missing = absent.any(axis=1)
    if not rows_with_missing.any():
        return frame, []
    if policy == "error":
        row, column = np.argwhere(absent)[0]
        raise ValueError(
            f"column {str(frame.columns[column])!r} has a missing value at row "
            f"{frame.index[row]!r} ({int(rows_with_missing.sum())} row(s) with missing values "
            "in all); use --missing drop to drop those rows, or fill them in"
        )
    dropped = [int(r) if isinstance(r, int | np.integer) else str(r)
               for r in frame.index[rows_with_missing]]
    return frame.loc[~rows_with_missing], dropped


def _split_target(
    frame: pd.DataFrame, target: str, task: str = "regression", categorical: bool = False
) -> tuple[pd.DataFrame, pd.Series]:
    """Separate and validate features and target; ValueError/TypeError on bad input.

    ``task`` (``--task``): a classification target keeps its labels (any dtype); a
    regression target must be numeric and is returned as float64.

    ``categorical``: text columns are accepted (and checked when they are one-hot encoded).
    """
    columns = [str(c) for c in frame.columns]
    frame = frame.set_axis(columns, axis=1)
    target = resolve_target(frame, target)
    if len(frame) < 2:
        raise ValueError(f"the data has {len(frame)} row(s); at least 2 are needed to fit a GP")
    X = frame.drop(columns=target)
    if X.shape[1] == 0:
        raise ValueError(f"the data has no feature columns besides the target {target!r}")
    _check_numeric(X, categorical)
    numeric = [c for c in X.columns if not is_categorical(X[c])]
    if numeric:
        as_feature_matrix(X[numeric], "X")  # names the row and column of a NaN/inf
    y = frame[target]
    if _cli_classification.guess_task(y, task) == "classification":
        as_class_labels(y, len(frame), name=f"target column {target!r}")
        return X, y
    if not (pd.api.types.is_numeric_dtype(y) or pd.api.types.is_bool_dtype(y)):
        raise TypeError(
            f"target column {target!r} is not numeric (e.g. {y.dropna().iloc[0]!r}); "
            "a regression needs numbers (--task classification fits a classifier)"
        )
    as_target(y, len(frame), name=f"target column {target!r}")
    return X, y.astype(np.float64)


def _show_warnings(caught, console: Console) -> None:
    """One line per distinct user-facing warning (UserWarning, RuntimeWarning)."""
    shown = set()
    for record in caught:
        if not issubclass(record.category, UserWarning | RuntimeWarning):
            continue  # DeprecationWarning and friends are for developers
        message = " ".join(str(record.message).split())
        if message not in shown:
            shown.add(message)
            console.print(f"Warning: {message}", markup=False, highlight=False, soft_wrap=True)


# -- the pipeline --------------------------------------------------------------------------
def _fit(
    choice: Choice, X: pd.DataFrame, y: pd.Series, callback, task: str = "regression",
    warm_start=None,
):
    """Build and fit the chosen estimator, reporting progress through ``callback``.

    ``warm_start``: a fitted exact ARD ``GPRegressor`` whose hyperparameters are the one start
    of this fit (the held-out fit on 80% of the same rows: its optimum is close, so the
    random restarts would only repeat the full fit's search). Other models ignore it: their
    fitted kernels are not starting points of the same parameterisation.
    """
    if task == "classification":
        model = _cli_classification.build_classifier(
            choice.kernel, choice.n_inducing, len(X), choice.seed
        )
        return model.fit(X, y, callback=callback)
    # GPRegressor is looked up here, at call time, so tests can substitute a cheaper one.
    model = _cli_models.build_model(choice, len(X), exact_estimator=GPRegressor)
    if warm_start is not None and choice.model == "exact" and choice.kernel == "ard":
        model.set_params(kernel=warm_start.kernel_, noise=warm_start.noise_, n_restarts=0)
    # One BLAS thread for the fit: OpenBLAS's threads spin on the fit's many small matrix
    # operations (red wine, 1,599 rows, 2 cores: 27.0 s wall with two threads, 19.0 s with one).
    with threadpool_limits(limits=1, user_api="blas"):
        return model.fit(X, y, callback=callback)


def _fit_quietly(choice: Choice, X: pd.DataFrame, y: pd.Series):
    """``(model, seconds)``: ``_fit`` without progress or optimiser warnings; bad data or a
    failed fit exit with code 2 (the ``poe`` and ``sensitivity`` commands)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", module=r"(gpytorch|linear_operator)(\.|$)")
        start = time.perf_counter()
        try:
            model = _fit(choice, X, y, lambda step, total: None)
        except (ValueError, TypeError, FitError) as error:
            _fail(str(error))
    return model, time.perf_counter() - start


def _run(
    frame: pd.DataFrame,
    data_label: str,
    target: str,
    rows: str,
    baseline: str,
    choice: Choice,
    out: Path,
    holdout: bool,
    save_model: Path | None = None,
    saved_model=None,
    missing: str = "error",
    drop: str | None = None,
    report: bool = False,
    task: str = "regression",
    executor: tuple[str | None, int | None] = (None, None),
) -> None:
    """Fit (or take ``saved_model``), explain, write the output files and print a summary.

    ``executor``: (Dask scheduler address, number of local Dask workers); (None, None)
    explains in this process.
    """
    stdout, stderr = Console(), Console(stderr=True)
    note = frame.attrs.get("note")
    try:
        if saved_model is None:
            target = resolve_target(frame, target)
        frame = drop_columns(frame, drop)
        if target is not None and target not in frame.columns and saved_model is None:
            raise ValueError(f"--drop removes the target column {target!r}")
        frame, dropped = handle_missing(frame, missing)
        if saved_model is None:
            X, y = _split_target(frame, target, task, categorical=True)
            task = _cli_classification.guess_task(y, task)
        else:  # --model-from: the saved features, by name; no target needed
            X = _cli_saved.saved_features(frame, saved_model, target)
            task = "classification" if hasattr(saved_model, "classes_") else "regression"
        if task == "classification":
            _cli_classification.check_choice(choice)
            if executor != (None, None):
                raise ValueError(
                    "--dask-scheduler and --workers apply to regressions; the classification "
                    "mode explains in this process (drop them)"
                )
        # Text columns are one-hot encoded; the model sees X_model, the user X. A saved model's
        # features are its (already encoded) columns, so there the encoder is the identity.
        encoder = CategoricalEncoder().fit(X)
        X_model = encoder.transform(X)
        positions = parse_rows(rows, len(X))
        baseline_value, baseline_label = parse_baseline(baseline, X_model)
        if not choice.uses_baseline and baseline.strip().lower() != "mean":
            raise ValueError(
                f"--baseline applies to integrated gradients only, not to --model "
                f"{choice.model} --method {choice.method}"
            )
    except (ValueError, TypeError) as error:
        _fail(str(error))
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        _fail(f"cannot create output directory {str(out)!r}: {error.strerror or error}")
    if note:
        stderr.print(note, markup=False, highlight=False, soft_wrap=True)
    if dropped:
        shown = ", ".join(map(str, dropped[:10])) + (", ..." if len(dropped) > 10 else "")
        stderr.print(
            f"Dropped {len(dropped)} row(s) with missing values (data rows {shown}); "
            f"{len(X)} remain", markup=False, highlight=False, soft_wrap=True,
        )

    timings: dict[str, float | None] = {}
    holdout_summary: dict = {"r2": None, "test_fraction": HOLDOUT_FRACTION, "seed": choice.seed}
    if task == "classification":
        holdout_summary = {"accuracy": None, "log_loss": None, "brier_score": None,
                           "test_fraction": HOLDOUT_FRACTION, "seed": choice.seed}
    columns = [
        SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
        TaskProgressColumn(), TimeElapsedColumn(),
    ]
    with (
        warnings.catch_warnings(record=True) as caught,
        Progress(*columns, console=stderr) as progress,
    ):
        warnings.simplefilter("always")
        # Jitter notices while the optimiser explores: internal to fitting, not about the data.
        warnings.filterwarnings("ignore", module=r"(gpytorch|linear_operator)(\.|$)")
        if saved_model is None:
            kind = "GP classifier" if task == "classification" else f"{choice.model} GP"
            bar = progress.add_task(
                f"Fitting {kind} ({choice.kernel_label}, {len(X)} rows)", total=None
            )
            start = time.perf_counter()
            try:
                model = _fit(choice, X_model, y, _advance(progress, bar), task)
            except (ValueError, TypeError, FitError) as error:
                progress.stop()
                _fail(str(error))
            timings["fit"] = time.perf_counter() - start
            progress.update(bar, completed=1, total=1)
            if save_model is not None:
                try:
                    _cli_saved.save_model(model, choice, target, save_model)
                except OSError as error:
                    progress.stop()
                    _fail(f"cannot save the model to {str(save_model)!r}: {error}")
        else:
            model, timings["fit"] = saved_model, None
            holdout, holdout_summary["skipped"] = False, "model loaded with --model-from"

        bar = progress.add_task(f"Explaining {len(positions)} row(s)", total=None)
        start = time.perf_counter()
        try:
            if task == "classification":  # one Attribution per explained class
                attr, extras = {}, {"probability": {}}
                for level, by_class in (
                    (attr, _cli_classification.explain_by_class),
                    (extras["probability"], _cli_classification.probability_by_class),
                ):
                    for label, encoded in by_class(
                        model, X_model.iloc[positions], baseline_value, choice
                    ).items():
                        level[label] = encoder.group(encoded, X.iloc[positions])
            else:
                with dask_client(*executor) as client:
                    encoded_attr, extras = _cli_models.explain(
                        choice, model, X_model.iloc[positions], baseline_value, client
                    )
                attr = encoder.group(encoded_attr, X.iloc[positions])
        except (ValueError, TypeError, OSError) as error:  # OSError: scheduler unreachable
            progress.stop()
            _fail(str(error))
        timings["explain"] = time.perf_counter() - start
        progress.update(bar, completed=1, total=1)

        timings["holdout"] = None
        if holdout:
            what = "scores" if task == "classification" else "R^2"
            bar = progress.add_task(f"Held-out {what} (80/20 split)", total=None)
            start = time.perf_counter()
            holdout_summary.update(
                _holdout(X_model, y, choice, _advance(progress, bar), task, model)
            )
            timings["holdout"] = time.perf_counter() - start
            progress.update(bar, completed=1, total=1)
        elif "skipped" not in holdout_summary:
            holdout_summary["skipped"] = "disabled with --no-holdout"
    _show_warnings(caught, stderr)

    row_labels = [int(r) if isinstance(r, int | np.integer) else str(r) for r in X.index]
    explained = [row_labels[p] for p in positions]
    saved = [f"the fitted model (in {save_model})"] if save_model is not None and (
        saved_model is None) else []
    context = {  # summary.json entries of both tasks
        "categorical_columns": {c: encoder.groups_[c] for c in encoder.categorical_},
        "missing": {"policy": missing.strip().lower(), "dropped_rows": dropped},
    }
    if task == "classification":
        written = _write_classification(
            model, attr, extras["probability"], X, data_label, frame.shape, target, choice, rows,
            explained, baseline_label, holdout_summary, timings, out, stdout, context,
        )
        _finish(out, written + saved, report, stdout)
        return
    written = ["attributions.csv", "summary.json", "attributions.png", "importance.png", *saved]
    _write_table(attr, explained, out / "attributions.csv")
    if "weights" in extras:
        _write_table(extras["weights"], explained, out / "weights.csv", value_name="weight")
        written.append("weights.csv")

    summary = _summary(
        model, encoded_attr, extras, X_model, data_label, frame.shape, target, choice, rows,
        explained, baseline_label, holdout_summary, timings,
    )
    summary.update(context)
    summary["predictions"] = [float(p) for p in attr.prediction]  # for the report
    with open(out / "summary.json", "w", encoding="utf-8") as handle:
        json.dump(summary, handle, indent=2, allow_nan=False)
        handle.write("\n")

    shown = min(4, attr.n_points)
    figure = plot_attributions(
        attr, max_points=shown, point_labels=[f"row {r}" for r in explained[:shown]]
    )
    figure.savefig(out / "attributions.png", dpi=120)
    plot_global_importance(attr).savefig(out / "importance.png", dpi=120)
    if "global" in extras:
        from gpexplain.plot import plot_global_shapley

        plot_global_shapley(extras["global"]).savefig(out / "global_shapley.png", dpi=120)
        written.append("global_shapley.png")

    stdout.print(_top_features_table(attr, explained[0]))
    r2 = holdout_summary.get("r2")
    if r2 is not None:
        stdout.print(f"Held-out R^2 (seeded {HOLDOUT_FRACTION:.0%} split): {r2:.3f}")
    _finish(out, written, report, stdout)


def _finish(out: Path, written: list, report: bool, stdout: Console) -> None:
    """Write report.html when ``--report`` asks (from the files just written), then say what
    was written."""
    if report:
        from gpexplain.report import write_report

        written = [*written, write_report(out).name]
    stdout.print(
        f"Wrote {', '.join(written)} to {out}", markup=False, highlight=False, soft_wrap=True
    )


def _write_table(attr, explained: list, path: Path, value_name: str = "attribution") -> None:
    """``Attribution.to_frame`` with the data-row label of each explained point first."""
    _attribution_table(attr, explained, value_name).to_csv(path, index=False)


def _attribution_table(attr, explained: list, value_name: str = "attribution") -> pd.DataFrame:
    table = attr.to_frame(INTERVAL_LEVEL).rename(columns={"attribution": value_name})
    table.insert(0, "row", np.asarray(explained, dtype=object)[table["point"].to_numpy()])
    return table


def _write_classification(
    model, attributions: dict, probabilities: dict, X, data_label, shape, target, choice,
    rows_spec, explained, baseline_label, holdout_summary, timings, out: Path, stdout: Console,
    context: dict,
) -> list[str]:
    """Outputs of the classification mode: ``attributions.csv`` with a ``class`` column,
    ``summary.json`` with held-out accuracy, log loss and Brier score instead of R^2 (and,
    for the report, the latent ``predictions`` per class), and ``attributions_<class>.png`` /
    ``importance_<class>.png`` per explained class; returns the names of the files written.
    ``context``: summary entries shared with the regression mode.

    ``attributions`` (latent level, exact Gaussians: the ``attribution``/``std``/interval
    columns and the figures) and ``probabilities`` (integrated gradients of E[p], the
    ``probability_attribution`` column, summing to E[p(x)] - E[p(baseline)]) share classes,
    points and features in the same order; ``probabilities`` is empty for Shapley values
    (latent only), and then the column and its summary entries are left out."""
    from types import SimpleNamespace

    names = list(X.columns)
    labels = {label: _cli_classification.json_label(label) for label in attributions}
    tables = []
    for label, attr in attributions.items():
        table = _attribution_table(attr, explained)
        table.insert(1, "class", labels[label])
        if probabilities:
            table.insert(table.columns.get_loc("attribution") + 1, "probability_attribution",
                         probabilities[label].mean.ravel())
        tables.append(table)
    pd.concat(tables, ignore_index=True).to_csv(out / "attributions.csv", index=False)

    first = next(iter(attributions.values()))
    summary = _summary(
        model, first, {}, X, data_label, shape, target, choice, rows_spec, explained,
        baseline_label, holdout_summary, timings,
    )
    posteriors = model.posteriors_ if model.link_ == "softmax" else [model.posterior_]
    summary.update({
        "task": "classification",
        "model": "sparse variational GP classifier",
        "classes": [_cli_classification.json_label(label) for label in model.classes_],
        "link": model.link_,
        "explained_classes": list(labels.values()),
        "explained_output": _cli_classification.describe_output(model, choice),
        "hyperparameters": {
            str(labels[label]): {  # units stated once below: the latent is not in units of y
                key: value for key, value in _cli_models.hyperparameters(
                    SimpleNamespace(kernel_=kernel, mean_=posterior.mean), names
                ).items() if key != "units"
            }
            for label, kernel, posterior in zip(
                attributions, model.kernels_, posteriors, strict=True
            )
        },
        "hyperparameter_units": "lengthscales in units of X; variance and mean in (squared) "
        "latent units",
        "elbo": finite_or_none(model.elbo_),
        "completeness_gap": {
            str(labels[label]): {key: attr.completeness_gap()[key] for key in ("mean", "variance")}
            for label, attr in attributions.items()
        },
        "predictions": {  # the latent means the attributions complete to, for the report
            str(labels[label]): [float(p) for p in attr.prediction]
            for label, attr in attributions.items()
        },
        **context,
    })
    if probabilities:
        summary.update(_probability_summary(labels, probabilities))
    if summary["baseline"] is not None:
        summary["baseline"]["prediction"] = {
            str(labels[label]): float(attr.baseline_prediction)
            for label, attr in attributions.items()
        }
    with open(out / "summary.json", "w", encoding="utf-8") as handle:
        json.dump(summary, handle, indent=2, allow_nan=False)
        handle.write("\n")

    written = ["attributions.csv", "summary.json"]
    shown = min(4, first.n_points)
    for label, attr in attributions.items():
        suffix = _cli_classification.file_label(label)
        figure = plot_attributions(
            attr, max_points=shown, point_labels=[f"row {r}" for r in explained[:shown]]
        )
        figure.suptitle(f"class {labels[label]}: {summary['explained_output']}", fontsize=9)
        figure.savefig(out / f"attributions_{suffix}.png", dpi=120)
        plot_global_importance(attr).savefig(out / f"importance_{suffix}.png", dpi=120)
        written += [f"attributions_{suffix}.png", f"importance_{suffix}.png"]
        stdout.print(f"Class {labels[label]}", markup=False, highlight=False)
        stdout.print(_top_features_table(attr, explained[0]))
    if holdout_summary.get("accuracy") is not None:
        stdout.print(
            f"Held-out (seeded {HOLDOUT_FRACTION:.0%} split): accuracy "
            f"{holdout_summary['accuracy']:.3f}, log loss {holdout_summary['log_loss']:.3f}, "
            f"Brier score {holdout_summary['brier_score']:.3f}"
        )
    return written


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


def _advance(progress: Progress, task):
    """Progress callback ``(step, total)`` for one Rich task."""

    def advance(step: int, total: int) -> None:
        progress.update(task, completed=step, total=total)

    return advance


def _holdout(
    X: pd.DataFrame, y: pd.Series, choice: Choice, callback, task="regression", full_model=None
) -> dict:
    """R^2 (classification: accuracy, log loss, Brier score) on a seeded 20% split of a
    second model fitted on the other 80% (stratified by class where every class has 2 rows;
    a regression started at the full fit's hyperparameters where ``_fit`` can).
    """
    from sklearn.model_selection import train_test_split

    stratify = None
    if task == "classification" and y.value_counts().min() >= 2:
        stratify = y
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=HOLDOUT_FRACTION, random_state=choice.seed, stratify=stratify
    )
    result = {"n_train": len(X_train), "n_test": len(X_test)}
    if len(X_test) < 2 or len(X_train) < 2:
        result["skipped"] = "too few rows for a 80/20 split with 2 or more rows on each side"
        return result
    try:
        model = _fit(choice, X_train, y_train, callback, task, warm_start=full_model)
    except (ValueError, FitError) as error:  # e.g. every column constant in the split
        result["skipped"] = " ".join(str(error).split())
        return result
    if task == "classification":
        if not set(y_test) <= set(model.classes_):
            result["skipped"] = "a class of the held-out rows is missing from the training rows"
            return result
        result.update(_cli_classification.holdout_metrics(model, X_test, y_test))
        return result
    result["r2"] = finite_or_none(model.score(X_test, y_test))
    return result


def _summary(
    model, attr, extras, X, data_label, shape, target, choice, rows_spec, explained,
    baseline_label, holdout_summary, timings,
) -> dict:
    names = list(X.columns)
    gaps = attr.completeness_gap()
    summary = {
        "data_file": data_label,
        "shape": {"rows": int(shape[0]), "columns": int(shape[1]), "features": len(names)},
        "target": target,
        "feature_names": names,
        "model": choice.model,
        "kernel": choice.kernel_label,
        "seed": choice.seed,
        "hyperparameters": _cli_models.hyperparameters(model, names),
        "constant_features": list(getattr(model, "constant_features_", [])),
        "log_marginal_likelihood": finite_or_none(
            getattr(model, "log_marginal_likelihood_value_", np.nan)
        ),
        "holdout": holdout_summary,
        "rows": rows_spec,
        "explained_rows": explained,
        "method": attr.method,
        "interval_level": INTERVAL_LEVEL,
        "baseline": None,
        "completeness_gap": {"mean": gaps["mean"], "variance": gaps["variance"]},
        "timings_seconds": timings,
        "gpexplain_version": gpexplain.__version__,
    }
    if attr.baseline is not None and np.ndim(attr.baseline) == 2:  # a background sample
        summary["baseline"] = {
            "spec": f"{len(attr.baseline)} background rows drawn with the seed",
            "prediction": float(attr.baseline_prediction),
        }
    elif attr.baseline is not None:
        summary["baseline"] = {
            "spec": baseline_label,
            "vector": dict(zip(names, (float(v) for v in attr.baseline), strict=True)),
            "prediction": float(attr.baseline_prediction),
        }
    elif attr.baseline_prediction is not None:
        summary["baseline"] = {"spec": "base value", "prediction": float(attr.baseline_prediction)}
    if "global" in extras:
        result = extras["global"]
        summary["global_shapley"] = {
            "values": dict(zip(names, map(float, result.values), strict=True)),
            "first_order": dict(zip(names, map(float, result.first_order), strict=True)),
            "total_variance": float(result.total_variance),
            "units": "squared units of y (a decomposition of the variance of the prediction)",
        }
    return summary


def _format_value(value) -> str:
    """A feature value for the console: numbers to 4 digits, category labels as they are."""
    return f"{value:.4g}" if isinstance(value, int | float | np.number) else str(value)


def _top_features_table(attr, row_label) -> Table:
    """Rich table of the largest |attribution| features of the first explained point."""
    lower, upper = attr.interval(INTERVAL_LEVEL)
    order = np.argsort(-np.abs(attr.mean[0]), kind="stable")[:TOP_FEATURES]
    title = f"Row {row_label}: prediction {attr.prediction[0]:.4g}"
    if attr.baseline_prediction is not None:
        title += f", baseline prediction {attr.baseline_prediction:.4g}"
    table = Table(title=title)
    table.add_column("feature")
    table.add_column("value", justify="right")
    table.add_column("attribution", justify="right")
    table.add_column(f"{INTERVAL_LEVEL:.0%} interval", justify="right")
    for i in order:
        table.add_row(
            attr.feature_names[i],
            _format_value(attr.X[0, i]),
            f"{attr.mean[0, i]:+.4g}",
            f"[{lower[0, i]:+.3g}, {upper[0, i]:+.3g}]",
        )
    return table


# -- commands ------------------------------------------------------------------------------
HeaderOption = Annotated[
    bool | None,
    typer.Option(
        "--header/--no-header",
        help="Whether the first line names the columns (default: detected where unambiguous, "
        "else yes).",
        show_default=False,
    ),
]
NamesOption = Annotated[
    str | None,
    typer.Option(help="Comma-separated column names (default without a header: x0, x1, ...)."),
]
MissingOption = Annotated[
    str,
    typer.Option(help="Missing cells (empty, NA, ?): error stops, drop drops those rows."),
]
RowsOption = Annotated[
    str, typer.Option(help="Rows to explain: START:STOP (0-based, STOP excluded), 3,7,9 or all.")
]
BaselineOption = Annotated[
    str,
    typer.Option(help="Baseline: mean, median, zeros, or a 0-based row position of the data."),
]
ModelOption = Annotated[
    str,
    typer.Option(
        help="GP model: exact, sparse (variational, inducing points), random-features, "
        "additive (orthogonal additive, Shapley values) or gpx (locally linear weights)."
    ),
]
KernelOption = Annotated[
    str,
    typer.Option(
        help="Kernel of exact/sparse models: ard (one lengthscale per feature), isotropic, "
        "matern52, matern32 or rq (exact only)."
    ),
]
MethodOption = Annotated[
    str,
    typer.Option(
        help="Explanation: auto (the model's own), ig (integrated gradients) or shapley "
        "(additive model; exact model or classifier with --kernel ard/isotropic, see --game; "
        "a classifier's per-class latent)."
    ),
]
InducingOption = Annotated[
    int | None,
    typer.Option(
        help=f"Inducing points of --model sparse (default {_cli_models.DEFAULT_N_INDUCING})."
    ),
]
SeedOption = Annotated[int, typer.Option(help="Seed of the optimiser restarts and the split.")]
TaskOption = Annotated[
    str,
    typer.Option(
        help="auto (a text, boolean or 0..k-1 / 1..k integer-coded target with at most "
        f"{_cli_classification.MAX_CODED_CLASSES} classes is classified), classification "
        "(GP classifier, attributions per class) or regression."
    ),
]
# -- exact Shapley values of product-kernel GPs (issue 13) --
GameOption = Annotated[
    str | None,
    typer.Option(
        help="Game of --model exact --method shapley: interventional (default; --background "
        "rows), baseline (--baseline) or product-measure (the columns' Gaussian measure)."
    ),
]
BackgroundOption = Annotated[
    int | None,
    typer.Option(
        help="Background rows of the interventional game, drawn from the data with --seed "
        f"(default {_cli_models.DEFAULT_BACKGROUND})."
    ),
]
HoldoutOption = Annotated[
    bool, typer.Option(help="Also report R^2 on a seeded 20% held-out split (fits twice).")
]


@app.command()
def explain(
    data: Annotated[
        str,
        typer.Argument(
            metavar="DATA",
            help="CSV or whitespace-separated text (delimiter detected), Excel or Parquet file.",
        ),
    ],
    target: Annotated[
        str | None,
        typer.Option(
            help="Target column: its name, or its 0-based position (-1: last); with "
            "--model-from it is dropped if present."
        ),
    ] = None,
    header: HeaderOption = None,
    names: NamesOption = None,
    missing: MissingOption = "error",
    drop: Annotated[
        str | None,
        typer.Option(help="Comma-separated columns to leave out (names or 0-based positions)."),
    ] = None,
    rows: RowsOption = "0:20",
    baseline: BaselineOption = "mean",
    model: ModelOption = "exact",
    kernel: KernelOption = "ard",
    method: MethodOption = "auto",
    n_inducing: InducingOption = None,
    out: Annotated[Path, typer.Option(help="Output directory.")] = Path("gpexplain-out"),
    seed: SeedOption = 0,
    holdout: HoldoutOption = True,
    save_model: Annotated[
        Path | None,
        typer.Option(help="Also save the fitted model to this directory (for --model-from)."),
    ] = None,
    model_from: Annotated[
        Path | None,
        typer.Option(
            help="Explain DATA's rows with the model saved in this directory (by --save-model "
            "or model.save), without fitting; its columns must be the model's features."
        ),
    ] = None,
    report: Annotated[
        bool, typer.Option("--report", help="Also write report.html (see gpexplain report).")
    ] = False,
    task: TaskOption = "auto",
    game: GameOption = None,
    background: BackgroundOption = None,
    dask_scheduler: Annotated[
        str | None,
        typer.Option(help="Explain on this Dask cluster (scheduler address, e.g. "
                     "tcp://10.0.0.1:8786); needs gpexplain[dask]."),
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option(help="Explain on a local Dask cluster of N worker processes."),
    ] = None,
) -> None:
    """Fit a GP to DATA and explain rows, each attribution with its 95% interval."""
    saved_model = None
    try:
        if model_from is None:
            if target is None:
                raise ValueError("--target is required (unless --model-from is given)")
            choice = check_choice(model, kernel, method, seed, n_inducing, game, background)
        else:
            if save_model is not None or (model, kernel, n_inducing) != ("exact", "ard", None):
                raise ValueError(
                    "--model-from uses the saved model as it is; drop --model, --kernel, "
                    "--n-inducing and --save-model"
                )
            saved_model, choice, saved_target = _cli_saved.load_model(model_from, method, game,
                                                                      background)
            target = target or saved_target
        if dask_scheduler is not None and workers is not None:
            raise ValueError("give --dask-scheduler or --workers, not both")
        if workers is not None and workers < 1:
            raise ValueError(f"--workers must be a positive integer, got {workers}")
    except (ValueError, TypeError, FileNotFoundError) as error:
        _fail(str(error))
    frame = _load_frame(data, header, names)
    _run(frame, str(data), target, rows, baseline, choice, out, holdout, save_model, saved_model,
         missing, drop, report, task, (dask_scheduler, workers))


@app.command()
def demo(
    out: Annotated[Path, typer.Option(help="Output directory.")] = Path("gpexplain-demo"),
    dataset: Annotated[str, typer.Option(help="Bundled data set (see gpexplain datasets).")] = (
        "diabetes"
    ),
) -> None:
    """Explain rows 0:20 of a bundled data set (default: scikit-learn's scaled diabetes)."""
    try:
        X, y = load_dataset(dataset)
    except (ValueError, TypeError) as error:
        _fail(str(error))
    frame = pd.concat([X, y], axis=1)
    choice = check_choice("exact", "ard", "auto", 0, None)
    _run(frame, f"bundled:{dataset}", str(y.name), "0:20", "mean", choice, out, True)


@app.command(name="report")
def report_command(
    out_dir: Annotated[
        Path, typer.Argument(metavar="OUT_DIR", help="Output directory of gpexplain explain.")
    ],
    output: Annotated[
        Path | None, typer.Option(help="HTML file to write (default OUT_DIR/report.html).")
    ] = None,
) -> None:
    """Write one self-contained HTML report of an explain output directory."""
    from gpexplain.report import write_report

    try:
        path = write_report(out_dir, output)
    except ValueError as error:
        _fail(str(error))
    except OSError as error:
        _fail(f"cannot write the report: {error.strerror or error}")
    Console().print(f"Wrote {path}", markup=False, highlight=False, soft_wrap=True)


@app.command(name="poe")
def poe_command(
    data: Annotated[str, typer.Argument(metavar="DATA", help="CSV or Parquet file.")],
    target: Annotated[str, typer.Option(help="Name of the target column.")],
    lambda_: Annotated[
        list[str] | None,
        typer.Option("--lambda", help="Property weight NAME=VALUE (F_grad, F_func, R_avg, "
                     "R_max, S, C); repeat for a mix. Default F_grad=1."),
    ] = None,
    rows: RowsOption = "0:20",
    similarity: Annotated[str, typer.Option(help="Similarity between rows for R_avg: "
                                            "uniform, gaussian or knn.")] = "uniform",
    lengthscale: Annotated[float | None, typer.Option(help="Lengthscale of --similarity "
                                                      "gaussian, in units of X.")] = None,
    k: Annotated[int, typer.Option(help="Neighbours of --similarity knn.")] = 5,
    out: Annotated[Path, typer.Option(help="Output directory.")] = Path("gpexplain-poe"),
    seed: SeedOption = 0,
) -> None:
    """Fit a GP to DATA and explain rows with property-optimised explanations (POE)."""
    from gpexplain._cli_poe import run

    run(data, target, lambda_ or [], rows, similarity, lengthscale, k, out, seed)


@app.command()
def sensitivity(
    data: Annotated[
        str, typer.Argument(metavar="DATA", help="CSV (delimiter detected) or Parquet file.")
    ],
    target: Annotated[str, typer.Option(help="Name of the target column.")],
    kernel: Annotated[str, typer.Option(help="Kernel: ard (default) or isotropic.")] = "ard",
    out: Annotated[Path, typer.Option(help="Output directory.")] = Path("gpexplain-sensitivity"),
    seed: SeedOption = 0,
) -> None:
    """Fit an exact GP to DATA and write its global Sobol indices and Shapley effects, with
    their posterior uncertainty, under the columns' Gaussian product measure."""
    from gpexplain._cli_sensitivity import run

    run(data, target, kernel, out, seed)


@app.command()
def datasets() -> None:
    """List the bundled data sets."""
    frame = list_datasets()
    table = Table(title="Bundled data sets (gpexplain demo --dataset NAME)")
    for column in frame.columns:
        numeric = column in ("rows", "features")
        table.add_column(
            column,
            justify="right" if numeric else "left",
            no_wrap=numeric or column == "name",
            overflow="fold",  # long DOIs break rather than vanish behind an ellipsis
        )
    for record in frame.itertuples(index=False):
        table.add_row(*(str(value) for value in record))
    Console().print(table)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"gpexplain {gpexplain.__version__}")
        raise typer.Exit()


@app.callback()
def main(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    """Fit a Gaussian process to a table and explain its predictions, with uncertainty."""
