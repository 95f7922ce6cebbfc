"""Data sets and the scikit-learn GP shared by ``gp_shap_speed.py``, ``gp_sensitivity_speed.py``,
``gp_interactions_speed.py`` and ``variance_attribution_speed.py``: wine red, concrete and
pumadyn-32nm from ``GPEXPLAIN_DATA_DIR``.

Each model is scikit-learn's ``GaussianProcessRegressor(ConstantKernel * RBF(ARD) +
WhiteKernel, normalize_y=True)``: hyperparameters fitted on a seeded subset of 200 rows (one
L-BFGS start, to spare the shared CPU), then conditioned on n rows with ``optimizer=None``.
"""

from __future__ import annotations

import argparse
import time
from types import SimpleNamespace

import numpy as np
import pandas as pd
from _common import data_path

DATASETS = {
    # name: (path parts, read options, target column: name or position)
    "wine-red": (("wine_quality", "winequality-red.csv"), {"sep": ";"}, "quality"),
    "concrete": (("concrete", "Concrete_Data.csv"), {}, -1),
    "pumadyn-32nm": (("large", "pumadyn32nm.csv.gz"), {"header": None}, -1),
}
N_FIT = 200


def load(name: str, n_rows: int, seed: int):
    """(X, y) of ``n_rows`` seeded rows, as float64 arrays, plus the feature names."""
    parts, options, target = DATASETS[name]
    frame = pd.read_csv(data_path(*parts), **options).drop_duplicates()
    y = frame[target] if isinstance(target, str) else frame.iloc[:, target]
    X = frame.drop(columns=[y.name])
    rows = np.random.default_rng(seed).permutation(len(frame))[:n_rows]
    return X.to_numpy(float)[rows], y.to_numpy(float)[rows], [str(c) for c in X.columns]


def timed(function, n_points):
    """``(function(), wall-clock seconds per point)``."""
    start = time.perf_counter()
    result = function()
    return result, (time.perf_counter() - start) / n_points


def fit_sklearn_gp(X, y, seed: int):
    """The ARD GP of the module docstring, conditioned on all of (X, y)."""
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel

    d = X.shape[1]
    kernel = ConstantKernel(1.0) * RBF(X.std(0) * np.sqrt(d)) + WhiteKernel(0.1)
    subset = np.random.default_rng(seed).permutation(len(X))[:N_FIT]
    scaled = GaussianProcessRegressor(kernel, normalize_y=True, random_state=seed)
    scaled.fit(X[subset], y[subset])
    return GaussianProcessRegressor(scaled.kernel_, normalize_y=True, optimizer=None).fit(X, y)


def case(name: str, n_rows: int, n_points: int, n_background: int, seed: int):
    """One data set's comparison set-up: ``n_rows`` training rows and the ``n_points`` rows to
    explain, the fitted GP and its posterior, ``n_background`` seeded background rows, and
    the start of the result ``record`` (a namespace of those)."""
    import gpexplain as gx

    X, y, names = load(name, n_rows + n_points, seed)
    X_train, y_train, X_explain = X[:n_rows], y[:n_rows], X[n_rows:]
    gpr = fit_sklearn_gp(X_train, y_train, seed)
    background = X_train[np.random.default_rng(seed).choice(n_rows, n_background,
                                                            replace=False)]
    record = {"n_train": n_rows, "n_features": X.shape[1], "n_points": n_points,
              "n_background": n_background, "kernel": str(gpr.kernel_), "methods": {}}
    return SimpleNamespace(X_train=X_train, y_train=y_train, X_explain=X_explain, names=names,
                           gpr=gpr, posterior=gx.from_sklearn(gpr), background=background,
                           record=record, n_features=X.shape[1])


def arguments(n_points: int, n_background: int) -> argparse.Namespace:
    """The command-line options of those benchmarks, with their defaults."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--n-points", type=int, default=n_points)
    parser.add_argument("--n-background", type=int, default=n_background)
    parser.add_argument("--seed", type=int, default=0)
    return parser.parse_args()
