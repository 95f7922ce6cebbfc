"""gpexplain: exact, uncertainty-aware explanations of Gaussian-process models."""

from gpexplain import datasets, kernels, links, metrics, plot, poe
from gpexplain.accuracy import CompletenessWarning
from gpexplain.attribution import Attribution
from gpexplain.encoding import CategoricalEncoder
from gpexplain.explain import global_shapley_values, gradients, integrated_gradients, shapley_values
from gpexplain.explain.sensitivity import global_sensitivity
from gpexplain.global_attribution import GlobalSensitivity, GlobalShapleyValues
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
from gpexplain.persistence import load, save
from gpexplain.pipeline import CategoricalPipeline, make_pipeline
from gpexplain.posterior import (
    ExactPosterior,
    LaplacePosterior,
    MixturePosterior,
    RandomFeaturePosterior,
    VariationalPosterior,
    from_botorch,
    from_gpytorch,
    from_sklearn,
)

__all__ = [
    "AdditiveGPRegressor",
    "Attribution",
    "CategoricalEncoder",
    "CategoricalPipeline",
    "CompletenessWarning",
    "ExactPosterior",
    "FitError",
    "GPClassifier",
    "GPRegressor",
    "GPXRegressor",
    "GlobalSensitivity",
    "GlobalShapleyValues",
    "LaplacePosterior",
    "MixturePosterior",
    "RandomFeatureGPRegressor",
    "RandomFeaturePosterior",
    "SparseGPRegressor",
    "VariationalPosterior",
    "datasets",
    "from_botorch",
    "from_gpytorch",
    "from_sklearn",
    "global_sensitivity",
    "global_shapley_values",
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
    "shapley_values",
]
__version__ = "0.2.0"
