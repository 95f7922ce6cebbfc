"""Graded quadrature of stationary GPyTorch kernels on paths long against the lengthscales.

Issue 10, class 2: the prior term's Gauss-Legendre rule on the whole lag [0, 1] cannot see an
integrand that lives within ``tau ~ 1 / |d / l|``; past about 1e2 lengthscales it gave
indefinite covariances and variance completeness gaps of O(1) (the rational-quadratic fit of
the Taipei data: a gap of 1249 and eigenvalues down to -93). References: the prior term from
the lag integral in mpmath (``lag_prior_term``, tanh-sinh with break points at every decade)
and the completeness identity ``sum_ij P_ij = 2 (k(xt, xt) - k(x, xt))``.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from gpexplain.functionals.quadrature import graded_path_rule, stationary_cross, stationary_prior
from gpexplain.kernels.stationary import radial_leaves
from tests.functionals.test_quadrature_stationary import _matern, _rq
from tests.reference.ig_stationary_mpmath import lag_prior_term, leaf

BASELINE = np.array([-0.45, 0.25])
DIRECTION = np.array([0.6, -0.8])
KERNELS = [
    ("rq", _rq([0.7, 1.3], 1.1, 0.3), [[leaf("rq", [0.7, 1.3], [0, 1], 1.1, alpha=0.3)]]),
    ("matern52", _matern(2.5, [0.9, 1.4], 1.2), [[leaf("matern52", [0.9, 1.4], [0, 1], 1.2)]]),
]


def _dense(kernel, a, b):
    return kernel(torch.as_tensor(a), torch.as_tensor(b)).to_dense().detach().numpy()


@pytest.mark.parametrize(("name", "kernel", "reference"), KERNELS, ids=[k[0] for k in KERNELS])
@pytest.mark.parametrize("length", [1e3, 1e6])
def test_long_path_prior_matches_mpmath_lag_integral(name, kernel, reference, length):
    x = BASELINE + length * DIRECTION
    got = stationary_prior(kernel, x[None], BASELINE, 64, radial_leaves(kernel, 2))[0]
    expected = np.array(lag_prior_term(reference, x, BASELINE, dps=20))
    # Entries are large differences (O(length) for these kernels) whose sum is O(1): each is
    # accurate to round-off of its own size, eps times the cancellation in the lag integral.
    scale = np.abs(expected).max()
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-13 * scale * max(1.0, length))
    target = 2.0 * (_dense(kernel, BASELINE[None], BASELINE[None]) - _dense(kernel, x[None],
                                                                            BASELINE[None]))
    assert abs(got.sum() - target[0, 0]) <= 1e-12 * scale * max(1.0, length)
    assert np.linalg.eigvalsh(got).min() > 0.0  # positive definite (the old rule: -214)


def test_training_point_at_the_query_is_graded_on_a_long_path():
    # The query is a training point: the closest approach t0 = 1 coincides with the path's
    # end, and the singularity of the rational quadratic at 1 +- i sqrt(2 alpha) / |u| must
    # grade the rule (it was hidden by the tie with the end: relative error 5e-2 at |u| = 287).
    kernel = _rq([0.7, 1.3], 1.1, 0.05)
    x = BASELINE + 200.0 * DIRECTION
    Z = np.array([x, x + [1e-3, 0.0]])
    leaves = radial_leaves(kernel, 2)
    nodes, _ = graded_path_rule(x[None], BASELINE, Z, leaves, 64)
    assert np.sum(nodes[0, 0] > 1.0 - 1e-3) >= 8  # clustered at the end, where the pole is
    cross = stationary_cross(kernel, leaves, x[None], BASELINE, Z, 64)[0]
    target = _dense(kernel, x[None], Z)[0] - _dense(kernel, BASELINE[None], Z)[0]
    np.testing.assert_allclose(cross.sum(0), target, rtol=0, atol=1e-11)


@pytest.mark.parametrize(("length", "tolerance"), [(1e8, 1e-6), (1e20, None)])
def test_matern_prior_on_a_very_long_path_keeps_the_near_separations(length, tolerance):
    """GPyTorch's Matern centres both arguments on the mean of the first; with the path's
    nodes first that mean was ~length / 2 and rounded the separations of the nodes near the
    baseline to 0: a NaN derivative at 1e20 lengthscales (issue 27 item 20c: 'produced a
    non-finite value ... a bug') and a completeness gap of 2e-2 at 1e8."""
    kernel = _matern(2.5, [0.9, 1.4], 1.2)
    x = BASELINE + length * DIRECTION
    got = stationary_prior(kernel, x[None], BASELINE, 64, radial_leaves(kernel, 2))[0]
    assert np.all(np.isfinite(got))
    if tolerance is not None:  # at 1e20 the entries (~length^2) cancel beyond float64
        # sum_ij P_ij = 2 (k(xt, xt) - k(x, xt)) = 2 * 1.2 this far out.
        assert abs(got.sum() - 2.4) <= tolerance


def test_integrated_gradients_far_out_warn_with_the_gap_instead_of_failing():
    from gpexplain.accuracy import CompletenessWarning
    from gpexplain.explain.integrated_gradients import integrated_gradients
    from gpexplain.posterior import ExactPosterior

    rng = np.random.default_rng(0)
    X = rng.normal(size=(12, 2))
    posterior = ExactPosterior(X, X[:, 0], _matern(2.5, [0.9, 1.4], 1.2), 0.1)
    with pytest.warns(CompletenessWarning, match="misses completeness"):
        attr = integrated_gradients(posterior, np.array([[1e20, 0.0]]), X.mean(0))
    assert np.all(np.isfinite(attr.mean)) and np.all(np.isfinite(attr.cov))
