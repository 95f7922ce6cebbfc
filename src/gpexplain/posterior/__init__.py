"""Gaussian posteriors in representer form, the interface every explanation consumes."""

from gpexplain.posterior.adapters import from_gpytorch, from_sklearn
from gpexplain.posterior.base import Posterior, as_posterior
from gpexplain.posterior.exact import ExactPosterior, cholesky_with_jitter
from gpexplain.posterior.variational import VariationalPosterior

__all__ = [
    "ExactPosterior",
    "Posterior",
    "VariationalPosterior",
    "as_posterior",
    "cholesky_with_jitter",
    "from_gpytorch",
    "from_sklearn",
]
