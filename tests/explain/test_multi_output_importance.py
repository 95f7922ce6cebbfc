"""``gx.global_importance`` of several outputs (issue 24): each output's importance equals the
single-output importance of that output's marginal posterior explained directly; the covariance
of each feature's importance between outputs against Monte Carlo over joint posterior draws of
all outputs' attributions at all points (|z| < 5 per entry); zero between independent outputs;
clear errors where it cannot be computed."""

from __future__ import annotations

import numpy as np
import pytest

import gpexplain as gx
from gpexplain.explain.global_importance import importance_of

rng = np.random.default_rng(11)
TRAIN = rng.normal(size=(40, 3))
TARGET = np.sin(TRAIN[:, 0]) + TRAIN[:, 1] * TRAIN[:, 2]
TASKS = np.arange(len(TRAIN)) % 2
MIXED = np.where(TASKS == 0, TARGET, -0.5 * TARGET + TRAIN[:, 0])
POINTS = rng.normal(size=(6, 3))
N_DRAWS = 100_000
SUMMARISE = {"mean": lambda a: a.mean(1), "mean_abs": lambda a: np.abs(a).mean(1),
             "mean_sq": lambda a: (a**2).mean(1)}


def _icm():
    return gx.CoregionalizedPosterior(TRAIN, TASKS, MIXED,
                                      gx.kernels.RBF(np.array([1.0, 0.7, 1.5]), 1.3),
                                      np.array([[1.0, 0.6], [0.6, 0.8]]), 0.05)


def _lmc():
    return gx.LMCPosterior(TRAIN, TASKS, MIXED,
                           [gx.kernels.RBF(np.array([1.0, 0.7, 1.5]), 1.3),
                            gx.kernels.RBF(np.array([0.4, 2.0, 0.9]), 0.5)],
                           [np.array([[1.0, 0.6], [0.6, 0.8]]),
                            np.array([[0.3, -0.2], [-0.2, 0.5]])], 0.05)


def _independent():
    return gx.IndependentOutputs(
        [gx.ExactPosterior(TRAIN, TARGET, gx.kernels.RBF(np.array([1.0, 0.7, 1.5]), 1.3), 0.05),
         gx.ExactPosterior(TRAIN, -TARGET, gx.kernels.RBF(np.ones(3), 0.9), 0.1)])


POSTERIORS = {"icm": _icm, "lmc": _lmc, "independent": _independent}


@pytest.mark.parametrize("kind", sorted(POSTERIORS))
@pytest.mark.parametrize("summary", sorted(SUMMARISE))
def test_each_output_equals_the_importance_of_its_marginal(kind, summary):
    posterior = POSTERIORS[kind]()
    result = gx.global_importance(posterior, POINTS, summary=summary, n_samples=1000)
    assert isinstance(result, gx.MultiOutputImportance)
    assert result.output_names == ["y0", "y1"] and result.independent == (kind == "independent")
    for i in range(2):
        alone = gx.global_importance(posterior.marginal(i), POINTS, summary=summary,
                                     n_samples=1000)
        ours = result[result.output_names[i]]
        np.testing.assert_allclose(ours.mean, alone.mean, rtol=1e-10, atol=1e-14)
        np.testing.assert_allclose(ours.std, alone.std, rtol=1e-8, atol=1e-14)
        if alone.cov is not None:
            np.testing.assert_allclose(ours.cov, alone.cov, rtol=1e-8, atol=1e-14)
        # the same draws of (to round-off) the same Gaussian: a flip needs a near tie
        np.testing.assert_allclose(ours.probability_greater, alone.probability_greater,
                                   atol=2e-3)
        assert f"output '{result.output_names[i]}'" in ours.method
    np.testing.assert_allclose(np.diagonal(result.importance_covariance(), axis1=1, axis2=2),
                               result.std.T**2, rtol=1e-12)
    frame = result.to_frame()
    assert list(frame["output"]) == ["y0"] * 3 + ["y1"] * 3
    if kind == "independent":
        assert np.all(result.importance_correlation()[:, 0, 1] == 0.0)


@pytest.fixture(scope="module", params=["icm", "lmc"])
def joint_draws(request):
    attribution = gx.integrated_gradients(POSTERIORS[request.param](), POINTS,
                                          return_cov="points")
    attribution.joint_point_cov.block_size = 4  # blocks off the diagonal of points too
    dense = attribution.point_cov_dense().reshape(attribution.mean.size, -1)
    sample = np.random.default_rng(5).multivariate_normal(
        attribution.mean.ravel(), dense, size=N_DRAWS, method="eigh")
    return attribution, sample.reshape(N_DRAWS, *attribution.mean.shape)  # (N, n, t, D)


@pytest.mark.parametrize("summary", sorted(SUMMARISE))
def test_covariance_between_outputs_matches_monte_carlo(joint_draws, summary):
    attribution, sample = joint_draws
    result = importance_of(attribution, summary, max_joint=1)
    values = SUMMARISE[summary](sample)  # (N, t, D)
    centred = values - values.mean(0)
    products = centred[:, 0, :] * centred[:, 1, :]  # (N, D): output 0 with output 1
    z = (result.importance_covariance()[:, 0, 1] - products.mean(0)) / (
        products.std(0) / np.sqrt(N_DRAWS))
    assert np.abs(z).max() < 5, z
    # not trivially zero: the outputs share their input kernels
    assert np.abs(result.importance_correlation()[:, 0, 1]).max() > 0.05
    # the blocks of 4 points against one block of all 6: the sums over pairs of points agree
    joint = attribution.joint_point_cov
    joint.block_size = 6
    try:
        whole = importance_of(attribution, summary, max_joint=1)
    finally:
        joint.block_size = 4
    np.testing.assert_allclose(result.between_outputs, whole.between_outputs, rtol=1e-10,
                               atol=1e-15)
    frame = result.between_outputs_frame()
    assert list(frame["feature"]) == ["x0", "x1", "x2"]
    np.testing.assert_allclose(frame["covariance"], result.between_outputs[:, 0, 1])


@pytest.mark.parametrize(("summary", "factor"), [("mean", -0.5), ("mean_abs", 0.5),
                                                 ("mean_sq", 0.25)])
def test_rank_one_coregionalisation_gives_proportional_importances(summary, factor):
    """B = w w^T with w = (1, -0.5): output 1 is -0.5 times output 0 (a priori, so a
    posteriori), so its attributions are too, and Cov[G(y0), G(y1)] is -0.5, 0.5 and 0.25
    times Var G(y0) for the mean, mean absolute and mean squared attribution: correlation
    -1, 1, 1 (the folded-normal product moment at correlation one)."""
    icm = gx.CoregionalizedPosterior(TRAIN, TASKS, MIXED,
                                     gx.kernels.RBF(np.array([1.0, 0.7, 1.5]), 1.3),
                                     np.array([[1.0, -0.5], [-0.5, 0.25]]), 0.05)
    attribution = gx.integrated_gradients(icm, POINTS, return_cov="points")
    attribution.joint_point_cov.block_size = 4
    result = importance_of(attribution, summary, max_joint=1)
    covariance = result.importance_covariance()
    np.testing.assert_allclose(covariance[:, 0, 1], factor * result[0].std**2, rtol=1e-9)
    np.testing.assert_allclose(result[1].mean, abs(factor) * result[0].mean
                               if summary != "mean" else factor * result[0].mean, rtol=1e-9)
    np.testing.assert_allclose(result.importance_correlation()[:, 0, 1], np.sign(factor),
                               rtol=1e-9)


def test_what_cannot_be_summarised_is_refused_by_name():
    icm = _icm()
    without_points = gx.integrated_gradients(icm, POINTS)
    with pytest.raises(ValueError, match=r"output 'y0' has no covariance across points.*"
                                         r"return_cov='points'"):
        importance_of(without_points)
    attribution = gx.integrated_gradients(icm, POINTS, return_cov="points")
    # each output's covariance across points, but not the one between outputs
    unlinked = gx.MultiOutputAttribution(attribution.attributions, attribution.output_names)
    result = importance_of(unlinked, "mean", max_joint=1)
    assert result.between_outputs is None and "joint_point_cov" in result.note
    with pytest.raises(ValueError, match="not computed.*joint_point_cov"):
        result.importance_correlation()
    selected = gx.global_importance(icm, POINTS, summary="mean", outputs=["y1"])
    assert selected.output_names == ["y1"] and selected.between_outputs.shape == (3, 1, 1)
    with pytest.raises(KeyError, match="unknown output"):
        selected["y0"]


def test_a_saved_and_loaded_explanation_gives_the_same_importance(tmp_path):
    attribution = gx.integrated_gradients(_lmc(), POINTS, return_cov="points")
    gx.save(attribution, tmp_path / "lmc")
    loaded = gx.load(tmp_path / "lmc")  # joint_point_cov dense, from the file
    for summary in ("mean", "mean_abs"):
        before, after = importance_of(attribution, summary), importance_of(loaded, summary)
        np.testing.assert_allclose(after.between_outputs, before.between_outputs, rtol=1e-12,
                                   atol=1e-16)
        np.testing.assert_allclose(after.mean, before.mean, rtol=1e-12)
