"""Adapter from BoTorch: ``SingleTaskGP`` (learned or fixed noise) and ``ModelListGP``.

A BoTorch model fits a GPyTorch exact GP to *transformed* data: inputs through an affine input
transform (``Normalize``: ``x_t = (x - offset) / coefficient``) and targets through
``Standardize`` (``y_t = (y - mu) / s``). Both maps are affine, so the posterior in the user's
units is again an exact GP, with

    k(x, x') = s^2 k_t((x - offset) / coefficient, (x' - offset) / coefficient)
    m0       = mu + s c_t,     noise = s^2 noise_t,     y = mu + s y_t

(``k_t``, ``c_t``, ``noise_t``: the fitted kernel, constant mean and noise on the transformed
scale). This is what ``model.posterior(X)`` returns (BoTorch un-standardises the posterior
with the same ``mu`` and ``s``), and attributions computed from it are in parameter and
objective units. Nonlinear transforms (``Log``, ``Power``, ``Bilog``, warping) would make the
posterior non-Gaussian in the user's units and are refused.
"""

from __future__ import annotations

import copy

import numpy as np

from gpexplain._optional import require
from gpexplain._torch import to_numpy
from gpexplain.kernels import RBF, as_kernel
from gpexplain.kernels.gpytorch_adapter import input_scaled, squared_exponential
from gpexplain.posterior.adapters import _as_matrix, _constant_mean
from gpexplain.posterior.exact import ExactPosterior

__all__ = ["from_botorch"]

_BOTORCH_SUPPORTED = (
    "supported: botorch SingleTaskGP (learned noise, or fixed noise from train_Yvar; one or "
    "several outputs; no batch of models), with no input transform or an affine one "
    "(Normalize, InputStandardize, AffineInputTransform) and no outcome transform or "
    "Standardize, a ConstantMean or ZeroMean, any differentiable GPyTorch kernel; or a "
    "ModelListGP of such models."
)


def from_botorch(model, *, feature_names=None, output_names=None):
    """The gpexplain posterior(s) of a fitted BoTorch model, in the user's units.

    Parameters
    ----------
    model : botorch.models.SingleTaskGP or botorch.models.ModelListGP
        Fitted (e.g. by ``botorch.fit.fit_gpytorch_mll``). A ``SingleTaskGP`` built with
        ``train_Yvar`` (fixed, heteroskedastic observation noise) is exact too: its per-row
        noise variances are used. ``HeteroskedasticSingleTaskGP`` no longer exists in
        BoTorch (removed in BoTorch 0.14); other model classes are refused by name.
    feature_names : sequence of str, optional
        One per input column (default ``x0, x1, ...``).
    output_names : sequence of str, optional
        One per output; with it, a multi-output model gives a dict keyed by these names.

    Returns
    -------
    ExactPosterior, or a list (dict with ``output_names``) of ExactPosterior
        One posterior for a single-output model; one per output, in output order, for a
        multi-output ``SingleTaskGP`` or a ``ModelListGP`` (each output's sub-model in turn).
        Each is in the original units of the inputs and the objective (the model's input
        transform and ``Standardize`` undone exactly, see the module docstring); its latent
        mean and variance equal ``model.posterior(X)`` (``observation_noise=False``) for that
        output. The kernel is ``gx.kernels.RBF`` when the BoTorch kernel is a GPyTorch
        ``RBFKernel`` or ``ScaleKernel(RBFKernel)`` (BoTorch's default: closed-form
        explanations), otherwise the GPyTorch kernel composed with the input transform
        (explained by quadrature).

    Raises
    ------
    ImportError
        BoTorch is not installed (``pip install "gpexplain[botorch]"``).
    TypeError
        Another model class, a nonlinear or learned input or outcome transform, an
        unsupported mean or likelihood (each named, with what is supported).
    ValueError
        A batch of models, a multi-output model whose outputs BoTorch cannot separate
        (``subset_output`` fails for a custom kernel), or ``output_names`` of the wrong
        length.
    """
    models = require("botorch.models", "botorch", "from_botorch")
    if type(model) is models.ModelListGP:
        outputs = [_single_task(*output, feature_names) for output in _list_outputs(model)]
    elif type(model) is models.SingleTaskGP:
        outputs = [_single_task(*output, feature_names) for output in _outputs(model)]
    else:
        hint = (" (a multi-task model: gx.as_multi_output(model) explains every task, with "
                "the covariance across tasks)" if "MultiTask" in type(model).__name__ else "")
        raise TypeError(
            f"model {type(model).__name__} is not supported{hint}; {_BOTORCH_SUPPORTED}"
        )
    if output_names is None:
        return outputs[0] if len(outputs) == 1 else outputs
    names = [str(name) for name in output_names]
    if len(names) != len(outputs) or len(set(names)) != len(names):
        raise ValueError(
            f"output_names must be {len(outputs)} distinct names (one per output of the "
            f"model), got {list(output_names)!r}."
        )
    return dict(zip(names, outputs, strict=True))


def _list_outputs(model_list):
    """``_outputs`` of each member of a ModelListGP, in order."""
    from botorch.models import SingleTaskGP

    for index, sub in enumerate(model_list.models):
        if type(sub) is not SingleTaskGP:
            raise TypeError(
                f"ModelListGP member {index} is a {type(sub).__name__}; {_BOTORCH_SUPPORTED}"
            )
        yield from _outputs(sub)


def _outputs(model):
    """(SingleTaskGP, output index, that output's covariance module) for each output."""
    yield from ((model, j, kernel) for j, kernel in enumerate(_output_kernels(model)))


def _output_kernels(model) -> list:
    """The covariance module of each output of a SingleTaskGP (BoTorch's ``subset_output``).

    A multi-output SingleTaskGP is a batch of independent GPs, one per output, sharing the
    training inputs; BoTorch itself knows how to take one out of the batch.
    """
    if len(model._input_batch_shape) > 0:
        raise ValueError(
            f"a batch of models (batch shape {tuple(model._input_batch_shape)}) is not "
            f"supported; {_BOTORCH_SUPPORTED}"
        )
    if model.num_outputs == 1:
        return [model.covar_module]
    try:
        return [model.subset_output([j]).covar_module for j in range(model.num_outputs)]
    except (NotImplementedError, RuntimeError, ValueError, IndexError) as error:
        raise ValueError(
            f"BoTorch cannot separate the {model.num_outputs} outputs of this SingleTaskGP "
            f"({error}); fit one SingleTaskGP per output in a ModelListGP instead."
        ) from None


def _single_task(model, output: int, kernel, feature_names) -> ExactPosterior:
    """Output ``output`` (covariance module ``kernel``) of a SingleTaskGP, original units."""
    import gpytorch

    original = copy.deepcopy(model).train()  # train mode holds the untransformed inputs
    # Several outputs: a batch over outputs (leading axis) sharing the inputs.
    X = _as_matrix(original.train_inputs[0].reshape(-1, *original.train_inputs[0].shape[-2:])[0],
                   "model.train_inputs[0]")
    shift, scale = _affine_input_transform(original, X.shape[1])
    y_mean, y_scale = _standardize(original, output)
    targets = np.asarray(to_numpy(original.train_targets), dtype=np.float64).reshape(-1, len(X))
    y = y_mean + y_scale * targets[output]
    likelihood = original.likelihood
    if not isinstance(
        likelihood,
        gpytorch.likelihoods.GaussianLikelihood | gpytorch.likelihoods.FixedNoiseGaussianLikelihood,
    ):
        raise TypeError(
            f"likelihood {type(likelihood).__name__} is not supported; {_BOTORCH_SUPPORTED}"
        )
    # Fixed noise: one variance per row (the observed Yvar, standardised, plus any learned
    # second noise); learned: one variance (per output).
    noise = np.asarray(to_numpy(likelihood.noise), dtype=np.float64)
    noise = noise.reshape(model.num_outputs, -1)[output] * y_scale**2
    noise = float(noise[0]) if noise.size == 1 else noise
    if isinstance(original.mean_module, gpytorch.means.ConstantMean):
        constant = to_numpy(original.mean_module.constant).astype(np.float64).reshape(-1)
        mean = y_mean + y_scale * float(constant[output])
    else:
        mean = y_mean + y_scale * _constant_mean(original)  # ZeroMean, or refused by name
    return ExactPosterior(
        X, y, _original_units_kernel(kernel, shift, scale, y_scale**2), noise,
        mean=mean, feature_names=feature_names,
    )


def _affine_input_transform(model, n_features: int) -> tuple[np.ndarray, np.ndarray]:
    """(offset, coefficient) over all features of the model's affine input transform.

    No transform: (0, 1). Features outside the transform's ``indices`` keep (0, 1).
    """
    from botorch.models.transforms.input import AffineInputTransform

    shift, scale = np.zeros(n_features), np.ones(n_features)
    transform = getattr(model, "input_transform", None)
    if transform is None:
        return shift, scale
    if not isinstance(transform, AffineInputTransform):
        raise TypeError(
            f"input transform {type(transform).__name__} is not supported (not affine, so "
            f"the posterior in your units is not a GP); {_BOTORCH_SUPPORTED}"
        )
    if not (transform.transform_on_train and transform.transform_on_eval):
        raise TypeError(
            "an input transform applied only in training or only in evaluation is not "
            f"supported; {_BOTORCH_SUPPORTED}"
        )
    offset = np.asarray(to_numpy(transform.offset), dtype=np.float64).reshape(-1)
    coefficient = np.asarray(to_numpy(transform.coefficient), dtype=np.float64).reshape(-1)
    indices = getattr(transform, "indices", None)
    columns = np.arange(n_features) if indices is None else to_numpy(indices).astype(int)
    shift[columns], scale[columns] = offset, coefficient
    return shift, scale


def _standardize(model, output: int) -> tuple[float, float]:
    """(mu, s) of the model's Standardize outcome transform for ``output``; (0, 1) without."""
    from botorch.models.transforms.outcome import Standardize

    transform = getattr(model, "outcome_transform", None)
    if transform is None:
        return 0.0, 1.0
    if type(transform) is not Standardize:
        raise TypeError(
            f"outcome transform {type(transform).__name__} is not supported (only Standardize "
            f"is affine, so the posterior in objective units stays a GP); {_BOTORCH_SUPPORTED}"
        )
    means = np.asarray(to_numpy(transform.means), dtype=np.float64).reshape(-1)
    stdvs = np.asarray(to_numpy(transform.stdvs), dtype=np.float64).reshape(-1)
    return float(means[output]), float(stdvs[output])


def _original_units_kernel(module, shift: np.ndarray, scale: np.ndarray, outputscale: float):
    """``outputscale * k_t((x - shift) / scale, ...)`` as a gpexplain kernel.

    A squared exponential stays one: lengthscales times ``scale`` (the shift cancels in a
    stationary kernel), variance times ``outputscale``, so it keeps closed-form explanations.
    """
    module = copy.deepcopy(module).double()
    converted = squared_exponential(module)
    if converted is not None:
        lengthscale = np.broadcast_to(converted.lengthscale, scale.shape) * scale
        return RBF(lengthscale, converted.variance * outputscale)
    return as_kernel(input_scaled(module, shift, scale, outputscale))
