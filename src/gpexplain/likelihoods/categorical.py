"""The categorical observation model of a multiclass classifier, ``p(y = c | f) = S_c(f)``."""

from __future__ import annotations

from functools import cache

import numpy as np
import torch
from scipy.special import ndtri
from scipy.stats import qmc

from gpexplain.likelihoods.base import LIKELIHOODS, ClassLikelihood
from gpexplain.likelihoods.bernoulli import hermite_normal_rule

__all__ = ["Categorical"]

_SOFTMAX_NODES = {2: 32, 3: 16}  # tensor Gauss-Hermite nodes per latent
_SOFTMAX_QMC_POINTS = 1024  # a power of two keeps the Sobol points balanced


@cache
def softmax_rule(n_classes: int) -> tuple[np.ndarray, np.ndarray]:
    """Standard normal points (n_points, C) and weights (n_points,) for the expected log
    likelihood: tensor Gauss-Hermite for C <= 3; 1024 scrambled Sobol points (seed 0)
    otherwise."""
    if n_classes in _SOFTMAX_NODES:
        nodes, weights = hermite_normal_rule(_SOFTMAX_NODES[n_classes])
        grids = np.meshgrid(*[nodes] * n_classes, indexing="ij")
        points = np.stack([grid.ravel() for grid in grids], axis=1)
        products = np.prod(np.meshgrid(*[weights] * n_classes, indexing="ij"), axis=0).ravel()
        return points, products
    uniform = qmc.Sobol(n_classes, scramble=True, seed=0).random(_SOFTMAX_QMC_POINTS)
    return ndtri(uniform), np.full(_SOFTMAX_QMC_POINTS, 1.0 / _SOFTMAX_QMC_POINTS)


@LIKELIHOODS.register("categorical")
class Categorical(ClassLikelihood):
    """Categorical likelihood over C independent latents, ``p(y = c | f) = S_c(f) =
    exp(f_c) / sum_j exp(f_j)`` (Seitz 2022, eqs. 25-26).

    The expected log likelihood ``E[f_y] - E[log sum_j exp f_j]`` takes ``E[f_y]`` exactly
    and the log partition by a fixed rule, so a fit is a deterministic function of its seed:
    the tensor-product Gauss-Hermite rule (32 nodes per latent for C = 2, 16 for C = 3), and
    above that 1024 scrambled Sobol points (seed 0, mapped through the normal quantile: a
    randomised quasi-Monte Carlo rule, fixed once, with error about 1e-3 relative for
    unit-scale latent variances). Class probabilities: ``E[S(f)]`` by the softmax link's
    rules (product trapezoid over class differences to about 1e-12 for C <= 3, randomised
    QMC above; ``gpexplain.links.Softmax``).

    Parameters
    ----------
    link : {"softmax"} or gpexplain.links.Softmax, default "softmax"
    """

    links = ("softmax",)

    def __init__(self, link="softmax"):
        super().__init__(link)

    def n_latents(self, n_classes: int) -> int:
        return n_classes

    def targets(self, y: np.ndarray) -> torch.Tensor:
        """Class indices y in 0..C-1, as ``long``."""
        return torch.as_tensor(y, dtype=torch.long)

    def expected_log_likelihood(self, mean, var, target):
        points, weights = (torch.as_tensor(a) for a in softmax_rule(mean.shape[0]))
        # E[f_y] is exact; only E[log sum_j exp f_j] needs the rule.
        f = mean.T[None] + torch.sqrt(var).T[None] * points[:, None, :]  # (points, n, C)
        log_partition = weights @ torch.logsumexp(f, dim=-1)  # (n,)
        return (mean.T.gather(1, target[:, None]).squeeze(1) - log_partition).sum()

    def _class_probabilities(self, mean, var):
        return self.link.expected_response(mean.T, var.T)
