"""GPRegressor: optimum quality against scikit-learn, units, standardisation, edge cases."""

import copy
import warnings

import gpytorch
import numpy as np
import pandas as pd
import pytest
import torch
from sklearn.base import clone
from sklearn.datasets import load_diabetes
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF as SkRBF
from sklearn.gaussian_process.kernels import ConstantKernel, WhiteKernel

import gpexplain as gx


@pytest.fixture(scope="module")
def diabetes():
    X, y = load_diabetes(return_X_y=True, as_frame=True)
    return X, y


@pytest.fixture(scope="module")
def fitted(diabetes):
    X, y = diabetes
    return gx.GPRegressor(kernel="ard", random_state=0).fit(X, y)


def _small_problem(seed=0, n=60):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3)) * [1.0, 5.0, 0.2] + [0.0, 10.0, -3.0]
    y = np.sin(X[:, 0]) + 0.1 * X[:, 1] + 2.0 * X[:, 2] + 0.1 * rng.normal(size=n)
    return X, y


def test_optimum_at_least_as_good_as_sklearn(diabetes, fitted):
    X, y = diabetes
    Xs = (X - X.mean()) / X.std(ddof=0)
    kernel = ConstantKernel(1.0) * SkRBF(np.ones(X.shape[1])) + WhiteKernel(0.1)
    reference = GaussianProcessRegressor(
        kernel, normalize_y=True, n_restarts_optimizer=5, random_state=0
    ).fit(Xs, y)
    assert fitted.log_marginal_likelihood_value_ >= reference.log_marginal_likelihood_value_ - 1e-6


def test_reported_lml_is_the_standardised_optimum(diabetes, fitted):
    # Recompute log N(y_s | c, K_s + noise_s I) on standardised data from the reported
    # original-unit hyperparameters: the conversion must be exact.
    X, y = diabetes
    Xv, yv = X.to_numpy(), y.to_numpy()
    y_scale = yv.std()
    kernel = gx.kernels.RBF(
        fitted.kernel_.lengthscale / Xv.std(0), fitted.kernel_.variance / y_scale**2
    )
    standard = gx.ExactPosterior(
        (Xv - Xv.mean(0)) / Xv.std(0),
        (yv - yv.mean()) / y_scale,
        kernel,
        fitted.noise_ / y_scale**2,
        mean=(fitted.mean_ - yv.mean()) / y_scale,
    )
    assert standard.log_marginal_likelihood() == pytest.approx(
        fitted.log_marginal_likelihood_value_, rel=1e-10
    )


def test_standardisation_is_harmless_for_attributions(diabetes, fitted):
    # Affine scale invariance: the same model expressed on standardised inputs/targets gives
    # the same attributions once the target scale is undone.
    X, y = diabetes
    Xv, yv = X.to_numpy(), y.to_numpy()
    mu, sd, y_mu, y_sd = Xv.mean(0), Xv.std(0), yv.mean(), yv.std()
    kernel = gx.kernels.RBF(fitted.kernel_.lengthscale / sd, fitted.kernel_.variance / y_sd**2)
    standard = gx.ExactPosterior(
        (Xv - mu) / sd,
        (yv - y_mu) / y_sd,
        kernel,
        fitted.noise_ / y_sd**2,
        mean=(fitted.mean_ - y_mu) / y_sd,
    )
    query, baseline = Xv[:15], np.median(Xv, axis=0)
    original = gx.integrated_gradients(fitted, query, baseline=baseline)
    rescaled = gx.integrated_gradients(standard, (query - mu) / sd, baseline=(baseline - mu) / sd)
    scale = np.abs(original.mean).max()
    np.testing.assert_allclose(rescaled.mean * y_sd, original.mean, atol=1e-9 * scale)
    np.testing.assert_allclose(
        rescaled.cov * y_sd**2, original.cov, atol=1e-9 * np.abs(original.cov).max()
    )


def test_refitting_on_affinely_transformed_inputs_gives_same_attributions():
    X, y = _small_problem()
    scale, shift = np.array([3.0, -0.5, 100.0]), np.array([-7.0, 2.0, 1e3])
    first = gx.GPRegressor(n_restarts=1, random_state=1).fit(X, y)
    second = gx.GPRegressor(n_restarts=1, random_state=1).fit(X * scale + shift, y)
    a = gx.integrated_gradients(first, X[:10], baseline="mean")
    b = gx.integrated_gradients(second, X[:10] * scale + shift, baseline="mean")
    np.testing.assert_allclose(b.mean, a.mean, atol=1e-6 * np.abs(a.mean).max())
    np.testing.assert_allclose(b.std, a.std, atol=1e-6 * a.std.max())


def test_predict_matches_posterior_and_noisy_adds_noise(fitted, diabetes):
    X, _ = diabetes
    mean, std = fitted.predict(X.iloc[:5], return_std=True)
    post_mean, post_var = fitted.posterior_.predict(X.iloc[:5])
    np.testing.assert_allclose(mean, post_mean)
    np.testing.assert_allclose(std**2, post_var)
    _, noisy_std = fitted.predict(X.iloc[:5], return_std=True, noisy=True)
    np.testing.assert_allclose(noisy_std**2 - std**2, fitted.noise_, rtol=1e-10)
    assert fitted.feature_names_in_ == list(X.columns)


def test_optimizer_none_keeps_given_hyperparameters():
    X, y = _small_problem()
    kernel = gx.kernels.RBF([1.0, 4.0, 0.3], variance=2.0)
    model = gx.GPRegressor(kernel=kernel, noise=0.05, optimizer=None).fit(X, y)
    np.testing.assert_allclose(model.kernel_.lengthscale, kernel.lengthscale, rtol=1e-12)
    assert model.kernel_.variance == pytest.approx(2.0, rel=1e-12)
    assert model.noise_ == pytest.approx(0.05, rel=1e-12)
    direct = gx.ExactPosterior(X, y, kernel, 0.05, mean=y.mean())
    np.testing.assert_allclose(model.predict(X[:5]), direct.predict(X[:5])[0], rtol=1e-10)


def test_isotropic_kernel_scales_with_column_std():
    X, y = _small_problem()
    model = gx.GPRegressor(kernel="isotropic", n_restarts=1).fit(X, y)
    ratio = model.kernel_.lengthscale / X.std(axis=0)
    np.testing.assert_allclose(ratio, ratio[0], rtol=1e-10)


def test_constant_column_is_ignored_with_zero_attribution():
    X, y = _small_problem()
    X = np.column_stack([X, np.full(len(X), 4.2)])
    frame = pd.DataFrame(X, columns=["a", "b", "c", "flat"])
    with pytest.warns(UserWarning, match="'flat'"):
        model = gx.GPRegressor(n_restarts=1).fit(frame, y)
    assert model.constant_features_ == ["flat"]
    assert np.isinf(model.kernel_.lengthscale[3])
    query = frame.iloc[:5].copy()
    query["flat"] = [0.0, 1.0, 2.0, 3.0, 100.0]
    attr = gx.integrated_gradients(model, query)
    assert np.all(attr.mean[:, 3] == 0.0) and np.all(attr.std[:, 3] == 0.0)
    assert attr.completeness_gap()["mean"] < 1e-9 * np.abs(y).max()


@pytest.mark.parametrize(
    ("kwargs", "X", "message"),
    [
        ({}, np.ones((1, 2)), "at least 2"),
        ({}, np.ones((5, 2)), "every column of X is constant"),
        ({"kernel": "matern"}, None, "unknown kernel 'matern'"),
        ({"optimizer": "adam"}, None, "unknown optimizer"),
        ({"optimizer": None}, None, "optimizer=None needs"),
        ({"n_restarts": -1}, None, "n_restarts"),
        ({"noise": -1.0}, None, "noise must be a positive"),
    ],
)
def test_bad_arguments_raise_clear_errors(kwargs, X, message):
    X_default, y = _small_problem()
    X = X_default if X is None else X
    with pytest.raises(ValueError, match=message):
        gx.GPRegressor(**kwargs).fit(X, y[: len(X)])


def test_unfitted_model_cannot_predict_or_explain():
    model = gx.GPRegressor()
    with pytest.raises(Exception, match="not fitted"):
        model.predict(np.zeros((1, 2)))
    with pytest.raises(ValueError, match="not fitted"):
        gx.integrated_gradients(model, np.zeros((1, 2)))


def test_sklearn_clone_and_params():
    model = gx.GPRegressor(kernel="isotropic", n_restarts=2, random_state=5)
    copy = clone(model)
    assert copy.get_params() == model.get_params()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        X, y = _small_problem()
        assert copy.fit(X, y).score(X, y) > 0.9


def test_exact_duplicate_rows_are_fitted_once():
    # Copies of (x, y) would be predicted perfectly by a vanishing lengthscale and noise,
    # which the marginal likelihood rewards without bound; they are fitted once, with a warning.
    X, y = _small_problem(n=50)
    X_dup, y_dup = np.vstack([X, X[:20]]), np.concatenate([y, y[:20]])
    with pytest.warns(UserWarning, match="20 row"):
        model = gx.GPRegressor(n_restarts=1).fit(X_dup, y_dup)
    assert model.noise_ > 1e-4 * np.var(y)
    assert np.all(model.kernel_.lengthscale > 1e-2 * X.std(axis=0))
    assert len(model.posterior_.train_targets) == 70  # the posterior keeps every row


@pytest.mark.parametrize("lengthscale", [2.0, [1.0, 4.0, 0.3, 1.0]])
def test_given_kernel_is_kept_with_a_constant_column(lengthscale):
    X, y = _small_problem()
    X = np.column_stack([X, np.full(len(X), 7.0)])
    kernel = gx.kernels.RBF(lengthscale, variance=1.5)
    with pytest.warns(UserWarning, match="constant"):
        model = gx.GPRegressor(kernel=kernel, noise=0.1, optimizer=None).fit(X, y)
    expected = np.broadcast_to(np.asarray(lengthscale, float), (4,)).copy()
    expected[3] = np.inf  # the constant column is switched off
    np.testing.assert_allclose(model.kernel_.lengthscale, expected, rtol=1e-12)
    assert model.kernel_.variance == pytest.approx(1.5, rel=1e-12)


# -- Matern, rational quadratic and user-supplied GPyTorch kernels ------------------------------
def _numpy_kernel(kind, X1, X2, lengthscale, variance, alpha=None):
    """The kernels written out in NumPy (original units), independent of GPyTorch."""
    diff = (X1[:, None, :] - X2[None, :, :]) / lengthscale
    r = np.sqrt(np.sum(diff * diff, axis=2))
    if kind == "matern52":
        return variance * (1 + np.sqrt(5) * r + 5 * r**2 / 3) * np.exp(-np.sqrt(5) * r)
    if kind == "matern32":
        return variance * (1 + np.sqrt(3) * r) * np.exp(-np.sqrt(3) * r)
    return variance * (1 + r**2 / (2 * alpha)) ** (-alpha)


def _manual_posterior_mean(kind, model, X, y, query, **hyper):
    K = _numpy_kernel(kind, X, X, **hyper) + model.noise_ * np.eye(len(X))
    cross = _numpy_kernel(kind, query, X, **hyper)
    return model.mean_ + cross @ np.linalg.solve(K, y - model.mean_)


@pytest.mark.parametrize("kind", ["matern52", "matern32", "rq"])
def test_stationary_kernels_in_original_units(kind):
    X, y = _small_problem()
    model = gx.GPRegressor(kernel=kind, n_restarts=0).fit(X, y)
    module = model.kernel_.module
    base = module.base_kernel
    assert isinstance(module, gpytorch.kernels.ScaleKernel)
    if kind == "rq":
        assert isinstance(base, gpytorch.kernels.RQKernel)
    else:
        assert base.nu == {"matern52": 2.5, "matern32": 1.5}[kind]
    hyper = {
        "lengthscale": base.lengthscale.detach().numpy().reshape(-1),
        "variance": float(module.outputscale.detach()),
    }
    if kind == "rq":
        hyper["alpha"] = float(base.alpha.detach())
    assert hyper["lengthscale"].shape == (3,)  # ARD
    query = X[:7] + 0.3
    expected = _manual_posterior_mean(kind, model, X, y, query, **hyper)
    np.testing.assert_allclose(model.predict(query), expected, rtol=0, atol=1e-9 * np.abs(y).max())
    # The reported LML is the standardised optimum: rebuild it from the original-unit values.
    xs_scale, y_scale = X.std(0), y.std()
    Xs, ys = (X - X.mean(0)) / xs_scale, (y - y.mean()) / y_scale
    std_hyper = dict(hyper, lengthscale=hyper["lengthscale"] / xs_scale,
                     variance=hyper["variance"] / y_scale**2)
    K = _numpy_kernel(kind, Xs, Xs, **std_hyper) + model.noise_ / y_scale**2 * np.eye(len(X))
    centred = ys - (model.mean_ - y.mean()) / y_scale
    sign, logdet = np.linalg.slogdet(K)
    lml = -0.5 * centred @ np.linalg.solve(K, centred) - 0.5 * logdet - 0.5 * len(X) * np.log(
        2 * np.pi
    )
    assert model.log_marginal_likelihood_value_ == pytest.approx(lml, rel=1e-9)
    # Explained by accurate quadrature.
    attr = gx.integrated_gradients(model, X[:5])
    assert "graded Gauss-Legendre" in attr.method
    gaps = attr.completeness_gap()
    assert gaps["mean"] < 1e-8 * np.abs(y).max() and gaps["variance"] < 1e-8 * y.var()


def test_stationary_kernel_refit_is_affine_invariant():
    X, y = _small_problem()
    scale, shift = np.array([3.0, -0.5, 100.0]), np.array([-7.0, 2.0, 1e3])
    first = gx.GPRegressor(kernel="matern52", n_restarts=1, random_state=1).fit(X, y)
    second = gx.GPRegressor(kernel="matern52", n_restarts=1, random_state=1).fit(
        X * scale + shift, y
    )
    a = gx.integrated_gradients(first, X[:6])
    b = gx.integrated_gradients(second, X[:6] * scale + shift)
    np.testing.assert_allclose(b.mean, a.mean, atol=1e-6 * np.abs(a.mean).max())
    np.testing.assert_allclose(b.std, a.std, atol=1e-6 * a.std.max())


def test_constant_column_with_matern_kernel():
    X, y = _small_problem()
    frame = pd.DataFrame(np.column_stack([X, np.full(len(X), 4.2)]), columns=list("abcd"))
    with pytest.warns(UserWarning, match="'d'.*ignores them"):
        model = gx.GPRegressor(kernel="matern32", n_restarts=0).fit(frame, y)
    assert model.kernel_.module.base_kernel.active_dims.tolist() == [0, 1, 2]
    query = frame.iloc[:4].copy()
    query["d"] = [0.0, 1.0, 2.0, 50.0]
    attr = gx.integrated_gradients(model, query)
    assert np.all(attr.mean[:, 3] == 0.0) and np.all(attr.std[:, 3] == 0.0)


def _user_matern():
    kernel = gpytorch.kernels.ScaleKernel(
        gpytorch.kernels.MaternKernel(
            nu=2.5,
            ard_num_dims=3,
            lengthscale_constraint=gpytorch.constraints.GreaterThan(1e-4),
        )
    ).double()
    kernel.base_kernel.lengthscale = torch.ones(1, 3, dtype=torch.float64)
    kernel.outputscale = torch.tensor(1.0, dtype=torch.float64)
    return kernel


def test_user_gpytorch_kernel_is_trained_like_the_named_one():
    X, y = _small_problem()
    user = _user_matern()
    before = user.base_kernel.lengthscale.detach().clone()
    named = gx.GPRegressor(kernel="matern52", n_restarts=0).fit(X, y)
    custom = gx.GPRegressor(kernel=user, n_restarts=0).fit(X, y)
    torch.testing.assert_close(user.base_kernel.lengthscale.detach(), before)  # not modified
    assert custom.log_marginal_likelihood_value_ == pytest.approx(
        named.log_marginal_likelihood_value_, rel=1e-8
    )
    query = X[:6] - 0.2
    np.testing.assert_allclose(custom.predict(query), named.predict(query), rtol=0, atol=1e-6)
    # Original units through the input scaling: k(x, x') = var_y k_s((x - m)/s, (x' - m)/s).
    K = custom.kernel_(query, X[:4])
    module = custom.kernel_.module.base_kernel  # the fitted standardised kernel
    with torch.no_grad():
        standard = module(
            torch.as_tensor((query - X.mean(0)) / X.std(0)),
            torch.as_tensor((X[:4] - X.mean(0)) / X.std(0)),
        ).to_dense().numpy()
    np.testing.assert_allclose(K, y.var() * standard, rtol=1e-12)
    attr = gx.integrated_gradients(custom, query)
    assert "graded Gauss-Legendre" in attr.method
    assert attr.completeness_gap()["variance"] < 1e-8 * y.var()


def test_user_sum_of_kernels_with_restarts():
    X, y = _small_problem()
    user = gpytorch.kernels.ScaleKernel(
        gpytorch.kernels.MaternKernel(nu=1.5, ard_num_dims=3)
    ) + gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel())
    model = gx.GPRegressor(kernel=user, n_restarts=2).fit(X, y)
    assert len(model.restarts_) == 3
    assert model.score(X, y) > 0.9
    attr = gx.integrated_gradients(model, X[:4])
    gaps = attr.completeness_gap()
    assert gaps["mean"] < 1e-8 * np.abs(y).max() and gaps["variance"] < 1e-8 * y.var()


def test_user_rbf_kernel_ends_up_in_closed_form():
    X, y = _small_problem()
    user = gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel(ard_num_dims=3))
    model = gx.GPRegressor(kernel=user, n_restarts=1).fit(X, y)
    assert isinstance(model.kernel_, gx.kernels.RBF)
    assert gx.integrated_gradients(model, X[:3]).method == "integrated gradients (closed form)"
    reference = gx.GPRegressor(kernel="ard", n_restarts=1).fit(X, y)
    assert model.log_marginal_likelihood_value_ == pytest.approx(
        reference.log_marginal_likelihood_value_, abs=1e-4
    )


def test_user_kernel_without_optimizer_is_used_as_given():
    X, y = _small_problem()
    user = _user_matern()
    user.base_kernel.lengthscale = torch.tensor([[1.0, 4.0, 0.3]], dtype=torch.float64)
    model = gx.GPRegressor(kernel=user, noise=0.05, optimizer=None).fit(X, y)
    direct = gx.ExactPosterior(X, y, copy.deepcopy(user), 0.05, mean=y.mean())
    np.testing.assert_allclose(model.predict(X[:5]), direct.predict(X[:5])[0], rtol=1e-10)


def test_noise_free_data_with_matern_kernel_still_fits():
    # Without noise the likelihood pushes a Matern 5/2 kernel towards a singular K and line
    # searches step into matrices that are not positive definite; each start keeps the best
    # point it evaluated instead of failing (this used to raise FitError from every start).
    rng = np.random.default_rng(0)
    X = rng.normal(size=(80, 3))
    y = np.sin(X[:, 0]) + X[:, 1] * X[:, 2]
    model = gx.GPRegressor(kernel="matern52", n_restarts=1).fit(X, y)
    assert all(entry["log_marginal_likelihood"] is not None for entry in model.restarts_)
    assert any(entry["stopped_early"] for entry in model.restarts_)
    assert model.score(X, y) > 0.9
