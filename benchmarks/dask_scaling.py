"""Explanations on a Dask cluster: serial against 1 and 2 local worker processes.

Integrated gradients with the full feature-by-feature covariance (closed form, baseline =
training mean) of ``--n-explain`` query rows of pol (``$GPEXPLAIN_DATA_DIR/large/pol.csv.gz``,
15,000 x 26, target = last column) against an exact GP on ``--n-train`` seeded rows. Pol has
15,000 rows, so 20,000 query rows are drawn from all of them with replacement (seeded; the
cost of a query does not depend on which row it is). The GP's hyperparameters are fitted on a
nested ``--hyper-rows`` subset (one start: the fit is not the subject) and the posterior is
built on all ``--n-train`` rows with them.

Per configuration (serial in this process; ``LocalCluster(processes=True, threads_per_worker=
1)`` with 1 and 2 workers, cluster start-up excluded): wall time, speed-up over serial, the
peak of traced (NumPy) memory during the explanation, per worker for Dask (tracemalloc,
started on each worker just before), and each worker process's resident set size after the
run. The
Dask results are checked equal to the serial ones (maximum absolute difference recorded; the
same float64 operations on the same blocks give 0).

    .venv/bin/python benchmarks/dask_scaling.py                        # 20,000 x 3,000 rows
    .venv/bin/python benchmarks/dask_scaling.py --n-explain 200 --quick  # smoke test, no JSON
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import time
import tracemalloc
import warnings

import numpy as np
import pandas as pd
import psutil
import torch
from _common import data_path, machine_info, write_results

import gpexplain as gx
from gpexplain.parallel import dask_client

SEED = 0


def rss_bytes() -> int:
    """Current resident set size of the calling process. Not the peak: Linux carries
    ``ru_maxrss`` across fork and exec, so a spawned worker would report its parent's peak."""
    return psutil.Process().memory_info().rss


def traced_peak_bytes() -> int:
    return tracemalloc.get_traced_memory()[1]


def posterior_on_pol(n_train: int, hyper_rows: int):
    values = pd.read_csv(data_path("large", "pol.csv.gz"), header=None).to_numpy(np.float64)
    X, y = values[:, :-1], values[:, -1]
    rng = np.random.default_rng(SEED)
    train = rng.choice(len(X), n_train, replace=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # constant columns in the subset are reported, known
        start = time.perf_counter()
        hyper = gx.GPRegressor(n_restarts=0).fit(X[train[:hyper_rows]], y[train[:hyper_rows]])
        fit_seconds = time.perf_counter() - start
        model = gx.GPRegressor(kernel=hyper.kernel_, noise=hyper.noise_, optimizer=None)
        model.fit(X[train], y[train])
    return model, X, rng, fit_seconds


def main() -> None:
    torch.set_num_threads(1)
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n-explain", type=int, default=20_000)
    parser.add_argument("--n-train", type=int, default=3_000)
    parser.add_argument("--hyper-rows", type=int, default=1_000)
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--chunk-size", type=int, default=None,
                        help="points per chunk (default: the library's, ~256 MiB per chunk)")
    parser.add_argument("--quick", action="store_true", help="smoke test; no JSON written")
    args = parser.parse_args()
    info = machine_info(note="2-core machine shared with other jobs (load averages recorded): "
                        "wall times and speed-ups are those of a loaded machine")
    model, X, rng, fit_seconds = posterior_on_pol(args.n_train, args.hyper_rows)
    queries = X[rng.choice(len(X), args.n_explain, replace=True)]
    explain = dict(chunk_size=args.chunk_size)

    tracemalloc.start()
    start = time.perf_counter()
    serial = gx.integrated_gradients(model, queries, **explain)
    serial_seconds = time.perf_counter() - start
    serial_peak = traced_peak_bytes()
    tracemalloc.stop()
    runs = [{"configuration": "serial", "workers": 0, "seconds": serial_seconds,
             "speedup_vs_serial": 1.0, "peak_traced_bytes_per_process": [serial_peak],
             "rss_bytes_after_per_process": [rss_bytes()], "max_abs_difference": 0.0}]
    print(f"serial: {serial_seconds:.1f} s, peak traced {serial_peak / 2**20:.0f} MiB", flush=True)
    for workers in (int(w) for w in args.workers.split(",")):
        with dask_client(workers=workers) as client:
            client.run(tracemalloc.start)
            start = time.perf_counter()
            result = gx.integrated_gradients(model, queries, client=client, **explain)
            seconds = time.perf_counter() - start
            traced = list(client.run(traced_peak_bytes).values())
            rss = list(client.run(rss_bytes).values())
        difference = max(float(np.max(np.abs(result.mean - serial.mean))),
                         float(np.max(np.abs(result.cov - serial.cov))))
        runs.append({"configuration": f"dask LocalCluster, {workers} worker process(es)",
                     "workers": workers, "seconds": seconds,
                     "speedup_vs_serial": serial_seconds / seconds,
                     "peak_traced_bytes_per_process": traced, "rss_bytes_after_per_process": rss,
                     "max_abs_difference": difference})
        print(f"{workers} worker(s): {seconds:.1f} s (x{serial_seconds / seconds:.2f}), peak "
              f"traced per worker {max(traced) / 2**20:.0f} MiB, RSS after "
              f"{max(rss) / 2**20:.0f} MiB,"
              f" max |difference| {difference:.1e}", flush=True)
    if not args.quick:
        payload = {
            "machine": info,
            "setup": {"n_explain": args.n_explain, "n_train": args.n_train,
                      "n_features": X.shape[1], "hyper_rows": args.hyper_rows,
                      "hyper_fit_seconds": fit_seconds, "chunk_size": args.chunk_size,
                      "issue_sizes": {"n_explain": 20_000, "n_train": 3_000},
                      "explanation": "integrated gradients, closed form, full covariance"},
            "results": runs,
        }
        print(f"wrote {write_results('dask_scaling', payload)}")


if __name__ == "__main__":
    main()
