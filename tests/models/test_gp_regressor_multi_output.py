"""``gx.GPRegressor`` on a 2-D y (issue 24): one independent GP per column, as separate fits."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import gpexplain as gx


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.uniform(-2, 2, size=(40, 2)), columns=["a", "b"])
    Y = pd.DataFrame({"sine": np.sin(X.a) + 0.05 * rng.normal(size=40), "bowl": 10 + X.b**2})
    return X, Y


def test_each_output_is_the_single_output_fit(data, tmp_path):
    X, Y = data
    model = gx.GPRegressor(n_restarts=0).fit(X, Y)
    assert isinstance(model.posterior_, gx.IndependentOutputs)
    assert model.output_names_ == ["sine", "bowl"] and model.noise_.shape == (2,)
    mean, std = model.predict(X[:5], return_std=True)
    assert mean.shape == std.shape == (5, 2)
    for j, name in enumerate(["sine", "bowl"]):
        alone = gx.GPRegressor(n_restarts=0).fit(X, Y[name])
        np.testing.assert_array_equal(mean[:, j], alone.predict(X[:5]))
        np.testing.assert_array_equal(std[:, j], alone.predict(X[:5], return_std=True)[1])
    result = gx.integrated_gradients(model, X[:3], outputs="bowl")
    assert result.independent and result.output_names == ["bowl"]
    sensitivity = gx.global_sensitivity(model, outputs="bowl")["bowl"]
    reference = gx.global_sensitivity(gx.GPRegressor(n_restarts=0).fit(X, Y["bowl"]))
    np.testing.assert_allclose(sensitivity.shapley_effects, reference.shapley_effects, rtol=1e-10)
    np.testing.assert_allclose(sensitivity.total_std, reference.total_std, rtol=1e-10)
    gx.save(model, tmp_path / "model")
    np.testing.assert_array_equal(gx.load(tmp_path / "model").predict(X[:5]), mean)


def test_array_targets_are_named_and_bad_shapes_refused(data):
    X, Y = data
    model = gx.GPRegressor(n_restarts=0, max_iter=20).fit(X.to_numpy(), Y.to_numpy())
    assert model.output_names_ == ["y0", "y1"]
    single = gx.GPRegressor(n_restarts=0, max_iter=20).fit(X, Y[["sine"]])
    assert isinstance(single.posterior_, gx.ExactPosterior)  # one column: as before
    with pytest.raises(ValueError, match="1-D or 2-D"):
        gx.GPRegressor().fit(X, Y.to_numpy()[:, :, None])


def test_icm_fit_learns_the_correlation_between_outputs(tmp_path):
    rng = np.random.default_rng(1)
    X = rng.uniform(-2, 2, size=(25, 2))
    f = np.sin(X[:, 0]) + 0.3 * X[:, 1]
    Y = np.c_[f + 0.05 * rng.normal(size=25), 50 - 20 * f + rng.normal(size=25)]
    model = gx.GPRegressor(multi_output="icm", max_iter=60).fit(X, Y)
    posterior = model.posterior_
    assert isinstance(posterior, gx.CoregionalizedPosterior)
    B = model.coregionalization_
    assert B[0, 1] / np.sqrt(B[0, 0] * B[1, 1]) < -0.9  # strongly anti-correlated outputs
    assert model.predict(X[:4]).shape == (4, 2)
    np.testing.assert_allclose(model.log_marginal_likelihood_value_,
                               posterior.log_marginal_likelihood()
                               + 25 * np.log(Y.std(0)).sum(), rtol=1e-6)
    result = gx.integrated_gradients(model, X[:3])  # complete per output (else it warns)
    assert not result.independent
    gx.save(model, tmp_path / "icm.npz")
    np.testing.assert_array_equal(gx.load(tmp_path / "icm.npz").predict(X[:4]),
                                  model.predict(X[:4]))
    with pytest.raises(ValueError, match="kernel='ard'"):
        gx.GPRegressor(multi_output="icm", kernel="matern52").fit(X, Y)


def test_icm_fit_of_a_real_table_with_repeated_rows():
    """The first 60 rows of the bundled red wine hold 4 exact repeats (on these columns):
    torch.cdist's gradient at a zero distance was NaN, the whole L-BFGS state went NaN and the
    fit crashed with torch's LinAlgError. The fitted model's likelihood is checked against the
    Gaussian log density written here with NumPy."""
    from gpexplain.datasets import load_dataset

    X, quality = load_dataset("wine-quality-red")
    X = X.iloc[:60]
    Y = pd.DataFrame({"alcohol": X["alcohol"], "quality": quality.iloc[:60]})
    X = X[["volatile acidity", "sulphates", "pH", "density"]]
    model = gx.GPRegressor(multi_output="icm", max_iter=50).fit(X, Y)
    posterior = model.posterior_
    lengthscale = posterior.kernel.lengthscale
    scaled = posterior.train_inputs / lengthscale
    distance = ((scaled[:, None, :] - scaled[None, :, :]) ** 2).sum(-1)
    tasks = posterior.train_tasks
    K = (model.coregionalization_[np.ix_(tasks, tasks)] * np.exp(-0.5 * distance)
         + np.diag(model.noise_[tasks]))
    residual = Y.to_numpy().T.reshape(-1) - model.mean_[tasks]
    sign, logdet = np.linalg.slogdet(K)
    density = -0.5 * (residual @ np.linalg.solve(K, residual) + logdet
                      + len(residual) * np.log(2 * np.pi))
    assert sign > 0
    np.testing.assert_allclose(posterior.log_marginal_likelihood(), density, rtol=1e-6)
    assert np.all(np.isfinite(model.predict(X)))


def test_icm_too_large_for_memory_is_refused_before_fitting(monkeypatch):
    # The ICM fit holds (n t) x (n t) matrices and had no size check: a large table ran out of
    # memory inside torch instead of being refused.
    import gpexplain.models._size as size

    monkeypatch.setattr(size, "available_memory", lambda: 100_000)  # bytes
    X = np.random.default_rng(2).normal(size=(40, 2))  # 80 augmented rows: 256 kB
    Y = np.c_[X[:, 0], X[:, 1]]
    with pytest.raises(ValueError, match="an exact GP on 80 rows needs"):
        gx.GPRegressor(multi_output="icm").fit(X, Y)


def test_icm_hyperparameters_stay_in_the_single_output_box():
    """40 wine rows: unbounded, the ICM fit drove lengthscales to 1e27 standard deviations
    and the noise to zero; it now keeps the single-output fit's box (lengthscales 1e-4 to 1e5
    standard deviations, noise at least 1e-6 of each standardised output's variance)."""
    X, y = gx.datasets.load_dataset("wine-quality-red")
    rows = np.random.default_rng(0).choice(len(X), 40, replace=False)
    features = X.iloc[rows].drop(columns=["alcohol"])
    Y = np.column_stack([y.iloc[rows], X.iloc[rows]["alcohol"]])
    posterior = gx.GPRegressor(multi_output="icm").fit(features, Y).posterior_
    relative = posterior.kernel.lengthscale / features.std(ddof=0).to_numpy()
    assert np.all((relative >= 1e-4 * (1 - 1e-9)) & (relative <= 1e5 * (1 + 1e-9)))
    noise = np.unique(np.round(posterior.noise, 15))
    assert np.all(noise >= 1e-6 * Y.var(0).min() * (1 - 1e-9))


def test_icm_rank_limits_the_shared_part_of_b():
    """rank=1: B = S (w w^T + diag(v)) S, so its off-diagonal entries are those of a rank-one
    matrix: B_01 B_23 = B_02 B_13 (four outputs)."""
    X, y = gx.datasets.load_dataset("wine-quality-red")
    rows = np.random.default_rng(1).choice(len(X), 50, replace=False)
    targets = ["alcohol", "pH", "density"]
    features = X.iloc[rows].drop(columns=targets)
    Y = np.column_stack([y.iloc[rows], X.iloc[rows][targets]])
    B = gx.GPRegressor(multi_output="icm", rank=1).fit(features, Y).coregionalization_
    np.testing.assert_allclose(B[0, 1] * B[2, 3], B[0, 2] * B[1, 3], rtol=1e-8)
    with pytest.raises(ValueError, match="rank must be at most the number of outputs, 4"):
        gx.GPRegressor(multi_output="icm", rank=5).fit(features, Y)
    with pytest.raises(ValueError, match="rank"):
        gx.GPRegressor(multi_output="icm", rank=0).fit(features, Y)


def test_icm_fit_survives_line_search_points_that_are_not_positive_definite():
    """A 40-row ICM fit died with torch's _LinAlgError when L-BFGS tried a point whose
    (n t) x (n t) kernel matrix rounded to indefinite; the objective now adds a jitter there,
    and the fitted model predicts the training targets as well as independent GPs."""
    rng = np.random.default_rng(2)
    X = rng.normal(size=(40, 3))
    y = np.sin(X[:, 0]) + X[:, 1]
    Y = np.column_stack([y, X[:, 0] * X[:, 2] - 0.5 * y])
    model = gx.GPRegressor(multi_output="icm").fit(X, Y)
    independent = gx.GPRegressor().fit(X, Y)
    for fitted in (model, independent):
        assert np.all(np.isfinite(fitted.predict(X)))
    icm_error = np.abs(model.predict(X) - Y).mean()
    assert icm_error <= 2 * np.abs(independent.predict(X) - Y).mean() + 0.05
