"""Seitz (2022) Sec. 6 / Figs. 3-5 on scikit-learn's bundled 8x8 digits: explaining GP classifiers.

The paper's MNIST 0-vs-1 study: a binary classifier with a sigmoid (logit) link and a 2-class
softmax classifier (two independent latent GPs) are fitted to the digits 0 and 1; for test
digits (one per class by default, the paper's four with ``--digits-per-class 2``), the
integrated gradients (baseline: the black image) of the expected probability of the correct
and of the wrong class are drawn as images, beside the posterior standard deviation image, as
in the paper, which explains probabilities:
``gx.integrated_gradients(model, X, baseline="zeros", output="probability", target_class=c)``.
Their covariance is exact for both models (second-order Stein over pairs of path nodes; the
2-class softmax is the logistic of the latent difference ``f_c - f_other``). With two classes
``p_wrong = 1 - p_correct``, so the attribution towards the wrong class is exactly minus the
one towards the correct class (the bottom row of the paper's Fig. 5 mirrors its top row) and
has the same covariance: the wrong class is explained with ``return_cov=False`` and one
standard-deviation image serves both (the printed check compares the two means). The
standard deviations exceed the means: the black baseline image is far from every training
digit, so the probability there is itself uncertain (``Var(p(x) - p(xt))`` about 0.13). The exact
covariance costs about 12 s per digit here (2-D quadratures of the logistic over up to 64^2
pairs of path nodes), hence the small default.

Then the full 10-class digits with a softmax classifier (a subsample, for time): one test
digit per class, explained towards its own class, also at the probability level. With C >= 3
classes the Stein expansion's expectations are 2C = 20-dimensional, so the covariance is a
randomised-QMC estimate (about 1.5 s per digit); its largest standard error is printed
(from ``method``): about 1e-4 for most digits (variances up to 0.04), but 0.03 for the one
the model gets wrong (the 6, E[p] = 0.06, variances up to 0.22), where the latents along
the path are uncertain; ``link=gx.links.Softmax(n_qmc=...)`` with more points reduces it.

Run: ``.venv/bin/python examples/digits_classifier.py [--out DIR] [--n-train-10 N]
[--digits-per-class K]``.
"""

import argparse
import re
import warnings
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

import gpexplain as gx


def _fit(X, y, **options):
    with warnings.catch_warnings():
        # The border pixels are constant (always 0): the model ignores them, by design.
        warnings.filterwarnings("ignore", message="constant column")
        return gx.GPClassifier(kernel="isotropic", random_state=0, **options).fit(X, y)


def _image_grid(figure, rows, titles, row_labels):
    """One row of 8x8 images per digit; mean images on a symmetric colour scale."""
    axes = figure.subplots(len(rows), len(titles), squeeze=False)
    for r, images in enumerate(rows):
        for c, (image, title) in enumerate(zip(images, titles, strict=True)):
            ax = axes[r, c]
            is_std = "std" in title
            is_digit = title == "digit"
            limit = np.max(np.abs(image)) or 1.0
            ax.imshow(
                image.reshape(8, 8),
                cmap="gray_r" if is_digit else ("viridis" if is_std else "RdBu_r"),
                vmin=None if is_digit or is_std else -limit,
                vmax=None if is_digit or is_std else limit,
            )
            ax.set_xticks([])
            ax.set_yticks([])
            if r == 0:
                ax.set_title(title, fontsize=8)
        axes[r, 0].set_ylabel(row_labels[r], fontsize=8)


def zero_vs_one(digits, out: Path, per_class: int) -> None:
    keep = digits.target < 2
    X_train, X_test, y_train, y_test = train_test_split(
        digits.data[keep], digits.target[keep], train_size=200, random_state=0,
        stratify=digits.target[keep],
    )
    shown = np.concatenate([np.flatnonzero(y_test == c)[:per_class] for c in (0, 1)])
    X_shown, correct = X_test[shown], y_test[shown]
    titles = ["digit", "IG mean, correct", "IG std (either)", "IG mean, wrong"]
    for name, link in (("sigmoid", "logit"), ("softmax_2class", "softmax")):
        model = _fit(X_train, y_train, link=link, n_inducing=16)
        print(f"0 vs 1, {name}: held-out accuracy {model.score(X_test, y_test):.3f}")
        rows, mirror_gap, completeness = [], 0.0, 0.0
        for x, c in zip(X_shown, correct, strict=True):
            towards = gx.integrated_gradients(model, x[None], baseline="zeros",
                                              output="probability", target_class=c)
            # p_wrong = 1 - p_correct: the same covariance, the opposite mean (checked below).
            away = gx.integrated_gradients(model, x[None], baseline="zeros",
                                           output="probability", target_class=1 - c,
                                           return_cov=False)
            mirror_gap = max(mirror_gap, float(np.max(np.abs(away.mean + towards.mean))))
            gaps = towards.completeness_gap()
            completeness = max(completeness, gaps["mean"], gaps["variance"])
            rows.append([x, towards.mean[0], towards.std[0], away.mean[0]])
        # Colour scales are per image: the sizes are printed.
        print(f"  first digit: largest |IG mean| {np.max(np.abs(rows[0][1])):.3g}, largest IG "
              f"std {np.max(rows[0][2]):.3g} (probability units); completeness gap "
              f"{completeness:.2g}; |IG wrong + IG correct| <= {mirror_gap:.2g}")
        figure = Figure(figsize=(5.6, 1.5 * len(shown) + 0.6))
        _image_grid(figure, rows, titles, [f"digit {c}" for c in correct])
        figure.suptitle(f"0 vs 1, {name} GP classifier: integrated gradients of E[p]")
        figure.savefig(out / f"digits_{name}.png", dpi=120)


def ten_classes(digits, out: Path, n_train: int) -> None:
    X_train, X_test, y_train, y_test = train_test_split(
        digits.data, digits.target, train_size=n_train, random_state=0, stratify=digits.target
    )
    model = _fit(X_train, y_train, link="softmax", n_inducing=32, max_iter=100)
    print(f"10 classes ({n_train} training digits): held-out accuracy "
          f"{model.score(X_test, y_test):.3f}")
    shown = [int(np.flatnonzero(y_test == c)[0]) for c in range(10)]
    rows, errors = [], []
    for i in shown:
        attr = gx.integrated_gradients(model, X_test[[i]], baseline="zeros",
                                       output="probability", target_class=y_test[i])
        errors.append(float(re.search(r"covariance standard error ([0-9.e+-]+)",
                                      attr.method).group(1)))
        rows.append([X_test[i], attr.mean[0], attr.std[0]])
    print(f"  largest IG std {max(np.max(row[2]) for row in rows):.3g}; largest Monte Carlo "
          f"standard error of a covariance entry {max(errors):.2g}")
    figure = Figure(figsize=(3.5, 11))
    _image_grid(figure, rows, ["digit", "IG mean, own class", "IG std"],
                [f"digit {y_test[i]}" for i in shown])
    figure.suptitle("10 classes: IG of E[p]", fontsize=9)
    figure.savefig(out / "digits_10class.png", dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("examples-out"))
    parser.add_argument("--n-train-10", type=int, default=400,
                        help="training digits of the 10-class model")
    parser.add_argument("--digits-per-class", type=int, default=1,
                        help="test digits per class in the 0-vs-1 figures (the paper: 2)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    digits = load_digits()
    zero_vs_one(digits, args.out, args.digits_per_class)
    ten_classes(digits, args.out, args.n_train_10)
    print(f"figures: {args.out}/digits_sigmoid.png, digits_softmax_2class.png, "
          "digits_10class.png")


if __name__ == "__main__":
    main()
