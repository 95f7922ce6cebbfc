"""Exact GP fit speed: ``GPRegressor`` against scikit-learn's ``GaussianProcessRegressor``.

Same data, same model (ARD squared exponential times an output scale, plus Gaussian noise,
on standardised X and y), same four starting points (GPRegressor's first start and its three
seeded random ones; scikit-learn is fitted once from each with ``n_restarts_optimizer=0`` and
the best kept), L-BFGS(-B) to convergence, one run each, with each library's default threads
and with one thread (``THREAD_SETTINGS``, one process each). Recorded per size: wall
and CPU time of each (CPU time is the measure on a shared machine: wall time grows with the
other jobs' load), the ratios scikit-learn / gpexplain (> 1: gpexplain faster), and the log
marginal likelihood each reached (same standardised targets; gpexplain also fits a constant
mean where scikit-learn subtracts the sample mean, so its optimum can only be higher;
scikit-learn's fits are re-evaluated on the same targets, as its ``normalize_y`` rescales
them). The
previous gpexplain fit (GPyTorch autograd + torch L-BFGS, the path Matern/RQ/custom kernels
still take) runs from the same starts at the sizes of ``--old-path-sizes``.

Data: rows of the bundled winequality-red (1,599 rows, 11 features); sizes above 1,599 take
seeded rows of winequality-white (same 11 features) from ``$GPEXPLAIN_DATA_DIR/wine_quality``,
and above its 4,898 rows, of white and red together.
Rows repeated exactly are fitted once (as GPRegressor does), for both libraries.

    .venv/bin/python benchmarks/fit_speed.py                  # n = 500, 1000, 2000, 5000
    .venv/bin/python benchmarks/fit_speed.py --sizes 300 --quick   # smoke test, no JSON
    .venv/bin/python benchmarks/fit_speed.py --sizes 2000 --old-path-sizes "" \
        --results fit_speed_2000   # other sizes into their own JSON
    GPEXPLAIN_DATA_DIR=../shared/data .venv/bin/python benchmarks/fit_speed.py --sizes 5000 \
        --old-path-sizes "" --restarts 0 --results fit_speed_5000   # one start each
"""

from __future__ import annotations

import os
import sys

# Two thread settings, each in its own process (the pools are sized when NumPy and torch load;
# the parent passes ``--child SETTING`` last): "default" leaves every library's own default
# (gpexplain then applies its policy, gpexplain._threads; scikit-learn runs with every core),
# "one" sets one thread for both.
os.environ.update(dict.fromkeys(("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"),
                                "1") if sys.argv[-2:] == ["--child", "one"] else {})

import argparse
import json
import subprocess
import time
import warnings

import numpy as np
import pandas as pd
import torch
from _common import data_path, machine_info, write_results
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF as SklearnRBF
from sklearn.gaussian_process.kernels import ConstantKernel, WhiteKernel

import gpexplain as gx
from gpexplain.models._fitting import DEFAULT_NOISE, log_uniform
from gpexplain.models._kernel_choices import kernel_choice
from gpexplain.models.gp_regressor import _optimise

N_RESTARTS = 3
THREAD_SETTINGS = ("default", "one")
SEED = 0


def wine(n: int) -> tuple[pd.DataFrame, pd.Series, str]:
    X, y = gx.datasets.load_dataset("wine-quality-red")
    if n <= len(X):
        rows = np.sort(np.random.default_rng(SEED).choice(len(X), n, replace=False))
        return X.iloc[rows], y.iloc[rows], "bundled winequality-red"
    white = pd.read_csv(data_path("wine_quality", "winequality-white.csv"), sep=";")
    source = "winequality-white"
    if n > len(white):  # 4,898 rows: n = 5,000 takes rows of both files (same 11 columns)
        red = pd.read_csv(data_path("wine_quality", "winequality-red.csv"), sep=";")
        white, source = pd.concat([white, red], ignore_index=True), "winequality-white and red"
    rows = np.sort(np.random.default_rng(SEED).choice(len(white), n, replace=False))
    white = white.iloc[rows]
    return white.drop(columns="quality"), white["quality"].astype(float), source


def standardised_distinct(X, y):
    """What GPRegressor fits on: standardised columns and target, exact duplicates once."""
    X, y = X.to_numpy(float), y.to_numpy(float)
    Xs = (X - X.mean(0)) / X.std(0)
    ys = (y - y.mean()) / y.std()
    _, distinct = np.unique(np.column_stack([Xs, ys]), axis=0, return_index=True)
    distinct = np.sort(distinct)
    return Xs[distinct], ys[distinct]


def starts(n_features: int, n_restarts: int) -> list:
    """GPRegressor's starting points (GPRegressor._starting_points with default arguments)."""
    points = [(np.ones(n_features), 1.0, DEFAULT_NOISE)]
    rng = np.random.default_rng(SEED)
    for _ in range(n_restarts):
        points.append((log_uniform(rng, 0.1, 10.0, size=n_features),
                       float(log_uniform(rng, 0.1, 10.0)), float(log_uniform(rng, 1e-3, 1.0))))
    return points


def lml(Xs, ys, kernel, noise, mean) -> float:
    return float(gx.ExactPosterior(Xs, ys, kernel, noise, mean=mean).log_marginal_likelihood())


def fit_sklearn(Xs, ys, points):
    fitted, start_time, start_cpu = [], time.perf_counter(), time.process_time()
    for lengthscale, outputscale, noise in points:
        kernel = ConstantKernel(outputscale, (1e-6, 1e6)) * SklearnRBF(
            lengthscale, (1e-4, 1e5)
        ) + WhiteKernel(noise, (1e-6, 1e3))
        model = GaussianProcessRegressor(kernel, normalize_y=True, n_restarts_optimizer=0)
        model.fit(Xs, ys)
        fitted.append(model)
    seconds = (time.perf_counter() - start_time, time.process_time() - start_cpu)
    # normalize_y rescales ys by its sample std, so scikit-learn's own value differs from the
    # likelihood of the same targets by n log(std): each fit is re-evaluated on ys itself.
    best = -np.inf
    for model in fitted:
        product, white = model.kernel_.k1, model.kernel_.k2
        scale = model._y_train_std**2
        best = max(best, lml(Xs, ys, gx.kernels.RBF(product.k2.length_scale,
                                                    product.k1.constant_value * scale),
                             white.noise_level * scale, model._y_train_mean))
    return seconds, best


def fit_old_path(Xs, ys, points):
    """The previous GPRegressor fit: GPyTorch ExactGP + torch L-BFGS from the same starts."""
    choice, rng = kernel_choice("ard"), np.random.default_rng([SEED, 1])
    best, start_time, start_cpu = -np.inf, time.perf_counter(), time.process_time()
    for index, start in enumerate(points):
        fitted = _optimise(Xs, ys, choice.module(start, index, rng), start[2], 200, None,
                           index, len(points))
        if fitted is not None:
            module, noise, mean = fitted[0]
            best = max(best, lml(Xs, ys, gx.kernels.as_kernel(module), noise, mean))
    return (time.perf_counter() - start_time, time.process_time() - start_cpu), best


def measure(sizes: list[int], old_sizes: set[int], threads: str,
            n_restarts: int = N_RESTARTS) -> list[dict]:
    """One row per size, in this process's thread setting."""
    if threads == "one":
        torch.set_num_threads(1)
    rows = []
    for n in sizes:
        X, y, source = wine(n)
        Xs, ys = standardised_distinct(X, y)
        points = starts(X.shape[1], n_restarts)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            start_time, start_cpu = time.perf_counter(), time.process_time()
            model = gx.GPRegressor(n_restarts=n_restarts, random_state=SEED).fit(X, y)
            ours = (time.perf_counter() - start_time, time.process_time() - start_cpu)
            theirs, sklearn_lml = fit_sklearn(Xs, ys, points)
            old = fit_old_path(Xs, ys, points) if n in old_sizes else ((None, None), None)
        row = {
            "n": n, "threads": threads, "distinct_rows": len(ys), "data": source,
            "starts": len(points),
            "gpexplain_seconds": ours[0], "sklearn_seconds": theirs[0],
            "gpexplain_cpu_seconds": ours[1], "sklearn_cpu_seconds": theirs[1],
            "speedup_vs_sklearn": theirs[0] / ours[0],
            "cpu_speedup_vs_sklearn": theirs[1] / ours[1],
            "gpexplain_log_marginal_likelihood": model.log_marginal_likelihood_value_,
            "sklearn_log_marginal_likelihood": sklearn_lml,
            "lml_gain_over_sklearn": model.log_marginal_likelihood_value_ - sklearn_lml,
            "old_gpytorch_path_seconds": old[0][0], "old_gpytorch_path_cpu_seconds": old[0][1],
            "old_gpytorch_path_log_marginal_likelihood": old[1],
            "cpu_speedup_vs_old_path": None if old[0][1] is None else old[0][1] / ours[1],
        }
        rows.append(row)
        print(f"threads={threads} n={n:5d} ({len(ys)} distinct)  CPU s: gpexplain "
              f"{ours[1]:.1f}, sklearn {theirs[1]:.1f} (x{theirs[1] / ours[1]:.2f}; wall "
              f"x{theirs[0] / ours[0]:.2f})  LML {row['gpexplain_log_marginal_likelihood']:.3f}"
              f" vs {sklearn_lml:.3f}"
              + ("" if old[1] is None else f"  old path CPU {old[0][1]:.1f} s LML {old[1]:.3f}"),
              file=sys.stderr, flush=True)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="500,1000,2000,5000")
    parser.add_argument("--old-path-sizes", default="500",
                        help="sizes at which the previous GPyTorch fit is also timed")
    parser.add_argument("--quick", action="store_true", help="smoke test; no JSON written")
    parser.add_argument("--results", default="fit_speed",
                        help="name of the JSON in benchmarks/results (a run of other sizes "
                             "keeps the earlier file)")
    parser.add_argument("--restarts", type=int, default=N_RESTARTS,
                        help="random starts after the first, for both libraries (3; 0 at "
                             "n = 5000, where scikit-learn's four starts take hours of CPU)")
    parser.add_argument("--child", choices=THREAD_SETTINGS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    old_sizes = {int(s) for s in args.old_path_sizes.split(",") if s}
    if args.child:  # one thread setting: rows as JSON on stdout
        print(json.dumps(measure(sizes, old_sizes, args.child, args.restarts)))
        return
    info = machine_info(note="one run per size and thread setting on a 2-core machine shared "
                        "with other jobs (load averages recorded): wall times are noisy, "
                        "ratios less so")
    rows = []
    for n in sizes:  # size by size, so that a run cut short keeps the sizes it finished
        for threads in THREAD_SETTINGS:
            command = [sys.executable, __file__, "--sizes", str(n), "--old-path-sizes",
                       args.old_path_sizes, "--restarts", str(args.restarts), "--child",
                       threads]
            output = subprocess.run(command, check=True, capture_output=False,
                                    stdout=subprocess.PIPE, text=True).stdout
            rows.extend(json.loads(output))
        if not args.quick:
            path = write_results(args.results, {"machine": info, "sizes_requested": args.sizes,
                                               "thread_settings": list(THREAD_SETTINGS),
                                               "results": rows})
            print(f"wrote {path}", flush=True)


if __name__ == "__main__":
    main()
