"""Every estimator has one fit shape, ``fit(X, y[, Z], *, callback=None)``, and reports progress
only through the callback (the caller draws it)."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import gpexplain as gx

ESTIMATORS = [
    lambda: gx.GPRegressor(n_restarts=0, max_iter=5),
    lambda: gx.SparseGPRegressor(n_inducing=5, n_epochs=2, batch_size=10),
    lambda: gx.RandomFeatureGPRegressor(n_frequencies=20),
    lambda: gx.AdditiveGPRegressor(max_order=1, n_restarts=0, max_iter=5),
    lambda: gx.GPXRegressor(max_iter=5),
]


@pytest.mark.parametrize("make", ESTIMATORS)
def test_callback_is_keyword_only_and_reports_progress(make, capsys):
    model = make()
    parameter = inspect.signature(model.fit).parameters["callback"]
    assert parameter.kind is inspect.Parameter.KEYWORD_ONLY and parameter.default is None
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 2))
    y = np.sin(X[:, 0]) + 0.1 * rng.normal(size=30)
    calls = []
    model.fit(X, y, callback=lambda step, total: calls.append((step, total)))
    assert calls, "the optimiser ran but never reported progress"
    steps = [step for step, _ in calls]
    assert all(0 < step <= total for step, total in calls)
    assert steps == sorted(steps)
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err == ""  # nothing displayed by the estimator
