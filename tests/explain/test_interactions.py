"""Exact Shapley interactions of GPs (``gx.shapley_interactions``): k-SII, SII and STII.

References, all independent of ``gpexplain.functionals.product_interactions`` and
``additive_interactions``:

* brute-force 2^d enumeration of each index from its definition
  (``tests.reference.shapley_interactions``) over the game's points, on the posterior mean, and
  the exact covariance of the same stencil ``W Sigma W^T`` from the joint posterior at the
  game's points; tolerance 1e-10 relative to the largest entry;
* shapiq's ``ExactComputer`` on the same posterior-mean game (1e-10);
* Monte Carlo over 4000 joint posterior sample paths at all coalition points for the
  covariance: every entry within |z| < 5 of the exact one (z with the Gaussian standard
  error of a sample covariance, ``sqrt((S_ii S_jj + S_ij^2) / N)``);
* the axioms: efficiency of each index (mean and covariance), symmetry, dummy (a feature the
  kernel ignores has zero interactions and zero variance), agreement with ``gx.shapley_values``
  (SII's order-1 values are the Shapley values); a d = 30 run.
"""

from __future__ import annotations

import warnings

import gpytorch.kernels as gk
import numpy as np
import pytest
import torch

import gpexplain as gx
from gpexplain.kernels import RBF, GPyTorchKernel, OrthogonalAdditive
from gpexplain.kernels.measures import Empirical
from tests.reference import shapley_games as games
from tests.reference.shapley_brute_force import marginal_game_points
from tests.reference.shapley_interactions import interaction_stencil

rng = np.random.default_rng(22)
D = 4
Z = rng.normal(size=(20, D))
Y = np.sin(Z[:, 0]) * Z[:, 1] + Z[:, 2] * Z[:, 3] - 0.3 * Z[:, 0] ** 2
XQ = rng.normal(size=(2, D))
BACKGROUND = rng.normal(size=(3, D))
INDICES = ["k-SII", "SII", "STII"]


def _posterior(kernel=None):
    kernel = RBF([0.8, 1.1, 1.5, 0.9], 1.3) if kernel is None else kernel
    return gx.ExactPosterior(Z, Y, kernel=kernel, noise=0.05, mean=0.3)


def _matern_product():
    """Matern 5/2 on feature 0 x RQ on 1 x RBF on 3: feature 2 is ignored (a dummy)."""
    matern = gk.MaternKernel(nu=2.5, active_dims=torch.tensor([0]))
    matern.lengthscale = torch.tensor(0.9)
    rq = gk.RQKernel(active_dims=torch.tensor([1]))
    rq.lengthscale, rq.alpha = torch.tensor(1.3), torch.tensor(0.7)
    rbf = gk.RBFKernel(active_dims=torch.tensor([3]))
    rbf.lengthscale = torch.tensor(1.1)
    product = gk.ScaleKernel(gk.ProductKernel(matern, rq, rbf))
    product.outputscale = torch.tensor(1.4)
    return GPyTorchKernel(product.double())


def _close(actual, expected, tolerance=1e-10):
    scale = max(float(np.max(np.abs(expected))), 1e-300)
    np.testing.assert_allclose(actual, expected, rtol=0, atol=tolerance * scale)


GAMES = {
    "baseline": ({"game": "baseline", "baseline": BACKGROUND[0]}, BACKGROUND[:1]),
    "interventional": ({"background": BACKGROUND}, BACKGROUND),
}


@pytest.mark.parametrize("index", INDICES)
@pytest.mark.parametrize("game", list(GAMES))
@pytest.mark.parametrize("kernel", ["rbf", "gpytorch-product"])
def test_mean_and_covariance_equal_brute_force_enumeration(index, game, kernel):
    posterior = _posterior(None if kernel == "rbf" else _matern_product())
    options, references = GAMES[game]
    result = gx.shapley_interactions(posterior, XQ, index=index, **options)
    for p, x in enumerate(XQ):
        points, lookup = games.game_points(x, references)
        W = interaction_stencil(lookup, D, len(points), index)
        mean, cov = posterior.predict(points, return_cov=True)
        _close(result.mean[p], W @ mean)
        _close(result.cov[p], W @ cov @ W.T)
    assert max(result.efficiency_gap().values()) < 1e-12


def test_product_measure_game_equals_enumeration_over_an_empirical_measure():
    atoms = rng.normal(size=(3, D))
    result = gx.shapley_interactions(_posterior(), XQ, measure=Empirical(atoms), index="STII")
    grid, weights = games.product_measure_references([(atoms[:, j], np.full(3, 1 / 3))
                                                      for j in range(D)])
    for p, x in enumerate(XQ):
        points, lookup = games.game_points(x, grid, weights)
        W = interaction_stencil(lookup, D, len(points), "STII")
        mean, cov = _posterior().predict(points, return_cov=True)
        _close(result.mean[p], W @ mean)
        _close(result.cov[p], W @ cov @ W.T)


@pytest.mark.parametrize("index", INDICES)
def test_agrees_with_shapiq_exact_computer(index):
    shapiq = pytest.importorskip("shapiq")
    posterior = _posterior()
    x = XQ[0]

    def game(coalitions):
        values = []
        for coalition in np.atleast_2d(coalitions).astype(bool):
            rows = BACKGROUND.copy()
            rows[:, coalition] = x[coalition]
            values.append(posterior.predict_mean(rows).mean())
        return np.array(values)

    exact = shapiq.ExactComputer(game, n_players=D)(index=index, order=2)
    ours = gx.shapley_interactions(posterior, x[None], background=BACKGROUND, index=index,
                                   return_cov=False)
    theirs = [exact[(i,)] for i in range(D)] + [exact[pair] for pair in ours.pairs]
    _close(ours.mean[0], np.array(theirs))
    converted = ours.to_shapiq(0)
    assert converted.index == index and converted.n_players == D
    np.testing.assert_array_equal([converted[pair] for pair in ours.pairs], ours.mean[0, D:])


def test_covariance_against_monte_carlo_sample_paths():
    posterior = _posterior()
    x = XQ[1]
    result = gx.shapley_interactions(posterior, x[None], background=BACKGROUND[:2])
    points, lookup = games.game_points(x, BACKGROUND[:2])
    W = interaction_stencil(lookup, D, len(points), "k-SII")
    mean, cov = posterior.predict(points, return_cov=True)
    n_samples = 4000
    jitter = 1e-10 * np.trace(cov) / len(cov) * np.eye(len(cov))
    paths = np.random.default_rng(5).multivariate_normal(mean, cov + jitter, size=n_samples,
                                                         method="eigh")
    values = paths @ W.T
    sample = np.cov(values, rowvar=False)
    exact = result.cov[0]
    standard_error = np.sqrt((np.outer(np.diag(exact), np.diag(exact)) + exact**2) / n_samples)
    z = (sample - exact) / np.maximum(standard_error, 1e-300)
    assert np.max(np.abs(z)) < 5.0, np.max(np.abs(z))
    z_mean = (values.mean(0) - result.mean[0]) / np.sqrt(np.diag(exact) / n_samples)
    assert np.max(np.abs(z_mean)) < 5.0


@pytest.mark.parametrize("index", INDICES)
def test_dummy_feature_has_zero_interactions(index):
    result = gx.shapley_interactions(_posterior(_matern_product()), XQ, background=BACKGROUND,
                                     index=index)
    dummy = [D + p for p, pair in enumerate(result.pairs) if 2 in pair] + [2]
    scale = np.abs(result.mean).max()
    assert np.abs(result.mean[:, dummy]).max() <= 1e-13 * scale
    assert np.abs(result.cov[:, dummy, :]).max() <= 1e-13 * np.abs(result.cov).max()


def test_symmetric_features_have_equal_values():
    kernel = RBF([1.0, 1.0, 1.3, 0.7], 1.1)
    z = np.vstack([Z, Z[:, [1, 0, 2, 3]]])  # the data, symmetric in features 0 and 1
    posterior = gx.ExactPosterior(z, np.concatenate([Y, Y]), kernel=kernel, noise=0.05)
    x = np.array([[0.4, 0.4, -0.2, 0.5]])
    result = gx.shapley_interactions(posterior, x, game="baseline", baseline=np.zeros(D))
    terms = dict(zip(result.term_names, result.mean[0], strict=True))
    np.testing.assert_allclose(terms["x0"], terms["x1"], atol=1e-12)
    np.testing.assert_allclose(terms["x0 x x2"], terms["x1 x x2"], atol=1e-12)
    np.testing.assert_allclose(terms["x0 x x3"], terms["x1 x x3"], atol=1e-12)


def test_sii_order_one_values_are_the_shapley_values():
    posterior = _posterior()
    interactions = gx.shapley_interactions(posterior, XQ, background=BACKGROUND, index="SII")
    values = gx.shapley_values(posterior, XQ, background=BACKGROUND)
    _close(interactions.main_effects(), values.mean, 1e-12)
    _close(interactions.cov[:, :D, :D], values.cov, 1e-12)
    assert interactions.baseline_prediction == values.baseline_prediction
    for index in INDICES:  # every index gives the Shapley values back, mean and covariance
        back = gx.shapley_interactions(posterior, XQ, background=BACKGROUND,
                                       index=index).shapley_values()
        _close(back.mean, values.mean, 1e-12)
        _close(back.cov, values.cov, 1e-12)
        assert max(back.completeness_gap().values()) < 1e-12


def test_thirty_features():
    d = 30
    generator = np.random.default_rng(30)
    z = generator.normal(size=(12, d))
    posterior = gx.ExactPosterior(z, np.sin(z[:, 0]) * z[:, 1], kernel=RBF(np.full(d, 4.0), 1.0),
                                  noise=0.1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sii = gx.shapley_interactions(posterior, z[:1] + 0.1, game="baseline", index="SII",
                                      return_cov=False)
        ksii = gx.shapley_interactions(posterior, z[:1] + 0.1, game="baseline")
    assert sii.mean.shape == (1, d + d * (d - 1) // 2) and ksii.cov.shape[1:] == (465, 465)
    values = gx.shapley_values(posterior, z[:1] + 0.1, game="baseline")
    _close(sii.main_effects(), values.mean, 1e-10)
    _close(ksii.mean[:, d:], sii.mean[:, d:], 1e-12)
    assert max(ksii.efficiency_gap().values()) < 1e-10 * max(1.0, float(ksii.prediction[0]))
    # positive semi-definite: measured by the efficiency check (warnings are errors here)


@pytest.mark.parametrize("index", INDICES)
def test_additive_gp_equals_enumeration_of_its_marginal_game(index):
    atoms = rng.uniform(-1.0, 1.0, size=(3, D))
    kernel = OrthogonalAdditive([0.8, 1.2, 1.5, 1.0], [0.2, 1.0, 0.5, 0.25, 0.1], Empirical(atoms))
    posterior = _posterior(kernel)
    result = gx.shapley_interactions(posterior, XQ, index=index)
    for p, x in enumerate(XQ):
        points, lookup = marginal_game_points(x, [(atoms[:, j], np.full(3, 1 / 3))
                                                  for j in range(D)])
        W = interaction_stencil(lookup, D, len(points), index)
        mean, cov = posterior.predict(points, return_cov=True)
        _close(result.mean[p], W @ mean, 1e-9)
        _close(result.cov[p], W @ cov @ W.T, 1e-9)


def test_mixtures_and_classifier_latents():
    first, second = _posterior(), _posterior(RBF([1.2, 0.7, 1.0, 1.4], 0.9))
    mixture = gx.MixturePosterior([first, second], [0.3, 0.7])
    result = gx.shapley_interactions(mixture, XQ, background=BACKGROUND)
    parts = [gx.shapley_interactions(part, XQ, background=BACKGROUND) for part in (first, second)]
    _close(result.mean, 0.3 * parts[0].mean + 0.7 * parts[1].mean, 1e-12)
    assert max(result.efficiency_gap().values()) < 1e-10
    labels = np.where(Y > np.median(Y), "b", "a")
    from sklearn.gaussian_process import GaussianProcessClassifier
    from sklearn.gaussian_process.kernels import RBF as SklearnRBF

    classifier = gx.from_sklearn(GaussianProcessClassifier(
        2.0 * SklearnRBF([1.0, 1.0, 1.2, 0.9]), optimizer=None).fit(Z, labels))
    latent = gx.shapley_interactions(classifier, XQ, game="baseline")
    assert "latent" in latent.method and np.all(np.isfinite(latent.cov))
    with pytest.raises(TypeError, match="integrated_gradients"):
        gx.shapley_interactions(classifier, XQ, output="probability")


def test_result_table_shapiq_and_save_load(tmp_path):
    result = gx.shapley_interactions(_posterior(), XQ, background=BACKGROUND, index="STII")
    frame = result.to_frame()
    assert list(frame.columns) == ["point", "order", "feature_i", "feature_j", "value", "std",
                                   "lower", "upper"]
    assert len(frame) == 2 * (D + D * (D - 1) // 2) and not frame.isna().any().any()
    assert (frame["lower"] <= frame["value"]).all() and (frame["value"] <= frame["upper"]).all()
    matrix = result.matrix()
    np.testing.assert_array_equal(matrix, np.swapaxes(matrix, 1, 2))
    assert matrix[0, 0, 1] == result.mean[0, D]
    loaded = gx.load(result.save(tmp_path / "inter"), expected=gx.ShapleyInteractions)
    for name in ("mean", "cov", "X", "prediction", "baseline", "difference_variance"):
        np.testing.assert_array_equal(getattr(loaded, name), getattr(result, name))
    assert (loaded.index, loaded.method, loaded.feature_names) == (
        result.index, result.method, result.feature_names)
    mean_only = gx.shapley_interactions(_posterior(), XQ, background=BACKGROUND, index="STII",
                                        return_cov=False)
    np.testing.assert_array_equal(mean_only.mean, result.mean)
    assert mean_only.cov is None


def test_arguments_are_validated_by_name():
    posterior = _posterior()
    with pytest.raises(ValueError, match="index must be one of"):
        gx.shapley_interactions(posterior, XQ, index="FSII")
    with pytest.raises(ValueError, match="background"):
        gx.shapley_interactions(posterior, XQ, game="interventional")
    with pytest.raises(ValueError, match="features"):
        gx.shapley_interactions(posterior, XQ[:, :2])
    with pytest.raises(TypeError, match="integrated_gradients"):
        gx.shapley_interactions(
            gx.ExactPosterior(Z, Y, kernel=gx.kernels.RandomFeatureKernel(
                rng.normal(size=(10, D)), 1.0), noise=0.1), XQ)
    with pytest.raises(ValueError, match="level"):
        gx.shapley_interactions(posterior, XQ).interval(1.5)


def test_heatmap_and_dependence_plots():
    plot = pytest.importorskip("gpexplain.plot")
    result = gx.shapley_interactions(_posterior(), rng.normal(size=(6, D)), background=BACKGROUND)
    figure = plot.plot_interactions(result)
    image = figure.axes[0].images[0].get_array()
    np.testing.assert_allclose(image, np.abs(result.matrix()).mean(0))
    marked = figure.axes[0].lines[0].get_xydata()  # pairs whose interval contains 0 everywhere
    lower, upper = result.interval()
    everywhere = np.all((lower[:, D:] <= 0) & (upper[:, D:] >= 0), axis=0)
    assert len(marked) == 2 * int(everywhere.sum())
    figure = plot.plot_interactions(result, point=2)
    np.testing.assert_allclose(figure.axes[0].images[0].get_array(), result.matrix()[2])
    plot.plot_interactions(result, point=2)
    figure = plot.plot_interaction_dependence(result, "x1")
    assert "x" in figure.axes[1].get_ylabel()
    with pytest.raises(TypeError, match="ShapleyInteractions"):
        plot.plot_interactions(gx.shapley_values(_posterior(), XQ, background=BACKGROUND))
    with pytest.raises(ValueError, match="out of range"):
        plot.plot_interactions(result, point=6)
    with pytest.raises(ValueError, match="unknown feature"):
        plot.plot_interaction_dependence(result, "nope")


def _second_order_on_grid(values, d):
    """Pure second-order Sobol variances of a function tabulated on a tensor grid with equal
    weights (axes = features, leading axes = samples), from the ANOVA definition."""
    axes = tuple(range(values.ndim - d, values.ndim))
    out = np.zeros(values.shape[: values.ndim - d] + (d, d))
    total = values.mean(axis=axes, keepdims=True)
    for i in range(d):
        for j in range(i + 1, d):
            keep_i = tuple(a for a in axes if a != axes[i])
            keep_j = tuple(a for a in axes if a != axes[j])
            keep_ij = tuple(a for a in axes if a not in (axes[i], axes[j]))
            g = (values.mean(axis=keep_ij, keepdims=True) - values.mean(axis=keep_i, keepdims=True)
                 - values.mean(axis=keep_j, keepdims=True) + total)
            out[..., i, j] = out[..., j, i] = (g**2).mean(axis=axes)
    return out


def test_second_order_sobol_against_enumeration_and_monte_carlo():
    atoms = rng.normal(size=(3, D))
    posterior = _posterior()
    result = gx.global_sensitivity(posterior, Empirical(atoms), interactions=True)
    grid = np.array(np.meshgrid(*[atoms[:, j] for j in range(D)], indexing="ij"))
    points = grid.reshape(D, -1).T
    mean, cov = posterior.predict(points, return_cov=True)
    shape = (3,) * D
    _close(result.second_order, _second_order_on_grid(mean.reshape(shape), D), 1e-10)
    n_samples = 3000
    jitter = 1e-10 * np.trace(cov) / len(cov) * np.eye(len(cov))
    paths = np.random.default_rng(7).multivariate_normal(mean, cov + jitter, size=n_samples,
                                                         method="eigh")
    sampled = _second_order_on_grid(paths.reshape((n_samples, *shape)), D)
    rows, cols = np.triu_indices(D, 1)
    sampled = sampled[:, rows, cols]
    standard_error = sampled.std(0) / np.sqrt(n_samples)
    z = (sampled.mean(0) - result.expected_second_order[rows, cols]) / standard_error
    assert np.max(np.abs(z)) < 5.0, z
    variance_error = np.sqrt(((sampled - sampled.mean(0)) ** 4).mean(0) - sampled.var(0) ** 2)
    z_var = (sampled.var(0) - result.second_order_std[rows, cols] ** 2) / (
        variance_error / np.sqrt(n_samples))
    assert np.max(np.abs(z_var)) < 5.0, z_var
    frame = result.interactions_frame()
    assert len(frame) == D * (D - 1) // 2 and not frame.isna().any().any()
    with pytest.raises(ValueError, match="interactions=True"):
        gx.global_sensitivity(posterior, Empirical(atoms)).interactions_frame()


def test_pipeline_with_a_text_column_groups_the_indicators():
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(Z[:, :3], columns=["a", "b", "c"])
    frame["kind"] = np.where(Z[:, 3] > 0, "up", "down")
    pipeline = gx.make_pipeline(gx.GPRegressor(kernel=RBF([1.0, 1.0, 1.2, 0.9, 0.9], 1.0),
                                               noise=0.05, optimizer=None))
    pipeline.fit(frame, Y)
    for index in ("k-SII", "SII"):
        result = gx.shapley_interactions(pipeline, frame.iloc[:2], game="baseline", index=index)
        assert result.feature_names == ["a", "b", "c", "kind"]
        assert result.mean.shape == (2, 4 + 6) and list(result.X[0, 3:]) == [frame["kind"][0]]
        assert max(result.efficiency_gap().values()) < 1e-8


def test_adapted_scikit_learn_posterior_agrees_with_its_shapley_values():
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import RBF as SklearnRBF
    from sklearn.gaussian_process.kernels import ConstantKernel, WhiteKernel

    kernel = ConstantKernel(1.3) * SklearnRBF([0.8, 1.1, 1.5, 0.9]) + WhiteKernel(0.05)
    gpr = GaussianProcessRegressor(kernel, optimizer=None, normalize_y=True).fit(Z, Y)
    posterior = gx.from_sklearn(gpr)
    result = gx.shapley_interactions(posterior, XQ, background=BACKGROUND, index="STII")
    values = gx.shapley_values(posterior, XQ, background=BACKGROUND)
    _close(result.shapley_values().mean, values.mean, 1e-10)
    np.testing.assert_allclose(result.prediction, gpr.predict(XQ), rtol=0, atol=1e-10)
