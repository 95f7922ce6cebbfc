"""AdditiveGPRegressor on a real data set (auto-mpg): finite, sensible, unit-consistent."""

from __future__ import annotations

import numpy as np
import pytest

from gpexplain.explain.shapley import global_shapley_values, shapley_values
from gpexplain.kernels.measures import Empirical, Gaussian
from gpexplain.kernels.orthogonal_additive import OrthogonalAdditive
from gpexplain.models.additive_gp_regressor import AdditiveGPRegressor
from tests.reference.monte_carlo import variance_with_standard_error


@pytest.fixture(scope="module")
def auto_mpg(data_dir):
    data = np.loadtxt(data_dir / "auto_mpg" / "autompg.txt")
    data = data[np.isfinite(data).all(axis=1)]  # 6 rows miss horsepower
    rng = np.random.default_rng(0)
    rows = rng.choice(len(data), size=120, replace=False)
    return data[rows, 1:], data[rows, 0]


@pytest.mark.parametrize("measure", ["gaussian", "empirical"])
def test_fit_on_auto_mpg_gives_finite_sensible_explanations(auto_mpg, measure):
    X, y = auto_mpg
    model = AdditiveGPRegressor(max_order=2, measure=measure, n_restarts=0, max_iter=40).fit(X, y)
    assert isinstance(model.kernel_, OrthogonalAdditive)
    assert isinstance(model.measure_, Gaussian if measure == "gaussian" else Empirical)
    assert model.order_variances_.shape == (3,) and model.lengthscale_.shape == (7,)
    residual = y - model.predict(X)
    assert 1 - residual.var() / y.var() > 0.8  # the published OAK fits mpg well
    mean, std = model.predict(X[:5], return_std=True)
    assert np.all(np.isfinite(mean)) and np.all(std > 0)
    attribution = shapley_values(model, X[:10])
    gaps = attribution.completeness_gap()
    assert gaps["mean"] < 1e-8 * y.std() and gaps["variance"] < 1e-8 * y.var()
    assert np.all(np.isfinite(attribution.cov))
    result = global_shapley_values(model)
    assert result.values.sum() == pytest.approx(result.total_variance, rel=1e-9)
    assert 0 < result.total_variance < 2 * y.var()
    # The sum above shares its moment matrices with the total; the total itself against
    # Monte Carlo of Var_p m under the fitted product measure (z-score below 5).
    rng = np.random.default_rng(3)
    if measure == "gaussian":
        draws = model.measure_.mean + model.measure_.std * rng.normal(size=(20000, X.shape[1]))
    else:  # product of the empirical marginals: each column drawn on its own
        atoms = model.measure_.points
        draws = atoms[rng.integers(len(atoms), size=(20000, X.shape[1])),
                      np.arange(X.shape[1])]
    variance, standard_error = variance_with_standard_error(model.predict(draws))
    assert abs(result.total_variance - variance) < 5 * standard_error
    assert np.all(result.values >= 0)


def test_affine_rescaling_of_inputs_leaves_explanations_unchanged(auto_mpg):
    X, y = auto_mpg
    X, y = X[:60], y[:60]
    scale, shift = np.array([1.0, 0.01, 10.0, 1e-3, 2.0, 1.0, 5.0]), np.arange(7.0)
    fits = [
        AdditiveGPRegressor(max_order=2, n_restarts=0, max_iter=30).fit(Xt, y)
        for Xt in (X, X * scale + shift)
    ]
    a, b = (shapley_values(f, Xt[:5]) for f, Xt in zip(fits, (X, X * scale + shift), strict=True))
    np.testing.assert_allclose(b.mean, a.mean, rtol=1e-5, atol=1e-6 * y.std())
    np.testing.assert_allclose(fits[1].lengthscale_, fits[0].lengthscale_ * scale, rtol=1e-5)


def test_optimizer_none_keeps_start_and_constant_columns_are_ignored():
    rng = np.random.default_rng(1)
    X = np.column_stack([rng.normal(size=30), np.full(30, 2.0), rng.normal(size=30)])
    y = X[:, 0] + 0.1 * rng.normal(size=30)
    with pytest.warns(UserWarning, match="constant column"):
        model = AdditiveGPRegressor(optimizer=None, noise=0.05).fit(X, y)
    assert model.noise_ == pytest.approx(0.05)
    assert model.lengthscale_[1] == np.inf and model.constant_features_ == ["x1"]
    attribution = shapley_values(model, X[:4])
    assert np.all(attribution.mean[:, 1] == 0)
    np.testing.assert_allclose(
        model.posterior_.predict_mean(X), model.predict(X), atol=1e-12
    )


def test_parameter_validation():
    X, y = np.random.default_rng(0).normal(size=(10, 2)), np.zeros(10)
    for kwargs, message in [
        ({"measure": "uniform"}, "unknown measure"),
        ({"optimizer": "adam"}, "unknown optimizer"),
        ({"max_order": 0}, "max_order"),
        ({"n_restarts": -1}, "n_restarts"),
        ({"noise": -1.0}, "noise"),
    ]:
        with pytest.raises(ValueError, match=message):
            AdditiveGPRegressor(**kwargs).fit(X, y)
