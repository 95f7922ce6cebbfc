"""Which parameters drive the objective of a Bayesian optimisation run, and how sure is the model?

A small BoTorch run maximises the (negated) Hartmann-6 test function on [0, 1]^6: 12 Sobol
points, then a few rounds of log expected improvement, each with a ``SingleTaskGP``
(``Normalize`` inputs, ``Standardize`` outcome, BoTorch's defaults). ``gx.from_botorch`` turns
the final model into a gpexplain posterior in parameter and objective units (transforms undone
exactly), and integrated gradients explain every evaluated point against the average evaluated
point, each attribution a Gaussian with an exact mean and covariance. The global importance is
mean |attribution| per parameter with conservative error bars. (Exact Shapley values with
uncertainty for such models come with the SHAP issue; see the README.)

Run: ``.venv/bin/python examples/botorch_hartmann.py [--out DIR] [--iterations N]``
(about half a minute; needs ``pip install "gpexplain[botorch]"``).
"""

import argparse
import warnings
from pathlib import Path

import numpy as np
import torch
from botorch.acquisition import LogExpectedImprovement
from botorch.fit import fit_gpytorch_mll
from botorch.models import SingleTaskGP
from botorch.models.transforms.input import Normalize
from botorch.optim import optimize_acqf
from botorch.test_functions import Hartmann
from botorch.utils.sampling import draw_sobol_samples
from gpytorch.mlls import ExactMarginalLogLikelihood

import gpexplain as gx

NAMES = [f"x{i + 1}" for i in range(6)]


def fit_model(X, Y):
    model = SingleTaskGP(X, Y, input_transform=Normalize(d=X.shape[-1]))
    fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
    return model


def optimise(iterations: int, seed: int = 0):
    """A small BoTorch loop; returns the final model and all evaluations."""
    torch.manual_seed(seed)
    objective = Hartmann(dim=6, negate=True).to(torch.float64)
    bounds = objective.bounds
    X = draw_sobol_samples(bounds=bounds, n=12, q=1, seed=seed).squeeze(1)
    Y = objective(X).unsqueeze(-1)
    for _ in range(iterations):
        model = fit_model(X, Y)
        candidate, _ = optimize_acqf(
            LogExpectedImprovement(model, best_f=Y.max()), bounds=bounds, q=1,
            num_restarts=4, raw_samples=128,
        )
        X = torch.cat([X, candidate])
        Y = torch.cat([Y, objective(candidate).unsqueeze(-1)])
    return fit_model(X, Y), X.numpy(), Y[:, 0].numpy()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("examples-out"))
    parser.add_argument("--iterations", type=int, default=10)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # BoTorch's optimiser notices on a tiny run
        model, X, y = optimise(args.iterations)
    print(f"{len(y)} evaluations, best objective {y.max():.4f} (optimum 3.3224)")

    posterior = gx.from_botorch(model, feature_names=NAMES)
    attr = gx.integrated_gradients(posterior, X, baseline="mean")
    print(f"completeness gap (mean, variance): {attr.completeness_gap()}")
    importance = np.abs(attr.mean).mean(axis=0)
    spread = attr.std.mean(axis=0)
    print("global importance, mean |IG| +- 1.96 x mean std (objective units):")
    for i in np.argsort(-importance):
        print(f"  {NAMES[i]}: {importance[i]:.4f} +- {1.96 * spread[i]:.4f}")
    best = int(np.argmax(y))
    print(f"best point: {dict(zip(NAMES, X[best].round(3).tolist(), strict=True))}")
    for i in np.argsort(-np.abs(attr.mean[best]))[:3]:
        print(f"  {NAMES[i]}: {attr.mean[best, i]:+.4f} +- {1.96 * attr.std[best, i]:.4f}")

    gx.plot.plot_global_importance(attr).savefig(args.out / "hartmann_importance.png", dpi=120)
    gx.plot.plot_attributions(
        attr, points=[best], point_labels=["best evaluated point"]
    ).savefig(args.out / "hartmann_best_point.png", dpi=120)
    print(f"figures in {args.out}: hartmann_importance.png, hartmann_best_point.png")


if __name__ == "__main__":
    main()
