"""Exact GPs on tens of thousands of rows: hyperparameters on a subsample, conditioning on all.

``GPRegressor(hyperparameter_rows=3000, restart_rows=500)`` (what the command line builds
above 3,000 rows) on seeded rows of ``$GPEXPLAIN_DATA_DIR/large/bike.csv.gz`` (17,379 rows,
17 features: at most 17,279 fitted beside the 100 explained) and, for 20,000 rows,
``keggdirected.csv.gz`` (48,827 rows, 20 features; bike has fewer): fit (the
hyperparameters on 3,000 rows, then one Cholesky factorisation of all n), then integrated
gradients with their full covariance at 100 held-out points. Each size runs in
its own process, so its peak resident memory (``ru_maxrss``) is its own. Recorded beside the
measurements: the estimate of ``gpexplain.models._size.check_exact_size`` (the refusal and
warning the fit makes before it starts), to see whether it agrees.

    GPEXPLAIN_DATA_DIR=../shared/data .venv/bin/python benchmarks/exact_scaling.py
    .venv/bin/python benchmarks/exact_scaling.py --sizes 5000 --quick   # no JSON
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
import warnings

import numpy as np
import pandas as pd
from _common import data_path, machine_info, write_results

import gpexplain as gx
from gpexplain.models import _size

SEED = 0
HYPERPARAMETER_ROWS = 3000
RESTART_ROWS = 500
N_EXPLAINED = 100


def rows_of(n: int) -> tuple[np.ndarray, np.ndarray, str]:
    name = "bike.csv.gz" if n + N_EXPLAINED <= 17_379 else "keggdirected.csv.gz"
    table = pd.read_csv(data_path("large", name), header=None).to_numpy(float)
    rows = np.random.default_rng(SEED).choice(len(table), n + N_EXPLAINED, replace=False)
    return table[rows, :-1], table[rows, -1], name


def measure(n: int) -> dict:
    X, y, source = rows_of(n)
    X_fit, y_fit, X_explain = X[:n], y[:n], X[n:]
    model = gx.GPRegressor(hyperparameter_rows=HYPERPARAMETER_ROWS, restart_rows=RESTART_ROWS,
                           random_state=SEED)
    estimate_bytes = max(
        _size.exact_fit_estimate(HYPERPARAMETER_ROWS, model._n_full_starts())[0],
        _size.CONDITIONING_COPIES * 8 * n * n)
    estimate_seconds = (_size.exact_fit_estimate(HYPERPARAMETER_ROWS, model._n_full_starts())[1]
                        + n**3 / 3 / _size.CONDITIONING_FLOPS_PER_SECOND)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        start_wall, start_cpu = time.perf_counter(), time.process_time()
        model.fit(X_fit, y_fit)
        fit = time.perf_counter() - start_wall, time.process_time() - start_cpu
        start_wall, start_cpu = time.perf_counter(), time.process_time()
        attribution = gx.integrated_gradients(model, X_explain)
        explain = time.perf_counter() - start_wall, time.process_time() - start_cpu
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    gaps = attribution.completeness_gap()
    return {
        "n": n, "data": source, "n_features": X.shape[1],
        "hyperparameter_rows": model.hyperparameter_rows_,
        "fit_seconds": fit[0], "fit_cpu_seconds": fit[1],
        "explain_points": N_EXPLAINED, "explain_seconds": explain[0],
        "explain_cpu_seconds": explain[1],
        "peak_resident_bytes": peak, "resident_bytes_before_fit": before,
        "preflight_estimate_bytes": estimate_bytes,
        "preflight_estimate_seconds_fit": estimate_seconds,
        "completeness_gap_mean": gaps["mean"], "completeness_gap_variance": gaps["variance"],
        "noise": model.noise_,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="5000,10000,17279,20000")
    parser.add_argument("--quick", action="store_true", help="no JSON written")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args.child)))
        return
    info = machine_info(note="one run per size, each in its own process, on a 2-core machine "
                        "shared with other jobs (load averages recorded)")
    rows = []
    for n in (int(s) for s in args.sizes.split(",")):
        output = subprocess.run([sys.executable, __file__, "--child", str(n)], check=True,
                                stdout=subprocess.PIPE, text=True).stdout
        row = json.loads(output)
        rows.append(row)
        print(f"n={n}: fit {row['fit_cpu_seconds']:.0f} s CPU ({row['fit_seconds']:.0f} s wall; "
              f"estimate {row['preflight_estimate_seconds_fit']:.0f} s), explain "
              f"{N_EXPLAINED} points {row['explain_cpu_seconds']:.0f} s CPU, peak "
              f"{row['peak_resident_bytes'] / 2**30:.1f} GiB (estimate "
              f"{row['preflight_estimate_bytes'] / 2**30:.1f} GiB)", flush=True)
        if not args.quick:
            write_results("exact_scaling", {"machine": info, "results": rows})


if __name__ == "__main__":
    main()
