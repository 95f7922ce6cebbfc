"""Issue 27 item 16: measures given as labelled pandas objects are matched to the model's
features by name, never by position, and refused when the labels are not the features."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import gpexplain as gx

rng = np.random.default_rng(3)
X = pd.DataFrame(rng.normal(size=(25, 2)) * [1.0, 3.0] + [0.0, 5.0], columns=["a", "b"])
y = np.sin(X["a"].to_numpy()) + 0.3 * X["b"].to_numpy()
POSTERIOR = gx.ExactPosterior(X, y, gx.kernels.RBF([1.0, 2.0], 1.0), noise=0.05)


def _indices(measure):
    return gx.global_sensitivity(POSTERIOR, measure).first_order


@pytest.mark.parametrize("make", [
    lambda frame: gx.measures.Gaussian(frame.mean(), frame.std()),
    lambda frame: gx.measures.Uniform(frame.min(), frame.max()),
    gx.measures.Empirical,
])
def test_reordered_labels_give_the_same_indices(make):
    # The reference: the same measure from plain arrays in the features' order.
    in_order = _indices(make(X))
    reference = _indices(make(X.to_numpy()) if make is gx.measures.Empirical
                         else _plain(make(X)))
    assert np.array_equal(in_order, reference)
    assert np.array_equal(_indices(make(X[["b", "a"]])), reference)


def _plain(measure):
    first, second = measure._pair()
    return type(measure)(np.asarray(first), np.asarray(second))


def test_labels_that_are_not_the_features_are_refused():
    wrong = X.rename(columns={"b": "c"})
    for measure in (gx.measures.Gaussian(wrong.mean(), wrong.std()),
                    gx.measures.Empirical(wrong)):
        with pytest.raises(ValueError, match="do not match the features"):
            gx.global_sensitivity(POSTERIOR, measure)


def test_product_measure_game_matches_labels():
    point = X.iloc[:1].to_numpy()
    game = {"game": "product-measure"}
    reordered = gx.shapley_values(
        POSTERIOR, point, measure=gx.measures.Empirical(X[["b", "a"]]), **game).mean
    in_order = gx.shapley_values(POSTERIOR, point, measure=gx.measures.Empirical(X), **game).mean
    assert np.array_equal(reordered, in_order)
