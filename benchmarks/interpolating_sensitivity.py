"""Sobol indices of a nearly interpolating GP (scikit-learn's default ``alpha=1e-10``): ours in
float64, ours by default (binary128 when float64 cannot hold them, issue 27 item 15) and
SALib's Saltelli estimator of the same GP.

Data: the bundled red wine table (``gx.datasets.load_dataset("wine-quality-red")``), its
first ``d`` columns, duplicate rows dropped (an interpolating GP cannot fit two targets at one
point), ``n`` rows drawn at random, the quality score as target. Model: scikit-learn
``ConstantKernel * RBF(ARD)`` with the default ``alpha=1e-10`` and ``normalize_y=True``, its
hyperparameters those fitted with a ``WhiteKernel`` added (fitted with ``alpha`` alone the
lengthscales collapse to the 1e-5 bound on these noisy scores).
Measure: independent Gaussians with each training column's mean and std (our default).

* **ours, float64**: ``gx.global_sensitivity`` with the binary128 fallback disabled
  (``_QUAD_TRIGGER = inf``), as before issue 27 item 15;
* **ours, default**: the same call as a user makes it (binary128 here, ``method`` says so). Its
  indices are the reference: ``tests/explain/test_sensitivity_interpolating.py`` checks this
  path against a 40-digit mpmath reference (5e-16 of the variance);
* **SALib** Saltelli sampling + Sobol analysis of ``gpr.predict`` (``dists = "norm"``, the same
  measure, ``calc_second_order=False``) at N = 2^10 and 2^13 (``gp_sensitivity_speed._salib``).

Each row: wall seconds, max |first-order index - reference| and |total - reference|; ours also
the largest break of the identities ``0 <= first <= total``, ``sum(Shapley) = 1``. The
machine is shared (2 cores): times are indicative.

Run from the repository root::

    .venv/bin/python benchmarks/interpolating_sensitivity.py

Results: ``benchmarks/results/interpolating_sensitivity.json``.
"""

from __future__ import annotations

import os

os.environ.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
                  OMP_WAIT_POLICY="PASSIVE")

import time  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
from _common import machine_info, write_results  # noqa: E402

SIZES = ((100, 4), (200, 5))
SALIB_N = (2**10, 2**13)


def _ours(gpr, float64_only):
    import gpexplain as gx
    from gpexplain.explain import sensitivity

    trigger = sensitivity._QUAD_TRIGGER
    if float64_only:
        sensitivity._QUAD_TRIGGER = np.inf
    try:
        start = time.perf_counter()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = gx.global_sensitivity(gx.from_sklearn(gpr))
        return result, time.perf_counter() - start, len(caught)
    finally:
        sensitivity._QUAD_TRIGGER = trigger


def _identity_break(first, total, shapley):
    """The largest break of ``0 <= first <= total`` and ``sum(Shapley shares) = 1``."""
    return float(max(-first.min(), np.max(first - total), abs(shapley.sum() - 1.0)))


def _recorder(rows, n, d, first_ref, total_ref):
    """A function appending one of our rows (and printing it) against the reference."""

    def record(method, seconds, first, total, shapley, **extra):
        entry = {"n": n, "d": d, "method": method, "seconds": seconds,
                 "max_error_first_order": float(np.max(np.abs(first - first_ref))),
                 "max_error_total": float(np.max(np.abs(total - total_ref))),
                 "identity_break": _identity_break(first, total, shapley), **extra}
        rows.append(entry)
        print(f"  {method:14s} {seconds:7.2f} s  S1 error {entry['max_error_first_order']:.2e}"
              f"  ST error {entry['max_error_total']:.2e}  identity break "
              f"{entry['identity_break']:.2e}")

    return record


def main() -> None:
    from gp_sensitivity_speed import _salib
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel

    import gpexplain as gx

    table, target = gx.datasets.load_dataset("wine-quality-red")
    rows = []
    for n, d in SIZES:
        frame = table.iloc[:, :d].assign(_y=target.to_numpy()).drop_duplicates(
            subset=list(table.columns[:d]))
        frame = frame.sample(n, random_state=0)
        X, y = frame.iloc[:, :d].to_numpy(dtype=float), frame["_y"].to_numpy(dtype=float)
        # lengthscales fitted with a white-noise term, then the GP a user gets with them and
        # scikit-learn's default alpha (the noise left out)
        fitted = GaussianProcessRegressor(
            ConstantKernel() * RBF(X.std(0)) + WhiteKernel(0.1), normalize_y=True,
            random_state=0).fit(X, y)
        gpr = GaussianProcessRegressor(fitted.kernel_.k1, normalize_y=True,
                                       optimizer=None).fit(X, y)
        reference, ref_seconds, ref_warnings = _ours(gpr, float64_only=False)
        first_ref = reference.first_order_indices
        total_ref = reference.total_indices
        posterior = gx.from_sklearn(gpr)
        weights = float(np.sum(np.abs(getattr(posterior, "posterior_", posterior).alpha)))
        print(f"n={n} d={d}: |K^-1 y|_1 = {weights:.3g}, {reference.method}")

        plain, seconds, n_warnings = _ours(gpr, float64_only=True)
        record = _recorder(rows, n, d, first_ref, total_ref)
        record("ours float64", seconds, plain.first_order_indices, plain.total_indices,
               plain.shapley_effects / plain.total_variance, warnings=n_warnings,
               representer_weights_l1=weights)
        record("ours default", ref_seconds, first_ref, total_ref,
               reference.shapley_effects / reference.total_variance, warnings=ref_warnings,
               precision=reference.method, representer_weights_l1=weights)
        for entry in _salib(gpr, [f"x{j}" for j in range(d)], zip(X.mean(0), X.std(0), strict=True),
                            "norm", reference, ref_seconds, SALIB_N, seed=0):
            rows.append({"n": n, "d": d, "method": f"SALib N={entry['N']}", **entry})
    write_results("interpolating_sensitivity", {"machine": machine_info(), "rows": rows})


if __name__ == "__main__":
    main()
