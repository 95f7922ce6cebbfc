"""ExactPosterior against scikit-learn's GaussianProcessRegressor at fixed hyperparameters."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF as SkRBF
from sklearn.gaussian_process.kernels import ConstantKernel

from gpexplain import ExactPosterior
from gpexplain.kernels import RBF

LENGTHSCALE = np.array([0.7, 1.6, 2.5])
VARIANCE = 1.7
NOISE = 0.05


def _data(seed=0, n=40, d=3):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    y = np.sin(2.0 * X[:, 0]) + 0.5 * X[:, 1] ** 2 - 0.3 * X[:, -1] + 0.1 * rng.normal(size=n)
    return X, y


def _sklearn(X, y, lengthscale=LENGTHSCALE, variance=VARIANCE, noise=NOISE):
    kernel = ConstantKernel(variance, "fixed") * SkRBF(lengthscale, "fixed")
    model = GaussianProcessRegressor(kernel=kernel, alpha=noise, optimizer=None, normalize_y=False)
    return model.fit(X, y)


def _posterior(X, y, mean=0.0, lengthscale=LENGTHSCALE, variance=VARIANCE, noise=NOISE):
    return ExactPosterior(X, y, RBF(lengthscale=lengthscale, variance=variance), noise, mean=mean)


def _assert_close(actual, expected, tol, scale=None):
    scale = float(np.max(np.abs(expected))) if scale is None else scale
    np.testing.assert_allclose(actual, expected, rtol=0, atol=tol * max(scale, 1.0))


@pytest.mark.parametrize("prior_mean", [0.0, 2.3])
def test_predictions_match_sklearn(prior_mean):
    X, y = _data()
    y = y + prior_mean
    rng = np.random.default_rng(1)
    Xq = rng.normal(size=(15, 3)) * 1.5
    posterior = _posterior(X, y, mean=prior_mean)
    model = _sklearn(X, y - prior_mean)

    sk_mean, sk_std = model.predict(Xq, return_std=True)
    mean, var = posterior.predict(Xq)
    _assert_close(mean, sk_mean + prior_mean, 1e-10)
    _assert_close(var, sk_std**2, 1e-10, scale=VARIANCE)

    sk_mean_c, sk_cov = model.predict(Xq, return_cov=True)
    mean_c, cov = posterior.predict(Xq, return_cov=True)
    _assert_close(mean_c, sk_mean_c + prior_mean, 1e-10)
    _assert_close(cov, sk_cov, 1e-10, scale=VARIANCE)
    assert cov.shape == (15, 15)
    np.testing.assert_array_equal(cov, cov.T)
    _assert_close(np.diag(cov), var, 1e-10, scale=VARIANCE)


def test_isotropic_lengthscale_matches_sklearn():
    X, y = _data(seed=3, n=25, d=2)
    Xq = np.random.default_rng(4).normal(size=(6, 2))
    posterior = _posterior(X, y, lengthscale=0.9, variance=0.6, noise=0.01)
    model = _sklearn(X, y, lengthscale=0.9, variance=0.6, noise=0.01)
    sk_mean, sk_cov = model.predict(Xq, return_cov=True)
    mean, cov = posterior.predict(Xq, return_cov=True)
    _assert_close(mean, sk_mean, 1e-10)
    _assert_close(cov, sk_cov, 1e-10, scale=0.6)


def test_log_marginal_likelihood_matches_sklearn():
    X, y = _data()
    posterior = _posterior(X, y)
    model = _sklearn(X, y)
    lml = posterior.log_marginal_likelihood()
    assert lml == pytest.approx(model.log_marginal_likelihood_value_, rel=1e-9, abs=1e-9)
    assert lml == pytest.approx(
        model.log_marginal_likelihood(model.kernel_.theta), rel=1e-9, abs=1e-9
    )


def test_log_marginal_likelihood_other_hyperparameters():
    X, y = _data(seed=5)
    lengthscale, variance = np.array([1.1, 0.4, 3.0]), 0.8
    posterior = _posterior(X, y, lengthscale=lengthscale, variance=variance, noise=0.2)
    # Evaluate sklearn at theta (log-hyperparameters) of a differently-initialised model.
    model = _sklearn(X, y, lengthscale=lengthscale, variance=variance, noise=0.2)
    theta = np.log(np.r_[variance, lengthscale])
    free = ConstantKernel(1.0) * SkRBF(np.ones(3))
    free_model = GaussianProcessRegressor(kernel=free, alpha=0.2, optimizer=None).fit(X, y)
    expected = free_model.log_marginal_likelihood(theta)
    assert posterior.log_marginal_likelihood() == pytest.approx(expected, rel=1e-9, abs=1e-9)
    assert posterior.log_marginal_likelihood() == pytest.approx(
        model.log_marginal_likelihood_value_, rel=1e-9, abs=1e-9
    )


def test_difference_variance_matches_joint_covariance():
    X, y = _data()
    posterior = _posterior(X, y)
    rng = np.random.default_rng(7)
    Xq = rng.normal(size=(8, 3))
    Xq[0] = 0.2  # equal to the baseline: zero variance
    baseline = np.full(3, 0.2)
    got = posterior.difference_variance(Xq, baseline)
    assert got.shape == (8,)
    for p, x in enumerate(Xq):
        _, cov = posterior.predict(np.vstack([x, baseline]), return_cov=True)
        expected = cov[0, 0] + cov[1, 1] - 2.0 * cov[0, 1]
        assert got[p] == pytest.approx(max(expected, 0.0), abs=1e-10 * VARIANCE)
    assert got[0] == pytest.approx(0.0, abs=1e-12)


def test_nan_in_X_raises_naming_column():
    X, y = _data()
    X[4, 2] = np.nan
    with pytest.raises(ValueError, match=r"X has NaN at row .*4.*, column 'x2'"):
        _posterior(X, y)


def test_nan_in_X_message_shows_plain_row_number():
    X, y = _data()
    X[4, 2] = np.nan
    with pytest.raises(ValueError, match=r"X has NaN at row 4, column 'x2'"):
        _posterior(X, y)


def test_nan_in_dataframe_names_row_label_and_column():
    X, y = _data()
    frame = pd.DataFrame(X, columns=["age", "bmi", "dose"], index=[f"r{i}" for i in range(40)])
    frame.iloc[3, 1] = np.nan
    with pytest.raises(ValueError, match=r"NaN at row 'r3', column 'bmi'"):
        _posterior(frame, y)


def test_string_column_raises_type_error_naming_column():
    X, y = _data()
    frame = pd.DataFrame(X, columns=["age", "bmi", "dose"])
    frame["colour"] = ["red", "blue"] * 20
    with pytest.raises(TypeError, match=r"column 'colour' is not numeric"):
        ExactPosterior(frame, y, RBF(lengthscale=1.0), NOISE)


def test_y_of_wrong_length():
    X, y = _data()
    with pytest.raises(ValueError, match=r"y has 39 values but X has 40 rows"):
        _posterior(X, y[:-1])


@pytest.mark.parametrize("noise", [-0.1, np.nan, np.inf])
def test_bad_noise(noise):
    X, y = _data()
    with pytest.raises(ValueError, match=r"noise must be a finite variance >= 0"):
        _posterior(X, y, noise=noise)


def test_query_with_wrong_number_of_features():
    X, y = _data()
    posterior = _posterior(X, y)
    with pytest.raises(ValueError, match=r"X has 2 (features|columns) but .*3"):
        posterior.predict(np.zeros((4, 2)))
    with pytest.raises(ValueError, match=r"X has 4 (features|columns) but .*3"):
        posterior.difference_variance(np.zeros((4, 4)), np.zeros(3))
    frame = pd.DataFrame(np.zeros((4, 2)), columns=["x0", "x1"])
    with pytest.raises(ValueError, match=r"X has 2 features but the model was fitted on 3"):
        posterior.predict(frame)


def test_numpy_query_with_wrong_number_of_features_message():
    X, y = _data()
    posterior = _posterior(X, y)
    with pytest.raises(ValueError, match=r"X has 2 features but the model was fitted on 3"):
        posterior.predict(np.zeros((4, 2)))


def test_one_dimensional_query_is_refused():
    X, y = _data()
    posterior = _posterior(X, y)
    with pytest.raises(ValueError, match=r"must be 2-D"):
        posterior.predict(np.zeros(3))


def test_duplicated_row_without_noise_uses_jitter():
    X, y = _data(n=30)
    X = np.vstack([X, X[:5]])
    y = np.r_[y, y[:5]]
    with pytest.warns(RuntimeWarning, match=r"jitter"):
        posterior = _posterior(X, y, noise=0.0)
    assert posterior.jitter > 0.0
    assert posterior.jitter <= 1e-4 * VARIANCE
    mean, var = posterior.predict(X[:5])
    assert np.all(np.isfinite(mean)) and np.all(np.isfinite(var))
    # Interpolates (up to the tiny jitter) and has almost no variance at the training points.
    np.testing.assert_allclose(mean, y[:5], atol=1e-3)
    assert np.all(var < 1e-3)
    Xq = np.random.default_rng(2).normal(size=(5, 3))
    mean, cov = posterior.predict(Xq, return_cov=True)
    assert np.all(np.isfinite(mean)) and np.all(np.isfinite(cov))
    assert np.isfinite(posterior.log_marginal_likelihood())


def test_predict_mean_matches_predict():
    X, y = _data()
    posterior = _posterior(X, y)
    query = X[:7] + 0.3
    expected = posterior.predict(query)[0]
    np.testing.assert_allclose(posterior.predict_mean(query), expected, rtol=1e-14)


def test_dataframe_query_with_other_columns_is_refused():
    X, y = _data()
    frame = pd.DataFrame(X, columns=["a", "b", "c"])
    posterior = ExactPosterior(frame, y, RBF(LENGTHSCALE, VARIANCE), NOISE)
    posterior.predict(frame.iloc[:2])  # same columns: fine
    posterior.predict(X[:2])  # NumPy carries no names: fine
    with pytest.raises(ValueError, match=r"do not match the training features"):
        posterior.predict(frame[["b", "a", "c"]].iloc[:2])


# -- per-row noise and the jitter bound -------------------------------------------------------
def test_per_row_noise_matches_dense_formulas():
    from scipy.stats import multivariate_normal

    rng = np.random.default_rng(7)
    X, y = rng.normal(size=(12, 2)), rng.normal(size=12)
    noise = rng.uniform(0.01, 0.5, size=12)
    kernel = RBF([0.8, 1.3], 1.1)
    posterior = ExactPosterior(X, y, kernel, noise, mean=0.2)
    C = kernel(X, X) + np.diag(noise)
    np.testing.assert_allclose(posterior.alpha, np.linalg.solve(C, y - 0.2), rtol=1e-10)
    Xq = rng.normal(size=(5, 2))
    cross = kernel(Xq, X)
    mean, var = posterior.predict(Xq)
    np.testing.assert_allclose(mean, 0.2 + cross @ np.linalg.solve(C, y - 0.2), rtol=1e-10)
    expected_var = kernel.diag(Xq) - np.einsum("pn,pn->p", cross, np.linalg.solve(C, cross.T).T)
    np.testing.assert_allclose(var, expected_var, rtol=1e-9)
    np.testing.assert_allclose(
        posterior.log_marginal_likelihood(), multivariate_normal(np.full(12, 0.2), C).logpdf(y),
        rtol=1e-12,
    )
    equal = ExactPosterior(X, y, kernel, np.full(12, 0.3))
    np.testing.assert_array_equal(equal.alpha, ExactPosterior(X, y, kernel, 0.3).alpha)


@pytest.mark.parametrize(
    "noise, error, match",
    [
        (np.ones(3), ValueError, r"one entry per training row \(4\)"),
        (np.array([0.1, -0.1, 0.1, 0.1]), ValueError, "row 1"),
        (None, TypeError, "noise must be a variance"),
        ("0.1", TypeError, "noise must be a variance"),
        (-1.0, ValueError, "noise must be a finite variance >= 0"),
    ],
)
def test_bad_noise_is_named(noise, error, match):
    X = np.arange(8.0).reshape(4, 2)
    with pytest.raises(error, match=match):
        ExactPosterior(X, np.zeros(4), RBF(1.0), noise)


def test_zero_kernel_diagonal_is_refused_not_looped():
    # A linear kernel on all-zero inputs with no noise: K = 0, so no jitter relative to its
    # diagonal exists (this used to loop forever).
    import gpytorch

    X = np.zeros((3, 2))
    with pytest.raises(ValueError, match="mean diagonal is 0"):
        ExactPosterior(X, np.ones(3), gpytorch.kernels.LinearKernel(), 0.0)
