"""RandomFeatureGPRegressor: posterior, units, convergence to the exact GP, mixture, errors."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.base import clone

from gpexplain.explain._mixture import mixture_attribution
from gpexplain.explain.integrated_gradients import integrated_gradients
from gpexplain.kernels.rbf import RBF
from gpexplain.models.random_feature_gp_regressor import RandomFeatureGPRegressor
from gpexplain.posterior.exact import ExactPosterior
from gpexplain.posterior.mixture import MixturePosterior
from gpexplain.posterior.random_features import RandomFeaturePosterior

LENGTHSCALE = np.array([0.8, 1.5])
VARIANCE, NOISE = 1.3, 0.05


def _data(n=40, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    y = np.sin(2 * X[:, 0]) + 0.5 * X[:, 1] ** 2 + np.sqrt(NOISE) * rng.normal(size=n)
    return X, y, rng.normal(size=(5, 2))


def _given(**kwargs):
    params = dict(lengthscale=LENGTHSCALE, variance=VARIANCE, noise=NOISE, optimizer=None)
    params.update(kwargs)
    return RandomFeatureGPRegressor(**params)


def test_given_hyperparameters_build_the_posterior_of_that_kernel():
    X, y, Xq = _data()
    model = _given(n_frequencies=30).fit(X, y)
    posterior = model.posterior_
    assert isinstance(posterior, RandomFeaturePosterior)
    assert model.hyperparameter_model_ is None and model.noise_ == NOISE
    np.testing.assert_array_equal(model.kernel_.lengthscale, LENGTHSCALE)
    assert model.mean_ == pytest.approx(y.mean())
    assert posterior.kernel.frequencies.shape == (30, 2)
    exact = ExactPosterior(X, y, posterior.kernel, NOISE, mean=y.mean())
    mean, std = model.predict(Xq, return_std=True)
    exact_mean, exact_var = exact.predict(Xq)
    np.testing.assert_allclose(mean, exact_mean, rtol=0, atol=1e-10)
    np.testing.assert_allclose(std, np.sqrt(exact_var), rtol=1e-8)
    _, noisy_std = model.predict(Xq, return_std=True, noisy=True)
    np.testing.assert_allclose(noisy_std, np.sqrt(exact_var + NOISE), rtol=1e-8)
    np.testing.assert_allclose(model.predict(Xq), exact_mean, rtol=0, atol=1e-10)
    # Seeded: refitting (and cloning) gives the same frequencies; another seed differs.
    again = clone(model).fit(X, y)
    np.testing.assert_array_equal(again.posterior_.kernel.frequencies, posterior.kernel.frequencies)
    other = _given(n_frequencies=30, random_state=1).fit(X, y)
    assert not np.array_equal(other.posterior_.kernel.frequencies, posterior.kernel.frequencies)


def test_attributions_in_original_units_are_invariant_to_affine_rescaling():
    # Same seed, lengthscales scaled with the columns: the frequencies are the same standard-
    # normal draws divided by the lengthscales, so the model is the same function of the data.
    X, y, Xq = _data()
    scale, shift = np.array([100.0, 0.01]), np.array([3.0, -7.0])
    y_scale, y_shift = 4.0, 10.0
    base = _given(n_frequencies=25).fit(X, y)
    moved = _given(
        n_frequencies=25,
        lengthscale=LENGTHSCALE * scale,
        variance=VARIANCE * y_scale**2,
        noise=NOISE * y_scale**2,
    ).fit(X * scale + shift, y * y_scale + y_shift)
    a = integrated_gradients(base, Xq, "mean")
    b = integrated_gradients(moved, Xq * scale + shift, "mean")
    np.testing.assert_allclose(b.mean, y_scale * a.mean, rtol=0, atol=1e-9)
    np.testing.assert_allclose(b.cov, y_scale**2 * a.cov, rtol=0, atol=1e-9)


def test_marginalised_model_is_the_mixture_of_independent_draws():
    X, y, Xq = _data()
    model = _given(n_frequencies=20, n_models=4).fit(X, y)
    mixture = model.posterior_
    assert isinstance(mixture, MixturePosterior) and len(mixture.components) == 4
    frequencies = [c.kernel.frequencies for c in mixture.components]
    assert all(
        not np.array_equal(frequencies[i], frequencies[j])
        for i in range(4)
        for j in range(i + 1, 4)
    )
    means = [ExactPosterior(X, y, c.kernel, NOISE, mean=y.mean()).predict(Xq) for c in
             mixture.components]
    average = np.mean([m for m, _ in means], axis=0)
    total_var = np.mean([v for _, v in means], axis=0) + np.var([m for m, _ in means], axis=0)
    mean, std = model.predict(Xq, return_std=True)
    np.testing.assert_allclose(mean, average, rtol=0, atol=1e-10)
    np.testing.assert_allclose(std**2, total_var, rtol=1e-8, atol=1e-12)
    combined = mixture_attribution(
        [integrated_gradients(c, Xq, "mean") for c in mixture.components], mixture.weights
    )
    gaps = combined.completeness_gap()
    assert gaps["mean"] < 1e-12 and gaps["variance"] < 1e-12


def test_attributions_converge_to_the_exact_gp_like_one_over_sqrt_m():
    # Fixed problem and hyperparameters; root-mean-square error of the IG means and standard
    # deviations against the exact RBF GP (relative to the RMS exact attribution), averaged
    # over 6 frequency seeds. The Monte Carlo kernel error is O(1/sqrt(M)), so 100x more
    # frequencies should cut the error ~10x; we require > 5x, and < 2% error at M = 10000.
    X, y, Xq = _data(n=40)
    exact = integrated_gradients(
        ExactPosterior(X, y, RBF(LENGTHSCALE, VARIANCE), NOISE, mean=y.mean()), Xq, "mean"
    )
    scale = np.sqrt(np.mean(exact.mean**2))
    errors = {}
    for M in (100, 10000):
        mean_errors, std_errors = [], []
        for seed in range(6):
            model = _given(n_frequencies=M, random_state=seed).fit(X, y)
            attribution = integrated_gradients(model, Xq, "mean")
            mean_errors.append(np.sqrt(np.mean((attribution.mean - exact.mean) ** 2)))
            std_errors.append(np.sqrt(np.mean((attribution.std - exact.std) ** 2)))
        errors[M] = (np.mean(mean_errors) / scale, np.mean(std_errors) / scale)
    assert errors[100][0] / errors[10000][0] > 5, errors
    assert errors[100][1] / errors[10000][1] > 5, errors
    assert errors[10000][0] < 0.02 and errors[10000][1] < 0.02, errors


def test_lbfgs_takes_hyperparameters_from_an_exact_fit_on_a_subset():
    X, y, Xq = _data(n=50)
    model = RandomFeatureGPRegressor(n_frequencies=20, max_fit_samples=30).fit(X, y)
    fitted = model.hyperparameter_model_
    assert fitted.posterior_.train_inputs.shape[0] == 30
    np.testing.assert_array_equal(model.kernel_.lengthscale, fitted.kernel_.lengthscale)
    assert model.noise_ == fitted.noise_ and model.mean_ == fitted.mean_
    assert model.posterior_.train_inputs.shape[0] == 50  # the posterior uses every row
    assert np.all(np.isfinite(model.predict(Xq)))


@pytest.mark.parametrize(
    "params, message",
    [
        (dict(n_frequencies=0), "n_frequencies"),
        (dict(n_frequencies=2.5), "n_frequencies"),
        (dict(n_models=0), "n_models"),
        (dict(max_fit_samples=1), "max_fit_samples"),
        (dict(optimizer="adam"), "optimizer"),
        (dict(optimizer=None), "lengthscale, variance, noise was not given"),
        (dict(noise=-1.0), "noise must be a positive"),
        (dict(variance=0.0), "variance must be a positive"),
        (dict(optimizer=None, lengthscale=[1.0, 2.0, 3.0], variance=1.0, noise=0.1),
         "lengthscales"),
    ],
)
def test_bad_parameters(params, message):
    X, y, _ = _data(n=10)
    with pytest.raises(ValueError, match=message):
        RandomFeatureGPRegressor(**params).fit(X, y)


def test_bad_inputs_and_unfitted():
    X, y, _ = _data(n=10)
    with pytest.raises(ValueError, match="y has 9 values"):
        _given().fit(X, y[:9])
    X_bad = X.copy()
    X_bad[3, 1] = np.nan
    with pytest.raises(ValueError, match="NaN at row 3, column 'x1'"):
        _given().fit(X_bad, y)
    with pytest.raises(ValueError, match="not fitted"):
        integrated_gradients(_given(), X)
