"""Posterior gradients (derivative process): mean, covariance, gradient x input, inputs.

References, all independent of the derivative algebra in gpexplain:

* the posterior mean's central finite differences (``predict_mean``);
* finite differences of the posterior covariance function (``predict(..., return_cov=True)``
  at x +- h e_i);
* Monte Carlo: joint posterior samples of f at x +- h e_i, differenced per sample.
"""

from __future__ import annotations

import gpytorch.kernels as gk
import numpy as np
import pandas as pd
import pytest
import torch

from gpexplain.explain.gradients import gradients
from gpexplain.kernels.gpytorch_adapter import GPyTorchKernel, input_scaled
from gpexplain.kernels.random_features import RandomFeatureKernel
from gpexplain.kernels.rbf import RBF
from gpexplain.models.gp_regressor import GPRegressor
from gpexplain.posterior import ExactPosterior
from gpexplain.posterior.random_features import RandomFeaturePosterior
from gpexplain.posterior.variational import VariationalPosterior

LENGTHSCALE = np.array([0.9, 1.4, 2.0])
VARIANCE = 1.3
NOISE = 0.02


def _data(seed=0, n=30):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2.0, 2.0, size=(n, 3))
    y = np.sin(1.5 * X[:, 0]) + 0.6 * X[:, 0] * X[:, 1] + 0.4 * X[:, 2] ** 2
    return X, y + 0.05 * rng.normal(size=n)


def _matern52():
    base = gk.MaternKernel(nu=2.5, ard_num_dims=3).double()
    base.lengthscale = torch.tensor([1.1, 1.6, 2.2], dtype=torch.float64)
    module = gk.ScaleKernel(base).double()
    module.outputscale = torch.tensor(1.2, dtype=torch.float64)
    return GPyTorchKernel(module)


def _rbf_times_linear():
    rbf = gk.RBFKernel(ard_num_dims=3).double()
    rbf.lengthscale = torch.tensor([1.2, 1.5, 2.5], dtype=torch.float64)
    return GPyTorchKernel(gk.ProductKernel(rbf, gk.LinearKernel()).double())


def _input_scaled_matern52():
    """What GPRegressor makes of a user kernel fitted on standardised data (issue 9's bug)."""
    module = _matern52().module
    return GPyTorchKernel(input_scaled(module, [0.2, -0.4, 0.1], [1.3, 0.8, 1.9], 1.7))


KERNELS = {
    "rbf-closed-form": lambda: RBF(LENGTHSCALE, VARIANCE),
    "matern52-autograd": _matern52,
    "rbf-times-linear-autograd": _rbf_times_linear,
    "input-scaled-matern52-autograd": _input_scaled_matern52,
}


def _variational(X, y, kernel):
    """A sparse variational posterior with an arbitrary (not optimal) q(u) on 8 inducing points."""
    rng = np.random.default_rng(9)
    Z = X[:8] + 0.1 * rng.normal(size=(8, 3))
    root = 0.3 * rng.normal(size=(8, 8))
    return VariationalPosterior(
        Z, rng.normal(size=8), root @ root.T, kernel, mean=0.4, whitened=True, data_inputs=X
    )


def _exact(make_kernel):
    return lambda X, y: ExactPosterior(X, y, make_kernel(), NOISE, mean=0.4)


POSTERIORS = {
    **{f"exact-{name}": _exact(make_kernel) for name, make_kernel in KERNELS.items()},
    "variational-rbf": lambda X, y: _variational(X, y, RBF(LENGTHSCALE, VARIANCE)),
    "variational-matern52": lambda X, y: _variational(X, y, _matern52()),
    "random-features": lambda X, y: RandomFeaturePosterior(
        X,
        y,
        RandomFeatureKernel(np.random.default_rng(4).normal(size=(20, 3)) / LENGTHSCALE, VARIANCE),
        NOISE,
        mean=0.4,
    ),
}


@pytest.fixture(scope="module", params=list(POSTERIORS))
def setup(request):
    X, y = _data()
    posterior = POSTERIORS[request.param](X, y)
    rng = np.random.default_rng(5)
    Xq = rng.uniform(-1.8, 1.8, size=(3, 3))
    Xq[0] = X[4]  # a query at a training input (zero distance in the cross term)
    return posterior, Xq, gradients(posterior, Xq)


def _scale(array):
    return max(float(np.max(np.abs(array))), 1e-3)


# -- mean ------------------------------------------------------------------------------------
def test_mean_matches_central_differences_of_posterior_mean(setup):
    """Step h = 1e-5 (inputs and lengthscales are O(1)): truncation h^2/6 |m'''| ~ 1e-10 and
    round-off eps sum_n |k alpha_n| / h ~ 1e-9; the tolerance 1e-8 x scale covers both."""
    posterior, Xq, attr = setup
    h = 1e-5
    expected = np.empty_like(Xq)
    for i in range(3):
        step = np.zeros(3)
        step[i] = h
        expected[:, i] = (posterior.predict_mean(Xq + step) - posterior.predict_mean(Xq - step)) / (
            2 * h
        )
    np.testing.assert_allclose(attr.mean, expected, rtol=0, atol=1e-8 * _scale(expected))
    np.testing.assert_allclose(attr.prediction, posterior.predict_mean(Xq), rtol=0, atol=0)


def test_gradients_of_a_fitted_user_gpytorch_kernel():
    """Regression (issue 9): GPRegressor wraps a user kernel in InputScaledKernel; gradients
    raised "no gradient explanation for InputScaledKernel" while integrated gradients worked.
    Mean against central differences of the posterior mean, within their own error: round-off
    ``eps sum_n |k(x, z_n) a_n| / h`` (the fitted weights are larger than above) plus the
    truncation error, estimated from the step 2h (``|D_2h - D_h| / 3``); covariance against
    differences of the posterior covariance (as in the test below)."""
    X, y = _data()
    kernel = gk.ScaleKernel(gk.MaternKernel(nu=2.5))
    model = GPRegressor(kernel=kernel, n_restarts=0, max_iter=30).fit(X, y)
    Xq = np.random.default_rng(6).uniform(-1.5, 1.5, size=(3, 3))
    attr = gradients(model, Xq)
    posterior, h = model.posterior_, 1e-5
    weights = np.abs(posterior.kernel(Xq, posterior.train_inputs) * posterior.alpha).sum(1)

    def difference(i, step):
        shift = np.zeros(3)
        shift[i] = step
        return (posterior.predict_mean(Xq + shift) - posterior.predict_mean(Xq - shift)) / (
            2 * step
        )

    for i in range(3):
        expected = difference(i, h)
        error = np.finfo(float).eps * weights / h + np.abs(difference(i, 2 * h) - expected) / 3
        np.testing.assert_array_less(np.abs(attr.mean[:, i] - expected), 10 * error)
    for p, x in enumerate(Xq):
        expected = _difference_covariance(posterior, x, 5e-4)
        np.testing.assert_allclose(attr.cov[p], expected, rtol=0, atol=1e-5 * _scale(expected))


# -- covariance ------------------------------------------------------------------------------
def _stencil(x, h):
    """Points x + h e_i, x - h e_i (i = 0..d-1) and the difference operator D, (d, 2d)."""
    d = x.shape[0]
    points = np.repeat(x[None, :], 2 * d, axis=0)
    D = np.zeros((d, 2 * d))
    for i in range(d):
        points[2 * i, i] += h
        points[2 * i + 1, i] -= h
        D[i, 2 * i], D[i, 2 * i + 1] = 1 / (2 * h), -1 / (2 * h)
    return points, D


def _difference_covariance(posterior, x, h):
    points, D = _stencil(x, h)
    _, C = posterior.predict(points, return_cov=True)
    return D @ C @ D.T


def test_covariance_matches_finite_differences_of_posterior_covariance(setup):
    """``Cov[d_i f, d_j f] = lim D C D^T`` with C the posterior covariance at x +- h e_i.

    Error of D C D^T at h = 5e-4: O(h^2) ~ 1e-6 relative for smooth kernels (Matern 5/2: its
    profile's first non-smooth term is |r|^5, so O(h^3) there); round-off eps s2 / h^2 ~ 1e-9.
    Tolerance 1e-5 x scale.
    """
    posterior, Xq, attr = setup
    for p, x in enumerate(Xq):
        expected = _difference_covariance(posterior, x, 5e-4)
        np.testing.assert_allclose(attr.cov[p], expected, rtol=0, atol=1e-5 * _scale(expected))


def test_covariance_matches_monte_carlo_over_posterior_samples(setup):
    """Joint samples of f at x +- h e_i, differenced per sample: sample mean and covariance of
    the differences against the returned Gaussian, each entry within 4.5 standard errors
    (SE of a covariance entry: sqrt((S_ii S_jj + S_ij^2) / N)); N = 20000, fixed seed. The
    difference bias at h = 1e-3 (~1e-6 relative) is far below the Monte Carlo error (~1e-2)."""
    posterior, Xq, attr = setup
    rng = np.random.default_rng(2024)
    n_samples, h = 20000, 1e-3
    for p, x in enumerate(Xq):
        points, D = _stencil(x, h)
        mean, C = posterior.predict(points, return_cov=True)
        values, vectors = np.linalg.eigh(C)
        root = vectors * np.sqrt(np.clip(values, 0.0, None))
        samples = mean + rng.standard_normal((n_samples, mean.size)) @ root.T
        gradients_mc = samples @ D.T  # (N, d)
        S = attr.cov[p]
        z_mean = (gradients_mc.mean(0) - attr.mean[p]) / np.sqrt(np.diag(S) / n_samples)
        assert np.max(np.abs(z_mean)) < 4.5
        sample_cov = np.cov(gradients_mc, rowvar=False)
        se = np.sqrt((np.outer(np.diag(S), np.diag(S)) + S**2) / n_samples)
        assert np.max(np.abs(sample_cov - S) / se) < 4.5


def test_covariance_is_symmetric_psd_and_below_prior(setup):
    posterior, Xq, attr = setup
    np.testing.assert_array_equal(attr.cov, np.swapaxes(attr.cov, 1, 2))
    eigenvalues = np.linalg.eigvalsh(attr.cov)
    assert eigenvalues.min() >= -1e-10 * _scale(attr.cov)


def test_far_from_data_the_covariance_returns_to_the_prior_derivative_kernel():
    X, y = _data()
    posterior = ExactPosterior(X, y, RBF(LENGTHSCALE, VARIANCE), NOISE)
    far = np.full((1, 3), 40.0)
    attr = gradients(posterior, far)
    np.testing.assert_allclose(attr.cov[0], np.diag(VARIANCE / LENGTHSCALE**2), atol=1e-12)
    np.testing.assert_allclose(attr.mean, 0.0, atol=1e-12)


# -- closed form vs autograd -----------------------------------------------------------------
def test_rbf_closed_form_matches_autograd_through_gpytorch():
    X, y = _data()
    closed = ExactPosterior(X, y, RBF(LENGTHSCALE, VARIANCE), NOISE, mean=0.4)
    base = gk.RBFKernel(ard_num_dims=3).double()
    base.lengthscale = torch.as_tensor(LENGTHSCALE, dtype=torch.float64)
    module = gk.ScaleKernel(base).double()
    module.outputscale = torch.tensor(VARIANCE, dtype=torch.float64)
    autograd = ExactPosterior(X, y, GPyTorchKernel(module), NOISE, mean=0.4)
    Xq = np.random.default_rng(1).uniform(-2, 2, size=(5, 3))
    a, b = gradients(closed, Xq), gradients(autograd, Xq)
    # The posteriors differ only by round-off in their Gram matrices (amplified by the
    # condition number of K + noise I, ~1e3 here).
    np.testing.assert_allclose(a.mean, b.mean, rtol=0, atol=1e-9 * _scale(a.mean))
    np.testing.assert_allclose(a.cov, b.cov, rtol=0, atol=1e-9 * _scale(a.cov))


# -- gradient x input ------------------------------------------------------------------------
def test_gradient_x_input_scales_mean_and_covariance(setup):
    posterior, Xq, attr = setup
    gxi = gradients(posterior, Xq, gradient_x_input=True)
    np.testing.assert_array_equal(gxi.mean, Xq * attr.mean)
    np.testing.assert_allclose(
        gxi.cov, Xq[:, :, None] * attr.cov * Xq[:, None, :], rtol=1e-15, atol=0
    )
    assert gxi.method == "gradient x input (derivative process)"
    assert gxi.baseline is None and gxi.baseline_prediction is None
    assert gxi.difference_variance is None


def test_gradient_x_input_with_baseline_is_a_first_order_taylor_estimate():
    X, y = _data()
    posterior = ExactPosterior(X, y, RBF(LENGTHSCALE, VARIANCE), NOISE)
    x = np.array([[0.3, -0.4, 0.8]])
    direction = np.array([0.5, 1.0, -0.7])
    gaps = []
    for eps in (1e-2, 5e-3):
        baseline = x[0] - eps * direction
        attr = gradients(posterior, x, gradient_x_input=True, baseline=baseline)
        np.testing.assert_allclose(attr.mean, eps * direction * gradients(posterior, x).mean)
        assert attr.baseline_prediction == pytest.approx(posterior.predict_mean(baseline[None])[0])
        assert attr.method == "(x - baseline) x gradient (derivative process)"
        gaps.append(attr.completeness_gap()["mean"])
    # f(x) - f(xt) - grad f(x).(x - xt) = O(eps^2): halving eps quarters the gap.
    assert 3.5 < gaps[0] / gaps[1] < 4.5
    named = gradients(posterior, x, gradient_x_input=True, baseline="mean")
    np.testing.assert_allclose(named.baseline, X.mean(0))


def test_linearity_in_the_targets():
    """alpha is linear in y (zero prior mean): gradient means add, covariances do not move."""
    X, y1 = _data(seed=0)
    y2 = np.cos(X[:, 1]) - X[:, 2]
    Xq = np.random.default_rng(2).uniform(-2, 2, size=(4, 3))
    results = [
        gradients(ExactPosterior(X, y, RBF(LENGTHSCALE, VARIANCE), NOISE), Xq, gradient_x_input=g)
        for g in (False, True)
        for y in (y1, y2, y1 + y2)
    ]
    for a, b, both in (results[:3], results[3:]):
        np.testing.assert_allclose(both.mean, a.mean + b.mean, rtol=0, atol=1e-10 * _scale(a.mean))
        np.testing.assert_allclose(both.cov, a.cov, rtol=1e-12, atol=0)


def test_feature_with_infinite_lengthscale_gets_zero_mean_and_variance():
    X, y = _data()
    Xq = np.random.default_rng(3).uniform(-2, 2, size=(4, 3))
    switched_off = RBF([0.9, np.inf, 2.0], VARIANCE)
    kernels = [switched_off, GPyTorchKernel(switched_off.torch_kernel(3))]
    for kernel in kernels:
        posterior = ExactPosterior(X, y, kernel, NOISE)
        for gradient_x_input in (False, True):
            attr = gradients(posterior, Xq, gradient_x_input=gradient_x_input)
            np.testing.assert_array_equal(attr.mean[:, 1], 0.0)
            np.testing.assert_array_equal(attr.cov[:, 1, :], 0.0)
            np.testing.assert_array_equal(attr.cov[:, :, 1], 0.0)
            assert np.all(attr.var[:, [0, 2]] > 0)


# -- result object, chunking, estimators -----------------------------------------------------
def test_labels_and_fields_say_what_was_computed(setup):
    posterior, Xq, attr = setup
    assert attr.method == "posterior gradient (derivative process)"
    assert attr.baseline is None and attr.baseline_prediction is None
    assert attr.difference_variance is None
    assert attr.completeness_gap() == {"mean": 0.0, "variance": 0.0}
    assert attr.mean.shape == (3, 3) and attr.cov.shape == (3, 3, 3)


def test_chunking_and_mean_only_give_the_same_numbers(setup):
    posterior, Xq, attr = setup
    chunked = gradients(posterior, Xq, chunk_size=1)
    np.testing.assert_allclose(chunked.mean, attr.mean, rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(chunked.cov, attr.cov, rtol=1e-12, atol=1e-15)
    mean_only = gradients(posterior, Xq, return_cov=False)
    assert mean_only.cov is None
    np.testing.assert_array_equal(mean_only.mean, attr.mean)


def test_fitted_estimator_pandas_and_torch_inputs():
    X, y = _data()
    names = ["age", "dose", "weight"]
    frame = pd.DataFrame(X, columns=names)
    model = GPRegressor(kernel=RBF(LENGTHSCALE, VARIANCE), noise=NOISE, optimizer=None)
    model.fit(frame, y)
    Xq = frame.iloc[:3]
    attr = gradients(model, Xq)
    direct = gradients(model.posterior_, Xq.to_numpy())
    np.testing.assert_array_equal(attr.mean, direct.mean)
    assert attr.feature_names == names
    torch_attr = gradients(model, torch.tensor(Xq.to_numpy()))
    np.testing.assert_array_equal(torch_attr.mean, direct.mean)
    with pytest.raises(ValueError, match="do not match the training features"):
        gradients(model, Xq[["dose", "age", "weight"]])


# -- bad input -------------------------------------------------------------------------------
def test_bad_inputs_raise_named_errors():
    X, y = _data()
    posterior = ExactPosterior(X, y, RBF(LENGTHSCALE, VARIANCE), NOISE)
    with pytest.raises(ValueError, match="2 features but the model was fitted on 3"):
        gradients(posterior, X[:, :2])
    bad = X[:2].copy()
    bad[1, 2] = np.nan
    with pytest.raises(ValueError, match=r"NaN at row 1, column 'x2'"):
        gradients(posterior, bad)
    with pytest.raises(ValueError, match="must be 2-D"):
        gradients(posterior, X[0])
    with pytest.raises(ValueError, match="baseline applies only to gradient x input"):
        gradients(posterior, X[:2], baseline="mean")
    with pytest.raises(ValueError, match="baseline has 2 values"):
        gradients(posterior, X[:2], gradient_x_input=True, baseline=[0.0, 1.0])
    for chunk_size in (0, 2.5):
        with pytest.raises(ValueError, match="chunk_size must be a positive integer"):
            gradients(posterior, X[:2], chunk_size=chunk_size)
    with pytest.raises(TypeError, match="expected a fitted gpexplain estimator or a posterior"):
        gradients(object(), X[:2])
    with pytest.raises(ValueError, match="not fitted yet"):
        gradients(GPRegressor(), X[:2])


def test_kernel_without_derivative_process_is_refused():
    X, y = _data()
    exponential = GPyTorchKernel(gk.ScaleKernel(gk.MaternKernel(nu=0.5)))
    posterior = ExactPosterior(X, y, exponential, NOISE)
    for return_cov in (True, False):
        with pytest.raises(ValueError, match=r"nu=0\.5.*derivative process does not exist"):
            gradients(posterior, X[:2], return_cov=return_cov)
