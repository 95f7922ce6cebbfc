"""Exact attributions of the posterior variance ``s2(x) = k(x, x) - k(x, Z) Q k(Z, x)``.

The posterior variance is a deterministic function of x (DESIGN.md: explained as a function,
with no posterior over the explanation). It is a quadratic form in the kernel sections, so

    s2(x) = k(x, x) - sum_{n, m} Q_nm k(x, z_n) k(x, z_m),

and each pair term inherits the structure that makes the mean's explanation exact:

* **Product kernels** ``k(x, z) = s2 prod_j k_j(x_j, z_j)`` (``gpexplain.kernels.product``):
  ``k(x, z_n) k(x, z_m) = s2^2 prod_j p_j`` with ``p_j = k_j(x_j, z_nj) k_j(x_j, z_mj)`` is a
  product over features, so the game ``v(S) = E_{r ~ R} s2(x_S, r_-S)`` is a sum of product
  games with ``q_j = k_j(r_j, z_nj) k_j(r_j, z_mj)`` (baseline, interventional) or ``q_j =
  E_{s ~ p_j} k_j(s, z_nj) k_j(s, z_mj)`` (product measure: ``ProductStructure.second_moment``,
  closed form for Gaussian measures and squared-exponential factors, exact averages for
  Empirical, converged quadrature for Uniform). ``k(x, x) = s2`` is constant, so it plays no
  part. The Shapley value of each product game is the multilinear integral of
  ``gpexplain.functionals.product_shapley`` (Owen 1972), exact with ceil(d/2) Gauss-Legendre
  nodes: ``phi_i(x) = -s2^2 sum_nm Q_nm A_i(p_nm, q_nm)``, O(n^2 d ceil(d/2)) per point and
  reference, the n^2 pairs taken in blocks of rows of Q.
* **Squared exponential** (ARD, or a product of SE factors): ``k(x, z_n) k(x, z_m) = s2 w_nm
  k'(x, c_nm)`` with ``c_nm = (z_n + z_m) / 2``, ``w_nm = exp(-|(z_n - z_m) / l|^2 / 4)`` and
  ``k'`` the squared exponential of lengthscale ``l / sqrt(2)`` and variance s2: a Gaussian
  bump, whose integrated gradients along a straight path have the erf closed form of the
  mean's (``RBF.integrated_gradient_cross``, Butler et al. 2024, corrected in
  docs/errata.md). Term by term they sum to ``k'(x, c) - k'(xt, c)``, so ``sum_i IG_i =
  s2(x) - s2(xt)`` exactly. Only pairs ``n <= m`` are evaluated (Q is symmetric).
"""

from __future__ import annotations

import numpy as np

from gpexplain.functionals.product_shapley import gauss_legendre_unit
from gpexplain.kernels.rbf import RBF

__all__ = [
    "StructureKernel", "product_measure_variance", "squared_exponential_equivalent",
    "variance_ig_rbf", "variance_shapley_product",
]

#: Elements of the largest (points x pair block x features x nodes) array built at once.
_BLOCK_ELEMENTS = 2_000_000


def squared_exponential_equivalent(structure) -> RBF | None:
    """The ``gx.kernels.RBF`` equal to a product structure whose factors are all squared
    exponentials (several on one feature combine, ``1 / l^2 = sum_f 1 / l_f^2``), else None."""
    if structure is None:
        return None
    inverse = np.zeros(structure.n_features)
    for j, factors in enumerate(structure.factors):
        for factor in factors:
            if factor.kind != "se":
                return None
            inverse[j] += factor.lengthscale**-2.0
    with np.errstate(divide="ignore"):
        return RBF(lengthscale=inverse**-0.5, variance=structure.variance)


def _pair_shapley(p: np.ndarray, q: np.ndarray, nodes, weights) -> np.ndarray:
    """``multilinear_shapley`` of ``gpexplain.functionals.product_shapley`` for the many pair
    games here: the same prefix and suffix products (no division), written into preallocated
    arrays (2-3x faster on the (points, pairs, nodes, features) slabs, same numbers)."""
    delta = p - q
    path = q[..., None, :] + nodes[:, None] * delta[..., None, :]
    products = np.empty_like(path)
    products[..., 0] = 1.0
    np.cumprod(path[..., :-1], axis=-1, out=products[..., 1:])
    suffix = np.empty_like(path)
    suffix[..., -1] = 1.0
    np.cumprod(path[..., :0:-1], axis=-1, out=suffix[..., -2::-1])
    products *= suffix
    return delta * np.einsum("...md,m->...d", products, weights)


class StructureKernel:
    """``k(a, b) = variance prod_j k_j(a_j, b_j)`` evaluated from a ``ProductStructure``: the
    kernel exactly as the Shapley values see it."""

    def __init__(self, structure):
        self.structure = structure

    def __call__(self, A: np.ndarray, B: np.ndarray) -> np.ndarray:
        return self.structure.variance * self.structure.matrices(A, B).prod(-1)

    def diag(self, A: np.ndarray) -> np.ndarray:
        return np.full(len(A), self.structure.variance)


def _rows_per_block(n_points: int, n_basis: int, n_features: int, n_nodes: int) -> int:
    per_row = max(1, n_points * n_basis * n_features * max(n_nodes, 1))
    return max(1, min(n_basis, _BLOCK_ELEMENTS // per_row))


def variance_shapley_product(structure, Z, Q, X, references=None, measure=None) -> np.ndarray:
    """Shapley values of ``v(S) = E_r s2(x_S, r_-S)`` for a product-kernel posterior.

    Parameters
    ----------
    structure : gpexplain.kernels.product.ProductStructure
    Z : ndarray (n_basis, n_features)
    Q : ndarray (n_basis, n_basis), symmetric
    X : ndarray (n_points, n_features)
    references : ndarray (n_references, n_features), optional
        The baseline (one row) or background rows; None with ``measure``.
    measure : gx.measures.Gaussian, Empirical or Uniform (resolved), optional

    Returns
    -------
    ndarray (n_points, n_features), in squared units of the target; sums to ``s2(x) - E_r
    s2(r)`` (product measure: ``s2(x) - E_{r ~ p} s2(r)``).
    """
    n_points, n_features = X.shape
    nodes, weights = gauss_legendre_unit(n_features)
    p_sections = structure.matrices(X, Z)  # (P, n, d)
    total = np.zeros((n_points, n_features))
    if references is None:  # the measure's moments come as (rows, n) blocks of pairs
        block = _rows_per_block(n_points, len(Z), n_features, len(nodes))
        for start in range(0, len(Z), block):
            rows = slice(start, start + block)
            p = p_sections[:, rows, None, :] * p_sections[:, None, :, :]  # (P, b, n, d)
            q = structure.second_moment(Z[rows], Z, measure)
            values = _pair_shapley(p, q[None], nodes, weights)  # (P, b, n, d)
            total -= np.einsum("pbnd,bn->pd", values, Q[rows])
        return structure.variance**2 * total
    # Baseline and background rows: the pairs n <= m only (both the game and Q are
    # symmetric in n and m), off-diagonal pairs counted twice.
    first, second = np.triu_indices(len(Z))
    pair_weights = Q[first, second] * np.where(first == second, 1.0, 2.0)
    block = max(1, _BLOCK_ELEMENTS // (n_points * n_features * len(nodes)))
    sections = [structure.matrices(r[None, :], Z)[0] for r in references]  # (n, d) each
    for start in range(0, len(first), block):
        a, b = first[start:start + block], second[start:start + block]
        p = p_sections[:, a, :] * p_sections[:, b, :]  # (P, pairs, d)
        for section in sections:
            values = _pair_shapley(p, (section[a] * section[b])[None], nodes, weights)
            total -= np.einsum("pkd,k->pd", values, pair_weights[start:start + block])
    return structure.variance**2 * total / len(references)


def product_measure_variance(structure, Z, Q, measure) -> float:
    """``E_{r ~ prod_j p_j} s2(r) = s2 - s2^2 sum_nm Q_nm prod_j E_s k_j(s, z_nj) k_j(s, z_mj)``."""
    block = _rows_per_block(1, len(Z), Z.shape[1], 1)
    reduction = 0.0
    for start in range(0, len(Z), block):
        rows = slice(start, start + block)
        moments = structure.second_moment(Z[rows], Z, measure).prod(-1)
        reduction += float(np.sum(Q[rows] * moments))
    return structure.variance - structure.variance**2 * reduction


def variance_ig_rbf(kernel: RBF, Z, Q, X, baseline) -> np.ndarray:
    """Integrated gradients of ``s2`` from ``baseline`` for a squared-exponential posterior.

    Parameters
    ----------
    kernel : gx.kernels.RBF (its lengthscale resolved to the features)
    Z, Q, X : as ``variance_shapley_product``
    baseline : ndarray (n_features,)

    Returns
    -------
    ndarray (n_points, n_features); sums to ``s2(x) - s2(baseline)`` term by term.
    """
    n_points, n_features = X.shape
    lengthscale = kernel._lengthscales(n_features)
    bump = RBF(lengthscale=lengthscale / np.sqrt(2.0), variance=kernel.variance)
    upper_n, upper_m = np.triu_indices(len(Z))
    # w_nm Q_nm, doubled off the diagonal (the pair (m, n) is the same bump).
    distances = RBF(lengthscale=lengthscale)._squared_distances(Z, Z)
    coefficients = (np.exp(-0.25 * distances) * Q)[upper_n, upper_m]
    coefficients[upper_n != upper_m] *= 2.0
    keep = coefficients != 0.0
    upper_n, upper_m, coefficients = upper_n[keep], upper_m[keep], coefficients[keep]
    block = max(1, _BLOCK_ELEMENTS // (n_points * n_features * 8))
    total = np.zeros((n_points, n_features))
    for start in range(0, len(coefficients), block):
        pairs = slice(start, start + block)
        centres = 0.5 * (Z[upper_n[pairs]] + Z[upper_m[pairs]])
        cross = bump.integrated_gradient_cross(X, baseline, centres)  # (P, d, pairs)
        total -= cross @ coefficients[pairs]
    return kernel.variance * total
