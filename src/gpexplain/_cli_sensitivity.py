"""``gpexplain sensitivity``: global Sobol indices and Shapley effects of a fitted exact GP.

The command's logic lives here so that ``cli.py`` only registers it. It reuses ``cli.py``'s
readers and fitting (imported at call time: ``cli.py`` imports this module), fits the exact GP
with a product kernel (``--kernel ard`` or ``isotropic``), computes ``gx.global_sensitivity``
under independent Gaussians with each column's mean and standard deviation, and writes
``sensitivity.csv`` (one row per feature: the indices of the posterior mean, the variances,
their posterior expectations and posterior standard deviations), ``summary.json`` (with the
total variance's expectation and std over the posterior) and ``sensitivity.png`` (bars with
95% error bars on every index).

A target of class labels (text or booleans) is refused, naming the alternatives: the command
analyses a regression, and a classifier's indices are those of one class's latent (its
log-odds), which ``gx.global_sensitivity(classifier, target_class=...)`` computes; writing them
per class would change every output of this command for one case. Integer targets are numbers
here (a regression), whatever ``gpexplain explain --task auto`` would guess.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

PRODUCT_KERNELS = ("ard", "isotropic")


def run(data: str, target: str, kernel: str, out: Path, seed: int) -> None:
    """Fit, compute the indices, write the files; bad input exits with code 2."""
    from rich.console import Console

    import gpexplain
    from gpexplain import cli
    from gpexplain.explain.sensitivity import global_sensitivity
    from gpexplain.plot import plot_global_sensitivity

    frame = cli._load_frame(data)
    try:
        if kernel.strip().lower() not in PRODUCT_KERNELS:
            raise ValueError(
                f"--kernel {kernel!r} has no closed-form Sobol indices here; use "
                f"{' or '.join(PRODUCT_KERNELS)} (product kernels)"
            )
        choice = cli.check_choice("exact", kernel, "auto", seed, None)
        _refuse_class_labels(frame, cli.resolve_target(frame, target))
        X, y = cli._split_target(frame, target)
        out.mkdir(parents=True, exist_ok=True)
    except (ValueError, TypeError) as error:
        cli._fail(str(error))
    except OSError as error:
        cli._fail(f"cannot create output directory {str(out)!r}: {error.strerror or error}")
    timings = {}
    model, timings["fit"] = cli._fit_quietly(choice, X, y)
    start = time.perf_counter()
    result = global_sensitivity(model)
    timings["sensitivity"] = time.perf_counter() - start
    table = result.to_frame()
    table.to_csv(out / "sensitivity.csv", index=False)
    summary = {
        "data_file": str(data),
        "target": target,
        "rows": int(len(X)),
        "feature_names": list(X.columns),
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
        "timings_seconds": timings,
        "gpexplain_version": gpexplain.__version__,
    }
    with open(out / "summary.json", "w", encoding="utf-8") as handle:
        json.dump(summary, handle, indent=2, allow_nan=False)
        handle.write("\n")
    plot_global_sensitivity(result).savefig(out / "sensitivity.png", dpi=120)
    stdout = Console()
    top = table.sort_values("total_index", ascending=False).head(8)
    for row in top.itertuples():
        stdout.print(
            f"{row.feature}: first-order {row.first_order_index:.3f}, total {row.total_index:.3f}, "
            f"Shapley {row.shapley_index:.3f} (Shapley effect over the posterior "
            f"{row.expected_shapley_effect:.4g} +- {row.shapley_effect_std:.2g})",
            markup=False, highlight=False, soft_wrap=True,
        )
    stdout.print(f"Wrote sensitivity.csv, summary.json, sensitivity.png to {out}",
                 markup=False, highlight=False, soft_wrap=True)


def _refuse_class_labels(frame, target: str) -> None:
    """ValueError for a target of class labels (text or booleans), naming the alternatives."""
    import pandas as pd

    y = frame.set_axis([str(c) for c in frame.columns], axis=1)[target]
    if pd.api.types.is_bool_dtype(y) or not pd.api.types.is_numeric_dtype(y):
        raise ValueError(
            f"target column {y.name!r} holds class labels (e.g. {y.dropna().iloc[0]!r}); "
            "gpexplain sensitivity analyses a regression. For a classifier use gpexplain "
            "explain --method shapley (per-class latent attributions), or in Python "
            "gx.global_sensitivity(gx.GPClassifier().fit(X, y), target_class=...) (the "
            "indices of that class's latent log-odds)"
        )
