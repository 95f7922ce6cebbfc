"""``MultiOutputSensitivity.index_covariance``: the posterior covariance of Sobol indices and
Shapley effects between the outputs of a multi-output GP.

References, independent of ``gpexplain.explain.sensitivity``:

* Monte Carlo: joint posterior samples of both outputs of an ICM on a Gauss-Hermite tensor
  grid (the grid's atoms stand in for the Gaussian measure), from a joint covariance built
  here in NumPy from ``B_ij k(x, x')``; every index of every sampled path by brute force on
  the grid (``tests.reference.shapley_brute_force``); the sample covariance between outputs
  against the closed form, z < 5 from the standard error of a sample covariance;
* an axiom: with a rank-one B = w w^T the outputs are proportional, f_j = (w_j / w_i) f_i,
  so each index of output j is (w_j / w_i)^2 times that of output i: correlation 1 and
  covariance (w_j / w_i)^2 Var.
"""

from __future__ import annotations

import numpy as np
import pytest

import gpexplain as gx
from gpexplain.kernels import RBF
from gpexplain.kernels.measures import Gaussian
from tests.reference import shapley_brute_force as brute

LENGTHSCALE, VARIANCE, NOISE = np.array([0.9, 1.3]), 1.2, 0.04


def _icm_data(n=14, seed=3):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    tasks = np.arange(n) % 2
    y = np.where(tasks == 0, np.sin(2 * X[:, 0]), 1.2 * np.sin(2 * X[:, 0]) + 0.5 * X[:, 1])
    return X, tasks, y


def _rbf(A, C):
    scaled = (A[:, None, :] - C[None, :, :]) / LENGTHSCALE
    return VARIANCE * np.exp(-0.5 * np.sum(scaled**2, -1))


def _joint_posterior(X, tasks, y, B, grid):
    """Mean (2 G,) and covariance (2 G, 2 G) of (f_0(grid), f_1(grid)), written here."""
    gram = B[np.ix_(tasks, tasks)] * _rbf(X, X) + NOISE * np.eye(len(X))
    outputs = np.repeat([0, 1], len(grid))
    points = np.vstack([grid, grid])
    cross = B[np.ix_(outputs, tasks)] * _rbf(points, X)
    prior = B[np.ix_(outputs, outputs)] * _rbf(points, points)
    solved = np.linalg.solve(gram, np.column_stack([y, cross.T]))
    return cross @ solved[:, 0], prior - cross @ solved[:, 1:]


def _indices(path, atoms):
    v = brute.variance_game(path, atoms)
    everything = frozenset(range(path.ndim))
    return np.concatenate([
        [v(everything)], [v({i}) for i in range(path.ndim)],
        [v(everything) - v(everything - {i}) for i in range(path.ndim)],
        brute.shapley_from_game(v, path.ndim)])


def _stacked_between(result):
    covariance = {name: result.index_covariance(name) for name in
                  ("total_variance", "first_order", "total", "shapley_effects")}
    return np.concatenate([covariance["total_variance"][None], covariance["first_order"],
                           covariance["total"], covariance["shapley_effects"]])


def test_icm_index_covariance_between_outputs_against_joint_sample_paths():
    X, tasks, y = _icm_data()
    B = np.array([[1.0, 1.1], [1.1, 1.5]])
    posterior = gx.CoregionalizedPosterior(X, tasks, y, RBF(LENGTHSCALE, VARIANCE), B, NOISE)
    measure = Gaussian([0.1, -0.2], [0.9, 1.2])
    result = gx.global_sensitivity(posterior, measure)
    between = _stacked_between(result)  # (1 + 3 d, 2, 2)

    atoms = brute.gaussian_atoms(measure.mean, measure.std, 16)
    grid, shape = brute.tensor_grid(atoms)
    mean, cov = _joint_posterior(X, tasks, y, B, grid)
    values, vectors = np.linalg.eigh(cov)
    root = vectors * np.sqrt(np.maximum(values, 0.0))
    n = 6000
    samples = mean + np.random.default_rng(11).normal(size=(n, len(mean))) @ root.T
    draws = np.array([[_indices(s[o * len(grid):(o + 1) * len(grid)].reshape(shape), atoms)
                       for o in (0, 1)] for s in samples])  # (n, 2, 1 + 3 d)
    centred = draws - draws.mean(0)
    products = centred[:, 0] * centred[:, 1]
    sample_cov = products.mean(0)
    z = np.abs(sample_cov - between[:, 0, 1]) / (products.std(0) / np.sqrt(n))
    assert np.all(z < 5.0), (z, sample_cov, between[:, 0, 1])
    # the cross-output covariance is not small here: the check has something to find
    assert np.all(np.abs(between[:, 0, 1]) > 10 * products.std(0) / np.sqrt(n))
    # the diagonal is each output's own posterior variance of the index
    for o in (0, 1):
        own = result.results[o]
        np.testing.assert_allclose(
            between[:, o, o], np.concatenate([[own.total_variance_std], own.first_order_std,
                                              own.total_std, own.shapley_effects_std]) ** 2)


def test_rank_one_coregionalisation_gives_proportional_indices():
    X, tasks, y = _icm_data()
    w = np.array([0.8, -1.4])
    posterior = gx.CoregionalizedPosterior(X, tasks, y, RBF(LENGTHSCALE, VARIANCE),
                                           np.outer(w, w), NOISE)
    result = gx.global_sensitivity(posterior)
    ratio = (w[1] / w[0]) ** 2
    for index in ("total_variance", "first_order", "total", "shapley_effects"):
        covariance = result.index_covariance(index)
        np.testing.assert_allclose(covariance[..., 0, 1], ratio * covariance[..., 0, 0],
                                   rtol=1e-6)
        np.testing.assert_allclose(covariance[..., 1, 1], ratio**2 * covariance[..., 0, 0],
                                   rtol=1e-6)
        np.testing.assert_allclose(result.index_correlation(index)[..., 0, 1], 1.0, atol=1e-6)


def test_independent_outputs_have_zero_covariance_between_outputs():
    X, _, y = _icm_data()
    first = gx.ExactPosterior(X, y, kernel=RBF(LENGTHSCALE, VARIANCE), noise=NOISE)
    second = gx.ExactPosterior(X, -2 * y, kernel=RBF(LENGTHSCALE * 2, VARIANCE), noise=NOISE)
    result = gx.global_sensitivity(gx.IndependentOutputs([first, second], ["a", "b"]))
    covariance = result.index_covariance("shapley_effects")
    np.testing.assert_array_equal(covariance[:, 0, 1], 0.0)
    np.testing.assert_allclose(covariance[:, 1, 1], result["b"].shapley_effects_std ** 2)


def test_index_covariance_refuses_unknown_indices():
    X, tasks, y = _icm_data()
    posterior = gx.CoregionalizedPosterior(X, tasks, y, RBF(LENGTHSCALE, VARIANCE),
                                           np.array([[1.0, 0.3], [0.3, 1.0]]), NOISE)
    result = gx.global_sensitivity(posterior, outputs=[1])
    assert result.index_covariance("total").shape == (2, 1, 1)
    with pytest.raises(ValueError, match="index must be one of"):
        result.index_covariance("second_order")
