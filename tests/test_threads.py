"""The library's native thread policy: every pool limited during its work, then restored."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from threadpoolctl import threadpool_info

import gpexplain as gx
from gpexplain import _threads


def _counts() -> set[int]:
    return {pool["num_threads"] for pool in threadpool_info()}


@pytest.fixture(autouse=True)
def _automatic_policy():
    yield
    gx.set_num_threads(None)


def test_policy_by_size_and_override():
    assert _threads.thread_count(_threads.PARALLEL_ROWS - 1) == 1
    assert _threads.thread_count(_threads.PARALLEL_ROWS) == max(1, _threads.usable_cores() - 1)
    gx.set_num_threads(3)
    assert _threads.thread_count(10) == 3


@pytest.mark.parametrize("bad", [0, -2])
def test_nonpositive_counts_are_refused(bad):
    with pytest.raises(ValueError, match="n_threads must be a positive integer"):
        gx.set_num_threads(bad)


@pytest.mark.parametrize("bad", [1.5, "2", True])
def test_non_integers_are_refused(bad):
    with pytest.raises(TypeError, match="n_threads must be a positive integer"):
        gx.set_num_threads(bad)


def test_pools_are_limited_inside_and_restored_after(monkeypatch):
    before, torch_before = threadpool_info(), torch.get_num_threads()
    seen = {}

    def spy(self, X, y, names, callback):
        seen["pools"], seen["torch"] = _counts(), torch.get_num_threads()
        raise RuntimeError("stop after looking")

    monkeypatch.setattr(gx.GPRegressor, "_fit", spy)
    rng = np.random.default_rng(0)
    with pytest.raises(RuntimeError, match="stop after looking"):
        gx.GPRegressor().fit(rng.normal(size=(20, 2)), rng.normal(size=20))
    assert seen == {"pools": {1}, "torch": 1}
    assert threadpool_info() == before and torch.get_num_threads() == torch_before


def test_nested_calls_keep_the_outer_limit():
    gx.set_num_threads(2)
    with _threads.native_threads(10):
        gx.set_num_threads(1)
        with _threads.native_threads(10):
            inner = torch.get_num_threads()
    assert inner == 2
