"""``Attribution.to_shap``: a ``shap.Explanation`` that shap's own plots draw, with the
uncertainty kept alongside."""

from __future__ import annotations

import matplotlib
import numpy as np
import pytest

shap = pytest.importorskip("shap")
import matplotlib.pyplot as plt  # noqa: E402

from gpexplain.explain import gradients, integrated_gradients, shapley_values  # noqa: E402
from gpexplain.kernels import RBF  # noqa: E402
from gpexplain.models import AdditiveGPRegressor  # noqa: E402
from gpexplain.posterior import ExactPosterior  # noqa: E402

matplotlib.use("Agg")
NAMES = ["alcohol", "sulphates", "pH"]


@pytest.fixture(scope="module")
def posterior():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 3)) * [1.0, 0.2, 0.3] + [10.0, 0.6, 3.3]
    y = 5.0 + 0.4 * X[:, 0] + np.sin(5 * X[:, 1]) + 0.05 * rng.normal(size=30)
    return ExactPosterior(X, y, RBF([1.0, 0.3, 0.4], 1.5), 0.01, mean=9.0, feature_names=NAMES)


def test_explanation_holds_means_base_values_data_names_and_uncertainty(posterior):
    X = posterior.train_inputs[:6]
    attr = integrated_gradients(posterior, X, baseline="mean")
    explanation = attr.to_shap(level=0.9)
    np.testing.assert_array_equal(explanation.values, attr.mean)
    np.testing.assert_array_equal(explanation.data, X)
    assert list(explanation.feature_names) == NAMES
    # Independent of to_shap: base value + values is the model's prediction (completeness).
    mean, var = posterior.predict(X)
    np.testing.assert_allclose(
        explanation.base_values + explanation.values.sum(axis=1), mean, rtol=0, atol=1e-9
    )
    np.testing.assert_allclose(explanation.error_std, np.sqrt(np.einsum("pii->pi", attr.cov)))
    z = 1.6448536269514722  # standard normal 95% quantile: a 90% central interval
    np.testing.assert_allclose(explanation.upper_bounds - explanation.values, z * attr.std)
    np.testing.assert_allclose(explanation.values - explanation.lower_bounds, z * attr.std)
    # Slicing one row keeps the uncertainty (shap's own sliceable object).
    assert explanation[2].error_std.shape == (3,)


@pytest.mark.parametrize("plot", ["waterfall", "bar", "beeswarm"])
def test_shap_plots_draw_the_explanation(posterior, plot):
    explanation = integrated_gradients(posterior, posterior.train_inputs[:8]).to_shap()
    target = explanation[0] if plot == "waterfall" else explanation
    getattr(shap.plots, plot)(target, show=False)
    assert plt.gcf().axes, f"shap.plots.{plot} drew nothing"
    plt.close("all")


def test_additive_shapley_values_export_with_their_base_value():
    rng = np.random.default_rng(1)
    X = rng.normal(size=(25, 3))
    y = X[:, 0] + 0.5 * X[:, 1] ** 2 + 0.1 * rng.normal(size=25)
    model = AdditiveGPRegressor(max_order=2, n_restarts=0, max_iter=30).fit(X, y)
    attr = shapley_values(model, X[:4])
    explanation = attr.to_shap()
    np.testing.assert_allclose(
        explanation.base_values + explanation.values.sum(1), model.predict(X[:4]), atol=1e-8
    )
    shap.plots.waterfall(explanation[1], show=False)
    plt.close("all")


def test_results_without_base_value_warn(posterior):
    grad = gradients(posterior, posterior.train_inputs[:2])
    with pytest.warns(UserWarning, match="no base value"):
        explanation = grad.to_shap()
    np.testing.assert_array_equal(explanation.base_values, np.zeros(2))
