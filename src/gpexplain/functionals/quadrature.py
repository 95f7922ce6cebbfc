"""Integrated-gradient functionals of any differentiable GPyTorch kernel, by quadrature + autograd.

Seitz (2022, eq. 22) approximates the path integral of integrated gradients by a Riemann sum;
applied to the kernel, the approximation is again a linear functional of f, so the attribution
stays Gaussian. Two constructions live here.

**Any kernel** (``integrated_gradient_functionals``): the sum generalised to any rule with
nodes t_k and weights w_k on [0, 1],

    cross[i, n] = (x_i - xt_i) sum_k w_k d/dx_i k(xt + t_k (x - xt), z_n)
    prior[i, j] = (x_i - xt_i)(x_j - xt_j) sum_k sum_l w_k w'_l d^2/dx_i dx'_j k(g_k, g'_l)

Autograd cannot differentiate a kernel twice through zero distance (GPyTorch clamps squared
distances at zero and Matern kernels take a square root), so the prior term pairs the rule's
nodes g_k with the nodes g'_l of a Gauss-Legendre rule of a neighbouring order
(``staggered_rule``). This converges as fast as the rule for kernels smooth everywhere, but
only algebraically when the kernel has a kink at zero distance (Matern: the double integral
is not smooth along t = s; ~1e-3 variance completeness gap at 64 nodes).

**Stationary kernels** built from squared-exponential, Matern 3/2 and 5/2 and rational
quadratic pieces (``gpexplain.kernels.stationary.radial_leaves``): the prior term is a single
integral along the path (``stationary_prior``), and the cross term uses a rule graded
towards each training point's closest approach to the path (``graded_path_rule``); both
converge exponentially (completeness to ~1e-11 at 64 nodes). ``path_pair_prior`` gives the
prior covariance between two paths into the same point (baseline distributions), and
``two_path_prior`` that between any two paths (the covariance across explained points).

Derivatives come from torch autograd (one backward pass for the cross term, one per feature
for the prior term), so any kernel GPyTorch can differentiate is supported.
"""

from __future__ import annotations

import numpy as np

from gpexplain._torch import as_tensor, to_numpy
from gpexplain.functionals._autograd_blocks import pair_gradients, weighted_mixed_derivatives

__all__ = [
    "QUADRATURE_RULES",
    "quadrature_rule",
    "staggered_rule",
    "integrated_gradient_functionals",
    "graded_path_rule",
    "stationary_cross",
    "lag_rule",
    "stationary_prior",
    "path_pair_prior",
    "two_path_prior",
    "weighted_pair_hessian",
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


def _path(X, baseline, nodes, like):
    """Path points ``xt + t_k (x - xt)`` as a (n_points, n_nodes, n_features) tensor, on the
    device and in the dtype of ``like`` (the kernel module)."""
    x, xt, t = (as_tensor(values, like=like) for values in (X, baseline, nodes))
    return xt + t[None, :, None] * (x - xt)[:, None, :], x - xt


def integrated_gradient_functionals(
    torch_kernel,
    X: np.ndarray,
    baseline: np.ndarray,
    Z: np.ndarray,
    nodes: np.ndarray,
    weights: np.ndarray,
    with_prior: bool = True,
) -> tuple[np.ndarray, np.ndarray | None]:
    """Quadrature versions of the integrated-gradient cross and prior terms.

    Parameters
    ----------
    torch_kernel : gpytorch.kernels.Kernel (float64)
    X : ndarray (n_points, n_features)
    baseline : ndarray (n_features,)
    Z : ndarray (n_train, n_features)
    nodes, weights : ndarray (n_nodes,)
        A rule on [0, 1] (see ``quadrature_rule``).
    with_prior : bool, default True
        False skips the prior term (None): the mean needs the cross term only, and the
        prior's node pairs cost n_nodes times its kernel derivatives.

    Returns
    -------
    cross : ndarray (n_points, n_features, n_train)
    prior : ndarray (n_points, n_features, n_features), or None without ``with_prior``
    """
    moved = np.any(X != baseline[None, :], axis=1)
    if not moved.all():
        # At x == baseline every path point coincides (attributions are exactly zero), and
        # autograd cannot differentiate the kernel there: compute only the moved points.
        cross = np.zeros((X.shape[0], X.shape[1], Z.shape[0]))
        prior = np.zeros((X.shape[0], X.shape[1], X.shape[1]))
        if moved.any():
            cross[moved], prior_moved = integrated_gradient_functionals(
                torch_kernel, X[moved], baseline, Z, nodes, weights, with_prior
            )
            if with_prior:
                prior[moved] = prior_moved
        return cross, (prior if with_prior else None)

    import torch

    n_points, n_features = X.shape
    n_nodes, n_train = nodes.shape[0], Z.shape[0]
    path, delta = _path(X, baseline, nodes, torch_kernel)  # (p, K, D), (p, D)
    w = as_tensor(weights, like=torch_kernel)
    train = as_tensor(Z, like=torch_kernel)

    # Kernels are evaluated on explicit pairs, in blocks of bounded memory (_autograd_blocks).
    left = path[:, :, None, :].expand(-1, -1, n_train, -1).reshape(-1, n_features)
    right = train[None, None].expand(n_points, n_nodes, -1, -1).reshape(-1, n_features)
    gradient = pair_gradients(torch_kernel, left, right)
    gradient = gradient.reshape(n_points, n_nodes, n_train, n_features)
    cross = torch.einsum("k,pkni->pin", w, gradient) * delta[:, :, None]
    if not with_prior:
        return to_numpy(cross), None

    # Prior term: mixed second derivative of k(g_k, g'_l), weighted by w_k w'_l.
    nodes2, weights2 = staggered_rule(nodes)
    n_nodes2 = nodes2.shape[0]
    path2, _ = _path(X, baseline, nodes2, torch_kernel)  # (p, K', D)
    w2 = as_tensor(weights2, like=torch_kernel)
    left = path[:, :, None, :].expand(-1, -1, n_nodes2, -1).reshape(-1, n_features)
    right = path2[:, None, :, :].expand(-1, n_nodes, -1, -1).reshape(-1, n_features)
    pair_weights = (w[:, None] * w2[None, :]).reshape(-1).repeat(n_points)
    prior = weighted_mixed_derivatives(torch_kernel, left, right, pair_weights, n_points)
    prior = prior * delta[:, :, None] * delta[:, None, :]
    prior = 0.5 * (prior + prior.transpose(1, 2))  # the staggered pairing is not symmetric
    return to_numpy(cross), to_numpy(prior)


# -- stationary kernels: graded path rule and single-integral prior ---------------------------
def weighted_pair_hessian(torch_kernel, X: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """``sum_{s != t} W_st d^2 k(x_s, x'_t) / dx_i dx'_j`` over distinct rows of X, by autograd.

    The pairs s = t are left out: autograd cannot differentiate a kernel twice through zero
    distance (see the module docstring); callers add them from the derivative recursion
    (``gpexplain.kernels.derivatives.gradient_prior``). Rows of X must be distinct.

    Parameters
    ----------
    torch_kernel : gpytorch.kernels.Kernel (float64)
    X : ndarray (n_points, n_features)
    weights : ndarray (n_points, n_points)

    Returns
    -------
    ndarray (n_features, n_features)
    """
    rows, cols = np.nonzero(~np.eye(len(X), dtype=bool))
    if rows.size == 0:
        return np.zeros((X.shape[1], X.shape[1]))
    points = as_tensor(X, like=torch_kernel)
    pair_weights = as_tensor(weights[rows, cols], like=torch_kernel)
    return to_numpy(weighted_mixed_derivatives(
        torch_kernel, points[rows], points[cols], pair_weights, 1
    )[0])


def _sinh_nodes(lower, upper, centre, spread, graded, x, w):
    """Nodes and weights of ``int_lower^upper`` mapped through ``t = centre + spread sinh(s)``.

    The substitution (Johnston and Elliott 2005) removes a near-singularity at
    ``centre +- i spread``: ``r(t) = sqrt(h^2 + c^2 (t - t0)^2)`` becomes ``h cosh(s)``,
    analytic in s. ``x, w``: a Gauss-Legendre rule on [0, 1]. Arrays broadcast; where
    ``graded`` is False the plain affine map is used.
    """
    length = upper - lower
    safe = np.where(graded, spread, 1.0)
    s_lo = np.arcsinh(np.where(graded, (lower - centre) / safe, 0.0))
    s_hi = np.arcsinh(np.where(graded, (upper - centre) / safe, 0.0))
    s = s_lo[..., None] + (s_hi - s_lo)[..., None] * x
    graded_t = centre[..., None] + safe[..., None] * np.sinh(s)
    graded_w = safe[..., None] * np.cosh(s) * (s_hi - s_lo)[..., None] * w
    plain_t = lower[..., None] + length[..., None] * x
    plain_w = length[..., None] * w
    g = graded[..., None]
    return np.where(g, graded_t, plain_t), np.where(g, graded_w, plain_w)


# Smallest spread the sinh map is built for, relative to the piece: below it the map would
# stretch [0, 1] over too many e-folds for the nodes; the same map still integrates the
# (nearer) singularity to ~1e-14 with 32 nodes (Matern 3/2, the least smooth kernel).
_MIN_RELATIVE_SPREAD = 1e-4


def graded_path_rule(X, baseline, Z, leaves, n_steps: int):
    """Per-(point, training point) nodes on [0, 1] for the cross term of a stationary kernel.

    For each leaf with a singularity, the path ``xt + t (x - xt)`` comes closest to z_n at
    ``t0 = -(u . v) / |u|^2`` (u = (x - xt)/l, v = (xt - z_n)/l on the leaf's features) with
    complex singularities at ``t0 +- i spread``, ``spread = sqrt(h^2 + pole_offset) / |u|``
    (h: the distance at t0). [0, 1] is cut at every ``clip(t0, 0, 1)``, so a Matern kink on
    the path (h = 0, e.g. every training point between baseline and x for one feature) is a
    piece boundary; each piece gets Gauss-Legendre nodes through the sinh map towards the
    nearest singularity at its ends (``_sinh_nodes``), so the rule converges
    exponentially however close the path passes to a training point. Left to plain
    refinement (and to the driver's ``CompletenessWarning`` when it falls short): two
    singularities both near (but not on) the same piece, from two different leaves, and a
    squared-exponential leaf on a path long against its lengthscale (an entire bump of width
    ``1 / |u|`` that the sinh map does not resolve: gaps of 1e-4 at 100 lengthscales).

    Parameters
    ----------
    X : ndarray (n_points, n_features)
    baseline : ndarray (n_features,)
    Z : ndarray (n_train, n_features)
    leaves : list of gpexplain.kernels.stationary.RadialLeaf
    n_steps : int
        Total nodes per pair, shared equally by the ``n_singular_leaves + 1`` pieces (at
        least 2 each).

    Returns
    -------
    nodes, weights : ndarray (n_points, n_train, n_nodes)
    """
    singular = [leaf for leaf in leaves if leaf.pole_offset is not None]
    x, w = quadrature_rule("gauss-legendre", max(2, n_steps // (len(singular) + 1)))
    shape = (X.shape[0], Z.shape[0])
    # Cut points with the singularity each one carries; the path's ends carry none.
    cuts = [np.zeros(shape), np.ones(shape)]
    centres = [np.zeros(shape), np.ones(shape)]
    spreads = [np.full(shape, np.inf), np.full(shape, np.inf)]
    for leaf in singular:
        u = (X[:, leaf.dims] - baseline[leaf.dims]) / leaf.lengthscale  # (p, d)
        v = (baseline[leaf.dims] - Z[:, leaf.dims]) / leaf.lengthscale  # (n, d)
        u_sq = np.sum(u * u, axis=1)[:, None]
        moving = u_sq > 0
        u_sq_safe = np.where(moving, u_sq, 1.0)
        t0 = -(u @ v.T) / u_sq_safe
        h_sq = np.maximum(np.sum(v * v, axis=1)[None, :] - (u @ v.T) ** 2 / u_sq_safe, 0.0)
        spread = np.sqrt((h_sq + leaf.pole_offset) / u_sq_safe)
        cuts.append(np.where(moving, np.clip(t0, 0.0, 1.0), 0.0))
        centres.append(np.where(moving, t0, 0.0))
        spreads.append(np.where(moving, spread, np.inf))
    cuts, centres, spreads = np.stack(cuts, -1), np.stack(centres, -1), np.stack(spreads, -1)
    order = np.argsort(cuts, axis=-1, kind="stable")
    cuts, centres, spreads = (np.take_along_axis(a, order, -1) for a in (cuts, centres, spreads))
    lower, upper = cuts[..., :-1], cuts[..., 1:]
    length = upper - lower
    # Closeness of the singularities carried by a piece's ends, relative to the piece: the
    # distance of centre +- i spread from [lower, upper] over the length. Every cut at an
    # end's position counts, not only the one sorted next to the piece: cuts coincide (a
    # training point at the query puts t0 = 1 on the path's end) and their order must not
    # hide the singularity. A kink exactly at an end (spread 0) does not slow Gauss-Legendre.
    lo, hi = lower[..., :, None], upper[..., :, None]
    c, s = centres[..., None, :], spreads[..., None, :]
    at_end = (cuts[..., None, :] == lo) | (cuts[..., None, :] == hi)
    outside = np.maximum(np.maximum(lo - c, c - hi), 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        harmless = ~at_end | ((s == 0) & (outside == 0))
        closeness = np.where(harmless, np.inf, np.hypot(outside, s) / (hi - lo))
    nearest = np.argmin(closeness, axis=-1)[..., None]
    centre = np.take_along_axis(np.broadcast_to(c, closeness.shape), nearest, -1)[..., 0]
    spread = np.take_along_axis(np.broadcast_to(s, closeness.shape), nearest, -1)[..., 0]
    nearest_closeness = np.take_along_axis(closeness, nearest, -1)[..., 0]
    graded = (nearest_closeness < 1.0) & (length > 0)
    spread = np.where(graded, np.maximum(spread, _MIN_RELATIVE_SPREAD * length), 1.0)
    nodes, weights = _sinh_nodes(lower, upper, centre, spread, graded, x, w)
    return np.clip(nodes.reshape(*shape, -1), 0.0, 1.0), weights.reshape(*shape, -1)


def stationary_cross(torch_kernel, leaves, X, baseline, Z, n_steps: int) -> np.ndarray:
    """Cross term ``A[p, i, n] = (x_i - xt_i) int_0^1 d_i k(xt + t (x - xt), z_n) dt`` by the
    graded rule of ``graded_path_rule`` and autograd.

    Returns
    -------
    ndarray (n_points, n_features, n_train)
    """

    nodes, weights = graded_path_rule(X, baseline, Z, leaves, n_steps)
    n_points, n_train, n_nodes = nodes.shape
    delta = X - baseline[None, :]
    path = baseline + nodes[..., None] * delta[:, None, None, :]  # (p, n, K, D)
    left = as_tensor(path.reshape(-1, X.shape[1]), like=torch_kernel)
    right = as_tensor(np.repeat(np.tile(Z, (n_points, 1)), n_nodes, axis=0), like=torch_kernel)
    gradient = pair_gradients(torch_kernel, left, right)
    gradient = to_numpy(gradient).reshape(n_points, n_train, n_nodes, X.shape[1])
    cross = np.einsum("pnk,pnki->pin", weights, gradient) * delta[:, :, None]
    # A feature with x_i = xt_i gets exactly zero (and a zero-distance leaf may give NaN).
    return np.where((delta != 0)[:, :, None], cross, 0.0)


# Nodes per piece of the lag rule on long paths: every piece [a, 2a] of a geometric grading
# keeps a singularity on the imaginary axis at relative distance >= 2 (Bernstein ellipse
# parameter >= 3 + sqrt(8)), and the first piece [0, s] one at >= 2 (parameter >= 4.6), so 12
# Gauss-Legendre nodes leave an error below 1e-15 of the piece's integral of |integrand|.
_LAG_PIECE_NODES = 12


def lag_rule(X, baseline, leaves, n_steps: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-point nodes on the lag [0, 1] for the prior term of a stationary kernel.

    Along ``tau -> H(tau delta)`` a leaf with scaled displacement ``R = |delta_D / l_D|``
    varies on the scale ``s = sqrt(min(pole_offset, 1)) / R`` (rational quadratic: the pole
    at ``+- i sqrt(2 alpha) / R``) or ``1 / R`` (squared exponential, Matern: no finite
    singularity on the ray; decay on that scale). With ``s`` the smallest scale over the
    leaves, a block of paths all shorter than 4 s gets ``n_steps`` Gauss-Legendre nodes on
    [0, 1] (the rule of short paths, exponentially convergent); otherwise each path gets the
    composite rule on ``[0, s], [s, 2 s], [2 s, 4 s], ..., [2^(m-1) s, 1]`` (s at most 1/4)
    with ``max(n_steps // (m + 1), 12)`` nodes per piece, which converges exponentially at
    any path length (the pieces grow geometrically, away from the singularities near 0).
    Points that need fewer pieces than the longest path of the block get zero-weight nodes
    at tau = 1.

    Parameters
    ----------
    X : ndarray (n_points, n_features)
    baseline : ndarray (n_features,)
    leaves : list of RadialLeaf
    n_steps : int

    Returns
    -------
    nodes, weights : ndarray (n_points, n_nodes); the weights of a point sum to 1.
    """
    delta = X - baseline[None, :]
    scale = np.full(X.shape[0], np.inf)
    for leaf in leaves:
        radius = np.linalg.norm(delta[:, leaf.dims] / leaf.lengthscale, axis=1)
        offset = 1.0 if leaf.pole_offset in (None, 0.0) else min(leaf.pole_offset, 1.0)
        with np.errstate(divide="ignore"):
            scale = np.minimum(scale, np.sqrt(offset) / radius)
    if np.min(scale) >= 0.25:
        x, w = quadrature_rule("gauss-legendre", n_steps)
        return np.tile(x, (X.shape[0], 1)), np.tile(w, (X.shape[0], 1))
    # Every point of the block is graded, a short path from s = 1/4 (a smaller s than the
    # leaves' only moves the first cut closer to 0).
    scale = np.minimum(scale, 0.25)
    n_doublings = np.ceil(-np.log2(scale)).astype(int)  # 2^(m-1) s < 1 <= 2^m s
    n_pieces = int(n_doublings.max()) + 1
    x, w = quadrature_rule("gauss-legendre", max(n_steps // n_pieces, _LAG_PIECE_NODES))
    # Cuts 0, s, 2 s, ..., 2^(m-1) s (the last piece [2^(m-1) s, 1] is at most a doubling),
    # then 1 repeated for the points with fewer doublings than the block's longest path.
    k = np.arange(n_pieces)[None, :]
    start = np.where(k <= n_doublings[:, None], np.ldexp(scale[:, None], k - 1), 1.0)
    start[:, 0] = 0.0
    edges = np.concatenate([start, np.ones((X.shape[0], 1))], axis=1)
    length = np.diff(edges, axis=1)[:, :, None]
    nodes = edges[:, :-1, None] + length * x
    return nodes.reshape(X.shape[0], -1), (length * w).reshape(X.shape[0], -1)


def stationary_prior(torch_kernel, X, baseline, n_steps: int, leaves=()) -> np.ndarray:
    """Prior term of a stationary kernel ``k(x, x') = K(x - x')`` as a single integral.

    With ``delta = x - xt`` and ``H = -grad grad^T K`` the mixed second derivative,

        P_ij = delta_i delta_j int_0^1 int_0^1 H_ij((t - s) delta) dt ds
             = delta_i delta_j 2 int_0^1 (1 - tau) H_ij(tau delta) dtau

    (H is even). ``tau -> H(tau delta)`` is analytic on [0, 1] for the leaves of
    ``radial_leaves`` (the Matern kink at zero distance sits at the end tau = 0), so the
    Gauss-Legendre rule of ``lag_rule`` (graded geometrically towards tau = 0 on paths long
    against the leaves' lengthscales) converges exponentially at any path length; the nodes
    are interior, so autograd never differentiates at zero distance. It is evaluated as the
    mixed derivative of ``k(0, tau delta)``. ``sum_ij P_ij = 2 (K(0) - K(delta))``.

    Parameters
    ----------
    torch_kernel : gpytorch.kernels.Kernel (float64)
    X : ndarray (n_points, n_features)
    baseline : ndarray (n_features,)
    n_steps : int
    leaves : list of RadialLeaf
        The kernel's radial leaves (``radial_leaves``); none gives the ungraded rule.

    Returns
    -------
    ndarray (n_points, n_features, n_features), symmetric.
    """

    delta = X - baseline[None, :]
    moved = np.any(delta != 0, axis=1)
    if not moved.all():
        # At x == baseline the prior term is zero, and every pair would coincide (GPyTorch
        # then returns constant zeros, without a graph to differentiate).
        prior = np.zeros((X.shape[0], X.shape[1], X.shape[1]))
        if moved.any():
            prior[moved] = stationary_prior(torch_kernel, X[moved], baseline, n_steps, leaves)
        return prior
    tau, w = lag_rule(X, baseline, leaves, n_steps)  # (p, K)
    # The pairs (xt + tau delta, xt), translated to (0, tau delta) with the origin first: the
    # same mixed derivative for a stationary kernel (H is even), and GPyTorch's Matern centres
    # both arguments on the mean of the first, which for a path of 1e20 lengthscales was ~1e19
    # and rounded the near nodes' separations to 0 (a NaN derivative).
    lag = tau[:, :, None] * delta[:, None, :]  # (p, K, D)
    prior = _stepped_mixed_derivatives(torch_kernel, np.zeros_like(lag), lag,
                                       2.0 * (1.0 - tau) * w, delta, delta)
    return 0.5 * (prior + np.swapaxes(prior, 1, 2))


def _stepped_mixed_derivatives(torch_kernel, left, right, weights, d, e) -> np.ndarray:
    """``d_i e_j sum_m w_m d^2 k(left_m, right_m) / dx_i dx'_j`` for each row.

    ``left, right`` (n_rows, m, D) node pairs, ``weights`` (n_rows, m), ``d, e`` (n_rows, D)
    the two paths' steps. Exactly 0 where ``d_i`` or ``e_j`` is 0: that feature does not move,
    and autograd may have given NaN there (pairs at zero distance on it).
    """
    n_rows, _, n_features = left.shape
    mixed = to_numpy(weighted_mixed_derivatives(
        torch_kernel,
        as_tensor(left.reshape(-1, n_features), like=torch_kernel),
        as_tensor(right.reshape(-1, n_features), like=torch_kernel),
        as_tensor(weights.reshape(-1), like=torch_kernel),
        n_rows,
    )) * d[:, :, None] * e[:, None, :]
    return np.where((d[:, :, None] != 0) & (e[:, None, :] != 0), mixed, 0.0)


def _kink_free_rule(cuts, n_steps):
    """Composite Gauss-Legendre nodes on [0, 1] with pieces between ``cuts`` (..., n_cuts).

    Returns nodes, weights of shape (..., (n_cuts + 1) * q), q = max(2, n_steps // (n_cuts + 1)).
    """
    x, w = quadrature_rule("gauss-legendre", max(2, n_steps // (cuts.shape[-1] + 1)))
    edges = np.concatenate(
        [np.zeros(cuts.shape[:-1] + (1,)), np.sort(cuts, -1), np.ones(cuts.shape[:-1] + (1,))], -1
    )
    length = np.diff(edges, axis=-1)[..., None]
    nodes = edges[..., :-1, None] + length * x
    return nodes.reshape(*cuts.shape[:-1], -1), (length * w).reshape(*cuts.shape[:-1], -1)


def path_pair_prior(
    torch_kernel, X, baseline_a, baseline_b, n_steps: int, leaves=None
) -> np.ndarray:
    """Prior covariance between the attributions along two different paths into the same x.

    ``P_ij = d_i e_j int_0^1 int_0^1 d^2 k(x - p d, x - q e) / dx_i dx'_j dp dq`` with
    ``d = x - xt_a``, ``e = x - xt_b`` (p = 1 - t, q = 1 - s). Both paths end at x, where a
    Matern kernel is not smooth; the Duffy substitution (split the square along p = q, then
    ``q = p sigma`` or ``p = q sigma``) moves that corner to the edge rho = 0, where the
    integrand ``rho H(rho (sigma e - d))`` is analytic along each ray. A Matern leaf (from
    ``radial_leaves``, when given) is still kinked where ``sigma e = d`` on its features, which
    happens for one-feature leaves and collinear paths: sigma is cut at each leaf's closest
    approach (``_kink_free_rule``). Gauss-Legendre with ``n_steps`` nodes in rho and
    ``n_steps`` in sigma then converges exponentially, except when two paths are nearly (not
    exactly) collinear in a multi-feature Matern leaf (algebraic convergence).

    Parameters
    ----------
    torch_kernel : gpytorch.kernels.Kernel
    X : ndarray (n_points, n_features)
    baseline_a, baseline_b : ndarray (n_features,) or (n_points, n_features)
        One baseline for every point, or one per point (the covariance across points passes
        paths out of one baseline as paths into it: ``two_path_prior``).
    n_steps : int
    leaves : list of RadialLeaf, optional

    Returns
    -------
    ndarray (n_points, n_features, n_features), not symmetric (``P(b, a) = P(a, b)^T``).
    """

    rho, w_rho = quadrature_rule("gauss-legendre", n_steps)
    n_points, n_features = X.shape
    d = X - baseline_a
    e = X - baseline_b
    kinked = [leaf for leaf in leaves or [] if leaf.pole_offset == 0.0]
    lefts, rights, weights = [], [], []
    for moving, fixed, swap in ((d, e, False), (e, d, True)):
        # Triangle q <= p: (p, q) = (rho, rho sigma); triangle p < q: (p, q) = (rho sigma, rho).
        # Along sigma the separation is rho (sigma fixed_dir - moving_dir).
        cuts = np.zeros((n_points, len(kinked)))
        for c, leaf in enumerate(kinked):
            m = moving[:, leaf.dims] / leaf.lengthscale
            f = fixed[:, leaf.dims] / leaf.lengthscale
            f_sq = np.sum(f * f, axis=1)
            ratio = np.sum(m * f, axis=1) / np.where(f_sq > 0, f_sq, 1.0)
            cuts[:, c] = np.clip(np.where(f_sq > 0, ratio, 0.0), 0.0, 1.0)
        sigma, w_sigma = _kink_free_rule(cuts, n_steps)  # (p, K_sigma)
        big = rho[None, :, None] * np.ones_like(sigma)[:, None, :]  # (p, K_rho, K_sigma)
        small = rho[None, :, None] * sigma[:, None, :]
        weight = (w_rho * rho)[None, :, None] * w_sigma[:, None, :]
        p, q = (small, big) if swap else (big, small)
        lefts.append(X[:, None, None, :] - p[..., None] * d[:, None, None, :])
        rights.append(X[:, None, None, :] - q[..., None] * e[:, None, None, :])
        weights.append(weight)
    left = np.concatenate([a.reshape(n_points, -1, n_features) for a in lefts], axis=1)
    right = np.concatenate([a.reshape(n_points, -1, n_features) for a in rights], axis=1)
    weight = np.concatenate([a.reshape(n_points, -1) for a in weights], axis=1)
    return _stepped_mixed_derivatives(torch_kernel, left, right, weight, d, e)


def two_path_prior(torch_kernel, start_a, end_a, start_b, end_b, n_steps: int,
                   leaves=None) -> np.ndarray:
    """Prior covariance between the integrated gradients along two paths, row by row.

    ``P_ij = d_i e_j int_0^1 int_0^1 d^2 k(a + t d, b + s e) / dx_i dx'_j dt ds`` with ``d =
    end_a - start_a``, ``e = end_b - start_b``: the two-point prior term of the covariance
    across explained points (``return_cov="points"``). Where the paths meet, a Matern kernel
    has a kink and the tensor rule would converge only algebraically, so the rows whose paths
    share an end are passed to ``path_pair_prior``'s Duffy rule: a common start (one baseline,
    two points) as paths into the start, a common end (one point, two baselines) directly.
    The other rows get the tensor Gauss-Legendre rule with ``n_steps`` nodes per path, which
    converges exponentially unless the two paths pass close to each other elsewhere
    (crossing paths of a Matern kernel: algebraic, reported by no identity).

    Parameters
    ----------
    torch_kernel : gpytorch.kernels.Kernel (float64)
    start_a, end_a, start_b, end_b : ndarray (n_rows, n_features)
    n_steps : int
    leaves : list of RadialLeaf, optional
        Where a Matern kernel's kinks are (``radial_leaves``), for ``path_pair_prior``.

    Returns
    -------
    ndarray (n_rows, n_features, n_features)
    """
    n_rows, n_features = start_a.shape
    prior = np.zeros((n_rows, n_features, n_features))
    same_start = np.all(start_a == start_b, axis=1)
    same_end = np.all(end_a == end_b, axis=1) & ~same_start
    if same_start.any():  # reversed, both paths run into the common start
        prior[same_start] = path_pair_prior(
            torch_kernel, start_a[same_start], end_a[same_start], end_b[same_start],
            n_steps, leaves)
    if same_end.any():
        prior[same_end] = path_pair_prior(
            torch_kernel, end_a[same_end], start_a[same_end], start_b[same_end], n_steps, leaves)
    apart = ~(same_start | same_end)
    if not apart.any():
        return prior
    t, w = quadrature_rule("gauss-legendre", n_steps)
    d, e = end_a[apart] - start_a[apart], end_b[apart] - start_b[apart]
    shape = (len(d), n_steps, n_steps, n_features)
    left = np.broadcast_to(start_a[apart][:, None, None, :] + t[None, :, None, None]
                           * d[:, None, None, :], shape)
    right = np.broadcast_to(start_b[apart][:, None, None, :] + t[None, None, :, None]
                            * e[:, None, None, :], shape)
    weight = np.broadcast_to((w[:, None] * w[None, :])[None], shape[:3])
    prior[apart] = _stepped_mixed_derivatives(
        torch_kernel, left.reshape(len(d), -1, n_features),
        right.reshape(len(d), -1, n_features), weight.reshape(len(d), -1), d, e)
    return prior
