"""The ``Link`` base, the link registry and the shared one-dimensional Gaussian expectations.

A link's expectations are computed by one of its **forms**, chosen once when the link is
built: ``"quadrature"`` (the exact expectations: closed forms or converged quadrature; the
form each link family defines next to it) or ``"taylor"`` (the paper's second-order Taylor
approximations, ``gpexplain.links.taylor``, for comparison only). The public methods of a
link validate their arguments and hand them to its form, so nothing branches on the
approximation's name after construction.

The one-dimensional rules shared by the binary links: Gauss-Hermite with the node count
doubled (32 .. 1024) until two successive rules agree to 1e-12 (``gauss_hermite_expectations``,
refined by ``refine``).
"""

from __future__ import annotations

import warnings
from functools import cache
from typing import NamedTuple

import numpy as np
from scipy.special import roots_hermite

from gpexplain._registry import Registry

__all__ = ["APPROXIMATIONS", "LINKS", "BinaryReduction", "Form", "LatentMoments", "Link",
           "gauss_hermite_expectations", "get_link", "refine"]

#: Every link, by name (registered where each is defined; ``get_link`` looks them up).
LINKS = Registry("link")
APPROXIMATIONS = ("quadrature", "taylor")
TOLERANCE = 1e-12
_BINARY_NODES = (32, 64, 128, 256, 512, 1024)
SQRT_2PI = np.sqrt(2.0 * np.pi)
_TAYLOR_COVARIANCE = (
    "the Taylor approximation gives expected gradients only; use approximation='quadrature' "
    "for their covariance."
)


@cache
def hermite_rule(n_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes ``sqrt(2) x_i`` and weights ``w_i / sqrt(pi)`` of an expectation over N(0, 1).

    scipy's rule, which switches to an asymptotic construction for many nodes (NumPy's
    ``hermgauss`` overflows above a few hundred)."""
    nodes, weights = roots_hermite(n_nodes)
    return np.sqrt(2.0) * nodes, weights / np.sqrt(np.pi)


def as_moments(mean, var, name_mean="mean", name_var="var"):
    """``mean, var`` as float64 arrays of one shape, finite, ``var >= 0``.

    Raises
    ------
    ValueError
        Shapes that differ, non-finite values or a negative variance (the arguments named).
    """
    mean = np.asarray(mean, dtype=np.float64)
    var = np.asarray(var, dtype=np.float64)
    if mean.shape != var.shape:
        raise ValueError(
            f"{name_mean} and {name_var} must have the same shape, got {mean.shape} and "
            f"{var.shape}."
        )
    if not (np.all(np.isfinite(mean)) and np.all(np.isfinite(var))):
        raise ValueError(f"{name_mean} and {name_var} must be finite.")
    if np.any(var < 0):
        raise ValueError(f"{name_var} must be >= 0 (a variance), got min {var.min():g}.")
    return mean, var


def check_gradient_moments(mean, grad_mean, grad_cov, lead: tuple[int, ...]):
    """``grad_mean, grad_cov`` as float64 arrays of shape ``lead + (n_features,)``, finite.

    Raises
    ------
    ValueError
        Another shape or non-finite values.
    """
    grad_mean = np.asarray(grad_mean, dtype=np.float64)
    grad_cov = np.asarray(grad_cov, dtype=np.float64)
    if grad_mean.ndim != len(lead) + 1 or grad_mean.shape[:-1] != lead:
        raise ValueError(
            f"grad_mean must have shape {lead + ('n_features',)}, got {grad_mean.shape}."
        )
    if grad_cov.shape != grad_mean.shape:
        raise ValueError(
            f"grad_cov (Cov(f, df/dx_k)) must have the shape of grad_mean {grad_mean.shape}, "
            f"got {grad_cov.shape}."
        )
    if not (np.all(np.isfinite(grad_mean)) and np.all(np.isfinite(grad_cov))):
        raise ValueError("grad_mean and grad_cov must be finite.")
    return grad_mean, grad_cov


def check_gradient_covariance(grad_mean: np.ndarray, grad_grad_cov) -> np.ndarray:
    """``grad_grad_cov`` as a float64 array of shape ``grad_mean.shape + (n_features,)``.

    Raises
    ------
    ValueError
        Another shape.
    """
    G = np.asarray(grad_grad_cov, dtype=np.float64)
    if G.shape != grad_mean.shape + grad_mean.shape[-1:]:
        raise ValueError(
            f"grad_grad_cov must have shape {grad_mean.shape + grad_mean.shape[-1:]}, got "
            f"{G.shape}."
        )
    return G


def gauss_hermite_expectations(function, mean: np.ndarray, var: np.ndarray,
                               tolerance: float = TOLERANCE, what: str = "expectation"):
    """``E[function(f)]`` for f ~ N(mean, var) elementwise, by adaptive Gauss-Hermite.

    ``function`` maps an array of latent values (..., n_nodes) to a stacked array
    (n_outputs, ..., n_nodes). The node count doubles (32 .. 1024) until two successive rules
    agree to ``tolerance`` everywhere; otherwise a ``RuntimeWarning`` reports the gap.

    Returns
    -------
    ndarray (n_outputs, ...)
    """
    scale = np.sqrt(var)[..., None]

    def rule(n_nodes):
        nodes, weights = hermite_rule(n_nodes)
        return function(mean[..., None] + scale * nodes) @ weights

    return refine(_BINARY_NODES, rule, tolerance, lambda n_nodes, gap: (
        f"Gauss-Hermite {what} did not converge to {tolerance:g} with {n_nodes} nodes "
        f"(change between the last two rules {gap:.3g}); a latent variance of "
        f"{float(np.max(var)):.3g} is very wide for the link."
    ))


def refine(node_counts, rule, tolerance: float, failure):
    """``rule(n)`` for growing node counts until two successive results agree to
    ``tolerance``; otherwise the last one, with a ``RuntimeWarning`` ``failure(n, gap)``."""
    previous = None
    for n_nodes in node_counts:
        current = rule(n_nodes)
        if previous is not None:
            gap = float(np.max(np.abs(current - previous), initial=0.0))
            if gap <= tolerance:
                return current
        previous = current
    warnings.warn(failure(n_nodes, gap), RuntimeWarning, stacklevel=4)
    return current


class LatentMoments(NamedTuple):
    """Joint Gaussian moments of one latent ``f(x)`` and its gradient at n points.

    Attributes
    ----------
    mean, var : ndarray (n,)
    grad_mean : ndarray (n, d)
        ``E[d f / dx_k]``.
    grad_cov : ndarray (n, d)
        ``Cov(f(x), d f(x) / dx_k)``.
    grad_grad_cov : ndarray (n, d, d) or None
        ``Cov(d f / dx_k, d f / dx_l)`` (the derivative process), when a covariance is wanted.
    """

    mean: np.ndarray
    var: np.ndarray
    grad_mean: np.ndarray
    grad_cov: np.ndarray
    grad_grad_cov: np.ndarray | None


class BinaryReduction(NamedTuple):
    """A class probability written as a binary link of one Gaussian latent,
    ``p = link(sum_i coefficient_i f_i)`` over independent latents ``f_i``.

    Attributes
    ----------
    link : Link
        A binary link (logit or probit) with exact bivariate expectations.
    terms : tuple of (float, int)
        ``(coefficient, latent index)`` pairs.
    description : str
        How the reduction was made, for ``method`` strings ("" when the latent is the model's
        own).
    """

    link: Link
    terms: tuple[tuple[float, int], ...]
    description: str = ""


class Form:
    """How a link's expectations are computed (abstract): its exact ``quadrature`` form or
    the ``taylor`` approximation. Built by ``Link.__init__`` with the link it serves.

    Attributes
    ----------
    gives_covariance : bool
        Whether the form gives the posterior covariance of gradients (Taylor does not).
    """

    gives_covariance = True

    def __init__(self, link: Link):
        self.link = link

    def describe(self, n_latents: int) -> str:
        """How the expectations are computed, for ``method`` strings."""
        raise NotImplementedError

    def covariance(self, *moments, **options):
        """The covariance of gradients (see the link's ``gradient_covariance``).

        Raises
        ------
        ValueError
            A form without one (``gives_covariance`` False).
        """
        raise ValueError(_TAYLOR_COVARIANCE)


class Link:
    """A link's Gaussian expectations (abstract base; see ``Logit``, ``Probit``, ``Softmax``).

    Parameters
    ----------
    approximation : {"quadrature", "taylor"}, default "quadrature"
        ``"quadrature"``: the exact expectations (closed form or converged quadrature).
        ``"taylor"``: the paper's second-order Taylor approximations, for comparison only.

    Attributes
    ----------
    form : Form
        The expectations' implementation chosen by ``approximation``
        (``forms[approximation]``, built once).
    standard_error_ : float
        The largest Monte Carlo standard error of the last call's expectations: 0.0 for the
        deterministic rules (a link estimating by randomised QMC sets it per call).

    Raises
    ------
    ValueError
        An unknown ``approximation``.
    """

    name = ""
    #: The family's forms by approximation name (set by each family).
    forms: dict[str, type[Form]] = {}
    standard_error_ = 0.0

    def __init__(self, approximation: str = "quadrature"):
        if approximation not in APPROXIMATIONS:
            raise ValueError(
                f"approximation must be one of {APPROXIMATIONS}, got {approximation!r}."
            )
        self.approximation = approximation
        self.form = self.forms[approximation](self)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(approximation={self.approximation!r})"

    @property
    def gives_covariance(self) -> bool:
        """Whether this link, as built, gives the covariance of gradients."""
        return self.form.gives_covariance

    def describe(self, n_latents: int) -> str:
        """How the expectations are computed for ``n_latents`` latents (``method`` strings)."""
        return self.form.describe(n_latents)

    def check_latent_count(self, n_latents: int) -> None:
        """Refuse a number of latent posteriors this link does not take.

        Raises
        ------
        ValueError
            The number does not fit (binary links take one; the softmax one per class).
        """
        raise NotImplementedError

    def probability_and_gradient(self, latents: list[LatentMoments], target_class: int,
                                 full: bool):
        """``E[p(x)]`` (n,), ``E[grad p(x)]`` (n, d) and, if ``full``, ``Cov[grad p(x)]``
        (n, d, d) else None, of class ``target_class`` from each latent's moments (one per
        latent, in class order)."""
        raise NotImplementedError

    def binary_reduction(self, target_class: int, n_latents: int) -> BinaryReduction | None:
        """The class probability as a binary link of one Gaussian latent, whose integrated
        gradients have an exact covariance; None where there is none (the Taylor form; a
        softmax over C >= 3 classes)."""
        return None


def get_link(link) -> Link:
    """A ``Link`` from a registered name ("logit", "probit", "softmax") or a ``Link`` instance.

    Raises
    ------
    ValueError
        Unknown name (the message suggests the closest registered one).
    TypeError
        Neither a name nor a ``Link``.
    """
    if isinstance(link, Link):
        return link
    if isinstance(link, str):
        return LINKS.get(link)()
    raise TypeError(
        f"link must be one of {LINKS.names()} or a gx.links.Link, got {type(link).__name__}."
    )
