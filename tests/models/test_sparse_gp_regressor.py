"""SparseGPRegressor: agreement with its own GPyTorch model, with the exact GP, the closed-form
q(u) optimum, explanations, validation."""

from __future__ import annotations

import gpytorch
import numpy as np
import pytest
import torch
from sklearn.base import clone
from sklearn.datasets import load_diabetes

from gpexplain.explain.integrated_gradients import integrated_gradients
from gpexplain.kernels import RBF
from gpexplain.models import FitError, GPRegressor
from gpexplain.models.sparse_gp_regressor import SparseGPRegressor
from gpexplain.posterior.exact import ExactPosterior
from gpexplain.posterior.variational import VariationalPosterior

SETTINGS = {"n_inducing": 40, "batch_size": 100, "n_epochs": 60, "learning_rate": 0.05}


@pytest.fixture(scope="module")
def diabetes_split():
    X, y = load_diabetes(return_X_y=True, as_frame=True)
    order = np.random.default_rng(0).permutation(len(X))
    train, test = order[:300], order[300:]
    return X.iloc[train], y.iloc[train], X.iloc[test], y.iloc[test]


@pytest.fixture(scope="module")
def fitted(diabetes_split):
    X, y, _, _ = diabetes_split
    return SparseGPRegressor(**SETTINGS).fit(X, y)


def _rmse(model, X, y):
    return float(np.sqrt(np.mean((model.predict(X) - np.asarray(y)) ** 2)))


def test_held_out_rmse_comparable_to_exact_gp(diabetes_split, fitted):
    """Diabetes, 300 training / 142 held-out rows: within 10% of the exact GP's RMSE."""
    X, y, X_test, y_test = diabetes_split
    exact = GPRegressor(n_restarts=0).fit(X, y)
    sparse_rmse, exact_rmse = _rmse(fitted, X_test, y_test), _rmse(exact, X_test, y_test)
    assert sparse_rmse < 1.1 * exact_rmse
    assert sparse_rmse < 0.8 * float(np.std(y_test))  # better than predicting the mean
    assert np.all(np.diff(fitted.elbo_history_[-10:]) > -0.05)  # settled, not oscillating
    assert fitted.elbo_history_[-1] > fitted.elbo_history_[0]


def test_posterior_matches_gpytorch_model_in_original_units(diabetes_split, fitted):
    """Latent mean and variance of the trained GPyTorch model, un-standardised in the test."""
    X, y, X_test, _ = diabetes_split
    x_mean, x_std = X.to_numpy().mean(0), X.to_numpy().std(0)
    y_mean, y_std = float(np.mean(y)), float(np.std(y))
    model = fitted.gpytorch_model_.eval()
    Xs = torch.as_tensor((X_test.to_numpy() - x_mean) / x_std, dtype=torch.float64)
    with torch.no_grad(), gpytorch.settings.max_cholesky_size(10**9):
        output = model(Xs)
        mean_s, var_s = output.mean.numpy(), output.variance.numpy()
    # GPyTorch adds its jitter_val to the test points' prior variance; the latent f has none.
    jitter = model.variational_strategy.jitter_val
    expected_mean = y_mean + y_std * mean_s
    expected_var = y_std**2 * (var_s - jitter)
    mean, var = fitted.posterior_.predict(X_test)
    np.testing.assert_allclose(mean, expected_mean, rtol=0, atol=1e-8 * np.abs(expected_mean).max())
    np.testing.assert_allclose(var, expected_var, rtol=0, atol=1e-8 * expected_var.max())
    prediction, std = fitted.predict(X_test, return_std=True)
    np.testing.assert_allclose(prediction, mean, rtol=0, atol=0)
    np.testing.assert_allclose(std, np.sqrt(var), rtol=0, atol=0)
    _, noisy_std = fitted.predict(X_test, return_std=True, noisy=True)
    np.testing.assert_allclose(noisy_std**2, var + fitted.noise_, rtol=1e-12)


def test_fitted_attributes(diabetes_split, fitted):
    X, *_ = diabetes_split
    posterior = fitted.posterior_
    assert isinstance(posterior, VariationalPosterior) and posterior.whitened
    assert fitted.inducing_points_.shape == (40, X.shape[1])
    np.testing.assert_array_equal(posterior.train_inputs, fitted.inducing_points_)
    np.testing.assert_array_equal(posterior.data_inputs, X.to_numpy())
    assert posterior.kernel is fitted.kernel_ and fitted.kernel_.lengthscale.shape == (10,)
    assert fitted.feature_names_in_ == list(X.columns) == posterior.feature_names
    assert fitted.n_features_in_ == 10
    assert fitted.noise_ > 0 and np.isfinite(fitted.mean_)
    assert fitted.elbo_history_.shape == (SETTINGS["n_epochs"],)
    assert clone(fitted).get_params() == fitted.get_params()


def test_closed_form_explanations_of_the_fitted_model(diabetes_split, fitted):
    _, _, X_test, _ = diabetes_split
    attr = integrated_gradients(fitted, X_test.iloc[:5])
    np.testing.assert_allclose(
        attr.baseline, fitted.posterior_.data_inputs.mean(0), rtol=0, atol=0
    )
    gaps = attr.completeness_gap()
    assert gaps["mean"] < 1e-9 * np.abs(attr.prediction).max()
    assert gaps["variance"] < 1e-9 * max(attr.difference_variance.max(), 1.0)
    assert "closed form" in attr.method
    numeric = integrated_gradients(fitted, X_test.iloc[:2], method="quadrature", n_steps=48)
    np.testing.assert_allclose(
        numeric.mean, attr.mean[:2], rtol=0, atol=1e-7 * np.abs(attr.mean).max()
    )
    np.testing.assert_allclose(
        numeric.cov, attr.cov[:2], rtol=0, atol=1e-7 * np.abs(attr.cov).max()
    )


def test_optimizer_none_sets_the_optimal_q_and_with_all_rows_is_the_exact_gp():
    """Z = all rows and the closed-form q(u): the exact GP, up to GPyTorch's 1e-6 jitter on Kzz;
    the ELBO there is the log marginal likelihood (standardised targets)."""
    rng = np.random.default_rng(2)
    X = rng.uniform(-2, 2, size=(30, 2)) * [1.0, 10.0]
    y = 3.0 + np.sin(X[:, 0]) + 0.05 * X[:, 1] + 0.1 * rng.normal(size=30)
    kernel = RBF([0.9, 8.0], 1.2)
    model = SparseGPRegressor(
        n_inducing=30, kernel=kernel, noise=0.02, optimizer=None, inducing_init="random",
    ).fit(X, y)
    Z = model.inducing_points_
    np.testing.assert_allclose(Z[np.lexsort(Z.T)], X[np.lexsort(X.T)], rtol=1e-12)
    exact = ExactPosterior(X, y, kernel, 0.02, mean=float(np.mean(y)))
    Xq = rng.uniform(-2, 2, size=(6, 2)) * [1.0, 10.0]
    mean, var = model.posterior_.predict(Xq)
    mean_e, var_e = exact.predict(Xq)
    np.testing.assert_allclose(mean, mean_e, rtol=0, atol=1e-4)
    np.testing.assert_allclose(var, var_e, rtol=0, atol=1e-4)
    attr, reference = integrated_gradients(model, Xq), integrated_gradients(exact, Xq)
    np.testing.assert_allclose(attr.mean, reference.mean, rtol=0, atol=1e-4)
    np.testing.assert_allclose(attr.cov, reference.cov, rtol=0, atol=1e-4)
    standardised = ExactPosterior(
        (X - X.mean(0)) / X.std(0),
        (y - y.mean()) / y.std(),
        RBF(np.array([0.9, 8.0]) / X.std(0), 1.2 / y.var()),
        0.02 / y.var(),
    )
    lml = standardised.log_marginal_likelihood()
    assert model.elbo_history_.shape == (1,)
    assert abs(model.elbo_history_[0] * 30 - lml) < 1e-3 * abs(lml)


def test_constant_column_gets_zero_attribution():
    rng = np.random.default_rng(1)
    X = np.column_stack([rng.normal(size=60), np.full(60, 4.0), rng.normal(size=60)])
    y = np.sin(X[:, 0]) + X[:, 2]
    with pytest.warns(UserWarning, match="constant column"):
        model = SparseGPRegressor(n_inducing=10, n_epochs=5).fit(X, y)
    assert np.isinf(model.kernel_.lengthscale[1])
    np.testing.assert_array_equal(model.inducing_points_[:, 1], 4.0)
    assert model.constant_features_ == ["x1"]
    attr = integrated_gradients(model, X[:3], baseline=np.array([0.0, 1.0, 0.0]))
    np.testing.assert_array_equal(attr.mean[:, 1], 0.0)


def test_same_seed_same_fit():
    rng = np.random.default_rng(3)
    X, y = rng.normal(size=(50, 2)), rng.normal(size=50)
    first = SparseGPRegressor(n_inducing=8, n_epochs=3, batch_size=16).fit(X, y)
    second = SparseGPRegressor(n_inducing=8, n_epochs=3, batch_size=16).fit(X, y)
    np.testing.assert_array_equal(first.predict(X), second.predict(X))


def test_divergence_is_a_fit_error():
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(40, 2)), rng.normal(size=40)
    with pytest.raises(FitError, match="diverged"):
        SparseGPRegressor(n_inducing=5, n_epochs=5, batch_size=10, learning_rate=1e6).fit(X, y)


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"n_inducing": 51}, "n_inducing=51 exceeds the 50 training rows"),
        ({"n_inducing": 0}, "n_inducing must be a positive integer"),
        ({"batch_size": 0}, "batch_size must be a positive integer"),
        ({"batch_size": 2.5}, "batch_size must be a positive integer"),
        ({"n_epochs": -1}, "n_epochs must be a positive integer"),
        ({"learning_rate": 0.0}, "learning_rate must be a positive number"),
        ({"noise": -1.0}, "noise must be a positive finite variance"),
        ({"kernel": "matern"}, "unknown kernel"),
        ({"optimizer": "lbfgs"}, "unknown optimizer"),
        ({"inducing_init": "grid"}, "unknown inducing_init"),
        ({"optimizer": None}, "optimizer=None needs"),
    ],
)
def test_bad_parameters_are_named(params, message):
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(50, 2)), rng.normal(size=50)
    with pytest.raises(ValueError, match=message):
        SparseGPRegressor(**{"n_inducing": 10, **params}).fit(X, y)


def test_unfitted_predict_raises():
    from sklearn.exceptions import NotFittedError

    with pytest.raises(NotFittedError):
        SparseGPRegressor().predict(np.zeros((1, 2)))
