"""The ``Likelihood`` base and the likelihood registry.

An observation model ``p(y | f)`` of one or more latent GPs. Each likelihood gives

* the expected log likelihood ``sum_i E_{q(f(x_i))}[log p(y_i | f(x_i))]`` under independent
  Gaussian marginals, in torch (differentiable), for a variational fit's evidence lower bound;
* what a fitted model predicts from the latent marginals: class probabilities
  ``E[p(y = c | f(x))]`` (``ClassLikelihood.predict_proba``, by the link's expectations in
  ``gpexplain.links``, the one implementation the explanations use too) or predictive
  moments (``Gaussian.predictive_moments``).

A new likelihood is one module with a ``Likelihood`` subclass registered with
``@LIKELIHOODS.register("name")``, and an import in ``gpexplain.likelihoods``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np
import torch

from gpexplain._registry import Registry
from gpexplain.links import get_link

__all__ = ["LIKELIHOODS", "ClassLikelihood", "Likelihood", "likelihood_for_link"]

#: Every likelihood, by name (registered where each is defined).
LIKELIHOODS = Registry("likelihood")
# Rows of latent moments per block of class probabilities: bounds the memory of the link's
# node values (e.g. 256 x 1024 Gauss-Hermite nodes).
_CHUNK_ROWS = 256


class Likelihood(ABC):
    """An observation model ``p(y | f)`` (abstract).

    Attributes
    ----------
    links : tuple of str
        The names of the links (``gpexplain.links.LINKS``) it takes; empty for one with no
        link (``Gaussian``). ``likelihood_for_link`` reads them.
    """

    name = ""
    links: tuple[str, ...] = ()

    @abstractmethod
    def expected_log_likelihood(self, mean: torch.Tensor, var: torch.Tensor,
                                target: torch.Tensor) -> torch.Tensor:
        """``sum_i E[log p(y_i | f(x_i))]`` under independent Gaussian latent marginals.

        Parameters
        ----------
        mean, var : torch.Tensor (n_latents, n)
            Latent marginal means and variances at the n observations.
        target : torch.Tensor (n,)
            The observations as ``targets`` encodes them.

        Returns
        -------
        torch.Tensor, a scalar (differentiable in ``mean`` and ``var``).
        """

    @abstractmethod
    def targets(self, y: np.ndarray) -> torch.Tensor:
        """The observations (n,) encoded for ``expected_log_likelihood``."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


class ClassLikelihood(Likelihood):
    """A likelihood over classes ``0..C-1`` through a link (abstract: ``Bernoulli``,
    ``Categorical``).

    Parameters
    ----------
    link : str or gpexplain.links.Link
        One of ``links``, or a ``Link`` instance.

    Raises
    ------
    ValueError
        A link this likelihood does not take.
    """

    def __init__(self, link: str):
        self.link = get_link(link)
        if self.link.name not in self.links:
            raise ValueError(
                f"the {self.name} likelihood takes the link(s) {self.links}, got "
                f"{self.link.name!r}."
            )

    def __repr__(self) -> str:
        return f"{type(self).__name__}(link={self.link.name!r})"

    @abstractmethod
    def n_latents(self, n_classes: int) -> int:
        """Latent GPs needed for ``n_classes`` classes."""

    def predict_proba(self, mean: np.ndarray, var: np.ndarray) -> np.ndarray:
        """Class probabilities ``E[p(y = c | f(x))]`` under the latent marginals, (n, C).

        Computed by the link's expectations (``gpexplain.links``), in blocks of rows, so
        they equal the ``prediction`` of a probability-level explanation.

        Parameters
        ----------
        mean, var : ndarray (n_latents, n)

        Returns
        -------
        ndarray (n, n_classes), columns in class order, rows summing to 1 (to rounding, or
        to the Monte Carlo error of a softmax over more than ``max_tensor_classes``).
        """
        return np.concatenate([
            self._class_probabilities(mean[:, start:start + _CHUNK_ROWS],
                                      var[:, start:start + _CHUNK_ROWS])
            for start in range(0, max(mean.shape[1], 1), _CHUNK_ROWS)
        ])

    @abstractmethod
    def _class_probabilities(self, mean: np.ndarray, var: np.ndarray) -> np.ndarray:
        """``predict_proba`` of one block of rows."""


def likelihood_for_link(link: str) -> ClassLikelihood:
    """The registered class likelihood that takes ``link`` (by name), built with it.

    Raises
    ------
    ValueError
        No registered likelihood takes that link.
    """
    for _, likelihood in LIKELIHOODS.items():
        if link in likelihood.links:
            return likelihood(link)
    raise ValueError(f"no likelihood takes the link {link!r}; registered: {LIKELIHOODS}.")
