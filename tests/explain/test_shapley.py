"""Exact Shapley values of orthogonal additive GPs vs brute force, quadrature, Monte Carlo."""

from __future__ import annotations

import numpy as np
import pytest

from gpexplain.attribution import Attribution
from gpexplain.explain.shapley import global_shapley_values, shapley_values
from gpexplain.global_attribution import GlobalShapleyValues
from gpexplain.kernels.measures import Empirical, Gaussian
from gpexplain.kernels.orthogonal_additive import OrthogonalAdditive
from gpexplain.kernels.random_features import RandomFeatureKernel
from gpexplain.kernels.rbf import RBF
from gpexplain.posterior import ExactPosterior
from tests.reference import shapley_brute_force as ref
from tests.reference.monte_carlo import variance_with_standard_error

NOISE = 0.05


def _data(seed, n, d):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * 1.2 + 0.3
    y = np.sin(X[:, 0]) + 0.5 * X[:, 0] * X[:, 1] + 0.3 * X[:, -1] ** 2 + 0.1 * rng.normal(size=n)
    return X, y


def _setup(measure_kind, d=3, n=25, seed=0, max_order=None):
    X, y = _data(seed, n, d)
    rng = np.random.default_rng(seed + 1)
    lengthscale = 0.7 + rng.random(d)
    order = d if max_order is None else max_order
    variances = 0.3 + rng.random(order + 1)
    if measure_kind == "gaussian":
        mean, std = 0.2 + 0.1 * rng.normal(size=d), 0.8 + 0.5 * rng.random(d)
        measure, atoms = Gaussian(mean, std), ref.gaussian_atoms(mean, std, 40)
    else:
        # Few atoms so that the brute-force game is an exact finite average.
        atom_points = rng.normal(size=(5, d))
        measure, atoms = Empirical(atom_points), ref.empirical_atoms(atom_points)
    kernel = OrthogonalAdditive(lengthscale, variances, measure, max_order=max_order)
    posterior = ExactPosterior(X, y, kernel, NOISE, mean=0.4)
    return posterior, atoms, (X, y, lengthscale, variances)


def _posterior_mean_reference(points, X, alpha, lengthscale, variances, atoms, m0):
    return m0 + ref.additive_kernel(points, X, lengthscale, variances, atoms) @ alpha


@pytest.mark.parametrize("measure_kind", ["gaussian", "empirical"])
@pytest.mark.parametrize("max_order", [None, 2])
def test_local_values_equal_marginal_game_shapley_values(measure_kind, max_order):
    """eq. 9 == classical Shapley values of v(S) = E_{x_-S ~ prod p_j} m(x_S, x_-S), where m is
    the posterior mean evaluated through the brute-force kernel and the game by quadrature."""
    posterior, atoms, (X, y, lengthscale, variances) = _setup(measure_kind, max_order=max_order)
    game_atoms = atoms
    if measure_kind == "gaussian":
        measure = posterior.kernel.measure
        game_atoms = ref.gaussian_atoms(measure.mean, measure.std, 24)
    rng = np.random.default_rng(5)
    Xq = rng.normal(size=(3, 3))
    attribution = shapley_values(posterior, Xq)
    for p, x in enumerate(Xq):
        points, index = ref.marginal_game_points(x, game_atoms)
        values = _posterior_mean_reference(
            points, X, posterior.alpha, lengthscale, variances, atoms, posterior.mean
        )
        game = ref.marginal_game(values, index)
        expected = ref.shapley_from_game(game, 3)
        # Gauss-Hermite with 24 nodes per feature integrates these smooth functions to ~1e-10.
        np.testing.assert_allclose(attribution.mean[p], expected, rtol=0, atol=1e-8)
        np.testing.assert_allclose(attribution.baseline_prediction, game(frozenset()), atol=1e-8)


@pytest.mark.parametrize("measure_kind", ["gaussian", "empirical"])
def test_covariance_equals_component_enumeration(measure_kind):
    posterior, atoms, (X, y, lengthscale, variances) = _setup(measure_kind)
    Xq = np.random.default_rng(7).normal(size=(4, 3))
    attribution = shapley_values(posterior, Xq)
    for p, x in enumerate(Xq):
        mean, cov = ref.component_posterior(
            x, X, y - posterior.mean, NOISE, lengthscale, variances, atoms
        )
        np.testing.assert_allclose(attribution.mean[p], mean, rtol=0, atol=1e-9)
        np.testing.assert_allclose(attribution.cov[p], cov, rtol=0, atol=1e-9)


def test_covariance_by_monte_carlo_over_posterior_functions():
    """Sample the GP posterior jointly at every point the marginal game needs (empirical measure:
    the game is an exact finite average), compute each sample's Shapley values by the subset
    formula, and compare mean and covariance with the closed form (|z| < 5 per entry)."""
    posterior, atoms, (X, y, lengthscale, variances) = _setup("empirical", n=15)
    x = np.array([0.4, -0.7, 1.1])
    points, index = ref.marginal_game_points(x, atoms)
    K_pp = ref.additive_kernel(points, points, lengthscale, variances, atoms)
    K_px = ref.additive_kernel(points, X, lengthscale, variances, atoms)
    K_xx = ref.additive_kernel(X, X, lengthscale, variances, atoms) + NOISE * np.eye(len(y))
    solved = np.linalg.solve(K_xx, K_px.T)
    mean = posterior.mean + solved.T @ (y - posterior.mean)
    cov = K_pp - K_px @ solved
    eigenvalues, vectors = np.linalg.eigh(0.5 * (cov + cov.T))
    root = vectors * np.sqrt(np.clip(eigenvalues, 0.0, None))
    n_samples = 20000
    rng = np.random.default_rng(123)
    samples = mean + rng.standard_normal((n_samples, len(mean))) @ root.T
    phi = ref.shapley_from_game(ref.marginal_game(samples, index), 3)  # (n_samples, 3)

    attribution = shapley_values(posterior, x[None, :])
    closed_mean, closed_cov = attribution.mean[0], attribution.cov[0]
    z_mean = (phi.mean(0) - closed_mean) / np.sqrt(np.diag(closed_cov) / n_samples)
    assert np.all(np.abs(z_mean) < 5), z_mean
    centred = phi - phi.mean(0)
    sample_cov = centred.T @ centred / (n_samples - 1)
    diag = np.diag(closed_cov)
    standard_error = np.sqrt((np.outer(diag, diag) + closed_cov**2) / n_samples)
    z_cov = (sample_cov - closed_cov) / standard_error
    assert np.all(np.abs(z_cov) < 5), z_cov


@pytest.mark.parametrize("measure_kind", ["gaussian", "empirical"])
def test_completeness_of_mean_and_covariance(measure_kind):
    posterior, _, _ = _setup(measure_kind)
    Xq = np.random.default_rng(3).normal(size=(6, 3)) * 2
    attribution = shapley_values(posterior, Xq)
    assert isinstance(attribution, Attribution)
    assert attribution.baseline is None
    gaps = attribution.completeness_gap()
    assert gaps["mean"] < 1e-10 and gaps["variance"] < 1e-10
    assert np.all(attribution.difference_variance > 0)


def test_base_value_is_mean_of_posterior_mean_under_measure():
    posterior, _, (X, _, _, _) = _setup("gaussian")
    atoms = ref.gaussian_atoms(posterior.kernel.measure.mean, posterior.kernel.measure.std, 40)
    grid, _ = ref.tensor_grid(atoms)
    expected = ref.tensor_weights(atoms) @ posterior.predict_mean(grid)
    attribution = shapley_values(posterior, X[:2])
    assert attribution.baseline_prediction == pytest.approx(expected, abs=1e-9)


def test_additivity_in_the_targets():
    """Shapley values are linear in alpha: posteriors on y1 and y2 add up to the one on y1 + y2."""
    X, y1 = _data(0, 20, 3)
    y2 = np.cos(X[:, 2])
    kernel = OrthogonalAdditive([0.8, 1.2, 1.0], [0.2, 1.0, 0.5, 0.1], Gaussian(0.0, 1.0))
    Xq = np.random.default_rng(1).normal(size=(4, 3))
    parts = [shapley_values(ExactPosterior(X, t, kernel, NOISE), Xq) for t in (y1, y2)]
    joint = shapley_values(ExactPosterior(X, y1 + y2, kernel, NOISE), Xq)
    np.testing.assert_allclose(joint.mean, parts[0].mean + parts[1].mean, atol=1e-10)
    # The covariance does not depend on y.
    np.testing.assert_allclose(joint.cov, parts[0].cov, atol=1e-12)


def test_dummy_and_symmetry_axioms():
    X, y = _data(2, 30, 3)
    X[:, 2] = X[:, 1]  # features 1 and 2 identical, same lengthscale: symmetric
    kernel = OrthogonalAdditive([0.9, 1.1, 1.1], [0.1, 1.0, 0.5, 0.2], Gaussian(0.0, 1.0))
    posterior = ExactPosterior(X, y, kernel, NOISE)
    Xq = np.random.default_rng(4).normal(size=(5, 3))
    Xq[:, 2] = Xq[:, 1]
    attribution = shapley_values(posterior, Xq)
    np.testing.assert_allclose(attribution.mean[:, 1], attribution.mean[:, 2], atol=1e-12)
    # An infinite lengthscale switches a feature off: exactly zero value and variance.
    off = OrthogonalAdditive([0.9, np.inf, 1.1], [0.1, 1.0, 0.5, 0.2], Gaussian(0.0, 1.0))
    attribution = shapley_values(ExactPosterior(X, y, off, NOISE), Xq)
    assert np.all(attribution.mean[:, 1] == 0) and np.all(attribution.cov[:, 1, :] == 0)


@pytest.mark.parametrize("measure_kind", ["gaussian", "empirical"])
def test_global_values_against_quadrature_variance_game(measure_kind):
    """Shapley effects == Shapley values of v(S) = Var(E[m(x) | x_S]) computed by tensor-grid
    quadrature of the posterior mean; their sum == Var_p m; first order == v({i})."""
    posterior, atoms, _ = _setup(measure_kind)
    if measure_kind == "gaussian":
        # 60 Gauss-Hermite nodes per feature: the game converges to ~1e-14 (45 nodes: 1e-11).
        atoms = ref.gaussian_atoms(posterior.kernel.measure.mean, posterior.kernel.measure.std, 60)
    grid, shape = ref.tensor_grid(atoms)
    game = ref.variance_game(posterior.predict_mean(grid).reshape(shape), atoms)
    expected = ref.shapley_from_game(game, 3)
    result = global_shapley_values(posterior, chunk_size=7)  # several row blocks
    assert isinstance(result, GlobalShapleyValues)
    scale = game(frozenset(range(3)))
    np.testing.assert_allclose(result.values, expected, rtol=0, atol=1e-10 * scale)
    assert result.total_variance == pytest.approx(scale, rel=1e-10)
    assert result.values.sum() == pytest.approx(result.total_variance, rel=1e-10)
    first = [game(frozenset({i})) for i in range(3)]
    np.testing.assert_allclose(result.first_order, first, rtol=0, atol=1e-10 * scale)
    frame = result.to_frame()
    assert list(frame["feature"]) == posterior.feature_names
    np.testing.assert_allclose(frame["shapley_index"].sum(), 1.0)
    assert np.all(result.first_order <= result.values + 1e-12)


def test_thirty_features_complete_and_consistent():
    d, n = 30, 40
    rng = np.random.default_rng(0)
    X = rng.normal(size=(n, d))
    y = X[:, 0] * X[:, 1] + np.sin(X[:, 2]) + 0.1 * rng.normal(size=n)
    kernel = OrthogonalAdditive(
        np.full(d, 3.0), 0.5 ** np.arange(d + 1), Gaussian(0.0, 1.0)
    )
    posterior = ExactPosterior(X, y, kernel, 0.1)
    attribution = shapley_values(posterior, rng.normal(size=(10, d)), chunk_size=4)
    gaps = attribution.completeness_gap()
    assert gaps["mean"] < 1e-9 and gaps["variance"] < 1e-9
    assert np.all(np.linalg.eigvalsh(attribution.cov) > -1e-10)
    result = global_shapley_values(posterior)
    assert result.values.sum() == pytest.approx(result.total_variance, rel=1e-9)
    assert np.all(result.values >= -1e-12)
    # The sum above is computed from the same moment matrices as the total (it checks the
    # algebra only); the total itself against Monte Carlo of Var_p m under the measure
    # N(0, I): z-score below 5 with the sample variance's own standard error.
    samples = posterior.predict_mean(np.random.default_rng(1).normal(size=(20000, d)))
    variance, standard_error = variance_with_standard_error(samples)
    assert abs(result.total_variance - variance) < 5 * standard_error


def test_refuses_other_kernels_and_bad_inputs():
    X, y = _data(0, 10, 3)
    posterior = ExactPosterior(X, y, RBF(1.0), NOISE)
    # A product kernel has local Shapley values (tests/explain/test_product_shapley.py); a
    # random-feature kernel has none.
    features = RandomFeatureKernel(np.random.default_rng(0).normal(size=(20, 3)), 1.0)
    with pytest.raises(TypeError, match="integrated_gradients"):
        shapley_values(ExactPosterior(X, y, features, NOISE), X[:2])
    with pytest.raises(TypeError, match="OrthogonalAdditive"):
        global_shapley_values(posterior)
    additive, _, _ = _setup("gaussian")
    with pytest.raises(ValueError, match="features"):
        shapley_values(additive, X[:2, :2])
    with pytest.raises(TypeError):
        shapley_values(object(), X[:2])


def test_mean_only_path_matches():
    posterior, _, _ = _setup("empirical")
    Xq = np.random.default_rng(9).normal(size=(5, 3))
    full = shapley_values(posterior, Xq)
    mean_only = shapley_values(posterior, Xq, return_cov=False, chunk_size=2)
    np.testing.assert_allclose(mean_only.mean, full.mean, atol=1e-13)
    assert mean_only.cov is None and mean_only.difference_variance is None
