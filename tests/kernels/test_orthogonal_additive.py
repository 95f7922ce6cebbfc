"""Orthogonal additive kernel: brute-force subset sums, orthogonality, torch module, stability."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
import torch

from gpexplain.explain.integrated_gradients import integrated_gradients
from gpexplain.kernels.measures import Empirical, Gaussian
from gpexplain.kernels.orthogonal_additive import (
    OrthogonalAdditive,
    elementary_symmetric,
    leave_one_out_weighted_sums,
)
from gpexplain.posterior import ExactPosterior
from tests.reference import shapley_brute_force as ref

D = 4
LENGTHSCALE = np.array([0.6, 1.1, 1.7, 0.9])
VARIANCES = np.array([0.3, 1.0, 0.6, 0.25, 0.1])


def _measures():
    rng = np.random.default_rng(0)
    mean, std = rng.normal(size=D) * 0.3, 0.7 + rng.random(D)
    atoms = rng.normal(size=(9, D))
    return [
        (Gaussian(mean, std), ref.gaussian_atoms(mean, std, 160)),
        (Empirical(atoms), ref.empirical_atoms(atoms)),
    ]


@pytest.mark.parametrize("index", [0, 1])
@pytest.mark.parametrize("max_order", [None, 2])
def test_kernel_equals_subset_sum_of_eq4_components(index, max_order):
    measure, atoms = _measures()[index]
    variances = VARIANCES if max_order is None else VARIANCES[: max_order + 1]
    kernel = OrthogonalAdditive(LENGTHSCALE, variances, measure, max_order=max_order)
    rng = np.random.default_rng(1)
    X1, X2 = rng.normal(size=(5, D)) * 1.5, rng.normal(size=(6, D))
    expected = ref.additive_kernel(X1, X2, LENGTHSCALE, variances, atoms)
    np.testing.assert_allclose(kernel(X1, X2), expected, rtol=0, atol=1e-12)
    np.testing.assert_allclose(kernel.diag(X1), np.diag(kernel(X1, X1)), atol=1e-14)
    assert np.linalg.eigvalsh(kernel(X1, X1)).min() > -1e-12


def test_components_integrate_to_zero_under_their_measure():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(4, D)) * 2
    gaussian = Gaussian([0.5, -0.2, 0.0, 1.0], [0.5, 1.0, 2.0, 0.8])
    kernel = OrthogonalAdditive(LENGTHSCALE, VARIANCES, gaussian)
    nodes, weights = np.polynomial.hermite_e.hermegauss(120)
    weights = weights / weights.sum()
    S = gaussian.mean + gaussian.std * nodes[:, None]  # node s_k for every feature
    integral = np.einsum("k,kpd->pd", weights, kernel.components(S, X))
    np.testing.assert_allclose(integral, 0.0, atol=1e-13)
    atoms = rng.normal(size=(11, D))
    empirical = OrthogonalAdditive(LENGTHSCALE, VARIANCES, Empirical(atoms))
    np.testing.assert_allclose(empirical.components(atoms, X).mean(0), 0.0, atol=1e-14)


def test_elementary_symmetric_stable_for_thirty_features():
    """DP recursion vs mpmath at 60 digits for mixed-sign inputs (Newton-Girard loses all
    digits here); error measured against the scale e_q(|z|)."""
    rng = np.random.default_rng(3)
    z = rng.uniform(-1.0, 1.0, size=30)
    mpmath.mp.dps = 60
    exact = [mpmath.mpf(1)] + [mpmath.mpf(0)] * 30
    for value in z:
        for k in range(30, 0, -1):
            exact[k] += mpmath.mpf(float(value)) * exact[k - 1]
    scale = elementary_symmetric(np.abs(z)[None, :], 30)
    computed = elementary_symmetric(z[None, :], 30)
    for q in range(31):
        assert abs(computed[q][0] - float(exact[q])) <= 1e-14 * scale[q][0] + 1e-300
    weights = rng.random(30)
    loo = leave_one_out_weighted_sums(z[None, :], weights)[0]
    for i in range(0, 30, 7):
        e = [mpmath.mpf(1)] + [mpmath.mpf(0)] * 29
        for j, value in enumerate(z):
            if j != i:
                for k in range(29, 0, -1):
                    e[k] += mpmath.mpf(float(value)) * e[k - 1]
        expected = float(z[i]) * sum(mpmath.mpf(float(w)) * e[r] for r, w in enumerate(weights))
        assert loo[i] == pytest.approx(float(expected), rel=1e-12, abs=1e-15)


@pytest.mark.parametrize("index", [0, 1])
def test_torch_module_matches_and_differentiates(index):
    measure, _ = _measures()[index]
    kernel = OrthogonalAdditive(LENGTHSCALE, VARIANCES, measure)
    rng = np.random.default_rng(4)
    X1, X2 = rng.normal(size=(5, D)), rng.normal(size=(3, D))
    module = kernel.torch_kernel(D)
    full = module(torch.as_tensor(X1), torch.as_tensor(X2)).to_dense().detach().numpy()
    np.testing.assert_allclose(full, kernel(X1, X2), atol=1e-13)
    diag = module(torch.as_tensor(X1), torch.as_tensor(X1), diag=True).detach().numpy()
    np.testing.assert_allclose(diag, kernel.diag(X1), atol=1e-13)
    # The gradient in the inputs against central finite differences.
    x = torch.as_tensor(X1[:1]).requires_grad_(True)
    (gradient,) = torch.autograd.grad(module(x, torch.as_tensor(X2)).to_dense().sum(), x)
    step = 1e-6
    for i in range(D):
        shift = np.zeros(D)
        shift[i] = step
        numeric = (kernel(X1[:1] + shift, X2).sum() - kernel(X1[:1] - shift, X2).sum()) / (2 * step)
        assert gradient[0, i].item() == pytest.approx(numeric, abs=1e-7)


def test_quadrature_integrated_gradients_on_the_additive_model():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(20, D))
    y = np.sin(X[:, 0]) + X[:, 1] * X[:, 2]
    kernel = OrthogonalAdditive(LENGTHSCALE, VARIANCES, Gaussian(0.0, 1.0))
    posterior = ExactPosterior(X, y, kernel, 0.05)
    attribution = integrated_gradients(
        posterior, rng.normal(size=(3, D)), "zeros", method="quadrature", n_steps=32
    )
    gaps = attribution.completeness_gap()
    assert gaps["mean"] < 1e-8 and gaps["variance"] < 1e-6
    with pytest.raises(ValueError, match="quadrature"):
        integrated_gradients(posterior, X[:2], "zeros", method="closed-form")


def test_infinite_lengthscale_switches_feature_off():
    measure = Gaussian(0.0, 1.0)
    off = OrthogonalAdditive([1.0, np.inf, 1.0], [0.2, 1.0, 0.5, 0.1], measure)
    rng = np.random.default_rng(6)
    X1, X2 = rng.normal(size=(3, 3)), rng.normal(size=(4, 3))
    assert np.all(off.components(X1, X2)[:, :, 1] == 0)
    module = off.torch_kernel(3)
    values = module(torch.as_tensor(X1), torch.as_tensor(X2)).to_dense().detach().numpy()
    np.testing.assert_allclose(values, off(X1, X2), atol=1e-13)


def test_validation_errors():
    measure = Gaussian(0.0, 1.0)
    with pytest.raises(ValueError, match="lengthscale must be positive"):
        OrthogonalAdditive([1.0, -1.0], [1.0, 1.0, 1.0], measure)
    with pytest.raises(ValueError, match="order_variances must be finite and >= 0"):
        OrthogonalAdditive([1.0, 1.0], [1.0, -1.0, 1.0], measure)
    with pytest.raises(ValueError, match="needs 3 order_variances"):
        OrthogonalAdditive([1.0, 1.0], [1.0, 1.0], measure, max_order=2)
    with pytest.raises(ValueError, match="need 3"):
        OrthogonalAdditive([1.0, 1.0], [1.0, 1.0], measure)
    with pytest.raises(TypeError, match="measure must be"):
        OrthogonalAdditive(1.0, [1.0, 1.0], "gaussian")
    with pytest.raises(ValueError, match="different numbers of features"):
        OrthogonalAdditive([1.0, 1.0], [1.0, 1.0, 1.0], Gaussian([0.0] * 3, 1.0))
    scalar = OrthogonalAdditive(1.0, [1.0, 1.0, 1.0], measure)
    with pytest.raises(ValueError, match="need 4"):
        scalar(np.zeros((2, 3)), np.zeros((2, 3)))
