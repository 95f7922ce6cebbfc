"""Observation models ``p(y | f)`` of the estimators, registered in ``LIKELIHOODS``.

``Gaussian`` (regression), ``Bernoulli`` (binary classification, logit or probit link) and
``Categorical`` (multiclass, softmax). Each gives the expected log likelihood of a variational
fit (torch) and what a fitted model predicts from its latent marginals; class probabilities
come from the link's expectations (``gpexplain.links``), the same numbers the probability-level
explanations report as ``prediction``. A new likelihood (e.g. Student-t) is one module with a
registered ``Likelihood`` subclass and an import here.
"""

from gpexplain.likelihoods.base import (
    LIKELIHOODS,
    ClassLikelihood,
    Likelihood,
    likelihood_for_link,
)
from gpexplain.likelihoods.bernoulli import Bernoulli
from gpexplain.likelihoods.categorical import Categorical
from gpexplain.likelihoods.gaussian import Gaussian

__all__ = ["LIKELIHOODS", "Bernoulli", "Categorical", "ClassLikelihood", "Gaussian",
           "Likelihood", "likelihood_for_link"]
