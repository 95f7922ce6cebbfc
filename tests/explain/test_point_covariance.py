"""Covariance of attributions across points (``return_cov="points"``, issue 25).

Against Monte Carlo over joint posterior sample paths (``tests/reference/posterior_sample_paths``,
|z| < 5 on every mean and covariance entry), for integrated gradients, gradients and baseline
Shapley values on exact, sparse variational and Laplace (latent) posteriors (integrated
gradients also on a random-feature posterior); GPX weights against explicit Gaussian
conditioning of the weights at training and query points; diagonal blocks equal to the
per-point covariance; the full matrix positive semi-definite; blocks of any size equal to one
block (Dask: tests/test_parallel.py).
"""

from __future__ import annotations

import numpy as np
import pytest

from gpexplain.explain._driver import explain
from gpexplain.explain._points import PointCovariance
from gpexplain.functionals import Gradient, IntegratedGradient
from gpexplain.functionals.local_linear_weight import LocalLinearWeight
from gpexplain.functionals.product_shapley import ProductShapley
from gpexplain.kernels import RBF
from gpexplain.kernels.locally_linear import LocallyLinear
from gpexplain.kernels.random_features import RandomFeatureKernel
from gpexplain.posterior import (
    ExactPosterior,
    LaplacePosterior,
    RandomFeaturePosterior,
    VariationalPosterior,
)
from tests.reference import posterior_sample_paths as ref

D = 3
rng = np.random.default_rng(25)
TRAIN = rng.uniform(-2, 2, size=(12, D))
Y = np.sin(TRAIN[:, 0]) + TRAIN[:, 1] * TRAIN[:, 2]
QUERY = rng.uniform(-1.5, 1.5, size=(3, D))
BASELINE = np.array([0.2, -0.3, 0.1])
LENGTHSCALE, VARIANCE = np.array([0.9, 1.3, 1.1]), 1.5
N_PATHS = 3000


def _exact():
    return ExactPosterior(TRAIN, Y, RBF(LENGTHSCALE, VARIANCE), 0.05)


def _variational():
    Z = TRAIN[::2]
    cov = 0.05 * np.eye(len(Z)) + 0.02 * np.ones((len(Z), len(Z)))
    return VariationalPosterior(Z, np.sin(Z[:, 0]), cov, RBF(LENGTHSCALE, VARIANCE), 0.3)


def _laplace():
    labels = (Y > np.median(Y)).astype(float)
    pi = 1.0 / (1.0 + np.exp(-(Y - np.median(Y))))  # a latent mode's probabilities
    return LaplacePosterior(TRAIN, labels, pi, RBF(LENGTHSCALE, VARIANCE))


POSTERIORS = {"exact": _exact, "variational": _variational, "laplace": _laplace}
FUNCTIONALS = {
    "integrated gradients": (lambda: IntegratedGradient(BASELINE[None, :]),
                             lambda p, X: ref.integrated_gradients(p, X, BASELINE, 24)),
    "gradients": (lambda: Gradient(), lambda p, X: p.grad(X)),
    "gradient x input": (lambda: Gradient(True, BASELINE),
                         lambda p, X: (X - BASELINE)[None] * p.grad(X)),
    "baseline shapley": (lambda: ProductShapley("baseline", BASELINE[None, :]),
                         lambda p, X: ref.baseline_shapley(p, X, BASELINE)),
}


def _paths(posterior, prior, seed):
    Q = posterior.quadratic_form(np.eye(len(posterior.train_inputs)))
    return ref.PosteriorPaths(prior, posterior.train_inputs, posterior.alpha, posterior.mean,
                              Q, N_PATHS, np.random.default_rng(seed))


def _assert_diagonal_blocks_and_psd(result, atol, psd_tolerance=1e-10):
    """Diagonal blocks equal the per-point covariance; the whole matrix symmetric PSD."""
    full = result.point_cov.dense()
    for p in range(len(result.mean)):
        np.testing.assert_allclose(full[p, :, p], result.cov[p], rtol=0,
                                   atol=atol * np.abs(result.cov).max())
    flat = full.reshape(result.mean.size, -1)
    np.testing.assert_array_equal(flat, flat.T)
    assert np.linalg.eigvalsh(flat).min() > -psd_tolerance * np.abs(flat).max()


def _check_against_paths(result, samples):
    full = result.point_cov.dense().reshape(result.mean.size, result.mean.size)
    mean_z, cov_z = ref.covariance_z_scores(
        samples.reshape(len(samples), -1), result.mean.ravel(), full)
    assert np.abs(mean_z).max() < 5 and np.abs(cov_z).max() < 5, (mean_z, cov_z)


@pytest.mark.parametrize("posterior_kind", sorted(POSTERIORS))
@pytest.mark.parametrize("name", sorted(FUNCTIONALS))
def test_covariance_across_points_matches_joint_sample_paths(posterior_kind, name):
    build, on_paths = FUNCTIONALS[name]
    posterior = POSTERIORS[posterior_kind]()
    result = explain(posterior, QUERY, build(), return_cov="points")
    paths = _paths(posterior, ref.SEPrior(LENGTHSCALE, VARIANCE, D, 100), seed=len(name))
    _check_against_paths(result, on_paths(paths, QUERY))
    _assert_diagonal_blocks_and_psd(result, 1e-11)


def test_random_feature_posterior_integrated_gradients_match_sample_paths():
    kernel = RandomFeatureKernel.from_rbf(RBF(LENGTHSCALE, VARIANCE), 10, D, random_state=1)
    posterior = RandomFeaturePosterior(TRAIN, Y, kernel, 0.05)
    result = explain(posterior, QUERY, IntegratedGradient(BASELINE[None, :]), return_cov="points")
    # the representer form of this posterior is over the training points, with a rank-20
    # kernel: sample its weights directly (f = phi^T w, w | y Gaussian), not by conditioning
    phi = lambda X: np.sqrt(VARIANCE / 10) * np.hstack(  # noqa: E731
        [np.cos(X @ kernel.frequencies.T), np.sin(X @ kernel.frequencies.T)])
    F = phi(TRAIN)
    precision = F.T @ F / 0.05 + np.eye(20)
    cov_w = np.linalg.inv(precision)
    mean_w = cov_w @ F.T @ Y / 0.05
    weights = np.random.default_rng(5).multivariate_normal(mean_w, cov_w, size=N_PATHS)
    nodes, node_weights = np.polynomial.legendre.leggauss(64)
    samples = 0.0
    for s, w in zip(0.5 * (nodes + 1), 0.5 * node_weights, strict=True):
        points = BASELINE + s * (QUERY - BASELINE)  # gradient of phi(x)^T w, by hand
        v = kernel.frequencies
        grad_phi = np.sqrt(VARIANCE / 10) * np.concatenate(
            [-np.sin(points @ v.T)[:, :, None] * v, np.cos(points @ v.T)[:, :, None] * v], 1)
        samples = samples + w * np.einsum("nf,xfd->nxd", weights, grad_phi)
    _check_against_paths(result, (QUERY - BASELINE)[None] * samples)


def test_gpx_weights_match_explicit_conditioning():
    n_inputs, n_z = 2, 2
    data = rng.normal(size=(8, n_inputs + n_z))
    query = rng.normal(size=(3, n_inputs + n_z))
    kernel = LocallyLinear(RBF([0.8, 1.2], 1.3), n_inputs, weight_noise=0.07)
    noise = 0.1  # the kernel leaves the weight noise at the training rows to the noise term
    posterior = ExactPosterior(data, np.cos(data[:, 0]) * data[:, 2], kernel,
                               noise + 0.07 * np.sum(data[:, n_inputs:] ** 2, axis=1))
    result = explain(posterior, query, LocalLinearWeight(n_inputs, "weights"),
                     return_cov="points")
    # prior of the weights at the 8 training and 3 query inputs, w_l independent over l
    x_all = np.vstack([data[:, :n_inputs], query[:, :n_inputs]])
    diff = (x_all[:, None] - x_all[None]) / np.array([0.8, 1.2])
    gram = 1.3 * np.exp(-0.5 * np.sum(diff**2, 2)) + 0.07 * np.eye(len(x_all))
    prior = np.kron(np.eye(n_z), gram)  # vec over (feature, point)
    n = len(data)
    rows = np.zeros((n, n_z * len(x_all)))  # y_n = sum_l w_l(x_n) z_nl + noise
    for col in range(n_z):
        rows[np.arange(n), col * len(x_all) + np.arange(n)] = data[:, n_inputs + col]
    gain = prior @ rows.T @ np.linalg.inv(rows @ prior @ rows.T + noise * np.eye(n))
    post = prior - gain @ rows @ prior
    index = [col * len(x_all) + n + p for p in range(3) for col in range(n_z)]  # (point, feature)
    np.testing.assert_allclose(
        result.point_cov.dense().reshape(6, 6), post[np.ix_(index, index)], atol=1e-10)


@pytest.mark.parametrize("build", [
    lambda: IntegratedGradient(np.stack([BASELINE, -BASELINE]), n_steps=24),
    lambda: ProductShapley("interventional", TRAIN[:3]),
], ids=["two baselines", "interventional shapley"])
def test_diagonal_blocks_and_psd_for_averaged_functionals(build):
    result = explain(_exact(), QUERY, build(), return_cov="points")
    _assert_diagonal_blocks_and_psd(result, 1e-10)


def test_blocks_of_any_size_equal_one_block():
    result = explain(_exact(), np.vstack([QUERY, QUERY[:2] + 0.3]), Gradient(),
                     return_cov="points")
    covariance = result.point_cov
    one = PointCovariance(*covariance._task[:4], block_size=100).dense()
    for size in (1, 2, 3):
        np.testing.assert_allclose(
            PointCovariance(*covariance._task[:4], block_size=size).dense(), one,
            rtol=0, atol=1e-14 * np.abs(one).max())


def test_unsupported_paths_are_refused_by_name():
    with pytest.raises(ValueError, match="return_cov must be"):
        explain(_exact(), QUERY, Gradient(), return_cov="point")
    with pytest.raises(NotImplementedError, match="output_path"):
        explain(_exact(), QUERY, Gradient(), return_cov="points", output_path="x.parquet")



def test_joint_samples_have_the_covariance_across_points_and_group_maps_it():
    result = explain(_exact(), QUERY, Gradient(), return_cov="points")
    draws = result.sample(20_000, random_state=4)
    assert draws.shape == (20_000, *result.mean.shape)
    full = result.point_cov.dense().reshape(result.mean.size, -1)
    _, cov_z = ref.covariance_z_scores(draws.reshape(len(draws), -1), result.mean.ravel(), full)
    assert np.abs(cov_z).max() < 5
    grouped = result.group({"ab": ["x0", "x1"], "c": ["x2"]}, X=QUERY[:, [0, 2]])
    dense = grouped.point_cov.dense()
    summed = result.point_cov.dense()
    np.testing.assert_allclose(dense[:, 0, :, 0], summed[:, :2, :, :2].sum(axis=(1, 3)),
                               atol=1e-14)
    for p in range(len(QUERY)):
        np.testing.assert_allclose(dense[p, :, p], grouped.cov[p], atol=1e-12)
    with pytest.raises(ValueError, match="return_cov='points'"):
        explain(_exact(), QUERY, Gradient()).sample(3)


def test_simultaneous_band_factor_covers_whole_draws():
    from gpexplain.plot import plot_dependence, simultaneous_band_factor

    result = explain(_exact(), rng.uniform(-1.5, 1.5, size=(25, D)), IntegratedGradient(
        BASELINE[None, :], n_steps=24), return_cov="points")
    cov = result.point_cov.feature_matrix(0)
    c = simultaneous_band_factor(cov)
    assert 1.96 < c < 3.5
    draws = np.random.default_rng(9).multivariate_normal(np.zeros(len(cov)), cov, 20_000,
                                                         method="eigh")
    inside = np.all(np.abs(draws) <= c * np.sqrt(np.diag(cov)), axis=1).mean()
    assert abs(inside - 0.95) < 5 * np.sqrt(0.95 * 0.05 / 20_000) + 0.01  # + the factor's MC
    figure = plot_dependence(result, 0)
    labels = figure.axes[0].get_legend_handles_labels()[1]
    assert any("simultaneous 95% band" in label for label in labels)


def _gpytorch_kernels():
    import gpytorch

    from gpexplain.kernels import GPyTorchKernel

    matern = gpytorch.kernels.MaternKernel(2.5, ard_num_dims=D)
    matern.lengthscale = torch_tensor([[0.8, 1.3, 1.1]])
    product = gpytorch.kernels.ProductKernel(
        gpytorch.kernels.RQKernel(active_dims=[0, 1]),
        gpytorch.kernels.MaternKernel(1.5, active_dims=[2]))
    return {name: GPyTorchKernel(gpytorch.kernels.ScaleKernel(base).double())
            for name, base in (("matern52", matern), ("rq x matern32", product))}


def torch_tensor(values):
    import torch

    return torch.tensor(values, dtype=torch.float64)


@pytest.mark.parametrize("name", ["matern52", "rq x matern32"])
def test_gpytorch_kernel_gradients_across_points(name):
    """Autograd two-point prior against central differences of the kernel itself; diagonal
    blocks (with a point 1e-9 from another) and PSD through the driver."""
    kernel = _gpytorch_kernels()[name]
    scheme = Gradient().bind(kernel, TRAIN)
    x, x2, h = QUERY[0], QUERY[1], 1e-4
    expected = np.empty((D, D))
    for i in range(D):
        for j in range(D):
            ei, ej = h * np.eye(D)[i], h * np.eye(D)[j]
            value = [kernel((x + a)[None], (x2 + b)[None])[0, 0]
                     for a, b in ((ei, ej), (ei, -ej), (-ei, ej), (-ei, -ej))]
            expected[i, j] = (value[0] - value[1] - value[2] + value[3]) / (4 * h * h)
    np.testing.assert_allclose(scheme.prior_between(x[None], x2[None])[0, 0], expected,
                               atol=1e-7 * np.abs(expected).max())
    points = np.vstack([QUERY, QUERY[:1] + 1e-9])
    result = explain(ExactPosterior(TRAIN, Y, kernel, 0.05), points, Gradient(),
                     return_cov="points")
    _assert_diagonal_blocks_and_psd(result, 1e-10, psd_tolerance=1e-9)


@pytest.mark.parametrize("n_baselines", [1, 2])
def test_gpytorch_matern_integrated_gradients_across_points_match_sample_paths(n_baselines):
    """Quadrature on a GPyTorch Matern 5/2 kernel (issue 25): one baseline (paths that share
    their start, where the kernel is not smooth) and two (paths apart, and into the same
    point on the diagonal) against Monte Carlo over joint Matern sample paths (|z| < 5);
    diagonal blocks equal the per-point covariance; PSD."""
    kernel = _gpytorch_kernels()["matern52"]
    kernel.module.outputscale = VARIANCE
    baselines = np.vstack([BASELINE, [-0.4, 0.5, -0.2]])[:n_baselines]
    posterior = ExactPosterior(TRAIN, Y, kernel, 0.05)
    result = explain(posterior, QUERY, IntegratedGradient(baselines), return_cov="points")
    lengthscale = kernel.module.base_kernel.lengthscale.detach().numpy()[0]
    prior = ref.Matern52Prior(lengthscale, float(kernel.module.outputscale), D, 100)
    paths = _paths(posterior, prior, seed=n_baselines)
    samples = np.mean([ref.integrated_gradients(paths, QUERY, xt, 32) for xt in baselines], 0)
    _check_against_paths(result, samples)
    _assert_diagonal_blocks_and_psd(result, 1e-8, psd_tolerance=1e-9)


def _matern52_mixed_derivative(a, b, lengthscale, variance):
    """``d^2 k(a, b) / da_i db_j`` of Matern 5/2 by hand: with u = (a - b) / l, r = |u|,
    ``-25/3 s2 e^(-sqrt5 r) u_i u_j / (l_i l_j) + 5/3 s2 (1 + sqrt5 r) e^(-sqrt5 r) delta_ij
    / l_i^2``."""
    u = (a - b) / lengthscale
    r = np.sqrt(u @ u)
    decay = variance * np.exp(-np.sqrt(5) * r)
    return (-25 / 3 * decay * np.outer(u / lengthscale, u / lengthscale)
            + 5 / 3 * decay * (1 + np.sqrt(5) * r) * np.diag(1 / lengthscale**2))


@pytest.mark.parametrize("second_baseline", [False, True])
def test_gpytorch_matern_two_point_prior_term_against_adaptive_double_integrals(
        second_baseline):
    """The two-point prior term ``d_i e_j int int d^2 k(xt + t d, xt' + s e) dt ds`` on a
    GPyTorch Matern 5/2 kernel against scipy's adaptive ``dblquad`` of the derivative written
    above: paths sharing their start (one baseline; the kernel's kink sits at that corner)
    and paths apart (two baselines)."""
    from scipy.integrate import dblquad

    kernel = _gpytorch_kernels()["matern52"]
    kernel.module.outputscale = VARIANCE
    # the module's own values (its lengthscale was set while it was float32)
    lengthscale = kernel.module.base_kernel.lengthscale.detach().numpy()[0]
    variance = float(kernel.module.outputscale)
    other = np.array([-0.4, 0.5, -0.2]) if second_baseline else BASELINE
    scheme = IntegratedGradient(np.vstack([BASELINE, other])).bind(kernel, TRAIN)
    x, x2 = QUERY[0], QUERY[1]
    expected = 0.0
    for xt in (BASELINE, other):
        for xt2 in (BASELINE, other):
            d, e = x - xt, x2 - xt2
            for i in range(D):
                for j in range(D):
                    value, _ = dblquad(
                        lambda s, t, i=i, j=j, xt=xt, xt2=xt2, d=d, e=e:
                        _matern52_mixed_derivative(xt + t * d, xt2 + s * e, lengthscale,
                                                   variance)[i, j],
                        0, 1, 0, 1, epsabs=1e-13, epsrel=1e-12)
                    expected = expected + np.eye(D)[i][:, None] * np.eye(D)[j] * d[i] * e[j] * value
    expected = expected / 4
    np.testing.assert_allclose(scheme.prior_between(x[None], x2[None])[0, 0], expected,
                               rtol=0, atol=2e-10 * np.abs(expected).max())


def test_quadrature_point_covariance_is_priced_and_refused_when_too_slow(monkeypatch):
    """``estimated_seconds`` prices the pairs of points; ``blocks`` refuses above half a
    minute per point with the estimate, while chosen blocks stay available; the command
    line's importance is skipped with the reason."""
    from gpexplain.cli.methods import importance
    from gpexplain.functionals.integrated_gradient import StationaryQuadrature

    posterior = ExactPosterior(TRAIN, Y, _gpytorch_kernels()["matern52"], 0.05)
    result = explain(posterior, QUERY, IntegratedGradient(BASELINE[None, :]),
                     return_cov="points")
    per_pair = result.point_cov._task.scheme.point_pair_seconds()
    # 2 * 64^2 node pairs at >= 1.2 microseconds per feature
    assert per_pair >= 2 * 64**2 * 1.2e-6 * D
    assert result.point_cov.estimated_seconds() == pytest.approx(6 * per_pair)
    monkeypatch.setattr(StationaryQuadrature, "point_pair_seconds", lambda self: 20.0)
    with pytest.raises(ValueError, match=r"about 120 s \(6 pairs of points.*fewer points"):
        result.point_cov.dense()
    assert result.point_cov.block([0], [1]).shape == (1, D, 1, D)
    summary, reason = importance(result)
    assert summary is None and "would take about 120 s" in reason


def test_additive_gp_shapley_across_points_by_subset_enumeration():
    """Orthogonal additive GP: ``Cov(phi_i(x), phi_j(x'))`` prior term against the sum over
    every subset S containing i and j of ``sigma_|S|^2 / |S|^2 prod_{l in S} kt_l(x_l, x'_l)``;
    diagonal blocks and PSD through the driver."""
    from itertools import combinations

    from gpexplain.functionals.shapley import AdditiveShapley
    from gpexplain.kernels.measures import Gaussian
    from gpexplain.kernels.orthogonal_additive import OrthogonalAdditive

    variances = np.array([0.3, 1.0, 0.6, 0.25])
    kernel = OrthogonalAdditive(LENGTHSCALE, variances, Gaussian(np.zeros(D), np.ones(D)))
    scheme = AdditiveShapley().bind(kernel, TRAIN)
    prior = scheme.prior_between(QUERY[:2], QUERY[1:])
    components = kernel.components_by_feature(QUERY[:2], QUERY[1:])  # (d, 2, 2)
    expected = np.zeros_like(prior)
    for size in range(1, D + 1):
        for S in combinations(range(D), size):
            term = variances[size] / size**2 * np.prod(components[list(S)], axis=0)
            for i in S:
                for j in S:
                    expected[:, :, i, j] += term
    np.testing.assert_allclose(prior, expected, rtol=1e-12, atol=1e-15)
    result = explain(ExactPosterior(TRAIN, Y, kernel, 0.05), QUERY, AdditiveShapley(),
                     return_cov="points")
    _assert_diagonal_blocks_and_psd(result, 1e-12)


@pytest.mark.parametrize("index", ["SII", "k-SII"])
def test_additive_gp_interactions_across_points_by_subset_enumeration(index):
    """Orthogonal additive GP, order-2 interactions of its own game ``v(S) = sum_{T <= S}
    f_T(x)``: each value is ``sum_T share(T) f_T(x)`` with the unanimity-game shares from the
    definitions (Shapley ``1/|T|`` to i in T; SII ``1/(|T| - 1)`` to pairs in T; k-SII order-1
    ``1/|T| - 1/2`` for |T| >= 2), so ``Cov = sum_T share_a(T) share_b(T) sigma_|T|^2 prod_{l
    in T} kt_l(x_l, x'_l)``; diagonal blocks and PSD through the driver."""
    from itertools import combinations

    from gpexplain.functionals.additive_interactions import AdditiveShapleyInteraction
    from gpexplain.kernels.measures import Gaussian
    from gpexplain.kernels.orthogonal_additive import OrthogonalAdditive

    variances = np.array([0.3, 1.0, 0.6, 0.25])
    kernel = OrthogonalAdditive(LENGTHSCALE, variances, Gaussian(np.zeros(D), np.ones(D)))
    scheme = AdditiveShapleyInteraction(index).bind(kernel, TRAIN)
    prior = scheme.prior_between(QUERY[:2], QUERY[1:])
    components = kernel.components_by_feature(QUERY[:2], QUERY[1:])  # (d, 2, 2)
    outputs = [(i,) for i in range(D)] + list(combinations(range(D), 2))

    def share(U, T):
        if not set(U) <= set(T):
            return 0.0
        if len(U) == 2:
            return 1.0 / (len(T) - 1)
        return 1.0 / len(T) - (0.5 if index == "k-SII" and len(T) >= 2 else 0.0)

    expected = np.zeros_like(prior)
    for size in range(1, D + 1):
        for T in combinations(range(D), size):
            term = variances[size] * np.prod(components[list(T)], axis=0)
            for a, U in enumerate(outputs):
                for b, V in enumerate(outputs):
                    expected[:, :, a, b] += share(U, T) * share(V, T) * term
    np.testing.assert_allclose(prior, expected, rtol=1e-12, atol=1e-15)
    result = explain(ExactPosterior(TRAIN, Y, kernel, 0.05), QUERY,
                     AdditiveShapleyInteraction(index), return_cov="points")
    _assert_diagonal_blocks_and_psd(result, 1e-12)


def test_mixture_posterior_across_points_and_its_global_importance():
    """A mixture of two GPs (different lengthscales): diagonal blocks equal the mixture's
    per-point covariance, the matrix is PSD, ``sample`` draws the mixture, and the exact
    importance moments match Monte Carlo over draws made here from each component (|z| < 5)."""
    from gpexplain.explain.global_importance import importance_of
    from gpexplain.posterior import MixturePosterior
    from tests.reference.monte_carlo import variance_with_standard_error

    components = [_exact(), ExactPosterior(TRAIN, Y, RBF(2.0 * LENGTHSCALE, VARIANCE), 0.05)]
    weights = np.array([0.3, 0.7])
    points = rng.uniform(-1.5, 1.5, size=(6, D))
    result = explain(MixturePosterior(components, weights), points, Gradient(),
                     return_cov="points")
    _assert_diagonal_blocks_and_psd(result, 1e-12)
    draws = result.sample(20_000, random_state=1)
    full = result.point_cov.dense().reshape(result.mean.size, -1)
    _, cov_z = ref.covariance_z_scores(draws.reshape(len(draws), -1), result.mean.ravel(), full)
    assert np.abs(cov_z).max() < 5
    # independent draws: a component by its weight, then its own joint Gaussian
    generator, parts = np.random.default_rng(2), []
    for weight, component in zip(weights, components, strict=True):
        alone = explain(component, points, Gradient(), return_cov="points")
        dense = alone.point_cov.dense().reshape(alone.mean.size, -1)
        count = int(round(weight * 100_000))
        parts.append(generator.multivariate_normal(alone.mean.ravel(), dense, count,
                                                   method="eigh"))
    sample = np.concatenate(parts).reshape(-1, *result.mean.shape)
    for summary, summarise in (("mean", lambda a: a.mean(1)), ("mean_abs",
                               lambda a: np.abs(a).mean(1)), ("mean_sq", lambda a: (a**2).mean(1))):
        importance = importance_of(result, summary, n_samples=2000)
        values = summarise(sample)
        z = (importance.mean - values.mean(0)) / (values.std(0) / np.sqrt(len(values)))
        assert np.abs(z).max() < 5, summary
        for i in range(D):
            variance, error = variance_with_standard_error(values[:, i])
            assert abs(importance.std[i] ** 2 - variance) < 5 * error, summary
        assert importance.n_samples == 2000 and 0 < importance.probability_standard_error


def _interaction_weights(x, baseline, index):
    """Rows of the index's values (order 1, then pairs i < j) as weights on the 2^d hybrid
    points ``where(S, x, baseline)`` of the baseline game, from the definitions (Grabisch and
    Roubens 1999; Sundararajan et al. 2020; Bordt and von Luxburg 2023)."""
    from itertools import combinations
    from math import comb, factorial

    d = len(x)
    subsets = [frozenset(S) for r in range(d + 1) for S in combinations(range(d), r)]
    column = {S: k for k, S in enumerate(subsets)}
    hybrids = np.array([np.where([i in S for i in range(d)], x, baseline) for S in subsets])
    pairs = list(combinations(range(d), 2))

    def second_difference(i, j, weight):
        row = np.zeros(len(subsets))
        for S in subsets:
            if i in S or j in S:
                continue
            w = weight(len(S))
            row[column[S | {i, j}]] += w
            row[column[S | {i}]] -= w
            row[column[S | {j}]] -= w
            row[column[S]] += w
        return row

    shapley = np.zeros((d, len(subsets)))
    for i in range(d):
        for S in subsets:
            if i not in S:
                w = factorial(len(S)) * factorial(d - len(S) - 1) / factorial(d)
                shapley[i, column[S | {i}]] += w
                shapley[i, column[S]] -= w
    sii = np.array([second_difference(i, j, lambda s: factorial(s) * factorial(d - s - 2)
                                      / factorial(d - 1)) for i, j in pairs])
    if index == "SII":
        return np.vstack([shapley, sii]), hybrids
    if index == "k-SII":
        first = shapley - 0.5 * np.array([sum(sii[p] for p, pair in enumerate(pairs)
                                              if i in pair) for i in range(d)])
        return np.vstack([first, sii]), hybrids
    stii = np.array([second_difference(i, j, lambda s: (2 / d) / comb(d - 1, s))
                     for i, j in pairs])
    first = np.zeros((d, len(subsets)))
    for i in range(d):
        first[i, column[frozenset({i})]] += 1.0
        first[i, column[frozenset()]] -= 1.0
    return np.vstack([first, stii]), hybrids


@pytest.mark.parametrize("game", ["baseline", "interventional"])
@pytest.mark.parametrize("index", ["k-SII", "SII", "STII"])
def test_interactions_across_points_equal_the_posterior_of_the_hybrid_points(index, game):
    """Each index is a fixed combination of the game's values, so its covariance across
    points is ``W_x Sigma(H_x, H_x') W_x'^T`` with Sigma the exact posterior covariance of a
    plain NumPy GP at the hybrid points; the interventional game averages the baseline game
    over background rows (three, one of them far from the rest on every feature, so that
    kernel values between background rows underflow: they made the ratios 0 / 0)."""
    import gpexplain as gx

    points = QUERY
    if game == "baseline":
        references = BASELINE[None, :]
        options = {"baseline": BASELINE}
    else:  # a point and a background row far from the rest and from each other
        points = np.vstack([QUERY, [-60.0, 60.0, -60.0]])
        references = np.vstack([TRAIN[:2], [60.0, -60.0, 60.0]])
        options = {"background": references}
    result = gx.shapley_interactions(_exact(), points, index=index, return_cov="points",
                                     **options)

    def kernel(A, B):
        scaled = (A[:, None, :] - B[None, :, :]) / LENGTHSCALE
        return VARIANCE * np.exp(-0.5 * (scaled ** 2).sum(-1))

    gram_inverse = np.linalg.inv(kernel(TRAIN, TRAIN) + 0.05 * np.eye(len(TRAIN)))
    built = []
    for x in points:  # (1 / R) sum_r W(x, r) on the hybrids of every reference row r
        parts = [_interaction_weights(x, r, index) for r in references]
        built.append((np.hstack([w for w, _ in parts]) / len(references),
                      np.vstack([h for _, h in parts])))
    W = [w for w, _ in built]
    H = np.vstack([h for _, h in built])
    cross = kernel(H, TRAIN)
    posterior_cov = kernel(H, H) - cross @ gram_inverse @ cross.T
    n_hybrids = len(built[0][1])
    full = result.point_cov.dense()
    scale = np.abs(full).max()
    for p in range(len(points)):
        for q in range(len(points)):
            block = posterior_cov[p * n_hybrids:(p + 1) * n_hybrids,
                                  q * n_hybrids:(q + 1) * n_hybrids]
            np.testing.assert_allclose(full[p, :, q], W[p] @ block @ W[q].T, rtol=0,
                                       atol=1e-10 * scale)
    _assert_diagonal_blocks_and_psd(result, atol=1e-12)
    draws = result.sample(4, random_state=0)
    assert draws.shape == (4, *result.mean.shape)
    phi = result.shapley_values()
    assert phi.point_cov.dense().shape == (len(points), D, len(points), D)


def test_saved_attribution_keeps_its_covariance_across_points(tmp_path):
    """save/load: point_cov comes back dense and equal, and what uses it (samples, grouping,
    global importance) works on the loaded attribution; a mixture's is not saved, warned."""
    import gpexplain as gx
    from gpexplain.explain.global_importance import importance_of

    result = explain(_exact(), QUERY, Gradient(), return_cov="points")
    result.save(tmp_path / "attr")
    loaded = gx.load(tmp_path / "attr")
    np.testing.assert_array_equal(loaded.point_cov.dense(), result.point_cov.dense())
    assert loaded.sample(3, random_state=0).shape == (3, *result.mean.shape)
    np.testing.assert_allclose(importance_of(loaded, "mean_abs").std,
                               importance_of(result, "mean_abs").std, rtol=1e-12)
    values = np.zeros((len(QUERY), 2))
    grouped = loaded.group({"ab": ["x0", "x1"]}, X=values)
    np.testing.assert_allclose(grouped.point_cov.dense(),
                               result.group({"ab": ["x0", "x1"]}, X=values).point_cov.dense(),
                               rtol=1e-12)
    mixture = gx.MixturePosterior([_exact(), _exact()], [0.5, 0.5])
    mixed = gx.gradients(mixture, QUERY, return_cov="points")
    with pytest.warns(UserWarning, match="mixture posterior's is not one Gaussian matrix"):
        mixed.save(tmp_path / "mixed")
    assert gx.load(tmp_path / "mixed").point_cov is None
