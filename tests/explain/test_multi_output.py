"""Explanations of multi-output posteriors (issue 24).

* per output: equal to the single-output explanation of that output's marginal, a posterior
  written here with NumPy (explicit inverse of the task-augmented kernel matrix, kernel
  ``B_ii k``), sharing no code with ``CoregionalizedPosterior``;
* across outputs: the covariance of integrated gradients of two outputs at the same point
  against Monte Carlo over joint posterior samples of all outputs' function values (central
  differences at the Gauss-Legendre nodes of the path; |z| < 5 per entry);
* completeness per output; independent outputs equal separate single-output fits and state a
  zero cross-output covariance; to_frame, save/load, outputs= selection and refusals.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF as SkRBF
from sklearn.gaussian_process.kernels import ConstantKernel

import gpexplain as gx
from gpexplain.posterior.multi_output import CoregionalizedPosterior
from tests.reference.icm_marginal import NumpyMarginal, squared_exponential

LENGTHSCALE = np.array([1.1, 1.6, 2.0])
VARIANCE = 1.3
NOISE = 0.05
MEANS = np.array([0.1, -0.4, 0.7])


def _se(A, C):
    return squared_exponential(A, C, LENGTHSCALE, VARIANCE)


@pytest.fixture(scope="module")
def icm():
    rng = np.random.default_rng(0)
    n = 45
    X = rng.uniform(-2, 2, size=(n, 3))
    tasks = rng.integers(0, 3, n)
    y = np.sin(X[:, 0]) + 0.5 * X[:, 1] * tasks + tasks + 0.05 * rng.normal(size=n)
    W = rng.normal(size=(3, 2))
    B = W @ W.T + np.diag([0.3, 0.2, 0.5])
    posterior = CoregionalizedPosterior(
        X, tasks, y, gx.kernels.RBF(LENGTHSCALE, VARIANCE), B, NOISE, mean=MEANS,
        output_names=["a", "b", "c"], feature_names=["u", "v", "w"],
    )
    Xq = rng.uniform(-1.5, 1.5, size=(3, 3))
    return posterior, X, tasks, y, B, Xq


def _numpy_marginal(X, tasks, y, B, i):
    """Output i of the ICM by explicit inverse (``tests.reference.icm_marginal``)."""
    return NumpyMarginal(X, tasks, y, B, i, lengthscale=LENGTHSCALE, variance=VARIANCE,
                         noise=NOISE, means=MEANS, feature_names=["u", "v", "w"])


EXPLAINERS = {
    "integrated_gradients": lambda p, X, **kw: gx.integrated_gradients(p, X, **kw),
    "gradients": lambda p, X, **kw: gx.gradients(p, X, **kw),
    "shapley_values": lambda p, X, **kw: gx.shapley_values(p, X, baseline="mean", **kw),
}


@pytest.mark.parametrize("method", sorted(EXPLAINERS))
def test_each_output_equals_the_single_output_explanation_of_its_marginal(icm, method):
    posterior, X, tasks, y, B, Xq = icm
    explain = EXPLAINERS[method]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # complete per output: no CompletenessWarning
        result = explain(posterior, Xq)
    assert result.mean.shape == (3, 3, 3) and result.cov.shape == (3, 3, 3, 3, 3)
    for i, name in enumerate(["a", "b", "c"]):
        reference = explain(_numpy_marginal(X, tasks, y, B, i), Xq)
        scale = np.abs(reference.mean).max()
        np.testing.assert_allclose(result[name].mean, reference.mean, atol=1e-8 * scale)
        np.testing.assert_allclose(result[name].cov, reference.cov,
                                   atol=1e-8 * np.abs(reference.cov).max())
        np.testing.assert_allclose(result[name].prediction, reference.prediction, atol=1e-8)
        np.testing.assert_allclose(result.output_cov(name, name), reference.cov,
                                   atol=1e-8 * np.abs(reference.cov).max())


def test_completeness_per_output(icm):
    posterior, *_, Xq = icm
    result = gx.integrated_gradients(posterior, Xq)
    for attribution in result.attributions:
        np.testing.assert_allclose(attribution.mean.sum(1),
                                   attribution.prediction - attribution.baseline_prediction,
                                   atol=1e-8)
        np.testing.assert_allclose(attribution.cov.sum((1, 2)),
                                   attribution.difference_variance, rtol=1e-8, atol=1e-10)


def test_cross_output_covariance_against_monte_carlo(icm):
    posterior, X, tasks, y, B, Xq = icm
    x, baseline = Xq[0], X.mean(axis=0)
    result = gx.integrated_gradients(posterior, x[None], baseline=baseline)
    # Joint posterior of all outputs' function values at x_path +- h e_a (NumPy, from K_aug).
    nodes, weights = np.polynomial.legendre.leggauss(12)
    nodes, weights = 0.5 * (nodes + 1), 0.5 * weights
    h, d, t = 1e-3, 3, 3
    path = baseline + nodes[:, None] * (x - baseline)  # (12, d)
    stencil = np.concatenate([path[:, None, :] + s * h * np.eye(d)[None] for s in (1, -1)])
    points = stencil.reshape(-1, d)  # (2 * 12 * d, d)
    m = len(points)
    K = B[np.ix_(tasks, tasks)] * _se(X, X) + NOISE * np.eye(len(X))
    cross = np.concatenate([B[i, tasks][None] * _se(points, X) for i in range(t)])  # (t m, N)
    prior = np.kron(B, _se(points, points))
    mean = np.concatenate([MEANS[i] + np.zeros(m) for i in range(t)]) + cross @ np.linalg.solve(
        K, y - MEANS[tasks])
    cov = prior - cross @ np.linalg.solve(K, cross.T)
    values, vectors = np.linalg.eigh(0.5 * (cov + cov.T))
    root = vectors * np.sqrt(np.clip(values, 0, None))
    rng = np.random.default_rng(1)
    n_samples = 20000
    samples = mean + rng.standard_normal((n_samples, len(mean))) @ root.T  # (S, t m)
    samples = samples.reshape(n_samples, t, 2, len(nodes), d)
    gradients = (samples[:, :, 0] - samples[:, :, 1]) / (2 * h)  # (S, t, nodes, d)
    ig = (x - baseline) * np.einsum("k,stkd->std", weights, gradients)  # (S, t, d)
    flat = ig.reshape(n_samples, t * d)
    empirical = np.cov(flat, rowvar=False)
    exact = result.cov[0].reshape(t * d, t * d)
    stderr = np.sqrt((np.outer(np.diag(exact), np.diag(exact)) + exact**2) / n_samples)
    z = (empirical - exact) / stderr
    cross_blocks = ~np.kron(np.eye(t, dtype=bool), np.ones((d, d), dtype=bool))
    assert np.abs(exact[cross_blocks]).max() > 0.1 * np.abs(exact).max()  # not trivially 0
    assert np.abs(z).max() < 5, np.abs(z).max()
    z_mean = (flat.mean(0) - result.mean[0].ravel()) / np.sqrt(np.diag(exact) / n_samples)
    assert np.abs(z_mean).max() < 5


def test_independent_outputs_equal_separate_fits_and_state_zero_cross_covariance():
    rng = np.random.default_rng(2)
    X = rng.uniform(-2, 2, size=(30, 2))
    Y = np.c_[np.sin(X[:, 0]), 20 + 3 * X[:, 1] ** 2]
    kernel = ConstantKernel(1.2) * SkRBF([1.0, 1.5])
    both = GaussianProcessRegressor(kernel, alpha=1e-2, normalize_y=True, optimizer=None)
    posterior = gx.as_multi_output(both.fit(X, Y), output_names=["sin", "square"])
    result = gx.integrated_gradients(posterior, X[:4])
    assert result.independent
    for j, name in enumerate(["sin", "square"]):
        alone = GaussianProcessRegressor(kernel, alpha=1e-2, normalize_y=True, optimizer=None)
        reference = gx.integrated_gradients(gx.from_sklearn(alone.fit(X, Y[:, j])), X[:4])
        np.testing.assert_allclose(result[name].mean, reference.mean, rtol=1e-8, atol=1e-10)
        np.testing.assert_allclose(result[name].cov, reference.cov, rtol=1e-8, atol=1e-12)
    assert np.all(result.output_cov(0, 1) == 0.0)


def test_result_table_selection_persistence_and_refusals(icm, tmp_path):
    posterior, *_, Xq = icm
    result = gx.integrated_gradients(posterior, Xq, outputs=["c", "a"], return_cov=True)
    assert result.output_names == ["c", "a"] and result.mean.shape == (3, 2, 3)
    frame = result.to_frame()
    assert list(frame.columns[:3]) == ["output", "point", "feature"]
    assert frame["output"].tolist()[:9] == ["c"] * 9 and len(frame) == 18
    gx.save(result, tmp_path / "result")
    loaded = gx.load(tmp_path / "result")
    np.testing.assert_array_equal(loaded.cov, result.cov)
    np.testing.assert_array_equal(loaded["a"].mean, result["a"].mean)
    with pytest.raises(ValueError, match="unknown output 'd'"):
        gx.gradients(posterior, Xq, outputs="d")
    with pytest.raises(ValueError, match="outputs= applies to multi-output"):
        gx.gradients(posterior.marginal(0), Xq, outputs="a")


def test_to_shap_uses_shaps_multi_output_layout(icm):
    pytest.importorskip("shap")
    posterior, *_, Xq = icm
    result = gx.integrated_gradients(posterior, Xq, outputs=["b", "c"])
    explanation = result.to_shap()
    assert explanation.values.shape == (3, 3, 2) and explanation.base_values.shape == (3, 2)
    assert list(explanation.output_names) == ["b", "c"]
    np.testing.assert_array_equal(explanation.values[..., 1], result["c"].mean)
    np.testing.assert_allclose(explanation.values.sum(1) + explanation.base_values,
                               result.prediction, atol=1e-8)
    np.testing.assert_array_equal(explanation.error_std[..., 0], result["b"].std)


def test_shapley_interactions_per_output_equal_the_marginals(icm):
    posterior, X, tasks, y, B, Xq = icm
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = gx.shapley_interactions(posterior, Xq[:2], baseline="mean", outputs=["c", "a"])
    assert result.cov.shape == (2, 2, 6, 2, 6)
    for name, i in (("c", 2), ("a", 0)):
        reference = gx.shapley_interactions(_numpy_marginal(X, tasks, y, B, i), Xq[:2],
                                            baseline="mean")
        np.testing.assert_allclose(result[name].mean, reference.mean,
                                   atol=1e-8 * np.abs(reference.mean).max())
        np.testing.assert_allclose(result.output_cov(name, name), reference.cov,
                                   atol=1e-8 * np.abs(reference.cov).max())
    assert "output" in result.to_frame().columns


def test_chunking_mean_only_and_output_weights(icm):
    posterior, X, tasks, y, B, Xq = icm
    full = gx.gradients(posterior, Xq, gradient_x_input=True)
    chunked = gx.gradients(posterior, Xq, gradient_x_input=True, chunk_size=1)
    np.testing.assert_allclose(chunked.cov, full.cov, rtol=1e-12, atol=1e-14)
    mean_only = gx.gradients(posterior, Xq, gradient_x_input=True, return_cov=False)
    assert mean_only.cov is None
    np.testing.assert_allclose(mean_only.mean, full.mean, rtol=1e-12, atol=1e-14)
    reference = gx.gradients(_numpy_marginal(X, tasks, y, B, 1), Xq, gradient_x_input=True)
    np.testing.assert_allclose(full["b"].mean, reference.mean, atol=1e-8)


SENSITIVITY_FIELDS = ("first_order", "total", "shapley_effects", "expected_first_order",
                      "expected_total", "expected_shapley_effects", "first_order_std",
                      "total_std", "shapley_effects_std", "second_order",
                      "expected_second_order", "second_order_std")


def test_global_sensitivity_per_output_equals_that_of_its_marginal(icm):
    posterior, X, tasks, y, B, Xq = icm
    result = gx.global_sensitivity(posterior, interactions=True)
    assert isinstance(result, gx.MultiOutputSensitivity) and not result.independent
    # The default measure: the Gaussian of the training inputs every output shares.
    measure = gx.measures.Gaussian(X.mean(0), X.std(0))
    for i, name in enumerate(["a", "b", "c"]):
        got = result[name]
        reference = gx.global_sensitivity(_numpy_marginal(X, tasks, y, B, i), measure,
                                          interactions=True)
        for field in SENSITIVITY_FIELDS:
            expected = getattr(reference, field)
            np.testing.assert_allclose(getattr(got, field), expected, rtol=1e-7,
                                       atol=1e-9 * np.abs(expected).max(), err_msg=field)
        # Completeness of each output's indices: the Shapley effects share out the variance
        # (of the posterior mean, and in posterior expectation); first <= Shapley <= total.
        scale = got.total_variance
        assert abs(got.shapley_effects.sum() - scale) < 1e-8 * scale
        assert abs(got.expected_shapley_effects.sum() - got.expected_total_variance) < (
            1e-8 * got.expected_total_variance)
        assert np.all(got.first_order <= got.shapley_effects + 1e-10 * scale)
        assert np.all(got.shapley_effects <= got.total + 1e-10 * scale)
        assert f"output {name!r}" in got.method
    frame = result.to_frame()
    assert frame["output"].tolist() == ["a"] * 3 + ["b"] * 3 + ["c"] * 3
    assert len(result.interactions_frame()) == 3 * 3


def test_global_sensitivity_of_independent_outputs_equals_separate_fits():
    rng = np.random.default_rng(3)
    X = rng.uniform(-2, 2, size=(30, 2))
    Y = np.c_[np.sin(X[:, 0]) + X[:, 1], 20 + 3 * X[:, 1] ** 2]
    kernel = ConstantKernel(1.2) * SkRBF([1.0, 1.5])
    both = GaussianProcessRegressor(kernel, alpha=1e-2, normalize_y=True, optimizer=None)
    posterior = gx.as_multi_output(both.fit(X, Y), output_names=["sum", "square"])
    measure = gx.measures.Uniform([-2, -2], [2, 2])
    result = gx.global_sensitivity(posterior, measure, outputs=["square", "sum"])
    assert result.independent and result.output_names == ["square", "sum"]
    for j, name in enumerate(["sum", "square"]):
        alone = GaussianProcessRegressor(kernel, alpha=1e-2, normalize_y=True, optimizer=None)
        reference = gx.global_sensitivity(gx.from_sklearn(alone.fit(X, Y[:, j])), measure)
        for field in SENSITIVITY_FIELDS[:9]:
            np.testing.assert_allclose(getattr(result[name], field), getattr(reference, field),
                                       rtol=1e-8, err_msg=field)


def test_global_sensitivity_refusals_name_the_argument(icm):
    posterior, *_ = icm
    with pytest.raises(ValueError, match="unknown output 'd'"):
        gx.global_sensitivity(posterior, outputs="d")
    with pytest.raises(ValueError, match="choose them with outputs="):
        gx.global_sensitivity(posterior, target_class="a")
    with pytest.raises(ValueError, match="outputs= applies to multi-output"):
        gx.global_sensitivity(posterior.marginal(0), outputs="a")
    with pytest.raises(KeyError, match="unknown output 'z'"):
        gx.global_sensitivity(posterior, outputs="b")["z"]


def _independent_sine_and_square():
    """Independent outputs (scikit-learn on a 2-D y) and their 25 training inputs."""
    rng = np.random.default_rng(4)
    X = rng.uniform(-2, 2, size=(25, 2))
    Y = np.c_[np.sin(X[:, 0]), X[:, 1] ** 2]
    model = GaussianProcessRegressor(ConstantKernel(1.2) * SkRBF([1.0, 1.5]), alpha=1e-2,
                                     optimizer=None).fit(X, Y)
    return gx.as_multi_output(model, output_names=["sin", "square"]), X


def test_covariance_across_points_per_output_for_independent_outputs_and_the_icm(icm):
    # return_cov="points" was turned into True for every multi-output posterior: the result
    # had no covariance across points, without a word.
    posterior, X = _independent_sine_and_square()
    result = gx.integrated_gradients(posterior, X[:3], return_cov="points")
    for i, name in enumerate(["sin", "square"]):
        alone = gx.integrated_gradients(posterior.marginal(i), X[:3], return_cov="points")
        assert result[name].point_cov is not None
        np.testing.assert_allclose(result[name].point_cov.dense(), alone.point_cov.dense(),
                                   rtol=1e-12,
                                   atol=1e-15)
    # the ICM: each output's covariance across points, equal to that of its marginal written
    # independently (explicit inverse of the task-augmented kernel matrix)
    coregionalized, X_train, tasks, y, B, Xq = icm
    joint = gx.integrated_gradients(coregionalized, Xq, return_cov="points")
    for i, name in enumerate(["a", "b", "c"]):
        reference = gx.integrated_gradients(_numpy_marginal(X_train, tasks, y, B, i), Xq,
                                            return_cov="points").point_cov.dense()
        dense = joint[name].point_cov.dense()
        np.testing.assert_allclose(dense, reference, rtol=0, atol=1e-9 * np.abs(reference).max())
        for p in range(len(Xq)):
            np.testing.assert_allclose(dense[p, :, p], joint[name].cov[p], rtol=0,
                                       atol=1e-10 * np.abs(reference).max())


def _joint_draws(X, tasks, y, B, points, n_samples, seed):
    """Draws of the joint posterior of every output's f at ``points``, (n_samples, t, m),
    written here with NumPy from the ICM kernel ``B kron k`` over the task-augmented training
    set (explicit solve; no code of the library)."""
    t, m = len(B), len(points)
    K = B[np.ix_(tasks, tasks)] * _se(X, X) + NOISE * np.eye(len(X))
    cross = np.concatenate([B[i, tasks][None] * _se(points, X) for i in range(t)])  # (t m, N)
    mean = np.repeat(MEANS, m) + cross @ np.linalg.solve(K, y - MEANS[tasks])
    cov = np.kron(B, _se(points, points)) - cross @ np.linalg.solve(K, cross.T)
    values, vectors = np.linalg.eigh(0.5 * (cov + cov.T))
    root = vectors * np.sqrt(np.clip(values, 0, None))
    draws = mean + np.random.default_rng(seed).standard_normal((n_samples, len(mean))) @ root.T
    return draws.reshape(n_samples, t, m)


def _covariance_z(flat, exact):
    """Largest |z| of the sample covariance of ``flat`` (S, k) against ``exact`` (k, k)."""
    n_samples = len(flat)
    stderr = np.sqrt((np.outer(np.diag(exact), np.diag(exact)) + exact**2) / n_samples)
    return np.abs((np.cov(flat, rowvar=False) - exact) / stderr).max()


def test_covariance_across_points_between_outputs_against_monte_carlo(icm):
    """``joint_point_cov`` of integrated gradients and gradients at two points, all three
    outputs: against the sample covariance of the same functionals of joint posterior draws
    (central differences at the Gauss-Legendre nodes of each path, and at each point),
    |z| < 5 for every entry, the blocks between different outputs at different points
    included (and not trivially zero)."""
    posterior, X, tasks, y, B, Xq = icm
    x, baseline = np.stack([Xq[0], Xq[0] + np.array([0.6, -0.4, 0.3])]), X.mean(axis=0)
    n_points, t, d, h = 2, 3, 3, 1e-3
    ig = gx.integrated_gradients(posterior, x, baseline=baseline, return_cov="points")
    gradients = gx.gradients(posterior, x, return_cov="points")
    nodes, weights = np.polynomial.legendre.leggauss(16)
    nodes, weights = 0.5 * (nodes + 1), 0.5 * weights
    paths = baseline + nodes[None, :, None] * (x - baseline)[:, None, :]  # (2, 16, d)
    centres = np.concatenate([paths.reshape(-1, d), x])  # path nodes, then the two points
    stencil = np.stack([centres[:, None, :] + s * h * np.eye(d)[None] for s in (1, -1)])
    n_samples = 20000
    draws = _joint_draws(X, tasks, y, B, stencil.reshape(-1, d), n_samples, seed=7)
    draws = draws.reshape(n_samples, t, 2, len(centres), d)
    derivative = (draws[:, :, 0] - draws[:, :, 1]) / (2 * h)  # (S, t, centres, d)
    along = derivative[:, :, : 2 * len(nodes)].reshape(n_samples, t, n_points, len(nodes), d)
    sampled = {
        "integrated gradients": (x - baseline)[None, None] * np.einsum("k,stpkd->stpd",
                                                                         weights, along),
        "gradients": derivative[:, :, 2 * len(nodes):],  # (S, t, points, d)
    }
    for name, result in (("integrated gradients", ig), ("gradients", gradients)):
        exact = result.point_cov_dense()  # (p, i, a, q, j, b)
        flat = np.transpose(sampled[name], (0, 2, 1, 3)).reshape(n_samples, -1)
        exact_flat = exact.reshape(n_points * t * d, n_points * t * d)
        others = ~np.eye(t, dtype=bool)
        block = np.transpose(exact[0, :, :, 1], (0, 2, 1, 3))  # (i, j, a, b)
        between = np.abs(block[others]).max()  # other outputs at the other point
        assert between > 0.1 * np.abs(exact).max(), name
        z = _covariance_z(flat, exact_flat)
        assert z < 5, (name, z)
        # the draws tell those blocks from zero (what the per-output covariances would say)
        apart = (~np.eye(n_points, dtype=bool))[:, None, None, :, None, None] & others[
            None, :, None, None, :, None]
        wrong = np.where(apart, 0.0, exact).reshape(exact_flat.shape)
        assert _covariance_z(flat, wrong) > 20, name
        z_mean = np.abs(flat.mean(0) - result.mean.ravel()) / np.sqrt(np.diag(exact_flat)
                                                                       / n_samples)
        assert z_mean.max() < 5, (name, z_mean.max())


def test_joint_covariance_across_points_agrees_with_its_parts_and_is_psd(icm, tmp_path):
    posterior, X, tasks, y, B, Xq = icm
    scale = None
    for method, options in (("integrated_gradients", {}),
                            ("gradients", {"gradient_x_input": True})):
        explain = getattr(gx, method)
        result = explain(posterior, Xq, return_cov="points", **options)
        joint = result.point_cov_dense()  # (3 points, 3 outputs, 3, 3, 3, 3)
        scale = np.abs(joint).max()
        for i, name in enumerate(["a", "b", "c"]):  # each output's own covariance
            np.testing.assert_allclose(joint[:, i, :, :, i, :], result[name].point_cov.dense(),
                                       rtol=0, atol=1e-10 * scale)
        for p in range(len(Xq)):  # at one point: the joint covariance across outputs
            np.testing.assert_allclose(joint[p, :, :, p], result.cov[p], rtol=0,
                                       atol=1e-10 * scale)
        flat = joint.reshape(27, 27)
        np.testing.assert_array_equal(flat, flat.T)
        assert np.linalg.eigvalsh(flat).min() > -1e-10 * scale
        # blocks of one point evaluate the same matrix (memory bounded by the block size)
        result.joint_point_cov.block_size = 1
        np.testing.assert_allclose(result.joint_point_cov.dense().reshape(joint.shape), joint,
                                   rtol=0, atol=1e-13 * scale)
        # a selection of outputs: the rows and columns of the whole
        chosen = explain(posterior, Xq, return_cov="points", outputs=["c", "a"], **options)
        np.testing.assert_allclose(chosen.point_cov_dense(),
                                   joint[:, [2, 0]][:, :, :, :, [2, 0]], rtol=0,
                                   atol=1e-13 * scale)
    # saved dense (it used to fail on the lazy covariance's task), loaded equal
    loaded = gx.load(gx.save(result, tmp_path / "joint"))
    np.testing.assert_array_equal(loaded.point_cov_dense(), result.point_cov_dense())
    np.testing.assert_array_equal(loaded["b"].point_cov.dense(), result["b"].point_cov.dense())


def test_joint_covariance_across_points_of_independent_outputs_is_stated_zero():
    posterior, X = _independent_sine_and_square()
    result = gx.integrated_gradients(posterior, X[:3], return_cov="points")
    assert result.independent and result.joint_point_cov is None  # not computed
    joint = result.point_cov_dense()
    assert joint.shape == (3, 2, 2, 3, 2, 2)
    assert np.all(joint[:, 0, :, :, 1, :] == 0.0) and np.all(joint[:, 1, :, :, 0, :] == 0.0)
    for i, name in enumerate(["sin", "square"]):
        np.testing.assert_array_equal(joint[:, i, :, :, i, :], result[name].point_cov.dense())
    assert gx.integrated_gradients(posterior, X[:3]).point_cov_dense() is None
