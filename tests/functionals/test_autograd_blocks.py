"""Quadrature's autograd evaluations stay under a stated memory bound, and what would run for
minutes is refused with the estimate (issue 27 item 22: integrated gradients of an additive GP
at 30 features took 2.7 GB per point; a random-feature GP by quadrature ran 73 s of CPU for
two points where its closed form is instant)."""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch

import gpexplain as gx
from gpexplain.functionals import _autograd_blocks


class _LiveSavedBytes:
    """Bytes autograd holds for backward at the moment, and the most it held: each saved
    tensor is counted from when it is saved until autograd releases it."""

    def __init__(self):
        self.live = self.peak = 0

    def pack(self, tensor):
        return _Held(self, tensor)

    @staticmethod
    def unpack(held):
        return held.tensor


class _Held:
    def __init__(self, counter, tensor):
        # Detached: a saved output holding its own grad_fn would be a reference cycle through
        # C++ that Python never collects (the count would only grow).
        self.counter, self.tensor = counter, tensor.detach()
        self.size = tensor.numel() * tensor.element_size()
        counter.live += self.size
        counter.peak = max(counter.peak, counter.live)

    def __del__(self):
        self.counter.live -= self.size


@pytest.fixture(scope="module")
def additive_empirical():
    """An orthogonal additive GP with an empirical measure: every kernel entry averages over
    the atoms, the most memory per pair of the library's kernels."""
    rng = np.random.default_rng(3)
    X = rng.normal(size=(40, 6))
    y = X[:, 0] + X[:, 1] * X[:, 2] + 0.1 * rng.normal(size=40)
    return gx.AdditiveGPRegressor(measure="empirical", optimizer=None).fit(X, y), X


def test_autograd_memory_stays_under_the_budget_with_the_same_result(
    additive_empirical, monkeypatch
):
    model, X = additive_empirical
    reference = gx.integrated_gradients(model, X[:2])
    budget = 2 * 2**20
    monkeypatch.setattr(_autograd_blocks, "GRAPH_BUDGET_BYTES", budget)
    monkeypatch.setattr(_autograd_blocks, "_MEASURED", type(_autograd_blocks._MEASURED)())
    counter = _LiveSavedBytes()
    with torch.autograd.graph.saved_tensors_hooks(counter.pack, counter.unpack):
        blocked = gx.integrated_gradients(model, X[:2])
    # All pairs at once held 28 MB here (and 2.7 GB per point at 30 features and 200 atoms);
    # blocks hold at most the budget (the probes that size them, 24 pairs, far less).
    assert counter.peak <= budget, counter.peak
    # The same pairs summed in blocks: equal to round-off.
    scale = np.abs(reference.mean).max()
    np.testing.assert_allclose(blocked.mean, reference.mean, rtol=0, atol=1e-12 * scale)
    np.testing.assert_allclose(blocked.cov, reference.cov, rtol=0,
                               atol=1e-12 * np.abs(reference.cov).max())


def test_a_pair_larger_than_the_budget_is_refused_with_its_size(additive_empirical,
                                                                monkeypatch):
    model, X = additive_empirical
    monkeypatch.setattr(_autograd_blocks, "GRAPH_BUDGET_BYTES", 1000)
    monkeypatch.setattr(_autograd_blocks, "_MEASURED", type(_autograd_blocks._MEASURED)())
    with pytest.raises(MemoryError, match=r"one kernel derivative by autograd needs [0-9.e+]+ "
                                          r"bytes, more than the 0 MiB.*fewer atoms"):
        gx.integrated_gradients(model, X[:1], return_cov=False)


def test_random_feature_quadrature_beyond_the_time_limit_is_refused_naming_the_closed_form(
    monkeypatch,
):
    from gpexplain.functionals import integrated_gradient

    # Small enough to build quickly; the limit lowered to match (the estimate, about 1.5 s
    # per point here, scales with training points and frequencies: 33 s for 2000 x 1000).
    monkeypatch.setattr(integrated_gradient, "MAX_QUADRATURE_SECONDS", 0.5)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 10))
    kernel = gx.kernels.RandomFeatureKernel(rng.normal(size=(300, 10)))
    posterior = gx.RandomFeaturePosterior(X, np.sin(X[:, 0]), kernel, 0.1)
    start = time.perf_counter()
    with pytest.raises(ValueError, match=r"quadrature \(the mean alone\) would take about "
                                         r"[0-9.]+ s per point \(limit 0.5 s\).*300 training "
                                         r"points.*method='closed-form'"):
        gx.integrated_gradients(posterior, X[:2], method="quadrature", return_cov=False)
    assert time.perf_counter() - start < 5.0  # refused before the work, not after
    exact = gx.integrated_gradients(posterior, X[:2])
    assert exact.method == "integrated gradients (closed form)"


def test_additive_quadrature_beyond_the_time_limit_points_to_shapley_values(monkeypatch):
    from gpexplain.functionals import integrated_gradient

    rng = np.random.default_rng(1)
    X = rng.normal(size=(30, 4))
    model = gx.AdditiveGPRegressor(optimizer=None).fit(X, X[:, 0])
    monkeypatch.setattr(integrated_gradient, "MAX_QUADRATURE_SECONDS", 1e-6)
    with pytest.raises(ValueError, match=r"s per point \(limit 1e-06 s\).*return_cov=False\. "
                                         r"An orthogonal additive GP has exact Shapley values"):
        gx.integrated_gradients(model, X[:1])
