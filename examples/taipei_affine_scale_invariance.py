"""Butler et al. Sec. 5.3 on the Taipei real-estate data: normalising inputs changes nothing.

Integrated gradients are invariant to affine rescaling of the inputs (ASI). A GP fitted to the
raw features and one fitted to the same features in other units (distance in km instead of
metres, latitude/longitude centred and scaled, house age in months) give the same attributions
for a house held out of training, once the query and baseline are expressed in the matching
units. Run: ``.venv/bin/python examples/taipei_affine_scale_invariance.py [--out DIR]``.
"""

import argparse
from pathlib import Path

import numpy as np

import gpexplain as gx


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("examples-out"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    X, y = gx.datasets.load_dataset("taipei-real-estate")
    house, train = X.index[-1], X.index[:-1]  # the last house is held out, as in the paper
    scale = np.array([1.0, 12.0, 1e-3, 1.0, 100.0, 100.0])  # months, km, degrees x 100
    shift = -X.loc[train].mean().to_numpy() * scale * np.array([1, 0, 0, 0, 1, 1])
    X_other = X * scale + shift

    raw = gx.GPRegressor(random_state=0).fit(X.loc[train], y.loc[train])
    other = gx.GPRegressor(random_state=0).fit(X_other.loc[train], y.loc[train])
    a = gx.integrated_gradients(raw, X.loc[[house]], baseline="mean")
    b = gx.integrated_gradients(other, X_other.loc[[house]], baseline="mean")

    print(f"{'feature':40s} {'raw units':>18s} {'other units':>18s}")
    for name, m1, s1, m2, s2 in zip(
        a.feature_names, a.mean[0], a.std[0], b.mean[0], b.std[0], strict=True
    ):
        print(f"{name:40s} {m1:+9.4f} +- {s1:6.4f} {m2:+9.4f} +- {s2:6.4f}")
    difference = np.max(np.abs(a.mean - b.mean))
    print(f"largest difference of attribution means: {difference:.2e} (units of the target)")
    figure = gx.plot.plot_attributions(a, point_labels=[f"house {house} (raw units)"])
    figure.savefig(args.out / "taipei_attributions.png", dpi=120)
    print(f"figure: {args.out / 'taipei_attributions.png'}")


if __name__ == "__main__":
    main()
