"""Tests of ``gpexplain.metrics`` against values derived by hand on explicit models.

The reference model is linear, ``f(x) = b + beta . x``: removing feature l (replacing it by
``r_l``) changes the prediction by exactly ``beta_l (x_l - r_l)``, the true contribution, so
every metric has a closed-form value for it.
"""

from __future__ import annotations

import numpy as np
import pytest

from gpexplain.attribution import Attribution
from gpexplain.explain.integrated_gradients import integrated_gradients
from gpexplain.kernels import RBF
from gpexplain.metrics import completeness, faithfulness, stability, sufficiency
from gpexplain.posterior import ExactPosterior

BETA = np.array([1.5, -2.0, 0.7, 3.0, -0.4])
INTERCEPT = 0.3


def linear_predict(X):
    return INTERCEPT + X @ BETA


def true_contributions(reference):
    return lambda X: BETA * (X - reference)


def data(n=40, seed=0):
    return np.random.default_rng(seed).normal(size=(n, BETA.size))


# -- faithfulness -------------------------------------------------------------------------
def test_faithfulness_of_true_contributions_is_one():
    X = data()
    reference = X.mean(axis=0)
    scores = faithfulness(linear_predict, true_contributions(reference), X, reference)
    assert scores.shape == (X.shape[0],)
    np.testing.assert_allclose(scores, 1.0, atol=1e-12)


def test_faithfulness_hand_value():
    # beta = (1, 2, 3), r = 0, x = (1, 1, -1): delta = (1, 2, -3); with phi = beta (the weights,
    # not the contributions) the centred vectors are (1, 2, -3) and (-1, 0, 1), so
    # r = -4 / sqrt(14 * 2) = -2 / sqrt(7).
    beta = np.array([1.0, 2.0, 3.0])
    score = faithfulness(
        lambda X: X @ beta, lambda X: np.tile(beta, (len(X), 1)), [[1.0, 1.0, -1.0]], np.zeros(3)
    )
    np.testing.assert_allclose(score, [-2.0 / np.sqrt(7.0)], rtol=1e-13)


def test_faithfulness_scale_sign_and_permutation():
    X = data(seed=1)
    reference = np.zeros(BETA.size)
    rng = np.random.default_rng(2)
    noise = rng.normal(size=X.shape)

    def noisy(X):  # an imperfect explainer: scores strictly between -1 and 1
        return BETA * X + noise[: len(X)]

    base = faithfulness(linear_predict, noisy, X, reference)
    assert np.all(np.abs(base) < 1.0)
    scaled = faithfulness(linear_predict, lambda X: 7.0 * noisy(X), X, reference)
    np.testing.assert_allclose(scaled, base, atol=1e-12)
    flipped = faithfulness(linear_predict, lambda X: -noisy(X), X, reference)
    np.testing.assert_allclose(flipped, -base, atol=1e-12)
    # Relabel the features: the model, the explainer and the reference permuted together.
    perm = rng.permutation(BETA.size)
    inverse = np.argsort(perm)
    permuted = faithfulness(
        lambda Xp: linear_predict(Xp[:, inverse]),
        lambda Xp: noisy(Xp[:, inverse])[:, perm],
        X[:, perm],
        reference[perm],
    )
    np.testing.assert_allclose(permuted, base, atol=1e-12)


def test_random_explainer_scores_worse_than_true_one():
    X = data(n=200, seed=3)
    reference = X.mean(axis=0)
    rng = np.random.default_rng(4)
    random_phi = rng.normal(size=X.shape)
    random_scores = faithfulness(linear_predict, lambda X: random_phi, X, reference)
    assert abs(random_scores.mean()) < 0.15  # mean of 200 correlations of independent vectors
    true = true_contributions(reference)
    assert sufficiency(linear_predict, lambda X: random_phi, X, 2, reference) > sufficiency(
        linear_predict, true, X, 2, reference
    )


def test_faithfulness_constant_vectors_score_zero():
    reference = np.zeros(BETA.size)
    X = np.vstack([reference, data(n=3)])  # row 0 equals the reference: every delta is 0
    scores = faithfulness(linear_predict, true_contributions(reference), X, reference)
    assert scores[0] == 0.0
    np.testing.assert_allclose(scores[1:], 1.0, atol=1e-12)
    # A constant model: delta is 0 everywhere, whatever the attributions.
    constant_model = faithfulness(lambda X: np.full(len(X), 2.0), lambda X: X, X, reference)
    np.testing.assert_array_equal(constant_model, 0.0)
    # Constant attributions (a global weight shared by all features) score 0 too.
    flat = faithfulness(linear_predict, lambda X: np.ones_like(X), X[1:], reference)
    np.testing.assert_array_equal(flat, 0.0)


def gpx_like_predict(X, Z):
    """A locally linear model f(x, z) = w(x) . z with one weight w(x) = 1 + sum(x)."""
    return (1.0 + X.sum(axis=1)) * Z.sum(axis=1)


def gpx_like_contributions(X, Z):
    return (1.0 + X.sum(axis=1))[:, None] * Z


def test_removal_changes_x_and_z_by_default():
    x = np.array([[0.5, -1.0, 2.0]])
    z = np.array([[1.0, 2.0, -0.5]])
    zero = np.zeros(3)
    score = faithfulness(gpx_like_predict, gpx_like_contributions, (x, z), (zero, zero))
    # By hand: f = (1 + 1.5) * 2.5 = 6.25; removing l from both x and z (reference 0) gives
    # (2.5 - x_l)(2.5 - z_l) = 3.0, 1.75, 1.5; delta = 3.25, 4.5, 4.75; phi = 2.5, 5, -1.25.
    delta = np.array([3.25, 4.5, 4.75])
    phi = np.array([2.5, 5.0, -1.25])
    expected = np.corrcoef(delta, phi)[0, 1]
    np.testing.assert_allclose(score, [expected], rtol=1e-12)
    assert expected < 0.0

    def z_only(inputs, mask):  # the trivial removal docs/errata.md, GPX warns about
        X, Z = inputs
        return X, np.where(mask, 0.0, Z)

    trivial = faithfulness(gpx_like_predict, gpx_like_contributions, (x, z), remove=z_only)
    np.testing.assert_allclose(trivial, [1.0], atol=1e-12)

    def in_place(inputs, mask):  # a hook that edits its arguments must not leak the edit
        for array in inputs:
            array[mask] = 0.0
        return inputs

    edited = faithfulness(gpx_like_predict, gpx_like_contributions, (x, z), remove=in_place)
    np.testing.assert_allclose(edited, score, rtol=1e-12)


def test_attribution_object_is_accepted():
    X = data(n=5)
    reference = np.zeros(BETA.size)
    phi = BETA * X
    attribution = Attribution(
        mean=phi,
        cov=None,
        X=X,
        prediction=linear_predict(X),
        baseline=reference,
        baseline_prediction=INTERCEPT,
        feature_names=[f"x{i}" for i in range(BETA.size)],
        method="test",
    )
    scores = faithfulness(linear_predict, lambda X: attribution, X, reference)
    np.testing.assert_allclose(scores, 1.0, atol=1e-12)


# -- sufficiency --------------------------------------------------------------------------
def test_sufficiency_hand_values():
    beta = np.array([3.0, -2.0, 1.0, 0.5])
    x = np.ones((1, 4))
    predict = lambda X: X @ beta  # noqa: E731
    weights = lambda X: np.tile(beta, (len(X), 1))  # noqa: E731  |phi| order 0, 1, 2, 3
    # Kept features 0..k-1; the error is the sum of the removed contributions, squared.
    expected = np.array([2.5, -0.5, 1.5, 0.5, 0.0]) ** 2
    scores = sufficiency(predict, weights, x, [0, 1, 2, 3, 4], np.zeros(4))
    np.testing.assert_allclose(scores, expected, rtol=1e-14)
    assert isinstance(sufficiency(predict, weights, x, 1, np.zeros(4)), float)


def test_sufficiency_is_a_mean_of_squares_and_breaks_ties_by_index():
    beta = np.array([1.0, 2.0, 3.0])
    X = np.array([[1.0, 1.0, 1.0], [2.0, 0.0, 1.0]])
    predict = lambda X: X @ beta  # noqa: E731
    tied = lambda X: np.ones_like(X)  # noqa: E731  every |phi| equal: feature 0 is kept
    # Row 0 loses 2 + 3 = 5, row 1 loses 0 + 3 = 3: mean of squares (25 + 9) / 2 = 17.
    np.testing.assert_allclose(sufficiency(predict, tied, X, 1, np.zeros(3)), 17.0)


def test_sufficiency_of_true_contributions_at_all_features_is_zero():
    X = data()
    reference = X.mean(axis=0)
    scores = sufficiency(linear_predict, true_contributions(reference), X, [BETA.size], reference)
    np.testing.assert_allclose(scores, 0.0, atol=1e-24)


# -- stability ----------------------------------------------------------------------------
def test_stability_hand_values():
    # Points 0 and 1 are neighbours (||dx|| / m = 0.05 / 2 < 0.05), point 2 is far away.
    X = np.array([[0.0, 0.0], [0.05, 0.0], [1.0, 1.0]])
    beta = np.array([2.0, 5.0])
    values, counts = stability(lambda X: beta * X, X, 0.05, return_counts=True)
    # ||beta o dx|| / ||dx|| = 2 for a step along the first feature.
    np.testing.assert_allclose(values, [2.0, 2.0, 0.0], rtol=1e-12)
    np.testing.assert_array_equal(counts, [1, 1, 0])
    # Global weights (the same for every point) are perfectly stable.
    np.testing.assert_array_equal(stability(lambda X: np.tile(beta, (len(X), 1)), X), 0.0)


def test_stability_takes_the_maximum_and_skips_duplicates():
    X = np.array([[0.0, 0.0], [0.04, 0.0], [0.0, 0.04], [0.0, 0.0]])
    beta = np.array([2.0, 5.0])
    values, counts = stability(lambda X: beta * X, X, 0.05, return_counts=True)
    # Point 0: ratios 2 (to point 1) and 5 (to point 2), duplicate point 3 skipped.
    assert values[0] == pytest.approx(5.0, rel=1e-12)
    np.testing.assert_array_equal(counts, [2, 3, 3, 2])
    # Point 1 to point 2: ||(-0.08, 0.2)|| / ||(-0.04, 0.04)||.
    assert values[1] == pytest.approx(np.hypot(0.08, 0.2) / np.hypot(0.04, 0.04), rel=1e-12)


def test_stability_with_separate_z_uses_x_for_the_ball_and_z_for_the_ratio():
    x = np.array([[0.0], [0.01], [5.0]])
    z = np.array([[1.0, 0.0], [1.0, 2.0], [1.0, 2.0]])
    weights = np.array([[0.0, 0.0], [3.0, 4.0], [9.0, 9.0]])
    values = stability(lambda X, Z: weights, (x, z), 0.05)
    # Only points 0 and 1 are within the x-ball; ||(3, 4)|| / ||(0, 2)|| = 2.5.
    np.testing.assert_allclose(values, [2.5, 2.5, 0.0], rtol=1e-12)


def test_stability_standardized_hand_value_and_invariance():
    X = np.array([[0.0, 0.0], [0.04, 0.0]])
    # Standardised across features, (1, 0) becomes (1, -1) and (0, 1) becomes (-1, 1):
    # ||difference|| = 2 sqrt(2), divided by ||dx|| = 0.04.
    phi = np.array([[1.0, 0.0], [0.0, 1.0]])
    values = stability(lambda X: phi, X, standardize=True)
    np.testing.assert_allclose(values, 2.0 * np.sqrt(2.0) / 0.04, rtol=1e-12)
    # A positive scale and a shift per point change nothing after standardisation.
    rng = np.random.default_rng(6)
    Y = rng.normal(scale=0.01, size=(6, 3))
    attributions = rng.normal(size=(6, 3))
    scale, shift = rng.uniform(0.5, 3.0, size=(6, 1)), rng.normal(size=(6, 1))
    base = stability(lambda X: attributions, Y, standardize=True)
    moved = stability(lambda X: scale * attributions + shift, Y, standardize=True)
    np.testing.assert_allclose(moved, base, rtol=1e-12)
    assert np.all(base > 0)
    # Without standardisation the same change of scale does change the score.
    assert not np.allclose(stability(lambda X: scale * attributions, Y), stability(
        lambda X: attributions, Y))
    # Constant vectors standardise to zeros: identical after standardisation, score 0.
    flat = stability(lambda X: np.arange(6.0)[:, None] * np.ones((6, 3)), Y, standardize=True)
    np.testing.assert_array_equal(flat, 0.0)


# -- completeness -------------------------------------------------------------------------
def test_completeness_of_true_contributions_and_of_weights():
    X = data(n=6)
    reference = X.mean(axis=0)
    np.testing.assert_allclose(
        completeness(linear_predict, true_contributions(reference), X, reference), 0.0, atol=1e-12
    )
    # Weights beta instead of contributions: gap = sum(beta) - beta . (x - r).
    gap = completeness(linear_predict, lambda X: np.tile(BETA, (len(X), 1)), X, reference)
    np.testing.assert_allclose(gap, BETA.sum() - (X - reference) @ BETA, rtol=1e-12)


def test_integrated_gradients_of_a_gp_are_complete_and_faithful():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(30, 3))
    y = np.sin(X[:, 0]) + 0.5 * X[:, 1] ** 2 + 0.1 * rng.normal(size=30)
    posterior = ExactPosterior(X, y, RBF(lengthscale=[1.0, 1.2, 3.0], variance=1.0), 0.01)
    reference = X.mean(axis=0)

    def explainer(points):
        return integrated_gradients(posterior, points, baseline=reference, return_cov=False)

    query = X[:10]
    gap = completeness(posterior.predict_mean, explainer, query, reference)
    np.testing.assert_allclose(gap, 0.0, atol=1e-8)
    scores = faithfulness(posterior.predict_mean, explainer, query, reference)
    assert np.all(np.abs(scores) <= 1.0) and scores.mean() > 0.5


# -- errors -------------------------------------------------------------------------------
def test_errors_are_named():
    X = data(n=4)
    reference = np.zeros(BETA.size)
    true = true_contributions(reference)
    with pytest.raises(TypeError, match="predict must be a callable"):
        faithfulness(None, true, X, reference)
    with pytest.raises(TypeError, match="explainer must be a callable"):
        faithfulness(linear_predict, "shap", X, reference)
    with pytest.raises(ValueError, match="explainer returned shape"):
        faithfulness(linear_predict, lambda X: X[:2], X, reference)
    with pytest.raises(ValueError, match="non-finite attribution"):
        faithfulness(linear_predict, lambda X: np.full_like(X, np.nan), X, reference)
    with pytest.raises(ValueError, match="predict returned shape"):
        faithfulness(lambda X: X, true, X, reference)
    with pytest.raises(ValueError, match="non-finite prediction"):
        faithfulness(lambda X: np.full(len(X), np.inf), true, X, reference)
    with pytest.raises(ValueError, match="reference has 3 values"):
        faithfulness(linear_predict, true, X, np.zeros(3))
    with pytest.raises(ValueError, match="reference is missing"):
        faithfulness(linear_predict, true, X)
    with pytest.raises(ValueError, match="non-finite value at position 1"):
        faithfulness(linear_predict, true, X, [0.0, np.nan, 0.0, 0.0, 0.0])
    with pytest.raises(ValueError, match="at least 2 features"):
        faithfulness(lambda X: X[:, 0], lambda X: X, X[:, :1], [0.0])
    with pytest.raises(ValueError, match="NaN at row 0"):
        faithfulness(linear_predict, true, np.full((1, BETA.size), np.nan), reference)
    with pytest.raises(ValueError, match="k must lie in 0..5"):
        sufficiency(linear_predict, true, X, 6, reference)
    with pytest.raises(ValueError, match="k must be an integer"):
        sufficiency(linear_predict, true, X, 1.5, reference)
    with pytest.raises(ValueError, match="epsilon must be a positive"):
        stability(true, X, 0.0)


def test_errors_for_separate_inputs():
    x, z = np.zeros((3, 2)), np.ones((3, 4))
    with pytest.raises(ValueError, match="needs remove=callable"):
        faithfulness(lambda X, Z: Z.sum(1), lambda X, Z: Z, (x, z), (np.zeros(2), np.zeros(4)))
    with pytest.raises(ValueError, match="reference must be a tuple of 2 vectors"):
        faithfulness(lambda X, Z: Z.sum(1), lambda X, Z: Z, (x, z), np.zeros(4))
    with pytest.raises(ValueError, match="different numbers of rows"):
        faithfulness(lambda X, Z: Z.sum(1), lambda X, Z: Z, (x[:2], z), remove=lambda i, m: i)
    with pytest.raises(ValueError, match="same shapes as X"):
        faithfulness(lambda X, Z: Z.sum(1), lambda X, Z: Z, (x, z), remove=lambda i, m: i[1])
    with pytest.raises(TypeError, match="remove must be a callable"):
        faithfulness(lambda X, Z: Z.sum(1), lambda X, Z: Z, (x, z), remove=3)
