"""SmoothGrad, both LIMEs and AGG against closed forms and brute force; targets' gradients."""

import numpy as np
import pytest
import torch

import gpexplain as gx

WEIGHTS = np.array([1.5, -2.0, 0.25])


def linear(intercept):
    return lambda x: x @ torch.as_tensor(WEIGHTS) + intercept


@pytest.fixture
def points():
    return np.random.default_rng(0).normal(size=(6, 3))


def test_smoothgrad_of_a_linear_function_is_its_weights(points):
    attr = gx.poe.smoothgrad(linear(0.7), points, delta=0.5, n_samples=20)
    assert np.allclose(attr.mean, WEIGHTS, rtol=0, atol=1e-13)


def test_smoothgrad_averages_gradients_over_gaussian_noise(points):
    # grad of sum x^3 is 3 x^2; E[3 (x + delta e)^2] = 3 x^2 + 3 delta^2: Monte Carlo z-test
    delta, samples = 0.4, 4000
    attr = gx.poe.smoothgrad(lambda x: (x**3).sum(1), points, delta=delta, n_samples=samples)
    expected = 3 * points**2 + 3 * delta**2
    std = np.sqrt(36 * points**2 * delta**2 + 18 * delta**4) / np.sqrt(samples)
    assert np.all(np.abs(attr.mean - expected) <= 5 * std)


@pytest.mark.parametrize("method", [gx.poe.lime, gx.poe.lime_no_intercept])
def test_both_limes_return_the_weights_of_a_linear_function_through_the_origin(points, method):
    attr = method(linear(0.0), points, delta=0.3, n_samples=50)
    assert np.allclose(attr.mean, WEIGHTS, rtol=0, atol=1e-10)


def test_only_lime_with_intercept_returns_the_weights_with_an_offset(points):
    assert np.allclose(gx.poe.lime(linear(3.0), points, 0.3, 50).mean, WEIGHTS, atol=1e-10)
    paper = gx.poe.lime_no_intercept(linear(3.0), points, 0.3, 50).mean
    assert not np.allclose(paper, WEIGHTS, atol=1e-2)


def test_lime_without_intercept_solves_its_least_squares_problem(points):
    f = lambda x: torch.sin(x).sum(1)  # noqa: E731
    attr = gx.poe.lime_no_intercept(f, points, delta=0.5, n_samples=40, seed=3)
    rng = np.random.default_rng(3)
    samples = points[:, None, :] + 0.5 * rng.standard_normal((6, 40, 3))
    for row in range(6):
        design, target = samples[row], np.sin(samples[row]).sum(1)
        normal = np.linalg.solve(design.T @ design, design.T @ target)
        assert np.allclose(attr.mean[row], normal, atol=1e-10)


def test_targets_give_the_same_gradients():
    X = np.random.default_rng(1).normal(size=(5, 2))
    torch_g, torch_f = gx.poe.gradients_and_values(lambda x: (x**3).sum(1) + x[:, 0] * x[:, 1], X)
    pair = (lambda Z: (Z**3).sum(1) + Z[:, 0] * Z[:, 1],
            lambda Z: 3 * Z**2 + Z[:, ::-1])
    pair_g, pair_f = gx.poe.gradients_and_values(pair, X)
    assert np.allclose(torch_g, pair_g, atol=1e-13) and np.allclose(torch_f, pair_f)


def test_gp_model_target_is_the_posterior_mean_and_its_gradient():
    rng = np.random.default_rng(2)
    X = rng.uniform(-2, 2, size=(25, 2))
    posterior = gx.ExactPosterior(X, np.sin(X[:, 0]) + X[:, 1], kernel=gx.kernels.RBF(1.0),
                                  noise=0.1)
    queries = rng.uniform(-1, 1, size=(4, 2))
    G, f = gx.poe.gradients_and_values(posterior, queries)
    assert np.allclose(f, posterior.predict_mean(queries))
    h = 1e-5  # central differences of the posterior mean
    for column in range(2):
        step = np.zeros(2)
        step[column] = h
        numeric = (posterior.predict_mean(queries + step)
                   - posterior.predict_mean(queries - step)) / (2 * h)
        assert np.allclose(G[:, column], numeric, atol=1e-7)


def test_bad_targets_and_parameters_are_refused(points):
    with pytest.raises(TypeError, match="f must be a fitted gpexplain GP model"):
        gx.poe.smoothgrad(42, points, delta=0.1)
    with pytest.raises(ValueError, match="delta must be a finite number >= 0"):
        gx.poe.smoothgrad(linear(0), points, delta=-1)
    with pytest.raises(ValueError, match="n_samples must be an integer >= 2"):
        gx.poe.lime(linear(0), points, delta=0.1, n_samples=1)
    with pytest.raises(ValueError, match="returned shape"):
        gx.poe.gradients_and_values((lambda Z: Z, lambda Z: Z), points)


def brute_force_simplex(bases, X, G, f, weights, steps=200):
    best = np.inf
    for i in range(steps + 1):
        for j in range(steps + 1 - i):
            alpha = np.array([i, j, steps - i - j]) / steps
            W = sum(a * b for a, b in zip(alpha, bases, strict=True))
            best = min(best, gx.poe.objective(gx.poe.losses(W, X, G, f), weights))
    return best


@pytest.mark.parametrize(
    "weights",
    [{"F_grad": 1.0, "R_avg": 0.05}, {"F_grad": 1.0, "R_max": 0.1, "C": 0.3}],
)
def test_agg_is_the_best_point_of_the_simplex(points, weights):
    f = lambda x: (x**3).sum(1)  # noqa: E731
    G, values = gx.poe.gradients_and_values(f, points)
    bases = [gx.poe.smoothgrad(f, points, delta).mean for delta in (0.1, 1.0)]
    bases.append(gx.poe.lime(f, points, 0.5, 100).mean)
    result = gx.poe.agg(bases, points, G, values, lambdas=weights)
    alpha = np.array(result.certificate["alpha"])
    assert np.all(alpha >= 0) and alpha.sum() == pytest.approx(1.0)
    grid = brute_force_simplex(bases, points, G, values, weights)
    assert result.objective <= grid * (1 + 1e-8)
    assert result.objective >= grid * (1 - 1e-2)  # the grid is within 1% of the optimum here


def test_agg_picks_the_poe_optimum_when_it_is_a_base(points):
    f = lambda x: (x**3).sum(1)  # noqa: E731
    G, values = gx.poe.gradients_and_values(f, points)
    weights = {"F_grad": 1.0, "R_avg": 0.1}
    optimum = gx.poe.transductive(points, G, lambdas=weights)
    bases = [optimum.explanations, gx.poe.smoothgrad(f, points, 1.0).mean, np.zeros_like(G)]
    result = gx.poe.agg(bases, points, G, values, lambdas=weights)
    assert result.objective == pytest.approx(optimum.objective, rel=1e-9)
    # the objective is quadratic in alpha: alpha is only accurate to ~sqrt(solver tolerance)
    assert result.certificate["alpha"][0] == pytest.approx(1.0, abs=1e-4)
