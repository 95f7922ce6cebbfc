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

Several ``--target`` columns (numeric) fit one exact GP of all of them, as ``gpexplain explain``
does (``--multi-output independent``: one GP per target, each target's indices those of a run
with it alone; ``icm``: one intrinsic coregionalisation model), and analyse each target's
marginal posterior under the same measure (``gx.MultiOutputSensitivity``): ``sensitivity.csv``
and ``interactions.csv`` get an ``output`` column (first), ``summary.json`` holds the
per-target entries keyed by target name (with the model's hyperparameters per target, or the
ICM's coregionalisation matrix), and the figure is ``sensitivity_<target>.png`` per target.
With ``icm``, ``index_correlations.csv`` holds the posterior covariance and correlation of
each index between each pair of targets (``MultiOutputSensitivity.between_outputs_frame``;
independent targets' are zero).

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
from gpexplain.cli.choices import MULTI_OUTPUT_CHOICES, check_choice, family
from gpexplain.cli.common import (
    check_output_directory,
    fail,
    say,
    write_json,
    writing_into,
)
from gpexplain.cli.multi_output import check_targets, file_labels, multi_output_hyperparameters
from gpexplain.cli.output import finish, say_written, write_csv
from gpexplain.cli.tasks import TASKS
from gpexplain.explain.methods import METHODS
from gpexplain.global_attribution import MultiOutputSensitivity
from gpexplain.models.families import PRODUCT_KERNELS

__all__ = ["command"]

BETWEEN_OUTPUTS_FILE = "index_correlations.csv"

TargetsOption = Annotated[
    list[str],
    typer.Option(
        help="Target column: its name, or its 0-based position (-1: last). Repeat it for "
        "several numeric targets, fitted by one model (--multi-output) and analysed each "
        "through its marginal posterior (sensitivity.csv gets an output column)."
    ),
]


def command(
    data: options.DataArgument,
    target: TargetsOption,
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
    multi_output: options.MultiOutputOption = MULTI_OUTPUT_CHOICES[0],
    rank: options.RankOption = None,
    n_components: options.NComponentsOption = None,
    report: Annotated[bool, typer.Option(
        "--report", help="Also write report.html (see gpexplain report): the indices of "
        "each target with their figure.")] = False,
) -> None:
    """Fit an exact GP to DATA and write its global Sobol indices and Shapley effects, with
    their posterior uncertainty, under the columns' Gaussian product measure."""
    # matplotlib loads with the first figure, not with every command (gpexplain --version)
    from gpexplain.plot import plot_global_sensitivity
    frame = reading.read_frame(data, header, names, decimal)
    # One --target is a name, as it always was; several are a list (a multi-output model).
    given = target[0] if len(target) == 1 else list(target)
    try:
        if kernel.strip().lower() not in PRODUCT_KERNELS:
            raise ValueError(
                f"--kernel {kernel!r} has no closed-form Sobol indices here; use "
                f"{' or '.join(PRODUCT_KERNELS)} (product kernels)"
            )
        choice = check_choice("exact", kernel, "auto", seed, None, multi_output=multi_output,
                              rank=rank, n_components=n_components)
        selected, column, dropped = reading.select(frame, given, drop, missing)
        columns = [column] if isinstance(column, str) else column
        for name in columns:
            _refuse_class_labels(selected[name])
        check_targets(choice, len(columns))
        task = "multi-output" if len(columns) > 1 else "regression"
        handler = TASKS.get(task)
        handler.check(choice, (None, None))
        X, y = reading.split_target(selected, column)
        y = handler.target(y, column)
        encoder, X_model = reading.encode(X)
    except (ValueError, TypeError) as error:
        fail(str(error))
    check_output_directory(out, force, (Path(data),))
    stderr = Console(stderr=True)
    reading.say_what_was_read(stderr, frame, dropped, len(X))
    timings = {}
    model, timings["fit"] = stages.fit_quietly(choice, X_model, y, task)
    start = time.perf_counter()
    result = METHODS.get("global-sensitivity").function(model, interactions=interactions)
    timings["sensitivity"] = time.perf_counter() - start
    several = isinstance(result, MultiOutputSensitivity)
    # Each target's GlobalSensitivity, by name (one target: its result, under None).
    per_target = dict(zip(result.output_names, result.results, strict=True)) if several else {
        None: result}
    entries = {name: _entries(one, interactions) for name, one in per_target.items()}
    summary = {
        "data_file": str(data),
        "target": columns if several else given,
        "rows": int(len(X)),
        "feature_names": list(X_model.columns),
        "model": "exact",
        "kernel": choice.kernel_label,
        "seed": seed,
        "measure": "independent Gaussians with each column's mean and standard deviation",
        "units": "variances in squared units of the target; indices are shares of the "
                 "variance of the posterior mean",
    }
    if several:
        summary.update({
            "task": "multi-output regression",
            "outputs": columns,
            "multi_output": choice.multi_output,
            "hyperparameters": multi_output_hyperparameters(
                model, list(X_model.columns), family(choice.model)),
            # The per-target entries, each keyed by target name.
            **{key: {name: entry[key] for name, entry in entries.items()}
               for key in entries[columns[0]]},
            "cross_output": {
                "independent": result.independent,
                "note": "each target's indices are those of its marginal posterior, under "
                        "the same measure; the posterior covariance between different "
                        "targets' indices is "
                        + ("zero (independent GPs)" if result.independent else
                           f"in {BETWEEN_OUTPUTS_FILE} (covariance and correlation of each "
                           "index between each pair of targets)"),
            },
        })
    else:
        summary.update(entries[None])
    figures = {name: "sensitivity.png" if name is None else f"sensitivity_{label}.png"
               for name, label in zip(per_target, file_labels(per_target), strict=True)}
    method = METHODS.get("global-sensitivity")
    summary.update({
        "figures": {column if name is None else name: figure  # by target name
                    for name, figure in figures.items()},
        **({"interactions_file": "interactions.csv"} if interactions else {}),
        "method_id": "global-sensitivity",
        "references": [str(reference) for reference in method.references],
        "timings_seconds": timings,
        "gpexplain_version": __version__,
    })
    table = result.to_frame()
    with writing_into(out) as folder:
        write_csv(table, folder / "sensitivity.csv")
        write_json(folder / "summary.json", summary)
        for name, one in per_target.items():
            figure = plot_global_sensitivity(one)
            if name is not None:
                ax = figure.axes[0]
                ax.set_title(f"target {name}: {ax.get_title()}", fontsize="medium")
            figure.savefig(folder / figures[name], dpi=120)
        if interactions:
            write_csv(result.interactions_frame(), folder / "interactions.csv")
        between = several and not result.independent
        if between:
            write_csv(result.between_outputs_frame(), folder / BETWEEN_OUTPUTS_FILE)
        written = finish(folder, ["sensitivity.csv", "summary.json", *figures.values()]
                         + (["interactions.csv"] if interactions else [])
                         + ([BETWEEN_OUTPUTS_FILE] if between else []), report)
    stdout = Console()
    for name, one in per_target.items():
        if name is not None:
            say(stdout, f"Target {name}")
        _say_top_features(stdout, one)
    say_written(stdout, written, out)


def _entries(result, interactions: bool) -> dict:
    """``summary.json``'s entries of one target's ``GlobalSensitivity``."""
    return {
        "method": result.method,
        "variance_of_posterior_mean": result.total_variance,
        "expected_variance_over_posterior": result.expected_total_variance,
        "std_of_variance_over_posterior": result.total_variance_std,
        "features": result.to_frame().to_dict(orient="records"),
        **({"interactions": result.interactions_frame().sort_values(
            "second_order", ascending=False).head(10).to_dict(orient="records")}
           if interactions else {}),
    }


def _say_top_features(stdout: Console, result) -> None:
    """Print the eight features of largest total index of one target."""
    top = result.to_frame().sort_values("total_index", ascending=False).head(8)
    for row in top.itertuples():
        say(stdout,
            f"{row.feature}: first-order {row.first_order_index:.3f}, total "
            f"{row.total_index:.3f}, Shapley {row.shapley_index:.3f} (Shapley effect over the "
            f"posterior {row.expected_shapley_effect:.4g} +- {row.shapley_effect_std:.2g})")


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
