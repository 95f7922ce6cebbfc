"""Classifier fit speed: ``GPClassifier`` against scikit-learn's ``GaussianProcessClassifier``.

Two real problems, each split 75/25 (stratified, seed 0), features standardised on the
training rows for scikit-learn (``GPClassifier`` standardises internally):

* breast cancer diagnosis (``$GPEXPLAIN_DATA_DIR/breast_cancer_wisconsin/wdbc.data``, 569
  rows, 30 features, M vs B);
* the digits bundled with scikit-learn (``load_digits``, 8x8 pixels / 16, 10 classes):
  ``digits-800``, 800 seeded rows (600 to fit, 200 held out), with every contender;
  ``digits-400 seed s`` for s = 1..5, 400 rows drawn and split with seed s (300 to fit, 100
  held out), with every contender: one 200-digit test set decides accuracy by single digits,
  so five draws say whether a difference holds across data; and ``digits``, all 1,797 rows
  (1,347 to fit, 450 held out), gpexplain only unless ``--sklearn-full-digits``:
  scikit-learn's one-vs-rest Laplace fit of 1,347 rows took over 16 minutes of CPU on 2
  cores (and was not finished then); its 600-row fit's 361 s scaled by (1347 / 600)^3 puts
  it near an hour.

Fitted, each with the library's default threads (gpexplain applies its own policy,
``gpexplain._threads``; scikit-learn uses every core):

* ``GPClassifier()``, the Python default (inducing points chosen from the rows and classes:
  64 for one latent, 16 per class for the 10 digits; the ELBO's tolerance);
* the command line's classifier, built by its model-family entry for the training rows
  (``FAMILIES.get("classifier")``: the same default unless ``--n-inducing`` is given);
* ``GaussianProcessClassifier(ConstantKernel() * RBF(1.0))`` (``1.0 * RBF(1.0)``, one
  isotropic lengthscale), Laplace, its hyperparameters optimised (scikit-learn's own default
  kernel keeps them fixed), one-vs-rest for digits, on standardised features and, for the
  digits, also on the pixels as they are (standardising nearly blank pixels hurts an
  isotropic kernel).

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
from gpexplain.models.families import FAMILIES, Settings

SEED = 0
DIGITS_ROWS = 800
SMALL_DIGITS_ROWS, SMALL_DIGITS_SEEDS = 400, (1, 2, 3, 4, 5)


def wdbc():
    table = pd.read_csv(data_path("breast_cancer_wisconsin", "wdbc.data"), header=None)
    return table.iloc[:, 2:].to_numpy(float), (table[1] == "M").astype(int).to_numpy()


def digits_subset(n_rows, seed):
    def load():
        X, y = load_digits(return_X_y=True)
        rows = np.random.default_rng(seed).choice(len(X), n_rows, replace=False)
        return X[rows] / 16.0, y[rows]
    return load


def digits():
    X, y = load_digits(return_X_y=True)
    return X / 16.0, y


def timed_fit(make, X_train, y_train, X_test, y_test):
    start_time, start_cpu = time.perf_counter(), time.process_time()
    model = make().fit(X_train, y_train)
    seconds = time.perf_counter() - start_time, time.process_time() - start_cpu
    probabilities = model.predict_proba(X_test)
    fitted = {"n_inducing_per_latent": model.inducing_points_[0].shape[0],
              "elbo": model.elbo_} if hasattr(model, "elbo_") else {}
    return {
        "fit_seconds": seconds[0], "fit_cpu_seconds": seconds[1],
        "accuracy": accuracy_score(y_test, model.classes_[probabilities.argmax(1)]),
        "log_loss": log_loss(y_test, probabilities, labels=model.classes_), **fitted,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="wdbc only; no JSON written")
    parser.add_argument("--sklearn-full-digits", action="store_true",
                        help="also fit scikit-learn on all 1,347 training digits (long)")
    args = parser.parse_args()
    info = machine_info(note="one run each on a 2-core machine shared with other jobs (load "
                        "averages recorded): CPU seconds are the measure")
    problems = {"wdbc": (wdbc, SEED)}  # name: (loader, seed of the split)
    if not args.quick:
        problems["digits-800"] = (digits_subset(DIGITS_ROWS, SEED), SEED)
        problems.update({f"digits-{SMALL_DIGITS_ROWS} seed {seed}": (
            digits_subset(SMALL_DIGITS_ROWS, seed), seed) for seed in SMALL_DIGITS_SEEDS})
        problems["digits"] = (digits, SEED)
    rows = []
    for name, (load, split_seed) in problems.items():
        X, y = load()
        X_train, X_test, y_train, y_test = train_test_split(
            X, y, test_size=0.25, random_state=split_seed, stratify=y)
        scaler = StandardScaler().fit(X_train)
        # Constant pixels have zero spread: scale them by 1 (scikit-learn's scaler does).
        command_line = FAMILIES.get("classifier").parameters(
            Settings("ard", SEED, len(y_train)))
        contenders = {
            "gpexplain GPClassifier() (library default)": (
                lambda: gx.GPClassifier(random_state=SEED), X_train, X_test),
            f"gpexplain command-line classifier {command_line}": (
                lambda parameters=command_line: gx.GPClassifier(**parameters), X_train, X_test),
            "scikit-learn GaussianProcessClassifier (Laplace, 1.0 * RBF(1.0))": (
                lambda: GaussianProcessClassifier(ConstantKernel() * RBF(1.0),
                                                  random_state=SEED),
                scaler.transform(X_train), scaler.transform(X_test)),
        }
        if name.startswith("digits"):
            # Standardising pixels that are almost always blank blows single strokes up to
            # tens of standard deviations, which an isotropic kernel cannot down-weight:
            # scikit-learn also gets the pixels as they are (in [0, 1]).
            contenders["scikit-learn GaussianProcessClassifier (Laplace, 1.0 * RBF(1.0)), "
                       "pixels unscaled"] = (
                lambda: GaussianProcessClassifier(ConstantKernel() * RBF(1.0),
                                                  random_state=SEED), X_train, X_test)
        if name == "digits" and not args.sklearn_full_digits:
            contenders = dict(list(contenders.items())[:2])
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
                write_results("classifier_fit_speed", {
                    "machine": info, "results": rows, "small_digits_means": _means(rows)})


def _means(rows):
    """Per model, the mean accuracy, log loss and CPU seconds over the ``digits-400``
    draws finished so far, with the number of draws."""
    table = pd.DataFrame([row for row in rows
                          if row["data"].startswith(f"digits-{SMALL_DIGITS_ROWS} seed")])
    if table.empty:
        return {}
    grouped = table.groupby("model")
    means = grouped[["accuracy", "log_loss", "fit_cpu_seconds"]].mean()
    means["draws"] = grouped.size()
    return means.to_dict(orient="index")


if __name__ == "__main__":
    main()
