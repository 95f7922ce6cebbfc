"""gpexplain: exact, uncertainty-aware explanations of Gaussian-process models."""

from gpexplain import datasets, kernels, metrics, plot, poe
from gpexplain.accuracy import CompletenessWarning
from gpexplain.attribution import Attribution
from gpexplain.explain import global_shapley_values, gradients, integrated_gradients, shapley_values
from gpexplain.global_attribution import GlobalShapleyValues
from gpexplain.kernels import measures
from gpexplain.models import (
    AdditiveGPRegressor,
    FitError,
    GPRegressor,
    GPXRegressor,
    RandomFeatureGPRegressor,
    SparseGPRegressor,
)
from gpexplain.posterior import (
    ExactPosterior,
    MixturePosterior,
    RandomFeaturePosterior,
    VariationalPosterior,
    from_gpytorch,
    from_sklearn,
)

__all__ = [
    "AdditiveGPRegressor",
    "Attribution",
    "CompletenessWarning",
    "ExactPosterior",
    "FitError",
    "GPRegressor",
    "GPXRegressor",
    "GlobalShapleyValues",
    "MixturePosterior",
    "RandomFeatureGPRegressor",
    "RandomFeaturePosterior",
    "SparseGPRegressor",
    "VariationalPosterior",
    "datasets",
    "from_gpytorch",
    "from_sklearn",
    "global_shapley_values",
    "gradients",
    "integrated_gradients",
    "kernels",
    "measures",
    "metrics",
    "plot",
    "poe",
    "shapley_values",
]
__version__ = "0.2.0"
