"""Data and run helpers shared by the three GPX benchmarks (Yoshikawa and Iwata 2021).

The six tabular data sets of the paper's Sec. 5.1 and Table 6, read from ``$GPEXPLAIN_DATA_DIR``
or scikit-learn's offline copies, with the paper's protocol: random 80/20 training/test splits,
X and y standardised (here with the *training* split's statistics, so that nothing about the
test rows leaks into training; MSEs are in units of the training variance of y).
"""

from __future__ import annotations

import os

# One core, waiting passively: the benchmarks are specified for one core of a shared machine,
# and spinning OpenMP threads would steal the other. Must be set before NumPy and torch load.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse
import time
from dataclasses import dataclass

import numpy as np
import pandas as pd
from _common import data_path, machine_info
from sklearn.datasets import load_diabetes, load_digits

DATASETS = ("digits", "abalone", "diabetes", "boston", "fish", "wine")

def load(name: str) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Features, target and feature names of one of ``DATASETS`` (Table 6 sizes).

    Digits: labels 0-4 become -1 and 5-9 become +1 (Sec. 5.1). Abalone: the sex column is
    one-hot encoded (3 columns + 7 measurements = the paper's d = 10). Wine: red and white
    concatenated (6497 rows, 11 features).
    """
    if name == "digits":
        digits = load_digits()
        y = np.where(digits.target <= 4, -1.0, 1.0)
        return digits.data.astype(float), y, [f"pixel_{i}" for i in range(64)]
    if name == "diabetes":
        diabetes = load_diabetes()
        return diabetes.data, diabetes.target.astype(float), list(diabetes.feature_names)
    if name == "abalone":
        columns = ["sex", "length", "diameter", "height", "whole", "shucked", "viscera",
                   "shell", "rings"]
        frame = pd.read_csv(data_path("abalone", "abalone.data"), header=None, names=columns)
        sex = pd.get_dummies(frame.pop("sex"), prefix="sex", dtype=float)
        y = frame.pop("rings").to_numpy(float)
        X = pd.concat([sex, frame], axis=1)
        return X.to_numpy(float), y, list(X.columns)
    if name == "boston":
        frame = pd.read_csv(data_path("boston", "boston_housing.csv"))
        target = "medv"
    elif name == "fish":
        frame = pd.read_csv(data_path("fish_toxicity", "qsar_fish_toxicity.csv"))
        target = "LC50"
    elif name == "wine":
        frame = pd.concat(
            [
                pd.read_csv(data_path("wine_quality", f"winequality-{colour}.csv"), sep=";")
                for colour in ("red", "white")
            ],
            ignore_index=True,
        )
        target = "quality"
    else:
        raise ValueError(f"unknown data set {name!r}; choose one of {DATASETS}.")
    y = frame.pop(target).to_numpy(float)
    return frame.to_numpy(float), y, list(frame.columns)


@dataclass
class Split:
    """One standardised training/test split (X and y scaled by training statistics)."""

    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    n_train_full: int  # training rows before any subsampling


def splits(name: str, n_splits: int, max_train: int | None = None, max_test: int | None = None,
           seed: int = 0) -> list[Split]:
    """``n_splits`` seeded random 80/20 splits of a data set, standardised on the training rows.

    ``max_train`` / ``max_test`` keep a seeded random subset of the training / test rows
    (a reduction for the one-core time budget; recorded by the callers). Constant training
    columns (blank Digits pixels) are centred but not scaled.
    """
    X, y, _ = load(name)
    result = []
    for index in range(n_splits):
        rng = np.random.default_rng(seed + index)
        order = rng.permutation(len(y))
        n_train = int(round(0.8 * len(y)))
        train, test = order[:n_train], order[n_train:]
        if max_train is not None and train.size > max_train:
            train = train[:max_train]  # already a random permutation
        if max_test is not None and test.size > max_test:
            test = test[:max_test]
        x_mean, x_std = X[train].mean(axis=0), X[train].std(axis=0)
        x_std = np.where(x_std > 0, x_std, 1.0)
        y_mean, y_std = y[train].mean(), y[train].std()
        result.append(
            Split(
                X_train=(X[train] - x_mean) / x_std,
                y_train=(y[train] - y_mean) / y_std,
                X_test=(X[test] - x_mean) / x_std,
                y_test=(y[test] - y_mean) / y_std,
                n_train_full=n_train,
            )
        )
    return result


def add_common_arguments(parser: argparse.ArgumentParser, splits: int, max_train: int | None
                         ) -> None:
    """Options shared by the benchmarks: splits, training-row cap, L-BFGS cap, seed, data sets."""
    parser.add_argument("--splits", type=int, default=splits)
    parser.add_argument("--max-train", type=int, default=max_train,
                        help="training rows kept per split (seeded random subset)")
    parser.add_argument("--max-iter", type=int, default=100, help="L-BFGS iterations per fit")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS))


def timed(function, *args, **kwargs):
    """(result, wall-clock seconds) of one call."""
    start = time.perf_counter()
    result = function(*args, **kwargs)
    return result, time.perf_counter() - start


def run_datasets(run_dataset, args) -> tuple[dict, dict]:
    """``{name: run_dataset(name, args)}`` over ``args.datasets``, and the machine record.

    The record (``_common.machine_info``, taken before the runs) gets their wall-clock
    ``total_seconds``.
    """
    machine = machine_info()
    start = time.perf_counter()
    results = {name: run_dataset(name, args) for name in args.datasets}
    machine["total_seconds"] = time.perf_counter() - start
    return results, machine


def mean_std(values) -> dict:
    """Mean and (population) standard deviation of a list of numbers, as the paper reports."""
    values = np.asarray(values, dtype=float)
    return {"mean": float(values.mean()), "std": float(values.std()), "values": values.tolist()}
