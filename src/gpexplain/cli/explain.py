"""``gpexplain explain``: fit a GP to a table (or load a saved one) and explain rows.

Reads a CSV, text, Excel or Parquet table, fits the ``--model`` family on all columns except
the target (a classifier for a target of class labels, ``--task``), explains the chosen rows
(integrated gradients, Shapley values or GPX contributions: each attribution a Gaussian with
an exact mean and covariance), and writes the task's files (``regression``,
``classification``; several ``--target`` columns: ``multi_output``, one model of them all).
``--save-model DIR`` also saves the fitted model; ``--model-from DIR`` explains with a saved
model instead of fitting one (``saved``).

The run is a sequence of stages: ``prepare`` (read, check, encode), ``fit_and_explain`` (with
a progress display) and the task's ``write``.
"""

from __future__ import annotations

import logging
import time
import warnings
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

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

from gpexplain.cli import methods, options, reading, saved, stages
from gpexplain.cli.choices import (
    DEFAULT_BACKGROUND,
    KERNEL_CHOICES,
    METHOD_CHOICES,
    MODEL_CHOICES,
    MODEL_HELP,
    MULTI_OUTPUT_CHOICES,
    Choice,
    check_choice,
    check_device_task,
    check_n_inducing,
)
from gpexplain.cli.common import (
    PlainProgress,
    advance,
    check_output_directory,
    fail,
    progress_display,
    say,
    show_warnings,
    write_json,
    writing_into,
)
from gpexplain.cli.multi_output import check_targets
from gpexplain.cli.output import RunRecord, save_attribution_figures, say_written, write_table
from gpexplain.cli.tasks import MAX_CODED_CLASSES, MAX_TEXT_CLASSES, TASKS, guess_task
from gpexplain.models import FitError
from gpexplain.models._size import check_exact_size
from gpexplain.models.families import DEFAULT_N_INDUCING
from gpexplain.parallel import ClusterError, dask_client

__all__ = ["Request", "command", "run"]


@dataclass
class Request:
    """What ``explain`` (or ``demo``) asks for, its options as given."""

    data_label: str
    target: str | list[str] | None  # a list: several targets, explained jointly
    rows: str
    baseline: str
    choice: Choice
    out: Path
    holdout: bool
    save_model: Path | None = None
    loaded: saved.Saved | None = None
    missing: str = "error"
    drop: str | None = None
    report: bool = False
    task: str = "regression"
    executor: tuple[str | None, int | None] = (None, None)
    force: bool = False
    inputs: tuple = ()
    variance: bool = False


@dataclass
class Prepared:
    """The checked input of a run: the selected table, its features (as in the file, ``X``;
    as the model sees them, ``X_model``), target, task, rows and baseline."""

    frame: pd.DataFrame
    target: str | list[str] | None
    dropped: list
    X: pd.DataFrame
    y: pd.Series | pd.DataFrame | None
    task: str
    encoder: object
    X_model: pd.DataFrame
    positions: list[int]
    baseline: object
    baseline_label: str


def prepare(frame: pd.DataFrame, request: Request) -> Prepared:
    """Read, check and encode: ValueError/TypeError name the bad option, row or column."""
    fitting = request.loaded is None
    frame, target, dropped = reading.select(frame, request.target, request.drop, request.missing,
                                    fitting)
    if fitting:
        X, y = reading.split_target(frame, target)
        task = guess_task(y, request.task)
        y = TASKS.get(task).target(y, target)
        _check_single_target_options(request, task)
    else:  # --model-from: the saved features, by name; no target needed
        X, y = saved.saved_features(frame, request.loaded, target), None
        task = saved.task_of(request.loaded.model)
    TASKS.get(task).check(request.choice, request.executor)
    check_n_inducing(request.choice, task)
    check_device_task(request.choice, task)
    if fitting or request.loaded.encoder is None:
        # Without a saved encoder a saved model's features are its (numeric) columns: there
        # the encoder is the identity.
        encoder, X_model = reading.encode(X)
    else:  # the fit's categories, whichever of them these rows hold
        encoder = request.loaded.encoder
        X_model = encoder.transform(X)
    positions = reading.parse_rows(request.rows, len(X))
    baseline, baseline_label = reading.parse_baseline(request.baseline, X_model, encoder)
    # the default (typical) and what it means without text columns (mean) ask for nothing
    if not request.choice.uses_baseline and request.baseline.strip().lower() not in (
            "typical", "mean"):
        raise ValueError(
            f"--baseline applies to integrated gradients only, not to --model "
            f"{request.choice.model} --method {request.choice.method}"
        )
    return Prepared(frame, target, dropped, X, y, task, encoder, X_model, positions, baseline,
                    baseline_label)


def _check_single_target_options(request: Request, task: str) -> None:
    """Refuse the options that apply to one target only, or to several only (ValueError)."""
    several = task == "multi-output"
    check_targets(request.choice, len(request.target) if several else 1)
    if several and request.variance:
        raise ValueError("--explain variance applies to one --target; with several use "
                         "gx.explain_variance(model.posterior_.marginal(name), X) in Python")


def _stage(progress: Progress | PlainProgress, description: str, work):
    """Run ``work(callback)`` as a stage of ``progress``; ``(result, seconds)``. Bad input, a
    failed fit or running out of memory stop the display and exit with code 2."""
    bar = progress.add_task(description, total=None)
    start = time.perf_counter()
    try:
        result = work(advance(progress, bar))
    except (ValueError, TypeError, OSError, FitError, ClusterError) as error:
        progress.stop()
        fail(str(error))
    except MemoryError as error:  # past the estimates (check_exact_size): one line, not a trace
        progress.stop()
        fail(f"out of memory at '{description}' ({str(error) or 'MemoryError'}); --model "
             "sparse or --model random-features fit in O(n) memory, and fewer --rows explain "
             "in less")
    progress.update(bar, completed=1, total=1)
    return result, time.perf_counter() - start


def _say_exact_cost(progress: Progress | PlainProgress, choice, data: Prepared) -> None:
    """Refuse an exact regression GP too large for memory, and say a long fit's estimate now,
    not after it (the warnings caught during the run are shown at its end). The estimate is
    the one the estimator ``stages.fit`` builds will make (its number of full starts)."""
    if choice.model != "exact" or data.task != "regression":
        return
    model = TASKS.get(data.task).build(choice, len(data.X))
    with warnings.catch_warnings(record=True) as slow:
        warnings.simplefilter("always")
        try:
            check_exact_size(len(data.X), model._n_full_starts(), model.hyperparameter_rows)
        except ValueError as error:
            progress.stop()
            fail(str(error))
    if model.hyperparameter_rows is not None:
        say(progress.console,
            f"{len(data.X)} rows: the hyperparameters are fitted on "
            f"{model.hyperparameter_rows} seeded rows, and the posterior conditions exactly on "
            "all of them (one Cholesky factorisation); --model sparse fits on every row in "
            "O(n) memory.")
    for record in slow:
        say(progress.console, f"Warning: {record.message}")
        # Said once: the fit (and the held-out fit) would repeat it at the end; the filter
        # lasts as long as fit_and_explain's catch_warnings block.
        warnings.filterwarnings("ignore", message=r"the exact GP on \d+ rows will take")


def _open_cluster(progress: Progress | PlainProgress, stack: ExitStack, executor):
    """The Dask client of ``--dask-scheduler`` / ``--workers`` (None without them), closed
    with ``stack``; a cluster that cannot be reached or started exits with code 2."""
    if executor == (None, None):
        return None
    stack.enter_context(_quiet_distributed())
    scheduler, workers = executor
    bar = progress.add_task(
        f"Connecting to the Dask scheduler at {scheduler}" if scheduler is not None
        else f"Starting a local Dask cluster of {workers} worker process(es)", total=None)
    try:
        client = stack.enter_context(dask_client(scheduler, workers))
    except (ValueError, TypeError, ClusterError) as error:
        progress.stop()
        fail(str(error))
    progress.update(bar, completed=1, total=1)
    return client


@contextmanager
def _quiet_distributed():
    """distributed's own log lines silenced while the cluster runs (a lost worker's ERROR
    lines, shutdown notices on stderr before the command's one-line message); the
    command line says what failed. Its loggers that exist are disabled and the parent of any
    made later is raised past CRITICAL; both are restored afterwards. Other loggers are left
    alone."""
    try:
        import distributed  # noqa: F401  (its loggers exist once it is imported)
    except ImportError:  # dask_client says so
        yield
        return
    names = [name for name in list(logging.root.manager.loggerDict)
             if name == "distributed" or name.startswith("distributed.")]
    loggers = [logging.getLogger(name) for name in names]
    saved_state = [(logger, logger.disabled) for logger in loggers]
    parent = logging.getLogger("distributed")
    level = parent.level
    for logger in loggers:
        logger.disabled = True
    parent.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        parent.setLevel(level)
        for logger, disabled in saved_state:
            logger.disabled = disabled


def _explain_on_cluster(work, data: Prepared, executor):
    """``work()``, a lost block of rows worded for the command line: its rows as ``--rows``
    positions (and the file's row labels where ``--missing drop`` renumbered them) and the
    options that help, in place of the API's terms (ClusterError)."""
    try:
        return work()
    except ClusterError as error:
        lost = error.lost
        if lost is None:
            raise
        positions = [data.positions[i] for i in lost.points]
        rows = f"--rows {reading.format_rows(positions)}"
        labels = reading.row_labels(data.X, positions)
        if labels != positions:
            rows += f" (data rows {reading.format_rows(labels)})"
        scheduler, workers = executor
        remedies = (
            "fewer --workers (more memory each), or without --workers (serially in this "
            "process)" if workers is not None else
            f"more memory per worker on the cluster at {scheduler}, or without "
            "--dask-scheduler (serially in this process)")
        raise ClusterError(lost.message(rows, remedies), lost) from error


def fit_and_explain(request: Request, data: Prepared, stderr: Console):
    """Fit (or take the saved model), explain the rows and score the held-out split, with a
    progress display on ``stderr`` (plain lines where it is not a terminal); ``(model,
    explanation, holdout summary, timings, variance attribution or None)``."""
    choice, handler = request.choice, TASKS.get(data.task)
    timings: dict[str, float | None] = {}
    holdout = handler.empty_holdout(choice.seed)
    columns = [
        SpinnerColumn(), TextColumn("{task.description}"), BarColumn(),
        TaskProgressColumn(), TimeElapsedColumn(),
    ]
    with (
        warnings.catch_warnings(record=True) as caught,
        progress_display(stderr, *columns) as progress,
        ExitStack() as cluster,
    ):
        warnings.simplefilter("always")
        # Jitter notices while the optimiser explores: internal to fitting, not about the data.
        warnings.filterwarnings("ignore", module=r"(gpytorch|linear_operator)(\.|$)")
        scored = request.holdout and request.loaded is None
        if request.loaded is None:
            _say_exact_cost(progress, choice, data)
        # The cluster before the fit: a scheduler that cannot be reached or workers that do
        # not start are said in seconds, not after a fit of minutes.
        client = _open_cluster(progress, cluster, request.executor)
        if request.loaded is None:
            model, timings["fit"] = _stage(
                progress,
                f"Fitting {handler.fit_label(choice)} ({choice.kernel_label}, {len(data.X)} rows)",
                lambda callback: stages.fit(choice, data.X_model, data.y, callback, data.task),
            )
            if request.save_model is not None:
                try:
                    saved.save_model(model, data.encoder, choice, data.target,
                                     request.missing, request.save_model)
                except OSError as error:
                    progress.stop()
                    fail(f"cannot save the model to {str(request.save_model)!r}: {error}")
        else:
            model, timings["fit"] = request.loaded.model, None
            holdout["skipped"] = "model loaded with --model-from"
        explanation, timings["explain"] = _stage(
            progress, f"Explaining {len(data.positions)} row(s)",
            lambda callback: _explain_on_cluster(
                lambda: handler.explain(choice, model, data.X_model, data.X, data.positions,
                                        data.baseline, data.encoder, client),
                data, request.executor),
        )
        cluster.close()  # the variance and held-out stages run in this process
        variance = None
        if request.variance:
            variance, timings["variance"] = _stage(
                progress, "Explaining the posterior variance",
                lambda callback: _variance_attribution(request, data, model),
            )
        timings["holdout"] = None
        if scored:
            scores, timings["holdout"] = _stage(
                progress, f"Held-out {handler.holdout_score} (80/20 split)",
                lambda callback: stages.holdout(data.X_model, data.y, choice, callback,
                                                data.task, model),
            )
            holdout.update(scores)
        elif "skipped" not in holdout:
            holdout["skipped"] = "disabled with --no-holdout"
    show_warnings(caught, stderr)
    return model, explanation, holdout, timings, variance


def _variance_attribution(request: Request, data: Prepared, model):
    """``--explain variance``: the posterior variance's attributions of the rows, grouped to
    the file's columns as the mean's are."""
    if data.task != "regression":
        raise ValueError(
            "--explain variance applies to regression targets; for a classifier's latent use "
            "gx.explain_variance(model, X, target_class=...)"
        )
    rows = data.X_model.iloc[data.positions]
    encoded = methods.explain_variance(request.choice, model, rows, data.baseline)
    return data.encoder.group(encoded, data.X.iloc[data.positions])


def _write_variance(attr, record, folder: Path) -> list[str]:
    """``variance_attributions.csv``, its figures and ``variance.json`` beside the mean's."""
    from gpexplain.plot import plot_waterfall

    explained = record.explained
    write_table(attr, explained, folder / "variance_attributions.csv")
    units = "posterior variance (squared units of the target)"
    names = save_attribution_figures(
        attr, explained, folder, suffix="_variance", title=attr.method,
        xlabels=(f"attribution of the {units}", f"mean |attribution| of the {units}"),
    )
    plot_waterfall(attr, 0).savefig(folder / "waterfall_variance.png", dpi=120)
    write_json(folder / "variance.json", {
        "method": attr.method,
        "explained_rows": explained,
        "posterior_variance": [float(v) for v in attr.prediction],
        "base_value": float(attr.baseline_prediction),
        "completeness_gap": attr.completeness_gap()["mean"],
    })
    return ["variance_attributions.csv", *names, "waterfall_variance.png", "variance.json"]


def run(frame: pd.DataFrame, request: Request) -> None:
    """Fit (or take the saved model), explain, write the output files and print a summary."""
    stdout, stderr = Console(), Console(stderr=True)
    try:
        data = prepare(frame, request)
    except (ValueError, TypeError) as error:
        fail(str(error))
    check_output_directory(request.out, request.force, (*request.inputs, request.save_model))
    reading.say_what_was_read(stderr, frame, data.dropped, len(data.X))
    model, explanation, holdout, timings, variance = fit_and_explain(request, data, stderr)
    record = RunRecord(
        request.data_label, data.frame.shape, data.target, request.choice, request.rows,
        reading.row_labels(data.X, data.positions), data.baseline_label, holdout, timings,
    )
    context = {  # summary.json entries of both tasks
        "categorical_columns": {c: data.encoder.groups_[c] for c in data.encoder.categorical_},
        "missing": {"policy": request.missing.strip().lower(), "dropped_rows": data.dropped},
    }
    written = [f"the fitted model (in {request.save_model})"] if (
        request.save_model is not None and request.loaded is None) else []
    with writing_into(request.out) as folder:
        # The variance's files first: the report, written with the mean's, shows them.
        extra = [] if variance is None else _write_variance(variance, record, folder)
        written = TASKS.get(data.task).write(model, explanation, data.X, data.X_model, record,
                                             context, folder, stdout, request.report, written)
        written = [*written, *extra]
    say_written(stdout, written, request.out)


ModelOption = Annotated[str, typer.Option(help=MODEL_HELP)]
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
        help="Explanation: auto (the model's own), ig (integrated gradients), shapley "
        "(additive model; exact model or classifier with --kernel ard/isotropic, see --game; "
        "a classifier's per-class latent) or interactions (k-SII Shapley interactions of "
        "pairs, additive or exact regression model, written to interactions.csv)."
    ),
]


def command(
    data: options.DataArgument,
    target: Annotated[
        list[str] | None,
        typer.Option(
            help="Target column: its name, or its 0-based position (-1: last); with "
            "--model-from it is dropped if present. Repeat it for several numeric targets, "
            "explained jointly by one model (--multi-output; attributions.csv gets an output "
            "column)."
        ),
    ] = None,
    header: options.HeaderOption = None,
    names: options.NamesOption = None,
    decimal: options.DecimalOption = "auto",
    missing: Annotated[
        str | None,
        typer.Option(help="Missing cells (empty, NA, NaN, null, ?): error stops, drop drops "
                     "those rows (default: error; with --model-from, the saved model's policy)."),
    ] = None,
    drop: options.DropOption = None,
    rows: options.RowsOption = "0:20",
    baseline: Annotated[
        str,
        typer.Option(help="Baseline: typical (each numeric column's mean and each text "
                     "column's most frequent category), mean, median, zeros, or a 0-based row "
                     "position of the data."),
    ] = "typical",
    model: ModelOption = MODEL_CHOICES[0],
    kernel: KernelOption = KERNEL_CHOICES[0],
    method: MethodOption = METHOD_CHOICES[0],
    n_inducing: Annotated[
        int | None,
        typer.Option(help=f"Inducing points of --model sparse (default {DEFAULT_N_INDUCING}) "
                     "and of the classifier (default: chosen from the rows and classes)."),
    ] = None,
    device: Annotated[
        str | None,
        typer.Option(help="Condition the exact GP and run its explanations' triangular solves "
                     "on this torch device (e.g. cuda; float64): the GPU path for tens of "
                     "thousands of rows. Default: NumPy on the CPU."),
    ] = None,
    out: options.OutOption = Path("gpexplain-out"),
    force: options.ForceOption = False,
    seed: options.SeedOption = 0,
    holdout: Annotated[
        bool, typer.Option(help="Also report R^2 on a seeded 20% held-out split (fits twice).")
    ] = True,
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
    task: Annotated[
        str,
        typer.Option(
            help="auto (a text, boolean or 0..k-1 / 1..k integer-coded target with at most "
            f"{MAX_CODED_CLASSES} classes is classified; a text target with over "
            f"{MAX_TEXT_CLASSES} classes or like an identifier is refused), classification "
            "(GP classifier, attributions per class), regression, or multi-output (several "
            "numeric --target columns; auto and regression choose it when several are given)."
        ),
    ] = "auto",
    game: Annotated[
        str | None,
        typer.Option(
            help="Game of --model exact --method shapley or interactions: interventional (default; "
            "--background rows), baseline (--baseline) or product-measure (the columns' "
            "Gaussian measure)."
        ),
    ] = None,
    background: Annotated[
        int | None,
        typer.Option(
            help="Background rows of the interventional game, drawn from the data with --seed "
            f"(default {DEFAULT_BACKGROUND})."
        ),
    ] = None,
    dask_scheduler: Annotated[
        str | None,
        typer.Option(help="Explain on this Dask cluster (scheduler address, e.g. "
                     "tcp://10.0.0.1:8786); needs gpexplain\\[dask]."),  # not Rich markup
    ] = None,
    workers: Annotated[
        int | None,
        typer.Option(help="Explain on a local Dask cluster of N worker processes."),
    ] = None,
    multi_output: options.MultiOutputOption = MULTI_OUTPUT_CHOICES[0],
    rank: options.RankOption = None,
    n_components: options.NComponentsOption = None,
    explain: Annotated[
        str,
        typer.Option(
            "--explain",
            help="mean (the prediction's attributions) or variance (also why the model is "
            "unsure: attributions of the posterior variance, written beside the mean's as "
            "variance_attributions.csv, *_variance.png and variance.json; exact Shapley "
            "values with --method shapley, integrated gradients otherwise).",
        ),
    ] = "mean",
) -> None:
    """Fit a GP to DATA and explain rows, each attribution with its 95% interval."""
    loaded = None
    # One --target is a name, as it always was; several are a list (a multi-output model).
    target = None if not target else target[0] if len(target) == 1 else list(target)
    try:
        if model_from is None:
            if target is None:
                raise ValueError("--target is required (unless --model-from is given)")
            choice = check_choice(model, kernel, method, seed, n_inducing, game, background,
                                  multi_output, rank, device, n_components)
        else:
            defaults = (MODEL_CHOICES[0], KERNEL_CHOICES[0], None, MULTI_OUTPUT_CHOICES[0], None,
                        None, None)
            if save_model is not None or (model, kernel, n_inducing, multi_output, rank, device,
                                          n_components) != defaults:
                raise ValueError(
                    "--model-from uses the saved model as it is; drop --model, --kernel, "
                    "--n-inducing, --multi-output, --rank, --n-components, --device and "
                    "--save-model"
                )
            loaded = saved.load_model(model_from, method, game, background)
            if isinstance(target, list) and target != loaded.target:
                raise ValueError(f"--model-from {model_from} explains the targets it was fitted "
                                 f"on, {loaded.target}; drop --target or give those")
            choice, target = loaded.choice, target or loaded.target
            missing = missing or loaded.missing
        if explain.strip().lower() not in ("mean", "variance"):
            raise ValueError(f"unknown --explain {explain!r}; use mean or variance")
        if dask_scheduler is not None and workers is not None:
            raise ValueError("give --dask-scheduler or --workers, not both")
        if workers is not None and workers < 1:
            raise ValueError(f"--workers must be a positive integer, got {workers}")
    except (ValueError, TypeError, FileNotFoundError) as error:
        fail(str(error))
    frame = reading.read_frame(data, header, names, decimal)
    run(frame, Request(str(data), target, rows, baseline, choice, out, holdout, save_model,
                       loaded, missing or "error", drop, report, task,
                       (dask_scheduler, workers), force, (Path(data), model_from),
                       explain.strip().lower() == "variance"))
