"""Multi-output posteriors (issue 24): the ICM representer form and the adapters, whose latent
predictions equal scikit-learn's and BoTorch's own to 1e-8, and refusals by name."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF as SkRBF
from sklearn.gaussian_process.kernels import ConstantKernel

import gpexplain as gx
from gpexplain.posterior.multi_output import CoregionalizedPosterior, IndependentOutputs
from tests.botorch_settings import unchanged_gpytorch_settings

with unchanged_gpytorch_settings():
    botorch = pytest.importorskip("botorch")
import gpytorch  # noqa: E402
import torch  # noqa: E402
from botorch.models import ModelListGP, MultiTaskGP, SingleTaskGP  # noqa: E402
from botorch.models.transforms.input import Normalize  # noqa: E402
from botorch.models.transforms.outcome import Log  # noqa: E402


def _data(seed=0, n=24, d=3):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n, d))
    Y = np.c_[np.sin(X[:, 0]) + X[:, 1], 40.0 + 5 * np.cos(X[:, 1]) * X[:, 2]]
    return X, Y, rng.uniform(-2.2, 2.2, size=(7, d))


def test_sklearn_2d_y_is_independent_outputs_sharing_one_kernel():
    X, Y, Xq = _data()
    gpr = GaussianProcessRegressor(ConstantKernel(1.0) * SkRBF([1.0, 1.0, 1.0]), alpha=1e-2,
                                   normalize_y=True, random_state=0).fit(X, Y)
    posterior = gx.as_multi_output(gpr, output_names=["a", "b"])
    assert isinstance(posterior, IndependentOutputs) and posterior.independent
    mean, std = gpr.predict(Xq, return_std=True)
    ours, var = posterior.predict(Xq)
    np.testing.assert_allclose(ours, mean, atol=1e-8 * np.abs(mean).max())
    np.testing.assert_allclose(np.sqrt(var), std, rtol=1e-8, atol=1e-10)
    _, cov = posterior.predict(Xq, return_cov=True)
    assert np.all(cov[:, 0, 1] == 0.0)  # independent outputs: stated, not computed


def _set_hyperparameters(model, seed=1):
    """Non-default hyperparameters without a fit (fast, and nothing left at its default)."""
    generator = torch.Generator().manual_seed(seed)
    for parameter in model.parameters():
        step = 0.3 * torch.randn(parameter.shape, generator=generator, dtype=parameter.dtype)
        with torch.no_grad():  # positive raw values (constraints without transform) stay so
            parameter.mul_(step.exp()) if bool((parameter > 0).all()) else parameter.add_(step)
    return model.eval()


def _botorch_moments(model, Xq):
    with torch.no_grad(), gpytorch.settings.max_cholesky_size(10**9):
        posterior = model.posterior(torch.as_tensor(Xq))
        return (posterior.mean.numpy().copy(), posterior.variance.numpy().copy(),
                posterior.distribution.covariance_matrix.numpy().copy())


@pytest.mark.parametrize("kind", ["batched", "list"])
def test_botorch_independent_outputs_match_botorch(kind):
    X, Y, Xq = _data(1)
    Xt, Yt = torch.as_tensor(X), torch.as_tensor(Y)
    if kind == "batched":
        model = SingleTaskGP(Xt, Yt)
    else:
        model = ModelListGP(SingleTaskGP(Xt, Yt[:, :1]), SingleTaskGP(Xt, Yt[:, 1:]))
    model = _set_hyperparameters(model)
    posterior = gx.as_multi_output(model)
    assert isinstance(posterior, IndependentOutputs)
    mean, var, _ = _botorch_moments(model, Xq)
    ours, our_var = posterior.predict(Xq)
    np.testing.assert_allclose(ours, mean, rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(our_var, var, rtol=1e-8, atol=1e-10)


@pytest.mark.parametrize("task_feature", [-1, 0])
def test_multitask_gp_matches_botorch_including_cross_task_covariance(task_feature):
    X, Y, Xq = _data(2, n=30)
    rng = np.random.default_rng(5)
    tasks = rng.integers(0, 3, len(X)).astype(float)
    y = np.where(tasks == 2, Y[:, 1] / 10, Y[:, 0] + tasks)
    train = np.insert(X, 0 if task_feature == 0 else X.shape[1], tasks, axis=1)
    model = MultiTaskGP(torch.as_tensor(train), torch.as_tensor(y)[:, None],
                        task_feature=task_feature)
    model = _set_hyperparameters(model)
    posterior = gx.as_multi_output(model)
    assert isinstance(posterior, CoregionalizedPosterior) and not posterior.independent
    assert posterior.output_names == ["task 0", "task 1", "task 2"]
    mean, var, joint = _botorch_moments(model, Xq)
    ours, cov = posterior.predict(Xq, return_cov=True)
    scale = np.abs(mean).max()
    np.testing.assert_allclose(ours, mean, atol=1e-8 * scale)
    np.testing.assert_allclose(np.einsum("pii->pi", cov), var, rtol=1e-8, atol=1e-10)
    # BoTorch's joint covariance of a MultiTaskGP is task-major: index = task * n + point.
    n, t = mean.shape
    same_point = joint.reshape(t, n, t, n)[:, np.arange(n), :, np.arange(n)]
    np.testing.assert_allclose(cov, same_point, rtol=1e-7, atol=1e-10)


def test_multitask_gp_refuses_transforms_by_name():
    X, Y, _ = _data(3)
    train = torch.as_tensor(np.c_[X, np.arange(len(X)) % 2])
    y = torch.as_tensor(Y[:, :1])
    model = MultiTaskGP(train, y, task_feature=-1, input_transform=Normalize(d=4))
    with pytest.raises(TypeError, match="Normalize"):
        gx.as_multi_output(model)
    model = MultiTaskGP(train, y, task_feature=-1, outcome_transform=Log())
    with pytest.raises(TypeError, match="Log"):
        gx.as_multi_output(model)
    with pytest.raises(TypeError, match="not supported"):
        gx.as_multi_output(object())
    plain = MultiTaskGP(train, y, task_feature=-1)
    with pytest.raises(TypeError, match="as_multi_output"):
        gx.from_botorch(plain)
    gpr = GaussianProcessRegressor(SkRBF(1.0)).fit(X, Y)
    with pytest.raises(ValueError, match="as_multi_output"):
        gx.from_sklearn(gpr)


def test_coregionalized_posterior_validates_its_arguments():
    X, Y, _ = _data(4)
    kernel = gx.kernels.RBF(1.0)
    tasks = np.arange(len(X)) % 2
    good = dict(X=X, tasks=tasks, y=Y[:, 0], kernel=kernel, coregionalization=np.eye(2),
                noise=0.1)
    with pytest.raises(ValueError, match="positive semi-definite"):
        CoregionalizedPosterior(**{**good, "coregionalization": [[1.0, 2.0], [2.0, 1.0]]})
    with pytest.raises(ValueError, match="tasks"):
        CoregionalizedPosterior(**{**good, "tasks": tasks + 1})
    with pytest.raises(ValueError, match="output_names"):
        CoregionalizedPosterior(**good, output_names=["a", "a"])
    posterior = CoregionalizedPosterior(**good)
    with pytest.raises(ValueError, match="unknown output 'z'"):
        posterior.output_index("z")
    with pytest.raises(ValueError, match="out of range"):
        posterior.output_index(5)


def test_multitask_gp_with_a_matern_kernel_explains_every_output_completely():
    """A GPyTorch kernel (quadrature schemes): each output's marginal kernel is B_ii k, so the
    per-output covariance completes to that output's own difference variance."""
    import warnings

    X, Y, Xq = _data(6, n=20)
    tasks = np.arange(len(X)) % 2
    train = torch.as_tensor(np.c_[X, tasks])
    model = MultiTaskGP(train, torch.as_tensor(Y[:, :1] + tasks[:, None]), task_feature=-1,
                        covar_module=gpytorch.kernels.MaternKernel(nu=2.5, ard_num_dims=3))
    posterior = gx.as_multi_output(_set_hyperparameters(model, seed=2))
    mean, var, _ = _botorch_moments(model, Xq)
    np.testing.assert_allclose(posterior.predict(Xq)[1], var, rtol=1e-8, atol=1e-10)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        result = gx.integrated_gradients(posterior, Xq[:2], n_steps=32)
    for attribution in result.attributions:
        np.testing.assert_allclose(attribution.cov.sum((1, 2)), attribution.difference_variance,
                                   rtol=1e-6)


def _same_point_blocks(joint, n, t, interleaved):
    """(n, t, t) covariance across tasks at each point from a (n t, n t) joint covariance."""
    if interleaved:  # index = point * t + task
        return joint.reshape(n, t, n, t)[np.arange(n), :, np.arange(n), :]
    return joint.reshape(t, n, t, n)[:, np.arange(n), :, np.arange(n)]


def test_kronecker_multitask_gp_with_transforms_matches_gpytorch_and_botorch():
    """Means equal ``model.posterior``; variances and the covariance across tasks equal the
    exact GPyTorch prediction of the same model. BoTorch's own Kronecker posterior variance
    treats per-task noise as if it were diagonal in the task covariance's eigenbasis, which
    is exact only for one noise for all tasks: with per-task noises it differs (about 2e-3
    here); with one noise it agrees to 1e-8."""
    from botorch.models import KroneckerMultiTaskGP

    X, Y, Xq = _data(7, n=15)
    Y = np.c_[Y, Y[:, 0] * 3 - 7]
    for task_noise in (True, False):
        likelihood = gpytorch.likelihoods.MultitaskGaussianLikelihood(
            num_tasks=3, has_task_noise=task_noise).double()
        model = KroneckerMultiTaskGP(torch.as_tensor(X), torch.as_tensor(Y),
                                     likelihood=likelihood, input_transform=Normalize(d=3))
        posterior = gx.as_multi_output(_set_hyperparameters(model, seed=3))
        assert isinstance(posterior, CoregionalizedPosterior) and posterior.n_outputs == 3
        mean, var, _ = _botorch_moments(model, Xq)
        ours, cov = posterior.predict(Xq, return_cov=True)
        np.testing.assert_allclose(ours, mean, atol=1e-8 * np.abs(mean).max())
        with torch.no_grad(), gpytorch.settings.fast_computations(False, False, False):
            exact = model(model.transform_inputs(torch.as_tensor(Xq)))
            joint = exact.covariance_matrix.numpy()
        np.testing.assert_allclose(cov, _same_point_blocks(joint, len(Xq), 3, True),
                                   rtol=1e-8, atol=1e-10)
        gap = np.abs(np.einsum("pii->pi", cov) - var).max() / var.max()
        assert gap > 1e-4 if task_noise else gap < 1e-8, gap


class _Multitask(gpytorch.models.ExactGP):
    """A GPyTorch multitask exact GP of two tasks with a given multitask covar_module."""

    def __init__(self, x, y, likelihood, covar_module):
        super().__init__(x, y, likelihood)
        self.mean_module = gpytorch.means.MultitaskMean(gpytorch.means.ConstantMean(), 2)
        self.covar_module = covar_module

    def forward(self, x):
        return gpytorch.distributions.MultitaskMultivariateNormal(
            self.mean_module(x), self.covar_module(x))


def test_gpytorch_multitask_kernel_model_matches_gpytorch():
    X, Y, Xq = _data(8, n=15)

    kernel = gpytorch.kernels.MultitaskKernel(
        gpytorch.kernels.MaternKernel(nu=2.5, ard_num_dims=3), num_tasks=2, rank=1)
    likelihood = gpytorch.likelihoods.MultitaskGaussianLikelihood(num_tasks=2).double()
    model = _Multitask(torch.as_tensor(X), torch.as_tensor(Y), likelihood, kernel).double()
    _set_hyperparameters(model, seed=4)
    likelihood.eval()
    posterior = gx.as_multi_output(model, output_names=["p", "q"])
    with torch.no_grad(), gpytorch.settings.fast_computations(False, False, False):
        prediction = model(torch.as_tensor(Xq))
        mean, var = prediction.mean.numpy(), prediction.variance.numpy()
    ours, our_var = posterior.predict(Xq)
    np.testing.assert_allclose(ours, mean, atol=1e-8 * np.abs(mean).max())
    np.testing.assert_allclose(our_var, var, rtol=1e-8, atol=1e-10)


class _Hadamard(gpytorch.models.ExactGP):
    """GPyTorch's Hadamard multitask model (its tutorial's form); ``combine`` joins the input
    and task covariances (a product in the tutorial)."""

    def __init__(self, inputs, y, likelihood, combine="product", n_tasks=3):
        super().__init__(inputs, y, likelihood)
        self.combine = combine
        self.mean_module = gpytorch.means.ConstantMean()
        self.covar_module = gpytorch.kernels.ScaleKernel(
            gpytorch.kernels.RBFKernel(ard_num_dims=inputs[0].shape[1]))
        self.task_covar_module = gpytorch.kernels.IndexKernel(num_tasks=n_tasks, rank=1)

    def forward(self, x, i):
        covar_x, covar_i = self.covar_module(x), self.task_covar_module(i)
        covar = covar_x.mul(covar_i) if self.combine == "product" else covar_x + covar_i
        return gpytorch.distributions.MultivariateNormal(self.mean_module(x), covar)


def _hadamard_model(combine="product"):
    X, Y, Xq = _data(11, n=16)
    tasks = np.repeat(np.arange(3), [6, 5, 5])
    y = np.where(tasks == 0, Y[:, 0], np.where(tasks == 1, Y[:, 1] / 20, -Y[:, 0]))
    likelihood = gpytorch.likelihoods.GaussianLikelihood().double()
    model = _Hadamard((torch.as_tensor(X), torch.as_tensor(tasks[:, None])), torch.as_tensor(y),
                      likelihood, combine).double()
    _set_hyperparameters(model, seed=6)
    likelihood.noise = 0.05
    model.eval()
    likelihood.eval()
    return model, Xq


def test_gpytorch_hadamard_multitask_model_matches_gpytorch():
    """The tutorial's model (x, task index) with an IndexKernel: every task's latent mean and
    variance equal GPyTorch's exact prediction, also for tasks not observed at those inputs;
    each output's integrated gradients are complete."""
    model, Xq = _hadamard_model()
    posterior = gx.as_multi_output(model)
    assert isinstance(posterior, CoregionalizedPosterior)
    assert posterior.output_names == ["task 0", "task 1", "task 2"]
    ours, our_var = posterior.predict(Xq)
    for task in range(3):
        with torch.no_grad(), gpytorch.settings.fast_computations(False, False, False):
            prediction = model(torch.as_tensor(Xq), torch.full((len(Xq), 1), task))
        mean, var = prediction.mean.numpy(), prediction.variance.numpy()
        np.testing.assert_allclose(ours[:, task], mean, rtol=0, atol=1e-8 * np.abs(mean).max())
        np.testing.assert_allclose(our_var[:, task], var, rtol=1e-8, atol=1e-10)
    attribution = gx.integrated_gradients(posterior, Xq[:2])
    for task in range(3):
        gaps = attribution[f"task {task}"].completeness_gap()
        assert gaps["mean"] < 1e-8 * np.abs(ours).max() and gaps["variance"] < 1e-8


def test_gpytorch_hadamard_model_of_another_form_is_refused_with_the_gap():
    model, _ = _hadamard_model(combine="sum")
    with pytest.raises(TypeError, match=r"latent mean differs .* by [0-9.e+-]+ \(relative\): "
                                        r"its forward is not covar_module\(x\) \* "
                                        r"task_covar_module\(i\)"):
        gx.as_multi_output(model)


def test_gpytorch_lcm_kernel_model_is_an_lmc_matching_gpytorch():
    """GPyTorch's LCMKernel (a sum of MultitaskKernels with their own input kernels): an
    LMCPosterior whose means, variances and covariance across tasks at each point equal
    GPyTorch's exact prediction to 1e-8, and whose explanations are complete per output."""
    X, Y, Xq = _data(9, n=15)

    kernel = gpytorch.kernels.LCMKernel(
        [gpytorch.kernels.RBFKernel(ard_num_dims=3),
         gpytorch.kernels.MaternKernel(nu=2.5, ard_num_dims=3)], num_tasks=2, rank=1)
    likelihood = gpytorch.likelihoods.MultitaskGaussianLikelihood(num_tasks=2).double()
    model = _Multitask(torch.as_tensor(X), torch.as_tensor(Y), likelihood, kernel).double()
    _set_hyperparameters(model, seed=5)
    likelihood.eval()
    posterior = gx.as_multi_output(model, output_names=["p", "q"])
    assert isinstance(posterior, gx.LMCPosterior) and posterior.n_components == 2
    with torch.no_grad(), gpytorch.settings.fast_computations(False, False, False):
        prediction = model(torch.as_tensor(Xq))
        mean, var = prediction.mean.numpy(), prediction.variance.numpy()
        full = prediction.covariance_matrix.numpy()  # (point, task) interleaved
    ours, our_var = posterior.predict(Xq)
    np.testing.assert_allclose(ours, mean, atol=1e-8 * np.abs(mean).max())
    np.testing.assert_allclose(our_var, var, rtol=1e-8, atol=1e-10)
    _, cov = posterior.predict(Xq, return_cov=True)
    blocks = np.stack([full[2 * p:2 * p + 2, 2 * p:2 * p + 2] for p in range(len(Xq))])
    np.testing.assert_allclose(cov, blocks, rtol=1e-8, atol=1e-10 * np.abs(blocks).max())
    assert np.abs(cov[:, 0, 1]).max() > 1e-3 * np.abs(cov).max()  # tasks correlated
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # complete per output
        result = gx.integrated_gradients(posterior, Xq[:2], baseline="mean")
    assert result.mean.shape == (2, 2, 3)
