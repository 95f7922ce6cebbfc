"""Breast cancer diagnosis (Wisconsin diagnostic data, 569 patients, 30 features, M/B) with a
GP classifier: accuracy against scikit-learn's GaussianProcessClassifier, and which cell-nucleus
measurements drive the diagnosis of individual patients, with uncertainty.

The file ``breast_cancer_wisconsin/wdbc.data`` (UCI; no header; column 0 the ID, column 1 the
diagnosis M or B, columns 2-31 the features) is read from ``--data`` or from the folder named
by the ``GPEXPLAIN_DATA_DIR`` setting. Explanations are integrated gradients of the expected
probability of malignancy, with their exact posterior covariance (the std shown), baseline the
mean training patient; the one function ``explain`` makes the call (``output="latent"``
there would explain the log-odds instead, an exact Gaussian).

Run: ``GPEXPLAIN_DATA_DIR=... .venv/bin/python examples/wdbc_diagnosis.py [--out DIR]``.
"""

import argparse
import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from sklearn.gaussian_process import GaussianProcessClassifier
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

import gpexplain as gx

MEASUREMENTS = [
    "radius", "texture", "perimeter", "area", "smoothness", "compactness", "concavity",
    "concave points", "symmetry", "fractal dimension",
]
# The 30 features: the mean, the standard error and the worst value of each measurement.
FEATURES = [f"{statistic} {name}" for statistic in ("mean", "se", "worst")
            for name in MEASUREMENTS]


def load(path: Path) -> tuple[pd.DataFrame, pd.Series]:
    table = pd.read_csv(path, header=None)
    X = table.iloc[:, 2:].set_axis(FEATURES, axis=1).astype(float)
    y = table.iloc[:, 1].map({"M": "malignant", "B": "benign"}).rename("diagnosis")
    return X, y


def explain(model, X, baseline):
    """Integrated gradients of E[P(malignant)] (classes_[1]) at the rows X, with their
    posterior covariance."""
    return gx.integrated_gradients(model, X, baseline=baseline)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("examples-out"))
    parser.add_argument("--data", type=Path, default=None, help="path of wdbc.data")
    args = parser.parse_args()
    path = args.data
    if path is None:
        if "GPEXPLAIN_DATA_DIR" not in os.environ:
            sys.exit("give --data PATH/wdbc.data or set GPEXPLAIN_DATA_DIR")
        path = Path(os.environ["GPEXPLAIN_DATA_DIR"]) / "breast_cancer_wisconsin" / "wdbc.data"
    args.out.mkdir(parents=True, exist_ok=True)

    X, y = load(path)
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=0.3, random_state=0, stratify=y
    )
    model = gx.GPClassifier(kernel="ard", n_inducing=32, random_state=0).fit(X_train, y_train)
    reference = make_pipeline(StandardScaler(), GaussianProcessClassifier(random_state=0))
    reference.fit(X_train, y_train)
    print(f"held-out accuracy: GPClassifier {model.score(X_test, y_test):.3f}, "
          f"scikit-learn GaussianProcessClassifier {reference.score(X_test, y_test):.3f}")

    attr = explain(model, X_test.iloc[:20], baseline="mean")
    gap = attr.completeness_gap()["mean"]
    print(f"completeness gap (sum of attributions vs E[p] difference): {gap:.2g}")
    malignant = model.predict_proba(X_test.iloc[:1])[0, 1]
    order = np.argsort(-np.abs(attr.mean[0]))[:5]
    print(f"patient {X_test.index[0]} ({y_test.iloc[0]}), P(malignant) = {malignant:.3f}; "
          "largest attributions to P(malignant) (mean +- std):")
    for k in order:
        print(f"  {FEATURES[k]:<24} {attr.mean[0, k]:+.3f} +- {attr.std[0, k]:.3f}")
    gx.plot.plot_global_importance(attr).savefig(args.out / "wdbc_importance.png", dpi=120)
    gx.plot.plot_attributions(attr, max_points=2).savefig(
        args.out / "wdbc_attributions.png", dpi=120
    )
    print(f"figures: {args.out}/wdbc_importance.png, wdbc_attributions.png")


if __name__ == "__main__":
    main()
