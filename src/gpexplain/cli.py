"""Command line: ``gpexplain explain``, ``gpexplain demo`` and ``gpexplain datasets``.

Files in, files out. ``explain`` reads a CSV or Parquet table, fits a GP model (``--model``:
exact, sparse variational, random-feature, orthogonal additive or GPX) on all columns except
the target, explains the chosen rows (integrated gradients, Shapley values or GPX
contributions: each attribution a Gaussian with an exact mean and covariance), and writes
``attributions.csv``, ``summary.json``, ``attributions.png`` and ``importance.png`` (plus
``weights.csv`` for GPX and ``global_shapley.png`` for the additive model).

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

import gpexplain
from gpexplain import _cli_models
from gpexplain._cli_models import Choice, check_choice, finite_or_none
from gpexplain._validation import as_feature_matrix, as_target
from gpexplain.datasets import list_datasets, load_dataset, read_table
from gpexplain.models import FitError, GPRegressor
from gpexplain.parallel import dask_client
from gpexplain.plot import plot_attributions, plot_global_importance

__all__ = ["app", "parse_rows", "parse_baseline"]

BASELINES = ("mean", "median", "zeros")
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


def _check_numeric(frame: pd.DataFrame) -> None:
    """Name the first non-numeric column; point at the offending cell when most are numbers."""
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
        raise TypeError(
            f"column {str(column)!r} is not numeric (e.g. {values.dropna().iloc[0]!r}); "
            "encode it first (one-hot or ordinal codes) or drop it"
        )


def _load_frame(data: str) -> pd.DataFrame:
    try:
        return read_table(data)
    except (ValueError, TypeError) as error:
        _fail(str(error))


def _split_target(frame: pd.DataFrame, target: str) -> tuple[pd.DataFrame, pd.Series]:
    """Separate and validate features and target; ValueError/TypeError on bad input."""
    columns = [str(c) for c in frame.columns]
    frame = frame.set_axis(columns, axis=1)
    if target not in columns:
        close = difflib.get_close_matches(target, columns, n=1)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        raise ValueError(
            f"target column {target!r} not found{hint}; available columns: "
            + ", ".join(repr(c) for c in columns)
        )
    if len(frame) < 2:
        raise ValueError(f"the data has {len(frame)} row(s); at least 2 are needed to fit a GP")
    X = frame.drop(columns=target)
    if X.shape[1] == 0:
        raise ValueError(f"the data has no feature columns besides the target {target!r}")
    _check_numeric(X)
    as_feature_matrix(X, "X")  # names the row and column of a NaN/inf
    y = frame[target]
    if not (pd.api.types.is_numeric_dtype(y) or pd.api.types.is_bool_dtype(y)):
        raise TypeError(
            f"target column {target!r} is not numeric (e.g. {y.dropna().iloc[0]!r}); "
            "gpexplain explains regression targets"
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
def _fit(choice: Choice, X: pd.DataFrame, y: pd.Series, callback, warm_start=None):
    """Build and fit the chosen estimator, reporting progress through ``callback``.

    ``warm_start``: a fitted exact ARD ``GPRegressor`` whose hyperparameters are the one start
    of this fit (the held-out fit on 80% of the same rows: its optimum is close, so the
    random restarts would only repeat the full fit's search). Other models ignore it: their
    fitted kernels are not starting points of the same parameterisation.
    """
    # GPRegressor is looked up here, at call time, so tests can substitute a cheaper one.
    model = _cli_models.build_model(choice, len(X), exact_estimator=GPRegressor)
    if warm_start is not None and choice.model == "exact" and choice.kernel == "ard":
        model.set_params(kernel=warm_start.kernel_, noise=warm_start.noise_, n_restarts=0)
    return model.fit(X, y, callback=callback)


def _run(
    frame: pd.DataFrame,
    data_label: str,
    target: str,
    rows: str,
    baseline: str,
    choice: Choice,
    out: Path,
    holdout: bool,
    executor: tuple[str | None, int | None] = (None, None),
) -> None:
    """Fit, explain, write the output files and print a summary.

    ``executor``: (Dask scheduler address, number of local Dask workers); (None, None)
    explains in this process.
    """
    stdout, stderr = Console(), Console(stderr=True)
    try:
        X, y = _split_target(frame, target)
        positions = parse_rows(rows, len(X))
        baseline_value, baseline_label = parse_baseline(baseline, X)
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

    timings: dict[str, float | None] = {}
    holdout_summary: dict = {"r2": None, "test_fraction": HOLDOUT_FRACTION, "seed": choice.seed}
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
        task = progress.add_task(
            f"Fitting {choice.model} GP ({choice.kernel_label}, {len(X)} rows)", total=None
        )
        start = time.perf_counter()
        try:
            model = _fit(choice, X, y, _advance(progress, task))
        except (ValueError, TypeError, FitError) as error:
            progress.stop()
            _fail(str(error))
        timings["fit"] = time.perf_counter() - start
        progress.update(task, completed=1, total=1)

        task = progress.add_task(f"Explaining {len(positions)} row(s)", total=None)
        start = time.perf_counter()
        try:
            with dask_client(*executor) as client:
                attr, extras = _cli_models.explain(
                    choice, model, X.iloc[positions], baseline_value, client
                )
        except (ValueError, TypeError, OSError) as error:  # OSError: scheduler unreachable
            progress.stop()
            _fail(str(error))
        timings["explain"] = time.perf_counter() - start
        progress.update(task, completed=1, total=1)

        timings["holdout"] = None
        if holdout:
            task = progress.add_task("Held-out R^2 (80/20 split)", total=None)
            start = time.perf_counter()
            holdout_summary.update(_holdout(X, y, choice, _advance(progress, task), model))
            timings["holdout"] = time.perf_counter() - start
            progress.update(task, completed=1, total=1)
        else:
            holdout_summary["skipped"] = "disabled with --no-holdout"
    _show_warnings(caught, stderr)

    row_labels = [int(r) if isinstance(r, int | np.integer) else str(r) for r in X.index]
    explained = [row_labels[p] for p in positions]
    written = ["attributions.csv", "summary.json", "attributions.png", "importance.png"]
    _write_table(attr, explained, out / "attributions.csv")
    if "weights" in extras:
        _write_table(extras["weights"], explained, out / "weights.csv", value_name="weight")
        written.append("weights.csv")

    summary = _summary(
        model, attr, extras, X, data_label, frame.shape, target, choice, rows, explained,
        baseline_label, holdout_summary, timings,
    )
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
    stdout.print(
        f"Wrote {', '.join(written)} to {out}", markup=False, highlight=False, soft_wrap=True
    )


def _write_table(attr, explained: list, path: Path, value_name: str = "attribution") -> None:
    """``Attribution.to_frame`` with the data-row label of each explained point first."""
    table = attr.to_frame(INTERVAL_LEVEL).rename(columns={"attribution": value_name})
    table.insert(0, "row", np.asarray(explained, dtype=object)[table["point"].to_numpy()])
    table.to_csv(path, index=False)


def _advance(progress: Progress, task):
    """Progress callback ``(step, total)`` for one Rich task."""

    def advance(step: int, total: int) -> None:
        progress.update(task, completed=step, total=total)

    return advance


def _holdout(X: pd.DataFrame, y: pd.Series, choice: Choice, callback, full_model) -> dict:
    """R^2 on a seeded 20% split of a second model fitted on the other 80% (started at the
    full fit's hyperparameters where ``_fit`` can)."""
    from sklearn.model_selection import train_test_split

    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=HOLDOUT_FRACTION, random_state=choice.seed
    )
    result = {"n_train": len(X_train), "n_test": len(X_test)}
    if len(X_test) < 2 or len(X_train) < 2:
        result["skipped"] = "too few rows for a 80/20 split with 2 or more rows on each side"
        return result
    try:
        model = _fit(choice, X_train, y_train, callback, warm_start=full_model)
    except (ValueError, FitError) as error:  # e.g. every column constant in the split
        result["skipped"] = " ".join(str(error).split())
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
    if attr.baseline is not None:
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
            f"{attr.X[0, i]:.4g}",
            f"{attr.mean[0, i]:+.4g}",
            f"[{lower[0, i]:+.3g}, {upper[0, i]:+.3g}]",
        )
    return table


# -- commands ------------------------------------------------------------------------------
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
        "(additive model)."
    ),
]
InducingOption = Annotated[
    int | None,
    typer.Option(
        help=f"Inducing points of --model sparse (default {_cli_models.DEFAULT_N_INDUCING})."
    ),
]
SeedOption = Annotated[int, typer.Option(help="Seed of the optimiser restarts and the split.")]
HoldoutOption = Annotated[
    bool, typer.Option(help="Also report R^2 on a seeded 20% held-out split (fits twice).")
]


@app.command()
def explain(
    data: Annotated[
        str, typer.Argument(metavar="DATA", help="CSV (delimiter detected) or Parquet file.")
    ],
    target: Annotated[str, typer.Option(help="Name of the target column.")],
    rows: RowsOption = "0:20",
    baseline: BaselineOption = "mean",
    model: ModelOption = "exact",
    kernel: KernelOption = "ard",
    method: MethodOption = "auto",
    n_inducing: InducingOption = None,
    out: Annotated[Path, typer.Option(help="Output directory.")] = Path("gpexplain-out"),
    seed: SeedOption = 0,
    holdout: HoldoutOption = True,
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
    try:
        choice = check_choice(model, kernel, method, seed, n_inducing)
        if dask_scheduler is not None and workers is not None:
            raise ValueError("give --dask-scheduler or --workers, not both")
        if workers is not None and workers < 1:
            raise ValueError(f"--workers must be a positive integer, got {workers}")
    except ValueError as error:
        _fail(str(error))
    frame = _load_frame(data)
    _run(frame, str(data), target, rows, baseline, choice, out, holdout,
         (dask_scheduler, workers))


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
