"""Posterior covariance of probability-level integrated gradients (binary links) against
Monte Carlo over joint posterior sample paths, its completeness, and on fitted classifiers."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import gpexplain as gx
from tests.reference.link_ig_monte_carlo import assert_moments_match, integrated_gradient_samples

Z_SCORE = 5.0  # a false alarm has probability below 1e-6 per check
LENGTHSCALE, VARIANCE, NOISE = np.array([1.0, 1.5, 2.0]), 4.0, 0.3


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(20, 3))
    y = 2.0 * (np.sin(X[:, 0]) + 0.5 * X[:, 1]) + 0.1 * rng.normal(size=20)
    return X, y


@pytest.fixture(scope="module")
def posterior(data):
    return gx.ExactPosterior(*data, gx.kernels.RBF(LENGTHSCALE, VARIANCE), NOISE)


BASELINE = np.array([0.5, -0.3, 1.0])
POINTS = np.array([[1.2, 0.4, -0.6], [-2.5, 1.8, 0.9]])  # the second far from the data: wide


@pytest.mark.parametrize(("name", "variance"), [
    ("logit", VARIANCE), ("probit", VARIANCE), ("logit", 15.0),
    pytest.param("logit", 60.0, marks=pytest.mark.slow),
])
def test_covariance_matches_monte_carlo_over_joint_sample_paths(data, name, variance):
    """400k joint posterior samples of (f, grad f) along the path per point: mean and every
    covariance entry within 5 standard errors (the entry's own, from the samples). Kernel
    variances 15 and 60: latent variances up to 12 and 46 along the second path (the logit's
    sharp case; 60 takes 15 s)."""
    posterior = gx.ExactPosterior(*data, gx.kernels.RBF(LENGTHSCALE, variance), NOISE)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = gx.integrated_gradients(posterior, POINTS, baseline=BASELINE, link=name)
    assert result.completeness_gap()["variance"] <= 1e-9 * result.difference_variance.max()
    for p, x in enumerate(POINTS):
        samples = integrated_gradient_samples(name, *data, LENGTHSCALE, variance, NOISE, x,
                                              BASELINE, 400_000, seed=p)
        assert_moments_match(samples, result.mean[p], result.cov[p], Z_SCORE)


@pytest.mark.parametrize("name", ["logit", "probit"])
def test_covariance_is_complete_symmetric_and_psd(posterior, name):
    """sum_kl Cov(IG_k, IG_l) = Var(sigma(f(x)) - sigma(f(xt))), computed separately (a
    bivariate expectation of the link at x and xt); the negative class has the same
    covariance and the opposite mean."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = gx.integrated_gradients(posterior, POINTS, baseline=BASELINE, link=name)
        negative = gx.integrated_gradients(posterior, POINTS, baseline=BASELINE, link=name,
                                           target_class=0)
    assert result.completeness_gap()["variance"] <= 1e-9 * result.difference_variance.max()
    np.testing.assert_array_equal(result.cov, np.swapaxes(result.cov, 1, 2))
    eigenvalues = np.linalg.eigvalsh(result.cov)
    assert np.all(eigenvalues[:, 0] > -1e-12 * eigenvalues[:, -1])
    np.testing.assert_allclose(negative.cov, result.cov, rtol=0, atol=1e-15)
    np.testing.assert_allclose(negative.mean, -result.mean, rtol=0, atol=1e-15)
    assert "covariance by second-order Stein" in result.method


def _gpytorch_posterior(data, base):
    import torch
    from gpytorch.kernels import ScaleKernel

    base = base.double()
    base.lengthscale = torch.as_tensor(LENGTHSCALE)
    kernel = ScaleKernel(base).double()
    kernel.outputscale = torch.tensor(VARIANCE)
    return gx.ExactPosterior(*data, gx.kernels.GPyTorchKernel(kernel), NOISE), kernel


def test_gpytorch_kernels_go_through_autograd_and_match_the_closed_form(data):
    """A GPyTorch RBF wrapped as is (autograd at distinct path nodes, the derivative recursion
    on the diagonal) against the closed form of the same kernel (parameters read back: GPyTorch
    stores them through a softplus)."""
    from gpytorch.kernels import RBFKernel

    wrapped, kernel = _gpytorch_posterior(data, RBFKernel(ard_num_dims=3))
    closed = gx.ExactPosterior(*data, gx.kernels.RBF(
        kernel.base_kernel.lengthscale.detach().numpy().ravel(), kernel.outputscale.item()),
        NOISE)
    ours = gx.integrated_gradients(wrapped, POINTS, baseline=BASELINE, link="logit")
    reference = gx.integrated_gradients(closed, POINTS, baseline=BASELINE, link="logit")
    np.testing.assert_allclose(ours.cov, reference.cov, rtol=0, atol=1e-11)
    assert ours.completeness_gap()["variance"] <= 1e-9 * ours.difference_variance.max()


@pytest.mark.slow
@pytest.mark.parametrize(("nu", "largest_gap"), [(2.5, 1e-5), (1.5, 2e-2)])
def test_matern_kernels_warn_with_the_measured_gap(data, nu, largest_gap):
    """Matern kernels have a kink at zero distance: the double path integral converges
    algebraically (measured: relative gap ~G^-4 for nu = 5/2, 3e-8 .. 3e-6 at 128 nodes;
    ~G^-2 for nu = 3/2, 6e-4 .. 8e-3), and the CompletenessWarning says so."""
    from gpytorch.kernels import MaternKernel

    posterior, _ = _gpytorch_posterior(data, MaternKernel(nu=nu, ard_num_dims=3))
    with pytest.warns(gx.CompletenessWarning, match="variance: 1\\^T cov 1"):
        result = gx.integrated_gradients(posterior, POINTS, baseline=BASELINE, link="logit")
    gap = np.abs(result.cov.sum((1, 2)) - result.difference_variance)
    assert np.all(gap <= largest_gap * result.difference_variance)
    assert np.all(np.linalg.eigvalsh(result.cov)[:, 0] > -1e-6)


def _check_complete(result):
    assert result.completeness_gap()["mean"] <= 1e-10
    assert result.completeness_gap()["variance"] <= 1e-8 * result.difference_variance.max()
    eigenvalues = np.linalg.eigvalsh(result.cov)
    assert np.all(eigenvalues[:, 0] >= -1e-10 * eigenvalues[:, -1])


def test_gp_classifier_on_wdbc(data_dir):
    """A GPClassifier (sparse variational, ARD) fitted on 120 rows of WDBC, 30 features."""
    import pandas as pd

    table = pd.read_csv(data_dir / "breast_cancer_wisconsin" / "wdbc.data", header=None)
    X, y = table.iloc[:, 2:].to_numpy(dtype=float), table.iloc[:, 1].to_numpy()
    model = gx.GPClassifier(random_state=0, n_inducing=10, max_iter=60).fit(X[:120], y[:120])
    with warnings.catch_warnings():
        warnings.simplefilter("error", gx.CompletenessWarning)
        result = gx.integrated_gradients(model, X[200:203])
    _check_complete(result)
    assert result.cov.shape == (3, 30, 30)
    np.testing.assert_allclose(result.prediction, model.predict_proba(X[200:203])[:, 1],
                               atol=1e-12)


def test_from_sklearn_gaussian_process_classifier():
    """The Laplace posterior of scikit-learn's classifier (breast cancer, 5 features), and
    its negative class."""
    from sklearn.datasets import load_breast_cancer
    from sklearn.gaussian_process import GaussianProcessClassifier
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel

    data = load_breast_cancer()
    X = data.data[:160, :5]
    X = (X - X.mean(0)) / X.std(0)
    y = np.where(data.target[:160] == 1, "benign", "malignant")
    model = GaussianProcessClassifier(ConstantKernel(2.0) * RBF(np.ones(5)),
                                      random_state=0).fit(X, y)
    posterior = gx.from_sklearn(model)
    with warnings.catch_warnings():
        warnings.simplefilter("error", gx.CompletenessWarning)
        result = gx.integrated_gradients(posterior, X[:4], baseline="mean")
        other = gx.integrated_gradients(posterior, X[:4], baseline="mean",
                                        target_class="benign")
    _check_complete(result)
    np.testing.assert_allclose(other.cov, result.cov, atol=1e-15)
    np.testing.assert_allclose(other.mean, -result.mean, atol=1e-15)


def test_several_baselines_need_return_cov_false(posterior):
    baselines = np.stack([BASELINE, -BASELINE])
    with pytest.raises(ValueError, match="return_cov=False"):
        gx.integrated_gradients(posterior, POINTS, baseline=baselines, link="logit")
    mean_only = gx.integrated_gradients(posterior, POINTS, baseline=baselines, link="logit",
                                        return_cov=False)
    assert mean_only.cov is None


def test_a_point_at_the_baseline_has_zero_covariance(posterior):
    result = gx.integrated_gradients(posterior, np.vstack([BASELINE, POINTS[0]]),
                                     baseline=BASELINE, link="probit")
    np.testing.assert_array_equal(result.cov[0], 0.0)
    assert result.difference_variance[0] == 0.0
    assert result.cov[1].sum() > 0


def test_the_taylor_approximation_stays_without_covariance(posterior):
    taylor = gx.integrated_gradients(posterior, POINTS, baseline=BASELINE, link="logit",
                                     approximation="taylor")
    assert taylor.cov is None
