"""Classifier fit speed: ``GPClassifier`` against scikit-learn's ``GaussianProcessClassifier``.

Two real problems, each split 75/25 (stratified, seed 0), features standardised on the
training rows for scikit-learn (``GPClassifier`` standardises internally):

* breast cancer diagnosis (``$GPEXPLAIN_DATA_DIR/breast_cancer_wisconsin/wdbc.data``, 569
  rows, 30 features, M vs B);
* the digits bundled with scikit-learn (``load_digits``, 8x8 pixels, 10 classes): 800 seeded
  rows (600 to fit, 200 held out), because scikit-learn's one-vs-rest Laplace fit of all
  1,797 rows takes tens of minutes of CPU on 2 cores.

Fitted, each with the library's default threads (gpexplain applies its own policy,
``gpexplain._threads``; scikit-learn uses every core):

* ``GPClassifier()``, the Python default (64 inducing points);
* ``GPClassifier(n_inducing=256)``, the command line's default (``min(256, n)``);
* ``GaussianProcessClassifier(ConstantKernel() * RBF(1.0))``, Laplace, its hyperparameters
  optimised (scikit-learn's own default kernel keeps them fixed), one-vs-rest for digits.

Recorded: fit wall and CPU seconds (CPU is the measure on a shared machine), held-out
accuracy and log loss. One run each.

    GPEXPLAIN_DATA_DIR=../shared/data .venv/bin/python benchmarks/classifier_fit_speed.py
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np
import pandas as pd
from _common import data_path, machine_info, write_results
from sklearn.datasets import load_digits
from sklearn.gaussian_process import GaussianProcessClassifier
from sklearn.gaussian_process.kernels import RBF, ConstantKernel
from sklearn.metrics import accuracy_score, log_loss
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

import gpexplain as gx

SEED = 0
DIGITS_ROWS = 800


def wdbc():
    table = pd.read_csv(data_path("breast_cancer_wisconsin", "wdbc.data"), header=None)
    return table.iloc[:, 2:].to_numpy(float), (table[1] == "M").astype(int).to_numpy()


def digits():
    X, y = load_digits(return_X_y=True)
    rows = np.random.default_rng(SEED).choice(len(X), DIGITS_ROWS, replace=False)
    return X[rows] / 16.0, y[rows]


def timed_fit(make, X_train, y_train, X_test, y_test):
    start_time, start_cpu = time.perf_counter(), time.process_time()
    model = make().fit(X_train, y_train)
    seconds = time.perf_counter() - start_time, time.process_time() - start_cpu
    probabilities = model.predict_proba(X_test)
    return {
        "fit_seconds": seconds[0], "fit_cpu_seconds": seconds[1],
        "accuracy": accuracy_score(y_test, model.classes_[probabilities.argmax(1)]),
        "log_loss": log_loss(y_test, probabilities, labels=model.classes_),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="wdbc only; no JSON written")
    args = parser.parse_args()
    info = machine_info(note="one run each on a 2-core machine shared with other jobs (load "
                        "averages recorded): CPU seconds are the measure")
    problems = {"wdbc": wdbc} if args.quick else {"wdbc": wdbc, "digits": digits}
    rows = []
    for name, load in problems.items():
        X, y = load()
        X_train, X_test, y_train, y_test = train_test_split(
            X, y, test_size=0.25, random_state=SEED, stratify=y)
        scaler = StandardScaler().fit(X_train)
        # Constant pixels have zero spread: scale them by 1 (scikit-learn's scaler does).
        contenders = {
            "gpexplain GPClassifier() (64 inducing points)": (
                lambda: gx.GPClassifier(random_state=SEED), X_train, X_test),
            "gpexplain GPClassifier(n_inducing=256) (command line default)": (
                lambda: gx.GPClassifier(n_inducing=256, random_state=SEED), X_train, X_test),
            "scikit-learn GaussianProcessClassifier (Laplace)": (
                lambda: GaussianProcessClassifier(ConstantKernel() * RBF(1.0),
                                                  random_state=SEED),
                scaler.transform(X_train), scaler.transform(X_test)),
        }
        for label, (make, fit_rows, test_rows) in contenders.items():
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                row = {"data": name, "n_train": len(y_train), "n_test": len(y_test),
                       "n_features": X.shape[1], "n_classes": len(np.unique(y)),
                       "model": label, **timed_fit(make, fit_rows, y_train, test_rows, y_test)}
            rows.append(row)
            print(f"{name}: {label}: CPU {row['fit_cpu_seconds']:.1f} s, wall "
                  f"{row['fit_seconds']:.1f} s, accuracy {row['accuracy']:.3f}, log loss "
                  f"{row['log_loss']:.3f}", flush=True)
            if not args.quick:  # after every fit: a run cut short keeps what it finished
                write_results("classifier_fit_speed", {"machine": info, "results": rows})


if __name__ == "__main__":
    main()
