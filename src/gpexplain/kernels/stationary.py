"""Recognise stationary GPyTorch kernels built from radial pieces, and where they are not smooth.

A kernel assembled from squared-exponential (``RBFKernel``), Matern (``MaternKernel``, nu 3/2
or 5/2) and rational-quadratic (``RQKernel``) kernels by ``ScaleKernel``, sums and products is
stationary: ``k(x, x') = K(x - x')``. Each radial piece ("leaf") is a function ``phi(r)`` of the
scaled distance ``r = |(x - x')_D / l|`` over its own feature subset D (``active_dims``) and
lengthscales l. Integrated-gradient quadrature needs two facts about such a kernel:

* stationarity, which turns the prior double integral over the path into a single integral
  (see ``gpexplain.functionals.quadrature``);
* where ``t -> k(xt + t (x - xt), z)`` is not analytic. ``phi`` of a Matern leaf contains odd
  powers of r, and ``r(t) = sqrt(h^2 + |u|^2 (t - t0)^2)`` has complex branch points at
  ``t0 +- i h / |u|`` (t0: closest approach of the path to z in the leaf's metric, h: the
  distance there); a rational quadratic has poles at ``t0 +- i sqrt(h^2 + 2 alpha) / |u|``;
  the squared exponential is entire.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpexplain._torch import to_numpy
from gpexplain.kernels.gpytorch_tree import Frame, KernelTreeVisitor

__all__ = ["RadialLeaf", "radial_leaves"]


@dataclass(frozen=True)
class RadialLeaf:
    """One radial factor or term of a stationary kernel.

    Attributes
    ----------
    dims : ndarray of int
        Feature indices the leaf acts on.
    lengthscale : ndarray of shape (len(dims),)
        Lengthscales of those features (original units of the kernel's inputs).
    pole_offset : float or None
        None: the leaf is entire in t (squared exponential). Otherwise the nearest complex
        singularity of the leaf along a path sits at ``t0 +- i sqrt(h^2 + pole_offset) / |u|``:
        0.0 for Matern (branch point of r), ``2 alpha`` for the rational quadratic (pole).
    """

    dims: np.ndarray
    lengthscale: np.ndarray
    pole_offset: float | None


def radial_leaves(module, n_features: int) -> list[RadialLeaf] | None:
    """The radial leaves of a stationary GPyTorch kernel, or None if it is not one of those.

    Parameters
    ----------
    module : gpytorch.kernels.Kernel
    n_features : int

    Returns
    -------
    list of RadialLeaf, or None when the kernel (or any part of it) is not a squared
    exponential, Matern, rational quadratic, or an output scaling, input scaling
    (``InputScaledKernel``), sum or product of those. ``active_dims`` anywhere in the tree
    are followed (``gpexplain.kernels.gpytorch_tree``).

    Raises
    ------
    ValueError
        A Matern kernel with nu = 1/2: its sample paths are not differentiable, so integrated
        gradients (and their covariance) do not exist.
    """
    return _RadialLeaves().visit(module, n_features)


class _RadialLeaves(KernelTreeVisitor[list | None]):
    """Flatten a kernel tree into its radial leaves; None for anything else.

    Output scales and the sum/product structure do not move a leaf's singularities, so they
    are dropped; an input scaling ``(x - m) / s`` multiplies the leaf's lengthscales by s.
    """

    def unsupported(self, module, reason: str) -> None:
        return None

    def scaled(self, result, outputscale: float):
        return result

    def sum(self, results):
        leaves = []
        for found in results:  # lazily: stop at the first part that is not radial
            if found is None:
                return None
            leaves.extend(found)
        return leaves

    product = sum

    def leaf(self, module, frame: Frame) -> list[RadialLeaf] | None:
        import gpytorch.kernels as gk

        if type(module) not in (gk.RBFKernel, gk.MaternKernel, gk.RQKernel):
            return None  # subclasses may change the formula: not assumed stationary
        if isinstance(module, gk.MaternKernel) and module.nu < 1.0:
            raise ValueError(
                "a Matern kernel with nu=0.5 is not differentiable: integrated gradients of its "
                "GP do not exist. Use nu=1.5 or nu=2.5."
            )
        lengthscale = to_numpy(module.lengthscale).astype(np.float64).reshape(-1)
        lengthscale = np.broadcast_to(lengthscale, frame.dims.shape) * frame.scale
        if isinstance(module, gk.RBFKernel):
            offset = None
        elif isinstance(module, gk.MaternKernel):
            offset = 0.0
        else:
            offset = 2.0 * float(module.alpha.detach().reshape(-1)[0])
        return [RadialLeaf(dims=frame.dims, lengthscale=lengthscale, pole_offset=offset)]
