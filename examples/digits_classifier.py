"""Seitz (2022) Sec. 6 / Figs. 3-5 on scikit-learn's bundled 8x8 digits: explaining GP classifiers.

The paper's MNIST 0-vs-1 study: a binary classifier with a sigmoid (logit) link and a 2-class
softmax classifier (two independent latent GPs) are fitted to the digits 0 and 1; for four
test digits, the integrated gradients (baseline: the black image) towards the correct and
towards the wrong class are drawn as images, posterior mean beside posterior standard
deviation. Then the full 10-class digits with a softmax classifier (a subsample, for time):
one test digit per class, explained towards its own class.

Explained output: the latent functions, exact Gaussians: the log-odds of class 1 for the
sigmoid model (so the wrong class's attribution is its negative), and each class's own latent
for the softmax. The one function ``class_attribution`` makes the call; explaining class
probabilities instead (``output="probability", target_class=...`` of
gx.integrated_gradients, from the links module) changes only that function.

Run: ``.venv/bin/python examples/digits_classifier.py [--out DIR] [--n-train-10 N]``.
"""

import argparse
import warnings
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

import gpexplain as gx


def class_attribution(model, X, target_class):
    """Integrated gradients (baseline zeros) of the model's output for ``target_class``.

    Returns the attribution means and standard deviations, each (n_points, 64).
    """
    index = int(np.flatnonzero(model.classes_ == target_class)[0])
    if model.link_ == "softmax":
        attr = gx.integrated_gradients(model.posteriors_[index], X, baseline="zeros")
        return attr.mean, attr.std
    # One latent, the log-odds of classes_[1]: class 0's log-odds is its negative.
    attr = gx.integrated_gradients(model.posterior_, X, baseline="zeros")
    return (attr.mean if index == 1 else -attr.mean), attr.std


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


def zero_vs_one(digits, out: Path) -> None:
    keep = digits.target < 2
    X_train, X_test, y_train, y_test = train_test_split(
        digits.data[keep], digits.target[keep], train_size=200, random_state=0,
        stratify=digits.target[keep],
    )
    shown = np.concatenate([np.flatnonzero(y_test == 0)[:2], np.flatnonzero(y_test == 1)[:2]])
    titles = ["digit", "IG mean, correct", "IG std, correct", "IG mean, wrong", "IG std, wrong"]
    for name, link in (("sigmoid", "logit"), ("softmax_2class", "softmax")):
        model = _fit(X_train, y_train, link=link, n_inducing=16)
        print(f"0 vs 1, {name}: held-out accuracy {model.score(X_test, y_test):.3f}")
        rows = []
        for i in shown:
            correct, wrong = y_test[i], 1 - y_test[i]
            mean_c, std_c = class_attribution(model, X_test[[i]], correct)
            mean_w, std_w = class_attribution(model, X_test[[i]], wrong)
            rows.append([X_test[i], mean_c[0], std_c[0], mean_w[0], std_w[0]])
        # Colour scales are per image: the sizes are printed (the softmax latents share the
        # evidence, so each carries about half of the sigmoid's log-odds).
        print(f"  largest |IG mean| towards the correct class, first digit: "
              f"{np.max(np.abs(rows[0][1])):.3g}")
        figure = Figure(figsize=(7, 6))
        _image_grid(figure, rows, titles, [f"digit {y_test[i]}" for i in shown])
        figure.suptitle(f"0 vs 1, {name} GP classifier: integrated gradients of the latent")
        figure.savefig(out / f"digits_{name}.png", dpi=120)


def ten_classes(digits, out: Path, n_train: int) -> None:
    X_train, X_test, y_train, y_test = train_test_split(
        digits.data, digits.target, train_size=n_train, random_state=0, stratify=digits.target
    )
    model = _fit(X_train, y_train, link="softmax", n_inducing=32, max_iter=100)
    print(f"10 classes ({n_train} training digits): held-out accuracy "
          f"{model.score(X_test, y_test):.3f}")
    shown = [int(np.flatnonzero(y_test == c)[0]) for c in range(10)]
    rows = []
    for i in shown:
        mean, std = class_attribution(model, X_test[[i]], y_test[i])
        rows.append([X_test[i], mean[0], std[0]])
    figure = Figure(figsize=(3.5, 11))
    _image_grid(figure, rows, ["digit", "IG mean, own class", "IG std"],
                [f"digit {y_test[i]}" for i in shown])
    figure.savefig(out / "digits_10class.png", dpi=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("examples-out"))
    parser.add_argument("--n-train-10", type=int, default=400,
                        help="training digits of the 10-class model")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    digits = load_digits()
    zero_vs_one(digits, args.out)
    ten_classes(digits, args.out, args.n_train_10)
    print(f"figures: {args.out}/digits_sigmoid.png, digits_softmax_2class.png, "
          "digits_10class.png")


if __name__ == "__main__":
    main()
