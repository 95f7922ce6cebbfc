"""Quadruple precision (IEEE binary128, 113-bit significand, ~34 digits) for sums that cancel.

The Sobol indices of a nearly interpolating GP are quadratic forms ``a^T H a`` whose weights
``a = K^{-1} y`` reach 1e6-1e10 while the result is O(1) (issue 27, item 15): in double
precision each entry of H carries a rounding error of ``eps |H_nn'|`` that no later step can
remove, so the sum is only known to ``eps |a|_1^2 max |H|``, which exceeds the variance once
``|a|_1`` passes ~1e4. Computed in binary128 from the same double-precision inputs (the
training points, ``a``, the lengthscales and the measure are exact binary numbers) the error
shrinks by ``2^-60`` (1e-18), to ``1.9e-34 |a|_1^2``.

Only the per-entry work must be in binary128: a constant rounded once and used everywhere
(a lengthscale ratio, a Gaussian measure's std) changes the posterior mean by a function of
size ``eps |a|_1`` that every index sees alike, so the identities between the indices still
hold to binary128 accuracy.

The arithmetic is NumPy's own quad dtype (numpy-quaddtype, SLEEF's vectorised binary128):
elementwise ufuncs and reductions are exact to binary128 rounding. Its products are not all
usable (version 1.0, measured): ``np.einsum`` and a stacked or non-contiguous (transposed,
sliced) ``matmul`` return wrong numbers without an error, and ``np.dot`` / ``np.tensordot``
refuse it. Code that may receive quad arrays therefore contracts with ``matmul`` below (1-D
and 2-D operands, copied contiguous) and with elementwise products and sums. NumPy also casts
a quad result silently into a float64 ``out=`` or in-place target, so every accumulator takes
the dtype of its inputs.
"""

from __future__ import annotations

import numpy as np
import numpy_quaddtype

__all__ = ["QUAD", "QUAD_EPS", "gauss_legendre", "is_quad", "lower_triangular_inverse", "matmul",
           "to_quad"]

QUAD = numpy_quaddtype.QuadPrecDType()
QUAD_EPS = float(numpy_quaddtype.epsilon)


def to_quad(values) -> np.ndarray:
    """``values`` (array-like of float64) as a binary128 array; every float64 is exact in it."""
    return np.asarray(values, dtype=np.float64).astype(QUAD)


def is_quad(array) -> bool:
    """Whether ``array`` is a binary128 NumPy array."""
    return getattr(array, "dtype", None) == QUAD


def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``a @ b`` for 1-D or 2-D operands, correct in binary128 too (module docstring: the
    operands are then made contiguous quad arrays first); float64 operands go straight to
    ``@``.

    Raises
    ------
    ValueError
        A binary128 operand with more than two dimensions (a stacked product).
    """
    if not (is_quad(a) or is_quad(b)):
        return a @ b
    if a.ndim > 2 or b.ndim > 2:
        raise ValueError("binary128 matmul takes 1-D or 2-D operands; loop over the stack.")
    return np.ascontiguousarray(a, dtype=QUAD) @ np.ascontiguousarray(b, dtype=QUAD)


def lower_triangular_inverse(factor: np.ndarray) -> np.ndarray:
    """``L^{-1}`` in binary128 of a float64 lower-triangular ``L`` (n, n), by forward
    substitution row by row.

    Used for ``K^{-1} = L^{-T} L^{-1}`` of a float64 Cholesky factor: that factor is exact for
    ``L L^T = K + E`` with ``|E| ~ n eps |K|`` (backward stability), so the binary128 inverse
    is the posterior of a model whose noise is perturbed by E, a valid one whenever E is below
    the noise; a float64 ``K^{-1}`` is not (its rounding, ``eps |L^{-1}|^2``, can exceed the
    posterior variance it is subtracted from). Cost: n^3 / 3 binary128 multiply-adds.
    """
    factor = to_quad(factor)
    n = factor.shape[0]
    inverse = np.zeros((n, n), dtype=QUAD)
    for i in range(n):
        row = -matmul(factor[i, :i], inverse[:i]) if i else np.zeros(n, dtype=QUAD)
        row[i] += 1.0
        inverse[i] = row / factor[i, i]
    return inverse


def gauss_legendre(n_nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """Gauss-Legendre nodes and weights on [-1, 1] to binary128 accuracy, (n_nodes,) each.

    NumPy's float64 rule is refined by Newton's method on the Legendre polynomial ``P_m``
    (three-term recurrence, quadratically convergent from 16 correct digits: two steps give
    34), and the weights are ``2 / ((1 - x^2) P_m'(x)^2)`` at the refined nodes. A float64
    rule would not do: its weights' rounding, 1e-16 of each term, would re-enter the
    cancelling sums it is used in.
    """
    nodes = to_quad(np.polynomial.legendre.leggauss(n_nodes)[0])
    for _ in range(3):
        value, slope = _legendre(n_nodes, nodes)
        nodes = nodes - value / slope
    _, slope = _legendre(n_nodes, nodes)
    return nodes, 2.0 / ((1.0 - nodes * nodes) * slope * slope)


def _legendre(degree: int, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(P_degree(x), P_degree'(x))`` by the recurrence ``k P_k = (2k - 1) x P_{k-1} - (k - 1)
    P_{k-2}`` and ``(x^2 - 1) P_m' = m (x P_m - P_{m-1})`` (x inside (-1, 1))."""
    previous, current = np.ones_like(x), x
    for k in range(2, degree + 1):
        previous, current = current, ((2 * k - 1) * x * current - (k - 1) * previous) / k
    return current, degree * (x * current - previous) / (x * x - 1.0)
