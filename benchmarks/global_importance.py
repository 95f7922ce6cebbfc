"""Exact global importance (``gx.global_importance``, issue 25) against sampling the joint
posterior of the attributions, on wine red and concrete.

Model: ``_product_gp_data`` (scikit-learn ``ConstantKernel * RBF(ARD) + WhiteKernel``,
``normalize_y=True``, hyperparameters fitted on 200 seeded rows, conditioned on N_TRAIN rows),
explained through ``gx.from_sklearn``. Method: integrated gradients from the training mean
(``n_steps`` Gauss-Legendre nodes per path for the two-point prior term) at the first n rows
of a seeded permutation of the data set's distinct rows (the training rows among them; at most
all rows: 1359 for wine red, 1005 for concrete, so n = 2000 is capped there); summary
``mean_abs`` (the importance plot's), the hardest of the three (bivariate folded-normal
moments over every pair of points).

* **ours**: ``gx.global_importance(..., summary="mean_abs", max_joint=1)``: the exact posterior
  mean and standard deviation of every feature's mean |IG| over n explained points, from the
  covariance across points evaluated block by block (the pairwise probabilities need the
  dense joint and are left out here: ``max_joint=1``). ``seconds`` wall, ``peak_mib`` the
  tracemalloc peak (NumPy allocations included).
* **sampling**: what one does without the exact moments: the dense (n D)^2 joint covariance of
  the attributions (the same blocks), its eigendecomposition, and S = 5000 joint draws
  (``Attribution.sample``) summarised per draw; the std's Monte Carlo relative error is then
  about ``1 / sqrt(2 S)`` = 1% (measured: ``max_relative_std_gap`` against ours), so ours is
  more accurate at any S. Run where the dense matrix fits (n D <= 4500); above, the memory it
  would need is recorded instead.

Wall-clock times on a 2-core machine shared with other jobs are indicative. From the
repository root, ``GPEXPLAIN_DATA_DIR=../shared/data .venv/bin/python
benchmarks/global_importance.py`` writes ``benchmarks/results/global_importance.json``.
"""

from __future__ import annotations

import os

os.environ.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
                  OMP_WAIT_POLICY="PASSIVE")

import argparse  # noqa: E402
import time  # noqa: E402
import tracemalloc  # noqa: E402

import numpy as np  # noqa: E402
from _common import machine_info, write_results  # noqa: E402
from _product_gp_data import fit_sklearn_gp, load  # noqa: E402

N_TRAIN = 500
N_DRAWS = 5000
MAX_SAMPLED = 4500  # n D of the dense joint for the sampling competitor


def measured(function):
    """``(result, seconds, peak MiB)`` of one call."""
    tracemalloc.start()
    start = time.perf_counter()
    result = function()
    seconds = time.perf_counter() - start
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    return result, seconds, peak


def run_dataset(name: str, sizes: list[int], n_steps: int, seed: int = 0) -> dict:
    import gpexplain as gx

    X, y, names = load(name, 10**9, seed)  # every distinct row, in a seeded order
    posterior = gx.from_sklearn(fit_sklearn_gp(X[:N_TRAIN], y[:N_TRAIN], seed))
    rows = []
    for n in sorted({min(n, len(X)) for n in sizes}):
        points = X[:n]  # the data set's rows (the first N_TRAIN are the training rows)
        options = {"baseline": X[:N_TRAIN].mean(0), "n_steps": n_steps}
        ours, seconds, peak = measured(lambda points=points, options=options: (
            gx.global_importance(posterior, points, summary="mean_abs", max_joint=1,
                                 **options)))
        row = {"n_points": n, "n_features": len(names),
               "ours": {"seconds": seconds, "peak_mib": peak,
                        "importance": ours.mean.tolist(), "std": ours.std.tolist()}}
        size = n * len(names)
        if size <= MAX_SAMPLED:
            def sample(points=points, options=options):
                attr = gx.integrated_gradients(posterior, points, return_cov="points",
                                               **options)
                draws = attr.sample(N_DRAWS, random_state=seed)
                return np.abs(draws).mean(axis=1)
            summaries, seconds, peak = measured(sample)
            gap = np.abs(summaries.std(0, ddof=1) - ours.std) / ours.std
            mean_gap = np.abs(summaries.mean(0) - ours.mean) / ours.std
            row["sampling"] = {"seconds": seconds, "peak_mib": peak, "draws": N_DRAWS,
                               "max_relative_std_gap": float(gap.max()),
                               "max_mean_gap_in_stds": float(mean_gap.max())}
        else:
            row["sampling"] = {"skipped": f"dense joint of n D = {size}: "
                               f"{8 * size**2 / 2**30:.2f} GiB and an O((n D)^3) "
                               "eigendecomposition"}
        print(name, row["n_points"], {k: v for k, v in row["ours"].items()
                                      if k in ("seconds", "peak_mib")},
              {k: v for k, v in row["sampling"].items() if k != "draws"}, flush=True)
        rows.append(row)
    return {"features": names, "n_train": N_TRAIN, "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[200, 500, 1000, 2000])  # capped
    parser.add_argument("--datasets", nargs="+", default=["wine-red", "concrete"])
    parser.add_argument("--n-steps", type=int, default=32)
    parser.add_argument("--output", default="global_importance")
    arguments = parser.parse_args()
    payload = {"machine": machine_info(), "method": "integrated gradients, mean_abs",
               "n_steps": arguments.n_steps, "draws": N_DRAWS,
               "datasets": {name: run_dataset(name, arguments.sizes, arguments.n_steps)
                            for name in arguments.datasets}}
    print(write_results(arguments.output, payload))


if __name__ == "__main__":
    main()
