"""Adapters from GPyTorch and scikit-learn: latent predictions equal the source library's,
explainers accept the result, unsupported models are refused by name."""

from __future__ import annotations

import gpytorch
import numpy as np
import pytest
import torch
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process import kernels as sk

from gpexplain.explain.integrated_gradients import integrated_gradients
from gpexplain.kernels import RBF, GPyTorchKernel, as_kernel
from gpexplain.posterior.adapters import from_gpytorch, from_sklearn
from gpexplain.posterior.exact import ExactPosterior
from gpexplain.posterior.variational import VariationalPosterior

LENGTHSCALE = np.array([0.8, 1.5, 2.2])


def _data(seed=0, n=40, d=3):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2.0, 2.0, size=(n, d)) * [1.0, 2.0, 3.0]
    y = 5.0 + 2.0 * np.sin(X[:, 0]) + 0.3 * X[:, 1] * X[:, 2] + 0.1 * rng.normal(size=n)
    return X, y


def _query(seed=7, n=8):
    return np.random.default_rng(seed).uniform(-2.5, 2.5, size=(n, 3)) * [1.0, 2.0, 3.0]


def _assert_close(actual, expected, tol=1e-8):
    scale = max(float(np.max(np.abs(expected))), 1.0)
    np.testing.assert_allclose(actual, expected, rtol=0, atol=tol * scale)


def _gpytorch_latent(model, Xq):
    model.eval()
    with torch.no_grad(), gpytorch.settings.max_cholesky_size(10**9):
        output = model(torch.as_tensor(Xq, dtype=torch.float64))
        return output.mean.numpy(), output.variance.numpy()


def _scaled(base, outputscale=1.7):
    module = gpytorch.kernels.ScaleKernel(base).double()
    module.base_kernel.lengthscale = torch.as_tensor(LENGTHSCALE)
    module.outputscale = torch.tensor(outputscale, dtype=torch.float64)
    return module


def _ig_completeness_and_quadrature(posterior, Xq, closed_form):
    """IG runs on the adapter's output; complete; closed form (when claimed) = quadrature."""
    numeric = integrated_gradients(posterior, Xq[:3], method="quadrature", n_steps=64)
    assert np.all(np.isfinite(numeric.mean)) and np.all(np.isfinite(numeric.cov))
    assert numeric.completeness_gap()["mean"] < 1e-4 * max(np.abs(numeric.prediction).max(), 1)
    if closed_form:
        closed = integrated_gradients(posterior, Xq[:3])
        gaps = closed.completeness_gap()
        assert gaps["mean"] < 1e-10 * max(np.abs(closed.prediction).max(), 1.0)
        assert gaps["variance"] < 1e-10 * max(closed.difference_variance.max(), 1.0)
        _assert_close(numeric.mean, closed.mean, 1e-7)
        _assert_close(numeric.cov, closed.cov, 1e-7)


# -- GPyTorch exact GP ------------------------------------------------------------------------
class _ExactModel(gpytorch.models.ExactGP):
    def __init__(self, X, y, likelihood, mean_module, covar_module):
        super().__init__(X, y, likelihood)
        self.mean_module, self.covar_module = mean_module, covar_module

    def forward(self, x):
        return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))


def _exact_model(mean_module, base):
    X, y = _data()
    likelihood = gpytorch.likelihoods.GaussianLikelihood().double()
    likelihood.noise = torch.tensor(0.04, dtype=torch.float64)
    model = _ExactModel(
        torch.as_tensor(X), torch.as_tensor(y), likelihood, mean_module.double(), _scaled(base)
    ).double()
    return model, likelihood


@pytest.mark.parametrize(
    ("mean_kind", "kernel_kind"),
    [("constant", "rbf"), ("zero", "rbf"), ("constant", "matern1.5"), ("zero", "matern2.5")],
)
def test_gpytorch_exact_gp_predictions(mean_kind, kernel_kind):
    mean_module = (
        gpytorch.means.ConstantMean() if mean_kind == "constant" else gpytorch.means.ZeroMean()
    ).double()
    if mean_kind == "constant":
        mean_module.constant = torch.tensor(4.2, dtype=torch.float64)
    if kernel_kind == "rbf":
        base = gpytorch.kernels.RBFKernel(ard_num_dims=3)
    else:
        base = gpytorch.kernels.MaternKernel(nu=float(kernel_kind[6:]), ard_num_dims=3)
    model, likelihood = _exact_model(mean_module, base)
    posterior = from_gpytorch(model, likelihood)
    assert isinstance(posterior, ExactPosterior)
    assert posterior.mean == (4.2 if mean_kind == "constant" else 0.0)
    assert posterior.noise == pytest.approx(0.04, rel=1e-12)
    Xq = _query()
    expected_mean, expected_var = _gpytorch_latent(model, Xq)
    mean, var = posterior.predict(Xq)
    _assert_close(mean, expected_mean)
    _assert_close(var, expected_var)
    _ig_completeness_and_quadrature(posterior, Xq, closed_form=False)


def test_gpytorch_scaled_rbf_is_explained_in_closed_form():
    assert isinstance(as_kernel(_scaled(gpytorch.kernels.RBFKernel(ard_num_dims=3))), RBF)
    model, likelihood = _exact_model(
        gpytorch.means.ConstantMean(), gpytorch.kernels.RBFKernel(ard_num_dims=3)
    )
    posterior = from_gpytorch(model, likelihood)
    assert isinstance(posterior.kernel, RBF)
    _ig_completeness_and_quadrature(posterior, _query(), closed_form=True)


# -- GPyTorch variational GP --------------------------------------------------------------------
class _ApproximateModel(gpytorch.models.ApproximateGP):
    def __init__(self, Z, strategy_class, mean_module):
        distribution = gpytorch.variational.CholeskyVariationalDistribution(Z.shape[0])
        super().__init__(strategy_class(self, Z, distribution, learn_inducing_locations=True))
        self.mean_module = mean_module
        self.covar_module = _scaled(gpytorch.kernels.MaternKernel(nu=2.5, ard_num_dims=3), 1.3)

    def forward(self, x):
        return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))


def _approximate_model(strategy_class, seed=0, n_inducing=12):
    rng = np.random.default_rng(seed)
    Z = torch.as_tensor(rng.uniform(-2.0, 2.0, size=(n_inducing, 3)) * [1.0, 2.0, 3.0])
    mean_module = gpytorch.means.ConstantMean().double()
    mean_module.constant = torch.tensor(1.1, dtype=torch.float64)
    model = _ApproximateModel(Z, strategy_class, mean_module).double()
    strategy = model.variational_strategy
    distribution = strategy._variational_distribution
    with torch.no_grad():  # a q(u) that is not the prior, with S above Kzz in some directions
        distribution.variational_mean.copy_(torch.as_tensor(rng.normal(size=n_inducing)))
        root = np.tril(rng.normal(size=(n_inducing, n_inducing))) * 0.7
        distribution.chol_variational_covar.copy_(torch.as_tensor(root))
    strategy.variational_params_initialized.fill_(1)
    likelihood = gpytorch.likelihoods.GaussianLikelihood().double()
    return model, likelihood


@pytest.mark.parametrize(
    "strategy_class",
    [gpytorch.variational.VariationalStrategy, gpytorch.variational.UnwhitenedVariationalStrategy],
)
def test_gpytorch_variational_gp_predictions(strategy_class):
    model, likelihood = _approximate_model(strategy_class)
    X_train, _ = _data()
    posterior = from_gpytorch(model, likelihood, train_inputs=X_train)
    assert isinstance(posterior, VariationalPosterior)
    whitened = strategy_class is gpytorch.variational.VariationalStrategy
    assert posterior.whitened is whitened
    assert posterior.jitter == model.variational_strategy.jitter_val
    np.testing.assert_array_equal(posterior.data_inputs, X_train)
    Xq = _query()
    expected_mean, expected_var = _gpytorch_latent(model, Xq)
    # The whitened strategy adds jitter_val to the query points' prior variance.
    if whitened:
        expected_var = expected_var - model.variational_strategy.jitter_val
    mean, var = posterior.predict(Xq)
    _assert_close(mean, expected_mean)
    _assert_close(var, expected_var)
    _ig_completeness_and_quadrature(posterior, Xq, closed_form=False)


def test_gpytorch_variational_gp_without_train_inputs_warns():
    model, likelihood = _approximate_model(gpytorch.variational.VariationalStrategy)
    with pytest.warns(UserWarning, match="data_inputs"):
        posterior = from_gpytorch(model, likelihood)
    np.testing.assert_array_equal(
        posterior.data_inputs, model.variational_strategy.inducing_points.detach().numpy()
    )


def test_gpytorch_unsupported_parts_are_named():
    model, likelihood = _exact_model(
        gpytorch.means.ConstantMean(), gpytorch.kernels.RBFKernel(ard_num_dims=3)
    )
    with pytest.raises(TypeError, match="likelihood BernoulliLikelihood is not supported"):
        from_gpytorch(model, gpytorch.likelihoods.BernoulliLikelihood())
    model.mean_module = gpytorch.means.LinearMean(3).double()
    with pytest.raises(TypeError, match="mean_module LinearMean is not supported"):
        from_gpytorch(model, likelihood)
    with pytest.raises(TypeError, match="model Linear is not supported"):
        from_gpytorch(_with_mean(torch.nn.Linear(2, 1)), likelihood)
    approximate, _ = _approximate_model(gpytorch.variational.VariationalStrategy)
    approximate.variational_strategy.variational_params_initialized.fill_(0)
    with pytest.raises(ValueError, match="not initialised"):
        from_gpytorch(approximate, likelihood)


def _with_mean(module):
    module.mean_module = gpytorch.means.ZeroMean()
    module.covar_module = gpytorch.kernels.RBFKernel()
    return module


def test_gpytorch_unsupported_strategy_is_named():
    Z = torch.zeros(4, 3, dtype=torch.float64)

    class Model(gpytorch.models.ApproximateGP):
        def __init__(self):
            distribution = gpytorch.variational.CholeskyVariationalDistribution(4)
            strategy = gpytorch.variational.VariationalStrategy(self, Z, distribution)
            super().__init__(
                gpytorch.variational.IndependentMultitaskVariationalStrategy(strategy, 2)
            )
            self.mean_module = gpytorch.means.ZeroMean()
            self.covar_module = gpytorch.kernels.RBFKernel()

    with pytest.raises(TypeError, match="IndependentMultitaskVariationalStrategy"):
        from_gpytorch(Model(), gpytorch.likelihoods.GaussianLikelihood())


# -- scikit-learn --------------------------------------------------------------------------------
def _sk_rbf(ard=True):
    return sk.RBF(LENGTHSCALE if ard else 1.3, "fixed")


SKLEARN_KERNELS = {
    "C*RBF+White": lambda: sk.ConstantKernel(1.7, "fixed") * _sk_rbf() + sk.WhiteKernel(0.03),
    "White+RBF*C": lambda: sk.WhiteKernel(0.03) + _sk_rbf() * sk.ConstantKernel(1.7, "fixed"),
    "RBF isotropic": lambda: _sk_rbf(ard=False),
    "C*C*RBF": lambda: sk.ConstantKernel(1.2) * (sk.ConstantKernel(0.8) * _sk_rbf()),
    "Matern(inf)*C": lambda: sk.Matern(LENGTHSCALE, nu=np.inf) * sk.ConstantKernel(2.0),
    "C*Matern(0.5)+White": lambda: sk.ConstantKernel(1.7) * sk.Matern(LENGTHSCALE, nu=0.5)
    + sk.WhiteKernel(0.02),
    "Matern(1.5) isotropic": lambda: sk.Matern(1.1, nu=1.5),
    "White+C*Matern(2.5)": lambda: sk.WhiteKernel(0.05)
    + sk.ConstantKernel(0.9) * sk.Matern(LENGTHSCALE, nu=2.5),
}
CLOSED_FORM = {"C*RBF+White", "White+RBF*C", "RBF isotropic", "C*C*RBF", "Matern(inf)*C"}


def _white_level(kernel):
    if isinstance(kernel, sk.WhiteKernel):
        return kernel.noise_level
    if isinstance(kernel, sk.Sum):
        return _white_level(kernel.k1) + _white_level(kernel.k2)
    return 0.0


@pytest.mark.parametrize("name", list(SKLEARN_KERNELS))
@pytest.mark.parametrize("normalize_y", [False, True])
@pytest.mark.parametrize("alpha", [1e-10, 0.05])
def test_sklearn_predictions(name, normalize_y, alpha):
    X, y = _data()
    gpr = GaussianProcessRegressor(
        SKLEARN_KERNELS[name](), alpha=alpha, optimizer=None, normalize_y=normalize_y
    ).fit(X, y)
    posterior = from_sklearn(gpr)
    Xq = _query()
    sk_mean, sk_std = gpr.predict(Xq, return_std=True)
    y_var = np.var(y) if normalize_y else 1.0
    latent_var = sk_std**2 - _white_level(gpr.kernel_) * y_var
    mean, var = posterior.predict(Xq)
    _assert_close(mean, sk_mean)
    _assert_close(var, latent_var)
    _, sk_cov = gpr.predict(Xq, return_cov=True)
    _, cov = posterior.predict(Xq, return_cov=True)
    _assert_close(cov, sk_cov - _white_level(gpr.kernel_) * y_var * np.eye(len(Xq)))
    assert isinstance(posterior.kernel, RBF) == (name in CLOSED_FORM)
    if name not in CLOSED_FORM:
        assert isinstance(posterior.kernel, GPyTorchKernel)
    if not (alpha == 0.05 and normalize_y):  # one combination each for the explanations
        return
    if "Matern(0.5)" in name:  # sample paths not differentiable: no integrated gradients
        with pytest.raises(ValueError, match="not differentiable"):
            integrated_gradients(posterior, Xq[:1], method="quadrature")
    else:
        _ig_completeness_and_quadrature(posterior, Xq, closed_form=name in CLOSED_FORM)


def test_sklearn_with_optimised_hyperparameters():
    X, y = _data()
    kernel = sk.ConstantKernel() * sk.RBF(np.ones(3)) + sk.WhiteKernel(0.1)
    gpr = GaussianProcessRegressor(kernel, normalize_y=True, random_state=0).fit(X, y)
    posterior = from_sklearn(gpr, feature_names=["a", "b", "c"])
    assert posterior.feature_names == ["a", "b", "c"]
    Xq = _query()
    sk_mean, sk_std = gpr.predict(Xq, return_std=True)
    mean, var = posterior.predict(Xq)
    _assert_close(mean, sk_mean)
    _assert_close(var, sk_std**2 - gpr.kernel_.k2.noise_level * np.var(y))


@pytest.mark.parametrize(
    ("kernel", "error", "message"),
    [
        (sk.DotProduct(), TypeError, "kernel DotProduct .* is not supported"),
        (sk.ConstantKernel() * sk.RationalQuadratic(), TypeError, "RationalQuadratic"),
        (sk.ConstantKernel() + sk.RBF(), TypeError, "several signal terms"),
        (sk.RBF() * sk.Matern(), TypeError, "several RBF/Matern factors"),
        (sk.WhiteKernel(), TypeError, "no RBF or Matern term"),
        (sk.Matern(nu=2.0), ValueError, "Matern nu=2.0 is not supported"),
    ],
)
def test_sklearn_unsupported_kernels_are_named(kernel, error, message):
    X, y = _data(n=15)
    gpr = GaussianProcessRegressor(kernel, optimizer=None).fit(X, y)
    with pytest.raises(error, match=message) as info:
        from_sklearn(gpr)
    assert "supported:" in str(info.value)


def test_sklearn_bad_models():
    X, y = _data(n=15)
    with pytest.raises(ValueError, match="not fitted"):
        from_sklearn(GaussianProcessRegressor())
    with pytest.raises(TypeError, match="expected a GaussianProcessRegressor"):
        from_sklearn(ExactPosterior(X, y, RBF(1.0), 0.1))
    two_outputs = GaussianProcessRegressor(optimizer=None).fit(X, np.column_stack([y, y]))
    with pytest.raises(ValueError, match="multi-output"):
        from_sklearn(two_outputs)
    per_sample = GaussianProcessRegressor(optimizer=None, alpha=np.linspace(0.1, 0.2, 15))
    with pytest.raises(ValueError, match="per-sample alpha"):
        from_sklearn(per_sample.fit(X, y))
