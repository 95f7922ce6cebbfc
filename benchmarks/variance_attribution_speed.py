"""Exact Shapley values of the posterior variance (ours) against shap on the variance function.

Models (``_product_gp_data``): scikit-learn ``ConstantKernel * RBF(ARD) + WhiteKernel``,
``normalize_y=True``, on wine red (d = 11), concrete (d = 8) and pumadyn-32nm (d = 32; shap's
Exact explainer, 2^32 coalitions, is not run), n rows. The game:
interventional, ``v(S) = mean_b s2(x_S, b_-S)`` over B background rows drawn with the seed,
where ``s2`` is the posterior variance of the latent function.

* **ours**: ``gx.explain_variance(gx.from_sklearn(gpr), X, background=B rows)``: the pair
  expansion ``s2 = k(x, x) - sum_nm Q_nm k(x, z_n) k(x, z_m)``, each pair a product game,
  exact by the multilinear integral: O(B n^2 d ceil(d/2)) per point;
* **shap 0.51** ``ExactExplainer`` (2^d coalitions x B rows) and ``PermutationExplainer`` (10
  permutations) on the function ``x -> gpr.predict(x, return_std=True)[1] ** 2``
  (scikit-learn's own predictive variance, which adds the constant fitted white-noise level:
  a constant changes no Shapley value), with the same background (``maskers.Independent``).

Errors are max |value - ours| over points and features, also relative to the largest
|value|. The costs: ours O(B n^2 d^2 / 4) elementwise (no BLAS), shap's Exact 2^d B
evaluations of an O(n^2) variance (BLAS): at d = 8 shap's Exact is faster, at d = 11 ours is,
and from d ~ 16 only the exact pair expansion and sampling remain. The machine was shared
with other jobs (2 cores): times are wall-clock per explained point, indicative only.

Run from the repository root::

    GPEXPLAIN_DATA_DIR=../shared/data .venv/bin/python benchmarks/variance_attribution_speed.py

Results: ``benchmarks/results/variance_attribution_speed.json``.
"""

from __future__ import annotations

import os

os.environ.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
                  OMP_WAIT_POLICY="PASSIVE")

import warnings  # noqa: E402

import numpy as np  # noqa: E402
from _common import machine_info, write_results  # noqa: E402
from _product_gp_data import arguments, case, timed  # noqa: E402

import gpexplain as gx  # noqa: E402

SHAP_EXACT_MAX_D = 12


def run_dataset(name, n_rows, n_points, n_background, seed):
    import shap

    setup = case(name, n_rows, n_points, n_background, seed)
    X_explain, gpr, background, record = setup.X_explain, setup.gpr, setup.background, setup.record
    posterior, d = setup.posterior, setup.n_features
    methods = record["methods"]
    ours, seconds = timed(lambda: gx.explain_variance(posterior, X_explain,
                                                      background=background), n_points)
    methods["ours (exact)"] = {"seconds_per_point": seconds, "max_error": 0.0,
                               "completeness_gap": ours.completeness_gap()["mean"]}
    # the latent variance of our posterior and scikit-learn's differ by the white noise only
    sklearn_variance = gpr.predict(X_explain, return_std=True)[1] ** 2
    record["sklearn_minus_ours_variance"] = [float(v) for v in
                                             sklearn_variance - ours.prediction]

    def variance(rows):
        return gpr.predict(rows, return_std=True)[1] ** 2

    masker = shap.maskers.Independent(background, max_samples=n_background)
    competitors = {
        "shap Permutation (10 permutations)": lambda: shap.explainers.Permutation(
            variance, masker)(X_explain, max_evals=10 * (2 * d + 1)).values,
    }
    if d <= SHAP_EXACT_MAX_D:
        competitors = {"shap Exact": lambda: shap.explainers.Exact(variance, masker)(
            X_explain).values, **competitors}
    scale = float(np.max(np.abs(ours.mean)))
    for label, function in competitors.items():
        values, seconds = timed(function, n_points)
        error = float(np.max(np.abs(values - ours.mean)))
        methods[label] = {"seconds_per_point": seconds, "max_error": error,
                          "max_relative_error": error / scale}
    for label, entry in methods.items():
        entry["time_ratio_to_ours"] = entry["seconds_per_point"] / max(
            methods["ours (exact)"]["seconds_per_point"], 1e-12)
        print(f"  {label:40s} {entry['seconds_per_point']:.3e} s/point  "
              f"x{entry['time_ratio_to_ours']:.2f}  error {entry.get('max_error'):.3g}")
    return record


def main():
    args = arguments(n_points=3, n_background=20)
    warnings.filterwarnings("ignore")
    plan = {"wine-red": 300, "concrete": 300, "pumadyn-32nm": 300}
    if args.quick:
        plan, args.n_points = {"concrete": 100}, 2
    payload = {"machine": machine_info(note="machine shared with other jobs (2 cores): "
                                            "wall-clock times are indicative"),
               "game": "interventional game of the posterior variance, background rows drawn "
                       "with the seed", "datasets": {}}
    for name, n_rows in plan.items():
        print(name)
        payload["datasets"][name] = run_dataset(name, n_rows, args.n_points,
                                                args.n_background, args.seed)
    if not args.quick:
        print("wrote", write_results("variance_attribution_speed", payload))


if __name__ == "__main__":
    main()
