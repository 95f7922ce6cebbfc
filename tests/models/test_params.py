"""Declarative parameter validation: every estimator refuses every bad constructor value with
one error naming the parameter, catchable as ValueError or TypeError."""

from __future__ import annotations

import numpy as np
import pytest

import gpexplain as gx
from gpexplain.models._params import InvalidParameterError

ESTIMATORS = [gx.GPRegressor, gx.SparseGPRegressor, gx.RandomFeatureGPRegressor,
              gx.AdditiveGPRegressor, gx.GPXRegressor]
BAD_VALUES = {
    "random_state": [-1, 1.5, None, True, "0"],
    "noise": [0.0, -1.0, np.inf, np.nan, "0.1", True],
    "max_iter": [0, 2.5, True],
    "n_restarts": [-1, 0.5],
    "optimizer": ["adam-w", 3],
}
CASES = [
    (estimator, name, value)
    for estimator in ESTIMATORS
    for name, values in BAD_VALUES.items()
    if name in estimator._parameter_constraints
    for value in values
]


@pytest.mark.parametrize("estimator, name, value", CASES)
def test_bad_value_is_refused_by_name(estimator, name, value):
    X = np.random.default_rng(0).normal(size=(12, 2))
    with pytest.raises(InvalidParameterError, match=name) as raised:
        estimator(**{name: value}).fit(X, X[:, 0])
    assert isinstance(raised.value, ValueError) and isinstance(raised.value, TypeError)


def test_every_estimator_constrains_its_seed_and_noise():
    for estimator in ESTIMATORS:
        assert "random_state" in estimator._parameter_constraints
        assert "noise" in estimator._parameter_constraints


def test_numpy_integers_are_accepted():
    X = np.random.default_rng(0).normal(size=(12, 2))
    model = gx.GPRegressor(n_restarts=np.int64(0), max_iter=np.int32(3),
                           random_state=np.int64(2)).fit(X, X[:, 0])
    assert model.feature_names_in_ == ["x0", "x1"] and model.n_features_in_ == 2
