"""Inductive POE: convergence to the transductive optimum (Tadesse et al. 2025, Fig. 4, App. G).

Part 1 (Figure 4). Queries: a 20 x 20 grid on [-2, 2]^2 (M = 400). The transductive optimum
is the minimiser of the exact objective J_M that inductive POE minimises when its inducing
points are the queries themselves (module docstring of ``gpexplain.poe.inductive``; the tests
check that equality to 1e-10). Inductive solutions use N points drawn uniformly on the domain
(N = 25 ... 1600, 3 seeds) and are evaluated at the queries; the script reports the total loss
J_M of each against J_M's minimum (relative excess) and the relative L2 distance of the
explanations. Gaussian kernel, lengthscale 0.5, lF = 1, lR in {0.01, 0.1}.

Part 2 (Appendix G). D = 1, domain [-10, 10], lengthscale 1, lF = 1, lR = 0.01. Ground truth:
N = 1000 grid inducing points. 50 queries uniform on [-5, 5]. Global: N = 100 uniform points;
Local: 100 uniform points in [x - R, x + R]; Global + Local: the union (mixture densities as
importance weights). Reports the mean squared error against the ground truth, relative to the
ground truth's mean square, for R / lengthscale in {0.25, ..., 8}.

Run from the repository root::

    .venv/bin/python benchmarks/poe_inductive.py            # ~2 min; writes the JSON
    .venv/bin/python benchmarks/poe_inductive.py --quick    # smoke test, no JSON

Results: ``benchmarks/results/poe_inductive.json``.
"""

from __future__ import annotations

import os

os.environ.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
                  OMP_WAIT_POLICY="PASSIVE")

import argparse  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
from _common import machine_info, write_results  # noqa: E402
from _poe_common import FUNCTIONS, grid  # noqa: E402

import gpexplain as gx  # noqa: E402

FIGURE_4 = ("cubic", "exponential", "periodic", "quasi_periodic_exponentiated",
            "quasi_periodic_linear")
APPENDIX_G = ("cubic", "exponential", "periodic", "quasi_periodic_linear")


def convergence(f, args) -> dict:
    queries = grid(args.query_axis, 2, -2.0, 2.0)
    kernel, volume = gx.kernels.RBF(0.5), 16.0
    record = {}
    for robustness in (0.01, 0.1):
        lambdas = {"F_grad": 1.0, "R_avg": robustness}
        transductive = gx.poe.InductivePOE(kernel, lambdas, queries, domain_volume=volume).fit(f)
        optimum = transductive.inducing_explanations_
        best = transductive.objective(optimum)
        rows = []
        for n in args.sizes:
            excess, distance, seconds = [], [], []
            for seed in range(args.seeds):
                Z = np.random.default_rng(seed).uniform(-2, 2, size=(n, 2))
                start = time.perf_counter()
                model = gx.poe.InductivePOE(kernel, lambdas, Z, domain_volume=volume).fit(f)
                W = model.explain(queries).mean
                seconds.append(time.perf_counter() - start)
                excess.append((transductive.objective(W) - best) / abs(best))
                distance.append(np.linalg.norm(W - optimum) / np.linalg.norm(optimum))
            rows.append({"n_inducing": int(n), "relative_excess_loss": float(np.mean(excess)),
                         "relative_distance": float(np.mean(distance)),
                         "seconds": float(np.mean(seconds))})
        record[f"lambda_R_avg={robustness:g}"] = {"transductive_loss": float(best),
                                                  "inductive": rows}
    return record


def local_versus_global(f, args) -> dict:
    kernel, lengthscale = gx.kernels.RBF(1.0), 1.0
    lambdas = {"F_grad": 1.0, "R_avg": 0.01}
    bounds = np.array([[-10.0], [10.0]])
    truth_model = gx.poe.InductivePOE(kernel, lambdas, np.linspace(-10, 10, args.truth)[:, None],
                                      domain_volume=20.0).fit(f)
    queries = np.random.default_rng(1).uniform(-5, 5, size=(args.queries, 1))
    truth = truth_model.explain(queries).mean
    scale = float(np.mean(truth**2))
    global_points = np.random.default_rng(2).uniform(-10, 10, size=(100, 1))
    global_error = float(np.mean((gx.poe.InductivePOE(
        kernel, lambdas, global_points, domain_volume=20.0).fit(f).explain(queries).mean
        - truth) ** 2) / scale)
    rows = []
    for ratio in args.ratios:
        radius = ratio * lengthscale
        errors = {}
        for name, extra in (("local", None), ("global_plus_local", global_points)):
            spec = gx.poe.local_inducing_points(100, radius, bounds, global_points=extra, seed=3)
            W = gx.poe.InductivePOE(kernel, lambdas, spec).fit(f).explain(queries).mean
            errors[name] = float(np.mean((W - truth) ** 2) / scale)
        rows.append({"radius_over_lengthscale": float(ratio), **errors})
    return {"global": global_error, "by_radius": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke test, no JSON")
    args = parser.parse_args()
    torch.set_num_threads(1)
    args.query_axis, args.sizes, args.seeds = 20, (25, 50, 100, 200, 400, 800, 1600), 3
    args.truth, args.queries, args.ratios = 1000, 50, (0.25, 0.5, 1.0, 2.0, 4.0, 8.0)
    if args.quick:
        args.query_axis, args.sizes, args.seeds = 6, (25, 100), 1
        args.truth, args.queries, args.ratios = 200, 5, (1.0, 4.0)
    info = machine_info(torch_threads_requested=1)
    started = time.perf_counter()
    results = {"figure_4": {}, "appendix_g": {}}
    for name in FIGURE_4:
        print("figure 4:", name, flush=True)
        results["figure_4"][name] = convergence(FUNCTIONS[name], args)
        for key, part in results["figure_4"][name].items():
            print("  ", key, [(r["n_inducing"], round(r["relative_excess_loss"], 5))
                              for r in part["inductive"]])
    for name in APPENDIX_G:
        print("appendix G:", name, flush=True)
        results["appendix_g"][name] = local_versus_global(FUNCTIONS[name], args)
        print("   global", results["appendix_g"][name]["global"],
              results["appendix_g"][name]["by_radius"])
    payload = {"benchmark": "poe_inductive",
               "settings": {"figure_4_queries": f"{args.query_axis}^2 grid on [-2, 2]^2",
                            "figure_4_lengthscale": 0.5, "sizes": list(args.sizes),
                            "seeds": args.seeds, "appendix_g_truth_points": args.truth,
                            "appendix_g_queries": args.queries},
               "results": results, "seconds": time.perf_counter() - started, "machine": info}
    if not args.quick:
        print("wrote", write_results("poe_inductive", payload))


if __name__ == "__main__":
    main()
