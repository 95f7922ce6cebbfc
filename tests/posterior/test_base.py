"""``as_posterior``: what explanations accept, and the errors for what they do not."""

from __future__ import annotations

import numpy as np
import pytest

from gpexplain import integrated_gradients
from gpexplain.kernels import RBF
from gpexplain.models.gp_regressor import GPRegressor
from gpexplain.models.gpx_regressor import GPXRegressor
from gpexplain.posterior import ExactPosterior, as_posterior


def test_posterior_is_returned_as_is():
    X = np.arange(6.0).reshape(3, 2)
    posterior = ExactPosterior(X, np.arange(3.0), RBF(1.0), 0.1)
    assert as_posterior(posterior) is posterior


def test_unfitted_estimator_is_named():
    with pytest.raises(ValueError, match="GPRegressor is not fitted yet"):
        as_posterior(GPRegressor())


def test_gpx_points_to_its_own_explanations():
    # GPX is an ordinary exact GP (its posterior_), but integrated gradients have no scheme
    # for its locally linear kernel: the refusal names the explanation that applies.
    X = np.random.default_rng(0).normal(size=(12, 2))
    model = GPXRegressor(max_iter=5).fit(X, X[:, 0] * X[:, 1])
    assert as_posterior(model) is model.posterior_
    with pytest.raises(TypeError, match=r"GPXRegressor explains itself: use model\.explain"):
        integrated_gradients(model, X[:2])


def test_other_objects_are_refused():
    with pytest.raises(TypeError, match="expected a fitted gpexplain estimator or a posterior"):
        as_posterior(np.zeros(3))
