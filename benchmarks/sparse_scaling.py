"""Sparse variational GP against the exact GP on large data: fit, accuracy, explanation time.

For pol (15000 x 26) and bike (17379 x 17) from ``$GPEXPLAIN_DATA_DIR/large/`` (gzip CSV, no
header, already mean-centred, target = last column) this script holds out a seeded 20% of the
rows and compares, on one core:

* ``SparseGPRegressor`` (SVGP, ``--n-inducing`` k-means inducing points, minibatch Adam)
  trained on all remaining rows;
* ``GPRegressor`` (exact GP) on a seeded ``--exact-rows`` subset of them. Fitting its
  hyperparameters by L-BFGS on all those rows costs ~n^3 per evaluation, far beyond the
  10-minute budget, so they are fitted on a nested ``--exact-hyper-rows`` subset and the
  exact posterior is then built on the full subset with them (``optimizer=None``). Its fit time
  is the sum of the two.

Recorded: fit time, held-out RMSE (original units of y), and the time to explain
``--n-explain`` held-out rows with closed-form integrated gradients and the full
feature-by-feature covariance (baseline = training mean), with the completeness gaps. The
exact GP's explanation is timed on ``--n-explain-exact`` of those rows and, when fewer, also
reported scaled linearly to ``--n-explain`` rows (its cost is linear in the rows).

Run from the repository root::

    .venv/bin/python benchmarks/sparse_scaling.py            # full run, writes the JSON
    .venv/bin/python benchmarks/sparse_scaling.py --quick    # smoke test, no JSON

Results: ``benchmarks/results/sparse_scaling.json``.
"""

from __future__ import annotations

import os

# One core, and no spinning OpenMP threads against other processes (set before importing torch).
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from _common import data_path, machine_info, write_results

from gpexplain.explain.integrated_gradients import integrated_gradients
from gpexplain.models.gp_regressor import GPRegressor
from gpexplain.models.sparse_gp_regressor import SparseGPRegressor

REPO = Path(__file__).resolve().parents[1]
OUTPUT = REPO / "benchmarks" / "results" / "sparse_scaling.json"
DATASETS = ("pol", "bike")


def load(name: str) -> tuple[np.ndarray, np.ndarray]:
    """Features and target (last column) of one of the large UCI sets."""
    path = data_path("large", f"{name}.csv.gz")
    values = pd.read_csv(path, header=None).to_numpy(dtype=np.float64)
    return values[:, :-1], values[:, -1]


def rmse(model, X, y) -> float:
    return float(np.sqrt(np.mean((model.predict(X) - y) ** 2)))


def timed(function):
    start = time.perf_counter()
    result = function()
    return result, time.perf_counter() - start


def explain(model, X) -> dict:
    attribution, seconds = timed(lambda: integrated_gradients(model, X))
    gaps = attribution.completeness_gap()
    return {
        "rows": int(X.shape[0]),
        "seconds": seconds,
        "completeness_gap_mean": gaps["mean"],
        "completeness_gap_variance": gaps["variance"],
        "mean_abs_attribution": float(np.mean(np.abs(attribution.mean))),
        "mean_attribution_std": float(np.mean(attribution.std)),
    }


def run_dataset(name: str, args) -> dict:
    X, y = load(name)
    rng = np.random.default_rng(args.seed)
    order = rng.permutation(len(X))
    n_test = int(round(0.2 * len(X)))
    test, train = order[:n_test], order[n_test:]
    if args.quick:
        train = train[: 4 * args.n_inducing]
    X_train, y_train, X_test, y_test = X[train], y[train], X[test], y[test]
    X_explain = X_test[: args.n_explain]
    print(f"\n{name}: {X.shape[0]} rows x {X.shape[1]} features; {len(train)} train, "
          f"{n_test} held out (y std {np.std(y_test):.4g})")

    sparse = SparseGPRegressor(
        n_inducing=args.n_inducing, batch_size=args.batch_size, n_epochs=args.n_epochs,
        learning_rate=args.learning_rate, random_state=args.seed, progress=False,
    )
    _, sparse_fit = timed(lambda: sparse.fit(X_train, y_train))
    sparse_result = {
        "train_rows": int(len(train)),
        "fit_seconds": sparse_fit,
        "rmse": rmse(sparse, X_test, y_test),
        "final_elbo_per_row": float(sparse.elbo_history_[-1]),
        "explain": explain(sparse, X_explain),
    }
    print(f"  SVGP fit {sparse_fit:.1f}s, RMSE {sparse_result['rmse']:.4g}, explain "
          f"{sparse_result['explain']['seconds']:.2f}s")

    exact_rows = train[: args.exact_rows]
    hyper_rows = exact_rows[: args.exact_hyper_rows]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # repeated rows: fitted once, as documented
        hyper, hyper_seconds = timed(
            lambda: GPRegressor(n_restarts=args.exact_restarts, max_iter=args.exact_max_iter,
                                random_state=args.seed).fit(X[hyper_rows], y[hyper_rows])
        )
        exact = GPRegressor(kernel=hyper.kernel_, noise=hyper.noise_, optimizer=None)
        _, posterior_seconds = timed(lambda: exact.fit(X[exact_rows], y[exact_rows]))
    exact_explain = explain(exact, X_explain[: args.n_explain_exact])
    exact_explain["seconds_scaled_to_n_explain"] = (
        exact_explain["seconds"] * len(X_explain) / exact_explain["rows"]
    )
    exact_result = {
        "train_rows": int(len(exact_rows)),
        "hyperparameter_rows": int(len(hyper_rows)),
        "fit_seconds": hyper_seconds + posterior_seconds,
        "hyperparameter_fit_seconds": hyper_seconds,
        "posterior_seconds": posterior_seconds,
        "rmse": rmse(exact, X_test, y_test),
        "explain": exact_explain,
    }
    print(f"  exact fit {exact_result['fit_seconds']:.1f}s, RMSE {exact_result['rmse']:.4g}, "
          f"explain {exact_explain['seconds']:.2f}s for {exact_explain['rows']} rows")
    return {
        "rows": int(X.shape[0]),
        "features": int(X.shape[1]),
        "target": "last column (already mean-centred)",
        "held_out_rows": n_test,
        "target_std_held_out": float(np.std(y_test)),
        "svgp": sparse_result,
        "exact": exact_result,
        "ratios": {
            "exact_rmse_over_svgp_rmse": exact_result["rmse"] / sparse_result["rmse"],
            "exact_explain_seconds_per_row_over_svgp": (
                exact_explain["seconds"] / exact_explain["rows"]
            ) / (sparse_result["explain"]["seconds"] / sparse_result["explain"]["rows"]),
        },
    }


def print_table(results: dict) -> None:
    header = (f"{'data':<6}{'model':<7}{'train rows':>11}{'fit s':>9}{'RMSE':>10}"
              f"{'explain s/1000 rows':>21}{'completeness (mean, var)':>28}")
    print("\n" + header + "\n" + "-" * len(header))
    for name, result in results.items():
        for label, key in (("SVGP", "svgp"), ("exact", "exact")):
            part = result[key]
            per_thousand = 1000 * part["explain"]["seconds"] / part["explain"]["rows"]
            gaps = (f"{part['explain']['completeness_gap_mean']:.1e}, "
                    f"{part['explain']['completeness_gap_variance']:.1e}")
            print(f"{name:<6}{label:<7}{part['train_rows']:>11}{part['fit_seconds']:>9.1f}"
                  f"{part['rmse']:>10.4g}{per_thousand:>21.2f}{gaps:>28}")
        ratios = result["ratios"]
        print(f"{'':<6}ratios: exact/SVGP RMSE {ratios['exact_rmse_over_svgp_rmse']:.3f}, "
              f"exact/SVGP explain time per row "
              f"{ratios['exact_explain_seconds_per_row_over_svgp']:.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n-inducing", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=512)
    parser.add_argument("--n-epochs", type=int, default=30)
    parser.add_argument("--learning-rate", type=float, default=0.05)
    parser.add_argument("--exact-rows", type=int, default=5000)
    parser.add_argument("--exact-hyper-rows", type=int, default=1000)
    parser.add_argument("--exact-restarts", type=int, default=0)
    parser.add_argument("--exact-max-iter", type=int, default=50)
    parser.add_argument("--n-explain", type=int, default=1000)
    parser.add_argument("--n-explain-exact", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=DATASETS)
    parser.add_argument("--quick", action="store_true", help="tiny smoke test, no JSON")
    parser.add_argument("--output", type=Path, default=OUTPUT)
    args = parser.parse_args()
    if args.quick:
        args.n_inducing, args.n_epochs, args.exact_rows = 32, 2, 300
        args.exact_hyper_rows, args.exact_max_iter, args.n_explain = 100, 5, 20
        args.n_explain_exact = 10
    torch.set_num_threads(1)
    machine = machine_info()
    started = time.perf_counter()
    results = {name: run_dataset(name, args) for name in args.datasets}
    print_table(results)
    total = time.perf_counter() - started
    print(f"\ntotal {total:.0f}s wall")
    if not args.quick:
        settings = {key: value for key, value in vars(args).items() if key != "output"}
        # Recorded relative to the repository (an absolute path names the machine it ran on).
        output = Path(args.output).resolve()
        inside = output.is_relative_to(REPO)
        settings["output"] = str(output.relative_to(REPO) if inside else output)
        settings["notes"] = [
            "one core (torch, OpenMP, BLAS threads = 1); held-out = seeded 20% of the rows",
            "SVGP: whitened, k-means inducing init, Adam on minibatch ELBO over all parameters",
            "exact GP: hyperparameters by L-BFGS (GPRegressor, n_restarts, max_iter) on the "
            "first exact_hyper_rows of the exact subset, then the exact posterior on all "
            "exact_rows with them (optimizer=None); a full ML-II fit on 5000 rows does not fit "
            "the 10-minute budget",
            "explanations: closed-form integrated gradients with full covariance, baseline = "
            "training mean, on the first n_explain held-out rows",
        ]
        path = write_results(args.output, {"settings": settings, "machine": machine,
                                           "total_seconds": total, "results": results})
        print(f"\nwrote {path.relative_to(REPO)}")


if __name__ == "__main__":
    main()
