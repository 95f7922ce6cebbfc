"""Quadrature IG for stationary GPyTorch kernels (Matern, RQ, sums, products) against references.

References: ``tests.reference.ig_stationary_mpmath`` (cross term by 25-digit mpmath quadrature
split at every non-analytic point, prior term by scipy ``dblquad`` at 1e-12 on the two
triangles of the (t, s) square), written from the kernels' analytic derivatives; and the
axioms (completeness of mean and variance).
"""

from __future__ import annotations

import gpytorch
import numpy as np
import pytest
import torch

from gpexplain.explain.integrated_gradients import integrated_gradients
from gpexplain.functionals.quadrature import path_pair_prior, stationary_cross, stationary_prior
from gpexplain.kernels.stationary import radial_leaves
from gpexplain.posterior import ExactPosterior
from tests.reference.ig_stationary_mpmath import cross_term, leaf, prior_term

NOISE = 0.02
BASELINE = np.array([-0.45, 0.25])
QUERIES = np.array([[1.7, -1.3], [-1.9, 0.8]])


def _tensor(values):
    return torch.as_tensor(np.asarray(values, dtype=np.float64))


def _matern(nu, lengthscale, outputscale, dims=None):
    base = gpytorch.kernels.MaternKernel(
        nu=nu, ard_num_dims=len(lengthscale), active_dims=dims
    ).double()
    base.lengthscale = _tensor(lengthscale)
    kernel = gpytorch.kernels.ScaleKernel(base).double()
    kernel.outputscale = _tensor(outputscale)
    return kernel


def _rq(lengthscale, outputscale, alpha):
    base = gpytorch.kernels.RQKernel(ard_num_dims=len(lengthscale)).double()
    base.lengthscale = _tensor(lengthscale)
    base.alpha = _tensor(alpha)
    kernel = gpytorch.kernels.ScaleKernel(base).double()
    kernel.outputscale = _tensor(outputscale)
    return kernel


def gpytorch_rbf(lengthscale, outputscale=None, **kwargs):
    """A float64 GPyTorch RBFKernel (ARD for a vector), scaled when outputscale is given."""
    base = gpytorch.kernels.RBFKernel(ard_num_dims=np.size(lengthscale), **kwargs).double()
    base.lengthscale = _tensor(lengthscale)
    if outputscale is None:
        return base
    kernel = gpytorch.kernels.ScaleKernel(base).double()
    kernel.outputscale = _tensor(outputscale)
    return kernel


def _kernels():
    """(name, GPyTorch kernel, reference kernel as a sum of products of leaves)."""
    return [
        (
            "matern52",
            _matern(2.5, [0.9, 1.4], 1.2),
            [[leaf("matern52", [0.9, 1.4], [0, 1], 1.2)]],
        ),
        (
            "matern32",
            _matern(1.5, [0.8, 1.1], 0.7),
            [[leaf("matern32", [0.8, 1.1], [0, 1], 0.7)]],
        ),
        ("rq", _rq([0.7, 1.3], 1.1, 0.8), [[leaf("rq", [0.7, 1.3], [0, 1], 1.1, alpha=0.8)]]),
        (
            "sum",
            _matern(1.5, [1.0, 0.9], 0.6) + gpytorch_rbf([0.5, 2.0], 0.4),
            [
                [leaf("matern32", [1.0, 0.9], [0, 1], 0.6)],
                [leaf("se", [0.5, 2.0], [0, 1], 0.4)],
            ],
        ),
        (
            "product",
            _matern(1.5, [0.8], 1.3, dims=[0]) * _matern(2.5, [1.2], 1.0, dims=[1]),
            [
                [
                    leaf("matern32", [0.8], [0], 1.3),
                    leaf("matern52", [1.2], [1], 1.0),
                ]
            ],
        ),
    ]


KERNELS = _kernels()
IDS = [name for name, _, _ in KERNELS]


def _data(seed=13, n=30, d=2):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2.0, 2.0, size=(n, d))
    y = np.sin(1.5 * X[:, 0]) + 0.4 * X[:, -1] ** 2
    if d > 1:
        y = y + 0.6 * X[:, 0] * X[:, 1]
    return X, y


def _training_points_for_reference():
    """Training points placed at hard spots: on the path, 1e-6 off it, at its end, generic."""
    x, xt = QUERIES[0], BASELINE
    direction = (x - xt) / np.linalg.norm(x - xt)
    normal = np.array([-direction[1], direction[0]])
    on_path = xt + 0.37 * (x - xt)
    return np.array(
        [on_path, on_path + 1e-6 * normal, x, [0.5, -0.5], xt + 0.8 * (x - xt) + 0.3 * normal]
    )


@pytest.mark.parametrize(("name", "kernel", "reference"), KERNELS, ids=IDS)
def test_cross_term_matches_mpmath_reference(name, kernel, reference):
    Z = _training_points_for_reference()
    x = QUERIES[:1]
    leaves = radial_leaves(kernel, 2)
    got = stationary_cross(kernel, leaves, x, BASELINE, Z, 64)[0]  # (D, n)
    for n, z in enumerate(Z):
        expected = np.array(cross_term(reference, x[0], BASELINE, z))
        np.testing.assert_allclose(got[:, n], expected, rtol=0, atol=1e-11, err_msg=f"z {n}")


@pytest.mark.parametrize(("name", "kernel", "reference"), KERNELS, ids=IDS)
def test_prior_term_matches_quad_reference(name, kernel, reference):
    x = QUERIES[1]
    got = stationary_prior(kernel, x[None, :], BASELINE, 64)[0]
    expected = np.array(prior_term(reference, x, BASELINE))
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-10)


@pytest.mark.parametrize(("name", "kernel", "reference"), KERNELS, ids=IDS)
def test_two_path_prior_matches_quad_reference(name, kernel, reference):
    x, other = QUERIES[0], np.array([0.6, 1.1])
    leaves = radial_leaves(kernel, 2)
    got = path_pair_prior(kernel, x[None, :], BASELINE, other, 64, leaves)[0]
    expected = np.array(prior_term(reference, x, BASELINE, other))
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-10)


@pytest.mark.parametrize(("name", "kernel", "reference"), KERNELS, ids=IDS)
def test_two_path_prior_of_a_duplicated_baseline_is_finite_and_matches(name, kernel, reference):
    """Two equal baselines (issue 27 item 20b): the sigma rule's cut at the kink fell on 1,
    leaving a zero-length piece whose zero-weight nodes sat at zero distance, where a Matern
    kernel's autograd second derivative is 0/0; 0 * NaN made the covariance NaN."""
    x = QUERIES[0]
    leaves = radial_leaves(kernel, 2)
    got = path_pair_prior(kernel, x[None, :], BASELINE, BASELINE, 64, leaves)[0]
    expected = np.array(prior_term(reference, x, BASELINE, BASELINE))
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-8)


def test_duplicated_baselines_explain_like_the_single_baseline():
    X, y = _data()
    posterior = ExactPosterior(X, y, _matern(2.5, [0.7, 1.3], 1.4), NOISE)
    single = integrated_gradients(posterior, QUERIES, BASELINE)
    doubled = integrated_gradients(posterior, QUERIES, np.vstack([BASELINE, BASELINE]))
    np.testing.assert_allclose(doubled.mean, single.mean, rtol=0, atol=1e-12)
    np.testing.assert_allclose(doubled.cov, single.cov, rtol=0, atol=1e-8)


@pytest.mark.parametrize(("name", "kernel", "reference"), KERNELS, ids=IDS)
def test_posterior_completeness_at_64_nodes(name, kernel, reference):
    X, y = _data()
    posterior = ExactPosterior(X, y, kernel, NOISE)
    Xq = np.vstack([QUERIES, X[:3], [[0.35, 2.1]]])
    attr = integrated_gradients(posterior, Xq, BASELINE, n_steps=64)
    assert "graded Gauss-Legendre" in attr.method
    gaps = attr.completeness_gap()
    assert gaps["mean"] < 1e-8 and gaps["variance"] < 1e-8, gaps
    assert np.linalg.eigvalsh(attr.cov).min() > -1e-10
    # Converged: doubling the nodes changes nothing visible.
    finer = integrated_gradients(posterior, Xq, BASELINE, n_steps=128)
    np.testing.assert_allclose(attr.mean, finer.mean, rtol=0, atol=1e-8)
    np.testing.assert_allclose(attr.cov, finer.cov, rtol=0, atol=1e-8)


@pytest.mark.parametrize("nu", [1.5, 2.5])
def test_one_feature_paths_through_every_training_point(nu):
    # In 1-D every training point between baseline and x lies on the path (Matern kinks inside
    # [0, 1]); the attribution is then the whole difference f(x) - f(xt).
    X, y = _data(seed=3, n=25, d=1)
    posterior = ExactPosterior(X, y, _matern(nu, [0.7], 1.0), NOISE)
    Xq = np.array([[-1.8], [0.3], [1.9]])
    attr = integrated_gradients(posterior, Xq, np.array([0.1]), n_steps=64)
    gaps = attr.completeness_gap()
    assert gaps["mean"] < 1e-8 and gaps["variance"] < 1e-8, gaps
    for p, x in enumerate(Xq):
        mean, cov = posterior.predict(np.array([x, [0.1]]), return_cov=True)
        assert attr.mean[p, 0] == pytest.approx(mean[0] - mean[1], abs=1e-8)
        assert attr.cov[p, 0, 0] == pytest.approx(cov[0, 0] + cov[1, 1] - 2 * cov[0, 1], abs=1e-8)


@pytest.mark.filterwarnings("ignore::gpexplain.CompletenessWarning")  # Simpson
def test_graded_rule_beats_the_plain_staggered_construction():
    # The previous construction (plain nodes, staggered prior) has a ~1e-3 variance gap for
    # Matern 5/2; the graded rule must be many orders better at the same n_steps.
    X, y = _data()
    posterior = ExactPosterior(X, y, KERNELS[0][1], NOISE)
    Xq = np.vstack([QUERIES, X[:3]])
    graded = integrated_gradients(posterior, Xq, BASELINE, method="quadrature")
    plain = integrated_gradients(posterior, Xq, BASELINE, method="quadrature", rule="simpson",
                                 n_steps=32)
    assert graded.completeness_gap()["variance"] < 1e-4 * plain.completeness_gap()["variance"]


def test_matern_one_half_is_rejected():
    X, y = _data()
    posterior = ExactPosterior(X, y, gpytorch.kernels.MaternKernel(nu=0.5), NOISE)
    with pytest.raises(ValueError, match=r"nu=0.5 is not differentiable"):
        integrated_gradients(posterior, QUERIES, BASELINE)


def test_non_stationary_kernel_uses_the_staggered_fallback():
    X, y = _data()
    kernel = gpytorch_rbf([1.0, 1.2], 1.0) + gpytorch.kernels.LinearKernel().double()
    posterior = ExactPosterior(X, y, kernel, NOISE)
    attr = integrated_gradients(posterior, QUERIES, BASELINE)
    assert "gauss-legendre quadrature" in attr.method
    # Smooth kernel: the fallback converges fast too.
    gaps = attr.completeness_gap()
    assert gaps["mean"] < 1e-8 and gaps["variance"] < 1e-8, gaps
