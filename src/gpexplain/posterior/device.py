"""The exact posterior's Cholesky factor on a torch device: the GPU path (issue 26).

At tens of thousands of training rows the cost of an exact GP explanation is linear algebra
on the (n, n) kernel matrix: one Cholesky factorisation to condition (n^3 / 3 flops: about
4e13 at n = 50,000) and, per explained point, the whitening ``L^{-1} (L k(., Z))^T`` of its D
cross terms (D n^2 flops), against O(D n) for the cross terms themselves. Here those two are
done in float64 torch on the device the user names (``ExactPosterior(..., device="cuda")``):
the kernel matrix is built there in row blocks from the kernel's GPyTorch form
(``Kernel.torch_kernel``), factorised with the same jitter schedule as on the CPU
(``exact.with_jitter``), and every triangular solve runs there; the explanation functionals
and the driver are unchanged and receive NumPy arrays back (``gpexplain._torch.to_numpy``).
On ``device="cpu"`` the same code runs in torch on the CPU, which is how the tests check it.
"""

from __future__ import annotations

import numpy as np
import torch

from gpexplain._torch import as_tensor, to_numpy

__all__ = ["check_device", "device_cholesky", "device_gram", "device_solve_lower"]

#: Entries of the kernel matrix built per block of rows (a block's GPyTorch intermediates are a
#: few copies of it: 256 MiB each).
_GRAM_BLOCK_ENTRIES = 2**25


def check_device(device) -> torch.device:
    """``device`` as a ``torch.device`` that this machine has.

    Raises
    ------
    TypeError
        Not a string or a ``torch.device``.
    ValueError
        A device torch does not know, or a CUDA device on a machine without one.
    """
    if not isinstance(device, str | torch.device):
        raise TypeError(f"device must be a string such as 'cuda' or 'cpu', or a torch.device, "
                        f"got {type(device).__name__}.")
    try:
        device = torch.device(device)
    except RuntimeError as error:
        raise ValueError(f"device {device!r} is not a torch device ({error}); use 'cpu', "
                         "'cuda' or 'cuda:0'.") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {str(device)!r} was asked for, but torch sees no CUDA device "
                         "on this machine (torch.cuda.is_available() is False): leave device "
                         "unset to run on the CPU.")
    if device.type == "cuda" and (device.index or 0) >= torch.cuda.device_count():
        raise ValueError(f"device {str(device)!r} does not exist: this machine has "
                         f"{torch.cuda.device_count()} CUDA device(s).")
    return device


def device_gram(kernel, X: np.ndarray, device: torch.device) -> torch.Tensor | None:
    """``k(X, X)`` as a float64 tensor on ``device``, built in row blocks from the kernel's
    GPyTorch form (``kernel.torch_kernel``); None when an entry is not finite.

    Parameters
    ----------
    kernel : gpexplain kernel
    X : ndarray (n, n_features)
    device : torch.device
    """
    module = kernel.torch_kernel(X.shape[1]).to(device=device, dtype=torch.float64)
    inputs = as_tensor(X, like=module)
    gram = torch.empty((len(X), len(X)), dtype=torch.float64, device=device)
    rows = max(1, _GRAM_BLOCK_ENTRIES // max(len(X), 1))
    with torch.no_grad():
        for start in range(0, len(X), rows):
            gram[start : start + rows] = module(inputs[start : start + rows], inputs).to_dense()
    return gram if bool(torch.isfinite(gram).all()) else None


def device_cholesky(gram: torch.Tensor, noise, with_jitter):
    """Lower Cholesky factor of ``gram + diag(noise)`` on the gram's device (``gram`` is
    overwritten: its diagonal holds the noise, and the last jitter tried, afterwards).

    Parameters
    ----------
    gram : torch.Tensor (n, n), float64
    noise : float or ndarray (n,)
    with_jitter : callable
        ``exact.with_jitter``: the CPU path's jitter schedule and its warning.

    Returns
    -------
    L : torch.Tensor (n, n)
    jitter : float

    Raises
    ------
    np.linalg.LinAlgError
        Not positive definite even with the largest jitter.
    """
    gram.diagonal().add_(as_tensor(noise, like=gram))
    diagonal = gram.diagonal().clone()

    def attempt(jitter):
        # On the diagonal in place: an (n, n) identity or sum would be one more matrix of
        # the size the device is there to hold (19 GB at n = 50,000).
        gram.diagonal().copy_(diagonal + jitter)
        factor, info = torch.linalg.cholesky_ex(gram)
        return factor if int(info) == 0 else None

    return with_jitter(attempt, float(diagonal.mean()))


def device_solve_lower(factor: torch.Tensor, rhs: np.ndarray, transpose: bool = False
                       ) -> np.ndarray:
    """``L^{-1} rhs`` (or ``L^{-T} rhs`` with ``transpose``) on the factor's device, as NumPy.

    Parameters
    ----------
    factor : torch.Tensor (n, n), lower triangular
    rhs : ndarray (n,) or (n, k)
    """
    right = as_tensor(rhs, like=factor)
    matrix = right[:, None] if right.ndim == 1 else right
    solved = torch.linalg.solve_triangular(factor.mT if transpose else factor, matrix,
                                           upper=transpose)
    return to_numpy(solved[:, 0] if right.ndim == 1 else solved)
