"""The covariance of probability-level integrated gradients is priced before each path rule
and stops refining past the time limit, saying so (issue 27 item 19: a tiny classifier with a
large latent variance took minutes of CPU for two points)."""

from __future__ import annotations

import time
import warnings

import numpy as np
import pytest
from sklearn.gaussian_process import GaussianProcessClassifier
from sklearn.gaussian_process.kernels import RBF, ConstantKernel

import gpexplain as gx
from gpexplain.explain.linked import link_covariance
from gpexplain.links import LINKS, PAIR_ORDERS
from gpexplain.links.binary import SECONDS_PER_PAIR_GRID_POINT


@pytest.mark.parametrize("variance", [25.0, 100.0, 400.0])
def test_the_estimate_bounds_the_grid_the_logit_tensor_rule_evaluates(variance):
    """A strongly correlated pair (0.99: the tensor rule), counted independently: every
    latent value the link's derivatives are asked for, at most the estimate (its first rule
    and the next) and at least a third of it."""
    link = LINKS.get("logit")()
    evaluated = []
    original = link.derivatives

    def counting(f, order):
        evaluated.append(np.size(f))
        return original(f, order)

    link.derivatives = counting
    rho = 0.99
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # variance 400: very wide, it says
        link.pair_expectations([0.3], [-0.2], [variance], [variance],
                               [rho * variance], PAIR_ORDERS)
    estimated = link.pair_expectation_seconds(variance, correlation=rho) / (
        SECONDS_PER_PAIR_GRID_POINT)
    assert sum(evaluated) / 3 <= estimated
    assert sum(evaluated) <= estimated


def test_weakly_correlated_pairs_are_priced_by_their_series():
    """Issue 27 item 9: below SERIES_CORRELATION a pair costs its Hermite projections, a
    few per cent of the tensor rule's grid at the same variance, growing with the terms
    the correlation needs (the price with no correlation given is the dearest)."""
    link = LINKS.get("logit")()
    weak, strong, dearest = (float(link.pair_expectation_seconds(20.0, correlation=rho))
                             for rho in (0.3, 0.96, None))
    tensor = float(link.pair_expectation_seconds(20.0, correlation=0.98))
    assert weak < 0.05 * tensor
    assert weak < strong < tensor
    assert dearest >= tensor


def test_probit_pairs_are_closed_form_and_cost_nothing():
    probit = LINKS.get("probit")()
    assert probit.pair_expectation_seconds(100.0) == 0.0
    assert probit.pair_expectation_seconds(100.0, ((0, 0),)) > 0.0  # the response: quadrature


def test_a_wide_latent_stops_refining_at_the_limit_and_says_so(monkeypatch):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(20, 2))
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    kernel = ConstantKernel(100.0) * RBF([1.0, 1.0])
    posterior = gx.from_sklearn(GaussianProcessClassifier(kernel, optimizer=None).fit(X, y))
    # The first rule (8 nodes, 36 pairs priced at 6.6 ms each at variance 100, as if each
    # were correlated just above SERIES_CORRELATION, the dearest) always runs; with the limit
    # at 1 s the 16-node rule (136 pairs, 0.9 s more) is not started. Unbounded, this point
    # once ran for minutes (rules up to 128 nodes, 8256 pairs).
    monkeypatch.setattr(link_covariance, "MAX_QUADRATURE_SECONDS", 1.0)
    start = time.perf_counter()
    with pytest.warns(gx.CompletenessWarning) as caught:
        result = gx.integrated_gradients(posterior, X[:1] + 3.0, baseline=np.zeros(2))
    assert time.perf_counter() - start < 15.0
    messages = [str(w.message) for w in caught]
    assert any(
        "stopped refining its path rule at 1 point(s) (rows [0])" in m
        and "past the 1 s per point limit, as the latent variance reaches 1" in m
        and "return_cov=False or output='latent'" in m
        for m in messages
    ), messages
    assert any("misses completeness" in m for m in messages)  # the measured gap
    assert "up to 8^2 node pairs" in result.method
    assert np.all(np.isfinite(result.cov))
