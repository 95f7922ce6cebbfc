"""Butler et al. Sec. 5.2 (Fig. 2) on the Wisconsin prognostic breast cancer data (wpbc).

The UCI file as distributed: no header, ``?`` for missing values, one row per patient (id,
outcome R/N, time, 30 measurements, tumour size, lymph-node status). As in the paper, the
non-recurrent patients (outcome N) are kept, their disease-free time is the target, the 30
measurements (10 nucleus features x mean, standard error and worst, from the digitised images)
are the features, an exact GP with an ARD squared-exponential kernel is fitted, and integrated
gradients are taken from the average patient (``--baseline mean``) for 50 patients.

The fit and the explanation run through the command line, with the options for files as they
are (``--no-header --names``, ``--drop``, ``--missing drop``, ``--report``); this script only
keeps the N rows (the command line has no row filter) and draws the paper's two figures from
``attributions.csv``:

* Fig. 2a: every attribution of one patient, mean with +- 1 standard deviation;
* Fig. 2b: two attributions (the two largest on average) across the 50 patients, the mean as a
  midline and +- 1 standard deviation as the height of each cross.

Run: ``.venv/bin/python examples/breast_cancer_prognosis.py [--data wpbc.data] [--out DIR]``
(default data: ``$GPEXPLAIN_DATA_DIR/breast_cancer_wisconsin/wpbc.data``).
"""

import argparse
import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from gpexplain.cli import app

NUCLEUS = ["radius", "texture", "perimeter", "area", "smoothness", "compactness", "concavity",
           "concave_points", "symmetry", "fractal_dimension"]
MEASUREMENTS = [f"{name}_{kind}" for kind in ("mean", "se", "worst") for name in NUCLEUS]
COLUMNS = ["id", "outcome", "time", *MEASUREMENTS, "tumor_size", "lymph_nodes"]
N_PATIENTS = 50


def _default_data() -> Path | None:
    root = os.environ.get("GPEXPLAIN_DATA_DIR")
    return Path(root) / "breast_cancer_wisconsin" / "wpbc.data" if root else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=_default_data(),
                        help="wpbc.data (default: $GPEXPLAIN_DATA_DIR/breast_cancer_wisconsin/)")
    parser.add_argument("--out", type=Path, default=Path("examples-out"))
    args = parser.parse_args()
    if args.data is None or not args.data.is_file():
        parser.error("give --data path/to/wpbc.data or set GPEXPLAIN_DATA_DIR")
    args.out.mkdir(parents=True, exist_ok=True)

    # Keep the non-recurrent patients, line by line, so the file stays as distributed.
    lines = args.data.read_text().splitlines()
    kept = [line for line in lines if line.split(",")[1].strip() == "N"]
    nonrecurrent = args.out / "wpbc_nonrecurrent.data"
    nonrecurrent.write_text("\n".join(kept) + "\n")
    print(f"{len(kept)} of {len(lines)} patients have outcome N")

    run = args.out / "wpbc-explain"
    command = [
        "explain", str(nonrecurrent), "--no-header", "--names", ",".join(COLUMNS),
        "--target", "time", "--drop", "id,outcome,tumor_size,lymph_nodes",
        "--missing", "drop", "--rows", f"0:{N_PATIENTS}", "--baseline", "mean",
        "--report", "--out", str(run),
    ]
    print("gpexplain " + " ".join(command))
    try:
        app(command, standalone_mode=False)
    except SystemExit as stop:  # typer exits after a bad input; keep its code
        if stop.code:
            sys.exit(stop.code)

    table = pd.read_csv(run / "attributions.csv")
    mean = table.pivot(index="point", columns="feature", values="attribution")[MEASUREMENTS]
    std = table.pivot(index="point", columns="feature", values="std")[MEASUREMENTS]
    rows = table.groupby("point")["row"].first()

    patient = 0
    figure = Figure(figsize=(7.5, 8.0), layout="constrained")
    axis = figure.subplots()
    positions = np.arange(len(MEASUREMENTS))
    axis.barh(positions, mean.iloc[patient], xerr=std.iloc[patient], color="#2e86c1",
              alpha=0.8, error_kw={"ecolor": "0.2", "capsize": 2})
    axis.axvline(0.0, color="0.3", linewidth=0.8)
    axis.set_yticks(positions, MEASUREMENTS, fontsize="small")
    axis.invert_yaxis()
    axis.set_xlabel("attribution to disease-free time (months); error bars: 1 standard deviation")
    axis.set_title(f"Fig. 2a: patient {rows.iloc[patient]} (data row of the N file), "
                   "baseline: average patient", fontsize="medium")
    figure.savefig(args.out / "wpbc_patient.png", dpi=120)

    leading = list(mean.abs().mean().sort_values(ascending=False).index[:2])
    figure = Figure(figsize=(10, 3.8), layout="constrained")
    for axis, feature in zip(figure.subplots(1, 2, sharey=True), leading, strict=True):
        axis.errorbar(np.arange(len(mean)), mean[feature], yerr=std[feature], fmt="_",
                      markersize=8, color="#c0392b", ecolor="0.4", elinewidth=1.0)
        axis.axhline(0.0, color="0.3", linewidth=0.8)
        axis.set_xlabel(f"patient (first {len(mean)} with outcome N)")
        axis.set_title(f"Fig. 2b: {feature}", fontsize="medium")
    figure.axes[0].set_ylabel("attribution (months), +- 1 sd")
    figure.savefig(args.out / "wpbc_two_features.png", dpi=120)

    for feature in leading:
        magnitude, spread = mean[feature].abs(), std[feature]
        correlation = np.corrcoef(magnitude, spread)[0, 1]
        print(f"{feature}: mean |attribution| {magnitude.mean():.3g} months, mean sd "
              f"{spread.mean():.3g}; corr(|mean|, sd) over {len(mean)} patients "
              f"{correlation:+.2f}")
    active = (mean.abs().mean() > 0.05 * mean.abs().mean().max()).sum()
    print(f"features with mean |attribution| above 5% of the largest: {active} of 30")
    print(f"figures: {args.out / 'wpbc_patient.png'}, {args.out / 'wpbc_two_features.png'}; "
          f"report: {run / 'report.html'}")


if __name__ == "__main__":
    main()
