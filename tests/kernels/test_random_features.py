"""Random-feature kernel: closed-form IG functionals against an mpmath reference and the axioms.

The reference (``tests/reference/ig_random_features_mpmath.py``) integrates derivatives of
``k(x, z) = s2 / M sum_m cos(v_m . (x - z))`` along the path at 40 digits; nothing there uses
the feature map or the closed forms. Error measure: the cross term ``A[p, :, n]`` relative to
``max_i |A_ref[p, i, n]|`` and the prior ``P[p]`` relative to ``max_ij |P_ref[p]|`` (single
entries can vanish by cancellation), tolerance ``RTOL``.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gpexplain.explain.integrated_gradients import integrated_gradients
from gpexplain.kernels.random_features import RandomFeatureKernel, sinc
from gpexplain.kernels.rbf import RBF
from gpexplain.posterior.exact import ExactPosterior
from tests.reference import ig_random_features_mpmath as ref

RTOL = 1e-11


def _cases():
    """``id -> (X, baseline, Z, frequencies, variance)``: a fixed seed and hand-picked points."""
    rng = np.random.default_rng(7)
    cases = {}
    for d, M in [(1, 3), (2, 4), (3, 5)]:
        V = rng.normal(size=(M, d)) * 1.5
        cases[f"moderate-{d}d-M{M}"] = (
            rng.normal(size=(2, d)), rng.normal(size=d), rng.normal(size=(3, d)), V, 1.3
        )
    # x exactly at, 1e-8 and 1e-12 from the baseline.
    V = rng.normal(size=(4, 3)) * 2.0
    xt = rng.normal(size=3)
    for eps in (1e-8, 1e-12):
        direction = rng.normal(size=3)
        X = np.stack([xt + eps * direction / np.linalg.norm(direction), xt + eps * np.eye(3)[1]])
        cases[f"near-baseline-{eps:g}"] = (X, xt, rng.normal(size=(2, 3)), V, 0.8)
    # v_0 . (x - xt) exactly zero (u orthogonal to the first frequency, in floating point), and
    # about 1e-13: the sinc limit of docs/errata.md, while the other frequencies still see a path.
    V = np.array([[1.0, -1.0], [0.3, 1.2], [-2.0, 0.5]])
    xt = np.array([0.25, -0.5])
    X = np.stack([xt + 0.75, xt + np.array([0.75, 0.75 + 2**-43])])
    cases["orthogonal-frequency"] = (X, xt, np.array([[0.1, 0.2], [-1.0, 2.0]]), V, 2.0)
    # Large frequencies (many periods along the path) and a point far from the origin.
    V = np.array([[40.0, -25.0], [-60.0, 45.0], [7.0, 90.0]])
    X = np.array([[1.3, -0.7], [0.9, 1.6]])
    cases["large-frequencies"] = (X, np.array([0.2, 0.1]), np.array([[0.5, 0.4]]), V, 1.1)
    return cases


CASES = _cases()


def _as_float(values):
    return np.array([[float(v) for v in row] for row in values])


@pytest.mark.parametrize("case", sorted(CASES))
def test_cross_matches_mpmath(case):
    X, xt, Z, V, s2 = CASES[case]
    A = RandomFeatureKernel(V, s2).integrated_gradient_cross(X, xt, Z)
    for p in range(X.shape[0]):
        reference = _as_float([ref.ig_cross(X[p], xt, z, V, s2) for z in Z]).T  # (D, n)
        scale = np.max(np.abs(reference), axis=0, keepdims=True)
        assert np.all(scale > 0)
        error = np.abs(A[p] - reference) / scale
        assert error.max() < RTOL, (p, error.max())


@pytest.mark.parametrize("case", sorted(CASES))
def test_prior_matches_mpmath(case):
    X, xt, _, V, s2 = CASES[case]
    P = RandomFeatureKernel(V, s2).integrated_gradient_prior(X, xt)
    for p in range(X.shape[0]):
        reference = _as_float(ref.ig_prior(X[p], xt, V, s2))
        scale = np.max(np.abs(reference))
        assert scale > 0
        assert np.abs(P[p] - reference).max() < RTOL * scale
        np.testing.assert_array_equal(P[p], P[p].T)
        assert np.linalg.eigvalsh(P[p]).min() >= -1e-14 * scale


def test_prior_reference_reduction_matches_plain_double_integral():
    X, xt, _, V, s2 = CASES["moderate-2d-M4"]
    one_d = _as_float(ref.ig_prior(X[0], xt, V[:2], s2, dps=15))
    two_d = _as_float(ref.ig_prior_2d(X[0], xt, V[:2], s2, dps=15))
    np.testing.assert_allclose(one_d, two_d, rtol=1e-10, atol=1e-12 * np.abs(two_d).max())


def test_exactly_at_baseline_everything_is_zero():
    X, xt, Z, V, s2 = CASES["near-baseline-1e-08"]
    kernel = RandomFeatureKernel(V, s2)
    at = np.stack([xt, xt])
    assert np.all(kernel.integrated_gradient_cross(at, xt, Z) == 0.0)
    assert np.all(kernel.integrated_gradient_prior(at, xt) == 0.0)


def test_orthogonal_frequency_uses_the_errata_limit():
    # With v_0 . u = 0 exactly, the first frequency contributes u_i v_0i cos(v_0 . xt) (sine
    # feature) and -u_i v_0i sin(v_0 . xt) (cosine feature): check against the single-frequency
    # kernel's reference.
    X, xt, Z, V, s2 = CASES["orthogonal-frequency"]
    assert V[0] @ (X[0] - xt) == 0.0
    single = RandomFeatureKernel(V[:1], s2)
    A = single.integrated_gradient_cross(X[:1], xt, Z)[0]
    u, v = X[0] - xt, V[0]
    limit = s2 * np.outer(u * v, np.sin(Z @ v - v @ xt))  # (D, n)
    np.testing.assert_allclose(A, limit, rtol=1e-14, atol=1e-15)
    reference = _as_float([ref.ig_cross(X[0], xt, z, V[:1], s2) for z in Z]).T
    np.testing.assert_allclose(A, reference, rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("case", sorted(CASES))
def test_completeness_of_cross_and_prior_against_mpmath_kernel(case):
    X, xt, Z, V, s2 = CASES[case]
    kernel = RandomFeatureKernel(V, s2)
    A = kernel.integrated_gradient_cross(X, xt, Z)
    P = kernel.integrated_gradient_prior(X, xt)
    for p in range(X.shape[0]):
        for n, z in enumerate(Z):
            target = float(ref.rf_kernel(X[p], z, V, s2) - ref.rf_kernel(xt, z, V, s2))
            assert abs(A[p, :, n].sum() - target) <= 1e-13 * s2
        variance = float(
            ref.rf_kernel(X[p], X[p], V, s2)
            + ref.rf_kernel(xt, xt, V, s2)
            - 2 * ref.rf_kernel(X[p], xt, V, s2)
        )
        assert abs(P[p].sum() - variance) <= 1e-13 * s2 + 1e-10 * variance


def test_kernel_values_match_mpmath_and_diag_is_variance():
    X, xt, Z, V, s2 = CASES["moderate-3d-M5"]
    kernel = RandomFeatureKernel(V, s2)
    K = kernel(X, Z)
    reference = _as_float([[ref.rf_kernel(x, z, V, s2) for z in Z] for x in X])
    np.testing.assert_allclose(K, reference, rtol=1e-13, atol=1e-15)
    np.testing.assert_array_equal(kernel.diag(X), np.full(len(X), s2))
    np.testing.assert_allclose(np.diag(kernel(X, X)), s2, rtol=1e-14)


def test_sinc():
    h = np.array([0.0, 1e-300, 1e-8, 0.5, -3.0])
    np.testing.assert_array_equal(sinc(h)[:2], [1.0, 1.0])
    np.testing.assert_allclose(sinc(h)[2:], [1 - 1e-16 / 6, np.sin(0.5) / 0.5, np.sin(3) / 3])


# -- spectral density of the ARD squared exponential --------------------------------------
def test_from_rbf_frequencies_have_the_se_spectral_covariance():
    lengthscale = np.array([0.5, 2.0, 4.0])
    M = 40000
    kernel = RandomFeatureKernel.from_rbf(RBF(lengthscale, 1.7), M, random_state=11)
    V = kernel.frequencies
    assert V.shape == (M, 3) and kernel.variance == 1.7
    # v ~ N(0, diag(l)^-2): the sample second moment of each coordinate has relative standard
    # deviation sqrt(2 / M); allow 5 of them.
    second = np.mean(V * V, axis=0) * lengthscale**2
    assert np.all(np.abs(second - 1.0) < 5 * np.sqrt(2.0 / M))
    # The random-feature kernel is a Monte Carlo estimate of the RBF kernel: each term
    # cos(v . r) has variance (1 + k(2r)) / 2 - k(r)^2 (unit variance); 5 standard errors.
    rng = np.random.default_rng(0)
    X, Z = rng.normal(size=(4, 3)), rng.normal(size=(5, 3))
    exact = RBF(lengthscale, 1.0)(X, Z)
    doubled = RBF(lengthscale / 2, 1.0)(X, Z)
    standard_error = np.sqrt(((1 + doubled) / 2 - exact**2) / M)
    approx = RandomFeatureKernel(V, 1.0)(X, Z)
    assert np.all(np.abs(approx - exact) < 5 * standard_error + 1e-12)


def test_from_rbf_is_seeded_and_respects_infinite_lengthscale():
    rbf = RBF([1.0, np.inf, 0.3], 2.0)
    a = RandomFeatureKernel.from_rbf(rbf, 10, random_state=3)
    b = RandomFeatureKernel.from_rbf(rbf, 10, random_state=3)
    c = RandomFeatureKernel.from_rbf(rbf, 10, random_state=4)
    np.testing.assert_array_equal(a.frequencies, b.frequencies)
    assert not np.array_equal(a.frequencies, c.frequencies)
    assert np.all(a.frequencies[:, 1] == 0.0)
    iso = RandomFeatureKernel.from_rbf(RBF(0.7), 5, n_features=4)
    assert iso.frequencies.shape == (5, 4)


# -- through the explanation pipeline -------------------------------------------------------
def _problem(seed=5, n=25, d=3, M=15):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.sin(2 * X[:, 0]) + X[:, 1] * X[:, 2] + 0.1 * rng.normal(size=n)
    kernel = RandomFeatureKernel.from_rbf(RBF([0.8, 1.2, 2.0][:d], 1.5), M, random_state=seed)
    return X, y, kernel, rng.normal(size=(4, d))


def test_torch_kernel_matches_numpy_values():
    X, _, kernel, Xq = _problem()
    module = kernel.torch_kernel(X.shape[1])
    values = module(torch.as_tensor(Xq), torch.as_tensor(X)).to_dense().detach().numpy()
    np.testing.assert_allclose(values, kernel(Xq, X), rtol=1e-13, atol=1e-14)
    diag = module(torch.as_tensor(Xq), torch.as_tensor(X[:4]), diag=True).detach().numpy()
    np.testing.assert_allclose(diag, np.diag(kernel(Xq, X[:4])), rtol=1e-13, atol=1e-14)


def test_closed_form_agrees_with_autograd_quadrature():
    X, y, kernel, Xq = _problem()
    posterior = ExactPosterior(X, y, kernel, noise=0.05, mean=0.1)
    closed = integrated_gradients(posterior, Xq, "mean")
    numeric = integrated_gradients(posterior, Xq, "mean", method="quadrature", n_steps=48)
    scale = np.abs(closed.mean).max()
    np.testing.assert_allclose(closed.mean, numeric.mean, rtol=0, atol=1e-11 * scale)
    cov_scale = np.abs(closed.cov).max()
    np.testing.assert_allclose(closed.cov, numeric.cov, rtol=0, atol=1e-11 * cov_scale)
    mean_only = integrated_gradients(posterior, Xq, "mean", return_cov=False)
    np.testing.assert_allclose(mean_only.mean, closed.mean, rtol=0, atol=1e-12 * scale)


def test_attributions_are_complete():
    X, y, kernel, Xq = _problem()
    attribution = integrated_gradients(ExactPosterior(X, y, kernel, noise=0.05), Xq, "median")
    gaps = attribution.completeness_gap()
    assert gaps["mean"] < 1e-12 * np.abs(attribution.mean).max()
    assert gaps["variance"] < 1e-12 * kernel.variance


def test_affine_rescaling_of_inputs_leaves_attributions_unchanged():
    # x' = a x + b with frequencies V / a is the same kernel (shift invariance): IG must agree.
    X, y, kernel, Xq = _problem()
    scale, shift = np.array([10.0, 0.01, 3.0]), np.array([-5.0, 100.0, 0.5])
    original = integrated_gradients(ExactPosterior(X, y, kernel, noise=0.05), Xq, "mean")
    moved = RandomFeatureKernel(kernel.frequencies / scale, kernel.variance)
    transformed = integrated_gradients(
        ExactPosterior(X * scale + shift, y, moved, noise=0.05), Xq * scale + shift, "mean"
    )
    np.testing.assert_allclose(transformed.mean, original.mean, rtol=0, atol=1e-9)
    np.testing.assert_allclose(transformed.cov, original.cov, rtol=0, atol=1e-9)


def test_zero_frequency_column_is_a_dummy_feature():
    X, y, kernel, Xq = _problem()
    V = kernel.frequencies.copy()
    V[:, 2] = 0.0
    attribution = integrated_gradients(
        ExactPosterior(X, y, RandomFeatureKernel(V, 1.5), noise=0.05), Xq, "mean"
    )
    assert np.all(attribution.mean[:, 2] == 0.0)
    assert np.all(attribution.cov[:, 2, :] == 0.0) and np.all(attribution.cov[:, :, 2] == 0.0)


# -- errors -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "frequencies, variance, message",
    [
        (np.ones(3), 1.0, "2-D"),
        (np.ones((0, 2)), 1.0, "2-D"),
        (np.array([[1.0, np.nan]]), 1.0, "finite"),
        (np.ones((2, 2)), 0.0, "variance"),
        (np.ones((2, 2)), np.inf, "variance"),
    ],
)
def test_bad_constructor_arguments(frequencies, variance, message):
    with pytest.raises(ValueError, match=message):
        RandomFeatureKernel(frequencies, variance)


def test_bad_from_rbf_arguments():
    with pytest.raises(TypeError, match="RBF"):
        RandomFeatureKernel.from_rbf("rbf", 5)
    with pytest.raises(ValueError, match="n_frequencies"):
        RandomFeatureKernel.from_rbf(RBF([1.0, 2.0]), 0)
    with pytest.raises(ValueError, match="n_features"):
        RandomFeatureKernel.from_rbf(RBF(1.0), 5)
    with pytest.raises(ValueError, match="lengthscales"):
        RandomFeatureKernel.from_rbf(RBF([1.0, 2.0]), 5, n_features=3)


def test_bad_shapes_are_named():
    kernel = RandomFeatureKernel(np.ones((2, 3)))
    with pytest.raises(ValueError, match=r"X must have shape \(n, 3\)"):
        kernel(np.ones((2, 2)), np.ones((2, 3)))
    with pytest.raises(ValueError, match="baseline must have 3 values"):
        kernel.integrated_gradient_prior(np.ones((2, 3)), np.ones(2))
    with pytest.raises(ValueError, match="3 dimensions"):
        kernel.torch_kernel(4)
