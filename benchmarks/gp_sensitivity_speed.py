"""Closed-form Sobol indices of an ARD GP (ours) against SALib's Saltelli estimator and Ax's
Monte Carlo Sobol indices of the same GP.

Models as in ``gp_shap_speed.py`` (``_product_gp_data``: scikit-learn ``ConstantKernel *
RBF(ARD) + WhiteKernel``, ``normalize_y=True``; wine red, concrete, pumadyn-32nm). Two
measures, each analysed by every method on the same GP:

1. independent Gaussians with each training column's mean and standard deviation (ours against
   SALib);
2. the uniform box of the training columns' min and max (``gx.measures.Uniform``; ours against
   Ax and SALib).

* **ours**: ``gx.global_sensitivity(gx.from_sklearn(gpr))``: first-order and total indices and
  Shapley effects of the posterior mean in closed form (O(n^2 d^2)), their posterior
  expectations and the posterior standard deviations of every index (first order, total,
  Shapley, total variance; O(n^2 d^3 / 8) plus (1 + 3 d) n x n matrix products): ``seconds``
  is that full call (wall; ``cpu_seconds`` its process CPU time); the indices are exact, so
  they are the reference;
* **SALib 1.5.1** Saltelli sampling + Sobol analysis (``calc_second_order=False``, N (d + 2)
  evaluations of ``gpr.predict``) with ``dists = "norm"`` (the same measure), N = 2^8 .. 2^14:
  time and max |index - ours| over features, for first-order and total indices.
* **Ax 1.1.2** (``ax.utils.sensitivity.sobol_measures.SobolSensitivityGPMean``, the
  ``bench`` extra; it installs beside our torch 2.13 / gpytorch 1.15.2 / botorch 0.18.1 pins
  and pulls ipython, plotly, ipywidgets and their dependencies): Saltelli first-order and
  Jansen total estimators on ``num_mc_samples`` = N points per matrix, uniform random (Ax's
  default) or scrambled Sobol' (``input_qmc=True``, as SALib's sampler), N (d + 2)
  evaluations of the BoTorch posterior, over the box only (Ax has no other measure). The
  model is a BoTorch ``SingleTaskGP`` built with the scikit-learn GP's hyperparameters (no
  input or outcome transform, constant mean = the training mean, outputscale and noise in y
  units): its posterior mean is checked against ours on 64 points (max gap recorded, must be
  below 1e-8 of the target's scale). ``seconds`` covers Ax's construction (which evaluates
  the model) and both index calls; SALib uses ``dists = "unif"`` on the same box at the same
  N. Ours under ``Uniform`` is exact (composite Gauss-Legendre, ~1e-15), so it is the
  reference. Ax's ``input_qmc=True`` draws A and B as two scrambles of the same Sobol' net,
  so their rows are dependent and its indices do not converge (benchmarks/README.md).

The machine was shared with other jobs (2 cores): wall-clock times are indicative.

Run from the repository root::

    GPEXPLAIN_DATA_DIR=../shared/data .venv/bin/python benchmarks/gp_sensitivity_speed.py

Results: ``benchmarks/results/gp_sensitivity_speed.json``.
"""

from __future__ import annotations

import os

os.environ.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
                  OMP_WAIT_POLICY="PASSIVE")

import argparse  # noqa: E402
import itertools  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
from _common import machine_info, write_results  # noqa: E402
from _product_gp_data import fit_sklearn_gp, load  # noqa: E402

import gpexplain as gx  # noqa: E402

SAMPLE_SIZES = (2**8, 2**10, 2**12, 2**14)


def _ours(posterior, measure):
    """Our full ``global_sensitivity`` call, timed, as a JSON record."""
    start, cpu_start = time.perf_counter(), time.process_time()
    ours = gx.global_sensitivity(posterior, measure)
    seconds, cpu_seconds = time.perf_counter() - start, time.process_time() - cpu_start
    return ours, {
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
    }


def _salib(gpr, names, bounds, dist, ours, seconds, sample_sizes, seed):
    """SALib's Saltelli sampling and Sobol analysis of ``gpr.predict`` at each N: rows of time
    and max |index - ours|. ``bounds`` per feature: (mean, std) for "norm", (low, high) for
    "unif"."""
    from SALib.analyze import sobol as sobol_analyze
    from SALib.sample import sobol as sobol_sample

    # SALib 1.5.1 calls pd.unique on the names, which pandas 3 refuses for a list.
    problem = {"num_vars": len(names), "names": np.asarray(names, dtype=object),
               "bounds": [[float(a), float(b)] for a, b in bounds],
               "dists": [dist] * len(names)}
    rows = []
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
        rows.append(entry)
        _print_row("SALib", entry)
    return rows


def _print_row(method, entry):
    print(f"  {method:6s} N={entry['N']:6d} {entry['seconds']:8.2f} s "
          f"(x{entry['time_ratio_to_ours']:.1f}) S1 error {entry['max_error_first_order']:.2e} "
          f"ST error {entry['max_error_total']:.2e}")


def botorch_twin(posterior):
    """A BoTorch ``SingleTaskGP`` whose posterior is that of ``posterior`` (an exact GP with an
    ARD RBF kernel): the same data, lengthscales, variance, noise and constant mean, no
    transforms."""
    import torch
    from botorch.models import SingleTaskGP
    from gpytorch.constraints import GreaterThan
    from gpytorch.kernels import RBFKernel, ScaleKernel
    from gpytorch.likelihoods import GaussianLikelihood

    X = torch.as_tensor(posterior.train_inputs, dtype=torch.float64)
    Y = torch.as_tensor(posterior.train_targets, dtype=torch.float64)[:, None]
    d = X.shape[1]
    covar = ScaleKernel(RBFKernel(ard_num_dims=d)).double()
    # the default noise floor (1e-4) would clip a small fitted noise
    likelihood = GaussianLikelihood(noise_constraint=GreaterThan(1e-12)).double()
    model = SingleTaskGP(X, Y, likelihood=likelihood, covar_module=covar,
                         outcome_transform=None).double()
    kernel = posterior.kernel
    covar.base_kernel.lengthscale = torch.as_tensor(
        np.broadcast_to(kernel.lengthscale, (d,)).copy(), dtype=torch.float64)[None]
    covar.outputscale = torch.tensor(float(kernel.variance), dtype=torch.float64)
    likelihood.noise = torch.tensor([float(posterior.noise)], dtype=torch.float64)
    model.mean_module.constant = torch.tensor(float(posterior.mean), dtype=torch.float64)
    return model.eval()


def _ax(model, posterior, low, high, ours, seconds, sample_sizes, seed):
    """Ax's ``SobolSensitivityGPMean`` on the BoTorch twin at each N: rows of time and max
    |index - ours|, after checking that the twin's posterior mean is ours."""
    import torch
    from ax.utils.sensitivity.sobol_measures import SobolSensitivityGPMean

    probe = low + (high - low) * np.random.default_rng(seed).random((64, len(low)))
    with torch.no_grad():
        twin_mean = model.posterior(torch.as_tensor(probe)).mean.numpy()[:, 0]
    ours_mean = posterior.predict_mean(probe)
    gap = float(np.max(np.abs(twin_mean - ours_mean)) / np.std(posterior.train_targets))
    if gap > 1e-8:
        raise RuntimeError(f"the BoTorch twin's mean is {gap:.1e} (relative) off ours")
    bounds = torch.as_tensor(np.stack([low, high]), dtype=torch.float64)
    rows = []
    for qmc, n in itertools.product((False, True), sample_sizes):
        torch.manual_seed(seed + n)
        start = time.perf_counter()
        sobol = SobolSensitivityGPMean(model, bounds, num_mc_samples=n, input_qmc=qmc)
        first = sobol.first_order_indices().numpy()
        total = sobol.total_order_indices().numpy()
        elapsed = time.perf_counter() - start
        entry = {"N": n, "input_qmc": qmc, "evaluations": n * (len(low) + 2),
                 "seconds": elapsed, "time_ratio_to_ours": elapsed / seconds,
                 "max_error_first_order": float(np.max(np.abs(
                     first - ours.first_order_indices))),
                 "max_error_total": float(np.max(np.abs(total - ours.total_indices)))}
        rows.append(entry)
        _print_row("AxQMC" if qmc else "Ax", entry)
    return gap, rows


def run_dataset(name, n_rows, seed, sample_sizes):
    X, y, names = load(name, n_rows, seed)
    gpr = fit_sklearn_gp(X, y, seed)
    posterior = gx.from_sklearn(gpr)
    print(" Gaussian measure (the training columns' mean and std)")
    ours, record = _ours(posterior, None)
    record = {"n_train": n_rows, "n_features": X.shape[1], "ours": record}
    seconds = record["ours"]["seconds"]
    record["salib"] = _salib(gpr, names, zip(X.mean(0), X.std(0), strict=True), "norm", ours,
                             seconds, sample_sizes, seed)
    print(f"  ours (all posterior stds) {seconds:.3f} s wall, "
          f"{record['ours']['cpu_seconds']:.3f} s CPU")
    low, high = X.min(0), X.max(0)
    print(" Uniform measure (the training columns' min and max)")
    ours, box = _ours(posterior, gx.measures.Uniform(low, high))
    seconds = box["seconds"]
    gap, ax_rows = _ax(botorch_twin(posterior), posterior, low, high, ours, seconds,
                       sample_sizes, seed)
    record["uniform"] = {
        "low": low.tolist(), "high": high.tolist(), "ours": box,
        "botorch_twin_max_relative_mean_gap": gap, "ax": ax_rows,
        "salib": _salib(gpr, names, zip(low, high, strict=True), "unif", ours, seconds,
                        sample_sizes, seed),
    }
    print(f"  ours (all posterior stds) {seconds:.3f} s wall, {box['cpu_seconds']:.3f} s CPU; "
          f"BoTorch twin mean gap {gap:.1e}")
    return record


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--n-rows", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    payload = {"machine": machine_info(note="machine shared with other jobs (2 cores): "
                                             "wall-clock times are indicative"),
               "measure": "independent Gaussians with the training columns' mean and std; "
                          "'uniform': the box of the training columns' min and max",
               "ax": "ax-platform 1.1.2 SobolSensitivityGPMean on a BoTorch SingleTaskGP "
                     "with the same hyperparameters (uniform box only)",
               "datasets": {}}
    for name in ("wine-red", "concrete", "pumadyn-32nm"):
        print(name)
        payload["datasets"][name] = run_dataset(name, args.n_rows, args.seed, SAMPLE_SIZES)
    print("wrote", write_results("gp_sensitivity_speed", payload))


if __name__ == "__main__":
    main()
