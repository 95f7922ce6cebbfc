"""GPX computing time: Yoshikawa and Iwata (2021), Table 4, on Digits, on one core.

On one seeded 80/20 split of Digits (X and y standardised on the training rows), times

* training: ``GPXRegressor.fit`` and ``GPRegressor.fit`` (exact GP, ARD SE; the black box of
  GPR + IG and GPR + SHAP), each one L-BFGS start of at most ``--max-iter`` iterations;
* explanation of the test rows: GPX contributions (means only, and with their d x d
  covariances), closed-form integrated gradients of the GPR (means only, and with
  covariances; baseline = training mean), and ``shap.KernelExplainer`` on
  ``GPRegressor.predict`` (single background row = training mean, ``nsamples="auto"``,
  ``l1_reg=False``).

KernelSHAP explains every test row by default (``--shap-rows`` times fewer and extrapolates
linearly, since it explains rows one at a time; the JSON records both). The paper
(16-core Xeon) reports 5.74 s / 24.57 s (GPX train / explain) and 5.76 s / 2643.06 s
(GPR + SHAP).

Run from the repository root::

    .venv/bin/python benchmarks/gpx_time.py           # ~10 min on one core
    .venv/bin/python benchmarks/gpx_time.py --quick   # smoke test, no JSON

Results: ``benchmarks/results/gpx_time.json``.
"""

from __future__ import annotations

import argparse
import warnings

import _gpx_data as data  # first: sets the one-thread environment before NumPy and torch
import numpy as np
import shap
from _common import machine_info, write_results

from gpexplain.explain.integrated_gradients import integrated_gradients
from gpexplain.models.gp_regressor import GPRegressor
from gpexplain.models.gpx_regressor import GPXRegressor

PAPER = {  # Table 4 (seconds): training, prediction (= explaining every test row)
    "GPX": (5.74, 24.57),
    "GPR+SHAP": (5.76, 2643.06),
    "GPR+LIME": (5.53, 155.54),
}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--max-iter", type=int, default=100)
    parser.add_argument("--max-train", type=int, default=None, help="default: all 1438 rows")
    parser.add_argument("--shap-rows", type=int, default=None, help="default: every test row")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--quick", action="store_true", help="300 rows, 5 SHAP rows, no JSON")
    args = parser.parse_args(argv)
    if args.quick:
        args.max_train, args.shap_rows, args.max_iter = 300, 5, 10
    machine = machine_info()
    split = data.splits("digits", 1, max_train=args.max_train, seed=args.seed)[0]
    X_test = split.X_test
    n_test = X_test.shape[0]
    reference = np.zeros(X_test.shape[1])  # training mean after standardisation
    times = {}

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # blank pixels are constant columns
        gpx, times["GPX fit"] = data.timed(
            GPXRegressor(max_iter=args.max_iter).fit, split.X_train, split.y_train
        )
        print(f"GPX fit {times['GPX fit']:.1f} s", flush=True)
        gpr, times["GPR fit"] = data.timed(
            GPRegressor(n_restarts=0, max_iter=args.max_iter).fit, split.X_train, split.y_train
        )
        print(f"GPR fit {times['GPR fit']:.1f} s", flush=True)

    _, times["GPX explain (mean)"] = data.timed(gpx.explain, X_test, return_cov=False)
    _, times["GPX explain (mean + cov)"] = data.timed(gpx.explain, X_test)
    _, times["GPR+IG explain (mean)"] = data.timed(
        integrated_gradients, gpr, X_test, baseline=reference, return_cov=False
    )
    _, times["GPR+IG explain (mean + cov)"] = data.timed(
        integrated_gradients, gpr, X_test, baseline=reference
    )
    explainer = shap.KernelExplainer(gpr.predict, reference[None, :])
    shap_rows = n_test if args.shap_rows is None else min(args.shap_rows, n_test)
    _, measured = data.timed(
        explainer.shap_values, X_test[:shap_rows], nsamples="auto", l1_reg=False, silent=True
    )
    times[f"GPR+SHAP explain ({shap_rows} rows, measured)"] = measured
    times["GPR+SHAP explain (extrapolated)"] = measured * n_test / shap_rows
    mse = {
        "GPX": float(np.mean((gpx.predict(X_test) - split.y_test) ** 2)),
        "GPR": float(np.mean((gpr.predict(X_test) - split.y_test) ** 2)),
    }

    rows = [
        ("GPX (mean)", times["GPX fit"], times["GPX explain (mean)"], PAPER["GPX"]),
        ("GPX (mean + cov)", times["GPX fit"], times["GPX explain (mean + cov)"], None),
        ("GPR+IG (mean)", times["GPR fit"], times["GPR+IG explain (mean)"], None),
        ("GPR+IG (mean + cov)", times["GPR fit"], times["GPR+IG explain (mean + cov)"], None),
        ("GPR+SHAP", times["GPR fit"], times["GPR+SHAP explain (extrapolated)"],
         PAPER["GPR+SHAP"]),
    ]
    print(f"\nDigits: {split.X_train.shape[0]} training rows, {n_test} explained test rows "
          f"(KernelSHAP timed on {shap_rows}), one core")
    print(f"{'method':22s}{'train s':>10s}{'explain s':>12s}{'total s':>10s}   paper (train, "
          "explain)")
    for name, train, explain, paper in rows:
        paper_text = "" if paper is None else f"   ({paper[0]:.2f}, {paper[1]:.2f})"
        print(f"{name:22s}{train:10.2f}{explain:12.3f}{train + explain:10.2f}{paper_text}")
    shap_time = times["GPR+SHAP explain (extrapolated)"]
    print(f"explanation time ratio GPR+SHAP / GPX (mean): "
          f"{shap_time / times['GPX explain (mean)']:.0f}")
    print(f"test MSE: GPX {mse['GPX']:.3f}, GPR {mse['GPR']:.3f}")
    if args.quick:
        return 0
    payload = {
        "machine": machine,
        "protocol": {
            "split": "one seeded random 80/20 split of Digits (seed "
            f"{args.seed}); X, y standardised on the training rows",
            "n_train": int(split.X_train.shape[0]),
            "n_test_explained": n_test,
            "max_iter": args.max_iter,
            "reductions": f"one L-BFGS start of <= {args.max_iter} iterations per model; "
            f"KernelSHAP timed on {shap_rows} of the {n_test} rows (extrapolated linearly "
            "when fewer); one core (the paper: 16 cores)",
        },
        "times_seconds": times,
        "ratios": {
            "shap_over_gpx_mean_explain": shap_time / times["GPX explain (mean)"],
            "shap_over_ig_mean_explain": shap_time / times["GPR+IG explain (mean)"],
        },
        "test_mse": mse,
        "paper_table_4": {k: {"train": v[0], "explain": v[1]} for k, v in PAPER.items()},
    }
    print(f"wrote {write_results('gpx_time', payload)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
