"""Use any GPyTorch kernel where gpytorch expects a kernel: values in NumPy, autograd in torch.

Kernels without closed-form functionals are explained numerically (quadrature with autograd);
this adapter gives them the same small interface as the closed-form kernels.
"""

from __future__ import annotations

import numpy as np

from gpexplain._torch import as_tensor, to_numpy
from gpexplain.kernels.base import Kernel
from gpexplain.kernels.rbf import RBF

__all__ = ["GPyTorchKernel", "as_kernel", "input_scaled", "squared_exponential"]


class GPyTorchKernel(Kernel):
    """Wrap a ``gpytorch.kernels.Kernel`` (converted to float64) behind gpexplain's interface.

    Parameters
    ----------
    module : gpytorch.kernels.Kernel
        Any differentiable GPyTorch kernel, including sums and products of kernels. Its
        hyperparameters are used as they are; it is not trained here.
    """

    def __init__(self, module):
        import gpytorch

        if not isinstance(module, gpytorch.kernels.Kernel):
            raise TypeError(
                f"expected a gpytorch.kernels.Kernel, got {type(module).__name__}."
            )
        self.module = module.double().eval()

    def __repr__(self) -> str:
        return f"GPyTorchKernel({self.module!r})"

    def __call__(self, X1: np.ndarray, X2: np.ndarray) -> np.ndarray:
        """Kernel matrix of shape (n1, n2)."""
        import torch

        with torch.no_grad():
            K = self.module(self._module_input(X1), self._module_input(X2))
            return to_numpy(K.to_dense())

    def diag(self, X: np.ndarray) -> np.ndarray:
        """``k(x, x)`` for each row, shape (n,)."""
        import torch

        with torch.no_grad():
            X_t = self._module_input(X)
            return to_numpy(self.module(X_t, X_t, diag=True))

    def torch_kernel(self, n_features: int):
        """The wrapped module (used by autograd-based explanations)."""
        return self.module

    def _module_input(self, X):
        """``X`` as a tensor on the module's device, in C order as the module has always been
        given here (the layout decides the summation order, so the last bits, of its matrix
        products)."""
        return as_tensor(np.ascontiguousarray(X), like=self.module)


def squared_exponential(module):
    """The ``gx.kernels.RBF`` equal to a GPyTorch ``RBFKernel`` or ``ScaleKernel(RBFKernel)``.

    The conversion is exact: ``RBFKernel`` computes ``exp(-0.5 |(x - x')/l|^2)`` with one
    lengthscale (isotropic) or one per input (ARD), and ``ScaleKernel`` multiplies it by the
    ``outputscale``, which is gpexplain's ``variance``. Priors and constraints only shape how
    the hyperparameters are trained, not the kernel's values, so they do not prevent the
    conversion (nothing is trained afterwards).

    Returns
    -------
    RBF, or None when the module is anything else: another kernel, a subclass, a batch of
    kernels, or a kernel restricted by ``active_dims`` (explained by quadrature instead).
    """
    import gpytorch.kernels as gk

    variance = 1.0
    if type(module) is gk.ScaleKernel:
        if module.active_dims is not None or module.outputscale.numel() != 1:
            return None
        variance = float(module.outputscale.detach().reshape(-1)[0])
        module = module.base_kernel
    if type(module) is not gk.RBFKernel or module.active_dims is not None:
        return None
    if len(module.batch_shape) > 0:
        return None
    lengthscale = to_numpy(module.lengthscale).astype(np.float64).reshape(-1)
    if module.ard_num_dims is None or module.ard_num_dims == 1:
        return RBF(float(lengthscale[0]), variance)
    return RBF(lengthscale.copy(), variance)


def as_kernel(kernel):
    """Return ``kernel`` if it is a gpexplain ``Kernel``, else convert or wrap it.

    A GPyTorch ``RBFKernel`` / ``ScaleKernel(RBFKernel)`` becomes the equivalent
    ``gx.kernels.RBF`` (``squared_exponential``), so it gets closed-form explanations; any
    other GPyTorch kernel is wrapped in ``GPyTorchKernel`` (explained by quadrature).

    Raises
    ------
    TypeError
        Neither a gpexplain kernel nor a GPyTorch kernel.
    """
    if isinstance(kernel, Kernel):
        return kernel
    try:
        wrapped = GPyTorchKernel(kernel)
    except TypeError:
        raise TypeError(
            f"kernel must be a gpexplain kernel (e.g. gx.kernels.RBF) or a "
            f"gpytorch.kernels.Kernel, got {type(kernel).__name__}."
        ) from None
    converted = squared_exponential(wrapped.module)
    return wrapped if converted is None else converted


def input_scaled(module, shift, scale, outputscale: float = 1.0):
    """``outputscale * k((x - shift) / scale, (x' - shift) / scale)`` as a GPyTorch kernel.

    The exact original-units form of any kernel ``k`` fitted on standardised inputs and
    targets (``shift``: column means, ``scale``: column standard deviations, ``outputscale``:
    the target variance). Stationary kernels are unaffected by ``shift``; the result stays
    recognisable to ``gpexplain.kernels.stationary.radial_leaves`` (its leaves' lengthscales
    are multiplied by ``scale``).

    Parameters
    ----------
    module : gpytorch.kernels.Kernel
    shift, scale : array-like of shape (n_features,); scale > 0
    outputscale : float > 0

    Returns
    -------
    InputScaledKernel (a float64 ``gpytorch.kernels.Kernel``)
    """
    return _input_scaled_class()(module, shift, scale, outputscale).double().eval()


_INPUT_SCALED = {}


def _input_scaled_class():
    """The ``gpytorch.kernels.Kernel`` subclass, defined on first use (gpytorch imported late)."""
    if "class" in _INPUT_SCALED:
        return _INPUT_SCALED["class"]
    import gpytorch
    import torch

    class InputScaledKernel(gpytorch.kernels.Kernel):
        """``outputscale * base((x - shift)/scale, (x' - shift)/scale)``; see ``input_scaled``."""

        def __init__(self, base_kernel, shift, scale, outputscale):
            super().__init__()
            self.base_kernel = base_kernel
            # On the base kernel's device; float64 until ``input_scaled`` converts the whole.
            for name, value in (("shift", shift), ("scale", scale), ("factor", outputscale)):
                self.register_buffer(
                    name, as_tensor(value, like=base_kernel, dtype=torch.float64)
                )

        @property
        def is_stationary(self) -> bool:
            return self.base_kernel.is_stationary

        def forward(self, x1, x2, diag=False, **params):
            # __call__ (not forward) on the base: its children apply their own active_dims.
            values = self.base_kernel(
                (x1 - self.shift) / self.scale, (x2 - self.shift) / self.scale, diag=diag,
                **params,
            )
            if not diag:
                values = values.to_dense()
            return self.factor * values

    _INPUT_SCALED["class"] = InputScaledKernel
    return InputScaledKernel


# Saves name the class by its qualified name, ``..._input_scaled_class.<locals>.InputScaledKernel``;
# this marks the function as one that persistence may call to find the class again on load.
_input_scaled_class._returns_saved_class = True
