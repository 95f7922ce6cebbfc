"""``gpexplain._quad``: binary128 helpers, against mpmath at 50 digits and float64 products."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest

from gpexplain._quad import (
    QUAD_EPS,
    gauss_legendre,
    is_quad,
    lower_triangular_inverse,
    matmul,
    to_quad,
)

rng = np.random.default_rng(3)


def _mp(value):
    return mpmath.mpf(str(value))  # the binary128 value's decimal digits, ~36 of them


@pytest.mark.parametrize("n_nodes", [1, 2, 5, 16])
def test_gauss_legendre_integrates_every_degree_below_2m_to_binary128(n_nodes):
    mpmath.mp.dps = 50
    nodes, weights = gauss_legendre(n_nodes)
    assert is_quad(nodes) and is_quad(weights)
    for degree in range(2 * n_nodes):
        got = sum(_mp(w) * _mp(x) ** degree for x, w in zip(nodes, weights, strict=True))
        exact = mpmath.mpf(2) / (degree + 1) if degree % 2 == 0 else mpmath.mpf(0)
        assert abs(got - exact) < 50 * QUAD_EPS


@pytest.mark.parametrize("shapes", [((5, 4), (6, 4)), ((4, 5), (4, 3))])
def test_matmul_of_transposed_operands_equals_float64(shapes):
    """numpy-quaddtype 1.0's own ``@`` gives wrong numbers for a transposed operand (measured:
    errors of O(1)); the wrapper must not."""
    a, b = rng.normal(size=shapes[0]), rng.normal(size=shapes[1])
    left, right = (a, b.T) if shapes[0][1] == shapes[1][1] else (a.T, b)
    got = matmul(to_quad(left), to_quad(right))
    assert is_quad(got)
    np.testing.assert_allclose(got.astype(np.float64), left @ right, rtol=1e-14, atol=1e-14)
    matrix, vector = rng.normal(size=(4, 4)), rng.normal(size=8)
    strided = matmul(to_quad(matrix)[:, ::-1], to_quad(vector)[::2])  # views of quad arrays
    np.testing.assert_allclose(strided.astype(np.float64), matrix[:, ::-1] @ vector[::2],
                               rtol=1e-14, atol=1e-14)


def test_matmul_refuses_a_stacked_binary128_product():
    with pytest.raises(ValueError, match="1-D or 2-D"):
        matmul(to_quad(np.ones((2, 3, 3))), to_quad(np.ones(3)))


def test_lower_triangular_inverse_is_exact_to_binary128_on_an_ill_conditioned_factor():
    """A Cholesky factor of a kernel matrix with noise 1e-10 (condition ~1e11): the binary128
    inverse times the factor is the identity to ~cond * 1e-34, checked in mpmath."""
    mpmath.mp.dps = 50
    x = np.sort(rng.uniform(-1, 1, 12))
    K = np.exp(-0.5 * (x[:, None] - x[None, :]) ** 2 / 0.6**2) + 1e-10 * np.eye(12)
    L = np.linalg.cholesky(K)
    inverse = lower_triangular_inverse(L)
    product = mpmath.matrix(L.tolist()) * mpmath.matrix(
        [[_mp(v) for v in row] for row in inverse])
    worst = max(abs(product[i, j] - (1 if i == j else 0)) for i in range(12) for j in range(12))
    assert worst < 1e-20
    assert np.all(np.triu(inverse.astype(np.float64), 1) == 0)
