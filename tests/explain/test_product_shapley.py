"""Exact Shapley values of product-kernel GPs (``gx.shapley_values`` with a game).

References, all independent of ``gpexplain.functionals.product_shapley``:

* brute-force 2^d enumeration of each game (``tests.reference.shapley_games``) on the
  posterior mean, and the exact posterior covariance of the same stencil ``W Sigma W^T`` from
  the joint posterior at the game's points (``posterior.predict(points, return_cov=True)``);
* shap's ``ExactExplainer`` (interventional game, same background) on the posterior mean and
  on scikit-learn's own ``predict``, agreement 1e-10;
* Monte Carlo over joint posterior samples of the game for the covariance (z-score <= 5 per
  entry at 4000 samples: a false alarm has probability < 1e-4 over all entries);
* the axioms: completeness (mean and variance), symmetry, dummy, additivity across
  posteriors; a d = 30 game with a closed-form answer.

Tolerances are relative to the largest entry: 1e-10 for finite references (the stencil and the
closed form only differ by round-off over 2^d terms), 1e-8 under a Gaussian measure (the
reference uses 30-node Gauss-Hermite per feature).
"""

from __future__ import annotations

import gpytorch.kernels as gk
import numpy as np
import pytest
import torch

import gpexplain as gx
from gpexplain.kernels import RBF, GPyTorchKernel
from gpexplain.kernels.gpytorch_adapter import input_scaled
from gpexplain.kernels.measures import Empirical, Gaussian, Uniform
from tests.reference import shapley_games as games
from tests.reference.shapley_brute_force import gaussian_atoms, legendre_atoms, shapley_from_game

rng = np.random.default_rng(3)
D = 5
Z = rng.normal(size=(25, D))
Y = np.sin(Z[:, 0]) + Z[:, 1] * Z[:, 2] - 0.5 * Z[:, 3] ** 2
XQ = rng.normal(size=(3, D))
BACKGROUND = rng.normal(size=(6, D))


def _gpytorch_product():
    """RBF on features 0, 1 (ARD) x Matern 3/2 on 2 x RQ on 3 x Matern 1/2 on 4, input-scaled."""
    rbf = gk.RBFKernel(ard_num_dims=2, active_dims=torch.tensor([0, 1]))
    rbf.lengthscale = torch.tensor([0.9, 1.4])
    matern = gk.MaternKernel(nu=1.5, active_dims=torch.tensor([2]))
    matern.lengthscale = torch.tensor(1.2)
    rq = gk.RQKernel(active_dims=torch.tensor([3]))
    rq.lengthscale, rq.alpha = torch.tensor(0.8), torch.tensor(1.7)
    rough = gk.MaternKernel(nu=0.5, active_dims=torch.tensor([4]))
    rough.lengthscale = torch.tensor(2.0)
    product = gk.ScaleKernel(gk.ProductKernel(rbf, matern, rq, rough))
    product.outputscale = torch.tensor(1.3)
    shift, scale = [0.1, -0.2, 0.0, 0.3, 0.0], [1.1, 0.9, 1.3, 1.0, 0.7]
    module = input_scaled(product.double(), shift, scale, 0.8)
    return GPyTorchKernel(module)


KERNELS = {
    "rbf-ard": lambda: RBF([0.8, 1.1, 1.5, 2.0, 0.9], 1.3),
    "gpytorch-product": _gpytorch_product,
}


def _posterior(kernel, y=Y):
    return gx.ExactPosterior(Z, y, kernel=kernel, noise=0.05, mean=0.3)


def _reference(posterior, x, references, weights=None):
    """Brute-force Shapley mean and covariance of the game at x."""
    points, index = games.game_points(x, references, weights)
    W = games.shapley_stencil(index, x.shape[0], len(points))
    mean, cov = posterior.predict(points, return_cov=True)
    return W @ mean, W @ cov @ W.T


def _close(actual, expected, tolerance):
    scale = max(float(np.max(np.abs(expected))), 1e-300)
    np.testing.assert_allclose(actual, expected, rtol=0, atol=tolerance * scale)


@pytest.mark.parametrize("kernel", list(KERNELS))
@pytest.mark.parametrize("game", ["baseline", "interventional", "empirical-measure"])
def test_matches_brute_force_enumeration(kernel, game):
    posterior = _posterior(KERNELS[kernel]())
    atoms = BACKGROUND[:2]  # 2^5 atom combinations per coalition
    if game == "baseline":
        arguments, references, weights = {"baseline": "median"}, np.median(Z, 0)[None, :], None
    elif game == "interventional":
        arguments, references, weights = {"background": BACKGROUND}, BACKGROUND, None
    else:
        arguments = {"measure": Empirical(atoms)}
        references, weights = games.product_measure_references(
            [(atoms[:, j], np.full(2, 0.5)) for j in range(D)]
        )
    attr = gx.shapley_values(posterior, XQ, **arguments)
    named = game if game != "empirical-measure" else "product-measure"
    assert attr.method == f"exact Shapley values ({named} game, product kernel, closed form)"
    if game == "baseline":
        np.testing.assert_array_equal(attr.baseline, references[0])
    for p, x in enumerate(XQ):
        mean, cov = _reference(posterior, x, references, weights)
        _close(attr.mean[p], mean, 1e-10)
        _close(attr.cov[p], cov, 1e-10)
    gaps = attr.completeness_gap()
    assert gaps["mean"] <= 1e-12 * np.abs(attr.prediction).max()
    assert gaps["variance"] <= 1e-12 * attr.difference_variance.max()
    mean_only = gx.shapley_values(posterior, XQ, game=named, return_cov=False, **arguments)
    _close(mean_only.mean, attr.mean, 1e-13)


@pytest.mark.parametrize(("d", "n_nodes", "with_cov"), [(3, 30, False), (2, 25, True)])
def test_gaussian_product_measure_matches_gauss_hermite_enumeration(d, n_nodes, with_cov):
    posterior = gx.ExactPosterior(Z[:, :d], Y, kernel=RBF([0.7, 1.2, 1.6][:d], 0.9), noise=0.05)
    measure = Gaussian([0.2, -0.1, 0.0][:d], [0.8, 1.1, 1.3][:d])
    attr = gx.shapley_values(posterior, XQ[:, :d], measure=measure)
    references, weights = games.product_measure_references(
        gaussian_atoms(measure.mean, measure.std, n_nodes)
    )
    for p, x in enumerate(XQ[:, :d]):
        if with_cov:
            mean, cov = _reference(posterior, x, references, weights)
            _close(attr.cov[p], cov, 1e-8)
        else:
            points, index = games.game_points(x, references, weights)
            W = games.shapley_stencil(index, d, len(points))
            mean = W @ posterior.predict_mean(points)
        _close(attr.mean[p], mean, 1e-8)
    assert attr.completeness_gap()["variance"] <= 1e-12 * attr.difference_variance.max()


def test_uniform_product_measure_matches_gauss_legendre_enumeration():
    # d = 2 with the covariance: the game's points over a 30-node Gauss-Legendre tensor grid
    # of the box (one panel, 2 to 4 lengthscales wide), mean and covariance by enumeration.
    posterior = gx.ExactPosterior(Z[:, :2], Y, kernel=RBF([0.7, 1.2], 0.9), noise=0.05)
    measure = Uniform([-1.5, -2.0], [1.0, 2.0])
    attr = gx.shapley_values(posterior, XQ[:, :2], measure=measure)
    references, weights = games.product_measure_references(
        legendre_atoms(measure.low, measure.high, 30)
    )
    for p, x in enumerate(XQ[:, :2]):
        mean, cov = _reference(posterior, x, references, weights)
        _close(attr.mean[p], mean, 1e-11)
        _close(attr.cov[p], cov, 1e-11)
    assert attr.completeness_gap()["variance"] <= 1e-12 * attr.difference_variance.max()


def test_uniform_product_measure_six_features_against_erf_enumeration():
    # d = 6: the 2^6 coalition values of the posterior mean, v(S) = m0 + s2 sum_n a_n
    # prod_{j in S} k_j(x_j, z_nj) prod_{j not in S} E_{s ~ U(lo_j, hi_j)} k_j(s, z_nj), the
    # expectation by erf; Shapley values by enumeration over the coalitions.
    from scipy.special import erf

    d, lengthscale, variance = 6, np.array([0.5, 0.9, 1.4, 3.0, 40.0, 0.2]), 1.3
    X = rng.normal(size=(30, d))
    posterior = gx.ExactPosterior(X, np.sin(X[:, 0]) + X[:, 1] * X[:, 2] - X[:, 5],
                                  kernel=RBF(lengthscale, variance), noise=0.05, mean=0.3)
    low, high = np.full(d, -1.5), np.array([1.5, 1.0, 2.0, 1.5, 1.5, 1.5])
    queries = rng.normal(size=(3, d))
    attr = gx.shapley_values(posterior, queries, measure=Uniform(low, high), return_cov=False)
    Zs, alpha = posterior.train_inputs, posterior.alpha
    scale = lengthscale * np.sqrt(2.0)
    embedding = lengthscale * np.sqrt(np.pi / 2) * (
        erf((high - Zs) / scale) - erf((low - Zs) / scale)) / (high - low)  # (n, d)
    for p, x in enumerate(queries):
        sections = np.exp(-0.5 * (x - Zs) ** 2 / lengthscale**2)

        def value(S, sections=sections):
            inside = np.isin(np.arange(d), sorted(S))
            factors = np.where(inside, sections, embedding)
            return 0.3 + variance * factors.prod(1) @ alpha

        expected = np.array(shapley_from_game(value, d))
        _close(attr.mean[p], expected, 1e-12)


def test_gaussian_measure_needs_squared_exponential_factors():
    posterior = _posterior(_gpytorch_product())
    with pytest.raises(TypeError, match="Empirical"):
        gx.shapley_values(posterior, XQ, measure=Gaussian(0.0, 1.0))


@pytest.mark.slow  # importing shap and its first (JIT-compiled) call: about 20 s
def test_agrees_with_shap_exact_explainer():
    shap = pytest.importorskip("shap")
    posterior = _posterior(RBF([0.8, 1.1, 1.5, 2.0, 0.9], 1.3))
    explainer = shap.explainers.Exact(posterior.predict_mean, BACKGROUND)
    expected = explainer(XQ)
    attr = gx.shapley_values(posterior, XQ, background=BACKGROUND, return_cov=False)
    _close(attr.mean, expected.values, 1e-10)
    np.testing.assert_allclose(attr.baseline_prediction, expected.base_values[0], atol=1e-12)


@pytest.mark.slow  # imports shap
def test_sklearn_normalize_y_white_noise_agrees_with_shap_on_predict():
    shap = pytest.importorskip("shap")
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import RBF as SkRBF
    from sklearn.gaussian_process.kernels import ConstantKernel, WhiteKernel

    kernel = ConstantKernel(2.0) * SkRBF([1.0, 1.5, 0.8, 2.0, 1.2]) + WhiteKernel(0.1)
    gpr = GaussianProcessRegressor(kernel, normalize_y=True, optimizer=None).fit(Z, 3 * Y + 5)
    attr = gx.shapley_values(gx.from_sklearn(gpr), XQ, background=BACKGROUND)
    expected = shap.explainers.Exact(gpr.predict, BACKGROUND)(XQ)
    _close(attr.mean, expected.values, 1e-10)
    assert attr.completeness_gap()["mean"] <= 1e-10 * np.abs(attr.prediction).max()


def test_covariance_matches_monte_carlo_over_posterior_samples():
    posterior = _posterior(KERNELS["gpytorch-product"]())
    x = XQ[0]
    attr = gx.shapley_values(posterior, x[None, :], background=BACKGROUND[:3])
    points, index = games.game_points(x, BACKGROUND[:3])
    W = games.shapley_stencil(index, D, len(points))
    mean, cov = posterior.predict(points, return_cov=True)
    eigenvalues, vectors = np.linalg.eigh(cov)
    root = vectors * np.sqrt(np.maximum(eigenvalues, 0.0))
    samples = mean + np.random.default_rng(0).normal(size=(4000, len(points))) @ root.T
    phi = samples @ W.T  # (4000, D): Shapley values of each sampled function
    n = len(phi)
    centred = phi - phi.mean(0)
    sample_cov = centred.T @ centred / (n - 1)
    # Standard error of a sample covariance of Gaussians: sqrt((S_ii S_jj + S_ij^2) / n).
    exact = attr.cov[0]
    stderr = np.sqrt((np.outer(np.diag(exact), np.diag(exact)) + exact**2) / n)
    assert np.max(np.abs(sample_cov - exact) / stderr) < 5.0
    mean_stderr = np.sqrt(np.diag(exact) / n)
    assert np.max(np.abs(phi.mean(0) - attr.mean[0]) / mean_stderr) < 5.0


def test_symmetry_and_dummy():
    # Features 0 and 1 exchangeable (equal lengthscales, training set closed under swapping
    # them), feature 4 ignored by the kernel (infinite lengthscale).
    swapped = Z[:, [1, 0, 2, 3, 4]]
    inputs = np.vstack([Z, swapped])
    y = np.concatenate([Y, Y]) + np.concatenate([Z[:, 0] + Z[:, 1]] * 2)
    kernel = RBF([1.1, 1.1, 1.5, 2.0, np.inf], 1.3)
    posterior = gx.ExactPosterior(inputs, y, kernel=kernel, noise=0.05)
    x = XQ[:2].copy()
    x[:, 1] = x[:, 0]
    background = BACKGROUND.copy()
    background = np.vstack([background, background[:, [1, 0, 2, 3, 4]]])
    attr = gx.shapley_values(posterior, x, background=background)
    _close(attr.mean[:, 0], attr.mean[:, 1], 1e-12)
    _close(attr.cov[:, 0, 0], attr.cov[:, 1, 1], 1e-12)
    _close(attr.cov[:, 0, 2], attr.cov[:, 1, 2], 1e-12)
    assert np.all(attr.mean[:, 4] == 0.0)
    assert np.all(attr.cov[:, 4, :] == 0.0)


def test_additivity_across_posteriors():
    kernel = KERNELS["rbf-ard"]()
    first = gx.ExactPosterior(Z, Y, kernel=kernel, noise=0.05)
    second = gx.ExactPosterior(Z, np.cos(Z).sum(1), kernel=kernel, noise=0.05)
    both = gx.ExactPosterior(Z, Y + np.cos(Z).sum(1), kernel=kernel, noise=0.05)
    values = [
        gx.shapley_values(post, XQ, background=BACKGROUND, return_cov=False).mean
        for post in (first, second, both)
    ]
    _close(values[2], values[0] + values[1], 1e-12)


def test_variational_and_mixture_posteriors_complete():
    kernel = KERNELS["rbf-ard"]()
    inducing = Z[:8]
    covariance = 0.1 * np.eye(8) + 0.01
    sparse = gx.VariationalPosterior(inducing, rng.normal(size=8), covariance, kernel, mean=0.1)
    mixture = gx.MixturePosterior([_posterior(kernel), _posterior(KERNELS["gpytorch-product"]())])
    for posterior in (sparse, mixture):
        attr = gx.shapley_values(posterior, XQ, background=BACKGROUND)
        gaps = attr.completeness_gap()
        assert gaps["mean"] <= 1e-10 * np.abs(attr.prediction).max()
    mean, cov = _reference(sparse, XQ[0], BACKGROUND)
    attr = gx.shapley_values(sparse, XQ[:1], background=BACKGROUND)
    _close(attr.mean[0], mean, 1e-10)
    _close(attr.cov[0], cov, 1e-10)


def test_thirty_features_closed_form_and_completeness():
    # One training point, every feature alike: v(S) = s2 p^|S| q^(d - |S|), so by symmetry
    # phi_i = s2 (p^d - q^d) / d (efficiency); half the features are then switched off.
    d = 30
    z = np.zeros((1, d))
    x, xt = np.full(d, 0.3), np.full(d, -0.2)
    posterior = gx.ExactPosterior(z, np.array([1.0]), kernel=RBF(np.full(d, 2.0), 1.5),
                                  noise=0.1)
    attr = gx.shapley_values(posterior, x[None, :], baseline=xt)
    p, q = np.exp(-0.5 * 0.3**2 / 4), np.exp(-0.5 * 0.2**2 / 4)
    expected = float(posterior.alpha[0]) * 1.5 * (p**d - q**d) / d
    _close(attr.mean[0], np.full(d, expected), 1e-12)
    lengthscale = np.where(np.arange(d) % 2 == 0, 1.5, np.inf)
    inputs = np.random.default_rng(1).normal(size=(40, d))
    wide = gx.ExactPosterior(inputs, inputs[:, 0] - inputs[:, 2] ** 2,
                             kernel=RBF(lengthscale * 3.0, 1.0), noise=0.05)
    attr = gx.shapley_values(wide, inputs[:2] + 0.1, background=inputs[:4])
    assert np.all(attr.mean[:, 1::2] == 0.0)
    gaps = attr.completeness_gap()
    assert gaps["mean"] <= 1e-10 * np.abs(attr.prediction).max()
    assert gaps["variance"] <= 1e-10 * attr.difference_variance.max()


def test_default_game_keeps_additive_gp_behaviour():
    measure = Gaussian(0.0, 1.0)
    kernel = gx.kernels.OrthogonalAdditive([0.8, 1.2, 1.5], [0.2, 1.0, 0.5, 0.25], measure)
    posterior = gx.ExactPosterior(Z[:, :3], Y, kernel=kernel, noise=0.05)
    attr = gx.shapley_values(posterior, XQ[:, :3])
    assert attr.method == "exact Shapley values (orthogonal additive GP, gaussian measure)"
    with pytest.raises(TypeError, match="integrated_gradients"):
        gx.shapley_values(posterior, XQ[:, :3], baseline="mean")


@pytest.mark.parametrize(
    "kernel",
    [
        lambda: GPyTorchKernel(gk.ScaleKernel(gk.MaternKernel(nu=2.5, ard_num_dims=D))),
        lambda: GPyTorchKernel(gk.AdditiveKernel(gk.RBFKernel(), gk.RBFKernel())),
        lambda: gx.kernels.RandomFeatureKernel(rng.normal(size=(20, D)), 1.0),
    ],
    ids=["matern-over-several-features", "sum", "random-features"],
)
def test_kernels_without_product_structure_are_refused(kernel):
    posterior = _posterior(kernel())
    with pytest.raises(TypeError, match=r"(?s)product kernel.*gx\.integrated_gradients"):
        gx.shapley_values(posterior, XQ, background=BACKGROUND)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"game": "conditional"}, "unknown Shapley game .conditional."),
        ({"game": "interventional"}, "needs background="),
        ({"game": "product-measure"}, "needs measure="),
        ({"game": "baseline", "background": BACKGROUND}, "does not apply to the baseline game"),
        ({"baseline": "mean", "measure": Gaussian()}, "pass one of"),
        ({"background": BACKGROUND[:, :3]}, "background"),
        ({"background": np.full((2, D), np.nan)}, "background"),
        ({"baseline": [0.0, 1.0]}, "baseline has 2 values"),
    ],
)
def test_bad_arguments_are_named(arguments, message):
    with pytest.raises(ValueError, match=message):
        gx.shapley_values(_posterior(KERNELS["rbf-ard"]()), XQ, **arguments)


def test_measure_must_be_a_measure():
    with pytest.raises(TypeError, match="gx.measures.Gaussian"):
        gx.shapley_values(_posterior(KERNELS["rbf-ard"]()), XQ, measure="gaussian")


def test_gpytorch_exact_gp_adapter_with_one_dimensional_factors():
    import gpytorch

    from tests.posterior.test_adapters import _ExactModel

    factors = [gk.MaternKernel(nu=nu, active_dims=torch.tensor([j]))
               for j, nu in enumerate([0.5, 1.5, 2.5])]
    for factor, length in zip(factors, [0.7, 1.1, 1.6], strict=True):
        factor.lengthscale = torch.tensor(length)
    covariance = gk.ScaleKernel(gk.ProductKernel(*factors)).double()
    likelihood = gpytorch.likelihoods.GaussianLikelihood().double()
    likelihood.noise = torch.tensor(0.04, dtype=torch.float64)
    mean = gpytorch.means.ConstantMean().double()
    model = _ExactModel(torch.as_tensor(Z[:, :3]), torch.as_tensor(Y), likelihood, mean,
                        covariance).double()
    posterior = gx.from_gpytorch(model, likelihood)
    attr = gx.shapley_values(posterior, XQ[:, :3], background=BACKGROUND[:4, :3])
    for p, x in enumerate(XQ[:, :3]):
        expected_mean, expected_cov = _reference(posterior, x, BACKGROUND[:4, :3])
        _close(attr.mean[p], expected_mean, 1e-10)
        _close(attr.cov[p], expected_cov, 1e-10)
