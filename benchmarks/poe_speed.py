"""Time per lambda of transductive POE against cvxpy and the baselines (Tadesse et al. App. E).

Cubic function of Sec. 6.1, uniform similarity. For each case this script times our solver
and cvxpy (Clarabel) solving the same program written directly (every property as cvxpy
expressions; for R_max all N (N - 1) / 2 pair cones), checks that both reach the same objective
(relative difference recorded; <= 1e-8 required for the ratio to count) and reports the time
ratio cvxpy / POE:

* quadratic (F_grad + R_avg + S): 10^3 grid on [-5, 5] (N = 1000, D = 3);
* L1 (F_grad + R_avg + C): same grid;
* R_max (F_grad + R_max + C): 5^3 grid (N = 125).

It also times the baselines per hyperparameter value on the N = 1000 grid: SmoothGrad (50
samples), LIME with and without intercept (200 samples), AGG (one lambda mix, 6 bases) and
MOFAE (one run: 106 seeds, 100 generations), as ratios to POE's quadratic time per lambda.
Times are the minimum of ``--repeats`` runs (one run for MOFAE).

Run from the repository root::

    .venv/bin/python benchmarks/poe_speed.py            # ~3 min; writes the JSON
    .venv/bin/python benchmarks/poe_speed.py --quick    # smoke test, no JSON

Results: ``benchmarks/results/poe_speed.json``.
"""

from __future__ import annotations

import os

os.environ.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
                  OMP_WAIT_POLICY="PASSIVE")

import argparse  # noqa: E402
import time  # noqa: E402

import cvxpy as cp  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from _common import machine_info, write_results  # noqa: E402
from _poe_common import FUNCTIONS, agg_bases, baseline_points, grid  # noqa: E402

import gpexplain as gx  # noqa: E402

CASES = {
    "quadratic": {"F_grad": 1.0, "R_avg": 1e-4, "S": 0.1},
    "l1": {"F_grad": 1.0, "R_avg": 1e-4, "C": 5.0},
    "r_max": {"F_grad": 1.0, "R_max": 1e-2, "C": 5.0},
}


def timed(function, repeats):
    best, value = np.inf, None
    for _ in range(repeats):
        start = time.perf_counter()
        value = function()
        best = min(best, time.perf_counter() - start)
    return best, value


def cvxpy_direct(X, G, lambdas, tolerance):
    """The same program, written directly in cvxpy (every pair cone), on gradients divided by
    max |G| as docs/errata.md prescribes (without it Clarabel stops at optimal_inaccurate)."""
    scale = float(np.max(np.abs(G)))
    G = G / scale
    lambdas = {**lambdas, "C": lambdas.get("C", 0.0) / scale}
    n, d = X.shape
    W = cp.Variable((n, d))
    terms = [lambdas["F_grad"] * cp.sum_squares(W - G)]
    if lambdas.get("R_avg"):  # uniform S: sum over ordered pairs = 2 n |W - mean|^2
        mean = cp.reshape(cp.sum(W, axis=0) / n, (1, d), order="C")
        terms.append(lambdas["R_avg"] * 2 * n * cp.sum_squares(W - np.ones((n, 1)) @ mean))
    if lambdas.get("S"):  # uniform S~
        mean = cp.reshape(cp.sum(W, axis=1) / d, (n, 1), order="C")
        terms.append(lambdas["S"] * 2 * d * cp.sum_squares(W - mean @ np.ones((1, d))))
    if lambdas.get("C"):
        terms.append(lambdas["C"] * cp.norm1(W))
    constraints = []
    if lambdas.get("R_max"):
        delta = cp.Variable(n)
        first, second = np.triu_indices(n, k=1)
        pair = cp.sum(cp.square(W[first, :] - W[second, :]), axis=1)
        constraints = [pair <= delta[first], pair <= delta[second]]
        terms.append(lambdas["R_max"] * cp.sum(delta))
    program = cp.Problem(cp.Minimize(cp.sum(terms)), constraints)
    program.solve(solver=cp.CLARABEL, tol_gap_abs=tolerance, tol_gap_rel=tolerance,
                  tol_feas=tolerance)
    return program.status, None if W.value is None else scale * np.asarray(W.value)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke test, no JSON")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    per_axis, per_axis_rmax, generations, seeds = (10, 5, 100, 100)
    if args.quick:
        per_axis, per_axis_rmax, generations, seeds, args.repeats = 5, 3, 5, 10, 1
    info = machine_info(torch_threads_requested=1)
    f = FUNCTIONS["cubic"]
    results = {"solvers": {}, "baselines": {}}
    for case, lambdas in CASES.items():
        X = grid(per_axis_rmax if case == "r_max" else per_axis, 3, -5.0, 5.0)
        G, _ = gx.poe.gradients_and_values(f, X)
        ours_time, ours = timed(lambda X=X, G=G, lambdas=lambdas: gx.poe.transductive(
            X, G, lambdas=lambdas), args.repeats)
        row = {"n_points": int(X.shape[0]), "lambdas": lambdas, "poe_seconds": ours_time,
               "poe_objective": ours.objective, "poe_method": ours.certificate["method"]}
        for tolerance in (1e-8, 1e-10):  # cvxpy's default, then tighter if it is not enough
            cvx_time, (status, W) = timed(lambda X=X, G=G, lambdas=lambdas, t=tolerance:
                                          cvxpy_direct(X, G, lambdas, t), 1)
            value = (gx.poe.objective(gx.poe.losses(W, X, G), lambdas) if W is not None
                     else None)
            difference = (None if value is None
                          else (value - ours.objective) / abs(ours.objective))
            row[f"cvxpy_tol_{tolerance:g}"] = {"seconds": cvx_time, "status": status,
                                               "objective": value,
                                               "relative_objective_difference": difference}
            if status == cp.OPTIMAL and difference is not None and abs(difference) <= 1e-8:
                row["cvxpy_over_poe_time"] = cvx_time / ours_time
                row["equal_objective_at"] = tolerance
                break
        else:
            row["cvxpy_over_poe_time"] = None
            row["note"] = "cvxpy did not reach POE's objective to 1e-8 relative"
        results["solvers"][case] = row
        print(case, {k: v for k, v in row.items() if not isinstance(v, dict)}, flush=True)

    X = grid(per_axis, 3, -5.0, 5.0)
    G, values = gx.poe.gradients_and_values(f, X)
    quadratic_time = results["solvers"]["quadratic"]["poe_seconds"]
    poe_time, _ = timed(lambda: gx.poe.transductive(X, G, lambdas={"F_grad": 0.5,
                                                                    "R_avg": 1e-4}), args.repeats)
    baseline_times = {
        "smoothgrad": timed(lambda: gx.poe.smoothgrad(f, X, 0.3, 50), args.repeats)[0],
        "lime": timed(lambda: gx.poe.lime(f, X, 0.3, 200), args.repeats)[0],
        "lime_no_intercept": timed(lambda: gx.poe.lime_no_intercept(f, X, 0.3, 200),
                                   args.repeats)[0],
    }
    explanations = baseline_points(f, X, G, values, (0.01, 0.3, 3.0))
    bases = agg_bases(explanations)
    baseline_times["agg"] = timed(lambda: gx.poe.agg(bases, X, G, values, lambdas={
        "F_grad": 0.5, "R_avg": 1e-4}), args.repeats)[0]
    mofae_seeds = bases + [gx.poe.smoothgrad(f, X, d, 10, seed=i).mean
                           for i, d in enumerate(np.random.default_rng(0).uniform(0.01, 3,
                                                                                   seeds))]
    baseline_times["mofae"] = timed(lambda: gx.poe.mofae(
        mofae_seeds, X, G, values, population_size=len(mofae_seeds),
        generations=generations), 1)[0]
    results["baselines"] = {
        "poe_seconds_per_lambda (F_grad + R_avg)": poe_time,
        "poe_seconds_per_lambda (quadratic case above)": quadratic_time,
        **{f"{name}_seconds_per_hyperparameter": t for name, t in baseline_times.items()},
        **{f"{name}_over_poe": t / poe_time for name, t in baseline_times.items()},
    }
    print(results["baselines"])
    payload = {"benchmark": "poe_speed",
               "settings": {"grid": f"{per_axis}^3 (R_max: {per_axis_rmax}^3) on [-5, 5]",
                            "function": "cubic", "similarity": "uniform",
                            "repeats": args.repeats, "mofae_generations": generations},
               "results": results, "machine": info}
    if not args.quick:
        print("wrote", write_results("poe_speed", payload))


if __name__ == "__main__":
    main()
