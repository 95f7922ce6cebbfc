"""The one place that turns arrays into tensors and tensors back into arrays.

A tensor made for a model is made on that model's device and in its floating dtype (``like``:
a tensor or a ``torch.nn.Module``, e.g. a GPyTorch kernel), so a model on a GPU is evaluated
on the GPU; without ``like`` it is a CPU float64 tensor, gpexplain's precision for explanation
math. Tensors come back to NumPy through ``to_numpy``, which detaches and copies to the CPU
first (``Tensor.numpy`` refuses both a GPU tensor and one that requires grad).
"""

from __future__ import annotations

import itertools

import numpy as np
import torch

__all__ = ["as_tensor", "device_of", "dtype_of", "to_numpy"]


def _reference(like) -> torch.Tensor | None:
    """A tensor that carries ``like``'s device and dtype: itself, or a module's first
    floating parameter or buffer (its first tensor of any kind if none is floating)."""
    if like is None or isinstance(like, torch.Tensor):
        return like
    if isinstance(like, torch.nn.Module):
        tensors = list(itertools.chain(like.parameters(), like.buffers()))
        floating = [tensor for tensor in tensors if tensor.is_floating_point()]
        return (floating or tensors or [None])[0]
    raise TypeError(f"like must be a torch.Tensor, a torch.nn.Module or None, got "
                    f"{type(like).__name__}.")


def device_of(like) -> torch.device:
    """The device of a tensor or module (a module without tensors, or None: the CPU)."""
    reference = _reference(like)
    return torch.device("cpu") if reference is None else reference.device


def dtype_of(like) -> torch.dtype:
    """The floating dtype of a tensor or module (float64 when it has none, or for None)."""
    reference = _reference(like)
    if reference is None or not reference.is_floating_point():
        return torch.float64
    return reference.dtype


def as_tensor(values, like=None, dtype: torch.dtype | None = None) -> torch.Tensor:
    """``values`` as a tensor on ``like``'s device.

    Parameters
    ----------
    values : array-like, scalar or torch.Tensor
        A NumPy array is shared with the tensor when device and dtype allow it (as
        ``torch.as_tensor`` does), in its own memory layout (the layout decides the
        summation order of matrix products, so their last bits); views with negative
        strides (``X[::-1]``), which torch refuses, are copied first.
    like : torch.Tensor or torch.nn.Module, optional
        Where the tensor is used: it is made on this device and, unless ``dtype`` is given, in
        this floating dtype. None: the CPU and float64.
    dtype : torch.dtype, optional
        Overrides ``like``'s dtype, e.g. ``torch.long`` for index tensors.

    Returns
    -------
    torch.Tensor
        Same shape as ``values`` (a scalar gives a 0-d tensor).

    Raises
    ------
    TypeError
        ``like`` is neither a tensor, a module nor None.
    """
    device = device_of(like)
    dtype = dtype_of(like) if dtype is None else dtype
    if isinstance(values, torch.Tensor):
        return values.to(device=device, dtype=dtype)
    array = np.asarray(values)
    if any(stride < 0 for stride in array.strides):
        array = array.copy()
    return torch.as_tensor(array, dtype=dtype, device=device)


def to_numpy(value):
    """A tensor as a NumPy array (detached, on the CPU); anything else passed through.

    Parameters
    ----------
    value : torch.Tensor or any
        A tensor on any device, requiring grad or not.

    Returns
    -------
    numpy.ndarray, or ``value`` itself when it is not a tensor
        For a CPU tensor that does not require grad the array shares its memory (as
        ``Tensor.numpy`` does); callers that keep it past the tensor's next in-place change
        copy it.
    """
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    return value
