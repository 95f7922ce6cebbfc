"""Global sensitivity of an Ax surrogate: ours (exact, with posterior stds) against Ax's own
Monte Carlo Sobol indices (``ax.utils.sensitivity.sobol_measures.ax_parameter_sens``, its
defaults: 10^4 uniform random points per Saltelli matrix) on the same fitted surrogate.

The experiment: an Ax 1.1.2 ``Client`` minimising Hartmann-6 (``botorch.test_functions``, six
parameters on [0, 1]) from N seeded Sobol trials; the surrogate is Ax's default modular
BoTorch adapter fitted to them (``Generators.BOTORCH_MODULAR``: ``SingleTaskGP`` with an ARD
``RBFKernel``, ``Normalize``, Ax's ``StandardizeY``), the one both methods analyse.

* **ours**: ``gx.ax.sensitivity(adapter, "hartmann")``: ``gx.from_ax`` (Ax's transforms undone
  exactly) and ``gx.global_sensitivity`` under ``gx.measures.Uniform`` of the search box:
  first-order and total indices and Shapley effects of the posterior mean, exact, and the
  posterior expectation and standard deviation of each (unnormalised) variance;
* **Ax**: ``ax_parameter_sens(adapter, order="first" / "total", signed=False)``, repeated with
  R torch seeds to show its Monte Carlo spread.

Errors are max |Ax index - ours| over parameters (indices normalised by the variance of the
posterior mean). Ours is exact (composite Gauss-Legendre under the box, ~1e-15), so it is the
reference. The machine was shared with other jobs (2 cores): times are indicative.

Run from the repository root::

    .venv/bin/python benchmarks/ax_sensitivity.py

Results: ``benchmarks/results/ax_sensitivity.json``.
"""

from __future__ import annotations

import os

os.environ.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
                  OMP_WAIT_POLICY="PASSIVE")

import argparse  # noqa: E402
import logging  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
from _common import machine_info, write_results  # noqa: E402

import gpexplain as gx  # noqa: E402


def surrogate(n_trials: int, seed: int):
    """Ax's default BoTorch adapter fitted to ``n_trials`` Sobol trials of Hartmann-6."""
    import torch
    from ax import Client, RangeParameterConfig
    from botorch.test_functions import Hartmann

    from gpexplain.posterior.ax import ax_adapter

    logging.getLogger("ax").setLevel(logging.WARNING)
    hartmann = Hartmann(dim=6)
    names = [f"x{i}" for i in range(6)]
    client = Client(random_seed=seed)
    client.configure_experiment(parameters=[
        RangeParameterConfig(name=name, parameter_type="float", bounds=(0.0, 1.0))
        for name in names])
    client.configure_optimization(objective="-hartmann")
    for index, parameters in client.get_next_trials(max_trials=n_trials).items():
        x = torch.tensor([[parameters[name] for name in names]], dtype=torch.float64)
        client.complete_trial(index, raw_data={"hartmann": float(hartmann(x))})
    return ax_adapter(client, refit=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--n-trials", type=int, default=40)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    warnings.filterwarnings("ignore")
    import torch
    from ax.utils.sensitivity.sobol_measures import ax_parameter_sens

    payload = {"machine": machine_info(note="machine shared with other jobs (2 cores): "
                                            "wall-clock times are indicative"),
               "experiment": f"Hartmann-6, {args.n_trials} Sobol trials, seed {args.seed}",
               "ax_defaults": "ax_parameter_sens(signed=False): SobolSensitivityGPMean with "
                              "num_mc_samples=10**4, uniform random inputs"}
    from importlib import metadata

    payload["machine"]["versions"].update(
        {name: metadata.version(name) for name in ("ax-platform", "botorch")})
    adapter = surrogate(args.n_trials, args.seed)
    start = time.perf_counter()
    ours = gx.ax.sensitivity(adapter, "hartmann")
    seconds = time.perf_counter() - start
    table = ours.table
    payload["ours"] = {
        "seconds": seconds,
        "first_order_index": table["first_order_index"].tolist(),
        "total_index": table["total_index"].tolist(),
        "first_order_std": table["first_order_std"].tolist(),
        "total_std": table["total_std"].tolist(),
        "shapley_effect": table["shapley_effect"].tolist(),
        "shapley_effect_std": table["shapley_effect_std"].tolist(),
        "variance_of_mean": float(ours.result.total_variance),
    }
    print(table.round(4))
    runs = []
    for repeat in range(args.repeats):
        torch.manual_seed(args.seed + repeat)
        entry = {}
        for order, column in (("first", "first_order_index"), ("total", "total_index")):
            start = time.perf_counter()
            theirs = ax_parameter_sens(adapter, ["hartmann"], order=order, signed=False)
            entry[f"{order}_seconds"] = time.perf_counter() - start
            values = np.array([float(theirs["hartmann"][name]) for name in table.index])
            entry[f"{order}_index"] = values.tolist()
            entry[f"{order}_max_error"] = float(np.max(np.abs(
                values - table[column].to_numpy())))
        runs.append(entry)
        print(f"Ax repeat {repeat}: first {entry['first_seconds']:.2f} s, error "
              f"{entry['first_max_error']:.3g}; total {entry['total_seconds']:.2f} s, error "
              f"{entry['total_max_error']:.3g}")
    payload["ax"] = runs
    ax_seconds = np.mean([r["first_seconds"] + r["total_seconds"] for r in runs])
    payload["time_ratio_ax_to_ours"] = float(ax_seconds / seconds)
    print(f"ours {seconds:.3f} s (first, total, Shapley, all with stds); Ax {ax_seconds:.2f} s "
          f"(first and total indices of the mean): x{ax_seconds / seconds:.1f}")
    print("wrote", write_results("ax_sensitivity", payload))


if __name__ == "__main__":
    main()
