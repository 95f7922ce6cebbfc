"""Inductive POE: its exact transductive objective, GP regression, convergence, local points."""

import numpy as np
import pytest
import torch

import gpexplain as gx


def f(x):
    return torch.sin(3 * x).sum(1) + (x**2).sum(1) / 10 + x[:, 0] * x[:, -1] / 5


def stated_objective(W, Z, G, kernel, lambdas, feature_kernel, volume, jitter):
    """The docstring's objective, written with gx.poe.losses and explicit extra terms."""
    n, d = W.shape
    K = kernel(Z, Z)
    K_hat = K + jitter * np.mean(np.diag(K)) * np.eye(n)
    K_inv = np.linalg.inv(K_hat)
    Kt_inv = np.linalg.inv(feature_kernel)
    lF, lR, lS = lambdas["F_grad"], lambdas["R_avg"], lambdas["S"]
    off = lambda A: -(A - np.diag(np.diag(A)))  # noqa: E731
    parts = gx.poe.losses(W, Z, G, S=off(K_inv), S_tilde=off(Kt_inv))
    tau = volume / n
    p = (lR / lF) * K_inv.sum(axis=1)[:, None] + (lS / lF) * Kt_inv.sum(axis=1)[None, :]
    shrink = np.sum(p * W**2) - np.sum(p * W) ** 2 / p.sum()
    return (lF * tau * parts["F_grad"] + lR / 2 * parts["R_avg"] + lS / 2 * parts["S"]
            + lF * shrink)


def minimiser_of_quadratic(J, shape):
    """Polarisation: Hessian and linear term of a quadratic from its values, then solve."""
    size = int(np.prod(shape))
    value = lambda v: J(v.reshape(shape))  # noqa: E731
    E, zero = np.eye(size), value(np.zeros(size))
    H = np.array([[value(E[i] + E[j]) - value(E[i]) - value(E[j]) + zero for j in range(size)]
                  for i in range(size)]) / 2
    b = np.array([(value(-E[i]) - value(E[i])) / 4 for i in range(size)])
    return np.linalg.solve(H, b).reshape(shape), np.linalg.cond(H)


@pytest.mark.parametrize("smoothness", [0.0, 0.4])
def test_inducing_explanations_minimise_the_stated_transductive_objective(smoothness):
    rng = np.random.default_rng(0)
    Z = rng.uniform(0, 3, size=(7, 2))
    kernel = gx.kernels.RBF(0.8)
    feature_kernel = np.array([[1.0, 0.5], [0.5, 1.0]])
    lambdas = {"F_grad": 2.0, "R_avg": 0.3, "S": smoothness}
    model = gx.poe.InductivePOE(kernel, lambdas, Z, domain_volume=9.0,
                                feature_kernel=feature_kernel).fit(f)
    J = lambda W: stated_objective(W, Z, model.inducing_gradients_, kernel, lambdas,  # noqa: E731
                                   feature_kernel, 9.0, model.jitter)
    reference, condition = minimiser_of_quadratic(J, Z.shape)
    error = np.max(np.abs(model.inducing_explanations_ - reference)) / np.max(np.abs(reference))
    assert condition < 1e3 and error <= 1e-10
    # and the model's own objective is that objective divided by lF
    W = rng.normal(size=Z.shape)
    assert model.objective(W) * 2.0 == pytest.approx(J(W), rel=1e-10)


def test_without_smoothness_it_is_gp_regression_with_a_shared_mean():
    rng = np.random.default_rng(1)
    Z, X = rng.uniform(-2, 2, size=(12, 2)), rng.uniform(-2, 2, size=(3, 2))
    kernel, sigma2, rho = gx.kernels.RBF([0.7, 1.3]), 4.0, 0.25
    model = gx.poe.InductivePOE(kernel, {"F_grad": 1.0, "R_avg": rho}, Z, domain_volume=16.0,
                                mean_prior_variance=sigma2, jitter=0.0).fit(f)
    attr = model.explain(X)
    # dense GP over the stacked outputs (row-major (point, feature)): k/rho per output + sigma2
    d = 2
    cov = lambda A, B: np.kron(kernel(A, B) / rho, np.eye(d)) + sigma2  # noqa: E731
    noise = np.eye(12 * d) * 12 / 16.0
    G = model.inducing_gradients_.ravel()
    solve = np.linalg.solve(cov(Z, Z) + noise, np.column_stack([G, cov(Z, X)]))
    mean = (cov(X, Z) @ solve[:, 0]).reshape(3, d)
    full = cov(X, X) - cov(X, Z) @ solve[:, 1:]
    assert np.allclose(attr.mean, mean, atol=1e-10)
    for point in range(3):
        block = full[point * d:(point + 1) * d, point * d:(point + 1) * d]
        assert np.allclose(attr.cov[point], block, atol=1e-10)


def test_inductive_solution_converges_to_the_transductive_one():
    kernel, lambdas = gx.kernels.RBF(1.0), {"F_grad": 1.0, "R_avg": 0.05}
    grid = np.linspace(0, 10, 150)[:, None]
    transductive = gx.poe.InductivePOE(kernel, lambdas, grid, domain_volume=10.0).fit(f)
    optimum = transductive.inducing_explanations_
    errors = []
    for n in (10, 40, 160):
        runs = []
        for seed in range(3):
            Z = np.random.default_rng(seed).uniform(0, 10, size=(n, 1))
            model = gx.poe.InductivePOE(kernel, lambdas, Z, domain_volume=10.0).fit(f)
            runs.append(np.linalg.norm(model.explain(grid).mean - optimum))
        errors.append(np.mean(runs) / np.linalg.norm(optimum))
    assert errors[0] > errors[1] > errors[2]
    assert errors[2] < 0.3 * errors[0]


def test_local_points_covering_the_domain_equal_global_points():
    bounds = np.array([[0.0, 0.0], [2.0, 3.0]])
    spec = gx.poe.local_inducing_points(15, radius=10.0, bounds=bounds, seed=4)
    query = np.array([[1.0, 1.5]])
    kernel, lambdas = gx.kernels.RBF(0.6), {"F_grad": 1.0, "R_avg": 0.1}
    local = gx.poe.InductivePOE(kernel, lambdas, spec).fit(f).explain(query)
    Z, density = spec.around(query[0], 0)
    assert np.allclose(density, 1 / 6.0)
    shared = gx.poe.InductivePOE(kernel, lambdas, Z, domain_volume=6.0).fit(f).explain(query)
    assert np.allclose(local.mean, shared.mean, atol=1e-12)
    assert np.allclose(local.cov, shared.cov, atol=1e-12)


def test_global_plus_local_densities_are_the_sampling_mixture():
    bounds = np.array([[0.0], [10.0]])
    global_points = np.linspace(0.5, 9.5, 10)[:, None]
    spec = gx.poe.local_inducing_points(5, 1.0, bounds, global_points=global_points, seed=0)
    Z, density = spec.around(np.array([5.0]), 0)
    inside = np.abs(Z[:, 0] - 5.0) <= 1.0
    assert np.allclose(density[~inside], (10 / 15) / 10)
    assert np.allclose(density[inside], (10 / 15) / 10 + (5 / 15) / 2.0)
    attr = gx.poe.InductivePOE(gx.kernels.RBF(1.0), {"F_grad": 1, "R_avg": 0.1}, spec).fit(
        f).explain(np.array([[5.0], [2.0]]))
    assert np.all(np.isfinite(attr.mean)) and np.all(attr.var > 0)


def test_user_gradients_and_torch_autograd_give_the_same_fit():
    Z = np.random.default_rng(5).uniform(0, 3, size=(10, 2))
    kernel, lambdas = gx.kernels.RBF(1.0), {"F_grad": 1, "R_avg": 0.2}

    def gradient(X):  # the gradient of f in two dimensions, written by hand
        return 3 * np.cos(3 * X) + X / 5 + X[:, ::-1] / 5

    by_hand = gx.poe.InductivePOE(kernel, lambdas, Z).fit(gx.poe.Target(None, gradient))
    autograd = gx.poe.InductivePOE(kernel, lambdas, Z).fit(f)
    assert np.allclose(by_hand.inducing_explanations_, autograd.inducing_explanations_,
                       atol=1e-12)


def test_covariance_is_symmetric_positive_semidefinite():
    Z = np.random.default_rng(2).uniform(0, 3, size=(20, 3))
    model = gx.poe.InductivePOE(gx.kernels.RBF(1.0), {"F_grad": 1, "R_avg": 0.2, "S": 0.1}, Z,
                                feature_kernel=np.eye(3) + 0.3).fit(f)
    attr = model.explain(np.random.default_rng(3).uniform(0, 3, size=(5, 3)))
    assert np.allclose(attr.cov, np.swapaxes(attr.cov, 1, 2))
    assert np.linalg.eigvalsh(attr.cov).min() > -1e-10


def test_bad_parameters_are_refused():
    Z = np.random.default_rng(2).uniform(0, 3, size=(5, 2))
    kernel = gx.kernels.RBF(1.0)
    with pytest.raises(ValueError, match="unknown property 'C'"):
        gx.poe.InductivePOE(kernel, {"F_grad": 1, "R_avg": 1, "C": 1}, Z).fit(f)
    with pytest.raises(ValueError, match="R_avg'\\] > 0"):
        gx.poe.InductivePOE(kernel, {"F_grad": 1}, Z).fit(f)
    with pytest.raises(ValueError, match="needs feature_kernel"):
        gx.poe.InductivePOE(kernel, {"F_grad": 1, "R_avg": 1, "S": 1}, Z).fit(f)
    with pytest.raises(ValueError, match="not fitted"):
        gx.poe.InductivePOE(kernel, {"F_grad": 1, "R_avg": 1}, Z).explain(Z)
    with pytest.raises(TypeError, match="kernel must be a callable"):
        gx.poe.InductivePOE("rbf", {"F_grad": 1, "R_avg": 1}, Z).fit(f)
    with pytest.raises(ValueError, match="bounds must be"):
        gx.poe.local_inducing_points(5, 1.0, [[1.0], [0.0]])
