"""``gx.global_sensitivity``: Sobol indices and Shapley effects of product-kernel GPs.

References, all independent of ``gpexplain.explain.sensitivity``:

* d = 1: the variance of the posterior mean by mpmath quadrature (30 digits); first-order,
  total and Shapley variances all equal it;
* d = 2, 3: the closed Sobol game ``v(S) = Var(E[m | x_S])`` on a Gauss-Hermite tensor grid
  (40 nodes per feature), a one-panel Gauss-Legendre tensor grid over a uniform box (40 or
  30 nodes per feature) or on the atoms of an empirical measure (exact), brute-force
  Shapley over it (``tests.reference.shapley_brute_force``);
* pick-freeze Monte Carlo (Saltelli 2010 first-order, Jansen total estimators) at d = 4,
  z-score < 5 from the per-sample standard error;
* the posterior expectation and standard deviation against Monte Carlo over joint posterior
  samples of f on the tensor grid (3000 samples, z < 5 for the means, 10% for the std).
"""

from __future__ import annotations

import gpytorch.kernels as gk
import mpmath
import numpy as np
import pytest
import torch

import gpexplain as gx
from gpexplain.kernels import RBF, GPyTorchKernel
from gpexplain.kernels.measures import Empirical, Gaussian, Uniform
from tests.reference import shapley_brute_force as brute

rng = np.random.default_rng(7)


def _posterior(d, lengthscale, n=20, kernel=None):
    X = rng.normal(size=(n, d))
    y = np.sin(2 * X[:, 0]) + (X[:, 0] * X[:, 1] if d > 1 else 0.0)
    kernel = kernel or RBF(lengthscale, 1.1)
    return gx.ExactPosterior(X, y, kernel=kernel, noise=0.05, mean=0.2)


def _grid_indices(function_on_grid, atoms):
    v = brute.variance_game(function_on_grid, atoms)
    d = function_on_grid.ndim
    everything = frozenset(range(d))
    first = np.array([v({i}) for i in range(d)])
    total = np.array([v(everything) - v(everything - {i}) for i in range(d)])
    shapley = brute.shapley_from_game(lambda S: v(S), d)
    return v(everything), first, total, shapley


def test_one_feature_against_mpmath():
    posterior = _posterior(1, [0.7])
    measure = Gaussian(0.3, 0.8)
    result = gx.global_sensitivity(posterior, measure)
    Z, alpha = posterior.train_inputs[:, 0], posterior.alpha
    mpmath.mp.dps = 30

    def m(x):
        return sum(float(a) * 1.1 * mpmath.exp(-(x - float(z)) ** 2 / (2 * 0.49))
                   for a, z in zip(alpha, Z, strict=True))

    def density(x):
        return mpmath.npdf(x, 0.3, 0.8)

    first = mpmath.quad(lambda x: m(x) * density(x), [-mpmath.inf, 0.3, mpmath.inf])
    second = mpmath.quad(lambda x: m(x) ** 2 * density(x), [-mpmath.inf, 0.3, mpmath.inf])
    variance = float(second - first**2)
    for values in (result.first_order, result.total, result.shapley_effects):
        np.testing.assert_allclose(values, [variance], rtol=1e-10)
    np.testing.assert_allclose(result.total_variance, variance, rtol=1e-10)


@pytest.mark.parametrize("d", [2, 3])
def test_gaussian_measure_against_tensor_grid(d):
    posterior = _posterior(d, [0.8, 1.3, 1.0][:d])
    measure = Gaussian([0.1, -0.2, 0.3][:d], [0.9, 1.2, 0.7][:d])
    result = gx.global_sensitivity(posterior, measure)
    atoms = brute.gaussian_atoms(measure.mean, measure.std, 40)
    grid, shape = brute.tensor_grid(atoms)
    variance, first, total, shapley = _grid_indices(
        posterior.predict_mean(grid).reshape(shape), atoms
    )
    scale = variance
    np.testing.assert_allclose(result.total_variance, variance, rtol=1e-9)
    np.testing.assert_allclose(result.first_order, first, atol=1e-9 * scale)
    np.testing.assert_allclose(result.total, total, atol=1e-9 * scale)
    np.testing.assert_allclose(result.shapley_effects, shapley, atol=1e-9 * scale)
    np.testing.assert_allclose(result.shapley_effects.sum(), result.total_variance, rtol=1e-12)
    assert np.all(result.first_order <= result.shapley_effects + 1e-12 * scale)
    assert np.all(result.shapley_effects <= result.total + 1e-12 * scale)


def _rbf_rq_kernel():
    rbf = gk.RBFKernel(active_dims=torch.tensor([0])).double()
    rbf.lengthscale = torch.tensor(0.8, dtype=torch.float64)
    rq = gk.RQKernel(active_dims=torch.tensor([1])).double()
    rq.lengthscale = torch.tensor(1.2, dtype=torch.float64)
    rq.alpha = torch.tensor(0.3, dtype=torch.float64)
    return GPyTorchKernel(gk.ScaleKernel(gk.ProductKernel(rbf, rq)).double())


@pytest.mark.parametrize(("d", "kernel"), [(2, None), (3, None), (2, "rq")])
def test_uniform_measure_against_tensor_grid(d, kernel):
    # A box of 2 to 4 lengthscales per feature, partly outside the training inputs; the RQ
    # factor (alpha 0.3: poles at +-0.93 i) is integrated as accurately as the SE one.
    posterior = _posterior(d, [0.8, 1.3, 1.0][:d], kernel=kernel and _rbf_rq_kernel())
    measure = Uniform([-1.5, -1.0, 0.0][:d], [1.5, 2.5, 2.0][:d])
    result = gx.global_sensitivity(posterior, measure)
    atoms = brute.legendre_atoms(measure.low, measure.high, 30 if d == 3 else 60)
    grid, shape = brute.tensor_grid(atoms)
    variance, first, total, shapley = _grid_indices(
        posterior.predict_mean(grid).reshape(shape), atoms
    )
    np.testing.assert_allclose(result.total_variance, variance, rtol=1e-11)
    for got, reference in ((result.first_order, first), (result.total, total),
                           (result.shapley_effects, shapley)):
        np.testing.assert_allclose(got, reference, rtol=0, atol=1e-11 * variance)
    np.testing.assert_allclose(result.shapley_effects.sum(), result.total_variance, rtol=1e-12)
    assert "uniform measure" in result.method


def test_empirical_measure_and_matern_product_against_atoms():
    matern = gk.MaternKernel(nu=1.5, active_dims=torch.tensor([0]))
    matern.lengthscale = torch.tensor(0.9)
    rq = gk.RQKernel(active_dims=torch.tensor([1]))
    rq.lengthscale, rq.alpha = torch.tensor(1.2), torch.tensor(0.8)
    kernel = GPyTorchKernel(gk.ScaleKernel(gk.ProductKernel(matern, rq)).double())
    posterior = _posterior(3, None, kernel=kernel)  # feature 2 ignored by the kernel
    atoms_matrix = rng.normal(size=(6, 3))
    result = gx.global_sensitivity(posterior, Empirical(atoms_matrix))
    atoms = brute.empirical_atoms(atoms_matrix)
    grid, shape = brute.tensor_grid(atoms)
    variance, first, total, shapley = _grid_indices(
        posterior.predict_mean(grid).reshape(shape), atoms
    )
    np.testing.assert_allclose(result.first_order, first, atol=1e-12 * variance)
    np.testing.assert_allclose(result.total, total, atol=1e-12 * variance)
    np.testing.assert_allclose(result.shapley_effects, shapley, atol=1e-12 * variance)
    # Dummy: the ignored feature has no variance, for the mean and for every posterior draw.
    for values in (result.first_order, result.total, result.expected_total,
                   result.expected_shapley_effects, result.first_order_std):
        assert values[2] == 0.0
    with pytest.raises(TypeError, match="Empirical"):
        gx.global_sensitivity(posterior, Gaussian(0.0, 1.0))


def test_pick_freeze_monte_carlo():
    d = 4
    posterior = _posterior(d, [0.8, 1.3, 1.0, 2.5], n=30)
    measure = Gaussian([0.0, 0.2, -0.1, 0.0], [1.0, 0.8, 1.2, 0.9])
    result = gx.global_sensitivity(posterior, measure)
    generator = np.random.default_rng(0)
    n = 20000
    A = measure.mean + measure.std * generator.normal(size=(n, d))
    B = measure.mean + measure.std * generator.normal(size=(n, d))
    f_A, f_B = posterior.predict_mean(A), posterior.predict_mean(B)
    for i in range(d):
        mixed = A.copy()
        mixed[:, i] = B[:, i]  # A with column i from B
        f_mixed = posterior.predict_mean(mixed)
        first_terms = f_B * (f_mixed - f_A)  # Saltelli (2010): E = V_i
        total_terms = 0.5 * (f_A - f_mixed) ** 2  # Jansen (1999): E = T_i
        for terms, exact in ((first_terms, result.first_order[i]), (total_terms, result.total[i])):
            z = abs(terms.mean() - exact) / (terms.std() / np.sqrt(n))
            assert z < 5.0, (i, terms.mean(), exact)


def _matern_rq_kernel():
    matern = gk.MaternKernel(nu=1.5, active_dims=torch.tensor([0]))
    matern.lengthscale = torch.tensor(0.9)
    rq = gk.RQKernel(active_dims=torch.tensor([1]))
    rq.lengthscale, rq.alpha = torch.tensor(1.2), torch.tensor(0.8)
    return GPyTorchKernel(gk.ScaleKernel(gk.ProductKernel(matern, rq)).double())


def _stacked_result(result):
    return (
        np.concatenate([[result.expected_total_variance], result.expected_first_order,
                        result.expected_total, result.expected_shapley_effects]),
        np.concatenate([[result.total_variance_std], result.first_order_std,
                        result.total_std, result.shapley_effects_std]),
    )


SAMPLE_PATH_CASES = {
    # name: (d, measure, Gauss-Hermite nodes per feature or None for the atoms, kernel)
    "d2-gaussian-rbf": (2, Gaussian([0.1, -0.2], [0.9, 1.2]), 20, None),
    "d3-gaussian-rbf": (3, Gaussian([0.1, -0.2, 0.3], [0.6, 0.8, 0.5]), 10, None),
    "d2-uniform-rbf": (2, Uniform([-1.5, -1.0], [1.5, 2.5]), 20, None),
    "d2-empirical-rbf": (2, Empirical(np.random.default_rng(3).normal(size=(7, 2))), None, None),
    "d3-empirical-matern": (3, Empirical(np.random.default_rng(4).normal(size=(6, 3))), None,
                            "matern"),
    # a sparse variational posterior: Q = Kzz^-1 - Kzz^-1 S Kzz^-1 is not a kernel inverse
    "d2-gaussian-variational": (2, Gaussian([0.1, -0.2], [0.9, 1.2]), 20, "variational"),
}


def _variational_posterior():
    generator = np.random.default_rng(5)
    root = 0.05 * generator.normal(size=(12, 12))
    inducing = generator.normal(size=(12, 2))
    return gx.VariationalPosterior(inducing, np.sin(2 * inducing[:, 0]) + inducing.prod(1),
                                   root @ root.T, RBF([0.8, 1.3], 1.1), mean=0.2,
                                   data_inputs=generator.normal(size=(30, 2)))


@pytest.mark.parametrize("case", list(SAMPLE_PATH_CASES))
def test_posterior_moments_against_sample_paths(case):
    # Sample f jointly on the tensor grid of the measure's atoms (Gauss-Hermite atoms stand in
    # for a Gaussian measure), compute every index of every path exactly on the grid, and
    # compare the sample mean and sample std with the closed forms. z-scores: the mean's
    # standard error is s / sqrt(n); the sample std's is std((x - mean)^2) / (2 s sqrt(n))
    # (delta method, no normality assumed: the indices are quadratic forms, heavy-tailed).
    d, measure, n_nodes, kernel = SAMPLE_PATH_CASES[case]
    if kernel == "matern":
        posterior = _posterior(d, None, kernel=_matern_rq_kernel())
    elif kernel == "variational":
        posterior = _variational_posterior()
    else:
        posterior = _posterior(d, [0.8, 1.3, 1.0][:d])
    result = gx.global_sensitivity(posterior, measure)
    if n_nodes is None:
        atoms = brute.empirical_atoms(measure.points)
    elif isinstance(measure, Uniform):
        atoms = brute.legendre_atoms(measure.low, measure.high, n_nodes)
    else:
        atoms = brute.gaussian_atoms(measure.mean, measure.std, n_nodes)
    grid, shape = brute.tensor_grid(atoms)
    mean, cov = posterior.predict(grid, return_cov=True)
    eigenvalues, vectors = np.linalg.eigh(cov)
    root = vectors * np.sqrt(np.maximum(eigenvalues, 0.0))
    n = 6000 if d == 2 else 3000  # the std's relative standard error: ~2% at 6000 here
    samples = mean + np.random.default_rng(1).normal(size=(n, len(grid))) @ root.T
    draws = np.array([np.concatenate([[v], first, total, shapley]) for v, first, total, shapley
                      in (_grid_indices(s.reshape(shape), atoms) for s in samples)])
    expected, std = _stacked_result(result)
    sample_std = draws.std(0)
    live = sample_std > 1e-12 * sample_std.max()  # the Matern case ignores feature 2
    z_mean = np.abs(draws.mean(0) - expected)[live] / (sample_std[live] / np.sqrt(n))
    assert np.all(z_mean < 5.0), z_mean
    spread = ((draws - draws.mean(0)) ** 2).std(0)
    z_std = np.abs(sample_std - std)[live] / (spread[live] / (2 * sample_std[live] * np.sqrt(n)))
    assert np.all(z_std < 5.0), (z_std, sample_std, std)
    np.testing.assert_array_equal(std[~live], 0.0)
    np.testing.assert_array_equal(expected[~live], 0.0)


_MIXES = {"one-kernel": (1.0, 1.0, 1.0), "three-lengthscales": (1.0, 1.7, 0.8)}
_INTEGRAL_CASES = [
    pytest.param(kind, ratio, mix, id=f"{kind}-{ratio}-{name}")
    for name, mix in _MIXES.items()
    for kind, ratio in [("gaussian", 0.7), ("gaussian", 1.0), ("gaussian", 1e2),
                        ("gaussian", 1e4), ("uniform", 0.3), ("uniform", 1.0), ("uniform", 1e3)]
    # the reference's 80-node Hermite rule is converged for l / std above ~0.7
    if kind == "uniform" or ratio * min(mix) >= 0.7
]


@pytest.mark.parametrize(("kind", "ratio", "mix"), _INTEGRAL_CASES)
def test_variance_integrals_against_mpmath(kind, ratio, mix):
    # The per-feature pieces of the posterior variance (the pair matrix C, the three-kernel
    # matrix G, the cross moment lam, the trace table T) for SE factors under a Gaussian
    # (against 50-digit atom sums over an 80-node Hermite rule, converged for l / std above
    # ~0.7) or uniform measure on [mean - std, mean + std] (a 96-node Gauss-Legendre rule),
    # from l / std = 0.3 to 1.7e4 (where the terms of every centred combination agree to ~8
    # digits and a float64 subtraction would keep none). One kernel (ProductStructure), or
    # three lengthscales mixed as in a linear model of coregionalisation (PairStructure of
    # left q and right r, middle p: ``mix`` scales the lengthscale of each).
    from gpexplain.kernels.product import product_structure
    from gpexplain.kernels.product_pairs import PairStructure
    from tests.reference.sobol_moments_mpmath import (
        feature_pair_integrals,
        legendre_rule,
        pair_integrals,
    )

    mean, std, points = 0.3, 1.7, np.array([-2.0, 0.1, 1.9, 4.0])
    lengthscales = tuple(scale * ratio * std for scale in mix)
    q, p, r = (product_structure(RBF(np.array([ls]), 1.0), 1) for ls in lengthscales)
    if kind == "gaussian":
        measure = Gaussian(np.array([mean]), np.array([std]))
        C, lam, G, tables = feature_pair_integrals(points, mean, std, lengthscales)
    else:
        measure = Uniform(np.array([mean - std]), np.array([mean + std]))
        C, lam, G, tables = pair_integrals(points, *legendre_rule(mean - std, mean + std),
                                           lengthscales)
    at = points[:, None]
    if mix[0] == mix[1] == mix[2]:  # one kernel: its own methods
        got = (q.centred_second_moment(at, at, measure), q.centred_cross_moment(at, measure),
               q.centred_sandwich(at, at, measure), q.trace_moments(measure))
    else:
        pair = PairStructure(q, r)
        got = (pair.centred_second_moment(at, at, measure),
               PairStructure(p, r).centred_cross_moment(at, measure),
               pair.centred_sandwich(at, at, measure, p), pair.trace_moments(measure))
    # relative to the largest entry: C, lam(a) and G(a, b) change sign as a and b move
    for value, reference in zip(got[:3], (C, lam, G), strict=True):
        reference = np.array(reference, dtype=float)
        np.testing.assert_allclose(value[..., 0], reference, rtol=0,
                                   atol=1e-12 * np.abs(reference).max())
    for value, reference in zip(got[3], tables, strict=True):
        assert abs(value[0] - float(reference)) <= 1e-12 * abs(float(reference))


def test_one_feature_stds_agree():
    # d = 1: first order = total = Shapley = total variance as functionals of f, so their
    # posterior stds are the same number, reached by four different paths.
    for measure in (Gaussian(0.3, 0.8), Empirical(rng.normal(size=(9, 1)))):
        result = gx.global_sensitivity(_posterior(1, [0.7]), measure)
        for std in (result.total_std, result.shapley_effects_std, [result.total_variance_std]):
            np.testing.assert_allclose(std, result.first_order_std, rtol=1e-12)
        assert result.first_order_std[0] > 0


def test_thirty_features_complete():
    # d = 30, a small posterior: 15 x 15 Gauss-Legendre pairs for the Shapley stds. A feature
    # the kernel ignores (infinite lengthscale) has zero std; timed in the report.
    d = 30
    lengthscale = np.linspace(0.8, 4.0, d)
    lengthscale[7] = np.inf
    X = rng.normal(size=(40, d))
    posterior = gx.ExactPosterior(X, np.sin(X[:, 0]) + X[:, 1] * X[:, 2],
                                  kernel=RBF(lengthscale, 1.0), noise=0.05)
    result = gx.global_sensitivity(posterior)
    for std in (result.first_order_std, result.total_std, result.shapley_effects_std):
        assert np.all(np.isfinite(std)) and np.all(std >= 0)
        assert std[7] == 0.0 and std[0] > 0
    assert result.total_variance_std > 0


def test_chunks_and_memory_groups_do_not_change_the_result(monkeypatch):
    # Row chunks of 3 and a memory budget that holds H Q for only 2 indices at a time (5
    # passes over Z for the 10 indices of d = 3) must reproduce the one-pass result.
    import gpexplain.explain.sensitivity as sensitivity

    posterior = _posterior(3, [0.8, 1.3, 1.0])
    measure = Gaussian([0.1, -0.2, 0.3], [0.9, 1.2, 0.7])
    reference = gx.global_sensitivity(posterior, measure)
    monkeypatch.setattr(sensitivity, "_MEMORY_BUDGET_BYTES", 2 * 8 * 20 * 20)
    split = gx.global_sensitivity(posterior, measure, chunk_size=3)
    for name in ("first_order", "expected_total", "first_order_std", "total_std",
                 "shapley_effects_std", "total_variance_std"):
        np.testing.assert_allclose(getattr(split, name), getattr(reference, name), rtol=1e-12)


def test_result_table_and_plot():
    result = gx.global_sensitivity(_posterior(3, [0.8, 1.3, 1.0]))
    frame = result.to_frame()
    assert list(frame["feature"]) == ["x0", "x1", "x2"]
    np.testing.assert_allclose(frame["shapley_index"].sum(), 1.0, rtol=1e-12)
    assert "gaussian measure" in result.method
    for column in ("first_order_std", "total_std", "shapley_effect_std"):
        assert np.all(frame[column] > 0)
    figure = gx.plot.plot_global_sensitivity(result)
    assert len(figure.axes) == 1
    # every bar series carries error bars: +-1.96 std, the lower arm cut at zero
    from matplotlib.container import BarContainer

    bars = [c for c in figure.axes[0].containers if isinstance(c, BarContainer)]
    assert len(bars) == 3 and all(bar.errorbar is not None for bar in bars)
    order = np.argsort(-result.expected_shapley_effects, kind="stable")
    segments = bars[2].errorbar.lines[2][0].get_segments()  # the total variances' bars
    upper = np.array([segment[1, 0] for segment in segments])
    np.testing.assert_allclose(upper, (result.expected_total + 1.96 * result.total_std)[order])
    with pytest.raises(TypeError, match="GlobalSensitivity"):
        gx.plot.plot_global_sensitivity(frame)


def test_refusals_are_named():
    posterior = _posterior(2, [1.0, 1.0])
    features = gx.kernels.RandomFeatureKernel(rng.normal(size=(10, 2)), 1.0)
    other = gx.ExactPosterior(posterior.train_inputs, np.zeros(20), kernel=features, noise=0.1)
    with pytest.raises(TypeError, match="integrated_gradients"):
        gx.global_sensitivity(other)
    with pytest.raises(TypeError, match="MixturePosterior"):
        gx.global_sensitivity(gx.MixturePosterior([posterior, posterior]))
    with pytest.raises(ValueError, match="chunk_size"):
        gx.global_sensitivity(posterior, chunk_size=0)
    with pytest.raises(TypeError, match="measure must be"):
        gx.global_sensitivity(posterior, measure="gaussian")
    with pytest.raises(ValueError, match="features"):
        gx.global_sensitivity(posterior, Empirical(np.zeros((3, 5))))


@pytest.mark.parametrize("ratio", [1e-1, 1.0, 1e2, 1e3, 1e4])
def test_centred_second_moment_keeps_its_digits_for_wide_lengthscales(ratio):
    # E2 - mu mu' cancels to O((std / l)^2) when l >> std: the subtraction lost eps (l/std)^2
    # relative (Sobol variances 3e-10 off the total at l / std = 1e3); the centred form must
    # match 50-digit quadrature of the centred product to 1e-12 relative at every ratio.
    import mpmath

    from gpexplain.kernels.product import product_structure

    mean, std = 0.3, 1.7
    lengthscale = ratio * std
    structure = product_structure(gx.kernels.RBF(np.array([lengthscale]), 1.0), 1)
    measure = gx.measures.Gaussian(np.array([mean]), np.array([std]))
    points = np.array([[-2.0], [0.1], [4.0]])
    got = structure.centred_second_moment(points, points, measure)[:, :, 0]
    with mpmath.workdps(50):
        m, s, ell = mpmath.mpf(mean), mpmath.mpf(std), mpmath.mpf(lengthscale)
        norm = s * mpmath.sqrt(2 * mpmath.pi)

        def expect(function):
            return mpmath.quad(
                lambda t: function(t) * mpmath.exp(-((t - m) ** 2) / (2 * s * s)) / norm,
                [-mpmath.inf, m, mpmath.inf],
            )

        def k(t, a):
            return mpmath.exp(-((t - mpmath.mpf(a)) ** 2) / (2 * ell * ell))

        values = points[:, 0]
        mus = [expect(lambda t, a=a: k(t, a)) for a in values]
        for i, j in np.ndindex(3, 3):
            reference = float(expect(lambda t, i=i, j=j: (k(t, values[i]) - mus[i])
                                     * (k(t, values[j]) - mus[j])))
            assert abs(got[i, j] - reference) <= 1e-12 * abs(reference)


def test_indices_that_break_identities_are_never_returned_quietly(monkeypatch):
    """Issue 27 item 15: scikit-learn's default ``alpha=1e-10`` makes ``|K^-1 y|`` ~ 4e7;
    in float64 the quadratic forms of the indices then keep no digit (a negative total index,
    first order above total, Shapley effects off the variance by 3e-3). ``global_sensitivity``
    recomputes them in binary128 (``test_sensitivity_interpolating.py``); with that disabled,
    as beyond binary128's range, the broken float64 result must carry a warning."""
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import RBF as SkRBF

    from gpexplain.accuracy import CompletenessWarning
    from gpexplain.explain import sensitivity

    monkeypatch.setattr(sensitivity, "_QUAD_TRIGGER", np.inf)
    rng = np.random.default_rng(0)
    X = rng.uniform(-2, 2, size=(60, 2))
    gp = GaussianProcessRegressor(SkRBF([8.0, 8.0]), optimizer=None).fit(X, np.sin(X[:, 0]))
    with pytest.warns(CompletenessWarning, match="identities of a variance decomposition"
                      ) as record:
        result = gx.global_sensitivity(gx.from_sklearn(gp))
    broken = result.total.min() < 0 or np.any(result.first_order > result.total)
    assert broken  # the inputs still reach the failure the warning is for
    gap = abs(result.shapley_effects.sum() - result.total_variance)
    assert f"{gap:.3g}" in str(record[0].message)


def test_well_conditioned_indices_pass_the_identity_check_silently():
    import warnings

    posterior = _posterior(3, [0.8, 1.2, 2.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = gx.global_sensitivity(posterior)
    assert np.all(result.first_order <= result.total)
    assert result.shapley_effects.sum() == pytest.approx(result.total_variance, rel=1e-10)


@pytest.mark.parametrize("factor", [1e40, 1e120, 1e-40])
def test_indices_are_invariant_to_a_feature_in_huge_or_tiny_units(factor):
    """Issue 27: a column with std beyond ~1e30 made the Gaussian closed forms overflow
    (products like L (L + D) (L + 3 D) S1 ~ std^10), a FloatingPointError; the indices are
    dimensionless, so rescaling a feature (its values, lengthscale and measure) changes none."""
    posterior = _posterior(2, [0.8, 1.3])
    X, y = posterior.train_inputs, posterior.train_targets
    measure = Gaussian([0.1, -0.2], [1.1, 0.9])
    scale = np.array([1.0, factor])
    scaled = gx.ExactPosterior(X * scale, y, kernel=RBF(np.array([0.8, 1.3]) * scale, 1.1),
                               noise=0.05, mean=0.2)
    reference = gx.global_sensitivity(posterior, measure)
    result = gx.global_sensitivity(
        scaled, Gaussian(np.array([0.1, -0.2]) * scale, np.array([1.1, 0.9]) * scale))
    for name in ("first_order", "total", "shapley_effects", "expected_total", "first_order_std",
                 "total_std", "shapley_effects_std"):
        np.testing.assert_allclose(getattr(result, name), getattr(reference, name),
                                   rtol=1e-9, atol=1e-12 * reference.total_variance, err_msg=name)
