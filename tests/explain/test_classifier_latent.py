"""Shapley values and global sensitivity of GP classifiers: the latent function of the chosen
class (issue 13 item 3). References: the latent posterior explained directly, the model's own
``decision_function`` (completeness), and brute-force enumeration of the 2^d coalitions of the
baseline game on the latent mean; the refusals name the argument and the alternative."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from sklearn.gaussian_process import GaussianProcessClassifier
from sklearn.gaussian_process.kernels import RBF

import gpexplain as gx
from tests.reference import shapley_games as games

N_FEATURES = 3


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40, N_FEATURES))
    binary = np.where(X[:, 0] + 0.5 * X[:, 1] > 0, "yes", "no")
    three = np.array(["a", "b", "c"])[np.digitize(X[:, 0] + 0.3 * X[:, 2], [-0.5, 0.5])]
    return X, binary, three


@pytest.fixture(scope="module")
def binary_model(data):
    X, binary, _ = data
    return gx.GPClassifier(n_inducing=20, max_iter=30).fit(X, binary)


@pytest.fixture(scope="module")
def three_class_model(data):
    X, _, three = data
    return gx.GPClassifier(n_inducing=20, max_iter=30).fit(X, three)


def _scale(values) -> float:
    """Round-off scale of sums of latent values: tolerances follow their magnitude."""
    return 1e-10 * (1.0 + float(np.max(np.abs(values))))


def test_binary_shapley_values_are_the_log_odds_of_the_positive_class(data, binary_model):
    X, _, _ = data
    points = X[:5]
    result = gx.shapley_values(binary_model, points)
    direct = gx.shapley_values(binary_model.posterior_, points)
    np.testing.assert_array_equal(result.mean, direct.mean)
    np.testing.assert_array_equal(result.cov, direct.cov)
    assert result.method == f"{direct.method} of the latent log-odds of class 'yes'"
    assert gx.shapley_values(binary_model, points, target_class="yes",
                             output="latent").method == result.method
    # completeness against the classifier's own log-odds at x and at the baseline (the mean)
    latent = binary_model.decision_function(points)
    at_baseline = binary_model.decision_function(X.mean(0)[None, :])[0]
    np.testing.assert_allclose(result.mean.sum(1), latent - at_baseline, rtol=0,
                               atol=_scale(latent))
    # exp(phi) multiplies the odds: their product is the odds ratio of x to the baseline
    np.testing.assert_allclose(np.exp(result.mean).prod(1), np.exp(latent - at_baseline),
                               rtol=1e-9)


def test_multiclass_shapley_values_against_brute_force_enumeration(data, three_class_model):
    X, _, _ = data
    points, baseline = X[:3], np.array([0.2, -0.1, 0.4])
    latents = three_class_model.decision_function  # (n, C), one latent mean per class
    for index, label in enumerate(three_class_model.classes_):
        result = gx.shapley_values(three_class_model, points, baseline=baseline,
                                   target_class=label)
        direct = gx.shapley_values(three_class_model.posteriors_[index], points,
                                   baseline=baseline)
        np.testing.assert_array_equal(result.mean, direct.mean)
        np.testing.assert_array_equal(result.cov, direct.cov)
        assert result.method.endswith(f"of the softmax latent of class '{label}'")
        for row, x in enumerate(points):
            game_rows, coalitions = games.game_points(x, baseline[None, :])
            stencil = games.shapley_stencil(coalitions, N_FEATURES, len(game_rows))
            values = latents(game_rows)[:, index]
            np.testing.assert_allclose(result.mean[row], stencil @ values, rtol=0,
                                       atol=_scale(values))
        np.testing.assert_allclose(
            result.mean.sum(1), latents(points)[:, index] - result.baseline_prediction,
            rtol=0, atol=_scale(latents(points)),
        )


def test_global_sensitivity_of_each_latent(three_class_model, binary_model):
    def same(first, second):
        for field in dataclasses.fields(first):
            value = getattr(first, field.name)
            if isinstance(value, np.ndarray | float):
                np.testing.assert_array_equal(value, getattr(second, field.name))

    same(gx.global_sensitivity(binary_model), gx.global_sensitivity(binary_model.posterior_))
    for index, label in enumerate(three_class_model.classes_):
        same(gx.global_sensitivity(three_class_model, target_class=label),
             gx.global_sensitivity(three_class_model.posteriors_[index]))
    assert gx.global_sensitivity(three_class_model, target_class="b").method.endswith(
        "of the softmax latent of class 'b'")
    assert "latent" not in gx.global_sensitivity(three_class_model.posteriors_[0]).method


def test_sklearn_classifier_posterior_explains_its_log_odds(data):
    X, binary, _ = data
    gpc = GaussianProcessClassifier(kernel=RBF(np.ones(N_FEATURES))).fit(X, binary)
    posterior = gx.from_sklearn(gpc)
    result = gx.shapley_values(posterior, X[:3])
    assert result.method.endswith("of the latent log-odds of class 'yes'")
    assert result.completeness_gap()["mean"] <= 1e-10
    with pytest.raises(ValueError, match="log-odds of class 'yes'"):
        gx.global_sensitivity(posterior, target_class="no")


@pytest.mark.parametrize("explain", ["shapley", "sensitivity"])
def test_refusals_name_the_argument_and_the_alternative(data, binary_model, three_class_model,
                                                        explain):
    X, _, _ = data

    def call(model, **options):
        if explain == "shapley":
            return gx.shapley_values(model, X[:2], **options)
        return gx.global_sensitivity(model, **options)

    with pytest.raises(ValueError, match=r"target_class is required .* \['a', 'b', 'c'\]"):
        call(three_class_model)
    with pytest.raises(ValueError, match="target_class 'd' is not a class"):
        call(three_class_model, target_class="d")
    with pytest.raises(ValueError, match="log-odds of class 'yes' .*negative"):
        call(binary_model, target_class="no")
    with pytest.raises(TypeError, match="integrated_gradients.*output='probability'"):
        call(binary_model, output="probability")
    with pytest.raises(ValueError, match="output must be 'latent'"):
        call(binary_model, output="odds")
    regression = gx.GPRegressor(kernel=gx.kernels.RBF(1.0), optimizer=None).fit(X[:20],
                                                                                X[:20, 0])
    with pytest.raises(ValueError, match="target_class=1 applies to classifiers"):
        call(regression, target_class=1)


def test_latent_integrated_gradients_of_a_regression_refuse_a_class(data):
    X, _, _ = data
    regression = gx.GPRegressor(kernel=gx.kernels.RBF(1.0), optimizer=None).fit(X[:20],
                                                                                X[:20, 0])
    with pytest.raises(ValueError, match="target_class=1 applies to classifiers"):
        gx.integrated_gradients(regression, X[:2], target_class=1)


def test_probit_and_two_class_softmax_latents_are_named(data):
    X, binary, _ = data
    probit = gx.GPClassifier(link="probit", n_inducing=20, max_iter=30).fit(X, binary)
    assert gx.shapley_values(probit, X[:2]).method.endswith("of the latent probit of class 'yes'")
    softmax = gx.GPClassifier(link="softmax", n_inducing=20, max_iter=30).fit(X, binary)
    with pytest.raises(ValueError, match="target_class is required"):
        gx.shapley_values(softmax, X[:2])  # two latents: neither is "the" log-odds
    result = gx.shapley_values(softmax, X[:2], target_class="no")
    assert result.method.endswith("of the softmax latent of class 'no'")
    np.testing.assert_array_equal(result.mean,
                                  gx.shapley_values(softmax.posteriors_[0], X[:2]).mean)


@pytest.mark.parametrize("explain", [gx.integrated_gradients, gx.gradients])
def test_latent_level_gradients_name_the_class_they_explain(data, binary_model,
                                                          three_class_model, explain):
    X, _, _ = data
    points = X[:2]
    binary = explain(binary_model, points, output="latent")
    direct = explain(binary_model.posterior_, points)
    np.testing.assert_array_equal(binary.mean, direct.mean)
    assert binary.method == f"{direct.method} of the latent log-odds of class 'yes'"
    softmax = explain(three_class_model, points, output="latent", target_class="c")
    np.testing.assert_array_equal(softmax.mean, explain(three_class_model.posteriors_[2],
                                                        points).mean)
    assert softmax.method.endswith("of the softmax latent of class 'c'")
    assert "latent" not in direct.method
