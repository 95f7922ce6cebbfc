"""Explanations of a linear model of coregionalisation (LMC, issue 24) per output and across
outputs, against ``tests.reference.lmc`` (NumPy, explicit inverse, closed-form RBF
derivatives written there; no library code):

* gradients: the closed-form derivative cross and prior terms summed over the two terms;
* integrated gradients: the same terms integrated along the path by 64-node Gauss-Legendre
  (round-off for these smooth integrands), mean and covariance across features and outputs;
* Shapley values (baseline, interventional and product-measure games): brute force over the
  2^d coalitions (and the background rows, or a Gauss-Hermite grid), a linear combination of
  the joint posterior of all outputs at the hybrid points (exact, no quadrature);
* the covariance across points, outputs and features (``return_cov="points"``);
* Monte Carlo over joint posterior samples of all outputs for the cross-output covariance
  (|z| < 5 per entry), completeness per output against the reference posterior mean;
* what the term form cannot give yet is refused by name.
"""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pytest

import gpexplain as gx
from gpexplain.functionals import LocalLinearWeight
from tests.reference import shapley_brute_force, shapley_games
from tests.reference.lmc import derivative_terms, joint_moments, problem
from tests.reference.shapley_interactions import interaction_stencil

NAMES = ["yield", "cost"]
BACKGROUND = np.array([[0.2, -0.5, 0.1], [-0.7, 0.3, 0.8], [1.0, 0.4, -0.6]])


@pytest.fixture(scope="module")
def lmc():
    model = problem(seed=3)
    posterior = gx.LMCPosterior(
        model.X, model.tasks, model.y,
        [gx.kernels.RBF(ls, 1.0) for ls in model.lengthscales], model.matrices, model.noise,
        mean=model.means, output_names=NAMES, feature_names=["u", "v", "w"])
    Xq = np.random.default_rng(7).uniform(-1.5, 1.5, size=(3, 3))
    return posterior, model, Xq


def _derivative_functional(model, centres, W):
    """``L_a f_i(point p) = sum_k W[p, k, a] d/dx_a f_i(centres[k])``: mean (m, t, D) and
    covariance (m, t, D, m, t, D) under the reference posterior (closed-form derivative terms,
    explicit inverse)."""
    cross, prior = derivative_terms(model, centres, centres)  # (t, K, D, N), (t, K, D, t, K, D)
    C = np.einsum("pka,tkan->ptan", W, cross)
    P = np.einsum("pka,qlb,ikajlb->piaqjb", W, W, prior)
    m, t, D, N = C.shape
    flat = C.reshape(m * t * D, N)
    cov = P.reshape(m * t * D, m * t * D) - flat @ model.inverse() @ flat.T
    return C @ model.weights(), cov.reshape(m, t, D, m, t, D)


def _reference_gradients_at(model, X):
    return _derivative_functional(model, X, np.ones((len(X), 1, X.shape[1])) * np.eye(len(X))[
        :, :, None])


def _reference_integrated_gradients_at(model, X, baseline, n_nodes=64):
    nodes, weights = np.polynomial.legendre.leggauss(n_nodes)
    nodes, weights = 0.5 * (nodes + 1), 0.5 * weights
    paths = baseline + nodes[None, :, None] * (X - baseline)[:, None, :]  # (m, k, D)
    m, D = X.shape
    W = np.zeros((m, m * n_nodes, D))
    for p in range(m):
        W[p, p * n_nodes:(p + 1) * n_nodes] = weights[:, None] * (X[p] - baseline)
    return _derivative_functional(model, paths.reshape(-1, D), W)


def _at_one_point(reference):
    def one(model, x, *args):
        mean, cov = reference(model, x[None], *args)
        return mean[0], cov[0, :, :, 0]
    return one


_reference_gradients = _at_one_point(_reference_gradients_at)
_reference_integrated_gradients = _at_one_point(_reference_integrated_gradients_at)


def _shapley_matrix(x, baseline):
    """Hybrid points ``(x_S, b_-S)`` for all S, and W (d, 2^d) with phi = W v."""
    d = len(x)
    subsets = list(itertools.product([0, 1], repeat=d))
    points = np.array([np.where(np.array(s, bool), x, baseline) for s in subsets])
    index = {s: k for k, s in enumerate(subsets)}
    W = np.zeros((d, len(subsets)))
    for a in range(d):
        for s in subsets:
            if s[a]:
                continue
            size = sum(s)
            weight = math.factorial(size) * math.factorial(d - size - 1) / math.factorial(d)
            with_a = tuple(1 if b == a else s[b] for b in range(d))
            W[a, index[with_a]] += weight
            W[a, index[s]] -= weight
    return points, W


def _reference_shapley(model, x, references):
    """Shapley values of ``v(S) = mean_r f(x_S, r_-S)`` over the rows of ``references`` (one
    row: the baseline game): the average of each row's linear combination, over the joint
    posterior of all outputs at every row's hybrid points."""
    references = np.atleast_2d(references)
    parts = [_shapley_matrix(x, reference) for reference in references]
    points = np.vstack([part[0] for part in parts])
    W = np.hstack([part[1] for part in parts]) / len(references)
    return _stencil_moments(model, points, W)[:2]


def _stencil_moments(model, points, W):
    """``values_i = W @ f_i(points)`` for every output i: mean (t, D), covariance
    (t, D, t, D), and the joint posterior mean (t, K) at the points."""
    mean, cov = joint_moments(model, points)  # (t, K), (t K, t K)
    t, D = model.n_outputs, len(W)
    big = np.kron(np.eye(t), W)
    return mean @ W.T, (big @ cov @ big.T).reshape(t, D, t, D), mean


def _assert_moments(mean, cov, expected_mean, expected_cov, tolerance):
    np.testing.assert_allclose(mean, expected_mean, rtol=0,
                               atol=tolerance * np.abs(expected_mean).max())
    np.testing.assert_allclose(cov, expected_cov, rtol=0,
                               atol=tolerance * np.abs(expected_cov).max())


REFERENCES = {
    "gradients": (lambda p, X, b: gx.gradients(p, X),
                  lambda model, x, b: _reference_gradients(model, x)),
    "integrated_gradients": (lambda p, X, b: gx.integrated_gradients(p, X, baseline=b),
                             _reference_integrated_gradients),
    "shapley_values": (lambda p, X, b: gx.shapley_values(p, X, baseline=b),
                       _reference_shapley),
    "shapley_values_interventional": (
        lambda p, X, b: gx.shapley_values(p, X, background=BACKGROUND),
        lambda model, x, b: _reference_shapley(model, x, BACKGROUND)),
}


@pytest.mark.parametrize("method", sorted(REFERENCES))
def test_lmc_explanations_equal_the_sum_over_terms_per_output_and_across_outputs(lmc, method):
    posterior, model, Xq = lmc
    explain, reference = REFERENCES[method]
    baseline = model.X.mean(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # complete per output: no CompletenessWarning
        result = explain(posterior, Xq, baseline)
    t, d = 2, 3
    assert result.mean.shape == (3, t, d) and result.cov.shape == (3, t, d, t, d)
    worst_mean = worst_cov = 0.0
    for p, x in enumerate(Xq):
        mean, cov = reference(model, x, baseline)
        worst_mean = max(worst_mean, np.abs(result.mean[p] - mean).max() / np.abs(mean).max())
        worst_cov = max(worst_cov, np.abs(result.cov[p] - cov).max() / np.abs(cov).max())
        for i, name in enumerate(NAMES):  # per output, and the Attribution of that output
            np.testing.assert_allclose(result[name].mean[p], mean[i],
                                       atol=1e-9 * np.abs(mean).max())
            np.testing.assert_allclose(result[name].cov[p], cov[i, :, i, :],
                                       atol=1e-9 * np.abs(cov).max())
        assert np.abs(cov[0, :, 1, :]).max() > 0.05 * np.abs(cov).max()  # correlated outputs
    assert worst_mean < 1e-9 and worst_cov < 1e-9, (worst_mean, worst_cov)


@pytest.mark.parametrize("method", ["gradients", "integrated_gradients"])
def test_lmc_covariance_across_points_and_outputs_equals_the_reference(lmc, method):
    """``joint_point_cov`` (points x outputs x features) of two points against the reference
    functional of the joint posterior, the blocks between other outputs at other points
    included; each output's ``point_cov`` is its diagonal output block."""
    posterior, model, Xq = lmc
    X, baseline = Xq[:2], model.X.mean(0)
    if method == "gradients":
        result = gx.gradients(posterior, X, return_cov="points")
        mean, cov = _reference_gradients_at(model, X)
    else:
        result = gx.integrated_gradients(posterior, X, baseline=baseline, return_cov="points")
        mean, cov = _reference_integrated_gradients_at(model, X, baseline)
    exact = result.point_cov_dense()  # (p, i, a, q, j, b)
    scale = np.abs(cov).max()
    np.testing.assert_allclose(result.mean, mean, atol=1e-9 * np.abs(mean).max())
    np.testing.assert_allclose(exact, cov, rtol=0, atol=1e-9 * scale)
    assert np.abs(cov[0, 0, :, 1, 1, :]).max() > 0.01 * scale  # other output, other point
    for i, name in enumerate(NAMES):
        own = result[name].point_cov.dense()  # (p, a, q, b)
        np.testing.assert_allclose(own, cov[:, i, :, :, i, :], rtol=0, atol=1e-9 * scale)


def test_lmc_product_measure_shapley_values_equal_the_enumerated_game():
    """The product-measure game ``v(S) = E_{r ~ p} f(x_S, r_-S)`` under a Gaussian measure,
    enumerated on a 20-node Gauss-Hermite grid per feature (``tests.reference.shapley_games``;
    d = 2 keeps the joint posterior of both outputs at every grid point small): mean and
    covariance across features and outputs, and completeness per output (base value
    ``E_p m_i``, variance ``Var[f_i(x) - E_p f_i]``) without a CompletenessWarning."""
    model = problem(seed=5, d=2)
    posterior = gx.LMCPosterior(
        model.X, model.tasks, model.y,
        [gx.kernels.RBF(ls, 1.0) for ls in model.lengthscales], model.matrices, model.noise,
        mean=model.means)
    centre, spread = np.array([0.2, -0.3]), np.array([0.5, 0.6])
    X = np.array([[0.5, -1.0], [-1.2, 0.7]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = gx.shapley_values(posterior, X, measure=gx.measures.Gaussian(centre, spread))
    references, weights = shapley_games.product_measure_references(
        shapley_brute_force.gaussian_atoms(centre, spread, 20))
    for p, x in enumerate(X):
        points, index = shapley_games.game_points(x, references, weights)
        W = shapley_games.shapley_stencil(index, 2, len(points))
        mean, cov, values = _stencil_moments(model, points, W)
        _assert_moments(result.mean[p], result.cov[p], mean, cov, 1e-8)
        rows, grid_weights = index[frozenset()]
        base = values[:, rows] @ grid_weights  # E_p m_i over the grid
        np.testing.assert_allclose([a.baseline_prediction for a in result.attributions], base,
                                   rtol=1e-8)


@pytest.mark.parametrize("index", ["k-SII", "STII"])
def test_lmc_shapley_interactions_equal_the_enumerated_game(lmc, index):
    """Order-2 interaction indices of the baseline game per output and across outputs,
    against the brute-force stencil over the 2^d hybrid points
    (``tests.reference.shapley_interactions``) applied to the joint posterior."""
    posterior, model, Xq = lmc
    baseline = model.X.mean(0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # efficient per output: no CompletenessWarning
        result = gx.shapley_interactions(posterior, Xq[:2], index=index, baseline=baseline)
    assert result.mean.shape == (2, 2, 3 + 3)  # t outputs, d + d (d - 1) / 2 values
    for p, x in enumerate(Xq[:2]):
        points, game = shapley_games.game_points(x, baseline)
        W = interaction_stencil(game, 3, len(points), index)
        mean, cov, _ = _stencil_moments(model, points, W)
        _assert_moments(result.mean[p], result.cov[p], mean, cov, 1e-9)


def test_lmc_marginal_explanations_are_the_joint_ones(lmc):
    posterior, model, Xq = lmc
    baseline = model.X.mean(0)
    joint = gx.integrated_gradients(posterior, Xq, baseline=baseline)
    for i, name in enumerate(NAMES):
        alone = gx.integrated_gradients(posterior.marginal(i), Xq, baseline=baseline)
        np.testing.assert_allclose(alone.mean, joint[name].mean, rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(alone.cov, joint[name].cov, rtol=1e-12, atol=1e-14)
        shapley = gx.shapley_values(posterior.marginal(name), Xq, baseline=baseline)
        mean, _ = _reference_shapley(model, Xq[0], baseline)
        np.testing.assert_allclose(shapley.mean[0], mean[i], atol=1e-9 * np.abs(mean).max())


def test_lmc_integrated_gradients_are_complete_against_the_reference_mean(lmc):
    posterior, model, Xq = lmc
    baseline = model.X.mean(0)
    result = gx.integrated_gradients(posterior, Xq, baseline=baseline)
    mean, cov = joint_moments(model, np.vstack([Xq, baseline]))  # (t, m + 1)
    m = len(Xq)
    for i, name in enumerate(NAMES):
        attribution = result[name]
        np.testing.assert_allclose(attribution.mean.sum(1), mean[i, :m] - mean[i, m],
                                   rtol=1e-9, atol=1e-10)
        # 1^T Cov 1 = Var[f_i(x) - f_i(baseline)] from the reference covariance
        block = cov[i * (m + 1):(i + 1) * (m + 1), i * (m + 1):(i + 1) * (m + 1)]
        expected = np.diag(block)[:m] + block[m, m] - 2 * block[:m, m]
        np.testing.assert_allclose(attribution.cov.sum((1, 2)), expected, rtol=1e-8)


def _monte_carlo(model, points, n_samples, seed):
    mean, cov = joint_moments(model, points)
    values, vectors = np.linalg.eigh(cov)
    root = vectors * np.sqrt(np.clip(values, 0, None))
    rng = np.random.default_rng(seed)
    return mean.ravel() + rng.standard_normal((n_samples, mean.size)) @ root.T


def _z_scores(samples, exact_mean, exact_cov):
    """Largest |z| of the sample covariance and mean of ``samples`` (S, k) against exact."""
    n_samples = len(samples)
    empirical = np.cov(samples, rowvar=False)
    stderr = np.sqrt((np.outer(np.diag(exact_cov), np.diag(exact_cov)) + exact_cov**2)
                     / n_samples)
    z_cov = np.abs((empirical - exact_cov) / stderr).max()
    z_mean = np.abs((samples.mean(0) - exact_mean) / np.sqrt(np.diag(exact_cov) / n_samples))
    return z_cov, z_mean.max()


def test_lmc_cross_output_covariance_against_monte_carlo(lmc):
    posterior, model, Xq = lmc
    x, baseline = Xq[1], model.X.mean(0)
    t, d, n_samples = 2, 3, 20000
    # Shapley values: a linear combination of f at the 2^d hybrid points, sampled jointly.
    points, W = _shapley_matrix(x, baseline)
    samples = _monte_carlo(model, points, n_samples, seed=1).reshape(n_samples, t, len(points))
    phi = np.einsum("stk,ak->sta", samples, W).reshape(n_samples, t * d)
    result = gx.shapley_values(posterior, x[None], baseline=baseline)
    z_cov, z_mean = _z_scores(phi, result.mean[0].ravel(), result.cov[0].reshape(t * d, t * d))
    assert z_cov < 5 and z_mean < 5, (z_cov, z_mean)
    # Integrated gradients: central differences of the joint samples at 12 path nodes.
    nodes, weights = np.polynomial.legendre.leggauss(12)
    nodes, weights = 0.5 * (nodes + 1), 0.5 * weights
    h = 1e-3
    path = baseline + nodes[:, None] * (x - baseline)
    stencil = np.concatenate([path[:, None, :] + s * h * np.eye(d)[None] for s in (1, -1)])
    samples = _monte_carlo(model, stencil.reshape(-1, d), n_samples, seed=2)
    samples = samples.reshape(n_samples, t, 2, len(nodes), d)
    gradients = (samples[:, :, 0] - samples[:, :, 1]) / (2 * h)
    ig = ((x - baseline) * np.einsum("k,stkd->std", weights, gradients)).reshape(n_samples, -1)
    result = gx.integrated_gradients(posterior, x[None], baseline=baseline)
    exact = result.cov[0].reshape(t * d, t * d)
    z_cov, z_mean = _z_scores(ig, result.mean[0].ravel(), exact)
    assert np.abs(exact[:d, d:]).max() > 0.1 * np.abs(exact).max()  # not trivially zero
    assert z_cov < 5 and z_mean < 5, (z_cov, z_mean)


def test_what_the_term_form_cannot_give_is_refused_by_name(lmc):
    posterior, model, Xq = lmc
    works = "available: exact Shapley interactions; exact Shapley values; integrated gradients"
    marginal = posterior.marginal(0)
    with pytest.raises(TypeError, match=works):  # GPX weights need a locally linear kernel
        LocalLinearWeight(3, "contributions").bind(marginal.kernel, marginal.train_inputs)
    import gpytorch  # a Matern over three features jointly: no product of one-feature factors

    matern = gpytorch.kernels.MaternKernel(nu=2.5, ard_num_dims=3).double()
    mixed = gx.LMCPosterior(model.X, model.tasks, model.y,
                            [gx.kernels.RBF(model.lengthscales[0], 1.0), matern],
                            model.matrices, model.noise, mean=model.means)
    with pytest.raises(TypeError, match="Sobol indices of every term need a product kernel"):
        gx.global_sensitivity(mixed)
    with pytest.raises(TypeError, match="use gx.explain_variance\\(..., method='ig'\\)"):
        gx.explain_variance(posterior.marginal(0), Xq, method="shapley")  # not a product kernel


def test_lmc_with_a_gpytorch_matern_term_is_complete_per_output(lmc):
    """Terms of different kernel types: each term is evaluated by its own scheme (closed form
    for the RBF, graded quadrature for the Matern 5/2) and summed; completeness of the mean
    and of the covariance per output, against the posterior's own prediction."""
    import gpytorch

    _, model, Xq = lmc
    matern = gpytorch.kernels.ScaleKernel(
        gpytorch.kernels.MaternKernel(nu=2.5, ard_num_dims=3)).double()
    posterior = gx.LMCPosterior(model.X, model.tasks, model.y,
                                [gx.kernels.RBF(model.lengthscales[0], 1.0), matern],
                                model.matrices, model.noise, mean=model.means)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no CompletenessWarning
        result = gx.integrated_gradients(posterior, Xq[:2])
    assert "closed form" in result[0].method and "quadrature" in result[0].method
    for attribution in result.attributions:
        gaps = attribution.completeness_gap()
        assert gaps["mean"] < 1e-10 and gaps["variance"] < 1e-10, gaps


def _reference_variance(model, points, output):
    """Posterior variance of output ``output`` at each point (the reference joint posterior)."""
    _, cov = joint_moments(model, points)
    return np.diag(cov).reshape(model.n_outputs, len(points))[output]


def test_lmc_posterior_variance_explanations_of_each_output(lmc):
    """``gx.explain_variance`` of an output's marginal (its torch route sums the terms):
    integrated gradients of ``s2_i`` against central differences of the reference variance
    along a 16-node Gauss-Legendre path (difference error ~1e-8), complete against the
    reference ``s2_i(x) - s2_i(baseline)``; exact Shapley values of ``s_i`` in the baseline game
    against the 2^d coalitions of the reference standard deviation."""
    posterior, model, Xq = lmc
    x, baseline = Xq[0], model.X.mean(0)
    nodes, weights = np.polynomial.legendre.leggauss(16)
    nodes, weights = 0.5 * (nodes + 1), 0.5 * weights
    path = baseline + nodes[:, None] * (x - baseline)
    h = 1e-4
    for i in range(2):
        marginal = posterior.marginal(i)
        result = gx.explain_variance(marginal, x[None], baseline=baseline, method="ig")
        ends = _reference_variance(model, np.vstack([x, baseline]), i)
        assert result.prediction[0] == pytest.approx(ends[0], rel=1e-12)
        assert result.mean[0].sum() == pytest.approx(ends[0] - ends[1], rel=1e-9, abs=1e-12)
        expected = np.zeros(3)
        for a in range(3):
            step = h * np.eye(3)[a]
            up = _reference_variance(model, path + step, i)
            down = _reference_variance(model, path - step, i)
            expected[a] = (x - baseline)[a] * weights @ ((up - down) / (2 * h))
        np.testing.assert_allclose(result.mean[0], expected, rtol=0,
                                   atol=1e-6 * np.abs(expected).max())
        std = gx.explain_variance(marginal, x[None], baseline=baseline, what="std")
        points, W = _shapley_matrix(x, baseline)
        reference = W @ np.sqrt(_reference_variance(model, points, i))
        np.testing.assert_allclose(std.mean[0], reference, rtol=0,
                                   atol=1e-10 * np.abs(reference).max())
