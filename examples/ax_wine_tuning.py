"""Tuning a scikit-learn model with Ax, explained: what drives the score, why the surrogate is
unsure, and why Ax proposes its next trial.

An Ax 1.1 ``Client`` (seeded) tunes four hyperparameters of scikit-learn's
``HistGradientBoostingRegressor`` on the UCI red-wine quality data (1,599 wines, 11
measurements): ``learning_rate``, ``max_leaf_nodes``, ``min_samples_leaf`` and
``l2_regularization`` (linear scales: ``gx.from_ax`` refuses log-scale parameters, whose
surrogate is not a GP in the parameter itself), minimising the 3-fold cross-validated RMSE of
wine quality. After the trials (8 Sobol, then Ax's default BoTorch generation:
``SingleTaskGP`` + qLogNoisyExpectedImprovement):

1. **sensitivity card**: ``gx.ax.sensitivity`` of the RMSE surrogate over the search box:
   exact first-order and total Sobol indices and Shapley effects of its posterior mean, each
   with the posterior standard deviation of the (unnormalised) variance, as a table and a
   figure with error bars (``ax_sensitivity.png``);
2. **why the surrogate is unsure**: ``gx.explain_variance`` of its posterior variance at the
   proposed candidate and at the last trials: exact Shapley values of the baseline game (from
   the best trial), and the closed-form integrated gradients, both complete
   (``ax_variance_waterfall.png``);
3. **why Ax proposes the next trial**: ``gx.ax.explain_candidate``, integrated gradients of
   Ax's own acquisition value (qLogNoisyExpectedImprovement) at the proposed (not yet run)
   candidate; the analytic log expected improvement on the same surrogate; and the
   exploitation / exploration split of an upper confidence bound (``gx.explain_acquisition``;
   Ax's surrogate is in its standardised outcome units). BoTorch's qLogNEI is numerically
   discontinuous where its value crosses about log(eps) = -36 (measured: a jump of 19 on a
   Hartmann-6 surrogate): its completeness gap is then reported (``CompletenessWarning``),
   while the analytic log EI is complete to round-off.

Integer hyperparameters are modelled by Ax's GP as numbers; the sensitivity box is their
continuous range.

Run: ``GPEXPLAIN_DATA_DIR=../shared/data .venv/bin/python examples/ax_wine_tuning.py
[--trials 30] [--out DIR]`` (about 5 minutes on 2 cores; needs ``pip install
"gpexplain[ax]"``).
"""

from __future__ import annotations

import argparse
import logging
import os
import time
import warnings
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")  # scikit-learn's OpenMP on a shared machine

import numpy as np
import pandas as pd

PARAMETERS = {  # name: (type, low, high)
    "learning_rate": ("float", 0.02, 0.3),
    "max_leaf_nodes": ("int", 4, 64),
    "min_samples_leaf": ("int", 5, 100),
    "l2_regularization": ("float", 0.0, 5.0),
}


def load_wine():
    root = os.environ.get("GPEXPLAIN_DATA_DIR")
    if not root:
        raise SystemExit("set GPEXPLAIN_DATA_DIR to the folder holding the real data sets")
    frame = pd.read_csv(Path(root) / "wine_quality" / "winequality-red.csv", sep=";")
    return frame.drop(columns="quality").to_numpy(float), frame["quality"].to_numpy(float)


def cv_rmse(parameters, X, y, seed):
    from sklearn.ensemble import HistGradientBoostingRegressor
    from sklearn.model_selection import KFold, cross_val_score

    model = HistGradientBoostingRegressor(max_iter=100, random_state=seed, **parameters)
    folds = KFold(3, shuffle=True, random_state=seed)
    scores = cross_val_score(model, X, y, cv=folds, scoring="neg_root_mean_squared_error")
    return float(-scores.mean())


def tune(n_trials: int, seed: int):
    from ax import Client, RangeParameterConfig

    X, y = load_wine()
    client = Client(random_seed=seed)
    client.configure_experiment(parameters=[
        RangeParameterConfig(name=name, parameter_type=kind, bounds=(low, high))
        for name, (kind, low, high) in PARAMETERS.items()])
    client.configure_optimization(objective="-rmse")
    start = time.perf_counter()
    for _ in range(n_trials):
        for index, parameters in client.get_next_trials(max_trials=1).items():
            client.complete_trial(index, raw_data={"rmse": cv_rmse(parameters, X, y, seed)})
    print(f"{n_trials} trials in {time.perf_counter() - start:.0f} s")
    return client


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("examples-out"))
    args = parser.parse_args()
    logging.getLogger("ax").setLevel(logging.WARNING)
    import matplotlib

    matplotlib.use("Agg")
    import torch
    from botorch.acquisition import LogExpectedImprovement, UpperConfidenceBound

    import gpexplain as gx
    from gpexplain.plot import plot_waterfall

    warnings.filterwarnings("ignore")
    warnings.filterwarnings("default", category=gx.CompletenessWarning)  # measured gaps

    args.out.mkdir(parents=True, exist_ok=True)
    client = tune(args.trials, args.seed)
    frame = client.summarize()
    best = frame.loc[frame["rmse"].idxmin()]
    names = list(PARAMETERS)
    print("best trial:", int(best["trial_index"]), f"rmse {best['rmse']:.4f}",
          {name: best[name] for name in names})

    # 1. sensitivity card (the surrogate the generation strategy proposes with)
    card = gx.ax.sensitivity(client, "rmse")
    pd.set_option("display.width", 160)
    print("\nSensitivity of the CV RMSE over the search box (indices of the posterior mean; "
          "variances with posterior std):")
    print(card.table.to_string(float_format=lambda v: f"{v:.3g}"))
    card.figure().savefig(args.out / "ax_sensitivity.png", dpi=120, bbox_inches="tight")

    # 3 first: propose the next candidate (not run), then explain everything at it
    (candidate_index, candidate), = client.get_next_trials(max_trials=1).items()
    surrogate = gx.from_ax(client)["rmse"]
    point = np.array([[candidate[name] for name in names]], dtype=float)
    print("\nproposed candidate:", candidate)
    mean, variance = surrogate.predict(point)
    print(f"surrogate at the candidate: rmse {mean[0]:.4f} +- {np.sqrt(variance[0]):.4f}")

    # 2. why the surrogate is unsure
    incumbent = best[names].to_numpy(float)
    shapley = gx.explain_variance(surrogate, point, baseline=incumbent)
    ig = gx.explain_variance(surrogate, point, method="ig", baseline=incumbent)
    print(f"\nposterior variance at the candidate {shapley.prediction[0]:.3g} against "
          f"{shapley.baseline_prediction:.3g} at the best trial; by parameter:")
    table = pd.DataFrame({"exact Shapley (baseline game)": shapley.mean[0],
                          "integrated gradients (closed form)": ig.mean[0]}, index=names)
    print(table.to_string(float_format=lambda v: f"{v:.3g}"))
    print("completeness gaps:", shapley.completeness_gap()["mean"], ig.completeness_gap()["mean"])
    plot_waterfall(shapley, 0).savefig(args.out / "ax_variance_waterfall.png", dpi=120,
                                       bbox_inches="tight")

    # 3. why Ax proposes it: its own acquisition value, and a UCB split
    why = gx.ax.explain_candidate(client, candidate_index)
    total = why.total
    print(f"\n{total.method}: alpha(candidate) {total.prediction[0]:.4f}, "
          f"alpha(mean of the trials) {total.baseline_prediction:.4f}")
    print(pd.Series(total.mean[0], index=names).round(4).to_string())
    print("completeness gap:", total.completeness_gap()["mean"])
    model = gx.posterior.ax.ax_adapter(client).generator.surrogate.model
    # Ax minimises the RMSE through the objective "-rmse": its model's outcome is the RMSE
    # (standardised), so the improvement is downwards.
    log_ei = gx.explain_acquisition(
        LogExpectedImprovement(model, best_f=model.train_targets.min(), maximize=False), point,
        feature_names=names, baseline=why.total.baseline).total
    print(f"\nanalytic log EI on the same surrogate: {log_ei.prediction[0]:.4f} against "
          f"{log_ei.baseline_prediction:.4f}; completeness gap "
          f"{log_ei.completeness_gap()['mean']:.2g}")
    print(pd.Series(log_ei.mean[0], index=names).round(4).to_string())
    ucb = gx.explain_acquisition(UpperConfidenceBound(model, beta=2.0, maximize=False), point,
                                 feature_names=names)
    split = pd.DataFrame({"exploitation (-mean)": ucb.exploitation.mean[0],
                          "+- std": ucb.exploitation.std[0],
                          "exploration (sqrt(beta) s)": ucb.exploration.mean[0],
                          "UCB total": ucb.total.mean[0]}, index=names)
    print("\nUCB (beta = 2, minimising, standardised units) at the candidate:")
    print(split.round(4).to_string())
    print("split gap:", ucb.split_gap())
    del torch  # imported for BoTorch's settings only
    print(f"\nfigures in {args.out}")


if __name__ == "__main__":
    main()
