"""Gaussian posteriors in representer form, the interface every explanation consumes."""

from gpexplain.posterior.adapters import from_gpytorch, from_sklearn
from gpexplain.posterior.ax import from_ax
from gpexplain.posterior.base import Posterior
from gpexplain.posterior.botorch import from_botorch
from gpexplain.posterior.exact import ExactPosterior, cholesky_with_jitter
from gpexplain.posterior.laplace import LaplacePosterior
from gpexplain.posterior.lmc import LMCPosterior
from gpexplain.posterior.mixture import MixturePosterior
from gpexplain.posterior.multi_output import (
    CoregionalizedPosterior,
    IndependentOutputs,
    MultiOutputPosterior,
)
from gpexplain.posterior.multi_output_adapters import as_multi_output
from gpexplain.posterior.random_features import RandomFeaturePosterior
from gpexplain.posterior.resolve import as_posterior
from gpexplain.posterior.variational import VariationalPosterior

__all__ = [
    "CoregionalizedPosterior",
    "ExactPosterior",
    "IndependentOutputs",
    "LMCPosterior",
    "LaplacePosterior",
    "MixturePosterior",
    "MultiOutputPosterior",
    "Posterior",
    "RandomFeaturePosterior",
    "VariationalPosterior",
    "as_multi_output",
    "as_posterior",
    "cholesky_with_jitter",
    "from_ax",
    "from_botorch",
    "from_gpytorch",
    "from_sklearn",
]
