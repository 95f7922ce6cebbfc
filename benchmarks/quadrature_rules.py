"""Quadrature rules for integrated gradients of GPs: Butler et al., Appendix C.1, in numbers.

The paper (App. C.1, Fig. 7) approximates the IG path integral with the right-hand rule
(eq. 36), the trapezoid rule and Simpson's rule, and compares them per number of function
evaluations on wine-quality-red (attribution to alcohol). Here each rule's attribution GP -
mean and covariance, built with the same rule on both sides of the prior double sum, as the
paper's Riemann-sum construction does - is compared with gpexplain's closed form, together
with Gauss-Legendre and gpexplain's own quadrature (``method="quadrature"``: Gauss-Legendre
cross term, single-integral prior). Data: wine-quality-red and the synthetic
sin(x1) sin(2 x2) function (eq. 34), loaded and fitted exactly as in
``benchmarks/ig_exact_vs_numerical.py`` (imported, not copied).

A second part shows why the graded rule exists: on the synthetic data with a Matern 5/2
kernel (no closed form), gpexplain's graded Gauss-Legendre quadrature against the previous
construction (plain Gauss-Legendre cross term, staggered double-sum prior), by completeness
gap and distance from the graded rule at 512 nodes.

Run from the repository root::

    .venv/bin/python benchmarks/quadrature_rules.py            # ~3 min on one core
    .venv/bin/python benchmarks/quadrature_rules.py --quick    # smoke test, no JSON

Results: ``benchmarks/results/quadrature_rules.json``.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # before torch: see ig_exact_vs_numerical

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import machine_info, write_results  # noqa: E402
from ig_exact_vs_numerical import fit, load_wine, make_synthetic  # noqa: E402

from gpexplain.explain._driver import gaussian_moments  # noqa: E402
from gpexplain.explain.integrated_gradients import integrated_gradients  # noqa: E402
from gpexplain.functionals.quadrature import (  # noqa: E402
    QUADRATURE_RULES,
    integrated_gradient_functionals,
    quadrature_rule,
)
from gpexplain.models.gp_regressor import GPRegressor  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
OUTPUT = REPO / "benchmarks" / "results" / "quadrature_rules.json"
EVALUATIONS = (4, 8, 16, 32, 64, 128, 256)
FOCUS = {"wine-quality-red": "alcohol", "synthetic-sin": "x1"}
MATERN_STEPS = (8, 16, 32, 64, 128)
MATERN_REFERENCE_STEPS = 512


def rule_for_evaluations(rule: str, evaluations: int) -> int:
    """n_steps of ``rule`` with about ``evaluations`` path nodes (never more)."""
    if rule == "trapezoid":
        return evaluations - 1  # n intervals: n + 1 nodes
    if rule == "simpson":
        return max(1, (evaluations - 1) // 2)  # n intervals with midpoints: 2 n + 1 nodes
    return evaluations


def riemann_attribution(posterior, X, baseline, nodes, weights):
    """The paper's construction for the ARD-SE kernel, written out in NumPy.

    ``cross_in = d_i sum_k w_k d_i k(g_k, z_n)`` and ``prior_ij = d_i d_j sum_kl w_k w_l
    d^2 k(g_k, g_l) / dx_i dx'_j`` with ``g_k = xt + t_k d``: the same rule on both sides of
    the double sum (at t_k = t_l the SE kernel is smooth, so this is well defined).
    """
    kernel = posterior.kernel
    inv_l2 = 1.0 / np.broadcast_to(kernel.lengthscale, (X.shape[1],)) ** 2  # 0 for np.inf
    Z, s2 = posterior.train_inputs, kernel.variance
    cross = np.empty((X.shape[0], X.shape[1], Z.shape[0]))
    prior = np.empty((X.shape[0], X.shape[1], X.shape[1]))
    for p, x in enumerate(X):
        d = x - baseline
        path = baseline + nodes[:, None] * d  # (K, D)
        diff = path[:, None, :] - Z[None, :, :]  # (K, n, D)
        values = s2 * np.exp(-0.5 * np.einsum("knd,d,knd->kn", diff, inv_l2, diff))
        gradient = -values[..., None] * diff * inv_l2  # d k / d x_i at the path points
        cross[p] = d[:, None] * np.einsum("k,kni->in", weights, gradient)
        lag = (nodes[:, None] - nodes[None, :])[..., None] * d  # (K, K, D): g_k - g_l
        scaled = lag * inv_l2
        values = s2 * np.exp(-0.5 * np.einsum("kld,kld->kl", lag, scaled))
        ww = weights[:, None] * weights[None, :] * values
        # d^2 k(x, x') / dx_i dx'_j = k [delta_ij / l_i^2 - (x-x')_i (x-x')_j / (l_i^2 l_j^2)]
        hessian = np.diag(inv_l2) * ww.sum() - np.einsum("kl,kli,klj->ij", ww, scaled, scaled)
        prior[p] = d[:, None] * d[None, :] * hessian
    return gaussian_moments(posterior, cross, prior)


def errors(mean, cov, exact_mean, exact_cov, focus: int) -> dict:
    variance = np.einsum("pii->pi", cov)
    exact_variance = np.einsum("pii->pi", exact_cov)
    return {
        "focus_mean_max_abs_error": float(np.max(np.abs(mean[:, focus] - exact_mean[:, focus]))),
        "focus_mean_mse": float(np.mean((mean[:, focus] - exact_mean[:, focus]) ** 2)),
        "focus_variance_max_abs_error": float(
            np.max(np.abs(variance[:, focus] - exact_variance[:, focus]))
        ),
        "mean_max_abs_error": float(np.max(np.abs(mean - exact_mean))),
        "cov_max_abs_error": float(np.max(np.abs(cov - exact_cov))),
    }


def rules_benchmark(name, X, y, baseline, baseline_note, args) -> dict:
    model, fit_record = fit(X, y, args.n_restarts)
    posterior = model.posterior_
    rows = np.sort(np.random.default_rng(args.seed).choice(len(X), args.n_explained, False))
    Xe = X.to_numpy(dtype=np.float64)[rows]
    focus = list(X.columns).index(FOCUS[name])
    exact = integrated_gradients(posterior, Xe, baseline, method="closed-form")
    results = []
    for evaluations in args.evaluations:
        for rule in QUADRATURE_RULES:
            n_steps = rule_for_evaluations(rule, evaluations)
            nodes, weights = quadrature_rule(rule, n_steps)
            start = time.perf_counter()
            mean, cov = riemann_attribution(posterior, Xe, baseline, nodes, weights)
            results.append({
                "construction": "paper (same rule on both sides of the prior double sum)",
                "rule": rule, "n_steps": n_steps, "evaluations": len(nodes),
                "seconds": time.perf_counter() - start,
                **errors(mean, cov, exact.mean, exact.cov, focus),
            })
        start = time.perf_counter()
        own = integrated_gradients(posterior, Xe, baseline, method="quadrature",
                                   n_steps=evaluations)
        results.append({
            "construction": "gpexplain method='quadrature' (Gauss-Legendre cross term, "
                            "single-integral prior)",
            "rule": "gpexplain-quadrature", "n_steps": evaluations, "evaluations": evaluations,
            "seconds": time.perf_counter() - start,
            **errors(own.mean, own.cov, exact.mean, exact.cov, focus),
        })
    return {
        "n_train": int(len(X)), "n_features": int(X.shape[1]), "focus_feature": FOCUS[name],
        "explained_rows": rows.tolist(), "baseline": baseline.tolist(),
        "baseline_definition": baseline_note, "fit": fit_record,
        "kernel": repr(posterior.kernel), "noise": posterior.noise,
        "exact_focus_mean_abs_max": float(np.max(np.abs(exact.mean[:, focus]))),
        "exact_focus_variance_max": float(np.max(exact.var[:, focus])),
        "results": results,
    }


def matern_benchmark(args) -> dict:
    X, y, baseline, baseline_note = make_synthetic(args.seed)
    start = time.perf_counter()
    model = GPRegressor(kernel="matern52", n_restarts=args.n_restarts, random_state=0).fit(X, y)
    fit_seconds = time.perf_counter() - start
    posterior = model.posterior_
    rows = np.sort(np.random.default_rng(args.seed).choice(len(X), args.n_explained, False))
    Xe = X.to_numpy(dtype=np.float64)[rows]
    reference = integrated_gradients(posterior, Xe, baseline, n_steps=MATERN_REFERENCE_STEPS)
    torch_kernel = posterior.kernel.torch_kernel(Xe.shape[1])
    results = []
    for n_steps in args.matern_steps:
        for construction in ("graded", "staggered"):
            start = time.perf_counter()
            if construction == "graded":
                attr = integrated_gradients(posterior, Xe, baseline, n_steps=n_steps)
                mean, cov, gaps = attr.mean, attr.cov, attr.completeness_gap()
            else:
                nodes, weights = quadrature_rule("gauss-legendre", n_steps)
                cross, prior = integrated_gradient_functionals(
                    torch_kernel, Xe, baseline, posterior.train_inputs, nodes, weights
                )
                mean, cov = gaussian_moments(posterior, cross, prior)
                gaps = {
                    "mean": float(np.max(np.abs(mean.sum(1) - (reference.prediction
                                                               - reference.baseline_prediction)))),
                    "variance": float(np.max(np.abs(cov.sum((1, 2))
                                                    - reference.difference_variance))),
                }
            results.append({
                "construction": construction, "n_steps": n_steps,
                "seconds": time.perf_counter() - start,
                "completeness_gap_mean": gaps["mean"],
                "completeness_gap_variance": gaps["variance"],
                "mean_max_abs_diff_vs_reference": float(np.max(np.abs(mean - reference.mean))),
                "cov_max_abs_diff_vs_reference": float(np.max(np.abs(cov - reference.cov))),
            })
    return {
        "data": "synthetic-sin", "model": "GPRegressor(kernel='matern52')",
        "kernel": repr(posterior.kernel.module), "fit_seconds": fit_seconds,
        "baseline": baseline.tolist(), "baseline_definition": baseline_note,
        "explained_rows": rows.tolist(),
        "reference": f"graded Gauss-Legendre, n_steps={MATERN_REFERENCE_STEPS}; its own "
                     f"completeness gap: {reference.completeness_gap()}",
        "results": results,
    }


def print_tables(datasets: dict, matern: dict) -> None:
    for name, data in datasets.items():
        print(f"\n{name}: n_train={data['n_train']}, explained {len(data['explained_rows'])}, "
              f"focus {data['focus_feature']} (max |exact mean| "
              f"{data['exact_focus_mean_abs_max']:.3g}, max exact var "
              f"{data['exact_focus_variance_max']:.3g})")
        header = (f"{'rule':<21} {'evals':>5} {'focus mean':>10} {'focus var':>10} "
                  f"{'mean (all)':>10} {'cov (all)':>10}")
        print(header + "\n" + "-" * len(header))
        for r in data["results"]:
            print(f"{r['rule']:<21} {r['evaluations']:>5} {r['focus_mean_max_abs_error']:10.1e} "
                  f"{r['focus_variance_max_abs_error']:10.1e} {r['mean_max_abs_error']:10.1e} "
                  f"{r['cov_max_abs_error']:10.1e}")
    print("\nMatern 5/2 (GPRegressor(kernel='matern52')) on synthetic-sin: graded vs staggered")
    header = (f"{'construction':<10} {'n':>4} {'gap mean':>9} {'gap var':>9} {'d mean':>9} "
              f"{'d cov':>9}")
    print(header + "\n" + "-" * len(header))
    for r in matern["results"]:
        print(f"{r['construction']:<10} {r['n_steps']:>4} {r['completeness_gap_mean']:9.1e} "
              f"{r['completeness_gap_variance']:9.1e} {r['mean_max_abs_diff_vs_reference']:9.1e} "
              f"{r['cov_max_abs_diff_vs_reference']:9.1e}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smoke test: 4 rows, no JSON")
    parser.add_argument("--n-explained", type=int, default=None, help="rows explained (20)")
    parser.add_argument("--n-restarts", type=int, default=1, help="GPRegressor n_restarts (1)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (1)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", type=Path, default=None, help=f"JSON path ({OUTPUT})")
    args = parser.parse_args(argv)
    args.n_explained = args.n_explained or (4 if args.quick else 20)
    args.evaluations = (4, 16, 64) if args.quick else EVALUATIONS
    args.matern_steps = (8, 64) if args.quick else MATERN_STEPS
    output = args.output if args.output is not None else (None if args.quick else OUTPUT)
    torch.set_num_threads(args.threads)
    start = time.perf_counter()
    machine = machine_info(torch_threads_requested=args.threads)
    datasets = {}
    for name, loader in (("wine-quality-red", load_wine),
                         ("synthetic-sin", lambda: make_synthetic(args.seed))):
        datasets[name] = rules_benchmark(name, *loader(), args)
    matern = matern_benchmark(args)
    machine["total_seconds"] = time.perf_counter() - start
    print_tables(datasets, matern)
    print(f"\ntotal {machine['total_seconds']:.1f} s")
    notes = [
        "Errors are maxima over explained rows (and features, for 'all') of |rule - closed "
        "form|; focus_mean_mse is the paper's Fig. 7c quantity. The closed form is "
        "gx.integrated_gradients(method='closed-form') on the same posterior.",
        "evaluations: path nodes per explained point (right and Gauss-Legendre n, trapezoid "
        "n + 1, Simpson 2 n + 1 with n = (evaluations - 1) // 2). Simpson uses weights "
        "h/6 (1, 4, 1); the paper prints 1/4 (1, 2, 1), the trapezoid rule on the refined grid.",
        "The paper's construction applies the rule on both sides of the prior double sum "
        "(evaluations^2 kernel Hessians per point); gpexplain's quadrature computes the "
        "prior of a stationary kernel as one integral along the path.",
        f"Reductions: {args.n_explained} explained rows per data set, GPRegressor n_restarts="
        f"{args.n_restarts}, one torch thread.",
    ]
    if output is not None:
        payload = {"machine": machine, "datasets": datasets, "matern52_graded_vs_staggered":
                   matern, "notes": notes}
        print(f"wrote {write_results(output, payload)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
