"""``gpexplain sensitivity``: global Sobol indices and Shapley effects of a fitted exact GP.

Reads the table through the shared read stage (the file options of ``explain``; text columns
one-hot encoded, one index per indicator column), fits the exact GP with a product kernel
(``--kernel ard`` or ``isotropic``), computes ``gx.global_sensitivity`` under independent
Gaussians with each column's mean and standard deviation, and writes ``sensitivity.csv`` (one
row per feature: the indices of the posterior mean, the variances, their posterior
expectations and posterior standard deviations), ``summary.json`` (with the total variance's
expectation and std over the posterior) and ``sensitivity.png`` (bars with 95% error bars on
every index). ``--interactions`` adds ``interactions.csv`` (one row per pair: the second-order
Sobol index and variance of the posterior mean, its posterior expectation and std, and the
closed index of the pair) and the strongest pairs in ``summary.json``.

A target of class labels (text or booleans) is refused, naming the alternatives: the command
analyses a regression, and a classifier's indices are those of one class's latent (its
log-odds), which ``gx.global_sensitivity(classifier, target_class=...)`` computes; writing them
per class would change every output of this command for one case. Integer targets are numbers
here (a regression), whatever ``gpexplain explain --task auto`` would guess.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import pandas as pd
import typer
from rich.console import Console

from gpexplain._version import __version__
from gpexplain.cli import options, reading, stages
from gpexplain.cli.choices import check_choice
from gpexplain.cli.common import (
    check_output_directory,
    fail,
    say,
    write_json,
    writing_into,
)
from gpexplain.cli.output import write_csv
from gpexplain.cli.regression import Regression
from gpexplain.explain.methods import METHODS
from gpexplain.models.families import PRODUCT_KERNELS

__all__ = ["command"]


def command(
    data: options.DataArgument,
    target: options.TargetOption,
    kernel: Annotated[str, typer.Option(help="Kernel: ard (default) or isotropic.")] = "ard",
    out: options.OutOption = Path("gpexplain-sensitivity"),
    force: options.ForceOption = False,
    seed: options.SeedOption = 0,
    header: options.HeaderOption = None,
    names: options.NamesOption = None,
    decimal: options.DecimalOption = "auto",
    missing: options.MissingOption = "error",
    drop: options.DropOption = None,
    interactions: Annotated[bool, typer.Option(
        "--interactions", help="Also the second-order (pair) Sobol indices, with their "
        "posterior expectation and std, in interactions.csv.")] = False,
) -> None:
    """Fit an exact GP to DATA and write its global Sobol indices and Shapley effects, with
    their posterior uncertainty, under the columns' Gaussian product measure."""
    # matplotlib loads with the first figure, not with every command (gpexplain --version)
    from gpexplain.plot import plot_global_sensitivity
    frame = reading.read_frame(data, header, names, decimal)
    try:
        if kernel.strip().lower() not in PRODUCT_KERNELS:
            raise ValueError(
                f"--kernel {kernel!r} has no closed-form Sobol indices here; use "
                f"{' or '.join(PRODUCT_KERNELS)} (product kernels)"
            )
        choice = check_choice("exact", kernel, "auto", seed, None)
        selected, column, dropped = reading.select(frame, target, drop, missing)
        _refuse_class_labels(selected[column])
        X, y = reading.split_target(selected, column)
        y = Regression.target(y, column)
        encoder, X_model = reading.encode(X)
    except (ValueError, TypeError) as error:
        fail(str(error))
    check_output_directory(out, force, (Path(data),))
    stderr = Console(stderr=True)
    reading.say_what_was_read(stderr, frame, dropped, len(X))
    timings = {}
    model, timings["fit"] = stages.fit_quietly(choice, X_model, y)
    start = time.perf_counter()
    result = METHODS.get("global-sensitivity").function(model, interactions=interactions)
    timings["sensitivity"] = time.perf_counter() - start
    table = result.to_frame()
    summary = {
        "data_file": str(data),
        "target": target,
        "rows": int(len(X)),
        "feature_names": list(X_model.columns),
        "model": "exact",
        "kernel": choice.kernel_label,
        "seed": seed,
        "method": result.method,
        "measure": "independent Gaussians with each column's mean and standard deviation",
        "variance_of_posterior_mean": result.total_variance,
        "expected_variance_over_posterior": result.expected_total_variance,
        "std_of_variance_over_posterior": result.total_variance_std,
        "units": "variances in squared units of the target; indices are shares of the "
                 "variance of the posterior mean",
        "features": table.to_dict(orient="records"),
        **({"interactions": result.interactions_frame().sort_values(
            "second_order", ascending=False).head(10).to_dict(orient="records"),
            "interactions_file": "interactions.csv"} if interactions else {}),
        "timings_seconds": timings,
        "gpexplain_version": __version__,
    }
    with writing_into(out) as folder:
        write_csv(table, folder / "sensitivity.csv")
        write_json(folder / "summary.json", summary)
        plot_global_sensitivity(result).savefig(folder / "sensitivity.png", dpi=120)
        if interactions:
            write_csv(result.interactions_frame(), folder / "interactions.csv")
    stdout = Console()
    top = table.sort_values("total_index", ascending=False).head(8)
    for row in top.itertuples():
        say(stdout,
            f"{row.feature}: first-order {row.first_order_index:.3f}, total "
            f"{row.total_index:.3f}, Shapley {row.shapley_index:.3f} (Shapley effect over the "
            f"posterior {row.expected_shapley_effect:.4g} +- {row.shapley_effect_std:.2g})")
    written = "sensitivity.csv, summary.json, sensitivity.png" + (
        ", interactions.csv" if interactions else "")
    say(stdout, f"Wrote {written} to {out}")


def _refuse_class_labels(y: pd.Series) -> None:
    """ValueError for a target of class labels (text or booleans), naming the alternatives."""
    if pd.api.types.is_bool_dtype(y) or not pd.api.types.is_numeric_dtype(y):
        raise ValueError(
            f"target column {y.name!r} holds class labels (e.g. {y.dropna().iloc[0]!r}); "
            "gpexplain sensitivity analyses a regression. For a classifier use gpexplain "
            "explain --method shapley (per-class latent attributions), or in Python "
            "gx.global_sensitivity(gx.GPClassifier().fit(X, y), target_class=...) (the "
            "indices of that class's latent log-odds)"
        )
