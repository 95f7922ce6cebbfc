"""What a command-line choice of ``--model``, ``--kernel`` and ``--method`` means.

One table maps each model name to its estimator, the kernels and explanation methods it
accepts, and how its fitted hyperparameters are reported; ``cli.py`` only parses, runs and
writes files. Estimators are imported when chosen, so ``gpexplain --help`` stays fast.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

import numpy as np

__all__ = [
    "MODELS",
    "TABLE",
    "KERNELS",
    "METHODS",
    "Choice",
    "check_choice",
    "build_model",
    "explain",
    "finite_or_none",
    "product_shapley",
    "hyperparameters",
]

MODELS = ("exact", "sparse", "random-features", "additive", "gpx")
KERNELS = ("ard", "isotropic", "matern52", "matern32", "rq")
METHODS = ("auto", "ig", "shapley")
GAMES = ("interventional", "baseline", "product-measure")
DEFAULT_BACKGROUND = 50
DEFAULT_N_INDUCING = 256
DEFAULT_N_FREQUENCIES = 500
RESTART_ROWS = 500

# -- what each --method computes (imports at call time keep `gpexplain --help` fast) ---------
def _integrated_gradients(model, X, baseline, client=None):
    from gpexplain.explain import integrated_gradients

    return integrated_gradients(model, X, baseline=baseline, client=client)


def _shapley_values(model, X, baseline, client=None):
    from gpexplain.explain import shapley_values

    return shapley_values(model, X, client=client)


def product_shapley(model, X, baseline, client=None, game="interventional",
                    background=DEFAULT_BACKGROUND, seed=0, target_class=None):
    """Exact Shapley values of a product-kernel GP: ``--game``, with ``--background`` training
    rows drawn with the seed (interventional), the ``--baseline`` (baseline game) or the
    columns' Gaussian product measure (product-measure). Classifiers: the latent of
    ``target_class`` (``gx.shapley_values``)."""
    from gpexplain.explain import shapley_values
    from gpexplain.kernels.measures import Gaussian
    from gpexplain.posterior.linked import latent_posterior

    data = latent_posterior(model, target_class)[0].data_inputs
    explain = partial(shapley_values, model, X, client=client, target_class=target_class)
    if game == "baseline":
        return explain(baseline=baseline)
    if game == "product-measure":
        return explain(measure=Gaussian(data.mean(0), data.std(0) + 1e-12))
    rows = np.random.default_rng(seed).choice(len(data), min(background, len(data)), replace=False)
    return explain(background=data[np.sort(rows)])


def _gpx_contributions(model, X, baseline, client=None):
    if client is not None:  # GPX explains through its own model, not the driver
        raise ValueError("--dask-scheduler/--workers do not apply to --model gpx")
    return model.explain(X, what="contributions")


def _gpx_weights(model, X):
    return {"weights": model.explain(X, what="weights")}


def _global_shapley(model, X):
    from gpexplain.explain import global_shapley_values

    return {"global": global_shapley_values(model)}


# -- the estimators ----------------------------------------------------------------------------
def _exact(choice, n_rows, exact_estimator):
    # Squared exponential: restarts explore on 500 rows, the best is refined on all of them
    # (the wine file's fit in seconds instead of minutes).
    options = {"restart_rows": RESTART_ROWS} if choice.kernel in ("ard", "isotropic") else {}
    return exact_estimator(kernel=choice.kernel, random_state=choice.seed, **options)


def _sparse(choice, n_rows, exact_estimator):
    from gpexplain.models.sparse_gp_regressor import SparseGPRegressor

    return SparseGPRegressor(
        n_inducing=min(choice.n_inducing, n_rows), kernel=choice.kernel, random_state=choice.seed
    )


def _random_features(choice, n_rows, exact_estimator):
    from gpexplain.models.random_feature_gp_regressor import RandomFeatureGPRegressor

    return RandomFeatureGPRegressor(n_frequencies=DEFAULT_N_FREQUENCIES, random_state=choice.seed)


def _additive(choice, n_rows, exact_estimator):
    from gpexplain.models.additive_gp_regressor import AdditiveGPRegressor

    return AdditiveGPRegressor(random_state=choice.seed)


def _gpx(choice, n_rows, exact_estimator):
    from gpexplain.models.gpx_regressor import GPXRegressor

    return GPXRegressor(random_state=choice.seed)


@dataclass(frozen=True)
class ModelSpec:
    """One row of the table: what ``--model NAME`` means.

    Attributes
    ----------
    build : callable(choice, n_rows, exact_estimator) -> unfitted estimator
    kernels : tuple of str, or str
        The ``--kernel`` choices it accepts, or (a string) the one kernel it defines itself.
    methods : dict
        ``--method`` name -> ``explain(model, X, baseline, client) -> Attribution``; the first
        is what ``auto`` means.
    extras : callable(model, X) -> dict, optional
        What the model adds to the outputs (GPX: its weights; additive: global values).
    """

    build: Callable
    kernels: tuple | str
    methods: dict
    extras: Callable | None = None


TABLE = {
    "exact": ModelSpec(
        _exact, KERNELS, {"ig": _integrated_gradients, "shapley": product_shapley}
    ),
    "sparse": ModelSpec(_sparse, ("ard", "isotropic"), {"ig": _integrated_gradients}),
    "random-features": ModelSpec(
        _random_features, "random Fourier features of an ARD squared exponential",
        {"ig": _integrated_gradients},
    ),
    "additive": ModelSpec(
        _additive, "orthogonal additive (squared-exponential components)",
        {"shapley": _shapley_values, "ig": _integrated_gradients}, _global_shapley,
    ),
    "gpx": ModelSpec(
        _gpx, "squared exponential over the local linear weights",
        {"contributions": _gpx_contributions}, _gpx_weights,
    ),
}
assert tuple(TABLE) == MODELS


@dataclass(frozen=True)
class Choice:
    """A validated combination of command-line options."""

    model: str
    kernel: str
    method: str
    seed: int
    n_inducing: int
    options: dict = field(default_factory=dict)

    @property
    def kernel_label(self) -> str:
        """The kernel as reported: the --kernel choice, or the model's own kernel."""
        own = TABLE[self.model].kernels
        return own if isinstance(own, str) else self.kernel

    @property
    def uses_baseline(self) -> bool:
        """Integrated gradients and the baseline game need a baseline; other Shapley values and
        GPX weights do not."""
        return self.method == "ig" or self.options.get("game") == "baseline"


def _one_of(value: str, allowed, option: str, hint: str = "") -> str:
    text = value.strip().lower()
    if text not in allowed:
        raise ValueError(f"unknown {option} {value!r}; use {', '.join(allowed)}{hint}")
    return text


def check_choice(
    model: str, kernel: str, method: str, seed: int, n_inducing: int | None,
    game: str | None = None, background: int | None = None,
) -> Choice:
    """Validate the options together; ValueError names the option and what is accepted."""
    model = _one_of(model, MODELS, "--model")
    kernel = _one_of(kernel, KERNELS, "--kernel")
    method = _one_of(method, METHODS, "--method")
    kernels = TABLE[model].kernels
    if isinstance(kernels, str):
        if kernel != "ard":
            raise ValueError(
                f"--kernel {kernel} does not apply to --model {model}, whose kernel is its own "
                f"({kernels}); leave --kernel at its default"
            )
    elif kernel not in kernels:
        raise ValueError(f"--model {model} supports --kernel {', '.join(kernels)}, not {kernel}")
    methods = tuple(TABLE[model].methods)
    if method == "auto":
        method = methods[0]
    elif method not in methods:
        accepted = " or ".join(m for m in methods if m in METHODS) or "auto"
        raise ValueError(f"--method {method} does not apply to --model {model}; use {accepted}")
    if seed < 0:
        raise ValueError(f"--seed must be an integer >= 0, got {seed}")
    if n_inducing is not None and model != "sparse":
        raise ValueError("--n-inducing applies to --model sparse only")
    if n_inducing is not None and n_inducing < 1:
        raise ValueError(f"--n-inducing must be a positive integer, got {n_inducing}")
    options = {}
    if model == "exact" and method == "shapley":
        game = _one_of(game or GAMES[0], GAMES, "--game")
        if background is not None and (game != "interventional" or background < 1):
            raise ValueError(
                "--background N (a positive number of rows) applies to --game interventional only"
            )
        if kernel not in ("ard", "isotropic"):
            raise ValueError(
                f"--method shapley needs a product kernel (--kernel ard or isotropic); --kernel "
                f"{kernel} is a function of the joint distance of all features: use --method ig"
            )
        options = {"game": game, "background": background or DEFAULT_BACKGROUND, "seed": seed}
    elif game is not None or background is not None:
        raise ValueError("--game and --background apply to --model exact --method shapley only")
    return Choice(model, kernel, method, seed, n_inducing or DEFAULT_N_INDUCING, options)


def build_model(choice: Choice, n_rows: int, exact_estimator):
    """An unfitted estimator for ``choice`` (``exact_estimator``: the exact GP class)."""
    return TABLE[choice.model].build(choice, n_rows, exact_estimator)


def explain(choice: Choice, model, X, baseline, client=None) -> tuple:
    """Explain the rows X (on a Dask cluster when ``client`` is given); returns
    ``(attribution, extras)``.

    ``extras`` holds what some models add: ``"weights"`` (GPX: the Attribution of the local
    linear weights) and ``"global"`` (additive GP: global Shapley values).
    """
    spec = TABLE[choice.model]
    attribution = spec.methods[choice.method](model, X, baseline, client, **choice.options)
    return attribution, ({} if spec.extras is None else spec.extras(model, X))


def finite_or_none(value) -> float | None:
    value = float(value)
    return value if np.isfinite(value) else None


def _describe(module) -> str:
    """Short name of a GPyTorch kernel, e.g. ``ScaleKernel(MaternKernel(nu=2.5))``."""
    inner = []
    base = getattr(module, "base_kernel", None)
    if base is not None:
        inner.append(_describe(base))
    if getattr(module, "nu", None) is not None:
        inner.append(f"nu={module.nu}")
    alpha = getattr(module, "alpha", None)
    if alpha is not None and hasattr(alpha, "detach"):
        inner.append(f"alpha={float(alpha.detach().reshape(-1)[0]):.4g}")
    kernels = getattr(module, "kernels", None)  # sums and products
    if kernels is not None:
        inner.extend(_describe(part) for part in kernels)
    return f"{type(module).__name__}({', '.join(inner)})"


def hyperparameters(model, names: list[str]) -> dict:
    """Fitted hyperparameters for ``summary.json``, in original units of X and y.

    Lengthscales are reported per feature when the fitted kernel has them (``None`` for a
    constant column, whose lengthscale is infinite); other kernels are described by their
    repr.
    """
    kernel = getattr(model, "kernel_", None)
    report: dict = {}
    lengthscale = getattr(kernel, "lengthscale", None)
    module = getattr(kernel, "module", None)  # a GPyTorch kernel (Matern, RQ, user kernels)
    if lengthscale is None and module is not None:
        from gpexplain.kernels.stationary import radial_leaves

        leaves = radial_leaves(module, len(names)) or []
        if len(leaves) == 1:  # one lengthscale per feature it acts on; inf for the others
            lengthscale = np.full(len(names), np.inf)
            lengthscale[leaves[0].dims] = leaves[0].lengthscale
        report["kernel"] = _describe(module)
        outputscale = getattr(module, "outputscale", None)
        if outputscale is not None:
            report["variance"] = float(outputscale.detach())
    if lengthscale is not None:
        values = np.broadcast_to(np.asarray(lengthscale, dtype=np.float64), (len(names),))
        report["lengthscales"] = {
            name: finite_or_none(value) for name, value in zip(names, values, strict=True)
        }
    if getattr(kernel, "variance", None) is not None:
        report["variance"] = float(kernel.variance)
    for name in ("noise", "mean", "weight_noise"):
        value = getattr(model, name + "_", None)
        if value is not None:
            report[name] = float(value)
    report["units"] = "original units of X and y; noise and variance are variances"
    if "weight_noise" in report:
        report["units"] += (
            "; GPX variance and weight_noise are in squared weight units "
            "((units of y per unit of the feature)^2)"
        )
    return report
