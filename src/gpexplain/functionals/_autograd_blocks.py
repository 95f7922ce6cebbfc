"""Kernel derivatives by autograd over explicit pairs, in blocks of bounded memory.

The quadrature schemes (``gpexplain.functionals.quadrature``) differentiate a GPyTorch kernel
on explicit pairs ``k(left_m, right_m)`` (``diag=True``: each pair's gradient is one backward
pass away, and GPyTorch's pairwise path, ``torch.cdist``, has no double backward). Autograd
keeps the intermediates of every pair for the backward pass: a few hundred bytes for a Matern
kernel, but tens of kilobytes for a random-feature kernel (a cosine and a sine per frequency)
or an orthogonal additive kernel with an empirical measure (an exponential per atom and
feature), so evaluating all the pairs of one explained point at once took gigabytes (issue
27 item 22: 2.7 GB per point at 30 features).

Here the pairs are evaluated in blocks whose autograd graph stays under
``GRAPH_BUDGET_BYTES``. What one pair costs is measured, not guessed: the bytes autograd
saves for backward (``torch.autograd.graph.saved_tensors_hooks``) on two probe blocks of
different sizes give a fixed part and a part per pair, once per kernel module. The same
measure prices a whole explanation before it runs (``graph_bytes``): autograd's time is
roughly proportional to the bytes it saves (``SECONDS_PER_GRAPH_BYTE``).
"""

from __future__ import annotations

import weakref

import numpy as np

from gpexplain._torch import as_tensor

__all__ = [
    "GRAPH_BUDGET_BYTES",
    "SECONDS_PER_GRAPH_BYTE",
    "graph_bytes",
    "pair_gradients",
    "weighted_mixed_derivatives",
]

#: Most bytes autograd may save for one block of pairs (the working set of a block is about
#: twice that, with the gradients being formed).
GRAPH_BUDGET_BYTES = 128 * 2**20
#: Seconds per byte autograd saves, for the kernels whose pairs are expensive (random
#: features, orthogonal additive): 3-10 ns measured on one core for first and second
#: derivatives (blocks of 4096 pairs); cheap kernels are dominated by per-operation overhead
#: instead, and are never slow enough to matter.
SECONDS_PER_GRAPH_BYTE = 4e-9

_PROBE_SIZES = (8, 24)
# Measured (fixed, per pair) bytes per kernel module, by (n_features, second order).
_MEASURED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def _gradient(output, wrt, **options):
    """``d output / d wrt`` by autograd, zeros where ``output`` does not depend on ``wrt`` (a
    kernel whose every lengthscale is infinite is constant: torch would raise instead)."""
    import torch

    if not output.requires_grad:
        return torch.zeros_like(wrt)
    (gradient,) = torch.autograd.grad(
        output, wrt, allow_unused=True, materialize_grads=True, **options
    )
    return gradient


def _first(torch_kernel, left, right):
    """Gradients ``d k(left_m, right_m) / d left_m`` of one block, (m, D)."""
    left = left.detach().requires_grad_(True)
    return _gradient(torch_kernel(left, right, diag=True).sum(), left)


def _weighted_gradient_graph(torch_kernel, left, right, weights):
    """``w_m d k(left_m, right_m) / d left_m`` (m, D) with its graph, and ``right`` tracked.

    Everything the mixed derivatives keep is saved here: the D backward passes through it
    (``_mixed``) save nothing more.
    """
    left = left.detach().requires_grad_(True)
    right = right.detach().requires_grad_(True)
    values = torch_kernel(left, right, diag=True)
    return _gradient((values * weights).sum(), left, create_graph=True), right


def _mixed(torch_kernel, left, right, weights):
    """``w_m d^2 k(left_m, right_m) / d left_m d right_m`` of one block, (m, D, D)."""
    import torch

    grad_left, right = _weighted_gradient_graph(torch_kernel, left, right, weights)
    return torch.stack([
        _gradient(grad_left[:, i].sum(), right, retain_graph=True)
        for i in range(left.shape[1])
    ], dim=1)


def _saved_bytes(function, *args) -> int:
    """Bytes of the tensors autograd saves for backward while ``function(*args)`` runs."""
    import torch

    total = 0

    def pack(tensor):
        nonlocal total
        total += tensor.numel() * tensor.element_size()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        function(*args)
    return total


def graph_bytes(torch_kernel, left, right, second_order: bool) -> tuple[float, float]:
    """Bytes autograd saves for a block of m pairs: ``fixed + m * per_pair``, measured.

    Parameters
    ----------
    torch_kernel : gpytorch.kernels.Kernel (float64)
    left, right : ndarray or tensor (n, D)
        Probe pairs (at least 24 rows, distinct pairs, e.g. training points against shifted
        ones); measured once per kernel module, feature count and order, then remembered.
    second_order : bool
        The mixed second derivatives (``weighted_mixed_derivatives``) rather than gradients.

    Returns
    -------
    fixed, per_pair : float
        Bytes (the per-pair part at least 8 per feature, what the gradient itself needs).
    """
    n_features = left.shape[1]
    key = (n_features, bool(second_order))
    known = _MEASURED.setdefault(torch_kernel, {})
    if key not in known:
        left, right = (as_tensor(side, like=torch_kernel) for side in (left, right))
        sizes, measured = _PROBE_SIZES, []
        for m in sizes:
            if second_order:
                ones = as_tensor(np.ones(m), like=torch_kernel)
                measured.append(_saved_bytes(
                    _weighted_gradient_graph, torch_kernel, left[:m], right[:m], ones
                ))
            else:
                measured.append(_saved_bytes(_first, torch_kernel, left[:m], right[:m]))
        per_pair = max((measured[1] - measured[0]) / (sizes[1] - sizes[0]), 8.0 * n_features)
        known[key] = (max(measured[0] - sizes[0] * per_pair, 0.0), per_pair)
    return known[key]


def _block_size(torch_kernel, left, right, second_order: bool) -> int:
    """Pairs per block so that autograd saves at most ``GRAPH_BUDGET_BYTES``.

    Raises
    ------
    MemoryError
        One pair alone needs more (e.g. an empirical measure with millions of atoms).
    """
    if len(left) <= _PROBE_SIZES[-1]:
        return max(len(left), 1)
    fixed, per_pair = graph_bytes(torch_kernel, left, right, second_order)
    size = int((GRAPH_BUDGET_BYTES - fixed) // per_pair)
    if size < 1:
        raise MemoryError(
            f"one kernel derivative by autograd needs {fixed + per_pair:.3g} bytes, more than "
            f"the {GRAPH_BUDGET_BYTES / 2**20:.0f} MiB a block of pairs may use: this kernel "
            "is too large to differentiate by quadrature (for an orthogonal additive kernel "
            "with an empirical measure, use fewer atoms or the Gaussian measure)."
        )
    return size


def pair_gradients(torch_kernel, left, right):
    """``d k(left_m, right_m) / d left_m`` for every pair, in blocks of bounded memory.

    Parameters
    ----------
    torch_kernel : gpytorch.kernels.Kernel (float64)
    left, right : torch.Tensor (m, D)

    Returns
    -------
    torch.Tensor (m, D), detached.

    Raises
    ------
    MemoryError
        One pair's autograd graph exceeds ``GRAPH_BUDGET_BYTES``.
    """
    size = _block_size(torch_kernel, left, right, second_order=False)
    out = left.new_empty(left.shape)
    for start in range(0, len(left), size):
        block = slice(start, start + size)
        out[block] = _first(torch_kernel, left[block], right[block]).detach()
    return out


def weighted_mixed_derivatives(torch_kernel, left, right, weights, n_groups: int):
    """``sum_m w_m d^2 k(left_m, right_m) / d left_i d right_j`` over consecutive pair groups.

    Pairs of zero weight are skipped, not evaluated: a zero-length piece of a composite rule
    puts its (zero-weight) nodes on a kink, e.g. at zero distance, where a Matern kernel's
    autograd second derivative is 0/0 and ``0 * nan`` would be NaN (issue 27 item 20b).
    The rest is evaluated in blocks of bounded memory.

    Parameters
    ----------
    torch_kernel : gpytorch.kernels.Kernel (float64)
    left, right : torch.Tensor (n_groups * m, D)
    weights : torch.Tensor (n_groups * m,)
    n_groups : int

    Returns
    -------
    torch.Tensor (n_groups, D, D), detached.

    Raises
    ------
    MemoryError
        One pair's autograd graph exceeds ``GRAPH_BUDGET_BYTES``.
    """
    import torch

    n_features = left.shape[1]
    group = torch.arange(len(left), device=left.device) // max(len(left) // n_groups, 1)
    kept = torch.nonzero(weights != 0).reshape(-1)
    left, right, weights, group = left[kept], right[kept], weights[kept], group[kept]
    out = left.new_zeros((n_groups, n_features, n_features))
    size = _block_size(torch_kernel, left, right, second_order=True)
    for start in range(0, len(left), size):
        block = slice(start, start + size)
        mixed = _mixed(torch_kernel, left[block], right[block], weights[block]).detach()
        out.index_add_(0, group[block], mixed)
    return out
