"""Integrated gradients of a deterministic function by Gauss-Legendre quadrature and autograd.

For deterministic summaries of a posterior (its variance or standard deviation, an acquisition
function: DESIGN.md) there is no posterior over the explanation, only the function
``g: R^d -> R`` and its path integral

    IG_i(x) = (x_i - xt_i) int_0^1 d_i g(xt + t (x - xt)) dt.

The integral is a Gauss-Legendre sum with gradients from torch autograd. Completeness
``sum_i IG_i(x) = g(x) - g(xt)`` holds exactly for the integral and only to the rule's
accuracy for the sum, so it is the error estimate. It holds on every piece of the path too,
``sum_i IG_i[a, b] = g(x(b)) - g(x(a))``, which makes it a *local* error estimate: a point
whose sum misses by more than ``rtol`` times ``scale`` is recomputed on panels, each with a
16-node Gauss-Legendre rule, bisecting every panel whose own completeness misses by more than
its share ``rtol scale (b - a)`` (a sharp rise of a log acquisition function near where the
improvement vanishes, a kink), up to ``max_panels`` panels. The caller reports what is still
missed (``CompletenessWarning``).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from gpexplain._torch import as_tensor, to_numpy
from gpexplain.functionals.quadrature import quadrature_rule

__all__ = ["function_integrated_gradients"]

#: Function evaluations (points times nodes) per autograd pass.
_BATCH = 4096


def _gradients(function: Callable, points: np.ndarray, like) -> tuple[np.ndarray, np.ndarray]:
    """``g`` and its gradient at each row of ``points`` (n, d), batched."""
    import torch

    values, gradients = [], []
    for start in range(0, len(points), _BATCH):
        block = as_tensor(points[start:start + _BATCH], like=like).clone().requires_grad_(True)
        output = function(block)
        (gradient,) = torch.autograd.grad(output.sum(), block, allow_unused=True,
                                          materialize_grads=True)
        values.append(to_numpy(output))
        gradients.append(to_numpy(gradient))
    return np.concatenate(values), np.concatenate(gradients)


def function_integrated_gradients(
    function: Callable,
    X: np.ndarray,
    baseline: np.ndarray,
    *,
    n_steps: int = 64,
    like=None,
    rtol: float = 1e-8,
    scale: np.ndarray | float | None = None,
    max_panels: int = 256,
):
    """Integrated gradients of ``function`` from ``baseline`` to each row of X.

    Parameters
    ----------
    function : callable(tensor (n, d)) -> tensor (n,)
        Differentiable by torch autograd, evaluated row by row (no coupling between rows).
    X : ndarray (n_points, n_features)
    baseline : ndarray (n_features,)
    n_steps : int, default 64
        Gauss-Legendre nodes to start with.
    like : torch.Tensor or torch.nn.Module, optional
        Device and dtype of the tensors (``gpexplain._torch.as_tensor``).
    rtol : float
        Completeness tolerance relative to ``scale``.
    scale : float or ndarray (n_points,), optional
        What the gap is relative to (default ``max(|g(x)|, |g(xt)|)``).
    max_panels : int
        At most this many panels per point in the adaptive refinement.

    Returns
    -------
    attributions : ndarray (n_points, n_features)
    values : ndarray (n_points,)
        ``g(x)``.
    baseline_value : float
        ``g(xt)``.
    gap : ndarray (n_points,)
        ``|sum_i IG_i - (g(x) - g(xt))|`` of the returned attributions.
    """
    X = np.asarray(X, dtype=np.float64)
    baseline = np.asarray(baseline, dtype=np.float64)
    ends, _ = _gradients(function, np.vstack([X, baseline[None, :]]), like)
    values, baseline_value = ends[:-1], float(ends[-1])
    if scale is None:
        scale = np.maximum(np.abs(values), abs(baseline_value))
    scale = np.maximum(np.broadcast_to(np.asarray(scale, float), values.shape), 1e-300)
    nodes, weights = quadrature_rule("gauss-legendre", n_steps)
    delta = X - baseline
    points = baseline + nodes[None, :, None] * delta[:, None, :]  # (p, m, d)
    _, gradient = _gradients(function, points.reshape(-1, X.shape[1]), like)
    attributions = delta * np.einsum("pmd,m->pd", gradient.reshape(points.shape), weights)
    gap = np.abs(attributions.sum(1) - (values - baseline_value))
    for p in np.flatnonzero(gap > rtol * scale):
        attributions[p] = _panels(function, X[p], baseline, (baseline_value, values[p]),
                                  rtol * scale[p], like, max_panels)
        gap[p] = abs(attributions[p].sum() - (values[p] - baseline_value))
    return attributions, values, baseline_value, gap


def _panels(function, x, baseline, ends, tolerance, like, max_panels) -> np.ndarray:
    """Integrated gradients of one point on adaptively bisected panels (module docstring)."""
    nodes, weights = quadrature_rule("gauss-legendre", 16)
    delta = x - baseline
    known = {0.0: ends[0], 1.0: ends[1]}  # g along the path, at panel ends
    pending, total, n_panels = [(0.0, 0.5), (0.5, 1.0)], np.zeros_like(x), 2
    while pending:
        missing = sorted({t for panel in pending for t in panel} - set(known))
        if missing:
            found, _ = _gradients(function, baseline + np.array(missing)[:, None] * delta, like)
            known.update(zip(missing, found, strict=True))
        starts = np.array([a for a, _ in pending])
        widths = np.array([b - a for a, b in pending])
        ts = starts[:, None] + widths[:, None] * nodes[None, :]  # (panels, 16)
        _, gradient = _gradients(function, baseline + ts.reshape(-1, 1) * delta, like)
        pieces = delta * np.einsum("qmd,m,q->qd", gradient.reshape(*ts.shape, -1), weights,
                                   widths)
        refined = []
        for (a, b), piece in zip(pending, pieces, strict=True):
            missed = abs(piece.sum() - (known[b] - known[a])) > tolerance * (b - a)
            if missed and n_panels < max_panels and b - a > 2.0**-20:
                refined += [(a, 0.5 * (a + b)), (0.5 * (a + b), b)]
                n_panels += 1
            else:
                total += piece
        pending = refined
    return total
