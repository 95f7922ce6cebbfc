"""Exact Shapley interactions (k-SII, order 2) of an ARD GP: ours against shapiq.

Models (``_product_gp_data``): scikit-learn ``ConstantKernel * RBF(ARD) + WhiteKernel``,
``normalize_y=True``, on wine red (d = 11), concrete (d = 8) and pumadyn-32nm (d = 32), n rows.
The game: interventional, ``v(S) = mean_b m(x_S, b_-S)`` over B background rows drawn with the
seed from the training rows, played by the posterior mean ``gpr.predict``.

* **ours**: ``gx.shapley_interactions(gx.from_sklearn(gpr), X, background=B rows)``, k-SII of
  order 2 (d order-1 values and d (d - 1) / 2 pairs), mean only and mean + full covariance;
* **shapiq 1.4.1** ``ExactComputer`` (d <= 14: 2^d coalitions, each B predictions) on the
  same game, and its approximators ``KernelSHAPIQ``, ``SVARMIQ`` and
  ``PermutationSamplingSII`` (k-SII, order 2) at growing budgets (coalitions evaluated).

Errors are max |value - ours| over points and values, relative to max |ours|; ours agrees with
``ExactComputer`` to round-off, which validates both. "At equal time": the approximator's
error at the largest budget whose time per point does not exceed ours (mean + covariance);
"at equal error": the time per point an approximator needed to get within 1% (relative) of
the exact values, against ours (which is exact to round-off), or None if no budget tried got
there. The machine is shared with other jobs (2 cores): wall-clock times are indicative.

Run from the repository root::

    GPEXPLAIN_DATA_DIR=../shared/data .venv/bin/python benchmarks/gp_interactions_speed.py
    ... benchmarks/gp_interactions_speed.py --quick      # concrete only, 1 point, no JSON

Results: ``benchmarks/results/gp_interactions_speed.json``.
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

EXACT_MAX_D = 14
BUDGETS = (64, 256, 1024, 4096)
TARGET_ERROR = 1e-2


def posterior_mean_game(gpr, x, background):
    """shapiq's game: a (coalitions, d) boolean matrix -> v(S) on the posterior mean."""

    def game(coalitions):
        coalitions = np.atleast_2d(coalitions).astype(bool)
        rows = np.repeat(background[None], len(coalitions), axis=0)
        mask = np.repeat(coalitions[:, None, :], len(background), axis=1)
        rows = np.where(mask, x, rows)
        values = gpr.predict(rows.reshape(-1, x.shape[0]))
        return values.reshape(len(coalitions), len(background)).mean(1)

    return game


def as_vector(values, n_features):
    pairs = [(i, j) for i in range(n_features) for j in range(i + 1, n_features)]
    return np.array([values[(i,)] for i in range(n_features)] + [values[p] for p in pairs])


def run_dataset(name, n_rows, n_points, n_background, seed):
    import shapiq

    setup = case(name, n_rows, n_points, n_background, seed)
    X_explain, gpr, background = setup.X_explain, setup.gpr, setup.background
    posterior, d = setup.posterior, setup.n_features
    record = {**setup.record, "n_values": d + d * (d - 1) // 2, "index": "k-SII"}
    methods = record["methods"]
    ours, seconds = timed(lambda: gx.shapley_interactions(
        posterior, X_explain, background=background, return_cov=False), n_points)
    scale = float(np.abs(ours.mean).max())
    methods["ours (mean only)"] = {"seconds_per_point": seconds,
                                   "efficiency_gap": ours.efficiency_gap()["mean"]}
    full, seconds = timed(lambda: gx.shapley_interactions(
        posterior, X_explain, background=background), n_points)
    ours_full_seconds = seconds
    methods["ours (mean + covariance)"] = {
        "seconds_per_point": seconds,
        "max_relative_difference_to_mean_only": float(np.abs(full.mean - ours.mean).max()
                                                      / scale),
        "efficiency_gap": full.efficiency_gap()}
    games = [posterior_mean_game(gpr, x, background) for x in X_explain]
    if d <= EXACT_MAX_D:
        values, seconds = timed(lambda: np.array([as_vector(shapiq.ExactComputer(
            game, n_players=d)(index="k-SII", order=2), d) for game in games]), n_points)
        methods["shapiq ExactComputer"] = {
            "seconds_per_point": seconds,
            "max_relative_error": float(np.abs(values - ours.mean).max() / scale),
            "max_abs_error": float(np.abs(values - ours.mean).max())}
    approximators = {
        "shapiq KernelSHAPIQ": lambda: shapiq.KernelSHAPIQ(d, 2, "k-SII", random_state=seed),
        "shapiq SVARMIQ": lambda: shapiq.SVARMIQ(d, 2, "k-SII", random_state=seed),
        "shapiq PermutationSamplingSII": lambda: shapiq.PermutationSamplingSII(
            d, 2, "k-SII", random_state=seed),
    }
    for label, make in approximators.items():
        runs = []
        for budget in BUDGETS:
            if budget > 2 ** d and runs:
                break
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                values, seconds = timed(lambda b=budget, new=make: np.array([as_vector(
                    new().approximate(b, game), d) for game in games]), n_points)
            runs.append({"budget": budget, "seconds_per_point": seconds,
                         "max_relative_error": float(np.abs(values - ours.mean).max() / scale)})
        within_time = [r for r in runs if r["seconds_per_point"] <= ours_full_seconds]
        accurate = [r for r in runs if r["max_relative_error"] <= TARGET_ERROR]
        methods[label] = {
            "budgets": runs,
            "error_at_equal_time": within_time[-1]["max_relative_error"] if within_time
            else None,
            "seconds_per_point_to_1_percent_error": accurate[0]["seconds_per_point"] if accurate
            else None,
        }
    for label, entry in methods.items():
        seconds = entry.get("seconds_per_point")
        if seconds is not None:
            entry["time_ratio_to_ours_with_covariance"] = seconds / ours_full_seconds
        print(f"  {label:34s} {entry}")
    return record


def main():
    args = arguments(n_points=2, n_background=10)
    warnings.filterwarnings("ignore")
    plan = {"wine-red": 1000, "concrete": 1000, "pumadyn-32nm": 1000}
    if args.quick:
        plan, args.n_points = {"concrete": 300}, 1
    payload = {"machine": machine_info(note="machine shared with other jobs (2 cores): "
                                            "wall-clock times are indicative"),
               "game": "interventional, background rows drawn with the seed, posterior mean",
               "target_error_for_equal_error": TARGET_ERROR, "datasets": {}}
    for name, n_rows in plan.items():
        print(name, flush=True)
        payload["datasets"][name] = run_dataset(name, n_rows, args.n_points, args.n_background,
                                                args.seed)
    if not args.quick:
        print("wrote", write_results("gp_interactions_speed", payload))


if __name__ == "__main__":
    main()
