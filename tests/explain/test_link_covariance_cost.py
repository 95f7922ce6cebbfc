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
def test_the_estimate_counts_the_grid_the_logit_quadrature_evaluates(variance):
    """Counted independently: every latent value the link's derivatives are asked for."""
    link = LINKS.get("logit")()
    evaluated = []
    original = link.derivatives

    def counting(f, order):
        evaluated.append(np.size(f))
        return original(f, order)

    link.derivatives = counting
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # variance 400: very wide, it says
        link.pair_expectations([0.3], [-0.2], [variance], [0.8 * variance], [0.5 * variance],
                               PAIR_ORDERS)
    estimated = link.pair_expectation_seconds(variance) / SECONDS_PER_PAIR_GRID_POINT
    assert estimated == pytest.approx(sum(evaluated), rel=0.01)


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
    # The first rule (8 nodes, 36 pairs at about 0.07 s each at variance 100) always runs;
    # with the limit at 3 s the 16-node rule (136 pairs, ~10 s) is not started. Unbounded,
    # this point ran for minutes (rules up to 128 nodes, 8256 pairs).
    monkeypatch.setattr(link_covariance, "MAX_QUADRATURE_SECONDS", 3.0)
    start = time.perf_counter()
    with pytest.warns(gx.CompletenessWarning) as caught:
        result = gx.integrated_gradients(posterior, X[:1] + 3.0, baseline=np.zeros(2))
    assert time.perf_counter() - start < 15.0
    messages = [str(w.message) for w in caught]
    assert any(
        "stopped refining its path rule at 1 point(s) (rows [0])" in m
        and "past the 3 s per point limit, as the latent variance reaches 1" in m
        and "return_cov=False or output='latent'" in m
        for m in messages
    ), messages
    assert any("misses completeness" in m for m in messages)  # the measured gap
    assert "up to 8^2 node pairs" in result.method
    assert np.all(np.isfinite(result.cov))
