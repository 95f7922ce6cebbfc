"""One walk over GPyTorch kernel trees, shared by every consumer that reads a kernel's structure.

A GPyTorch kernel is a tree: ``ScaleKernel``, ``AdditiveKernel`` and ``ProductKernel`` nodes,
gpexplain's ``InputScaledKernel`` (``gpexplain.kernels.gpytorch_adapter.input_scaled``, which
``GPRegressor`` wraps user kernels in) and leaves (RBF, Matern, periodic, linear, ...). Each node
may read a subset of its inputs (``active_dims``). ``KernelTreeVisitor`` walks the tree once,
the way GPyTorch evaluates it, and keeps track of where each node's inputs come from (a
``Frame``: an affine map from the original features to the node's own coordinates). A consumer
only says what a leaf is and how output scales, sums and products combine:

* ``gpexplain.kernels.derivatives`` (the derivative kernel at coinciding points, for gradient
  explanations), and
* ``gpexplain.kernels.stationary.radial_leaves`` (the radial pieces of a stationary kernel, for
  integrated-gradient quadrature),

so both accept exactly the same trees.

GPyTorch's semantics reproduced here: ``Kernel.__call__`` slices the inputs by the node's
``active_dims`` before ``forward``; ``ScaleKernel`` copies its base kernel's ``active_dims`` to
itself and calls the base's ``forward`` directly (the base's own ``active_dims`` is not applied
a second time); sums and products call their children through ``__call__``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

import numpy as np

from gpexplain._torch import to_numpy
from gpexplain.kernels.gpytorch_adapter import _input_scaled_class

__all__ = ["Frame", "KernelTreeVisitor"]

Result = TypeVar("Result")


@dataclass(frozen=True)
class Frame:
    """Where a node's inputs come from: ``x_local = (x[dims] - shift) / scale``.

    Attributes
    ----------
    dims : ndarray of int (n_local,)
        The original feature each local coordinate reads.
    shift, scale : ndarray (n_local,)
        Affine map of those features (``InputScaledKernel``); 0 and 1 otherwise.
    """

    dims: np.ndarray
    shift: np.ndarray
    scale: np.ndarray

    @classmethod
    def identity(cls, n_features: int) -> Frame:
        return cls(np.arange(n_features), np.zeros(n_features), np.ones(n_features))

    @property
    def size(self) -> int:
        return self.dims.shape[0]

    def restrict(self, module, active) -> Frame:
        """The frame after slicing the local coordinates by ``active`` (a node's active_dims).

        Raises
        ------
        ValueError
            An index outside the coordinates the node receives.
        """
        active = np.asarray(active, dtype=int)
        if active.size and (active.min() < 0 or active.max() >= self.size):
            raise ValueError(
                f"{type(module).__name__} has active_dims {active.tolist()} but the inputs have "
                f"{self.size} features."
            )
        return Frame(self.dims[active], self.shift[active], self.scale[active])

    def rescale(self, shift: np.ndarray, scale: np.ndarray) -> Frame:
        """The frame of ``(x_local - shift) / scale`` (composed into one affine map)."""
        return Frame(self.dims, self.shift + shift * self.scale, self.scale * scale)

    def local(self, X: np.ndarray) -> np.ndarray:
        """The node's own coordinates of points X (n_points, n_original_features)."""
        return (X[:, self.dims] - self.shift) / self.scale


class KernelTreeVisitor(ABC, Generic[Result]):
    """Fold a GPyTorch kernel tree bottom-up into one ``Result`` (abstract).

    ``visit(module, n_features)`` walks the tree; subclasses implement ``leaf``, ``scaled``,
    ``sum`` and ``product``. Children of sums and products are passed as a lazy iterator, so
    a consumer may stop at the first child it cannot handle. ``unsupported`` decides what an
    unknown node gives (raise, or a sentinel result).
    """

    def visit(self, module, n_features: int) -> Result:
        """The fold of ``module`` called on inputs with ``n_features`` original features."""
        return self._call(module, Frame.identity(n_features))

    # -- what a consumer supplies ----------------------------------------------------------
    @abstractmethod
    def leaf(self, module, frame: Frame) -> Result:
        """A leaf kernel (RBF, Matern, ...) evaluated through ``forward`` in ``frame``."""

    @abstractmethod
    def scaled(self, result: Result, outputscale: float) -> Result:
        """``outputscale * k``."""

    @abstractmethod
    def sum(self, results: Iterator[Result]) -> Result:
        """``k_1 + k_2 + ...``."""

    @abstractmethod
    def product(self, results: Iterator[Result]) -> Result:
        """``k_1 k_2 ...``."""

    def unsupported(self, module, reason: str) -> Result:
        """A node the walk cannot interpret (batched kernels); default: raise ValueError."""
        raise ValueError(f"{type(module).__name__}: {reason}.")

    # -- the walk ----------------------------------------------------------------------------
    def _call(self, module, frame: Frame) -> Result:
        """``module(x, x')``: GPyTorch's ``__call__`` applies active_dims, then ``forward``."""
        if len(getattr(module, "batch_shape", ())) > 0:
            return self.unsupported(
                module, f"batched kernels (batch_shape {tuple(module.batch_shape)})"
            )
        active = getattr(module, "active_dims", None)
        if active is not None:
            frame = frame.restrict(module, to_numpy(active))
        return self._forward(module, frame)

    def _forward(self, module, frame: Frame) -> Result:
        import gpytorch.kernels as gk

        kind = type(module)  # exact types: subclasses (e.g. RBFKernelGrad) change the outputs
        if kind is _input_scaled_class():
            scale = to_numpy(module.scale).astype(np.float64)
            shift = to_numpy(module.shift).astype(np.float64)
            inner = self._call(module.base_kernel, frame.rescale(shift, scale))
            return self.scaled(inner, _scalar(module.factor))
        if kind is gk.ScaleKernel:
            inner = self._forward(module.base_kernel, frame)  # forward: no second slicing
            return self.scaled(inner, _scalar(module.outputscale))
        if kind is gk.AdditiveKernel:
            return self.sum(self._call(child, frame) for child in module.kernels)
        if kind is gk.ProductKernel:
            return self.product(self._call(child, frame) for child in module.kernels)
        return self.leaf(module, frame)


def _scalar(parameter) -> float:
    return float(parameter.detach().reshape(-1)[0])
