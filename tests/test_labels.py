"""Labels are matched by name or refused at every entry point (issue 10, class 1).

A model fitted on NumPy names its features ``x0, x1, ...``; a DataFrame that uses those
names in another order used to be taken by position. The metrics converted a DataFrame to an
array before calling the model, so the model could not check its columns at all.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import gpexplain as gx
from gpexplain import metrics


@pytest.fixture(scope="module")
def numpy_model():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(15, 2)) * [1.0, 10.0]
    y = np.sin(X[:, 0]) + 0.1 * X[:, 1]
    posterior = gx.ExactPosterior(X, y, gx.kernels.RBF([1.0, 10.0], 1.0), 0.01)
    return posterior, X


def _reordered(X):
    return pd.DataFrame(X[:3, ::-1], columns=["x1", "x0"])


@pytest.mark.parametrize(
    "entry",
    [
        lambda p, Q: p.predict(Q),
        lambda p, Q: p.predict_mean(Q),
        lambda p, Q: p.difference_variance(Q, np.zeros(2)),
        lambda p, Q: gx.integrated_gradients(p, Q, baseline="zeros"),
        lambda p, Q: gx.gradients(p, Q),
    ],
    ids=["predict", "predict_mean", "difference_variance", "integrated_gradients", "gradients"],
)
def test_default_names_in_another_order_are_refused(numpy_model, entry):
    posterior, X = numpy_model
    with pytest.raises(ValueError, match=r"columns \['x1', 'x0'\] do not match"):
        entry(posterior, _reordered(X))


def test_default_names_in_order_and_foreign_names_are_positional(numpy_model):
    posterior, X = numpy_model
    expected = posterior.predict_mean(X[:3])
    in_order = pd.DataFrame(X[:3], columns=["x0", "x1"])
    np.testing.assert_array_equal(posterior.predict_mean(in_order), expected)
    # A table without any of the model's names cannot be matched: it is positional, as in
    # scikit-learn (the model has no names to match it against).
    foreign = pd.DataFrame(X[:3], columns=["a", "b"])
    np.testing.assert_array_equal(posterior.predict_mean(foreign), expected)


def test_estimator_predict_refuses_reordered_default_names(numpy_model):
    _, X = numpy_model
    model = gx.GPRegressor(kernel=gx.kernels.RBF([1.0, 10.0]), optimizer=None).fit(
        X, np.sin(X[:, 0])
    )
    with pytest.raises(ValueError, match="x1"):
        model.predict(_reordered(X))


def test_metrics_hand_dataframes_to_the_model_by_name():
    rng = np.random.default_rng(1)
    X = pd.DataFrame(rng.normal(size=(12, 2)) * [1.0, 5.0], columns=["age", "income"])
    y = np.sin(X["age"]) + 0.2 * X["income"]
    posterior = gx.ExactPosterior(X, y, gx.kernels.RBF([1.0, 5.0], 1.0), 0.01)
    reference = X.mean()

    def explainer(Q):
        return gx.integrated_gradients(posterior, Q, baseline=reference)

    ordered = metrics.completeness(posterior.predict_mean, explainer, X.iloc[:4],
                                   reference.to_numpy())
    # Same gaps with the reference Series reordered: it is matched to X's columns by name.
    by_name = metrics.completeness(posterior.predict_mean, explainer, X.iloc[:4],
                                   reference[["income", "age"]])
    np.testing.assert_array_equal(by_name, ordered)
    # A reordered X reaches the model as a DataFrame, which it refuses (it used to get an
    # array and read income as age).
    with pytest.raises(ValueError, match="do not match the training features"):
        metrics.completeness(posterior.predict_mean, explainer, X.iloc[:4, ::-1],
                             reference[["income", "age"]])
    with pytest.raises(ValueError, match="reference labels"):
        metrics.completeness(posterior.predict_mean, explainer, X.iloc[:4],
                             pd.Series([0.0, 0.0], index=["age", "height"]))
