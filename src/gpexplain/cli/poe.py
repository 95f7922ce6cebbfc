"""``gpexplain poe``: fit the default GP and explain rows with property-optimised explanations.

Reads the table through the shared read stage (the file options of ``explain``; text columns
one-hot encoded, their attributions summed back per column in the table and figures), fits
the default exact GP, takes the gradient and value of its posterior mean at the chosen rows,
solves transductive POE (Tadesse et al. 2025, Sec. 5) for the ``--lambda`` mix, and writes the
files of ``explain`` plus ``losses.json`` (the six property losses, the objective and the
solver's certificate).

POE's explanations are gradient-like local weights (units of the target per unit of each
feature), optimised point estimates: they have no posterior and do not sum to the prediction.
So ``attributions.csv`` has a ``weight`` column and no ``std``/``lower``/``upper``, the
summary has no completeness gap or interval level, and the figures label the weights so.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from gpexplain.cli import options, reading, stages
from gpexplain.cli.choices import check_choice
from gpexplain.cli.common import (
    check_output_directory,
    fail,
    say,
    write_json,
    writing_into,
)
from gpexplain.cli.output import RunRecord, save_attribution_figures, summary, write_table
from gpexplain.cli.regression import Regression
from gpexplain.models.families import FAMILIES
from gpexplain.poe import PROPERTIES, REFERENCES, POESolverError, similarity, transductive
from gpexplain.poe.target import gradients_and_values

__all__ = ["command", "parse_lambdas"]

SIMILARITIES = ("uniform", "gaussian", "knn")
WEIGHT_UNITS = "units of the target per unit of the feature"
EXPLANATION = (
    f"gradient-like local weights ({WEIGHT_UNITS}) optimised for the --lambda mix of "
    "properties of the posterior mean: point estimates with no posterior (no intervals) that "
    "do not sum to the prediction (no completeness)"
)


def parse_lambdas(specs: list[str]) -> dict[str, float]:
    """``["F_grad=1", "R_avg=0.1"]`` -> ``{"F_grad": 1.0, "R_avg": 0.1}``; ValueError if bad."""
    weights: dict[str, float] = {}
    for spec in specs or ["F_grad=1"]:
        name, separator, value = spec.partition("=")
        name = name.strip()
        if not separator or name not in PROPERTIES:
            raise ValueError(
                f"--lambda {spec!r} is not NAME=VALUE with NAME one of {', '.join(PROPERTIES)}"
            )
        try:
            weights[name] = float(value)
        except ValueError:
            raise ValueError(f"--lambda {spec!r}: {value!r} is not a number") from None
    return weights


def _point_similarity(kind: str, X, lengthscale: float | None, k: int):
    if kind == "uniform":
        return similarity.uniform()
    if kind == "gaussian":
        if lengthscale is None:
            raise ValueError("--similarity gaussian needs --lengthscale (in units of X)")
        return similarity.gaussian(X, lengthscale)
    if kind == "knn":
        return similarity.knn(X, k)
    raise ValueError(f"--similarity must be one of {', '.join(SIMILARITIES)}, got {kind!r}")


def command(
    data: options.DataArgument,
    target: options.TargetOption,
    lambda_: Annotated[
        list[str] | None,
        typer.Option("--lambda", help="Property weight NAME=VALUE (F_grad, F_func, R_avg, "
                     "R_max, S, C); repeat for a mix. Default F_grad=1."),
    ] = None,
    rows: options.RowsOption = "0:20",
    similarity_: Annotated[str, typer.Option("--similarity", help="Similarity between rows for "
                                             "R_avg: uniform, gaussian or knn.")] = "uniform",
    lengthscale: Annotated[float | None, typer.Option(help="Lengthscale of --similarity "
                                                      "gaussian, in units of X.")] = None,
    k: Annotated[int, typer.Option(help="Neighbours of --similarity knn.")] = 5,
    out: options.OutOption = Path("gpexplain-poe"),
    force: options.ForceOption = False,
    seed: options.SeedOption = 0,
    header: options.HeaderOption = None,
    names: options.NamesOption = None,
    decimal: options.DecimalOption = "auto",
    missing: options.MissingOption = "error",
    drop: options.DropOption = None,
) -> None:
    """Fit a GP to DATA and explain rows with property-optimised explanations (POE)."""
    stdout = Console()
    frame = reading.read_frame(data, header, names, decimal)
    try:
        weights = parse_lambdas(lambda_ or [])
        selected, column, dropped = reading.select(frame, target, drop, missing)
        X, y = reading.split_target(selected, column)
        y = Regression.target(y, column)
        encoder, X_model = reading.encode(X)
        positions = reading.parse_rows(rows, len(X))
        explained_X = X_model.iloc[positions]
        points = _point_similarity(similarity_, explained_X.to_numpy(float), lengthscale, k)
    except (ValueError, TypeError) as error:
        fail(str(error))
    check_output_directory(out, force, (Path(data),))
    reading.say_what_was_read(Console(stderr=True), frame, dropped, len(X))
    choice = check_choice("exact", "ard", "auto", seed, None)
    timings = {}
    model, timings["fit"] = stages.fit_quietly(choice, X_model, y)
    start = time.perf_counter()
    gradients, values = gradients_and_values(model, explained_X)
    try:
        result = transductive(explained_X, gradients, values, S=points, lambdas=weights)
    except (ValueError, POESolverError) as error:
        fail(str(error))
    timings["explain"] = time.perf_counter() - start
    encoded = result.attribution
    attr = encoder.group(encoded, X.iloc[positions])

    explained = reading.row_labels(X, positions)
    record = RunRecord(str(data), selected.shape, target, choice, rows, explained, "none",
                       {"skipped": "not computed by gpexplain poe"}, timings)
    hyperparameters = FAMILIES.get("exact").hyperparameters(model, X_model.columns)
    poe_record = {
        "lambdas": result.lambdas,
        "losses": result.losses,
        "objective": result.objective,
        "similarity": points.description,
        "certificate": result.certificate,
        "explained_function": "posterior mean of the fitted GP (its gradient at each row)",
    }
    run_summary = summary(model, hyperparameters, encoded, {}, X_model, record)
    # summary()'s entries of posterior explanations that complete to the prediction; POE's
    # weights are neither (its 0.0 gap would read as "exactly complete").
    for entry in ("completeness_gap", "interval_level"):
        del run_summary[entry]
    run_summary["explanation"] = EXPLANATION
    run_summary["poe"] = poe_record
    run_summary["method_id"] = "poe"  # the command's own method, outside gx.explain's registry
    run_summary["references"] = [str(reference) for reference in REFERENCES]
    with writing_into(out) as folder:
        write_table(attr, explained, folder / "attributions.csv", value_name="weight")
        for name, payload in (("summary.json", run_summary), ("losses.json", poe_record)):
            write_json(folder / name, payload, default=float)
        save_attribution_figures(attr, explained, folder, xlabels=(
            f"gradient-like local weight ({WEIGHT_UNITS})",
            f"mean |local weight| ({WEIGHT_UNITS})",
        ))
    losses = ", ".join(f"{name} {value:.4g}" for name, value in result.losses.items()
                       if value is not None)
    say(stdout, f"POE objective {result.objective:.6g} ({losses})")
    say(stdout, "Wrote attributions.csv, summary.json, losses.json, attributions.png, "
                f"importance.png to {out}")
