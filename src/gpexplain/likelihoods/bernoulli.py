"""The Bernoulli observation model of a binary classifier, ``p(y = 1 | f) = sigma(f)``."""

from __future__ import annotations

from functools import cache

import numpy as np
import torch

from gpexplain.likelihoods.base import LIKELIHOODS, ClassLikelihood

__all__ = ["ELL_NODES", "Bernoulli"]

ELL_NODES = 32  # Gauss-Hermite nodes of the expected log likelihood


@cache
def hermite_normal_rule(n_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """Gauss-Hermite nodes z and weights w for E[g(Z)], Z ~ N(0, 1): sum_i w_i g(z_i).

    The same rule as ``gpexplain.links.base.hermite_rule`` but from NumPy's ``hermegauss``,
    which differs from scipy's in the last bits (1.8e-15 at 32 nodes): kept for the fit's
    objective, so fitted classifiers stay bit-identical to those fitted before the likelihoods
    moved here (the optimiser's path would amplify a last-bit change)."""
    nodes, weights = np.polynomial.hermite_e.hermegauss(n_nodes)
    return nodes, weights / np.sqrt(2.0 * np.pi)


@LIKELIHOODS.register("bernoulli")
class Bernoulli(ClassLikelihood):
    """Bernoulli likelihood of one latent, ``p(y = 1 | f) = sigma(f)`` (logit or probit link).

    The expected log likelihood is a fixed 1-D Gauss-Hermite rule with ``ELL_NODES`` (32)
    nodes of ``log sigma(s f)``, ``s = +1`` for class 1 and ``-1`` for class 0 (sigma is
    symmetric, ``1 - sigma(f) = sigma(-f)``), so a fit is a deterministic function of its
    seed (Hensman, Matthews and Ghahramani, "Scalable variational Gaussian process
    classification", 2015). Class probabilities: ``E[sigma(f)]`` by the link (probit in
    closed form; logit by adaptive Gauss-Hermite or, for latent variances above 1, a
    trapezoid rule in the latent value, both converged to 1e-12).

    Parameters
    ----------
    link : {"logit", "probit"} or gpexplain.links.Logit / Probit, default "logit"
    """

    links = ("logit", "probit")

    def __init__(self, link="logit"):
        super().__init__(link)

    def n_latents(self, n_classes: int) -> int:
        return 1

    def targets(self, y: np.ndarray) -> torch.Tensor:
        """The signs ``s = 2 y - 1`` of class indices y in {0, 1}."""
        return torch.as_tensor(2.0 * np.asarray(y) - 1.0)

    def expected_log_likelihood(self, mean, var, target):
        nodes, weights = (torch.as_tensor(a) for a in hermite_normal_rule(ELL_NODES))
        f = mean[0][:, None] + torch.sqrt(var)[0][:, None] * nodes  # (n, nodes)
        return (self.link.log_response(target[:, None] * f) @ weights).sum()

    def _class_probabilities(self, mean, var):
        positive = np.clip(self.link.expected_response(mean[0], var[0]), 0.0, 1.0)
        return np.column_stack([1.0 - positive, positive])
