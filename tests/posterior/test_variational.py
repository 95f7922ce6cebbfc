"""VariationalPosterior: Titsias optimum = exact GP, brute-force and Monte Carlo covariance,
completeness of SVGP attributions, validation."""

from __future__ import annotations

import numpy as np
import pytest

from gpexplain.explain.integrated_gradients import integrated_gradients
from gpexplain.kernels import RBF
from gpexplain.posterior.exact import ExactPosterior
from gpexplain.posterior.variational import VariationalPosterior

LENGTHSCALE = np.array([0.6, 0.9, 1.2])
VARIANCE = 1.4
NOISE = 0.05
PRIOR_MEAN = 0.7


def _data(seed=0, n=20, d=3):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2.0, 2.0, size=(n, d))
    y = PRIOR_MEAN + np.sin(1.5 * X[:, 0]) + 0.5 * X[:, 1] * X[:, 2] + 0.1 * rng.normal(size=n)
    return X, y


def _scale(array):
    return max(float(np.max(np.abs(array))), 1.0)


def _titsias(kernel, X, y, Z, noise, prior_mean):
    """Optimal q(u) = N(m, S) of Titsias (2009), by dense solves (independent of the code).

    Sigma = (Kzz + noise^{-1} Kzx Kxz)^{-1}, S = Kzz Sigma Kzz,
    m = m0 + noise^{-1} S Kzz^{-1} Kzx (y - m0) = m0 + noise^{-1} Kzz Sigma Kzx (y - m0).
    """
    Kzz, Kzx = kernel(Z, Z), kernel(Z, X)
    inner = Kzz + Kzx @ Kzx.T / noise
    S = Kzz @ np.linalg.solve(inner, Kzz)
    m = prior_mean + Kzz @ np.linalg.solve(inner, Kzx @ (y - prior_mean)) / noise
    return m, 0.5 * (S + S.T)


@pytest.fixture(scope="module")
def titsias_setup():
    X, y = _data()
    kernel = RBF(LENGTHSCALE, VARIANCE)
    # The agreement is limited by round-off amplified by cond(Kzz); the points are spread out
    # enough that it stays small, and the test checks that it does.
    assert np.linalg.cond(kernel(X, X)) < 1e3
    m, S = _titsias(kernel, X, y, X, NOISE, PRIOR_MEAN)
    exact = ExactPosterior(X, y, kernel, NOISE, mean=PRIOR_MEAN)
    unwhitened = VariationalPosterior(X, m, S, kernel, PRIOR_MEAN, data_inputs=X)
    L = np.linalg.cholesky(kernel(X, X))
    m_v = np.linalg.solve(L, m - PRIOR_MEAN)
    S_v = np.linalg.solve(L, np.linalg.solve(L, S).T)
    whitened = VariationalPosterior(
        X, m_v, 0.5 * (S_v + S_v.T), kernel, PRIOR_MEAN, whitened=True, data_inputs=X
    )
    Xq = np.random.default_rng(5).uniform(-2.5, 2.5, size=(7, 3))
    return exact, {"unwhitened": unwhitened, "whitened": whitened}, Xq


@pytest.mark.parametrize("form", ["unwhitened", "whitened"])
def test_titsias_optimum_with_z_equal_x_is_the_exact_posterior(titsias_setup, form):
    exact, posteriors, Xq = titsias_setup
    sparse = posteriors[form]

    mean, cov = sparse.predict(Xq, return_cov=True)
    mean_e, cov_e = exact.predict(Xq, return_cov=True)
    np.testing.assert_allclose(mean, mean_e, rtol=0, atol=1e-8 * _scale(mean_e))
    np.testing.assert_allclose(cov, cov_e, rtol=0, atol=1e-8 * VARIANCE)
    _, var = sparse.predict(Xq)
    np.testing.assert_allclose(var, np.diag(cov_e), rtol=0, atol=1e-8 * VARIANCE)

    for baseline in ("mean", np.array([0.3, -0.2, 0.1])):
        attr = integrated_gradients(sparse, Xq, baseline)
        reference = integrated_gradients(exact, Xq, baseline)
        np.testing.assert_allclose(attr.baseline, reference.baseline, rtol=0, atol=1e-14)
        np.testing.assert_allclose(
            attr.mean, reference.mean, rtol=0, atol=1e-8 * _scale(reference.mean)
        )
        np.testing.assert_allclose(
            attr.cov, reference.cov, rtol=0, atol=1e-8 * _scale(reference.cov)
        )


def _random_svgp(seed=3, n_inducing=8, whitened=False, jitter=0.0):
    """An SVGP whose S is not the optimum: it exceeds Kzz in some directions (Q indefinite)."""
    rng = np.random.default_rng(seed)
    Z = rng.uniform(-2.0, 2.0, size=(n_inducing, 3))
    root = rng.normal(size=(n_inducing, n_inducing)) * 0.5
    S = root @ root.T
    m = rng.normal(size=n_inducing) + (0.0 if whitened else PRIOR_MEAN)
    X_data = rng.uniform(-2.0, 2.0, size=(50, 3))
    kernel = RBF(LENGTHSCALE, VARIANCE)
    posterior = VariationalPosterior(
        Z, m, S, kernel, PRIOR_MEAN, whitened=whitened, jitter=jitter, data_inputs=X_data
    )
    return posterior, Z, m, S, kernel


def _reference_moments(kernel, Z, m, S, jitter, whitened, Xq):
    """Mean and covariance of q(f) at Xq by dense solves (docs/errata.md form of Seitz eq. 7)."""
    Kzz = kernel(Z, Z) + jitter * np.eye(Z.shape[0])
    if whitened:  # u = m0 + L v, q(v) = N(m, S)  =>  q(u) = N(m0 + L m, L S L^T)
        L = np.linalg.cholesky(Kzz)
        m, S = PRIOR_MEAN + L @ m, L @ S @ L.T
    Kqz = kernel(Xq, Z)
    mean = PRIOR_MEAN + Kqz @ np.linalg.solve(Kzz, m - PRIOR_MEAN)
    middle = np.linalg.solve(Kzz, np.linalg.solve(Kzz, Kzz - S).T)
    return mean, kernel(Xq, Xq) - Kqz @ middle @ Kqz.T, (m, S, Kzz)


@pytest.mark.parametrize("whitened", [False, True])
def test_moments_match_dense_reference(whitened):
    posterior, Z, m, S, kernel = _random_svgp(whitened=whitened, jitter=1e-6)
    Xq = np.random.default_rng(8).uniform(-2.5, 2.5, size=(9, 3))
    mean_ref, cov_ref, _ = _reference_moments(kernel, Z, m, S, 1e-6, whitened, Xq)
    mean, cov = posterior.predict(Xq, return_cov=True)
    np.testing.assert_allclose(mean, mean_ref, rtol=0, atol=1e-9 * _scale(mean_ref))
    np.testing.assert_allclose(cov, cov_ref, rtol=0, atol=1e-9 * _scale(cov_ref))
    # Off-diagonal blocks: quadratic_form(left, right) against left Q right^T densely.
    A = kernel(Xq[:4], Z)[None]
    B = kernel(Xq[4:], Z)[None]
    Kzz = kernel(Z, Z) + 1e-6 * np.eye(Z.shape[0])
    S_u = _reference_moments(kernel, Z, m, S, 1e-6, whitened, Xq)[2][1]
    Q = np.linalg.solve(Kzz, np.linalg.solve(Kzz, Kzz - S_u).T)
    np.testing.assert_allclose(
        posterior.quadratic_form(A, B), A @ Q @ np.swapaxes(B, 1, 2), rtol=0, atol=1e-9
    )


@pytest.mark.parametrize("whitened", [False, True])
def test_covariance_by_monte_carlo(whitened):
    """Sample u ~ q(u), then f | u ~ p(f | u); compare empirical moments, |z| < 5."""
    posterior, Z, m, S, kernel = _random_svgp(whitened=whitened)
    Xq = np.random.default_rng(9).uniform(-2.0, 2.0, size=(3, 3))
    m_u, S_u, Kzz = _reference_moments(kernel, Z, m, S, 0.0, whitened, Xq)[2]
    rng = np.random.default_rng(21)
    n_samples = 200_000
    u = rng.multivariate_normal(m_u, S_u, size=n_samples, method="eigh")
    Kqz = kernel(Xq, Z)
    projection = np.linalg.solve(Kzz, Kqz.T).T
    conditional_cov = kernel(Xq, Xq) - projection @ Kqz.T
    f = (
        PRIOR_MEAN
        + (u - PRIOR_MEAN) @ projection.T
        + rng.multivariate_normal(np.zeros(3), conditional_cov, size=n_samples, method="eigh")
    )
    mean, cov = posterior.predict(Xq, return_cov=True)
    sample_mean = f.mean(0)
    sample_cov = np.cov(f, rowvar=False)
    z_mean = (sample_mean - mean) / np.sqrt(np.diag(cov) / n_samples)
    # Standard error of a Gaussian sample covariance: sqrt((c_ii c_jj + c_ij^2) / n).
    standard_error = np.sqrt((np.outer(np.diag(cov), np.diag(cov)) + cov**2) / n_samples)
    z_cov = (sample_cov - cov) / standard_error
    assert np.max(np.abs(z_mean)) < 5.0
    assert np.max(np.abs(z_cov)) < 5.0


@pytest.mark.parametrize("whitened", [False, True])
def test_svgp_attributions_are_complete(whitened):
    posterior, *_ = _random_svgp(whitened=whitened, jitter=1e-6)
    Xq = np.random.default_rng(4).uniform(-2.0, 2.0, size=(6, 3))
    attr = integrated_gradients(posterior, Xq, "mean")
    np.testing.assert_allclose(attr.baseline, posterior.data_inputs.mean(0), rtol=0, atol=0)
    gaps = attr.completeness_gap()
    assert gaps["mean"] < 1e-10 * _scale(attr.prediction)
    assert gaps["variance"] < 1e-10 * _scale(attr.difference_variance)
    # The reference Var[f(x) - f(xt)] from the joint predictive covariance.
    for row in range(Xq.shape[0]):
        _, cov = posterior.predict(np.vstack([Xq[row], attr.baseline]), return_cov=True)
        difference = cov[0, 0] + cov[1, 1] - 2.0 * cov[0, 1]
        assert abs(attr.cov[row].sum() - difference) < 1e-9 * max(difference, 1.0)


def test_quadrature_agrees_with_closed_form_for_svgp():
    posterior, *_ = _random_svgp()
    Xq = np.random.default_rng(6).uniform(-2.0, 2.0, size=(3, 3))
    closed = integrated_gradients(posterior, Xq, "mean")
    numeric = integrated_gradients(posterior, Xq, "mean", method="quadrature", n_steps=48)
    np.testing.assert_allclose(numeric.mean, closed.mean, rtol=0, atol=1e-7)
    np.testing.assert_allclose(numeric.cov, closed.cov, rtol=0, atol=1e-6)


def test_missing_data_inputs_warns_and_uses_inducing_points():
    Z = np.random.default_rng(0).normal(size=(5, 3))
    with pytest.warns(UserWarning, match="data_inputs"):
        posterior = VariationalPosterior(Z, np.zeros(5), np.eye(5), RBF(LENGTHSCALE))
    np.testing.assert_array_equal(posterior.data_inputs, Z)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"variational_mean": np.zeros(4)}, "variational_mean must have shape"),
        ({"variational_covariance": np.eye(4)}, "variational_covariance must have shape"),
        ({"variational_covariance": np.triu(np.ones((5, 5)))}, "must be symmetric"),
        ({"variational_covariance": -np.eye(5)}, "positive semi-definite"),
        ({"variational_mean": np.full(5, np.nan)}, "variational_mean has non-finite"),
        ({"jitter": -1.0}, "jitter must be"),
        ({"mean": np.inf}, "mean must be a finite"),
        ({"data_inputs": np.zeros((4, 2))}, "data_inputs has 2 features"),
        ({"inducing_points": np.zeros(5)}, "inducing_points must be 2-D"),
    ],
)
def test_bad_inputs_are_named(change, message):
    arguments = {
        "inducing_points": np.random.default_rng(0).normal(size=(5, 3)),
        "variational_mean": np.zeros(5),
        "variational_covariance": np.eye(5),
        "kernel": RBF(LENGTHSCALE),
        "data_inputs": np.zeros((4, 3)),
    }
    arguments.update(change)
    with pytest.raises(ValueError, match=message):
        VariationalPosterior(**arguments)


def test_singular_psd_covariance_is_accepted():
    """A rank-deficient S (e.g. Z = X with no noise) is a valid covariance."""
    Z = np.random.default_rng(0).normal(size=(5, 3))
    vector = np.arange(1.0, 6.0)
    posterior = VariationalPosterior(
        Z, np.zeros(5), np.outer(vector, vector), RBF(LENGTHSCALE), data_inputs=Z
    )
    root = posterior.variational_root
    np.testing.assert_allclose(root @ root.T, np.outer(vector, vector), atol=1e-12)
