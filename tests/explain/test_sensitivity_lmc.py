"""``gx.global_sensitivity`` of a linear model of coregionalisation (LMC, issue 24), per output.

References, none sharing code with ``gpexplain.explain.sensitivity`` or
``gpexplain.kernels.product_pairs``:

* the per-feature integrals mixing two or three lengthscales (``PairStructure``) against
  50-digit sums over Hermite or Gauss-Legendre atoms, up to lengthscales 1e4 times the
  measure's std: ``test_variance_integrals_against_mpmath`` in ``test_sensitivity.py``;
* the indices of each output's posterior mean (``tests.reference.lmc``: NumPy LMC, explicit
  inverse) by the closed Sobol game on a tensor grid (90 Gauss-Hermite nodes per feature for
  a Gaussian measure, 40 Gauss-Legendre for a box, the atoms of an empirical measure) and
  brute-force Shapley over it (``tests.reference.shapley_brute_force``);
* posterior expectations, standard deviations and the covariance between outputs: on the
  atoms of an empirical measure every index is an exact quadratic form ``f^T W f`` of the
  grid values (W by polarisation of the grid game), so its moments under the reference joint
  posterior are ``tr(W C) + m^T W m`` and ``2 tr(W C W C') + 4 m^T W C W m'`` exactly; under
  a Gaussian measure, Monte Carlo over joint posterior sample paths on a Gauss-Hermite grid
  (z < 5);
* a one-term LMC against the intrinsic coregionalisation model (ICM) of the same kernel.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import gpexplain as gx
from gpexplain.kernels import RBF
from gpexplain.kernels.measures import Empirical, Gaussian, Uniform
from gpexplain.kernels.product import product_structure
from gpexplain.kernels.product_pairs import PairStructure
from tests.reference import shapley_brute_force as brute
from tests.reference.lmc import joint_moments, problem, rbf

NAMES = ["yield", "cost"]
INDEX_NAMES = ("total_variance", "first_order", "total", "shapley_effects")


def _model(seed=3, n=24):
    return problem(seed=seed, n=n, d=2)


def _lmc(model):
    return gx.LMCPosterior(model.X, model.tasks, model.y,
                           [RBF(ls, 1.0) for ls in model.lengthscales], model.matrices,
                           model.noise, mean=model.means, output_names=NAMES)


def _reference_means(model, grid):
    """``m_i(grid)`` of every output, (t, m), from the reference LMC without its covariance."""
    a = model.weights()
    return np.stack([model.means[i] + sum(B[i, model.tasks] * rbf(grid, model.X, ls)
                                          for ls, B in model.terms()) @ a
                     for i in range(model.n_outputs)])


def _grid_indices(values, atoms):
    """(V, first (d,), total (d,), Shapley (d,), V_01) of a function on the tensor grid."""
    v = brute.variance_game(values, atoms)
    d = values.ndim
    everything = frozenset(range(d))
    return np.concatenate([
        [v(everything)], [v({i}) for i in range(d)],
        [v(everything) - v(everything - {i}) for i in range(d)],
        brute.shapley_from_game(v, d), [v({0, 1}) - v({0}) - v({1})]])


def _stacked(result):
    """The library's (V, first, total, Shapley, V_01) of the mean, expectation, std."""
    def stack(prefix, suffix, pair):
        return np.concatenate([[getattr(result, f"{prefix}total_variance{suffix}")]]
                              + [getattr(result, f"{prefix}{name}{suffix}")
                                 for name in INDEX_NAMES[1:]] + [[pair[0, 1]]])
    return (stack("", "", result.second_order),
            stack("expected_", "", result.expected_second_order),
            stack("", "_std", result.second_order_std))


# --- per-feature integrals mixing lengthscales ------------------------------------------------

def test_a_kernel_paired_with_itself_is_its_product_structure():
    # ProductStructure's centred moments are PairStructure(k, k)'s: the single-kernel indices
    # (tested against mpmath in test_sensitivity.py) exercise the same formulas
    k = product_structure(RBF([0.8, 1.7], 1.3), 2)
    X = np.random.default_rng(0).normal(size=(4, 2))
    for measure in (Gaussian([0.1, -0.2], [0.9, 1.2]), Uniform([-1, -2], [1, 1.5])):
        pair = PairStructure(k, k)
        np.testing.assert_array_equal(k.centred_second_moment(X, X, measure),
                                      pair.centred_second_moment(X, X, measure))
        np.testing.assert_array_equal(k.centred_sandwich(X, X, measure),
                                      pair.centred_sandwich(X, X, measure, k))
        for mine, theirs in zip(k.trace_moments(measure), pair.trace_moments(measure),
                                strict=True):
            np.testing.assert_array_equal(mine, theirs)


def test_a_feature_one_term_ignores_has_no_centred_pair_integrals():
    measure = Gaussian([0.0, 0.0], [1.0, 1.0])
    q = product_structure(RBF([0.8, np.inf], 1.0), 2)  # ignores feature 1
    r = product_structure(RBF([1.1, 0.6], 1.0), 2)
    X = np.random.default_rng(1).normal(size=(3, 2))
    pair = PairStructure(q, r)
    for value in (pair.centred_second_moment(X, X, measure), pair.centred_cross_moment(X, measure),
                  pair.centred_sandwich(X, X, measure, r), pair.trace_moments(measure)[2]):
        assert np.all(np.isfinite(value))
        np.testing.assert_array_equal(np.asarray(value)[..., 1], 0.0)


# --- indices of each output's posterior mean ----------------------------------------------------

GRIDS = {
    "gaussian": (Gaussian([0.1, -0.2], [0.9, 1.2]),
                 lambda: brute.gaussian_atoms([0.1, -0.2], [0.9, 1.2], 90)),
    "uniform": (Uniform([-1.0, -1.5], [1.2, 1.0]),
                lambda: brute.legendre_atoms([-1.0, -1.5], [1.2, 1.0], 40)),
    "empirical": (Empirical(np.random.default_rng(2).normal(size=(9, 2))), None),
}


@pytest.mark.parametrize("kind", list(GRIDS))
def test_lmc_indices_of_the_mean_against_tensor_grid(kind):
    model = _model()
    measure, atoms = GRIDS[kind]
    atoms = brute.empirical_atoms(measure.points) if atoms is None else atoms()
    result = gx.global_sensitivity(_lmc(model), measure, interactions=True)
    assert isinstance(result, gx.MultiOutputSensitivity)
    assert result.output_names == NAMES
    assert "LMC output, 2 product-kernel terms" in result[NAMES[0]].method
    grid, shape = brute.tensor_grid(atoms)
    means = _reference_means(model, grid)
    for output in range(2):
        reference = _grid_indices(means[output].reshape(shape), atoms)
        got = _stacked(result[NAMES[output]])[0]
        np.testing.assert_allclose(got, reference, rtol=0, atol=1e-12 * reference[0])


def _quadratic_forms(atoms):
    """W (1 + 3 d + 1, m, m) of every index on the grid: F(f) = f^T W f, by polarisation."""
    shape = tuple(len(nodes) for nodes, _ in atoms)
    m = int(np.prod(shape))

    def index(f):
        return _grid_indices(f.reshape(shape), atoms)

    eye = np.eye(m)
    diagonal = np.array([index(eye[i]) for i in range(m)])  # (m, K)
    W = np.zeros((diagonal.shape[1], m, m))
    for i, j in itertools.combinations(range(m), 2):
        W[:, i, j] = W[:, j, i] = 0.5 * (index(eye[i] + eye[j]) - diagonal[i] - diagonal[j])
    W[:, np.arange(m), np.arange(m)] = diagonal.T
    return W


def _gaussian_quadratic_moments(W, mean_i, C_ij, mean_j=None, C_ji=None):
    """For ``F_k(f) = f^T W_k f`` and jointly Gaussian grid values f_i, f_j (means, cross
    covariance ``C_ij``): ``(E F_k(f_i), Cov(F_k(f_i), F_k(f_j)))`` (Isserlis), each (K,);
    ``mean_j`` None: the same f, ``C_ij = Cov(f_i)``."""
    mean_j = mean_i if mean_j is None else mean_j
    C_ji = C_ij.T if C_ji is None else C_ji
    expected = np.einsum("kab,ba->k", W, C_ij) + np.einsum("a,kab,b->k", mean_i, W, mean_i)
    covariance = (2 * np.einsum("kab,bc,kcd,da->k", W, C_ij, W, C_ji)
                  + 4 * np.einsum("a,kab,bc,kcd,d->k", mean_i, W, C_ij, W, mean_j))
    return expected, covariance


def test_lmc_posterior_moments_and_covariance_between_outputs_exact_on_atoms():
    model = _model(n=16)
    measure = Empirical(np.random.default_rng(4).normal(size=(5, 2)))
    atoms = brute.empirical_atoms(measure.points)
    grid, _ = brute.tensor_grid(atoms)
    W = _quadratic_forms(atoms)
    mean, cov = joint_moments(model, grid)  # (t, m), (t m, t m)
    m = len(grid)
    blocks = [[cov[i * m:(i + 1) * m, j * m:(j + 1) * m] for j in range(2)] for i in range(2)]
    result = gx.global_sensitivity(_lmc(model), measure, interactions=True)
    for i in range(2):
        _, expected, std = _stacked(result[NAMES[i]])
        reference, variance = _gaussian_quadratic_moments(W, mean[i], blocks[i][i])
        np.testing.assert_allclose(expected, reference, rtol=1e-10)
        np.testing.assert_allclose(std, np.sqrt(variance), rtol=1e-10)
    _, between = _gaussian_quadratic_moments(W, mean[0], blocks[0][1], mean[1], blocks[1][0])
    got = np.concatenate([np.atleast_1d(result.index_covariance(name)[..., 0, 1])
                          for name in INDEX_NAMES])
    np.testing.assert_allclose(got, between[:-1], rtol=1e-9, atol=1e-12 * np.abs(between).max())


def test_lmc_posterior_moments_against_sample_paths():
    # Gauss-Hermite atoms (20 per feature) stand in for the Gaussian measure; joint samples of
    # both outputs on the grid; z-scores as in test_sensitivity.py's sample-path test
    model = _model(n=16)
    measure = Gaussian([0.1, -0.2], [0.9, 1.2])
    atoms = brute.gaussian_atoms(measure.mean, measure.std, 20)
    grid, shape = brute.tensor_grid(atoms)
    mean, cov = joint_moments(model, grid)
    eigenvalues, vectors = np.linalg.eigh(cov)
    root = vectors * np.sqrt(np.maximum(eigenvalues, 0.0))
    n = 3000
    samples = (mean.reshape(-1) + np.random.default_rng(1).normal(size=(n, len(cov))) @ root.T
               ).reshape(n, 2, -1)
    draws = np.array([[_grid_indices(path.reshape(shape), atoms) for path in pair]
                      for pair in samples])  # (n, 2, K)
    result = gx.global_sensitivity(_lmc(model), measure, interactions=True)
    for i in range(2):
        _, expected, std = _stacked(result[NAMES[i]])
        sample_std = draws[:, i].std(0)
        z_mean = np.abs(draws[:, i].mean(0) - expected) / (sample_std / np.sqrt(n))
        assert np.all(z_mean < 5.0), z_mean
        spread = ((draws[:, i] - draws[:, i].mean(0)) ** 2).std(0)
        z_std = np.abs(sample_std - std) / (spread / (2 * sample_std * np.sqrt(n)))
        assert np.all(z_std < 5.0), (z_std, sample_std, std)
    centred = draws - draws.mean(0)
    products = centred[:, 0] * centred[:, 1]
    got = np.concatenate([np.atleast_1d(result.index_covariance(name)[..., 0, 1])
                          for name in INDEX_NAMES])
    z_between = np.abs(products.mean(0)[:-1] - got) / (products.std(0)[:-1] / np.sqrt(n))
    assert np.all(z_between < 5.0), z_between


def test_one_term_lmc_equals_the_icm():
    model = _model()
    B, ls = model.matrices[0], model.lengthscales[0]
    kernel = RBF(ls, 1.3)
    icm = gx.CoregionalizedPosterior(model.X, model.tasks, model.y, kernel, B, model.noise,
                                     mean=model.means, output_names=NAMES)
    lmc = gx.LMCPosterior(model.X, model.tasks, model.y, [kernel], [B], model.noise,
                          mean=model.means, output_names=NAMES)
    measure = Gaussian([0.1, -0.2], [0.9, 1.2])
    mine, theirs = (gx.global_sensitivity(p, measure, interactions=True) for p in (lmc, icm))
    for name in NAMES:
        for got, expected in zip(_stacked(mine[name]), _stacked(theirs[name]), strict=True):
            np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-13)
    for name in INDEX_NAMES:
        np.testing.assert_allclose(mine.index_covariance(name), theirs.index_covariance(name),
                                   rtol=1e-10, atol=1e-14)


def test_lmc_from_the_regressor():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(30, 2))
    Y = np.column_stack([np.sin(X[:, 0]) + 0.3 * X[:, 1], np.cos(X[:, 1]) - 0.2 * X[:, 0]])
    fitted = gx.GPRegressor(multi_output="lmc", n_components=2, n_restarts=0,
                            max_iter=20).fit(X, Y)
    result = gx.global_sensitivity(fitted, outputs=[1])
    inputs = fitted.posterior_.data_inputs  # the default measure: their moments
    one = gx.global_sensitivity(fitted.posterior_.marginal(1),
                                Gaussian(inputs.mean(0), inputs.std(0)))
    assert len(result.output_names) == 1
    np.testing.assert_allclose(result[0].shapley_effects, one.shapley_effects, rtol=1e-12)
    assert result[0].total_variance > 0 and np.all(result[0].total_std > 0)


def test_lmc_with_a_gpytorch_matern_rq_term_exact_on_atoms():
    # Terms of different kinds (an ARD RBF and a GPyTorch product of a Matern 3/2 and an RQ
    # factor, one feature each) under an empirical measure: the indices of each output's mean
    # on the grid of the atoms, and their posterior expectation and std as exact quadratic
    # forms of the output's posterior on that grid (the marginal's own predictions: the
    # function whose indices are taken, not the sensitivity code).
    import gpytorch.kernels as gk
    import torch

    matern = gk.MaternKernel(nu=1.5, active_dims=torch.tensor([0]))
    matern.lengthscale = torch.tensor(0.9)
    rq = gk.RQKernel(active_dims=torch.tensor([1]))
    rq.lengthscale, rq.alpha = torch.tensor(1.2), torch.tensor(0.8)
    second = gx.kernels.GPyTorchKernel(gk.ScaleKernel(gk.ProductKernel(matern, rq)).double())
    model = _model(n=16)
    posterior = gx.LMCPosterior(model.X, model.tasks, model.y,
                                [RBF(model.lengthscales[0], 1.0), second], model.matrices,
                                model.noise, mean=model.means, output_names=NAMES)
    measure = Empirical(np.random.default_rng(6).normal(size=(5, 2)))
    atoms = brute.empirical_atoms(measure.points)
    grid, shape = brute.tensor_grid(atoms)
    W = _quadratic_forms(atoms)
    result = gx.global_sensitivity(posterior, measure, interactions=True)
    for i, name in enumerate(NAMES):
        mean, C = posterior.marginal(i).predict(grid, return_cov=True)
        of_mean, expected, std = _stacked(result[name])
        reference = _grid_indices(mean.reshape(shape), atoms)
        np.testing.assert_allclose(of_mean, reference, rtol=0, atol=1e-12 * reference[0])
        reference, variance = _gaussian_quadratic_moments(W, mean, C)
        np.testing.assert_allclose(expected, reference, rtol=1e-9)
        np.testing.assert_allclose(std, np.sqrt(variance), rtol=1e-9)
