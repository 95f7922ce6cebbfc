"""Brute-force references for orthogonal additive GPs and their Shapley values (small d only).

Written from the definitions, independently of ``gpexplain.kernels.orthogonal_additive``:

* the constrained base kernel from eq. 4 with its integrals done numerically (Gauss-Hermite
  for a Gaussian measure, explicit averages for an empirical one), not from the closed form;
* the additive kernel as an explicit sum over all 2^d subsets;
* Shapley values of an explicit game ``v`` by the subset formula (eq. 7);
* the marginal game of a function under a product measure by tensor-product quadrature;
* the joint posterior of the ANOVA components ``f_S(x)`` by enumerating subsets.

Measures are described as per-feature lists of (nodes, weights) ("atoms"), so Gaussian and
empirical measures are handled by the same code.
"""

from __future__ import annotations

import itertools
from math import factorial

import numpy as np


def gaussian_atoms(mean, std, n_nodes: int = 40):
    """Per-feature Gauss-Hermite (probabilists') nodes and weights of N(mean_i, std_i^2)."""
    nodes, weights = np.polynomial.hermite_e.hermegauss(n_nodes)
    weights = weights / weights.sum()
    return [(m + s * nodes, weights) for m, s in zip(mean, std, strict=True)]


def legendre_atoms(low, high, n_nodes: int = 40):
    """Per-feature Gauss-Legendre nodes and weights (summing to 1) of U(low_i, high_i): one
    panel, exact for polynomials of degree 2 n_nodes - 1."""
    nodes, weights = np.polynomial.legendre.leggauss(n_nodes)
    return [(a + (b - a) * (nodes + 1) / 2, weights / 2) for a, b in zip(low, high, strict=True)]


def empirical_atoms(X):
    """Per-feature uniform weights over each column of X."""
    n = X.shape[0]
    return [(X[:, i].copy(), np.full(n, 1.0 / n)) for i in range(X.shape[1])]


def se(a, b, lengthscale):
    return np.exp(-0.5 * (np.subtract.outer(a, b)) ** 2 / lengthscale**2)


def constrained_se(a, b, lengthscale, atoms):
    """Eq. 4: k(a, b) - int k(a, s) dp(s) int k(b, s) dp(s) / int int k(s, t) dp(s) dp(t)."""
    nodes, weights = atoms
    mean_a = se(a, nodes, lengthscale) @ weights
    mean_b = se(b, nodes, lengthscale) @ weights
    double = weights @ se(nodes, nodes, lengthscale) @ weights
    return se(a, b, lengthscale) - np.outer(mean_a, mean_b) / double


def subsets(d, include_empty=True):
    start = 0 if include_empty else 1
    for size in range(start, d + 1):
        yield from itertools.combinations(range(d), size)


def component_matrices(X1, X2, lengthscale, atoms):
    """List over features of kt_i(X1[:, i], X2[:, i])."""
    return [
        constrained_se(X1[:, i], X2[:, i], lengthscale[i], atoms[i]) for i in range(X1.shape[1])
    ]


def subset_kernel(components, S, order_variances):
    """sigma_|S|^2 prod_{i in S} kt_i (zero beyond the highest order)."""
    if len(S) >= len(order_variances):
        return np.zeros_like(components[0])
    value = np.full_like(components[0], order_variances[len(S)])
    for i in S:
        value = value * components[i]
    return value


def additive_kernel(X1, X2, lengthscale, order_variances, atoms):
    """k(X1, X2) = sum over all subsets S of sigma_|S|^2 prod_{i in S} kt_i (eq. 2, strict)."""
    components = component_matrices(X1, X2, lengthscale, atoms)
    return sum(subset_kernel(components, S, order_variances) for S in subsets(X1.shape[1]))


def shapley_from_game(value, d):
    """Classical Shapley values (eq. 7) of the game ``value(frozenset) -> array``."""
    phi = []
    for i in range(d):
        others = [j for j in range(d) if j != i]
        total = 0.0
        for size in range(d):
            weight = factorial(size) * factorial(d - size - 1) / factorial(d)
            for S in itertools.combinations(others, size):
                total = total + weight * (value(frozenset(S) | {i}) - value(frozenset(S)))
        phi.append(total)
    return np.stack(phi, axis=-1)


def marginal_game_points(x, atoms):
    """Evaluation points of the marginal game at x: for each subset S, x_S with every atom
    combination of the other features. Returns (points, index) with index[S] = (rows, weights)."""
    d = x.shape[0]
    points, index, offset = [], {}, 0
    for S in subsets(d):
        free = [j for j in range(d) if j not in S]
        grids = [atoms[j][0] for j in free]
        wgrids = [atoms[j][1] for j in free]
        combos = list(itertools.product(*grids)) if free else [()]
        wcombos = [np.prod(w) for w in itertools.product(*wgrids)] if free else [1.0]
        block = np.tile(x, (len(combos), 1))
        for column, j in enumerate(free):
            block[:, j] = [c[column] for c in combos]
        points.append(block)
        index[frozenset(S)] = (np.arange(offset, offset + len(combos)), np.asarray(wcombos))
        offset += len(combos)
    return np.vstack(points), index


def marginal_game(values, index):
    """v(S) = sum_atoms w f(x_S, atoms_-S) from function values at ``marginal_game_points``.

    ``values`` may carry leading sample axes: shape (..., n_points)."""

    def v(S):
        rows, weights = index[frozenset(S)]
        return values[..., rows] @ weights

    return v


def variance_game(function_on_grid, atoms):
    """Closed Sobol game v(S) = Var(E[f | x_S]) from f on the full tensor grid of the atoms.

    ``function_on_grid`` has shape (n_1, ..., n_d) (one axis per feature)."""
    d = function_on_grid.ndim
    weights = [w for _, w in atoms]
    total_mean = function_on_grid
    for axis in range(d - 1, -1, -1):
        total_mean = np.tensordot(total_mean, weights[axis], axes=([axis], [0]))

    def v(S):
        conditional = function_on_grid
        for axis in range(d - 1, -1, -1):
            if axis not in S:
                conditional = np.tensordot(conditional, weights[axis], axes=([axis], [0]))
        kept = sorted(S)
        second = conditional**2
        for position in range(len(kept) - 1, -1, -1):
            second = np.tensordot(second, weights[kept[position]], axes=([position], [0]))
        return float(second - total_mean**2)

    return v


def tensor_grid(atoms):
    """All atom combinations as rows (n_1 ... n_d, d), C order matching ``variance_game``."""
    mesh = np.meshgrid(*[nodes for nodes, _ in atoms], indexing="ij")
    return np.stack([m.ravel() for m in mesh], axis=1), tuple(len(n) for n, _ in atoms)


def tensor_weights(atoms):
    """Product weights of ``tensor_grid``'s rows."""
    mesh = np.meshgrid(*[weights for _, weights in atoms], indexing="ij")
    return np.prod(np.stack(mesh), axis=0).ravel()


def component_posterior(x, X, y, noise, lengthscale, order_variances, atoms):
    """Joint posterior of all components (f_S(x))_{S != {}} by enumeration; returns the
    Shapley mean and covariance ``phi = B f_vec``, ``B[i, S] = 1/|S|`` for i in S."""
    d = X.shape[1]
    nonempty = list(subsets(d, include_empty=False))
    train = component_matrices(X, X, lengthscale, atoms)
    K = sum(subset_kernel(train, S, order_variances) for S in subsets(d))
    K = K + noise * np.eye(len(y))
    cross_parts = component_matrices(x[None, :], X, lengthscale, atoms)
    self_parts = component_matrices(x[None, :], x[None, :], lengthscale, atoms)
    C = np.vstack([subset_kernel(cross_parts, S, order_variances) for S in nonempty])
    prior = np.diag([subset_kernel(self_parts, S, order_variances)[0, 0] for S in nonempty])
    solved = np.linalg.solve(K, C.T)
    mean = solved.T @ y
    cov = prior - C @ solved
    B = np.zeros((d, len(nonempty)))
    for column, S in enumerate(nonempty):
        B[list(S), column] = 1.0 / len(S)
    return B @ mean, B @ cov @ B.T
