"""Recognise stationary GPyTorch kernels built from radial pieces, and where they are not smooth.

A kernel assembled from squared-exponential (``RBFKernel``), Matern (``MaternKernel``, nu 3/2
or 5/2) and rational-quadratic (``RQKernel``) kernels by ``ScaleKernel``, sums and products is
stationary: ``k(x, x') = K(x - x')``. Each radial piece ("leaf") is a function ``phi(r)`` of the
scaled distance ``r = |(x - x')_D / l|`` over its own feature subset D (``active_dims``) and
lengthscales l. Integrated-gradient quadrature needs two facts about such a kernel:

* stationarity, which turns the prior double integral over the path into a single integral
  (see ``gpexplain.explain.quadrature``);
* where ``t -> k(xt + t (x - xt), z)`` is not analytic. ``phi`` of a Matern leaf contains odd
  powers of r, and ``r(t) = sqrt(h^2 + |u|^2 (t - t0)^2)`` has complex branch points at
  ``t0 +- i h / |u|`` (t0: closest approach of the path to z in the leaf's metric, h: the
  distance there); a rational quadratic has poles at ``t0 +- i sqrt(h^2 + 2 alpha) / |u|``;
  the squared exponential is entire.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

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


def _active_dims(module, n_features: int) -> np.ndarray:
    dims = getattr(module, "active_dims", None)
    return np.arange(n_features) if dims is None else np.asarray(dims.tolist(), dtype=int)


def radial_leaves(module, n_features: int) -> list[RadialLeaf] | None:
    """The radial leaves of a stationary GPyTorch kernel, or None if it is not one of those.

    Parameters
    ----------
    module : gpytorch.kernels.Kernel
    n_features : int

    Returns
    -------
    list of RadialLeaf, or None when the kernel (or any part of it) is not a squared
    exponential, Matern, rational quadratic, ``ScaleKernel``, sum or product of those, or
    when a composite part restricts ``active_dims`` itself.

    Raises
    ------
    ValueError
        A Matern kernel with nu = 1/2: its sample paths are not differentiable, so integrated
        gradients (and their covariance) do not exist.
    """
    import gpytorch.kernels as gk
    import torch

    from gpexplain.kernels.gpytorch_adapter import _input_scaled_class

    if isinstance(module, _input_scaled_class()):
        # k((x - m)/s, (x' - m)/s): the same leaves with lengthscales l * s on their features.
        scale = module.scale.detach().numpy()
        inner = radial_leaves(module.base_kernel, n_features)
        if inner is None:
            return None
        return [
            RadialLeaf(leaf.dims, leaf.lengthscale * scale[leaf.dims], leaf.pole_offset)
            for leaf in inner
        ]
    if isinstance(module, gk.ScaleKernel | gk.AdditiveKernel | gk.ProductKernel):
        dims = getattr(module, "active_dims", None)
        # ScaleKernel copies its base kernel's active_dims and calls the base's forward on the
        # same slice; any other restriction at a composite level re-indexes the children.
        inherited = isinstance(module, gk.ScaleKernel) and (
            dims is None or dims is module.base_kernel.active_dims
            or bool(torch.equal(dims, module.base_kernel.active_dims))
        )
        if dims is not None and not inherited:
            return None
        children = (
            [module.base_kernel] if isinstance(module, gk.ScaleKernel) else list(module.kernels)
        )
        leaves = []
        for child in children:
            found = radial_leaves(child, n_features)
            if found is None:
                return None
            leaves.extend(found)
        return leaves
    if type(module) not in (gk.RBFKernel, gk.MaternKernel, gk.RQKernel):
        return None  # subclasses may change the formula: not assumed stationary
    if isinstance(module, gk.MaternKernel) and module.nu < 1.0:
        raise ValueError(
            "a Matern kernel with nu=0.5 is not differentiable: integrated gradients of its "
            "GP do not exist. Use nu=1.5 or nu=2.5."
        )
    dims = _active_dims(module, n_features)
    lengthscale = module.lengthscale.detach().double().numpy().reshape(-1)
    lengthscale = np.broadcast_to(lengthscale, dims.shape).copy()
    if isinstance(module, gk.RBFKernel):
        offset = None
    elif isinstance(module, gk.MaternKernel):
        offset = 0.0
    else:
        offset = 2.0 * float(module.alpha.detach().reshape(-1)[0])
    return [RadialLeaf(dims=dims, lengthscale=lengthscale, pole_offset=offset)]
