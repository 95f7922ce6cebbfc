"""Exact Shapley values of an ARD GP (ours) against shap and shapiq: time per point and error.

Models (``_product_gp_data``): scikit-learn ``ConstantKernel * RBF(ARD) + WhiteKernel``,
``normalize_y=True``, on wine red (d = 11), concrete (d = 8) and pumadyn-32nm (d = 32), n rows.
The game: interventional, ``v(S) = mean_b m(x_S, b_-S)`` over B background rows drawn with
the seed from the training rows (shap's Exact / Permutation explainers and KernelSHAP compute
or estimate the Shapley values of this very game on ``gpr.predict``).

* **ours**: ``gx.shapley_values(gx.from_sklearn(gpr), X, background=B rows)``, mean only
  (``return_cov=False``, O(B n d^2 / 2) per point) and mean + full covariance (prior term
  O(B^2 d^2 ceil(d/2)^2) per point);
* **shap 0.51** ``ExactExplainer`` (d <= 12; 2^d coalitions x B rows), ``PermutationExplainer``
  (10 permutations) and ``KernelExplainer`` (default nsamples) with the same background;
* **shapiq 1.4.1** ``ProductKernelExplainer``: it refuses ``ConstantKernel * RBF`` and
  ``RBF + WhiteKernel`` and crashes on ARD kernels (recorded below), so it runs on a separate
  GPR with an isotropic ``RBF`` and ``alpha`` = the fitted noise, ``normalize_y=False``. Its
  game is a different one (absent features' kernel factors set to 1: ``v({}) = sum(alpha)``),
  so only its time and its completeness against ``gpr.predict`` are recorded.

Errors are max |value - ours| over points and features (ours agrees with shap's Exact to
round-off, which validates both). The machine was shared with other jobs (8 agents, 2 cores):
times are wall-clock per explained point, indicative only.

Run from the repository root::

    GPEXPLAIN_DATA_DIR=../shared/data .venv/bin/python benchmarks/gp_shap_speed.py
    ... benchmarks/gp_shap_speed.py --quick      # wine only, 2 points, no JSON

Results: ``benchmarks/results/gp_shap_speed.json``.
"""

from __future__ import annotations

import os

os.environ.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
                  OMP_WAIT_POLICY="PASSIVE")

import time  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
from _common import machine_info, write_results  # noqa: E402
from _product_gp_data import arguments, case, timed  # noqa: E402

import gpexplain as gx  # noqa: E402

SHAP_EXACT_MAX_D = 12


def run_dataset(name, n_rows, n_points, n_background, seed):
    import shap

    setup = case(name, n_rows, n_points, n_background, seed)
    X_train, y_train, X_explain = setup.X_train, setup.y_train, setup.X_explain
    gpr, posterior, background, record = setup.gpr, setup.posterior, setup.background, setup.record
    d = setup.n_features
    methods = record["methods"]

    ours, seconds = timed(lambda: gx.shapley_values(posterior, X_explain, background=background,
                                                    return_cov=False), n_points)
    methods["ours (mean only)"] = {"seconds_per_point": seconds, "max_error": 0.0,
                                   "completeness_gap": ours.completeness_gap()["mean"]}
    full, seconds = timed(lambda: gx.shapley_values(posterior, X_explain, background=background),
                          n_points)
    methods["ours (mean + covariance)"] = {
        "seconds_per_point": seconds,
        "max_error": float(np.max(np.abs(full.mean - ours.mean))),
        "completeness_gap": full.completeness_gap(),
    }
    masker = shap.maskers.Independent(background, max_samples=n_background)
    competitors = {
        "shap Permutation (10 permutations)": lambda: shap.explainers.Permutation(
            gpr.predict, masker)(X_explain, max_evals=10 * (2 * d + 1)).values,
        "shap KernelExplainer (nsamples auto)": lambda: np.asarray(shap.KernelExplainer(
            gpr.predict, background).shap_values(X_explain, silent=True)),
    }
    if d <= SHAP_EXACT_MAX_D:
        competitors = {"shap Exact": lambda: shap.explainers.Exact(gpr.predict, masker)(
            X_explain).values, **competitors}
    for label, function in competitors.items():
        values, seconds = timed(function, n_points)
        methods[label] = {"seconds_per_point": seconds,
                          "max_error": float(np.max(np.abs(values - ours.mean)))}
    methods.update(run_shapiq(X_train, y_train, X_explain, gpr, setup.names))
    for label, entry in methods.items():
        entry["time_ratio_to_ours_mean"] = entry["seconds_per_point"] / max(
            methods["ours (mean only)"]["seconds_per_point"], 1e-12)
        print(f"  {label:40s} {entry['seconds_per_point']:.3e} s/point  "
              f"x{entry['time_ratio_to_ours_mean']:.1f}  error {entry.get('max_error')}")
    return record


def run_shapiq(X_train, y_train, X_explain, gpr, names):
    """shapiq's ProductKernelExplainer: the fitted model (refused / crashing, recorded) and an
    isotropic RBF GPR it accepts."""
    # shapiq 1.4.1 exports ProductKernelExplainer as None at the top level; import its module.
    from shapiq.explainer.product_kernel.explainer import ProductKernelExplainer
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import RBF

    entries = {}
    try:
        ProductKernelExplainer(gpr)
        entries["shapiq on the fitted ARD model"] = {"status": "accepted"}
    except Exception as error:  # recorded: the point is what a user meets
        entries["shapiq on the fitted ARD model"] = {
            "status": f"refused: {type(error).__name__}: {str(error)[:200]}",
            "seconds_per_point": float("nan")}
    noise = float(gpr.kernel_.k2.noise_level) * float(np.var(y_train))
    length = float(np.exp(np.mean(np.log(gpr.kernel_.k1.k2.length_scale))))
    isotropic = GaussianProcessRegressor(RBF(length), alpha=noise, optimizer=None).fit(
        X_train, y_train)
    explainer = ProductKernelExplainer(isotropic)
    start = time.perf_counter()
    values = [explainer.explain(x) for x in X_explain]
    seconds = (time.perf_counter() - start) / len(X_explain)
    phi = np.array([[v[(j,)] for j in range(X_train.shape[1])] for v in values])
    gap = np.abs(phi.sum(1) + explainer.empty_prediction - isotropic.predict(X_explain)).max()
    ours, ours_seconds = timed(lambda: gx.shapley_values(
        gx.from_sklearn(isotropic), X_explain, baseline="mean", return_cov=False),
        len(X_explain))
    entries["shapiq ProductKernelExplainer (isotropic RBF, its own game)"] = {
        "seconds_per_point": seconds, "completeness_gap_vs_predict": float(gap),
        "ours_baseline_game_same_model_seconds_per_point": ours_seconds,
        "note": "different game (absent kernel factors = 1); not comparable values"}
    return entries


def main():
    args = arguments(n_points=4, n_background=50)
    warnings.filterwarnings("ignore")
    plan = {"wine-red": 500, "concrete": 500, "pumadyn-32nm": 500}
    if args.quick:
        plan, args.n_points = {"wine-red": 200}, 2
    payload = {"machine": machine_info(note="machine shared with other jobs (8 agents on 2 "
                                             "cores): wall-clock times are indicative"),
               "game": "interventional, background rows drawn with the seed", "datasets": {}}
    for name, n_rows in plan.items():
        print(name)
        points = args.n_points
        payload["datasets"][name] = run_dataset(name, n_rows, points, args.n_background,
                                                args.seed)
    if not args.quick:
        print("wrote", write_results("gp_shap_speed", payload))


if __name__ == "__main__":
    main()
