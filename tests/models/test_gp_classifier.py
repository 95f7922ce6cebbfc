"""GPClassifier: class probabilities against independent references (mpmath, Monte Carlo,
the exact 1-D reduction of a 2-class softmax) and equal to the probability-level explanations'
``prediction``, the latent posterior against the GPyTorch model it came from, accuracy against
scikit-learn's GaussianProcessClassifier, reproducibility and the errors users see."""

from __future__ import annotations

import warnings

import mpmath
import numpy as np
import pandas as pd
import pytest
import torch
from scipy.special import expit, ndtr
from sklearn.datasets import load_digits
from sklearn.gaussian_process import GaussianProcessClassifier
from sklearn.model_selection import train_test_split
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

import gpexplain as gx
from gpexplain.likelihoods import Bernoulli, Categorical

mpmath.mp.dps = 30
Z_SCORE = 5.0  # Monte Carlo tolerance: a false alarm has probability below 1e-6 per check


def _mp_gaussian_expectation(function, mean, std):
    """E[function(mean + std Z)] by 30-digit mpmath quadrature, split at the kink."""
    def integrand(z):
        return function(mean + std * z) * mpmath.npdf(z)
    centre = max(-12.0, min(12.0, -mean / std))
    return float(mpmath.quad(integrand, [-mpmath.inf, *sorted({0.0, centre}), mpmath.inf]))


def _mp_logistic(f):
    return 1 / (1 + mpmath.exp(-f))


def _expected_logistic(mean, std):
    """E[expit(mean + std Z)] as the classifier's predict_proba computes it (its likelihood)."""
    return Bernoulli("logit").predict_proba(mean[None], std[None] ** 2)[:, 1]


@pytest.mark.parametrize("std", [1e-3, 0.5, 3.0, 30.0])
@pytest.mark.parametrize("mean", [-20.0, 0.0, 0.7, 5.0])
def test_expected_logistic_matches_mpmath(mean, std):
    value = _expected_logistic(np.array([mean]), np.array([std]))[0]
    assert abs(value - _mp_gaussian_expectation(_mp_logistic, mean, std)) < 1e-13


def test_expected_logistic_of_very_wide_latents_in_bounded_blocks():
    mean, std = np.array([0.3, -2.0, 40.0]), np.array([3e3, 1.0, 1e4])
    values = _expected_logistic(mean, std)
    for i in range(3):
        reference = _mp_gaussian_expectation(_mp_logistic, mean[i], std[i])
        assert abs(values[i] - reference) < 1e-13


def test_probit_response_matches_mpmath():
    mean, var = np.array([[-2.0, 0.3, 4.0]]), np.array([[0.1, 2.0, 9.0]])
    probabilities = Bernoulli("probit").predict_proba(mean, var)
    for i in range(3):
        reference = _mp_gaussian_expectation(mpmath.ncdf, mean[0, i], np.sqrt(var[0, i]))
        assert abs(probabilities[i, 1] - reference) < 1e-14
        assert abs(probabilities[i].sum() - 1.0) < 1e-15


def test_two_class_softmax_reduces_to_logistic_of_difference():
    # S_1(f) = expit(f_1 - f_0) with f_1 - f_0 ~ N(m1 - m0, v0 + v1): an exact 1-D reference.
    mean = np.array([[0.3, -1.0, 2.0], [-0.4, 1.5, 2.0]])
    var = np.array([[0.2, 1.0, 0.05], [0.5, 0.8, 1.5]])
    probabilities = Categorical().predict_proba(mean, var)
    for i in range(3):
        reference = _mp_gaussian_expectation(
            _mp_logistic, mean[1, i] - mean[0, i], np.sqrt(var[0, i] + var[1, i])
        )
        assert abs(probabilities[i, 1] - reference) < 1e-10


@pytest.mark.parametrize("n_classes", [3, 5])
def test_softmax_response_against_monte_carlo(n_classes):
    rng = np.random.default_rng(1)
    mean = rng.normal(size=(n_classes, 4))
    var = rng.uniform(0.1, 1.5, size=(n_classes, 4))
    likelihood = Categorical()
    probabilities = likelihood.predict_proba(mean, var)
    samples = mean.T + np.sqrt(var.T) * rng.normal(size=(200_000, 4, n_classes))
    softmax = np.exp(samples - samples.max(axis=-1, keepdims=True))
    softmax /= softmax.sum(axis=-1, keepdims=True)
    standard_error = softmax.std(axis=0) / np.sqrt(samples.shape[0])
    # C = 3: product trapezoid (error << MC); C = 5: randomised QMC with a standard error.
    rule_error = Z_SCORE * likelihood.link.standard_error_
    assert (rule_error == 0.0) == (n_classes == 3)
    assert np.all(np.abs(probabilities - softmax.mean(axis=0)) < Z_SCORE * standard_error
                  + rule_error)
    np.testing.assert_allclose(probabilities.sum(axis=1), 1.0, atol=1e-12)


def _blobs(n_classes=2, n=60, seed=0):
    rng = np.random.default_rng(seed)
    y = np.arange(n) % n_classes
    X = rng.normal(size=(n, 2)) + 1.5 * np.column_stack([np.cos(y * 2.1), np.sin(y * 2.1)])
    return X, y


@pytest.mark.parametrize(("n_classes", "link"), [
    (2, "logit"), (2, "probit"), (2, "softmax"), (3, "softmax"), (4, "softmax"),
])
def test_predict_proba_equals_the_explanations_prediction(n_classes, link):
    """One implementation of the link expectations: predict_proba and the prediction of the
    probability-level explanations agree for every class (before, the classifier kept its own
    rules, and a 4-class model's differed by 2e-4)."""
    X, y = _blobs(n_classes, n=40)
    model = gx.GPClassifier(link=link, n_inducing=6, max_iter=15).fit(X, y)
    X_new = np.array([[0.0, 0.0], [2.0, -1.0], [1.0, 1.5], [5.0, 5.0]])
    probabilities = model.predict_proba(X_new)
    for index, label in enumerate(model.classes_):
        explanation = gx.integrated_gradients(model, X_new, output="probability",
                                              target_class=label, return_cov=False)
        np.testing.assert_allclose(probabilities[:, index], explanation.prediction,
                                   rtol=0.0, atol=1e-10)


@pytest.mark.parametrize("link", ["logit", "probit", "softmax"])
def test_predict_proba_against_monte_carlo_of_latent_posterior(link):
    X, y = _blobs(3 if link == "softmax" else 2)
    model = gx.GPClassifier(link=link, n_inducing=8, max_iter=30).fit(X, y)
    X_new = np.array([[0.0, 0.0], [2.0, -1.0], [5.0, 5.0]])
    posteriors = model.posteriors_ if link == "softmax" else [model.posterior_]
    rng = np.random.default_rng(2)
    latent = np.stack([
        mean + np.sqrt(var) * rng.normal(size=(200_000, 3))
        for mean, var in (posterior.predict(X_new) for posterior in posteriors)
    ], axis=-1)  # (samples, points, latents)
    if link == "softmax":
        p = np.exp(latent - latent.max(axis=-1, keepdims=True))
        p /= p.sum(axis=-1, keepdims=True)
    else:  # sigma applied to every sample: independent of the closed form / quadrature
        positive = expit(latent[..., 0]) if link == "logit" else ndtr(latent[..., 0])
        p = np.stack([1 - positive, positive], axis=-1)
    standard_error = p.std(axis=0) / np.sqrt(p.shape[0])
    probabilities = model.predict_proba(X_new)
    assert np.all(np.abs(probabilities - p.mean(axis=0)) < Z_SCORE * standard_error + 1e-12)
    assert np.array_equal(model.predict(X_new), model.classes_[probabilities.argmax(axis=1)])


@pytest.mark.parametrize("link", ["logit", "softmax"])
def test_latent_posteriors_equal_the_gpytorch_models_in_original_units(link):
    X, y = _blobs(2)
    X = X * np.array([100.0, 0.01]) + np.array([5.0, -3.0])  # units must not matter
    model = gx.GPClassifier(link=link, n_inducing=6, max_iter=20).fit(X, y)
    Xs = torch.as_tensor((X - X.mean(axis=0)) / X.std(axis=0))
    posteriors = model.posteriors_ if link == "softmax" else [model.posterior_]
    for latent, posterior in zip(model.gpytorch_models_, posteriors, strict=True):
        with torch.no_grad():
            q = latent(Xs)
        mean, var = posterior.predict(X)
        np.testing.assert_allclose(mean, q.mean.numpy(), rtol=1e-7, atol=1e-8)
        # GPyTorch's q(f) adds its jitter to the diagonal; the latent posterior does not.
        jitter = latent.variational_strategy.jitter_val
        np.testing.assert_allclose(var + jitter, q.variance.numpy(), rtol=1e-7, atol=1e-9)


def test_binary_latent_is_log_odds_of_second_class_and_explainable():
    X, y = _blobs(2)
    labels = np.where(y == 1, "yes", "no")
    model = gx.GPClassifier(n_inducing=8, max_iter=30).fit(X, labels)
    assert list(model.classes_) == ["no", "yes"] and model.link_ == "logit"
    latent = model.decision_function(X)
    np.testing.assert_allclose(latent, model.posterior_.predict_mean(X), rtol=1e-12)
    # Positive log-odds mean "yes" is the more probable class.
    assert np.all((latent > 0) == (model.predict_proba(X)[:, 1] > 0.5))
    assert (model.predict(X) == labels).mean() > 0.8
    attribution = gx.integrated_gradients(model.posterior_, X[:5], baseline="zeros")
    np.testing.assert_allclose(
        attribution.mean.sum(axis=1),
        latent[:5] - model.decision_function(np.zeros((1, 2)))[0],
        atol=1e-8,
    )


def test_same_seed_same_fit_and_progress_reported(capsys):
    X, y = _blobs(3)
    calls = []
    first = gx.GPClassifier(n_inducing=6, max_iter=15, n_restarts=1).fit(
        X, y, callback=lambda step, total: calls.append((step, total))
    )
    second = gx.GPClassifier(n_inducing=6, max_iter=15, n_restarts=1).fit(X, y)
    assert np.array_equal(first.predict_proba(X), second.predict_proba(X))
    assert first.elbo_ == second.elbo_ and len(first.restarts_) == 2
    assert calls and all(0 < step <= total for step, total in calls)
    steps = [step for step, _ in calls]
    assert steps == sorted(steps)
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""  # nothing displayed by the estimator


def test_optimizer_none_keeps_the_given_kernel():
    X, y = _blobs(2)
    kernel = gx.kernels.RBF(np.array([0.7, 2.0]), 3.0)
    model = gx.GPClassifier(kernel=kernel, optimizer=None, n_inducing=6, max_iter=30).fit(X, y)
    np.testing.assert_allclose(model.kernels_[0].lengthscale, kernel.lengthscale, rtol=1e-12)
    assert abs(model.kernels_[0].variance - 3.0) < 1e-12
    assert model.posterior_.mean == 0.0


@pytest.mark.parametrize(
    ("y", "parameters", "error", "message"),
    [
        (np.zeros(20), {}, ValueError, "one class only"),
        (np.r_[np.nan, np.arange(19) % 2], {}, ValueError, "non-finite label at row 0"),
        (np.array([None] + ["a", "b"] * 9 + ["a"], dtype=object), {}, ValueError, "row 0"),
        (np.linspace(0, 1, 20), {}, ValueError, "continuous"),
        (np.arange(20) % 2, {"link": "cauchit"}, ValueError, "unknown link 'cauchit'"),
        (np.arange(20) % 3, {"link": "probit"}, ValueError, "link='softmax'"),
        (np.arange(20) % 2, {"n_inducing": 21}, ValueError, "n_inducing=21 exceeds"),
        (np.arange(20) % 2, {"optimizer": None}, ValueError, "optimizer=None needs"),
        (np.arange(19) % 2, {}, ValueError, "19 labels but X has 20 rows"),
        (np.array(["a", 1] * 10, dtype=object), {}, TypeError, "mixes label types"),
    ],
)
def test_clear_errors(y, parameters, error, message):
    X = np.random.default_rng(0).normal(size=(20, 2))
    with pytest.raises(error, match=message):
        gx.GPClassifier(**parameters).fit(X, y)


def _accuracies(X, y, train_size, test_size, **parameters):
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, train_size=train_size, test_size=test_size, random_state=0, stratify=y
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # constant pixels of the digits
        ours = gx.GPClassifier(random_state=0, **parameters).fit(X_train, y_train)
    theirs = make_pipeline(StandardScaler(), GaussianProcessClassifier(random_state=0))
    theirs.fit(X_train, y_train)
    return ours.score(X_test, y_test), theirs.score(X_test, y_test)


def _wdbc(data_dir):
    table = pd.read_csv(data_dir / "breast_cancer_wisconsin" / "wdbc.data", header=None)
    return table.iloc[:, 2:].to_numpy(dtype=float), table.iloc[:, 1].to_numpy()


def test_wdbc_accuracy_no_worse_than_sklearn(data_dir):
    X, y = _wdbc(data_dir)
    ours, theirs = _accuracies(X, y, 120, 300, n_inducing=10, max_iter=60)
    assert ours >= theirs - 0.02, (ours, theirs)


@pytest.mark.parametrize(("classes", "link"), [((0, 1), "logit"), ((0, 1, 2), "softmax")])
def test_digits_accuracy_no_worse_than_sklearn(classes, link):
    digits = load_digits()
    keep = np.isin(digits.target, classes)
    ours, theirs = _accuracies(
        digits.data[keep], digits.target[keep], 60, 200, n_inducing=8, max_iter=40, link=link,
        kernel="isotropic",  # as scikit-learn's; 64 ARD lengthscales overfit 60 images
    )
    assert ours >= theirs - 0.02, (ours, theirs)


@pytest.mark.slow
@pytest.mark.parametrize("case", ["wdbc", "digits 0-3"])
def test_fuller_accuracy_no_worse_than_sklearn(case, request):
    if case == "wdbc":
        X, y = _wdbc(request.getfixturevalue("data_dir"))
        ours, theirs = _accuracies(X, y, 300, 269, n_inducing=32)
    else:
        digits = load_digits()
        keep = digits.target < 4
        ours, theirs = _accuracies(
            digits.data[keep], digits.target[keep], 300, 300, n_inducing=32, max_iter=100,
            kernel="isotropic",
        )
    assert ours >= theirs - 0.02, (ours, theirs)
