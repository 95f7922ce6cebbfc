"""gpexplain: exact, uncertainty-aware explanations of Gaussian-process models.

``import gpexplain`` loads torch, GPyTorch, NumPy, SciPy, pandas and scikit-learn, not
matplotlib or any optional extra: the submodules in ``_LAZY_SUBMODULES`` (figures, POE with
cvxpy and pymoo, metrics, bundled data) are imported on first attribute access (PEP 562),
so ``gx.plot`` works as before and a command-line start does not pay for them.
"""

import importlib

from gpexplain import kernels, links
from gpexplain._baselines import BaselineWarning
from gpexplain._threads import set_num_threads
from gpexplain._version import __version__ as __version__
from gpexplain.accuracy import CompletenessWarning
from gpexplain.attribution import Attribution
from gpexplain.encoding import CategoricalEncoder
from gpexplain.explain import (
    explain_acquisition,
    explain_variance,
    global_importance,
    global_shapley_values,
    gpx_explanation,
    gradients,
    integrated_gradients,
    shapley_interactions,
    shapley_values,
)
from gpexplain.explain.sensitivity import global_sensitivity
from gpexplain.global_attribution import (
    GlobalImportance,
    GlobalSensitivity,
    GlobalShapleyValues,
    MultiOutputImportance,
    MultiOutputSensitivity,
)
from gpexplain.interactions import ShapleyInteractions
from gpexplain.kernels import measures
from gpexplain.models import (
    AdditiveGPRegressor,
    FitError,
    GPClassifier,
    GPRegressor,
    GPXRegressor,
    RandomFeatureGPRegressor,
    SparseGPRegressor,
)
from gpexplain.multi_output_attribution import MultiOutputAttribution
from gpexplain.persistence import load, save
from gpexplain.pipeline import CategoricalPipeline, make_pipeline
from gpexplain.posterior import (
    CoregionalizedPosterior,
    ExactPosterior,
    IndependentOutputs,
    LaplacePosterior,
    LMCPosterior,
    MixturePosterior,
    RandomFeaturePosterior,
    VariationalPosterior,
    as_multi_output,
    from_ax,
    from_botorch,
    from_gpytorch,
    from_sklearn,
)

__all__ = [
    "AdditiveGPRegressor",
    "Attribution",
    "BaselineWarning",
    "CategoricalEncoder",
    "CategoricalPipeline",
    "CompletenessWarning",
    "CoregionalizedPosterior",
    "ExactPosterior",
    "FitError",
    "GPClassifier",
    "GPRegressor",
    "GPXRegressor",
    "GlobalImportance",
    "GlobalSensitivity",
    "GlobalShapleyValues",
    "IndependentOutputs",
    "LMCPosterior",
    "LaplacePosterior",
    "MixturePosterior",
    "MultiOutputAttribution",
    "MultiOutputImportance",
    "MultiOutputSensitivity",
    "RandomFeatureGPRegressor",
    "RandomFeaturePosterior",
    "ShapleyInteractions",
    "SparseGPRegressor",
    "VariationalPosterior",
    "as_multi_output",
    "ax",
    "datasets",
    "explain_acquisition",
    "explain_variance",
    "from_ax",
    "from_botorch",
    "from_gpytorch",
    "from_sklearn",
    "global_importance",
    "global_sensitivity",
    "global_shapley_values",
    "gpx_explanation",
    "gradients",
    "integrated_gradients",
    "kernels",
    "links",
    "load",
    "make_pipeline",
    "measures",
    "metrics",
    "plot",
    "poe",
    "save",
    "set_num_threads",
    "shapley_interactions",
    "shapley_values",
]
_LAZY_SUBMODULES = frozenset({"ax", "datasets", "metrics", "plot", "poe"})


def __getattr__(name: str):
    """Import a lazy submodule on first access (PEP 562); other names are missing."""
    if name in _LAZY_SUBMODULES:
        # import_module binds the submodule as an attribute of this package, so this runs once.
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    """The public names, lazy submodules included, as if they were imported eagerly."""
    return sorted(set(globals()) | set(__all__))
