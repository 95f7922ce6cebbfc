"""Adapter from BoTorch: latent mean and variance equal ``model.posterior(X)`` to 1e-8 in the
user's units (input and outcome transforms undone), explanations run on the result, and
everything else is refused by name."""

from __future__ import annotations

import numpy as np
import pytest

from tests.botorch_settings import unchanged_gpytorch_settings  # noqa: E402

with unchanged_gpytorch_settings():
    botorch = pytest.importorskip("botorch")
import gpytorch  # noqa: E402
import torch  # noqa: E402
from botorch.fit import fit_gpytorch_mll  # noqa: E402
from botorch.models import ModelListGP, SingleTaskGP  # noqa: E402
from botorch.models.transforms.input import Normalize  # noqa: E402
from botorch.models.transforms.outcome import Log  # noqa: E402
from gpytorch.mlls import ExactMarginalLogLikelihood  # noqa: E402

from gpexplain.explain.integrated_gradients import integrated_gradients  # noqa: E402
from gpexplain.kernels import RBF, GPyTorchKernel  # noqa: E402
from gpexplain.posterior.botorch import from_botorch  # noqa: E402

# Parameters in very different units (as in Bayesian optimisation of a real process), an
# objective far from zero mean and unit scale: the transforms matter.
LOWER = np.array([0.0, 100.0, -5.0])
UPPER = np.array([1.0, 900.0, 5.0])


def _data(seed=0, n=25, n_outputs=1):
    rng = np.random.default_rng(seed)
    X = LOWER + (UPPER - LOWER) * rng.uniform(size=(n, 3))
    unit = (X - LOWER) / (UPPER - LOWER)
    f = 50.0 + 8.0 * np.sin(4 * unit[:, 0]) + 5.0 * unit[:, 1] * unit[:, 2]
    Y = np.stack([f * (1 + 0.3 * j) - 10 * j for j in range(n_outputs)], axis=1)
    Y = Y + 0.05 * rng.normal(size=Y.shape)
    return torch.as_tensor(X), torch.as_tensor(Y)


def _query(seed=3, n=10):
    rng = np.random.default_rng(seed)
    return LOWER + (UPPER - LOWER) * rng.uniform(-0.1, 1.1, size=(n, 3))


def _fit(model):
    with gpytorch.settings.max_cholesky_size(10**9):
        fit_gpytorch_mll(ExactMarginalLogLikelihood(model.likelihood, model))
    return model


def _botorch_latent(model, Xq, output=0):
    model.eval()
    with torch.no_grad(), gpytorch.settings.max_cholesky_size(10**9):
        posterior = model.posterior(torch.as_tensor(Xq))
        return (
            posterior.mean[..., output].numpy().copy(),
            posterior.variance[..., output].numpy().copy(),
        )


def _assert_matches(posterior, model, Xq, output=0):
    expected_mean, expected_var = _botorch_latent(model, Xq, output)
    mean, var = posterior.predict(Xq)
    scale = max(float(np.max(np.abs(expected_mean))), 1.0)
    np.testing.assert_allclose(mean, expected_mean, rtol=0, atol=1e-8 * scale)
    np.testing.assert_allclose(var, expected_var, rtol=0, atol=1e-8 * max(expected_var.max(), 1))


def _normalize():
    return Normalize(d=3, bounds=torch.as_tensor(np.stack([LOWER, UPPER])))


@pytest.mark.parametrize("transforms", ["both", "input standardize", "outcome only", "none"])
def test_single_task_gp_matches_botorch_posterior(transforms):
    from botorch.models.transforms.input import InputStandardize

    X, Y = _data()
    kwargs = {
        "both": {"input_transform": _normalize()},
        "input standardize": {"input_transform": InputStandardize(d=3)},
        "outcome only": {},
        "none": {"outcome_transform": None},
    }[transforms]
    model = _fit(SingleTaskGP(X, Y, **kwargs))
    posterior = from_botorch(model, feature_names=["a", "b", "c"])
    assert isinstance(posterior.kernel, RBF)  # BoTorch's default kernel: closed form
    assert posterior.feature_names == ["a", "b", "c"]
    _assert_matches(posterior, model, _query())
    # The training targets are the user's objective values, not standardised ones.
    np.testing.assert_allclose(posterior.train_targets, Y[:, 0].numpy(), rtol=1e-12)


def test_fixed_noise_gp_uses_the_observed_noise_per_row():
    X, Y = _data(seed=1)
    Yvar = torch.as_tensor(np.random.default_rng(2).uniform(0.01, 0.5, size=Y.shape))
    model = _fit(SingleTaskGP(X, Y, Yvar, input_transform=_normalize()))
    posterior = from_botorch(model)
    np.testing.assert_allclose(posterior.noise, Yvar[:, 0].numpy(), rtol=1e-10)
    _assert_matches(posterior, model, _query())


def test_matern_kernel_is_explained_by_quadrature_in_original_units():
    X, Y = _data(seed=4)
    kernel = gpytorch.kernels.ScaleKernel(gpytorch.kernels.MaternKernel(nu=2.5, ard_num_dims=3))
    model = _fit(SingleTaskGP(X, Y, covar_module=kernel, input_transform=_normalize()))
    posterior = from_botorch(model)
    assert isinstance(posterior.kernel, GPyTorchKernel)
    _assert_matches(posterior, model, _query())
    attr = integrated_gradients(posterior, _query()[:2], baseline="mean", n_steps=64)
    assert attr.completeness_gap()["mean"] < 1e-6 * np.abs(attr.prediction).max()


def test_multi_output_and_model_list_give_one_posterior_per_output():
    X, Y = _data(seed=5, n_outputs=2)
    multi = _fit(SingleTaskGP(X, Y, input_transform=_normalize()))
    posteriors = from_botorch(multi, output_names=["yield", "cost"])
    assert list(posteriors) == ["yield", "cost"]
    for j, name in enumerate(["yield", "cost"]):
        _assert_matches(posteriors[name], multi, _query(), output=j)

    members = [
        _fit(SingleTaskGP(X, Y[:, j : j + 1], input_transform=_normalize())) for j in range(2)
    ]
    model_list = ModelListGP(*members)
    listed = from_botorch(model_list)
    assert isinstance(listed, list) and len(listed) == 2
    for j, posterior in enumerate(listed):
        _assert_matches(posterior, members[j], _query())


def test_integrated_gradients_are_in_objective_units_and_complete():
    """Completeness in objective units, and the closed form equals quadrature."""
    X, Y = _data(seed=6)
    model = _fit(SingleTaskGP(X, Y, input_transform=_normalize()))
    posterior = from_botorch(model)
    Xq = _query()[:4]
    closed = integrated_gradients(posterior, Xq, baseline="mean")
    numeric = integrated_gradients(posterior, Xq, baseline="mean", method="quadrature", n_steps=64)
    expected_mean, _ = _botorch_latent(model, Xq)
    baseline_mean, _ = _botorch_latent(model, closed.baseline[None, :])
    np.testing.assert_allclose(
        closed.mean.sum(axis=1), expected_mean - baseline_mean[0], rtol=0,
        atol=1e-8 * np.abs(expected_mean).max(),
    )
    np.testing.assert_allclose(closed.mean, numeric.mean, rtol=0, atol=1e-6 * np.abs(Y).max())
    assert closed.completeness_gap()["variance"] < 1e-8 * max(closed.difference_variance.max(), 1)


def test_unsupported_models_and_transforms_are_refused_by_name():
    X, Y = _data()
    with pytest.raises(TypeError, match="ExactGP"):
        from_botorch(gpytorch.models.ExactGP(X, Y[:, 0], gpytorch.likelihoods.GaussianLikelihood()))
    with pytest.raises(TypeError, match="outcome transform Log"):
        from_botorch(SingleTaskGP(X, Y, outcome_transform=Log()))
    batched = SingleTaskGP(X.expand(2, -1, -1), Y.expand(2, -1, -1))
    with pytest.raises(ValueError, match="batch of models"):
        from_botorch(batched)
    with pytest.raises(ValueError, match="output_names"):
        from_botorch(SingleTaskGP(X, Y), output_names=["a", "b"])


def test_zero_mean_module_is_supported():
    X, Y = _data(seed=8)
    model = _fit(SingleTaskGP(X, Y, mean_module=gpytorch.means.ZeroMean(),
                              input_transform=_normalize()))
    _assert_matches(from_botorch(model), model, _query())


def test_posterior_of_a_botorch_model_saves_and_loads_bit_identically(tmp_path):
    """BoTorch's Matern kernel with Gamma priors, composed with the input transform."""
    from botorch.models.utils.gpytorch_modules import get_matern_kernel_with_gamma_prior

    import gpexplain as gx

    X, Y = _data(seed=9)
    model = _fit(SingleTaskGP(X, Y, covar_module=get_matern_kernel_with_gamma_prior(3),
                              input_transform=_normalize()))
    posterior = from_botorch(model)
    gx.save(posterior, tmp_path / "posterior.npz")
    loaded = gx.load(tmp_path / "posterior.npz", expected=gx.ExactPosterior)
    Xq = _query()
    for actual, expected in zip(loaded.predict(Xq), posterior.predict(Xq), strict=True):
        np.testing.assert_array_equal(actual, expected)
    attr = integrated_gradients(loaded, Xq[:2], n_steps=16)
    np.testing.assert_array_equal(
        attr.cov, integrated_gradients(posterior, Xq[:2], n_steps=16).cov
    )
