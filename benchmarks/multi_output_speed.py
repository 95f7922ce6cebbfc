"""Explaining t outputs of a coregionalised GP jointly against t separate single-output runs.

Models on wine red (d = 11): n training rows, each observing one of t tasks (row r observes
task r mod t; the target is quality plus a task-dependent shift), noise 0.1, fixed
hyperparameters (the explanation is timed, not the fit):

* ``icm``: an intrinsic coregionalisation model (``gx.CoregionalizedPosterior``), an ARD
  squared exponential with lengthscales ``std * sqrt(d)``, a seeded random ``B = W W^T +
  diag(v)`` (rank 2);
* ``lmc``: a linear model of coregionalisation (``gx.LMCPosterior``) of two such terms, the
  second with half the lengthscales and its own seeded B (halved).

* **joint**: ``gx.integrated_gradients(posterior, X)`` once: the cross term of the input
  kernel is computed once and weighted by ``B[i, task]`` per output; it also gives the
  covariance across outputs;
* **separate**: ``gx.integrated_gradients(posterior.marginal(i), X)`` for each of the t outputs
  (the single-output path, t cross terms, no covariance across outputs).

Both with the full covariance (closed form, mean baseline). Agreement: max |joint - separate|
over the per-output means and covariances, relative to their largest value. The machine is
shared (2 cores, several agents): wall-clock times are indicative only.

Run from the repository root::

    GPEXPLAIN_DATA_DIR=../shared/data .venv/bin/python benchmarks/multi_output_speed.py
    ... benchmarks/multi_output_speed.py --quick     # t = 2 only, no JSON

Results: ``benchmarks/results/multi_output_speed.json``.
"""

from __future__ import annotations

import os

os.environ.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
                  OMP_WAIT_POLICY="PASSIVE")

import argparse  # noqa: E402
import itertools  # noqa: E402

import numpy as np  # noqa: E402
from _common import best_of, machine_info, write_results  # noqa: E402
from _product_gp_data import load  # noqa: E402

import gpexplain as gx  # noqa: E402


def _coregionalisation(rng, t: int) -> np.ndarray:
    W = rng.normal(size=(t, 2))
    return W @ W.T + np.diag(rng.uniform(0.1, 0.5, t))


def icm_posterior(X, y, t: int, seed: int):
    rng = np.random.default_rng(seed)
    tasks = np.arange(len(X)) % t
    kernel = gx.kernels.RBF(X.std(0) * np.sqrt(X.shape[1]), 1.0)
    y = (y - y.mean()) / y.std() + 0.3 * tasks
    return gx.CoregionalizedPosterior(X, tasks, y, kernel, _coregionalisation(rng, t), 0.1)


def lmc_posterior(X, y, t: int, seed: int):
    """Two terms: the ICM's kernel and one with half its lengthscales, each with its own B."""
    rng = np.random.default_rng(seed)
    tasks = np.arange(len(X)) % t
    lengthscale = X.std(0) * np.sqrt(X.shape[1])
    kernels = [gx.kernels.RBF(lengthscale, 1.0), gx.kernels.RBF(lengthscale / 2, 1.0)]
    y = (y - y.mean()) / y.std() + 0.3 * tasks
    return gx.LMCPosterior(X, tasks, y, kernels,
                           [_coregionalisation(rng, t), 0.5 * _coregionalisation(rng, t)], 0.1)


MODELS = {"icm": icm_posterior, "lmc": lmc_posterior}


def run(model: str, t: int, X, y, X_explain, seed: int, repeats: int):
    posterior = MODELS[model](X, y, t, seed)
    joint, joint_seconds = best_of(lambda: gx.integrated_gradients(posterior, X_explain),
                                   repeats)
    separate, separate_seconds = best_of(
        lambda: [gx.integrated_gradients(posterior.marginal(i), X_explain) for i in range(t)],
        repeats,
    )
    mean_gap = max(np.abs(joint.attributions[i].mean - part.mean).max() / np.abs(part.mean).max()
                   for i, part in enumerate(separate))
    cov_gap = max(np.abs(joint.attributions[i].cov - part.cov).max() / np.abs(part.cov).max()
                  for i, part in enumerate(separate))
    return {
        "model": model, "n_outputs": t, "joint_seconds": joint_seconds,
        "separate_seconds": separate_seconds,
        "speedup": separate_seconds / joint_seconds,
        "max_relative_gap_mean": float(mean_gap), "max_relative_gap_cov": float(cov_gap),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--rows", type=int, default=400)
    parser.add_argument("--points", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    info = machine_info()
    X, y, names = load("wine-red", args.rows + args.points, args.seed)
    X_train, y_train, X_explain = X[:args.rows], y[:args.rows], X[args.rows:]
    rows = []
    for model, t in itertools.product(MODELS, (2,) if args.quick else (2, 4, 8)):
        row = run(model, t, X_train, y_train, X_explain, args.seed,
                  repeats=1 if args.quick else 3)
        print(f"{model}, t={t}: joint {row['joint_seconds']:.3f} s, separate "
              f"{row['separate_seconds']:.3f} s (x{row['speedup']:.2f}); gaps mean "
              f"{row['max_relative_gap_mean']:.1e}, cov {row['max_relative_gap_cov']:.1e}")
        rows.append(row)
    if not args.quick:
        write_results("multi_output_speed", {
            "benchmark": "multi_output_speed", "data": "wine red", "n_rows": args.rows,
            "n_points": args.points, "n_features": len(names), "method":
            "integrated gradients, closed form, full covariance, mean baseline",
            "results": rows, "machine": info,
        })


if __name__ == "__main__":
    main()
