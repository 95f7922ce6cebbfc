"""``gpexplain poe``: fit the default GP and explain rows with property-optimised explanations.

The command's logic lives here so that ``cli.py`` only registers it. It reuses ``cli.py``'s
readers, fitting and writers (imported at call time: ``cli.py`` imports this module), fits
the default exact GP, takes the gradient and value of its posterior mean at the chosen rows,
solves transductive POE (Tadesse et al. 2025, Sec. 5) for the ``--lambda`` mix, and writes the
files of ``explain`` plus ``losses.json`` (the six property losses, the objective and the
solver's certificate).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from gpexplain.poe import PROPERTIES, POESolverError, similarity, transductive
from gpexplain.poe.target import gradients_and_values

SIMILARITIES = ("uniform", "gaussian", "knn")


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


def run(data: str, target: str, lambda_specs: list[str], rows: str, kind: str,
        lengthscale: float | None, k: int, out: Path, seed: int) -> None:
    """Fit, explain with POE, write the files; bad input exits with code 2 (``cli._fail``)."""
    from rich.console import Console

    from gpexplain import cli
    from gpexplain.plot import plot_attributions, plot_global_importance

    stdout = Console()
    frame = cli._load_frame(data)
    try:
        weights = parse_lambdas(lambda_specs)
        X, y = cli._split_target(frame, target)
        positions = cli.parse_rows(rows, len(X))
        explained_X = X.iloc[positions]
        points = _point_similarity(kind, explained_X.to_numpy(float), lengthscale, k)
    except (ValueError, TypeError) as error:
        cli._fail(str(error))
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        cli._fail(f"cannot create output directory {str(out)!r}: {error.strerror or error}")
    choice = cli.check_choice("exact", "ard", "auto", seed, None)
    timings = {}
    model, timings["fit"] = cli._fit_quietly(choice, X, y)
    start = time.perf_counter()
    gradients, values = gradients_and_values(model, explained_X)
    try:
        result = transductive(explained_X, gradients, values, S=points, lambdas=weights)
    except (ValueError, POESolverError) as error:
        cli._fail(str(error))
    timings["explain"] = time.perf_counter() - start
    attr = result.attribution

    row_labels = [int(r) if isinstance(r, int) else str(r) for r in X.index]
    explained = [row_labels[p] for p in positions]
    cli._write_table(attr, explained, out / "attributions.csv")
    summary = cli._summary(
        model, attr, {}, X, data, frame.shape, target, choice, rows, explained, "none",
        {"skipped": "not computed by gpexplain poe"}, timings,
    )
    poe_record = {
        "lambdas": result.lambdas,
        "losses": result.losses,
        "objective": result.objective,
        "similarity": points.description,
        "certificate": result.certificate,
        "explained_function": "posterior mean of the fitted GP (its gradient at each row)",
    }
    summary["poe"] = poe_record
    for name, payload in (("summary.json", summary), ("losses.json", poe_record)):
        with open(out / name, "w", encoding="utf-8") as handle:
            json.dump(payload, handle, indent=2, allow_nan=False, default=float)
            handle.write("\n")
    shown = min(4, attr.n_points)
    plot_attributions(attr, max_points=shown,
                      point_labels=[f"row {r}" for r in explained[:shown]]).savefig(
        out / "attributions.png", dpi=120)
    plot_global_importance(attr).savefig(out / "importance.png", dpi=120)
    losses = ", ".join(f"{name} {value:.4g}" for name, value in result.losses.items()
                       if value is not None)
    stdout.print(f"POE objective {result.objective:.6g} ({losses})", markup=False,
                 highlight=False, soft_wrap=True)
    stdout.print(
        f"Wrote attributions.csv, summary.json, losses.json, attributions.png, importance.png "
        f"to {out}", markup=False, highlight=False, soft_wrap=True)
