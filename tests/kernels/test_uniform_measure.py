"""``gx.measures.Uniform``: validation, and every per-feature integral of ``ProductStructure``
under it against references written here.

* mpmath quadrature (30 digits, the box split into 64 pieces so the adaptive rule resolves
  lengthscales down to 1e-2 box widths) of the mean embedding, the double embedding, the
  second moment and the centred second moment of an SE factor, at lengthscales from 1e-2 to
  1e3 box widths, in 1-D and as a 2-D integral over a box;
* (the three-kernel integrals of the posterior stds: ``tests/explain/test_sensitivity.py``,
  ``test_variance_integrals_against_mpmath``);
* an RQ factor against mpmath quadrature (its accuracy is measured, not assumed).

Tolerances: 1e-13 relative to the largest value of each quantity (the rule is exact to
~2e-15); centred quantities keep it relative to their own size, which is O((width / l)^2) and
smaller for wide lengthscales.
"""

from __future__ import annotations

import gpytorch.kernels as gk
import mpmath
import numpy as np
import pytest
import torch

import gpexplain as gx
from gpexplain.kernels import RBF, GPyTorchKernel
from gpexplain.kernels.measures import Uniform
from gpexplain.kernels.product import product_structure

LOW, HIGH = -0.4, 1.6  # box width 2
POINTS = np.array([-0.4, 0.35, 1.2, 2.5])  # an edge, inside, and outside the box


def test_validation_broadcast_and_export():
    assert gx.measures.Uniform is Uniform
    measure = Uniform(0.0, [1.0, 2.0])
    assert measure.n_features == 2 and Uniform().n_features is None
    np.testing.assert_array_equal(measure.resolve(2).low, [0.0, 0.0])
    np.testing.assert_array_equal(Uniform().resolve(3).high, [1.0, 1.0, 1.0])
    with pytest.raises(ValueError, match="feature 1 has low = 2.0 >= high = 2.0"):
        Uniform([0.0, 2.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="low must be finite"):
        Uniform(-np.inf, 1.0)
    with pytest.raises(ValueError, match="high must be a scalar or a 1-D array"):
        Uniform(0.0, np.ones((2, 2)))
    with pytest.raises(ValueError, match="low has 3 entries but high has 2"):
        Uniform([0.0, 0.0, 0.0], [1.0, 1.0])
    with pytest.raises(ValueError, match="2 features but the inputs have 3"):
        measure.resolve(3)
    assert "Uniform(low=" in repr(measure)
    nodes, weights = Uniform(LOW, HIGH).resolve(1).rule(0, 0.1)
    assert nodes.min() > LOW and nodes.max() < HIGH
    np.testing.assert_allclose(weights.sum(), 1.0, rtol=1e-15)
    with pytest.raises(ValueError, match="kernel lengthscales wide"):
        Uniform(0.0, 1.0).resolve(1).rule(0, 1e-4)


def _mp_uniform_expectation(function, lengthscale=1.0, dps=30):
    """E over U(LOW, HIGH) by mpmath quadrature on pieces at most 2 lengthscales wide."""
    pieces = max(2, int(np.ceil((HIGH - LOW) / (2 * lengthscale))))
    with mpmath.workdps(dps):
        edges = [mpmath.mpf(LOW) + (HIGH - LOW) * mpmath.mpf(i) / pieces
                 for i in range(pieces + 1)]
        return mpmath.quad(function, edges) / (HIGH - LOW)


def _structure(lengthscale):
    return product_structure(RBF(np.array([lengthscale]), 1.0), 1)


@pytest.mark.parametrize("ratio", [1e-2, 0.1, 1.0, 10.0, 1e3])
def test_se_moments_against_mpmath(ratio):
    lengthscale = ratio * (HIGH - LOW)
    structure, measure = _structure(lengthscale), Uniform(LOW, HIGH).resolve(1)
    ell = mpmath.mpf(lengthscale)

    def k(s, a):
        return mpmath.exp(-((s - mpmath.mpf(a)) ** 2) / (2 * ell * ell))

    mus = [_mp_uniform_expectation(lambda s, a=a: k(s, a), lengthscale) for a in POINTS]
    # 1 - M = E (1 - k(s, t)) over d = |s - t|, whose density is 2 (W - d) / W^2 on [0, W]
    with mpmath.workdps(30):
        width = mpmath.mpf(HIGH) - mpmath.mpf(LOW)
        one_minus_double = mpmath.quad(
            lambda d: 2 * (width - d) / width**2 * -mpmath.expm1(-d * d / (2 * ell * ell)),
            mpmath.linspace(0, width, max(2, int(np.ceil(1 / ratio)))))
    X = POINTS[:, None]
    mu = structure.embedding(X, measure)[:, 0]
    np.testing.assert_allclose(mu, [float(m) for m in mus], rtol=0, atol=1e-13)
    M = structure.double_embedding(measure)[0]
    assert abs(M - (1 - float(one_minus_double))) <= 1e-13
    # 1 - M is O((width / l)^2) for wide lengthscales: relative accuracy kept
    assert abs(structure.centred_double_embedding(measure)[0] - float(one_minus_double)) <= (
        1e-13 * float(one_minus_double))
    second = structure.second_moment(X, X, measure)[:, :, 0]
    centred = structure.centred_second_moment(X, X, measure)[:, :, 0]
    for i, j in [(0, 1), (1, 2), (2, 3)]:
        reference = _mp_uniform_expectation(
            lambda s, i=i, j=j: k(s, POINTS[i]) * k(s, POINTS[j]), lengthscale)
        assert abs(second[i, j] - float(reference)) <= 1e-13
        reference = _mp_uniform_expectation(
            lambda s, i=i, j=j: (k(s, POINTS[i]) - mus[i]) * (k(s, POINTS[j]) - mus[j]),
            lengthscale)
        scale = max(abs(float(reference)), 1e-30)
        assert abs(centred[i, j] - float(reference)) <= 1e-12 * scale + 1e-15 * abs(
            second[i, j]) * (ratio < 1), (i, j, centred[i, j], reference)


def test_two_dimensional_box_against_mpmath():
    # The kernel of two features integrated over the 2-D box [0, 1] x [-1, 2]: the product
    # structure must turn per-feature moments into the 2-D integrals.
    lengthscales = np.array([0.3, 2.0])
    kernel = RBF(lengthscales, 1.0)
    structure = product_structure(kernel, 2)
    measure = Uniform([0.0, -1.0], [1.0, 2.0])
    a, b = np.array([[0.2, 0.5]]), np.array([[0.9, -1.5]])

    def k(s, t, x):
        return mpmath.exp(-(s - x[0]) ** 2 / (2 * lengthscales[0] ** 2)
                          - (t - x[1]) ** 2 / (2 * lengthscales[1] ** 2))

    with mpmath.workdps(20):
        def expect(function):
            return mpmath.quad(function, [0, 0.5, 1], [-1, 0.5, 2]) / 3

        mu_a, mu_b = expect(lambda s, t: k(s, t, a[0])), expect(lambda s, t: k(s, t, b[0]))
        second = expect(lambda s, t: k(s, t, a[0]) * k(s, t, b[0]))
    got_mu = structure.embedding(np.vstack([a, b]), measure).prod(-1)
    np.testing.assert_allclose(got_mu, [float(mu_a), float(mu_b)], rtol=1e-13)
    got_second = structure.second_moment(a, b, measure).prod(-1)[0, 0]
    np.testing.assert_allclose(got_second, float(second), rtol=1e-13)


@pytest.mark.parametrize("alpha", [0.05, 0.8, 20.0])
def test_rational_quadratic_factor_against_mpmath(alpha):
    # The RQ correlation's poles at +-i l sqrt(2 alpha) set its panels; measured accuracy.
    module = gk.RQKernel().double()
    module.lengthscale = torch.tensor(0.3, dtype=torch.float64)
    module.alpha = torch.tensor(alpha, dtype=torch.float64)
    structure = product_structure(GPyTorchKernel(module), 1)
    measure = Uniform(LOW, HIGH).resolve(1)
    with mpmath.workdps(30):
        ell2 = mpmath.mpf(0.3) ** 2
        reference = [_mp_uniform_expectation(
            lambda s, a=a: (1 + (s - a) ** 2 / (2 * alpha * ell2)) ** -alpha, 0.3)
            for a in POINTS]
    got = structure.embedding(POINTS[:, None], measure)[:, 0]
    np.testing.assert_allclose(got, [float(r) for r in reference], rtol=0, atol=1e-13)


def test_matern_factor_is_refused():
    module = gk.MaternKernel(nu=2.5)
    structure = product_structure(GPyTorchKernel(module.double()), 1)
    with pytest.raises(TypeError, match="Matern kernel factor.*Empirical"):
        structure.embedding(POINTS[:, None], Uniform(LOW, HIGH).resolve(1))
