"""Gaussian posteriors in representer form, the interface every explanation consumes."""

from gpexplain.posterior.base import Posterior, as_posterior
from gpexplain.posterior.exact import ExactPosterior, cholesky_with_jitter

__all__ = ["ExactPosterior", "Posterior", "as_posterior", "cholesky_with_jitter"]
