"""Closed-form Sobol indices of an ARD GP (ours) against SALib's Saltelli estimator.

Models as in ``gp_shap_speed.py`` (``_product_gp_data``: scikit-learn ``ConstantKernel *
RBF(ARD) + WhiteKernel``, ``normalize_y=True``; wine red, concrete, pumadyn-32nm). The
measure: independent Gaussians with each training column's mean and standard deviation.

* **ours**: ``gx.global_sensitivity(gx.from_sklearn(gpr))``: first-order and total indices and
  Shapley effects of the posterior mean in closed form (O(n^2 d^2)), their posterior
  expectations and the posterior standard deviations of every index (first order, total,
  Shapley, total variance; O(n^2 d^3 / 8) plus (1 + 3 d) n x n matrix products): ``seconds``
  is that full call (wall; ``cpu_seconds`` its process CPU time); the indices are exact, so
  they are the reference;
* **SALib 1.5.1** Saltelli sampling + Sobol analysis (``calc_second_order=False``, N (d + 2)
  evaluations of ``gpr.predict``) with ``dists = "norm"`` (the same measure), N = 2^8 .. 2^14:
  time and max |index - ours| over features, for first-order and total indices.
* **Ax** (``ax.utils.sensitivity``): ax-platform 1.1.2 installs beside our torch 2.13 /
  gpytorch 1.15.2 / botorch 0.18.1 pins (pip --dry-run), but pulls 19 further packages
  (ipython, plotly, ...) and its Sobol measures integrate over a uniform box, not a Gaussian
  product measure, so its indices are of a different measure: not run.

The machine was shared with other jobs (8 agents on 2 cores): wall-clock times are indicative.

Run from the repository root::

    GPEXPLAIN_DATA_DIR=../shared/data .venv/bin/python benchmarks/gp_sensitivity_speed.py

Results: ``benchmarks/results/gp_sensitivity_speed.json``.
"""

from __future__ import annotations

import os

os.environ.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
                  OMP_WAIT_POLICY="PASSIVE")

import argparse  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
from _common import machine_info, write_results  # noqa: E402
from _product_gp_data import fit_sklearn_gp, load  # noqa: E402

import gpexplain as gx  # noqa: E402

SAMPLE_SIZES = (2**8, 2**10, 2**12, 2**14)


def run_dataset(name, n_rows, seed, sample_sizes):
    from SALib.analyze import sobol as sobol_analyze
    from SALib.sample import sobol as sobol_sample

    X, y, names = load(name, n_rows, seed)
    gpr = fit_sklearn_gp(X, y, seed)
    posterior = gx.from_sklearn(gpr)
    start, cpu_start = time.perf_counter(), time.process_time()
    ours = gx.global_sensitivity(posterior)
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
    record = {"n_train": n_rows, "n_features": X.shape[1], "ours": {
        "seconds": seconds,
        "cpu_seconds": cpu_seconds,
        "first_order_indices": ours.first_order_indices.tolist(),
        "total_indices": ours.total_indices.tolist(),
        "shapley_indices": ours.shapley_indices.tolist(),
        "expected_first_order": ours.expected_first_order.tolist(),
        "first_order_std": ours.first_order_std.tolist(),
        "total_std": ours.total_std.tolist(),
        "shapley_effects_std": ours.shapley_effects_std.tolist(),
        "total_variance": ours.total_variance,
        "expected_total_variance": ours.expected_total_variance,
        "total_variance_std": ours.total_variance_std,
    }, "salib": []}
    mean, std = X.mean(0), X.std(0)
    # SALib 1.5.1 calls pd.unique on the names, which pandas 3 refuses for a list.
    problem = {"num_vars": X.shape[1], "names": np.asarray(names, dtype=object),
               "bounds": [[float(m), float(s)] for m, s in zip(mean, std, strict=True)],
               "dists": ["norm"] * X.shape[1]}
    for n in sample_sizes:
        start = time.perf_counter()
        samples = sobol_sample.sample(problem, n, calc_second_order=False, seed=seed)
        result = sobol_analyze.analyze(problem, gpr.predict(samples), calc_second_order=False,
                                       seed=seed)
        elapsed = time.perf_counter() - start
        entry = {"N": n, "evaluations": int(len(samples)), "seconds": elapsed,
                 "time_ratio_to_ours": elapsed / seconds,
                 "max_error_first_order": float(np.max(np.abs(
                     result["S1"] - ours.first_order_indices))),
                 "max_error_total": float(np.max(np.abs(result["ST"] - ours.total_indices))),
                 "max_reported_confidence_first_order": float(np.max(result["S1_conf"]))}
        record["salib"].append(entry)
        print(f"  SALib N={n:6d} {elapsed:8.2f} s (x{entry['time_ratio_to_ours']:.0f}) "
              f"S1 error {entry['max_error_first_order']:.2e} "
              f"ST error {entry['max_error_total']:.2e}")
    print(f"  ours (all posterior stds) {seconds:.3f} s wall, {cpu_seconds:.3f} s CPU")
    return record


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--n-rows", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    payload = {"machine": machine_info(note="machine shared with other jobs (8 agents on 2 "
                                             "cores): wall-clock times are indicative"),
               "measure": "independent Gaussians with the training columns' mean and std",
               "ax": "not run: installs with our pins but measures a uniform box, not this "
                     "Gaussian product measure (see the script's docstring)",
               "datasets": {}}
    for name in ("wine-red", "concrete", "pumadyn-32nm"):
        print(name)
        payload["datasets"][name] = run_dataset(name, args.n_rows, args.seed, SAMPLE_SIZES)
    print("wrote", write_results("gp_sensitivity_speed", payload))


if __name__ == "__main__":
    main()
