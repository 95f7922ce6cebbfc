"""Random-feature GP attributions against the exact GP's (Butler et al. 2024, Sec. 5.5 in numbers).

On wine-quality-red, one set of ARD-SE hyperparameters (an exact ``GPRegressor`` fit on a
seeded subset of rows) defines both models:

* the exact GP: ``ExactPosterior`` with the RBF kernel on all rows;
* random-feature GPs: for M in {10, 50, 100, 500} frequencies, R independent frequency draws
  from the kernel's spectral density, each a ``RandomFeaturePosterior`` on all rows; the
  single models, and the marginalised model (``mixture_attribution`` over the R draws,
  the moment-matched mixture of Sec. 5.5).

Every model explains the same seeded rows against the mean baseline with the closed-form
integrated gradients (mean and full covariance). Distances to the exact attributions:

* ``mean_rmse``: root-mean-square over rows and features of the attribution means' difference
  (units of quality), and ``mean_rel`` the same divided by the RMS exact attribution;
* ``std_rmse`` / ``std_rel``: the same for the attribution standard deviations;
* ``w2_marginal``: the 2-Wasserstein distance between the per-attribution Gaussians,
  ``sqrt((mu - mu_exact)^2 + (s - s_exact)^2)``, averaged over rows and features (units of
  quality);
* ``w2_joint``: the 2-Wasserstein distance between the 11-dimensional Gaussians of a row,
  ``|mu - mu'|^2 + tr(S + S' - 2 (S'^1/2 S S'^1/2)^1/2)``, square-rooted, averaged over rows.

Single models are summarised over all R draws (mean and standard deviation of each distance).
Run from the repository root::

    .venv/bin/python benchmarks/random_features_convergence.py          # full run, writes JSON
    .venv/bin/python benchmarks/random_features_convergence.py --quick  # smoke test, no JSON

Results: ``benchmarks/results/random_features_convergence.json``.
"""

from __future__ import annotations

import os

# One core: the budget of the benchmark is stated for a single thread.
for _variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402
from _common import RESULTS, machine_info, write_results  # noqa: E402

from gpexplain.datasets import load_dataset  # noqa: E402
from gpexplain.explain._mixture import mixture_attribution  # noqa: E402
from gpexplain.explain.integrated_gradients import integrated_gradients  # noqa: E402
from gpexplain.kernels.random_features import RandomFeatureKernel  # noqa: E402
from gpexplain.models.gp_regressor import GPRegressor  # noqa: E402
from gpexplain.posterior.exact import ExactPosterior  # noqa: E402
from gpexplain.posterior.random_features import RandomFeaturePosterior  # noqa: E402

OUTPUT = RESULTS / "random_features_convergence.json"
FREQUENCIES = (10, 50, 100, 500)


def psd_sqrt(matrix: np.ndarray) -> np.ndarray:
    """Symmetric square root of a symmetric PSD matrix (negative round-off eigenvalues -> 0)."""
    values, vectors = np.linalg.eigh(matrix)
    return (vectors * np.sqrt(np.maximum(values, 0.0))) @ vectors.T


def distances(attribution, exact, exact_roots) -> dict[str, float]:
    """Distances of one attribution from the exact one (see the module docstring)."""
    mean_diff = attribution.mean - exact.mean
    std_diff = attribution.std - exact.std
    rms_exact_mean = np.sqrt(np.mean(exact.mean**2))
    rms_exact_std = np.sqrt(np.mean(exact.std**2))
    joint = []
    for p in range(exact.n_points):
        root = exact_roots[p]
        cross = psd_sqrt(root @ attribution.cov[p] @ root)
        bures = np.trace(attribution.cov[p] + exact.cov[p] - 2.0 * cross)
        joint.append(np.sqrt(max(np.sum(mean_diff[p] ** 2) + bures, 0.0)))
    return {
        "mean_rmse": float(np.sqrt(np.mean(mean_diff**2))),
        "mean_rel": float(np.sqrt(np.mean(mean_diff**2)) / rms_exact_mean),
        "std_rmse": float(np.sqrt(np.mean(std_diff**2))),
        "std_rel": float(np.sqrt(np.mean(std_diff**2)) / rms_exact_std),
        "w2_marginal": float(np.mean(np.sqrt(mean_diff**2 + std_diff**2))),
        "w2_joint": float(np.mean(joint)),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke test: 10 rows, 5 models")
    parser.add_argument("--n-explained", type=int, default=50, help="rows explained (50)")
    parser.add_argument("--n-models", type=int, default=500, help="draws R per M (500)")
    parser.add_argument("--n-models-largest", type=int, default=500,
                        help="draws R at the largest M (500; lower it on a slow machine)")
    parser.add_argument("--fit-rows", type=int, default=800,
                        help="rows of the exact hyperparameter fit (800)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", type=Path, default=None, help=f"JSON path ({OUTPUT})")
    args = parser.parse_args(argv)
    if args.quick:
        args.n_explained, args.n_models, args.n_models_largest = 10, 5, 5
    output = args.output if args.output is not None else (None if args.quick else OUTPUT)
    wall_start, cpu_start = time.perf_counter(), time.process_time()
    machine = machine_info()

    X_frame, y_series = load_dataset("wine-quality-red")
    names = [str(c) for c in X_frame.columns]
    X, y = X_frame.to_numpy(dtype=np.float64), y_series.to_numpy(dtype=np.float64)
    rng = np.random.default_rng(args.seed)
    fit_rows = np.sort(rng.choice(len(y), size=min(args.fit_rows, len(y)), replace=False))
    explained = np.sort(rng.choice(len(y), size=args.n_explained, replace=False))
    Xq = X[explained]

    start = time.process_time()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # repeated rows: fitted once, as designed
        hyper = GPRegressor(n_restarts=0, random_state=args.seed).fit(X[fit_rows], y[fit_rows])
    fit_seconds = time.process_time() - start
    kernel, noise, mean = hyper.kernel_, hyper.noise_, hyper.mean_

    start = time.process_time()
    exact_posterior = ExactPosterior(X, y, kernel, noise, mean=mean, feature_names=names)
    exact = integrated_gradients(exact_posterior, Xq, "mean")
    exact_seconds = time.process_time() - start
    exact_roots = [psd_sqrt(c) for c in exact.cov]
    print(f"exact GP: fit {fit_seconds:.1f} s (CPU), explain {exact_seconds:.2f} s")

    streams = np.random.SeedSequence(args.seed).spawn(len(FREQUENCIES))
    results = []
    header = f"{'M':>5} {'R':>5} {'model':>13} {'mean_rel':>9} {'std_rel':>8} {'W2 marg':>9} " \
             f"{'W2 joint':>9} {'CPU s':>7}"
    print(header)
    for M, stream in zip(FREQUENCIES, streams, strict=True):
        R = args.n_models_largest if M == max(FREQUENCIES) else args.n_models
        start = time.process_time()
        parts = []
        for child in stream.spawn(R):
            rf = RandomFeatureKernel.from_rbf(kernel, M, X.shape[1], np.random.default_rng(child))
            posterior = RandomFeaturePosterior(X, y, rf, noise, mean=mean, feature_names=names)
            parts.append(integrated_gradients(posterior, Xq, "mean"))
        seconds = time.process_time() - start
        singles = [distances(a, exact, exact_roots) for a in parts]
        single_summary = {
            key: {
                "mean": float(np.mean([s[key] for s in singles])),
                "std": float(np.std([s[key] for s in singles])),
            }
            for key in singles[0]
        }
        marginalised = mixture_attribution(parts)
        mixed = distances(marginalised, exact, exact_roots)
        gaps = marginalised.completeness_gap()
        results.append({
            "n_frequencies": M,
            "n_models": R,
            "single_model_over_draws": single_summary,
            "marginalised": mixed,
            "marginalised_completeness_gap": gaps,
            "cpu_seconds_fit_and_explain_all_draws": seconds,
        })
        for label, row in (("single (avg)", {k: v["mean"] for k, v in single_summary.items()}),
                           ("marginalised", mixed)):
            print(f"{M:>5} {R:>5} {label:>13} {row['mean_rel']:>9.4f} {row['std_rel']:>8.4f} "
                  f"{row['w2_marginal']:>9.5f} {row['w2_joint']:>9.5f} {seconds:>7.1f}")

    payload = {
        "description": (
            "Distances between random-feature GP integrated-gradient attributions (single "
            "models and the moment-matched mixture over R frequency draws) and the exact GP's, "
            "on wine-quality-red with the same ARD-SE hyperparameters (Butler et al. Sec. 5.5)."
        ),
        "setup": {
            "dataset": "wine-quality-red (gpexplain.datasets.load_dataset), 1599 rows x 11",
            "training_rows": int(len(y)),
            "explained_rows": explained.tolist(),
            "baseline": "mean of the training inputs",
            "hyperparameters": {
                "source": f"GPRegressor(n_restarts=0) on {len(fit_rows)} seeded rows",
                "lengthscale": kernel.lengthscale.tolist(),
                "variance": kernel.variance,
                "noise": noise,
                "mean": mean,
                "fit_cpu_seconds": fit_seconds,
            },
            "exact_explain_cpu_seconds": exact_seconds,
            "exact_rms_attribution": float(np.sqrt(np.mean(exact.mean**2))),
            "exact_rms_std": float(np.sqrt(np.mean(exact.std**2))),
            "seed": args.seed,
        },
        "metrics": {
            "mean_rmse": "RMS over rows and features of (mean - exact mean), units of quality",
            "mean_rel": "mean_rmse / RMS of the exact attribution means",
            "std_rmse": "RMS of (std - exact std), units of quality",
            "std_rel": "std_rmse / RMS of the exact attribution standard deviations",
            "w2_marginal": "2-Wasserstein distance between per-attribution Gaussians, averaged",
            "w2_joint": "2-Wasserstein distance between a row's 11-d Gaussians, averaged over rows",
        },
        "reductions": (
            f"{args.n_explained} explained rows (not 100-200) so that the run fits 10 minutes "
            f"of one core; R = {args.n_models} draws for M < {max(FREQUENCIES)} and "
            f"R = {args.n_models_largest} at M = {max(FREQUENCIES)}. The posteriors use all "
            f"{len(y)} rows; the hyperparameters come from {len(fit_rows)} rows."
        ),
        "results": results,
        "machine": machine,
        "wall_seconds": time.perf_counter() - wall_start,
        "cpu_seconds": time.process_time() - cpu_start,
    }
    print(f"total: {payload['cpu_seconds']:.0f} s CPU, {payload['wall_seconds']:.0f} s wall")
    if output is not None:
        print(f"wrote {write_results(output, payload)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
