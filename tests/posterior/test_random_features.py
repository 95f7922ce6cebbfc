"""Weight-space random-feature posterior against ExactPosterior (same kernel) and mpmath."""

from __future__ import annotations

import warnings

import mpmath
import numpy as np
import pytest

from gpexplain.explain.integrated_gradients import integrated_gradients
from gpexplain.kernels.random_features import RandomFeatureKernel
from gpexplain.kernels.rbf import RBF
from gpexplain.posterior.exact import ExactPosterior
from gpexplain.posterior.random_features import RandomFeaturePosterior

TOL = 1e-9


def _problem(n, M, seed=0, d=3):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * np.array([1.0, 5.0, 0.2])[:d]
    y = np.sin(X[:, 0]) + 0.1 * X[:, 1] + 0.1 * rng.normal(size=n)
    kernel = RandomFeatureKernel.from_rbf(RBF([1.0, 4.0, 0.5][:d], 1.4), M, random_state=seed)
    return X, y, kernel, rng


# n > 2M (the complement of the feature span is non-empty) and n < 2M (it is empty).
@pytest.mark.parametrize("n, M", [(60, 10), (15, 20)])
def test_equals_exact_posterior_with_the_same_kernel(n, M):
    X, y, kernel, rng = _problem(n, M)
    exact = ExactPosterior(X, y, kernel, noise=0.03, mean=0.4)
    weight = RandomFeaturePosterior(X, y, kernel, noise=0.03, mean=0.4)
    scale = np.abs(exact.alpha).max()
    # alpha is exact's projected on the span of Phi: the rest, (I - U U^T) r / noise, is
    # orthogonal to every k(x, Z) and changes no mean (it only amplified rounding).
    in_span = weight.basis @ (weight.basis.T @ exact.alpha)
    np.testing.assert_allclose(weight.alpha, in_span, rtol=0, atol=TOL * scale)
    assert abs(weight.log_marginal_likelihood() - exact.log_marginal_likelihood()) < TOL * n

    Xq = rng.normal(size=(7, 3))
    for return_cov in (False, True):
        m_w, v_w = weight.predict(Xq, return_cov=return_cov)
        m_e, v_e = exact.predict(Xq, return_cov=return_cov)
        np.testing.assert_allclose(m_w, m_e, rtol=0, atol=TOL)
        np.testing.assert_allclose(v_w, v_e, rtol=0, atol=TOL * kernel.variance)
    np.testing.assert_allclose(
        weight.difference_variance(Xq, X.mean(0)), exact.difference_variance(Xq, X.mean(0)),
        rtol=0, atol=TOL,
    )
    # Feature-weight mean reproduces the posterior mean: m(x) = m0 + phi(x) . E[w].
    np.testing.assert_allclose(
        0.4 + kernel.features(Xq) @ weight.weight_mean, m_e, rtol=0, atol=TOL
    )

    left, right = rng.normal(size=(2, 4, n)), rng.normal(size=(2, 3, n))
    for args in ((left,), (left, right)):
        q_w, q_e = weight.quadratic_form(*args), exact.quadratic_form(*args)
        assert q_w.shape == q_e.shape
        np.testing.assert_allclose(q_w, q_e, rtol=0, atol=TOL * np.abs(q_e).max())
    gram = weight.quadratic_form(left)
    np.testing.assert_array_equal(gram, np.swapaxes(gram, -1, -2))

    a_w = integrated_gradients(weight, Xq, "mean")
    a_e = integrated_gradients(exact, Xq, "mean")
    np.testing.assert_allclose(a_w.mean, a_e.mean, rtol=0, atol=TOL)
    np.testing.assert_allclose(a_w.cov, a_e.cov, rtol=0, atol=TOL * kernel.variance)
    gaps = a_w.completeness_gap()
    assert gaps["mean"] < 1e-12 and gaps["variance"] < 1e-12


def test_quadratic_form_matches_mpmath_with_tiny_noise():
    # noise 1e-9 x variance: cond(Phi^T Phi + noise I) ~ 1e10, where the Woodbury difference
    # (I - Phi A^-1 Phi^T) / noise would lose ~10 digits. Reference: the n x n solve at 50 digits.
    X, y, kernel, rng = _problem(12, 3, seed=4)
    noise = 1e-9
    posterior = RandomFeaturePosterior(X, y, kernel, noise=noise)
    Phi = kernel.features(X)
    inside = kernel.features(rng.normal(size=(2, 3))) @ Phi.T  # rows in the span of Phi
    outside = rng.normal(size=(2, 12))
    left = np.vstack([inside, outside])
    with mpmath.workdps(50):
        gram = mpmath.matrix(Phi.tolist()) * mpmath.matrix(Phi.tolist()).T
        system = gram + noise * mpmath.eye(12)
        rows = [mpmath.matrix(row.tolist()) for row in left]
        solved = [mpmath.lu_solve(system, row) for row in rows]
        reference = np.array(
            [[float(sum(a[k] * b[k] for k in range(12))) for b in solved] for a in rows]
        )
    result = posterior.quadratic_form(left)
    for i in range(4):
        for j in range(4):
            size = np.sqrt(abs(reference[i, i] * reference[j, j]))
            assert abs(result[i, j] - reference[i, j]) < 1e-9 * size, (i, j)


def test_errors():
    X, y, kernel, _ = _problem(10, 3)
    with pytest.raises(TypeError, match="RandomFeatureKernel"):
        RandomFeaturePosterior(X, y, RBF(1.0), noise=0.1)
    with pytest.raises(ValueError, match="noise must be a positive"):
        RandomFeaturePosterior(X, y, kernel, noise=0.0)
    with pytest.raises(ValueError, match="X has 2 features"):
        RandomFeaturePosterior(X[:, :2], y, kernel, noise=0.1)
    with pytest.raises(ValueError, match="y has 9 values"):
        RandomFeaturePosterior(X, y[:9], kernel, noise=0.1)
    with pytest.raises(ValueError, match="mean must be a finite"):
        RandomFeaturePosterior(X, y, kernel, noise=0.1, mean=np.nan)


def _repeated_rows_problem(n_frequencies):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 2))
    X[30:] = X[:30]  # every row twice, as in real tables
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=60)
    kernel = RandomFeatureKernel.from_rbf(RBF([1.0, 1.0], 1.0), n_frequencies, random_state=0)
    return X, y, kernel


def test_near_zero_noise_means_match_the_weight_space_ridge_solution():
    # Issue 10, class 8. More rows than features: alpha used to carry the complement term
    # (I - U U^T) r / noise (|alpha| 2.5e11 at noise 1e-12), orthogonal to every k(x, Z) but
    # amplifying rounding: means 1e-4 off. Reference: E[w] = argmin |Phi w - r|^2 + noise |w|^2
    # by least squares on the stacked system [Phi; sqrt(noise) I] (backward-stable QR).
    X, y, kernel = _repeated_rows_problem(5)
    noise = 1e-12
    posterior = RandomFeaturePosterior(X, y, kernel, noise, mean=0.2)
    design = kernel.features(X)
    stacked = np.vstack([design, np.sqrt(noise) * np.eye(design.shape[1])])
    target = np.concatenate([y - 0.2, np.zeros(design.shape[1])])
    weights = np.linalg.lstsq(stacked, target, rcond=None)[0]
    Q = np.random.default_rng(1).normal(size=(7, 2))
    expected = 0.2 + kernel.features(Q) @ weights
    # Conditioning of the ridge problem: cond(Phi) ~ 1e2 here, so 1e-10 of y's scale is ample.
    np.testing.assert_allclose(posterior.predict_mean(Q), expected, rtol=0, atol=1e-10)
    np.testing.assert_allclose(posterior.weight_mean, weights, rtol=0,
                               atol=1e-9 * np.abs(weights).max())
    # The log marginal likelihood keeps the complement term (it is not a mean); against the
    # dense n x n Gram matrix at a noise where its Cholesky is accurate (cond ~1e5).
    noise = 1e-3
    gram = design @ design.T + noise * np.eye(len(y))
    factor = np.linalg.cholesky(gram)
    whitened = np.linalg.solve(factor, y - 0.2)
    reference = (-0.5 * whitened @ whitened - np.sum(np.log(np.diag(factor)))
                 - 0.5 * len(y) * np.log(2 * np.pi))
    posterior = RandomFeaturePosterior(X, y, kernel, noise, mean=0.2)
    np.testing.assert_allclose(posterior.log_marginal_likelihood(), reference, rtol=1e-9)


def test_unresolvable_near_zero_noise_is_warned_with_its_size():
    # More frequencies than distinct rows and noise 1e-13: C = R R^T + noise I is singular up
    # to the noise along the repeated rows; the means cannot be exact, and the warning says
    # how far off they may be (before, identical rows were predicted 4e-4 apart silently).
    X, y, kernel = _repeated_rows_problem(50)
    with pytest.warns(RuntimeWarning, match=r"exact only to about .* in the units of y"):
        RandomFeaturePosterior(X, y, kernel, 1e-13)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        RandomFeaturePosterior(X, y, kernel, 1e-2)
