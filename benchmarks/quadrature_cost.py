"""Cost of the integrated-gradient prior term per kernel second derivative (the budget claim).

``gpexplain.functionals.integrated_gradient.MAX_PRIOR_EVALUATIONS`` (2e7) refuses a
covariance whose prior term would need more kernel mixed second derivatives per point, said
to be "about a minute per point on one core". This measures the seconds per derivative of
the plain (staggered, O(n_steps^2)) prior term: trapezoid rule, Matern 5/2 on 30 features,
one point, n_steps 32 / 64 / 128, and in the same run the default graded Gauss-Legendre rule
(single-integral prior, O(n_steps)) at n_steps 64 as the comparison.

Run from the repository root::

    .venv/bin/python benchmarks/quadrature_cost.py     # ~30 s on one core

Results: ``benchmarks/results/quadrature_cost.json``.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch: see ig_exact_vs_numerical

import sys
import time
import warnings
from pathlib import Path

import gpytorch
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine_info, write_results  # noqa: E402

import gpexplain as gx  # noqa: E402
from gpexplain.functionals.integrated_gradient import MAX_PRIOR_EVALUATIONS  # noqa: E402

N_FEATURES, N_TRAIN, REPEATS = 30, 20, 3


def _seconds(posterior, X, **kwargs) -> float:
    best = np.inf
    for _ in range(REPEATS):
        start = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", gx.CompletenessWarning)
            gx.integrated_gradients(posterior, X, **kwargs)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    machine = machine_info(note="shared 2-core machine: other jobs ran at the same time")
    rng = np.random.default_rng(0)
    X = rng.normal(size=(N_TRAIN, N_FEATURES))
    kernel = gpytorch.kernels.ScaleKernel(gpytorch.kernels.MaternKernel(nu=2.5)).double()
    posterior = gx.ExactPosterior(X, X[:, 0], kernel, 0.1)
    query = X[:1] + 0.5
    rows = []
    for n_steps in (32, 64, 128):
        seconds = _seconds(posterior, query, rule="trapezoid", n_steps=n_steps)
        derivatives = (n_steps + 1) * (n_steps + 2) * N_FEATURES
        rows.append({"rule": "trapezoid", "n_steps": n_steps, "seconds_per_point": seconds,
                     "prior_second_derivatives": derivatives,
                     "microseconds_per_derivative": 1e6 * seconds / derivatives})
    graded = _seconds(posterior, query, n_steps=64)
    per_derivative = float(np.median([row["microseconds_per_derivative"] for row in rows]))
    payload = {
        "claim": "MAX_PRIOR_EVALUATIONS second derivatives cost about a minute per point",
        "max_prior_evaluations": MAX_PRIOR_EVALUATIONS,
        "seconds_at_the_budget": per_derivative * 1e-6 * MAX_PRIOR_EVALUATIONS,
        "trapezoid": rows,
        "graded_gauss_legendre_64_seconds_per_point": graded,
        "trapezoid_64_over_graded_64": rows[1]["seconds_per_point"] / graded,
        "machine": machine,
    }
    path = write_results("quadrature_cost", payload)
    for row in rows:
        print(f"trapezoid n_steps={row['n_steps']:4d}: {row['seconds_per_point']:.3f} s/point, "
              f"{row['microseconds_per_derivative']:.2f} us per derivative")
    print(f"graded Gauss-Legendre n_steps=64: {graded:.3f} s/point")
    print(f"at the budget ({MAX_PRIOR_EVALUATIONS:.0e}): "
          f"{payload['seconds_at_the_budget']:.0f} s per point; wrote {path}")


if __name__ == "__main__":
    main()
