"""``gx.global_importance``: exact moments of mean, mean absolute and mean squared attributions
over a data set against Monte Carlo over the joint Gaussian of all attributions (|z| < 5 on the
means and variances), its probabilities against an independent Monte Carlo, and its argument
checks."""

from __future__ import annotations

import numpy as np
import pytest

import gpexplain as gx
from gpexplain.explain.global_importance import importance_of
from gpexplain.kernels import RBF
from gpexplain.posterior import ExactPosterior
from tests.reference.monte_carlo import variance_with_standard_error

rng = np.random.default_rng(7)
TRAIN = rng.uniform(-2, 2, size=(15, 3))
POSTERIOR = ExactPosterior(TRAIN, np.sin(TRAIN[:, 0]) + 0.3 * TRAIN[:, 1] * TRAIN[:, 2],
                           RBF([1.0, 1.4, 1.2], 1.0), 0.05)
POINTS = rng.uniform(-2, 2, size=(10, 3))
N_DRAWS = 100_000


@pytest.fixture(scope="module")
def draws():
    attribution = gx.integrated_gradients(POSTERIOR, POINTS, return_cov="points")
    dense = attribution.point_cov.dense().reshape(attribution.mean.size, -1)
    sample = np.random.default_rng(0).multivariate_normal(
        attribution.mean.ravel(), dense, size=N_DRAWS, method="eigh")
    return attribution, sample.reshape(N_DRAWS, *attribution.mean.shape)


SUMMARISE = {"mean": lambda a: a.mean(1), "mean_abs": lambda a: np.abs(a).mean(1),
             "mean_sq": lambda a: (a**2).mean(1)}


@pytest.mark.parametrize("summary", sorted(SUMMARISE))
def test_moments_and_probabilities_match_monte_carlo(draws, summary):
    attribution, sample = draws
    result = importance_of(attribution, summary, n_samples=4000, random_state=3)
    values = SUMMARISE[summary](sample)  # (N, D)
    mean_z = (result.mean - values.mean(0)) / (values.std(0) / np.sqrt(N_DRAWS))
    assert np.abs(mean_z).max() < 5
    for i in range(3):
        variance, standard_error = variance_with_standard_error(values[:, i])
        assert abs(result.std[i] ** 2 - variance) < 5 * standard_error
    if result.cov is not None:
        centred = values - values.mean(0)
        products = centred[:, :, None] * centred[:, None, :]
        se = products.std(0) / np.sqrt(N_DRAWS)
        assert np.all(np.abs(result.cov - products.mean(0)) < 5 * se + 1e-15)
    reference = (values[:, :, None] > values[:, None, :]).mean(0)
    error = max(result.probability_standard_error, 0.5 / np.sqrt(N_DRAWS))
    assert np.all(np.abs(result.probability_greater - reference) < 5 * error + 1e-12)
    if summary == "mean":
        assert result.probability_standard_error == 0.0 and result.n_samples == 0
    else:
        assert 0 < result.probability_standard_error <= 0.5 / np.sqrt(4000)


def test_public_call_matches_summary_of_the_attribution_and_bounds_the_joint():
    result = gx.global_importance(POSTERIOR, POINTS, "gradients", "mean_sq", n_samples=500)
    attribution = gx.gradients(POSTERIOR, POINTS, return_cov="points")
    again = importance_of(attribution, "mean_sq", n_samples=500)
    np.testing.assert_allclose(result.mean, again.mean, rtol=1e-12)
    np.testing.assert_array_equal(result.probability_greater, again.probability_greater)
    assert result.to_frame().shape == (3, 4) and "mean_sq" in repr(result)
    bounded = importance_of(attribution, "mean_abs", max_joint=10)
    assert bounded.probability_greater is None and "max_joint" in bounded.note
    assert list(bounded.to_frame().columns) == ["feature", "importance", "std"]
    np.testing.assert_allclose(bounded.std, importance_of(attribution, "mean_abs").std)


def test_arguments_are_validated():
    with pytest.raises(ValueError, match="unknown summary"):
        gx.global_importance(POSTERIOR, POINTS, summary="median")
    with pytest.raises(ValueError, match="is global"):
        gx.global_importance(POSTERIOR, POINTS, method="global-sensitivity")
    with pytest.raises(ValueError, match="return_cov"):
        gx.global_importance(POSTERIOR, POINTS, return_cov=True)
    with pytest.raises(ValueError, match="n_samples"):
        gx.global_importance(POSTERIOR, POINTS, n_samples=0)
    with pytest.raises(ValueError, match="return_cov='points'"):
        importance_of(gx.gradients(POSTERIOR, POINTS), "mean")
