"""Butler et al. Sec. 5.1 / Fig. 1: attribution uncertainty grows away from the baseline.

Data: y = sin(x1) sin(2 x2) + 0.5 N(0, 1), x ~ U(0, 10)^2, 500 points. Baseline 0; the
explained points follow beta(t) = t [1, 1], 0 <= t <= 10. Each attribution is a Gaussian:
its mean and 95% band are drawn against t.
Run: ``.venv/bin/python examples/synthetic_heteroscedasticity.py [--out DIR]``.
"""

import argparse
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

import gpexplain as gx


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("examples-out"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    rng = np.random.default_rng(0)
    X = rng.uniform(0, 10, size=(500, 2))
    y = np.sin(X[:, 0]) * np.sin(2 * X[:, 1]) + 0.5 * rng.normal(size=500)
    model = gx.GPRegressor(random_state=0).fit(X, y)
    t = np.linspace(0, 10, 201)
    attr = gx.integrated_gradients(model, np.column_stack([t, t]), baseline="zeros")
    lower, upper = attr.interval(0.95)

    figure = Figure(figsize=(8, 3.5))
    for i, ax in enumerate(figure.subplots(1, 2, sharey=True)):
        ax.plot(t, attr.mean[:, i], color="black")
        ax.fill_between(t, lower[:, i], upper[:, i], alpha=0.3)
        ax.set_xlabel("t  (x = t [1, 1], baseline 0)")
        ax.set_title(f"attribution to x{i + 1}, mean and 95% band")
    figure.tight_layout()
    figure.savefig(args.out / "synthetic_heteroscedasticity.png", dpi=120)
    print("std at t = 0, 5, 10:", attr.std[[0, 100, 200]].round(3).tolist())
    print(f"figure: {args.out / 'synthetic_heteroscedasticity.png'}")


if __name__ == "__main__":
    main()
