"""``gx.SparseGPRegressor`` on a 2-D y (issue 24): one independent SVGP per column, each equal
to the single-output fit of that column with the same settings (the same seed), through every
explanation, the covariance across points and ``global_sensitivity``; predictions' shapes and
save/load."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import gpexplain as gx

SETTINGS = {"n_inducing": 12, "batch_size": 20, "n_epochs": 15, "learning_rate": 0.05,
            "random_state": 3}
OUTPUTS = ["sine", "bowl"]


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.uniform(-2, 2, size=(40, 3)), columns=["a", "b", "c"])
    Y = pd.DataFrame({"sine": np.sin(X.a) + 0.05 * rng.normal(size=40),
                      "bowl": 10 + X.b**2 + 0.5 * X.a * X.b})
    return X, Y


@pytest.fixture(scope="module")
def fits(data):
    """The model of both columns, and each column's single-output fit."""
    X, Y = data
    both = gx.SparseGPRegressor(**SETTINGS).fit(X, Y)
    alone = {name: gx.SparseGPRegressor(**SETTINGS).fit(X, Y[name]) for name in OUTPUTS}
    return both, alone


def _close(result, reference):
    """Means and covariances equal to 1e-10 of their scale."""
    for mine, theirs in ((result.mean, reference.mean), (result.cov, reference.cov)):
        np.testing.assert_allclose(mine, theirs, rtol=0, atol=1e-10 * np.abs(theirs).max())


def test_each_output_is_the_single_output_fit(data, fits, tmp_path):
    X, Y = data
    both, alone = fits
    assert isinstance(both.posterior_, gx.IndependentOutputs)
    assert both.output_names_ == OUTPUTS and len(both.estimators_) == 2
    assert both.noise_.shape == both.mean_.shape == (2,)
    assert both.inducing_points_.shape == (2, 12, 3) and both.elbo_history_.shape == (2, 15)
    assert isinstance(both.kernel_, list) and len(both.gpytorch_model_) == 2
    mean, std = both.predict(X[:5], return_std=True, noisy=True)
    assert mean.shape == std.shape == (5, 2)
    for j, name in enumerate(OUTPUTS):
        reference = alone[name]
        np.testing.assert_array_equal(mean[:, j], reference.predict(X[:5]))
        np.testing.assert_array_equal(
            std[:, j], reference.predict(X[:5], return_std=True, noisy=True)[1])
        np.testing.assert_array_equal(both.inducing_points_[j], reference.inducing_points_)
        assert both.noise_[j] == reference.noise_
    gx.save(both, tmp_path / "model")
    loaded = gx.load(tmp_path / "model", expected=gx.SparseGPRegressor)
    np.testing.assert_array_equal(loaded.predict(X[:5]), mean)
    # the training-time GPyTorch modules are not saved, at the top or in each output's fit
    assert loaded.gpytorch_model_ is None
    assert all(e.gpytorch_model_ is None for e in loaded.estimators_)
    np.testing.assert_array_equal(
        gx.integrated_gradients(loaded, X[:2])["bowl"].cov,
        gx.integrated_gradients(both, X[:2])["bowl"].cov)


EXPLAINERS = {
    "integrated_gradients": lambda m, X, **kw: gx.integrated_gradients(m, X, **kw),
    "gradients": lambda m, X, **kw: gx.gradients(m, X, **kw),
    "shapley_values": lambda m, X, **kw: gx.shapley_values(m, X, baseline="mean", **kw),
}


@pytest.mark.parametrize("method", sorted(EXPLAINERS))
def test_every_explanation_of_each_output_equals_the_single_output_one(data, fits, method):
    X, _ = data
    both, alone = fits
    explain = EXPLAINERS[method]
    result = explain(both, X[:4])
    assert result.independent and result.mean.shape == (4, 2, 3)
    assert np.all(result.output_cov(0, 1) == 0.0)  # by the model, not computed
    for name in OUTPUTS:
        _close(result[name], explain(alone[name], X[:4]))


def test_interactions_covariance_across_points_and_global_sensitivity(data, fits):
    X, _ = data
    both, alone = fits
    interactions = gx.shapley_interactions(both, X[:2], outputs="bowl")
    _close(interactions["bowl"], gx.shapley_interactions(alone["bowl"], X[:2]))
    result = gx.integrated_gradients(both, X[:4], return_cov="points")
    for name in OUTPUTS:
        reference = gx.integrated_gradients(alone[name], X[:4], return_cov="points")
        expected = reference.point_cov.dense()
        np.testing.assert_allclose(result[name].point_cov.dense(), expected, rtol=0,
                                   atol=1e-10 * np.abs(expected).max())
    sensitivity = gx.global_sensitivity(both)
    for name in OUTPUTS:
        reference = gx.global_sensitivity(alone[name])
        for field in ("shapley_effects", "total_std", "first_order"):
            np.testing.assert_allclose(getattr(sensitivity[name], field),
                                       getattr(reference, field), rtol=1e-10, atol=1e-14)
