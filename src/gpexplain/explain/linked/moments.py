"""Joint Gaussian moments of ``f(x)`` and ``grad f(x)`` per point, mapped through a link.

Per point: mean, variance, ``E grad f``, ``Cov(f, grad f)`` and optionally ``Cov(grad f)``,
from the posterior's representer form and the gradient functional's scheme for its kernel
(the generic formula of DESIGN.md applied to the stacked functionals
``(f, d_1 f, ..., d_d f)``); the link turns them into ``E[p]``, ``E[grad p]`` and
``Cov[grad p]`` (``gpexplain.links``).
"""

from __future__ import annotations

import numpy as np

from gpexplain.functionals.gradient import Gradient
from gpexplain.links.base import LatentMoments
from gpexplain.posterior.linked import LinkedPosterior

__all__ = ["expected_probability_and_gradient", "latent_gradient_moments"]

_PRIOR_BLOCK = 64  # points per block of the prior Cov(f, grad f) (a block x block slab)


def _prior_value_gradient(scheme_at, kernel, X: np.ndarray) -> np.ndarray:
    """Prior ``Cov(f(x), d_k f(x)) = d/dq_k k(q, x)`` at q = x, (n, d): zero for stationary
    kernels, not for e.g. a linear one; the gradient functional's cross term evaluated with
    the point itself as the only basis point, in blocks so memory stays small."""
    rows = []
    for start in range(0, len(X), _PRIOR_BLOCK):
        block = X[start:start + _PRIOR_BLOCK]
        cross = scheme_at(kernel, block).cross(block)  # (b, d, b)
        rows.append(np.einsum("pkp->pk", cross))
    return np.concatenate(rows) if rows else np.zeros((0, X.shape[1]))


def latent_gradient_moments(posterior, scheme, X: np.ndarray, full: bool):
    """``LatentMoments(mean, var, grad_mean, grad_cov, grad_grad_cov)`` of ``(f(x), grad f(x))``
    at X.

    Shapes (n,), (n,), (n, d), (n, d) and (n, d, d) (None unless ``full``): the generic
    formula of DESIGN.md applied to the stacked functionals ``(f, d_1 f, ..., d_d f)``.
    """
    cross_f = scheme.kernel_matrix(X)  # (n, n_basis)
    if full:
        cross_g, prior_g = scheme.cross_and_prior(X)
    else:
        cross_g, prior_g = scheme.cross(X), None
    left = cross_f[:, None, :]
    mean = posterior.mean + cross_f @ posterior.alpha
    var = np.maximum(posterior.kernel.diag(X) - posterior.quadratic_form(left)[:, 0, 0], 0.0)
    grad_mean = cross_g @ posterior.alpha
    prior_fg = _prior_value_gradient(
        lambda kernel, Z: Gradient().bind(kernel, Z), posterior.kernel, X
    )
    grad_cov = prior_fg - posterior.quadratic_form(left, cross_g)[:, 0, :]
    grad_grad_cov = None
    if full:
        grad_grad_cov = prior_g - posterior.quadratic_form(cross_g)
        grad_grad_cov = 0.5 * (grad_grad_cov + np.swapaxes(grad_grad_cov, 1, 2))
    return LatentMoments(mean, var, grad_mean, grad_cov, grad_grad_cov)


def expected_probability_and_gradient(linked: LinkedPosterior, schemes, X: np.ndarray,
                                      full: bool = False):
    """``E[p(x)]`` (n,), ``E[grad p(x)]`` (n, d) and, if ``full`` (a link that gives the
    covariance), ``Cov[grad p(x)]`` (n, d, d) else None: each latent's joint moments, mapped
    through the link (``Link.probability_and_gradient``)."""
    latents = [
        latent_gradient_moments(posterior, scheme, X, full)
        for posterior, scheme in zip(linked.posteriors, schemes, strict=True)
    ]
    return linked.link.probability_and_gradient(latents, linked.target_class, full)
