"""Labelled (pandas) baselines are matched to the features by name, or refused."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import gpexplain as gx

NAMES = ["income", "age", "dose"]


@pytest.fixture(scope="module")
def setup():
    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(20, 3)) * [10.0, 1.0, 0.1] + [50.0, 0.0, 1.0],
                     columns=NAMES)
    y = np.sin(X["age"]) + 0.01 * X["income"]
    posterior = gx.ExactPosterior(X, y, gx.kernels.RBF([10.0, 1.0, 0.1], 1.0), 0.1)
    return posterior, X, X.mean()


def test_reordered_series_baseline_gives_each_feature_its_own_value(setup):
    posterior, X, mean = setup
    ordered = gx.integrated_gradients(posterior, X.iloc[:3], baseline=mean.to_numpy())
    reordered = mean[["dose", "income", "age"]]
    shuffled = gx.integrated_gradients(posterior, X.iloc[:3], baseline=reordered)
    np.testing.assert_array_equal(shuffled.baseline, mean.to_numpy())
    np.testing.assert_allclose(shuffled.mean, ordered.mean, rtol=0, atol=0)
    gxi = gx.gradients(posterior, X.iloc[:3], gradient_x_input=True,
                       baseline=mean[["age", "dose", "income"]])
    np.testing.assert_array_equal(gxi.baseline, mean.to_numpy())


def test_reordered_dataframe_baseline_distribution(setup):
    posterior, X, _ = setup
    background = X.iloc[5:8]
    ordered = gx.integrated_gradients(posterior, X.iloc[:2], baseline=background.to_numpy())
    shuffled = gx.integrated_gradients(posterior, X.iloc[:2], baseline=background[NAMES[::-1]])
    np.testing.assert_allclose(shuffled.mean, ordered.mean, rtol=0, atol=0)


@pytest.mark.parametrize(
    "labels, match",
    [(["income", "age", "weight"], r"missing: \['dose'\], unknown: \['weight'\]"),
     (["income", "age"], r"missing: \['dose'\]")],
)
def test_labels_that_are_not_the_features_are_refused(setup, labels, match):
    posterior, X, _ = setup
    baseline = pd.Series(np.zeros(len(labels)), index=labels)
    with pytest.raises(ValueError, match=match):
        gx.integrated_gradients(posterior, X.iloc[:2], baseline=baseline)


def test_an_unlabelled_series_is_positional(setup):
    posterior, X, mean = setup
    positional = gx.integrated_gradients(posterior, X.iloc[:2],
                                         baseline=pd.Series(mean.to_numpy()))
    np.testing.assert_array_equal(positional.baseline, mean.to_numpy())
