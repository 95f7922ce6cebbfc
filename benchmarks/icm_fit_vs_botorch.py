"""``gx.GPRegressor(multi_output="icm")`` against BoTorch's ``MultiTaskGP`` on the same real data.

Wine red (UCI): targets ``quality`` and ``alcohol`` (two outputs observed at every row),
features volatile acidity, sulphates, citric acid and density; 100 seeded rows, the first 60 to
fit, the last 40 held out. Ours: an ARD-SE ICM with full-rank B and noise per output, maximum
marginal likelihood (``gpexplain.models._icm``). BoTorch 0.18: ``MultiTaskGP`` on the same rows
expanded to (row, task) pairs, ``fit_gpytorch_mll`` (its defaults: ``Standardize(m=1)``,
``PositiveIndexKernel`` with a prior, dimension-scaled lengthscale priors, per-task noise).
Recorded: the log marginal likelihood of both fitted posteriors evaluated by the same function
(``CoregionalizedPosterior.log_marginal_likelihood``, units of y; BoTorch's optimum is a MAP
under its priors, so it need not be higher), held-out RMSE per output, B, and fit times (the
machine is shared: indicative only). Too slow for the test suite (BoTorch's fit takes about
100 s here), hence a benchmark.

Run from the repository root::

    GPEXPLAIN_DATA_DIR=../shared/data .venv/bin/python benchmarks/icm_fit_vs_botorch.py

Results: ``benchmarks/results/icm_fit_vs_botorch.json``.
"""

from __future__ import annotations

import time
import warnings

import numpy as np
import pandas as pd
from _common import data_path, machine_info, write_results

import gpexplain as gx

FEATURES = ["volatile acidity", "sulphates", "citric acid", "density"]
TARGETS = ["quality", "alcohol"]


def main():
    import torch
    from botorch.fit import fit_gpytorch_mll
    from botorch.models import MultiTaskGP
    from gpytorch.mlls import ExactMarginalLogLikelihood

    info = machine_info()
    wine = pd.read_csv(data_path("wine_quality", "winequality-red.csv"), sep=";")
    wine = wine.sample(100, random_state=0)
    X, Y = wine[FEATURES].to_numpy(), wine[TARGETS].to_numpy()
    X_fit, Y_fit, X_test, Y_test = X[:60], Y[:60], X[60:], Y[60:]
    start = time.perf_counter()
    ours = gx.GPRegressor(multi_output="icm").fit(X_fit, Y_fit).posterior_
    ours_seconds = time.perf_counter() - start
    n = len(X_fit)
    train_X = torch.tensor(np.r_[np.c_[X_fit, np.zeros(n)], np.c_[X_fit, np.ones(n)]])
    train_Y = torch.tensor(np.r_[Y_fit[:, 0], Y_fit[:, 1]])[:, None]
    start = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = MultiTaskGP(train_X, train_Y, task_feature=-1)
        fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
    botorch_seconds = time.perf_counter() - start
    theirs = gx.as_multi_output(model)
    rows = {}
    for name, posterior, seconds in (("gpexplain", ours, ours_seconds),
                                     ("botorch", theirs, botorch_seconds)):
        mean = posterior.predict(X_test)[0]
        rows[name] = {
            "fit_seconds": seconds,
            "log_marginal_likelihood": posterior.log_marginal_likelihood(),
            "heldout_rmse": dict(zip(TARGETS, np.sqrt(((mean - Y_test) ** 2).mean(0)).tolist(),
                                     strict=True)),
            "coregionalization": posterior.coregionalization.tolist(),
        }
        print(name, rows[name])
    write_results("icm_fit_vs_botorch", {
        "benchmark": "icm_fit_vs_botorch", "data": "wine red", "features": FEATURES,
        "targets": TARGETS, "n_fit": 60, "n_test": 40, "results": rows, "machine": info,
    })


if __name__ == "__main__":
    main()
