"""Closed-form integrated gradients against numerical quadrature and captum.

For each data set (wine-quality-red, the synthetic sin(x1) sin(2 x2) function of Butler et al.,
eq. 34) this script fits ``gx.GPRegressor`` and explains the same seeded rows with

* the closed form, mean only and mean + covariance;
* gpexplain's quadrature (autograd through the GPyTorch kernel) for every rule and n_steps,
  mean + covariance;
* captum's ``IntegratedGradients`` on the posterior mean written as a torch module
  (n_steps=50, ``gausslegendre`` and ``riemann_trapezoid``), mean only;

and records wall time, errors against the closed form, completeness gaps and peak memory. The
closed form's own error is measured against an independent reference: Gauss-Legendre
quadrature of the analytic gradient of the posterior mean, written out here in NumPy extended
precision (``np.longdouble``), independent of gpexplain's closed form, of its quadrature and
of GPyTorch.

Run from the repository root::

    .venv/bin/python benchmarks/ig_exact_vs_numerical.py            # full run, writes JSON
    .venv/bin/python benchmarks/ig_exact_vs_numerical.py --quick    # smoke test, no JSON

Results: ``benchmarks/results/ig_exact_vs_numerical.json``.
"""

from __future__ import annotations

import os

# libgomp's default (spinning) wait policy makes every parallel torch op wait for a busy
# core when the machine is shared; passive waiting keeps the torch-based methods (quadrature,
# captum) at their real speed. It must be set before torch is imported; it is recorded.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from _common import RESULTS, data_path, machine_info, write_results
from captum.attr import IntegratedGradients

import gpexplain as gx
from gpexplain.functionals.quadrature import QUADRATURE_RULES, quadrature_rule, staggered_rule

OUTPUT = RESULTS / "ig_exact_vs_numerical.json"

N_STEPS = (8, 16, 32, 64, 128)
CAPTUM_METHODS = ("gausslegendre", "riemann_trapezoid")
CAPTUM_STEPS = 50
CAPTUM_STEPS_PER_BATCH = 10  # internal_batch_size = n_rows * this (bounded K(path, Z) blocks)
REFERENCE_NODES = 256  # extended-precision Gauss-Legendre reference
REFERENCE_CHECK_NODES = 192  # convergence check of the reference, on REFERENCE_CHECK_ROWS rows
REFERENCE_CHECK_ROWS = 20
SANITY_ROWS = 2
SANITY_STEPS = (10, 25, 50, 100)
CRITERIA = {
    "a_captum_gl_time_over_closed_form_mean_time": 3.0,
    "b_captum_gl_error_over_closed_form_error": 1e4,
    "c_gl64_cov_time_over_closed_form_cov_time": 10.0,
}


# -- data ---------------------------------------------------------------------------------
def load_wine() -> tuple[pd.DataFrame, np.ndarray, np.ndarray, str]:
    """Wine-quality-red; baseline = mean feature vector of the quality-5 wines (Sec. 5.4)."""
    frame = pd.read_csv(data_path("wine_quality", "winequality-red.csv"), sep=";")
    X = frame.drop(columns="quality")
    y = frame["quality"].to_numpy(dtype=np.float64)
    baseline = X[y == 5].mean(axis=0).to_numpy(dtype=np.float64).copy()
    return X, y, baseline, "mean feature vector of the wines of quality 5 (paper, Sec. 5.4)"


def make_synthetic(seed: int, n: int = 500) -> tuple[pd.DataFrame, np.ndarray, np.ndarray, str]:
    """Eq. 34: X1, X2 ~ U(0, 10), Y = sin(X1) sin(2 X2) + 0.5 N(0, 1); baseline 0 (Sec. 5.1)."""
    rng = np.random.default_rng(seed)
    inputs = rng.uniform(0.0, 10.0, size=(n, 2))
    y = np.sin(inputs[:, 0]) * np.sin(2.0 * inputs[:, 1]) + 0.5 * rng.standard_normal(n)
    X = pd.DataFrame(inputs, columns=["x1", "x2"])
    return X, y, np.zeros(2), "zeros, as in the paper's Sec. 5.1 (a corner of the input domain)"


# -- fitting ------------------------------------------------------------------------------
def fit(X: pd.DataFrame, y: np.ndarray, n_restarts: int) -> tuple[object, dict]:
    """``GPRegressor(kernel="ard", random_state=0)``; returns the model and a fit record."""
    start = time.perf_counter()
    model = gx.GPRegressor(kernel="ard", random_state=0, n_restarts=n_restarts).fit(X, y)
    scale = X.to_numpy().std(axis=0)
    return model, {
        "config": {"kernel": "ard", "random_state": 0, "n_restarts": n_restarts},
        "seconds": time.perf_counter() - start,
        "log_marginal_likelihood": model.log_marginal_likelihood_value_,
        "restarts": model.restarts_,
        "lengthscale_over_feature_std": [float(v) for v in model.kernel_.lengthscale / scale],
        "signal_variance_over_var_y": model.kernel_.variance / y.var(),
        "noise_variance_over_var_y": model.noise_ / y.var(),
    }


# -- methods ------------------------------------------------------------------------------
class PosteriorMean(torch.nn.Module):
    """gpexplain's posterior mean as a torch function: m0 + k(x, Z) alpha, float64."""

    def __init__(self, posterior):
        super().__init__()
        self.kernel = posterior.kernel.torch_kernel(posterior.n_features)
        self.register_buffer("inputs", torch.as_tensor(posterior.train_inputs).clone())
        self.register_buffer("alpha", torch.as_tensor(posterior.alpha).clone())
        self.prior_mean = float(posterior.mean)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.prior_mean + self.kernel(x, self.inputs).to_dense() @ self.alpha


def gauss_legendre_extended(n: int) -> tuple[np.ndarray, np.ndarray]:
    """Gauss-Legendre nodes and weights on [-1, 1] in ``np.longdouble``.

    NumPy's float64 nodes refined by Newton steps on the three-term recurrence of P_n.
    """
    ld = np.longdouble
    x = np.polynomial.legendre.leggauss(n)[0].astype(ld)

    def legendre(x):
        previous, current = np.ones_like(x), x.copy()
        for k in range(2, n + 1):
            previous, current = current, ((2 * k - 1) * x * current - (k - 1) * previous) / k
        return current, n * (x * current - previous) / (x * x - 1)  # P_n, P_n'

    for _ in range(3):
        value, slope = legendre(x)
        x = x - value / slope
    _, slope = legendre(x)
    return x, 2 / ((1 - x * x) * slope * slope)


def extended_precision_ig(posterior, X: np.ndarray, baseline: np.ndarray, n_nodes: int):
    """Mean IG by n-node Gauss-Legendre on the analytic gradient, in ``np.longdouble``.

    ``attr_i = u_i sum_k w_k sum_n alpha_n s2 exp(-|g_k - z_n|^2 / 2) (z_n - g_k)_i`` with
    everything scaled by the lengthscales (``u = (x - xt)/l``, ``g_k = xt/l + t_k u``).
    """
    ld = np.longdouble
    nodes, weights = gauss_legendre_extended(n_nodes)
    t = (1 + nodes) / 2
    w = weights / 2
    lengthscale = posterior.kernel.lengthscale
    lengthscale = np.broadcast_to(lengthscale, (X.shape[1],)).astype(ld)
    active = np.isfinite(lengthscale)
    scale = lengthscale[active]
    train = posterior.train_inputs[:, active].astype(ld) / scale
    start = baseline[active].astype(ld) / scale
    alpha = posterior.alpha.astype(ld)
    variance = ld(posterior.kernel.variance)
    out = np.zeros(X.shape, dtype=ld)
    for p, row in enumerate(X):
        u = (row[active].astype(ld) - baseline[active].astype(ld)) / scale
        diff = train[None, :, :] - (start[None, :] + t[:, None] * u[None, :])[:, None, :]
        weighted = variance * np.exp(-np.sum(diff * diff, axis=2) / 2) * alpha[None, :]
        gradient = np.einsum("kn,knd->kd", weighted, diff)  # d m / d (x/l) at each node
        out[p, active] = u * (w @ gradient)
    return out


def peak_rss_reset() -> None:
    try:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")
    except OSError:
        pass


def peak_rss_mb() -> float | None:
    try:
        with open("/proc/self/status") as handle:
            for line in handle:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return None


def timed(function, repeats: int, slow_seconds: float):
    """Run ``function``; repeat it (best of ``repeats``) only when one run is fast."""
    peak_rss_reset()
    seconds = []
    start = time.perf_counter()
    result = function()
    seconds.append(time.perf_counter() - start)
    if seconds[0] < slow_seconds:
        for _ in range(repeats - 1):
            start = time.perf_counter()
            result = function()
            seconds.append(time.perf_counter() - start)
    return result, seconds, peak_rss_mb()


def completeness_gaps(posterior, X, baseline, mean, cov):
    """Max |sum_i mean_i - (m(x) - m(xt))| and max |1' cov 1 - Var[f(x) - f(xt)]|."""
    prediction, _ = posterior.predict(X)
    base, _ = posterior.predict(baseline[None, :])
    gap_mean = float(np.max(np.abs(mean.sum(axis=1) - (prediction - base[0]))))
    if cov is None:
        return gap_mean, None
    target = posterior.difference_variance(X, baseline)
    return gap_mean, float(np.max(np.abs(cov.sum(axis=(1, 2)) - target)))


# -- one data set -------------------------------------------------------------------------
def benchmark(name, X, y, baseline, baseline_note, args, notes) -> dict:
    print(f"\n== {name}: fitting ({len(X)} x {X.shape[1]}) ...", flush=True)
    model, fit_used = fit(X, y, args.n_restarts)
    posterior = model.posterior_
    print(
        f"   fit {fit_used['seconds']:.1f} s, LML {fit_used['log_marginal_likelihood']:.3f}",
        flush=True,
    )
    rows = np.sort(
        np.random.default_rng(args.seed).choice(len(X), size=args.n_explained, replace=False)
    )
    Xe = X.to_numpy(dtype=np.float64)[rows]
    results = []

    def record(method, rule, n_steps, evaluations, with_cov, seconds, peak, mean, cov,
               error_mean, error_cov, reference_error, extra=None):
        gap_mean, gap_cov = completeness_gaps(posterior, Xe, baseline, mean, cov)
        entry = {
            "method": method,
            "rule": rule,
            "n_steps": n_steps,
            "evaluations_per_point": evaluations,
            "with_cov": with_cov,
            "seconds": min(seconds),
            "seconds_all_repeats": seconds,
            "repeats": len(seconds),
            "max_abs_error_mean": error_mean,
            "max_abs_error_cov": error_cov,
            "max_abs_error_mean_vs_extended_reference": reference_error,
            "completeness_gap_mean": gap_mean,
            "completeness_gap_cov": gap_cov,
            "peak_rss_mb": peak,
        }
        entry.update(extra or {})
        results.append(entry)
        print(
            f"   {method:<12} {str(rule):<18} {str(n_steps):>5} cov={with_cov!s:<5} "
            f"{min(seconds):8.3f} s  err_mean={error_mean:.2e}"
            + ("" if error_cov is None else f"  err_cov={error_cov:.2e}"),
            flush=True,
        )
        return entry

    # Independent reference (extended precision) and its convergence check.
    start = time.perf_counter()
    reference = extended_precision_ig(posterior, Xe, baseline, REFERENCE_NODES)
    check_rows = min(REFERENCE_CHECK_ROWS, len(Xe))
    check = extended_precision_ig(posterior, Xe[:check_rows], baseline, REFERENCE_CHECK_NODES)
    reference_seconds = time.perf_counter() - start
    reference_convergence = float(np.max(np.abs(reference[:check_rows] - check)))
    reference64 = reference.astype(np.float64)

    # Closed form.
    closed = {
        with_cov: timed(
            lambda with_cov=with_cov: gx.integrated_gradients(
                posterior, Xe, baseline, method="closed-form", return_cov=with_cov
            ),
            args.repeats,
            args.slow_seconds,
        )
        for with_cov in (False, True)
    }
    # The closed form is the reference of every other row; its own error column is its
    # distance from the extended-precision reference.
    own_error = float(np.max(np.abs(closed[False][0].mean - reference64)))
    for with_cov, (attribution, seconds, peak) in closed.items():
        record(
            "closed-form", None, None, None, with_cov, seconds, peak, attribution.mean,
            attribution.cov, own_error, None, own_error,
            {"error_reference": "extended-precision Gauss-Legendre reference (mean)"},
        )
    closed = {with_cov: value[0] for with_cov, value in closed.items()}
    cf_mean, cf_cov = closed[True].mean, closed[True].cov
    if np.max(np.abs(closed[False].mean - cf_mean)) > 0:
        notes.append(f"{name}: closed-form means with and without covariance differ.")

    # Quadrature, every rule and n_steps, mean + covariance.
    for rule in args.rules:
        for n_steps in args.n_steps:
            nodes, _ = quadrature_rule(rule, n_steps)
            attribution, seconds, peak = timed(
                lambda rule=rule, n_steps=n_steps: gx.integrated_gradients(
                    posterior, Xe, baseline, method="quadrature", rule=rule,
                    n_steps=n_steps, return_cov=True,
                ),
                args.repeats,
                args.slow_seconds,
            )
            record(
                "quadrature", rule, n_steps, int(nodes.size), True, seconds, peak,
                attribution.mean, attribution.cov,
                float(np.max(np.abs(attribution.mean - cf_mean))),
                float(np.max(np.abs(attribution.cov - cf_cov))),
                float(np.max(np.abs(attribution.mean - reference64))),
                {
                    "error_reference": "closed form",
                    "prior_term_node_pairs_per_point": int(
                        nodes.size * staggered_rule(nodes)[0].size
                    ),
                },
            )

    # captum on the posterior mean.
    module = PosteriorMean(posterior)
    x_t = torch.as_tensor(Xe)
    baseline_t = torch.as_tensor(baseline)[None, :]
    with torch.no_grad():
        module_check = float(
            np.max(np.abs(module(x_t).numpy() - posterior.predict(Xe)[0]))
        )
    integrated = IntegratedGradients(module)
    batch = len(Xe) * CAPTUM_STEPS_PER_BATCH

    def run_captum(x, method, n_steps, internal_batch_size):
        out = integrated.attribute(
            x, baselines=baseline_t, n_steps=n_steps, method=method,
            internal_batch_size=internal_batch_size,
        )
        return out.detach().numpy()

    # Sanity: captum approaches the closed form as n_steps grows, on a couple of rows.
    sanity = {"rows": rows[:SANITY_ROWS].tolist(), "max_abs_error_vs_closed_form": {}}
    for method in CAPTUM_METHODS:
        sanity["max_abs_error_vs_closed_form"][method] = {
            str(n): float(
                np.max(np.abs(run_captum(x_t[:SANITY_ROWS], method, n, None)
                              - cf_mean[:SANITY_ROWS]))
            )
            for n in SANITY_STEPS
        }
    ours = gx.integrated_gradients(
        posterior, Xe[:SANITY_ROWS], baseline, method="quadrature", rule="gauss-legendre",
        n_steps=CAPTUM_STEPS, return_cov=False,
    ).mean
    theirs = run_captum(x_t[:SANITY_ROWS], "gausslegendre", CAPTUM_STEPS, None)
    sanity["captum_gl50_vs_gpexplain_gl50_quadrature"] = float(np.max(np.abs(theirs - ours)))
    sanity["gpexplain_gl50_quadrature_vs_closed_form"] = float(
        np.max(np.abs(ours - cf_mean[:SANITY_ROWS]))
    )
    sanity["module_vs_posterior_predict_max_abs"] = module_check

    for method in CAPTUM_METHODS:
        mean, seconds, peak = timed(
            lambda method=method: run_captum(x_t, method, CAPTUM_STEPS, batch),
            args.repeats,
            args.slow_seconds,
        )
        record(
            "captum", method, CAPTUM_STEPS, CAPTUM_STEPS, False, seconds, peak, mean, None,
            float(np.max(np.abs(mean - cf_mean))), None,
            float(np.max(np.abs(mean - reference64))),
            {"error_reference": "closed form", "internal_batch_size": batch},
        )

    # Speed ratios against the closed form with the same outputs.
    cf_seconds = {
        entry["with_cov"]: entry["seconds"] for entry in results if entry["method"] == "closed-form"
    }
    for entry in results:
        entry["speed_ratio_vs_closed_form"] = entry["seconds"] / cf_seconds[entry["with_cov"]]

    def find(method, rule, n_steps):
        for entry in results:
            if (entry["method"], entry["rule"], entry["n_steps"]) == (method, rule, n_steps):
                return entry
        return None

    captum_gl = find("captum", "gausslegendre", CAPTUM_STEPS)
    gl64 = find("quadrature", "gauss-legendre", 64)
    ratios = {
        "a_captum_gl_time_over_closed_form_mean_time": captum_gl["seconds"] / cf_seconds[False],
        "b_captum_gl_error_over_closed_form_error": (
            captum_gl["max_abs_error_mean"] / own_error if own_error > 0 else None
        ),
        "c_gl64_cov_time_over_closed_form_cov_time": (
            None if gl64 is None else gl64["seconds"] / cf_seconds[True]
        ),
    }
    ratios_meet = {
        key: (None if value is None else bool(value >= CRITERIA[key]))
        for key, value in ratios.items()
    }
    if own_error == 0:
        notes.append(f"{name}: the closed form matched the reference exactly; ratio (b) is null.")
    if reference_convergence > 1e-13:
        notes.append(
            f"{name}: the extended-precision reference moved by {reference_convergence:.1e} "
            f"between {REFERENCE_CHECK_NODES} and {REFERENCE_NODES} nodes."
        )

    return {
        "n_train": int(len(X)),
        "n_features": int(X.shape[1]),
        "feature_names": list(X.columns),
        "n_explained": int(len(Xe)),
        "explained_rows": rows.tolist(),
        "explained_rows_seed": args.seed,
        "fit_seconds": fit_used["seconds"],
        "log_marginal_likelihood": fit_used["log_marginal_likelihood"],
        "fit": fit_used,
        "kernel": repr(posterior.kernel),
        "noise": posterior.noise,
        "baseline": [float(v) for v in baseline],
        "baseline_definition": baseline_note,
        "max_abs_closed_form_mean": float(np.max(np.abs(cf_mean))),
        "max_abs_closed_form_cov": float(np.max(np.abs(cf_cov))),
        "closed_form_error_definition": (
            "max |closed-form mean - reference| over all explained rows and features, where "
            f"the reference is {REFERENCE_NODES}-node Gauss-Legendre quadrature of the "
            "analytic posterior-mean gradient in np.longdouble (independent code path)"
        ),
        "closed_form_error": own_error,
        "reference": {
            "nodes": REFERENCE_NODES,
            "dtype": str(np.dtype(np.longdouble)),
            "nodes_and_weights": "np.longdouble, Newton-refined on the Legendre recurrence",
            "epsilon": float(np.finfo(np.longdouble).eps),
            "seconds": reference_seconds,
            f"max_change_{REFERENCE_CHECK_NODES}_vs_{REFERENCE_NODES}_nodes_first_"
            f"{check_rows}_rows": reference_convergence,
        },
        "captum_sanity": sanity,
        "results": results,
        "ratios": ratios,
        "criteria": {
            key: {"threshold": CRITERIA[key], "met": ratios_meet[key]} for key in CRITERIA
        },
    }


# -- reporting ----------------------------------------------------------------------------
def print_table(name: str, data: dict) -> None:
    print(
        f"\n{name}: n_train={data['n_train']}, n_features={data['n_features']}, "
        f"explained={data['n_explained']}, fit {data['fit_seconds']:.1f} s, "
        f"LML {data['log_marginal_likelihood']:.3f}"
    )
    header = (
        f"{'method':<12} {'rule':<18} {'n':>4} {'evals':>5} {'cov':<5} {'seconds':>9} "
        f"{'x CF':>8} {'err mean':>9} {'err cov':>9} {'rep':>3}"
    )
    print(header)
    print("-" * len(header))
    for entry in data["results"]:
        cov = entry["max_abs_error_cov"]
        print(
            f"{entry['method']:<12} {str(entry['rule'] or '-'):<18} "
            f"{str(entry['n_steps'] or '-'):>4} {str(entry['evaluations_per_point'] or '-'):>5} "
            f"{'yes' if entry['with_cov'] else 'no':<5} {entry['seconds']:9.3f} "
            f"{entry['speed_ratio_vs_closed_form']:8.1f} {entry['max_abs_error_mean']:9.1e} "
            f"{'-' if cov is None else f'{cov:.1e}':>9} {entry['repeats']:>3}"
        )
    for key, value in data["ratios"].items():
        met = data["criteria"][key]["met"]
        shown = "n/a" if value is None else f"{value:.4g}"
        print(f"  {key} = {shown} (>= {CRITERIA[key]:g}: {met})")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="smoke test: 20 rows, n_steps 8 and 16, no JSON unless --output")
    parser.add_argument("--n-explained", type=int, default=None, help="rows explained (200)")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (2)")
    parser.add_argument("--repeats", type=int, default=3, help="best-of repeats for fast runs")
    parser.add_argument("--slow-seconds", type=float, default=2.0,
                        help="a method whose first run takes longer is timed once (2.0)")
    parser.add_argument("--n-restarts", type=int, default=1, help="GPRegressor n_restarts (1)")
    parser.add_argument("--seed", type=int, default=0, help="seed of rows and synthetic data")
    parser.add_argument("--output", type=Path, default=None, help=f"JSON path ({OUTPUT})")
    args = parser.parse_args(argv)
    args.rules = QUADRATURE_RULES
    args.n_steps = (8, 16) if args.quick else N_STEPS
    if args.n_explained is None:
        args.n_explained = 20 if args.quick else 200
    output = args.output if args.output is not None else (None if args.quick else OUTPUT)

    torch.set_num_threads(args.threads)
    warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
    start = time.perf_counter()
    # Before the runs: the commit recorded is the one that was imported.
    machine = machine_info(torch_threads_requested=args.threads)
    notes = [
        "Times are wall-clock (time.perf_counter) for gx.integrated_gradients / captum's "
        "attribute on all explained rows at once, in one process, same posterior and rows. "
        f"A run whose first call takes < {args.slow_seconds:g} s is repeated "
        f"({args.repeats} calls) and the minimum is reported; slower runs are timed once "
        "(see 'repeats' per result).",
        "max_abs_error_mean / max_abs_error_cov: max over rows and features of |value - "
        "closed form|. For the closed-form rows they hold the closed form's own error: its "
        "distance from the extended-precision reference (mean only).",
        "Speed ratio 'x CF': seconds / closed-form seconds with the same outputs (mean + cov "
        "for quadrature, mean only for captum).",
        "evaluations_per_point: path nodes of the rule (Gauss-Legendre n, trapezoid n + 1, "
        "Simpson 2n + 1, right n; captum n_steps). gpexplain's quadrature evaluates the "
        "gradient of k(., z_n) for every training point at every node (cross term) plus "
        "prior_term_node_pairs_per_point mixed second derivatives (covariance); captum "
        "evaluates the gradient of the posterior mean once per node.",
        "captum 0.9.0 multiplies gradients by torch.tensor(step_sizes).float() "
        "(IntegratedGradients._attribute): its quadrature weights are rounded to float32 "
        "although the model runs in float64, which floors its accuracy near 1e-8 relative; "
        "see captum_sanity.captum_gl50_vs_gpexplain_gl50_quadrature.",
        f"captum internal_batch_size = n_explained * {CAPTUM_STEPS_PER_BATCH} (that many path "
        "steps per forward/backward pass); the sanity runs on 2 rows use None.",
        "Ratio (b) uses the closed form's distance from the extended-precision reference as "
        "its error, not its distance from gpexplain's own float64 Gauss-Legendre quadrature "
        "(n_steps=128), because that quadrature's round-off (see its "
        "max_abs_error_mean_vs_extended_reference) exceeds the closed form's error.",
        "peak_rss_mb: process peak resident memory during the timed calls (VmHWM after "
        "resetting it through /proc/self/clear_refs); includes the ~0.5 GB baseline of the "
        "process.",
        "Wine: explained rows are training rows (the paper held its explained wine out).",
    ]

    datasets = {}
    for name, loader in (
        ("wine-quality-red", load_wine),
        ("synthetic-sin", lambda: make_synthetic(args.seed)),
    ):
        X, y, baseline, baseline_note = loader()
        datasets[name] = benchmark(name, X, y, baseline, baseline_note, args, notes)

    total = time.perf_counter() - start
    machine["total_seconds"] = total
    if max(machine["load_average_start"][0], os.getloadavg()[0]) > 0.5:
        notes.append(
            "The 1-minute load average exceeded 0.5 during the run (other processes were "
            "running): absolute times are inflated and noisier than on an idle machine."
        )
    for name, data in datasets.items():
        print_table(name, data)
    print(f"\ntotal {total:.1f} s, torch threads {torch.get_num_threads()}")
    if output is not None:
        payload = {"machine": machine, "datasets": datasets, "notes": notes}
        print(f"wrote {write_results(output, payload)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
