"""Integrated-gradient functionals of any differentiable GPyTorch kernel, by quadrature + autograd.

Seitz (2022, eq. 22) approximates the path integral of integrated gradients by a Riemann sum;
applied to the kernel, the approximation is again a linear functional of f, so the attribution
stays Gaussian. Here the sum is generalised to any rule with nodes t_k and weights w_k on
[0, 1]:

    cross[i, n] = (x_i - xt_i) sum_k w_k d/dx_i k(xt + t_k (x - xt), z_n)
    prior[i, j] = (x_i - xt_i)(x_j - xt_j) sum_k sum_l w_k w'_l d^2/dx_i dx'_j k(g_k, g'_l)

Derivatives come from torch autograd (one backward pass for the cross term, one per feature
for the prior term), so any kernel GPyTorch can differentiate is supported. Autograd cannot
differentiate a kernel twice through zero distance (GPyTorch clamps squared distances at zero
and Matern kernels take a square root), so the prior term pairs the rule's nodes g_k with
the nodes g'_l of a Gauss-Legendre rule of a neighbouring order (``staggered_rule``): no two
path points coincide, and the double sum still converges to the exact double integral as
``n_steps`` grows.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "QUADRATURE_RULES",
    "quadrature_rule",
    "staggered_rule",
    "integrated_gradient_functionals",
    "integrated_gradient_mean",
]

QUADRATURE_RULES = ("gauss-legendre", "trapezoid", "simpson", "right")


def quadrature_rule(rule: str, n_steps: int) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and weights of a quadrature rule on [0, 1].

    Parameters
    ----------
    rule : {"gauss-legendre", "trapezoid", "simpson", "right"}
        ``gauss-legendre``: ``n_steps`` Gauss-Legendre nodes. ``trapezoid``: composite
        trapezoid over ``n_steps`` intervals (``n_steps + 1`` nodes). ``simpson``: composite
        Simpson over ``n_steps`` intervals, each with its midpoint (``2 n_steps + 1`` nodes;
        the weights are h/6 (1, 4, 1) per interval: Butler et al. App. C.1 prints 1/4 (1, 2, 1),
        which is the trapezoid rule on the refined grid). ``right``: right-hand Riemann sum,
        the rule of Sundararajan et al. and Butler et al. eq. 36 (``n_steps`` nodes).
    n_steps : int
        Number of nodes (Gauss-Legendre, right) or intervals (trapezoid, Simpson), >= 1.

    Returns
    -------
    nodes, weights : ndarray of shape (n_nodes,); the weights sum to 1.

    Raises
    ------
    ValueError
        Unknown rule or ``n_steps < 1``.
    """
    if not isinstance(n_steps, int | np.integer) or n_steps < 1:
        raise ValueError(f"n_steps must be a positive integer, got {n_steps!r}.")
    if rule == "gauss-legendre":
        nodes, weights = np.polynomial.legendre.leggauss(int(n_steps))
        return 0.5 * (nodes + 1.0), 0.5 * weights
    if rule == "trapezoid":
        nodes = np.linspace(0.0, 1.0, n_steps + 1)
        weights = np.full(n_steps + 1, 1.0 / n_steps)
        weights[[0, -1]] *= 0.5
        return nodes, weights
    if rule == "simpson":
        nodes = np.linspace(0.0, 1.0, 2 * n_steps + 1)
        weights = np.tile([2.0, 4.0], n_steps + 1)[: 2 * n_steps + 1] / (6.0 * n_steps)
        weights[[0, -1]] = 1.0 / (6.0 * n_steps)
        return nodes, weights
    if rule == "right":
        return np.arange(1, n_steps + 1) / n_steps, np.full(n_steps, 1.0 / n_steps)
    raise ValueError(f"unknown quadrature rule {rule!r}; choose one of {QUADRATURE_RULES}.")


def staggered_rule(nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Gauss-Legendre nodes and weights on [0, 1] that share no node with ``nodes``.

    Gauss-Legendre nodes of orders K and K + 1 interlace strictly; an even order has no node at
    1/2 (the only rational Gauss-Legendre node), so it cannot meet an equispaced grid either.
    """
    order = len(nodes) + 1
    while True:
        candidate, weights = quadrature_rule("gauss-legendre", order)
        if np.min(np.abs(candidate[:, None] - nodes[None, :])) > 1e-9:
            return candidate, weights
        order += 1


def _path(X, baseline, nodes):
    """Path points ``xt + t_k (x - xt)`` as a (n_points, n_nodes, n_features) tensor."""
    import torch

    x = torch.as_tensor(X, dtype=torch.float64)
    xt = torch.as_tensor(baseline, dtype=torch.float64)
    t = torch.as_tensor(nodes, dtype=torch.float64)
    return xt + t[None, :, None] * (x - xt)[:, None, :], x - xt


def integrated_gradient_mean(
    torch_kernel,
    X: np.ndarray,
    baseline: np.ndarray,
    Z: np.ndarray,
    alpha: np.ndarray,
    nodes: np.ndarray,
    weights: np.ndarray,
) -> np.ndarray:
    """Quadrature IG of the posterior mean ``k(., Z) alpha`` only: one backward pass.

    ``mean[p, i] = (x_i - xt_i) sum_k w_k d/dx_i [k(g_k, Z) alpha]``; the same numbers as
    ``cross @ alpha`` from ``integrated_gradient_functionals`` without the (points, features,
    train) cross term.

    Returns
    -------
    ndarray of shape (n_points, n_features)
    """
    import torch

    path, delta = _path(X, baseline, nodes)
    n_points, n_nodes, n_features = path.shape
    G = path.reshape(-1, n_features).detach().requires_grad_(True)
    train = torch.as_tensor(Z, dtype=torch.float64)
    mean = torch_kernel(G, train).to_dense() @ torch.as_tensor(alpha, dtype=torch.float64)
    # Each path point's mean depends on its own row of G only, so one backward pass gives
    # every point's gradient.
    (gradient,) = torch.autograd.grad(mean.sum(), G)
    gradient = gradient.reshape(n_points, n_nodes, n_features)
    w = torch.as_tensor(weights, dtype=torch.float64)
    return (torch.einsum("k,pki->pi", w, gradient) * delta).numpy()


def integrated_gradient_functionals(
    torch_kernel,
    X: np.ndarray,
    baseline: np.ndarray,
    Z: np.ndarray,
    nodes: np.ndarray,
    weights: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Quadrature versions of the integrated-gradient cross and prior terms.

    Parameters
    ----------
    torch_kernel : gpytorch.kernels.Kernel (float64)
    X : ndarray (n_points, n_features)
    baseline : ndarray (n_features,)
    Z : ndarray (n_train, n_features)
    nodes, weights : ndarray (n_nodes,)
        A rule on [0, 1] (see ``quadrature_rule``).

    Returns
    -------
    cross : ndarray (n_points, n_features, n_train)
    prior : ndarray (n_points, n_features, n_features)
    """
    moved = np.any(X != baseline[None, :], axis=1)
    if not moved.all():
        # At x == baseline every path point coincides (attributions are exactly zero), and
        # autograd cannot differentiate the kernel there: compute only the moved points.
        cross = np.zeros((X.shape[0], X.shape[1], Z.shape[0]))
        prior = np.zeros((X.shape[0], X.shape[1], X.shape[1]))
        if moved.any():
            cross[moved], prior[moved] = integrated_gradient_functionals(
                torch_kernel, X[moved], baseline, Z, nodes, weights
            )
        return cross, prior

    import torch

    n_points, n_features = X.shape
    n_nodes, n_train = nodes.shape[0], Z.shape[0]
    path, delta = _path(X, baseline, nodes)  # (p, K, D), (p, D)
    w = torch.as_tensor(weights, dtype=torch.float64)
    train = torch.as_tensor(Z, dtype=torch.float64)

    # Kernels are evaluated on explicit pairs (diag=True): each pair's gradient is then one
    # backward pass away, and GPyTorch's pairwise path uses torch.cdist, which has no
    # double backward.
    left = path[:, :, None, :].expand(-1, -1, n_train, -1).reshape(-1, n_features)
    left = left.detach().requires_grad_(True)
    right = train[None, None].expand(n_points, n_nodes, -1, -1).reshape(-1, n_features)
    values = torch_kernel(left, right, diag=True)
    (gradient,) = torch.autograd.grad(values.sum(), left)
    gradient = gradient.reshape(n_points, n_nodes, n_train, n_features)
    cross = torch.einsum("k,pkni->pin", w, gradient) * delta[:, :, None]

    # Prior term: mixed second derivative of k(g_k, g'_l), weighted by w_k w'_l.
    nodes2, weights2 = staggered_rule(nodes)
    n_nodes2 = nodes2.shape[0]
    path2, _ = _path(X, baseline, nodes2)  # (p, K', D)
    w2 = torch.as_tensor(weights2, dtype=torch.float64)
    left = path[:, :, None, :].expand(-1, -1, n_nodes2, -1).reshape(-1, n_features)
    right = path2[:, None, :, :].expand(-1, n_nodes, -1, -1).reshape(-1, n_features)
    left = left.detach().requires_grad_(True)
    right = right.detach().requires_grad_(True)
    pair_weights = (w[:, None] * w2[None, :]).reshape(-1).repeat(n_points)
    values = torch_kernel(left, right, diag=True)
    (grad_left,) = torch.autograd.grad((values * pair_weights).sum(), left, create_graph=True)
    prior = torch.empty(n_points, n_features, n_features, dtype=torch.float64)
    for i in range(n_features):
        (mixed,) = torch.autograd.grad(grad_left[:, i].sum(), right, retain_graph=True)
        prior[:, i, :] = mixed.reshape(n_points, -1, n_features).sum(dim=1)
    prior = prior * delta[:, :, None] * delta[:, None, :]
    prior = 0.5 * (prior + prior.transpose(1, 2))  # the staggered pairing is not symmetric
    return cross.numpy(), prior.detach().numpy()
