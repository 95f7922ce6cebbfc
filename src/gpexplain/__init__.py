"""gpexplain: exact, uncertainty-aware explanations of Gaussian-process models."""

from gpexplain import kernels
from gpexplain.attribution import Attribution
from gpexplain.explain import integrated_gradients
from gpexplain.models import GPRegressor
from gpexplain.posterior import ExactPosterior

__all__ = ["Attribution", "ExactPosterior", "GPRegressor", "integrated_gradients", "kernels"]
__version__ = "0.1.0"
