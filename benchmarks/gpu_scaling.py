"""The GPU path against the CPU: exact GPs on 10,000 to 48,727 rows (issue 26 item 5).

Rows of ``$GPEXPLAIN_DATA_DIR/large/keggdirected.csv.gz`` (48,827 rows, 20 features),
seeded. The hyperparameters are fitted once on 2,000 rows (``GPRegressor(hyperparameter_rows=
2000)``, on the CPU); then for each size n the posterior is conditioned on n rows with
``ExactPosterior(..., device=DEVICE)`` (kernel matrix, Cholesky factor and every triangular
solve in float64 torch on the device) and, up to ``--cpu-max`` rows, with the NumPy/SciPy
path on the CPU; each explains the same 100 held-out points: integrated gradients with
their full covariance per point, and exact Shapley values (baseline game from the data mean,
product kernel) with theirs. Recorded per size: seconds of each stage on each side (wall
clock, the device synchronised), the device's peak memory, and the largest difference
between the two sides' means and covariances relative to their largest entry.

    GPEXPLAIN_DATA_DIR=../shared/data .venv/bin/python benchmarks/gpu_scaling.py
    GPEXPLAIN_DATA_DIR=../shared/data .venv/bin/python benchmarks/gpu_scaling.py --device cpu \
        --sizes 2000,4000 --results gpu_scaling_cpu_smoke     # the same code on the CPU

On a machine lent for a few minutes (the ``device`` tool), copy the data file into an
ignored folder of the checkout and carry it: ``GPEXPLAIN_DATA_DIR=benchmarks/.data``.
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import pandas as pd
import torch
from _common import data_path, machine_info, write_results

import gpexplain as gx
from gpexplain.posterior import ExactPosterior

SEED = 0
HYPERPARAMETER_ROWS = 2000
N_EXPLAINED = 100


def _synchronise(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _timed(function, device):
    _synchronise(device)
    start = time.perf_counter()
    result = function()
    _synchronise(device)
    return result, time.perf_counter() - start


def _relative_gap(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.max(np.abs(a - b)) / max(np.max(np.abs(b)), 1e-300))


def side(X, y, X_explain, baseline, fitted, device) -> dict:
    """Condition and explain on one side (``device`` None: NumPy on the CPU)."""
    where = torch.device("cpu") if device is None else device
    if where.type == "cuda":
        torch.cuda.reset_peak_memory_stats(where)
    posterior, condition = _timed(lambda: ExactPosterior(
        X, y, fitted.kernel_, fitted.noise_, mean=fitted.mean_, device=device), where)
    ig, ig_seconds = _timed(lambda: gx.integrated_gradients(posterior, X_explain), where)
    shapley, shapley_seconds = _timed(
        lambda: gx.shapley_values(posterior, X_explain, baseline=baseline), where)
    return {
        "condition_seconds": condition, "integrated_gradients_seconds": ig_seconds,
        "shapley_seconds": shapley_seconds,
        "peak_device_bytes": (torch.cuda.max_memory_allocated(where)
                              if where.type == "cuda" else None),
        "results": (ig, shapley),
        "completeness_gap_variance": ig.completeness_gap()["variance"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--sizes", default="10000,20000,48727")
    parser.add_argument("--cpu-max", type=int, default=20000,
                        help="largest n also run on the CPU (the comparison)")
    parser.add_argument("--quick", action="store_true", help="no JSON written")
    parser.add_argument("--results", default="gpu_scaling",
                        help="name of the JSON in benchmarks/results (the CPU smoke test "
                             "writes its own)")
    args = parser.parse_args()
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        raise SystemExit("no CUDA device here: this benchmark waits for one (--device cpu "
                         "runs the same comparison with torch on the CPU, as a smoke test).")
    device = torch.device(args.device)
    sizes = [int(s) for s in args.sizes.split(",")]
    table = pd.read_csv(data_path("large", "keggdirected.csv.gz"), header=None).to_numpy(float)
    rows = np.random.default_rng(SEED).permutation(len(table))[: max(sizes) + N_EXPLAINED]
    X_all, y_all = table[rows, :-1], table[rows, -1]
    X_explain = X_all[-N_EXPLAINED:]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fitted, fit_seconds = _timed(lambda: gx.GPRegressor(
            hyperparameter_rows=HYPERPARAMETER_ROWS, restart_rows=500, random_state=SEED,
        ).fit(X_all[:HYPERPARAMETER_ROWS], y_all[:HYPERPARAMETER_ROWS]), torch.device("cpu"))
    info = machine_info(note="one run per size; wall seconds with the device synchronised")
    info["device"] = (torch.cuda.get_device_name(device) if device.type == "cuda"
                      else f"{device} (torch on the CPU)")
    results = []
    for n in sizes:
        X, y = X_all[:n], y_all[:n]
        baseline = X.mean(axis=0)
        row = {"n": n, "n_features": X.shape[1], "explained_points": N_EXPLAINED,
               "hyperparameter_fit_seconds_cpu": fit_seconds,
               "hyperparameter_rows": HYPERPARAMETER_ROWS}
        on_device = side(X, y, X_explain, baseline, fitted, device)
        row["device"] = {k: v for k, v in on_device.items() if k != "results"}
        if n <= args.cpu_max:
            on_cpu = side(X, y, X_explain, baseline, fitted, None)
            row["cpu"] = {k: v for k, v in on_cpu.items() if k != "results"}
            for name, got, expected in zip(("integrated_gradients", "shapley"),
                                           on_device["results"], on_cpu["results"], strict=True):
                row[f"{name}_mean_gap"] = _relative_gap(got.mean, expected.mean)
                row[f"{name}_cov_gap"] = _relative_gap(got.cov, expected.cov)
            row["speedup"] = {
                stage: row["cpu"][f"{stage}_seconds"] / row["device"][f"{stage}_seconds"]
                for stage in ("condition", "integrated_gradients", "shapley")}
        results.append(row)
        print({k: v for k, v in row.items() if k not in ("cpu", "device")},
              "device", row["device"], "cpu", row.get("cpu"), flush=True)
        if not args.quick:
            write_results(args.results, {"machine": info, "results": results})


if __name__ == "__main__":
    main()
