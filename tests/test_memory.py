"""Memory is bounded by the chunk size end to end: ten times the query points, not ten times
the peak memory (explanations, predictions and completeness targets all work block by block)."""

from __future__ import annotations

import tracemalloc

import numpy as np

import gpexplain as gx


def _peak_bytes(posterior, n_query: int) -> int:
    Q = np.random.default_rng(1).normal(size=(n_query, 4))
    tracemalloc.start()
    try:
        gx.integrated_gradients(posterior, Q, return_cov=False, chunk_size=50)
        gx.integrated_gradients(posterior, Q[:200], chunk_size=50)  # completeness targets
        posterior.predict_mean(Q)
        posterior.predict(Q)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_peak_memory_does_not_grow_with_the_number_of_points():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(1500, 4))
    posterior = gx.ExactPosterior(X, np.sin(X[:, 0]), gx.kernels.RBF(np.ones(4), 1.0), 0.1)
    small, large = _peak_bytes(posterior, 600), _peak_bytes(posterior, 6000)
    # The (n_query, 4) inputs and results themselves grow by 10x (about 0.2 MiB here); the
    # (n_query, n_train) matrices (72 MiB at 6000 points) must not appear.
    assert large < 2 * small, (small, large)
