"""POE against SmoothGrad, LIME (both), AGG and MOFAE: Tadesse et al. (2025) Figs. 2-3 in numbers.

For each synthetic function of Sec. 6.1 on a D = 3 grid (10 points per axis on [-5, 5], N =
1000; the paper uses 100 per axis) this script computes the faithfulness (F_grad) and
robustness (R_avg, uniform similarity S = 1 as in the paper) losses of

* POE over a lambda sweep (lF + lR = 1),
* SmoothGrad (50 samples), LIME with intercept and LIME as printed (no intercept; 200
  samples) over a delta sweep,
* AGG (3 SmoothGrad + 3 LIME bases, as in the paper) over the same lambda sweep,
* MOFAE (NSGA-II seeded with the AGG bases + 100 SmoothGrad explanations),

and for each baseline the fraction of its points that POE dominates, and the median of
F_grad(baseline) / F_grad(POE at the same R_avg) - 1 (how much less faithful it is at equal
robustness). In the F_grad-R_avg plane
POE's front is computed exactly: a baseline point (F, R) is dominated iff the POE solution
with R_avg = R (found by bisection on lR/lF) has F_grad < F. Figure 3 (F_grad, R_max, C) runs
on a 4-per-axis grid (N = 64, R_max is a QCQP with up to N^2 cones); there a point counts as
dominated when one of the sampled POE solutions is no worse in all three losses and better in
one (a lower bound on the true fraction). Appendix C.3 (D = 10, 100 points uniform on
[-5, 5]^10) and a real model (a GP fitted to standardised red-wine data, 200 explained rows)
use the exact F_grad-R_avg test.

Run from the repository root::

    .venv/bin/python benchmarks/poe_fronts.py            # ~10 min on 2 cores; writes the JSON
    .venv/bin/python benchmarks/poe_fronts.py --quick    # smoke test, no JSON

Results: ``benchmarks/results/poe_fronts.json``.
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
from _poe_common import (  # noqa: E402
    FUNCTIONS,
    agg_bases,
    baseline_points,
    grid,
    grid_dominated,
    poe_losses,
    quadratic_front,
)

import gpexplain as gx  # noqa: E402

FIGURE_2 = ("cubic", "exponential", "periodic", "cubic_interactions",
            "quasi_periodic_exponentiated", "quasi_periodic_quadratic")
FIGURE_3 = ("cubic", "quasi_periodic_linear", "quasi_periodic_linear_exponentiated")
APPENDIX_C3 = ("quadratic", "periodic", "quasi_periodic_quadratic", "quasi_periodic_linear")
DELTAS = (0.01, 0.03, 0.1, 0.3, 1.0, 2.0, 3.0)


def mixes(ratios):
    """lF + lR = 1 with lR / lF = ratio."""
    return [(1.0 / (1.0 + r), r / (1.0 + r)) for r in ratios]


def mofae_seeds(f, X, bases, count, seed):
    rng = np.random.default_rng(seed)
    deltas = rng.uniform(DELTAS[0], DELTAS[-1], size=count)
    return bases + [gx.poe.smoothgrad(f, X, d, 10, seed=seed + 100 + i).mean
                    for i, d in enumerate(deltas)]


def faithfulness_robustness(f, X, ratios, args, S=None, with_mofae=True) -> dict:
    """Figure 2 (and C.3, wine): F_grad vs R_avg for POE and every baseline."""
    G, values = gx.poe.gradients_and_values(f, X)
    record = {"n_points": int(X.shape[0]), "n_features": int(X.shape[1]), "poe": [],
              "baselines": {}, "dominated_fraction": {}}
    start = time.perf_counter()
    for lF, lR in mixes(ratios):
        result = gx.poe.transductive(X, G, S=S, lambdas={"F_grad": lF, "R_avg": lR})
        record["poe"].append({"lambda_F_grad": lF, "lambda_R_avg": lR,
                              "F_grad": result.losses["F_grad"],
                              "R_avg": result.losses["R_avg"]})
    record["poe_seconds"] = time.perf_counter() - start
    explanations = baseline_points(f, X, G, values, DELTAS, seed=args.seed)
    for method, sweep in explanations.items():
        record["baselines"][method] = [
            dict(zip(("delta", "F_grad", "R_avg"), [d, *poe_losses(W, X, G, values)],
                     strict=True)) for d, W in sweep]
    bases = agg_bases(explanations)
    record["baselines"]["agg"] = []
    for lF, lR in mixes(ratios[:: max(1, len(ratios) // 8)]):
        result = gx.poe.agg(bases, X, G, values, S=S, lambdas={"F_grad": lF, "R_avg": lR})
        record["baselines"]["agg"].append({"lambda_F_grad": lF, "lambda_R_avg": lR,
                                           "F_grad": result.losses["F_grad"],
                                           "R_avg": result.losses["R_avg"],
                                           "alpha": result.certificate["alpha"]})
    if with_mofae:
        seeds = mofae_seeds(f, X, bases, args.mofae_seeds, args.seed)
        front = gx.poe.mofae(seeds, X, G, values, S=S, population_size=len(seeds),
                             generations=args.generations, seed=args.seed)
        record["baselines"]["mofae"] = [{"F_grad": float(a), "R_avg": float(b)}
                                        for a, b in front.losses]
    record["faithfulness_excess_median"] = {}
    for method, points in record["baselines"].items():
        checks = [quadratic_front(X, G, (p["F_grad"], p["R_avg"]), S=S) for p in points]
        for p, (dominated, f_front) in zip(points, checks, strict=True):
            p["dominated_by_poe"], p["poe_F_grad_at_same_R_avg"] = dominated, f_front
        record["dominated_fraction"][method] = float(np.mean([c[0] for c in checks]))
        # how much less faithful than POE at equal robustness: F_baseline / F_POE - 1
        excess = [p["F_grad"] / c[1] - 1 for p, c in zip(points, checks, strict=True) if c[1] > 0]
        record["faithfulness_excess_median"][method] = (float(np.median(excess)) if excess
                                                        else None)
    return record


def faithfulness_robustness_complexity(f, X, args) -> dict:
    """Figure 3: F_grad, R_max and C."""
    G, values = gx.poe.gradients_and_values(f, X)
    names = ("F_grad", "R_max", "C")
    scale = float(np.max(np.abs(G)))
    record = {"n_points": int(X.shape[0]), "poe": [], "baselines": {}, "dominated_fraction": {}}
    for l_c in (0.0, 0.1 * scale, 0.3 * scale, 1.0 * scale):
        for ratio in args.rmax_ratios:
            lambdas = {"F_grad": 1.0, "R_max": ratio, "C": l_c}
            result = gx.poe.transductive(X, G, values, lambdas=lambdas)
            record["poe"].append({"lambdas": lambdas,
                                  **{name: result.losses[name] for name in names}})
    front = np.array([[p[name] for name in names] for p in record["poe"]])
    explanations = baseline_points(f, X, G, values, DELTAS, seed=args.seed)
    for method, sweep in explanations.items():
        record["baselines"][method] = [
            dict(zip(("delta", *names), [d, *poe_losses(W, X, G, values, names)], strict=True))
            for d, W in sweep]
    bases = agg_bases(explanations)
    record["baselines"]["agg"] = []
    for l_c in (0.0, 1.0 * scale):
        for ratio in args.rmax_ratios[::2]:
            lambdas = {"F_grad": 1.0, "R_max": ratio, "C": l_c}
            result = gx.poe.agg(bases, X, G, values, lambdas=lambdas)
            record["baselines"]["agg"].append(
                {"lambdas": lambdas, **{name: result.losses[name] for name in names}})
    seeds = mofae_seeds(f, X, bases, args.mofae_seeds, args.seed)
    mofae = gx.poe.mofae(seeds, X, G, values, objectives=names, population_size=len(seeds),
                         generations=args.generations, seed=args.seed)
    record["baselines"]["mofae"] = [dict(zip(names, map(float, row), strict=True))
                                    for row in mofae.losses]
    for method, points in record["baselines"].items():
        record["dominated_fraction"][method] = float(np.mean(
            [grid_dominated(front, [p[name] for name in names]) for p in points]))
    return record


def wine(args) -> dict:
    X, y = gx.datasets.load_dataset("wine-quality-red")
    rng = np.random.default_rng(args.seed)
    rows = rng.choice(len(X), size=args.wine_rows, replace=False)
    Xs = X.to_numpy(float)
    Xs = (Xs - Xs.mean(axis=0)) / Xs.std(axis=0)
    X_fit, y_fit = Xs[rows], y.to_numpy(float)[rows]
    start = time.perf_counter()
    model = gx.GPRegressor(n_restarts=0).fit(X_fit, y_fit)
    fit_seconds = time.perf_counter() - start
    explained = X_fit[: args.wine_explained]
    record = faithfulness_robustness(model, explained, args.ratios_wine, args,
                                     with_mofae=not args.quick)
    record.update({"fit_rows": int(args.wine_rows), "fit_seconds": fit_seconds,
                   "features": list(X.columns), "standardised": True,
                   "lengthscales": np.asarray(model.posterior_.kernel.lengthscale).tolist()
                   if hasattr(model.posterior_, "kernel") else None})
    return record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke test, no JSON")
    parser.add_argument("--per-axis", type=int, default=10)
    parser.add_argument("--per-axis-rmax", type=int, default=4)
    parser.add_argument("--generations", type=int, default=100)
    parser.add_argument("--mofae-seeds", type=int, default=100)
    parser.add_argument("--wine-rows", type=int, default=400)
    parser.add_argument("--wine-explained", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.quick:
        args.per_axis, args.per_axis_rmax, args.generations, args.mofae_seeds = 4, 3, 5, 10
        args.wine_rows, args.wine_explained = 100, 30
    args.ratios = [0.0, *np.logspace(-7, 0, 22)]
    args.ratios_wine = [0.0, *np.logspace(-6, 1, 15)]
    args.rmax_ratios = [0.0, 1e-4, 1e-3, 1e-2, 1e-1, 1.0]
    info = machine_info(torch_threads_requested=1)
    started = time.perf_counter()
    results = {"figure_2": {}, "figure_3": {}, "appendix_c3": {}}
    X3 = grid(args.per_axis, 3, -5.0, 5.0)
    for name in FIGURE_2:
        print(f"figure 2: {name}", flush=True)
        results["figure_2"][name] = faithfulness_robustness(FUNCTIONS[name], X3, args.ratios,
                                                            args)
    X_small = grid(args.per_axis_rmax, 3, -5.0, 5.0)
    for name in FIGURE_3:
        print(f"figure 3: {name}", flush=True)
        results["figure_3"][name] = faithfulness_robustness_complexity(FUNCTIONS[name], X_small,
                                                                       args)
    X10 = np.random.default_rng(args.seed).uniform(-5, 5, size=(100, 10))
    for name in APPENDIX_C3:
        print(f"appendix C.3: {name}", flush=True)
        results["appendix_c3"][name] = faithfulness_robustness(FUNCTIONS[name], X10,
                                                               args.ratios, args)
    print("wine", flush=True)
    results["wine_gp"] = wine(args)
    summary = {section: {name: record["dominated_fraction"] for name, record in part.items()}
               for section, part in results.items() if section != "wine_gp"}
    summary["wine_gp"] = results["wine_gp"]["dominated_fraction"]
    excess = {section: {name: record["faithfulness_excess_median"]
                        for name, record in part.items()}
              for section, part in results.items() if section in ("figure_2", "appendix_c3")}
    excess["wine_gp"] = results["wine_gp"]["faithfulness_excess_median"]
    for section, part in summary.items():
        print(section, part)
    payload = {
        "benchmark": "poe_fronts",
        "settings": {"grid_figure_2": f"{args.per_axis}^3 on [-5, 5]",
                     "grid_figure_3": f"{args.per_axis_rmax}^3 on [-5, 5]",
                     "appendix_c3": "100 points uniform on [-5, 5]^10",
                     "similarity": "uniform S = 1 (the paper's choice)",
                     "deltas": DELTAS, "mofae_generations": args.generations,
                     "mofae_seed_explanations": args.mofae_seeds, "seed": args.seed},
        "dominated_fraction": summary,
        "faithfulness_excess_median": excess,
        "results": results,
        "seconds": time.perf_counter() - started,
        "machine": info,
    }
    if not args.quick:
        print("wrote", write_results("poe_fronts", payload))


if __name__ == "__main__":
    main()
