"""GPX's local linear weight functional on the locally linear kernel: the functional contract
(cross and prior terms against derivatives of the kernel itself, by central differences in z,
which are exact up to round-off because the kernel is bilinear in z and z'), completeness of
the contributions through the driver, and the equivalence of GPX with an exact GP."""

from __future__ import annotations

import numpy as np
import pytest

from gpexplain.explain._driver import explain
from gpexplain.functionals import Gradient, IntegratedGradient
from gpexplain.functionals.local_linear_weight import LocalLinearWeight
from gpexplain.kernels import RBF
from gpexplain.kernels.locally_linear import LocallyLinear
from gpexplain.posterior import ExactPosterior

N_INPUTS, N_Z = 2, 3
rng = np.random.default_rng(3)
TRAIN = rng.normal(size=(7, N_INPUTS + N_Z))
QUERY = rng.normal(size=(4, N_INPUTS + N_Z))
KERNEL = LocallyLinear(RBF([0.7, 1.3], 1.4), N_INPUTS, weight_noise=0.05)
STEP = 1e-3


def _z_difference(function, X, column):
    """Central difference of ``function(X)`` in the z column ``column`` of every row."""
    shift = np.zeros(X.shape[1])
    shift[N_INPUTS + column] = STEP
    return (function(X + shift) - function(X - shift)) / (2 * STEP)


def test_cross_term_is_the_z_derivative_of_the_kernel():
    scheme = LocalLinearWeight(N_INPUTS).bind(KERNEL, TRAIN)
    cross = scheme.cross(QUERY)
    assert cross.shape == (len(QUERY), N_Z, len(TRAIN))
    for column in range(N_Z):
        expected = _z_difference(lambda X: KERNEL(X, TRAIN), QUERY, column)
        np.testing.assert_allclose(cross[:, column], expected, rtol=0, atol=1e-10)


def test_prior_term_is_the_mixed_z_derivative_plus_the_weight_noise():
    scheme = LocalLinearWeight(N_INPUTS).bind(KERNEL, TRAIN)
    prior = scheme.prior(QUERY)
    for p, x in enumerate(QUERY):
        expected = np.empty((N_Z, N_Z))
        for a in range(N_Z):
            for b in range(N_Z):
                def k_at(X, b=b, x=x):  # d/dz'_b k(X, x') at x' = x
                    return _z_difference(lambda Y: KERNEL(X, Y)[:, 0], x[None, :], b)[0]
                expected[a, b] = _z_difference(lambda X: np.array([k_at(r[None]) for r in X]),
                                               x[None, :], a)[0]
        # White noise on the weights: only the prior variance at the point itself.
        expected += KERNEL.weight_noise * np.eye(N_Z)
        np.testing.assert_allclose(prior[p], expected, rtol=0, atol=1e-7)


@pytest.mark.parametrize("what", ["contributions", "weights"])
def test_contributions_complete_and_mean_only_paths_agree(what):
    y = np.sin(TRAIN[:, 0]) * TRAIN[:, N_INPUTS]
    noise = 0.1 + KERNEL.weight_noise * np.sum(TRAIN[:, N_INPUTS:] ** 2, axis=1)
    posterior = ExactPosterior(TRAIN, y, KERNEL, noise)
    functional = LocalLinearWeight(N_INPUTS, what)
    result = explain(posterior, QUERY, functional)
    mean_only = explain(posterior, QUERY, functional, return_cov=False)
    np.testing.assert_array_equal(mean_only.mean, result.mean)
    np.testing.assert_array_equal(result.X, QUERY[:, N_INPUTS:])
    if what == "weights":
        assert result.baseline_prediction is None and result.difference_variance is None
        # The prediction is linear in z with exactly these weights.
        np.testing.assert_allclose(
            np.sum(result.mean * QUERY[:, N_INPUTS:], axis=1), result.prediction, atol=1e-12
        )
        return
    assert result.baseline_prediction == 0.0
    gaps = result.completeness_gap()
    assert gaps["mean"] < 1e-12 * np.abs(result.prediction).max()
    assert gaps["variance"] < 1e-12 * result.difference_variance.max()


def test_unknown_what_is_refused():
    with pytest.raises(ValueError, match="unknown what='shap'"):
        LocalLinearWeight(N_INPUTS, "shap")


@pytest.mark.parametrize("functional", [Gradient(), IntegratedGradient(QUERY[:1])])
def test_derivative_explanations_are_refused_by_name(functional):
    # White noise on the weights: f(x, z) has no derivative, so the generic schemes that every
    # other Kernel inherits are refused, naming the explanation that applies.
    with pytest.raises(TypeError, match=r"GPXRegressor explains itself: use model\.explain"):
        functional.bind(KERNEL, TRAIN)
