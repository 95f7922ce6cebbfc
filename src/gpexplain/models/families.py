"""The model-family registry: which estimators exist, what they fit and how they are explained.

One entry per estimator: the name the command line gives it (``--model``), the estimator class,
the task it fits, the kernels it accepts, its explanation methods (names in
``gpexplain.explain.methods.METHODS``; the first is its default), the estimator parameters the
command line sets, and the report of its fitted hyperparameters (``summary.json``). The command
line reads its ``--model`` and ``--kernel`` choices from here and ``tests/contracts/`` runs
every family; a new family is its estimator module and one ``FAMILIES.register`` call below.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import singledispatch

import numpy as np

from gpexplain._registry import Registry
from gpexplain.kernels import RBF, GPyTorchKernel, OrthogonalAdditive
from gpexplain.kernels.stationary import radial_leaves
from gpexplain.models._kernel_choices import KERNEL_NAMES, KERNELS
from gpexplain.models.additive_gp_regressor import AdditiveGPRegressor
from gpexplain.models.gp_classifier import GPClassifier
from gpexplain.models.gp_regressor import GPRegressor
from gpexplain.models.gpx_regressor import GPXRegressor
from gpexplain.models.random_feature_gp_regressor import RandomFeatureGPRegressor
from gpexplain.models.sparse_gp_regressor import SparseGPRegressor

__all__ = [
    "FAMILIES", "PRODUCT_KERNELS", "ModelFamily", "Settings", "kernel_hyperparameters"
]

UNITS = "original units of X and y; noise and variance are variances"
DEFAULT_N_INDUCING = 256
DEFAULT_N_FREQUENCIES = 500
RESTART_ROWS = 500
# Above this many rows the command line fits the exact GP's hyperparameters on this many
# seeded rows and conditions on all of them (GPRegressor's hyperparameter_rows).
HYPERPARAMETER_ROWS = 3000
# The kernel names that are products over the features: closed-form Shapley games and Sobol
# indices exist for them.
PRODUCT_KERNELS = KERNELS


@dataclass(frozen=True)
class Settings:
    """The choices a user makes for any family (the command line's options).

    Attributes
    ----------
    kernel : str
        A kernel name of ``KERNEL_NAMES``; families with their own kernel ignore it.
    seed : int
        ``random_state`` of the estimator.
    n_rows : int
        Rows the estimator will be fitted on (caps the inducing points).
    n_inducing : int
        Inducing points of the sparse variational families.
    n_inducing_given : bool
        Whether the user chose ``n_inducing`` (``--n-inducing``); if not, the classifier
        chooses its own from the rows and classes (``GPClassifier(n_inducing=None)``).
    device : str, optional
        Where the exact GP conditions and its explanations' triangular solves run
        (``GPRegressor(device=...)``, e.g. "cuda"); None: NumPy on the CPU.
    """

    kernel: str
    seed: int
    n_rows: int
    n_inducing: int = DEFAULT_N_INDUCING
    n_inducing_given: bool = False
    device: str | None = None


@dataclass
class ModelFamily:
    """One model family.

    Not frozen: a test may substitute ``estimator`` (e.g. one optimiser start) for a run.

    Attributes
    ----------
    estimator : type
        The estimator class (``fit``, ``predict``, ``save``).
    task : {"regression", "classification"}
    kernels : tuple of str, or str
        The kernel names it accepts, or (a string) the one kernel it defines itself.
    methods : tuple of str
        Its explanation methods, by their ``METHODS`` names (``"gpx-contributions"``: GPX's own
        weights times inputs); the first is its default.
    parameters : callable(Settings) -> dict
        The estimator's constructor arguments for the user's settings.
    report : callable(model, names) -> dict
        Its fitted hyperparameters in original units, for ``summary.json``.
    options : tuple of str
        Command-line options beyond ``--kernel`` and ``--seed`` that only it takes.
    cli_names : tuple of str
        The ``--model`` values that choose it (the classifier: the models a classification
        target is fitted with instead); default: its own name.
    summary : str
        A few words saying what sets it apart (the ``--model`` help), or "".
    extras : tuple of str
        What it explains beside the rows: ``"global-shapley"`` (the ``METHODS`` entry) or
        ``"weights"`` (GPX's local linear weights).
    multi_output : tuple of str
        The forms of a model of several targets its estimator fits (its ``multi_output``
        parameter, first the default); empty: one target only.
    """

    estimator: type
    task: str
    kernels: tuple[str, ...] | str
    methods: tuple[str, ...]
    parameters: Callable[[Settings], dict]
    report: Callable
    options: tuple[str, ...] = ()
    cli_names: tuple[str, ...] = ()
    summary: str = ""
    extras: tuple[str, ...] = ()
    multi_output: tuple[str, ...] = ()

    def build(self, settings: Settings):
        """An unfitted estimator of this family for ``settings``."""
        return self.estimator(**self.parameters(settings))

    def hyperparameters(self, model, names: list[str]) -> dict:
        """Fitted hyperparameters of ``model`` (this family's estimator), keyed by name."""
        return self.report(model, list(names))


@singledispatch
def kernel_hyperparameters(kernel, names: list[str]) -> dict:
    """The hyperparameters of a fitted kernel: ``lengthscales`` per feature (``None`` for a
    constant column, whose lengthscale is infinite), ``variance``, and for a GPyTorch kernel
    its description. Registered per kernel type; other kernels report nothing."""
    return {}


def _lengthscales(values, names: list[str]) -> dict:
    values = np.broadcast_to(np.asarray(values, dtype=np.float64), (len(names),))
    return {name: float(v) if np.isfinite(v) else None for name, v in zip(names, values,
                                                                          strict=True)}


@kernel_hyperparameters.register
def _(kernel: RBF, names: list[str]) -> dict:
    return {"lengthscales": _lengthscales(kernel.lengthscale, names),
            "variance": float(kernel.variance)}


@kernel_hyperparameters.register
def _(kernel: OrthogonalAdditive, names: list[str]) -> dict:
    return {"lengthscales": _lengthscales(kernel.lengthscale, names)}


@kernel_hyperparameters.register
def _(kernel: GPyTorchKernel, names: list[str]) -> dict:
    module = kernel.module
    report = {"kernel": _describe(module)}
    if getattr(module, "outputscale", None) is not None:  # a ScaleKernel at the root
        report["variance"] = float(module.outputscale.detach())
    leaves = radial_leaves(module, len(names)) or []
    if len(leaves) == 1:  # one lengthscale per feature it acts on; inf for the others
        lengthscale = np.full(len(names), np.inf)
        lengthscale[leaves[0].dims] = leaves[0].lengthscale
        report["lengthscales"] = _lengthscales(lengthscale, names)
    return report


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


def _regression_report(*fitted: str, units: str = UNITS) -> Callable:
    """The report of a regressor: its kernel's hyperparameters, then the fitted attributes
    ``fitted`` (names without the trailing underscore), then the units."""

    def report(model, names: list[str]) -> dict:
        values = {name: getattr(model, name + "_") for name in fitted}
        values = {name: value if isinstance(value, int) else float(value)
                  for name, value in values.items()}
        return {**kernel_hyperparameters(model.kernel_, names), **values, "units": units}

    return report


def _classifier_report(model: GPClassifier, names: list[str]) -> dict:
    """Per latent GP, keyed by the class it is the latent of (binary links: ``classes_[1]``;
    softmax: every class): its kernel's hyperparameters and its constant mean, in latent
    units."""
    softmax = model.link_ == "softmax"
    classes = list(model.classes_) if softmax else [model.classes_[1]]
    posteriors = model.posteriors_ if softmax else [model.posterior_]
    return {
        label: {**kernel_hyperparameters(kernel, names), "mean": float(posterior.mean)}
        for label, kernel, posterior in zip(classes, model.kernels_, posteriors, strict=True)
    }


def _exact_parameters(settings: Settings) -> dict:
    # Squared exponential: restarts explore on 500 rows, the best is refined on all of them
    # (the wine file's fit in seconds instead of minutes).
    rows = {"restart_rows": RESTART_ROWS} if settings.kernel in PRODUCT_KERNELS else {}
    if settings.n_rows > HYPERPARAMETER_ROWS:
        rows["hyperparameter_rows"] = HYPERPARAMETER_ROWS
    device = {} if settings.device is None else {"device": settings.device}
    return {"kernel": settings.kernel, "random_state": settings.seed, **rows, **device}


def _sparse_parameters(settings: Settings) -> dict:
    return {"n_inducing": min(settings.n_inducing, settings.n_rows), "kernel": settings.kernel,
            "random_state": settings.seed}


def _classifier_parameters(settings: Settings) -> dict:
    # The classifier's own choice of inducing points (from the rows and classes) unless
    # --n-inducing gives one: 256 made the command line's classifier 2-3x slower than the
    # library's default at no gain in accuracy (benchmarks/classifier_fit_speed.py).
    n_inducing = min(settings.n_inducing, settings.n_rows) if settings.n_inducing_given else None
    return {"n_inducing": n_inducing, "kernel": settings.kernel, "random_state": settings.seed}


def _seed_only(settings: Settings) -> dict:
    return {"random_state": settings.seed}


FAMILIES: Registry[ModelFamily] = Registry("model family")
FAMILIES.register("exact", ModelFamily(
    GPRegressor, "regression", KERNEL_NAMES,
    ("integrated-gradients", "shapley", "shapley-interactions"), _exact_parameters,
    _regression_report("noise", "mean", "hyperparameter_rows"), options=("device",),
    multi_output=GPRegressor._parameter_constraints["multi_output"].values,
))
FAMILIES.register("sparse", ModelFamily(
    SparseGPRegressor, "regression", KERNELS, ("integrated-gradients",), _sparse_parameters,
    _regression_report("noise", "mean"), options=("n_inducing",),
    summary="variational, inducing points",
    multi_output=SparseGPRegressor._parameter_constraints["multi_output"].values,
))
FAMILIES.register("random-features", ModelFamily(
    RandomFeatureGPRegressor, "regression",
    "random Fourier features of an ARD squared exponential", ("integrated-gradients",),
    lambda settings: {"n_frequencies": DEFAULT_N_FREQUENCIES, "random_state": settings.seed},
    _regression_report("noise", "mean"),
))
FAMILIES.register("additive", ModelFamily(
    AdditiveGPRegressor, "regression", "orthogonal additive (squared-exponential components)",
    ("shapley", "integrated-gradients", "shapley-interactions"), _seed_only,
    _regression_report("noise", "mean"),
    summary="orthogonal additive, Shapley values", extras=("global-shapley",),
))
FAMILIES.register("gpx", ModelFamily(
    GPXRegressor, "regression", "squared exponential over the local linear weights",
    ("gpx-contributions",), _seed_only,
    _regression_report("noise", "weight_noise", units=UNITS + (
        "; GPX variance and weight_noise are in squared weight units "
        "((units of y per unit of the feature)^2)")),
    summary="locally linear weights", extras=("weights",),
))
FAMILIES.register("classifier", ModelFamily(
    GPClassifier, "classification", KERNEL_NAMES, ("integrated-gradients", "shapley"),
    _classifier_parameters, _classifier_report, options=("n_inducing",),
    cli_names=("exact", "sparse"),
))
