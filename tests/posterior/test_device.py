"""The exact posterior on a torch device (issue 26, the GPU path), checked on the CPU device.

``ExactPosterior(..., device=...)`` builds the kernel matrix, factorises it and runs every
triangular solve in float64 torch; the NumPy/SciPy path (``device=None``) is the reference.
The problems are well conditioned (noise 0.05 on unit-scale data, condition number ~1e3),
so the two agree to rounding amplified by that: 1e-10 relative. A CUDA machine runs the
same comparison in ``benchmarks/gpu_scaling.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import gpexplain as gx
from gpexplain.posterior import ExactPosterior

rng = np.random.default_rng(26)
X = rng.normal(size=(120, 4))
Y = np.sin(X[:, 0]) + X[:, 1] * X[:, 2] + 0.1 * rng.normal(size=120)
QUERY = rng.normal(size=(4, 4))
KERNEL = gx.kernels.RBF([0.9, 1.2, 1.0, 2.0], 1.3)
RTOL = 1e-10


def _close(actual, expected):
    np.testing.assert_allclose(actual, expected, rtol=0,
                               atol=RTOL * max(np.abs(expected).max(), 1e-300))


def test_device_posterior_equals_the_numpy_posterior():
    reference = ExactPosterior(X, Y, KERNEL, 0.05, mean=0.3)
    posterior = ExactPosterior(X, Y, KERNEL, 0.05, mean=0.3, device="cpu")
    assert isinstance(posterior.cholesky, torch.Tensor) and posterior.jitter == 0.0
    _close(posterior.alpha, reference.alpha)
    assert posterior.log_marginal_likelihood() == pytest.approx(
        reference.log_marginal_likelihood(), rel=RTOL)
    for got, expected in zip(posterior.predict(QUERY, return_cov=True),
                             reference.predict(QUERY, return_cov=True), strict=True):
        _close(got, expected)
    for explain in (
        lambda p: gx.integrated_gradients(p, QUERY, return_cov="points"),
        lambda p: gx.shapley_values(p, QUERY, baseline=X.mean(0)),
        lambda p: gx.gradients(p, QUERY),
    ):
        got, expected = explain(posterior), explain(reference)
        _close(got.mean, expected.mean)
        _close(got.cov, expected.cov)
        if got.point_cov is not None:
            _close(got.point_cov.dense(), expected.point_cov.dense())


def test_device_jitter_follows_the_cpu_schedule():
    """Repeated rows without noise: the same jitter as on the CPU, with its warning."""
    repeated = np.vstack([X[:30], X[:30]])
    with pytest.warns(RuntimeWarning, match="added jitter"):
        reference = ExactPosterior(repeated, np.r_[Y[:30], Y[:30]], KERNEL, 0.0)
    with pytest.warns(RuntimeWarning, match="added jitter"):
        posterior = ExactPosterior(repeated, np.r_[Y[:30], Y[:30]], KERNEL, 0.0,
                                   device="cpu")
    assert reference.jitter > 0
    assert posterior.jitter == pytest.approx(reference.jitter, rel=1e-12)


@pytest.mark.parametrize("device, error, match", [
    ("gpu0", ValueError, "is not a torch device"),
    (3, TypeError, "device must be a string"),
])
def test_bad_devices_are_refused_by_name(device, error, match):
    with pytest.raises(error, match=match):
        ExactPosterior(X, Y, KERNEL, 0.05, device=device)
    with pytest.raises(error, match=match):
        gx.GPRegressor(device=device).fit(X, Y)


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_on_a_machine_without_it_is_refused():
    with pytest.raises(ValueError, match=r"torch sees no CUDA device.*leave device unset"):
        ExactPosterior(X, Y, KERNEL, 0.05, device="cuda")


def test_regressor_conditions_on_the_device_and_saves(tmp_path):
    options = dict(n_restarts=0, hyperparameter_rows=60)
    reference = gx.GPRegressor(**options).fit(X, Y)
    model = gx.GPRegressor(**options, device="cpu").fit(X, Y)
    assert isinstance(model.posterior_.cholesky, torch.Tensor)
    _close(model.predict(QUERY), reference.predict(QUERY))
    _close(gx.integrated_gradients(model, QUERY).cov,
           gx.integrated_gradients(reference, QUERY).cov)
    loaded = gx.load(gx.save(model, tmp_path / "model"))
    _close(loaded.predict(QUERY), reference.predict(QUERY))
    with pytest.raises(ValueError, match="not available with multi_output='icm'"):
        gx.GPRegressor(multi_output="icm", device="cpu").fit(X, np.c_[Y, -Y])
