"""gpexplain: exact, uncertainty-aware explanations of Gaussian-process models."""

from gpexplain import datasets, kernels, plot
from gpexplain.attribution import Attribution
from gpexplain.explain import integrated_gradients
from gpexplain.models import FitError, GPRegressor
from gpexplain.posterior import ExactPosterior

__all__ = [
    "Attribution",
    "ExactPosterior",
    "FitError",
    "GPRegressor",
    "datasets",
    "integrated_gradients",
    "kernels",
    "plot",
]
__version__ = "0.1.0"
