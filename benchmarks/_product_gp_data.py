"""Data sets and the scikit-learn GP shared by ``gp_shap_speed.py`` and
``gp_sensitivity_speed.py``: wine red, concrete and pumadyn-32nm from ``GPEXPLAIN_DATA_DIR``.

Each model is scikit-learn's ``GaussianProcessRegressor(ConstantKernel * RBF(ARD) +
WhiteKernel, normalize_y=True)``: hyperparameters fitted on a seeded subset of 200 rows (one
L-BFGS start, to spare the shared CPU), then conditioned on n rows with ``optimizer=None``.
"""

from __future__ import annotations

import time

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
