"""Use any GPyTorch kernel where gpytorch expects a kernel: values in NumPy, autograd in torch.

Kernels without closed-form functionals are explained numerically (quadrature with autograd);
this adapter gives them the same small interface as the closed-form kernels.
"""

from __future__ import annotations

import numpy as np

__all__ = ["GPyTorchKernel", "as_kernel"]


class GPyTorchKernel:
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
            K = self.module(
                torch.as_tensor(X1, dtype=torch.float64), torch.as_tensor(X2, dtype=torch.float64)
            ).to_dense()
        return K.numpy()

    def diag(self, X: np.ndarray) -> np.ndarray:
        """``k(x, x)`` for each row, shape (n,)."""
        import torch

        with torch.no_grad():
            X_t = torch.as_tensor(X, dtype=torch.float64)
            return self.module(X_t, X_t, diag=True).numpy()

    def torch_kernel(self, n_features: int):
        """The wrapped module (used by autograd-based explanations)."""
        return self.module


def as_kernel(kernel):
    """Return ``kernel`` if it already speaks gpexplain's interface, else wrap a GPyTorch kernel.

    Raises
    ------
    TypeError
        Neither a gpexplain kernel nor a GPyTorch kernel.
    """
    if callable(kernel) and hasattr(kernel, "diag") and hasattr(kernel, "torch_kernel"):
        return kernel
    try:
        return GPyTorchKernel(kernel)
    except TypeError:
        raise TypeError(
            f"kernel must be a gpexplain kernel (e.g. gx.kernels.RBF) or a "
            f"gpytorch.kernels.Kernel, got {type(kernel).__name__}."
        ) from None
