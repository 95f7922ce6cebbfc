"""``as_multi_output``: the multi-output posterior of a model fitted elsewhere (issue 24).

* scikit-learn ``GaussianProcessRegressor`` fitted on a 2-D y: scikit-learn shares one kernel
  (hyperparameters fitted on the summed log marginal likelihood) and one noise across the
  columns, and with ``normalize_y`` scales each column by its own mean and standard deviation;
  each output is then an exact GP with kernel ``constant * std_i^2 * k``, mean ``mean_i``,
  noise ``(white + alpha) std_i^2``: independent outputs (``IndependentOutputs``).
* BoTorch ``ModelListGP`` and multi-output ``SingleTaskGP``: independent outputs, each as
  ``gx.from_botorch`` gives it.
* BoTorch ``KroneckerMultiTaskGP`` and GPyTorch exact GPs with a ``MultitaskKernel`` (block
  design: every task observed at every input): the same ICM on the n t (input, task) rows, with
  per-task ``Standardize`` scales folded into ``B`` (``s_i s_j B_ij``); with GPyTorch's
  ``LCMKernel`` (a sum of ``MultitaskKernel`` terms) the linear model of coregionalisation,
  an ``LMCPosterior`` of those terms. Its variances equal
  GPyTorch's exact prediction; BoTorch's own ``KroneckerMultiTaskGP.posterior`` variance
  differs when the tasks have different noise variances (it inverts ``Lambda_x kron
  Lambda_B + noise`` in the eigenbasis of B as if the noise were diagonal there).
* GPyTorch exact GPs of the "Hadamard" multitask form (GPyTorch's tutorial model: training
  inputs ``(x, task index)``, ``forward(x, i)`` returning ``covar_module(x) *
  task_covar_module(i)`` with an ``IndexKernel``): the same ICM with B the IndexKernel's
  covariance. The forward is the user's own code, so the result is checked against the
  model's own latent prediction at training inputs of every task and refused (naming the
  gap) where they differ: a forward that adds the two kernels, or whose mean depends on
  the task in a way the means here do not capture.
* BoTorch ``MultiTaskGP``: an intrinsic coregionalisation model (``CoregionalizedPosterior``)
  with ``B`` the evaluated task covariance of its ``IndexKernel`` (``W W^T + diag(v)``,
  normalised as the kernel normalises it), the task column removed from the features, per-task
  constant means (``MultitaskMean``) and per-task noise (``HadamardGaussianLikelihood``) or
  per-row fixed noise, all in the objective's units through ``Standardize`` (one mean and
  scale for all tasks, BoTorch's default for this model).
"""

from __future__ import annotations

import copy

import numpy as np

from gpexplain._optional import require
from gpexplain._torch import to_numpy
from gpexplain.posterior.adapters import _convert_stationary, _split_sklearn_kernel
from gpexplain.posterior.base import Posterior
from gpexplain.posterior.botorch import (
    _affine_input_transform,
    _original_units_kernel,
    _standardize,
    from_botorch,
)
from gpexplain.posterior.exact import ExactPosterior
from gpexplain.posterior.lmc import LMCPosterior
from gpexplain.posterior.multi_output import (
    CoregionalizedPosterior,
    IndependentOutputs,
    MultiOutputPosterior,
    TaskAugmentedPosterior,
)

__all__ = ["as_multi_output"]

_SUPPORTED = (
    "supported: a list of gpexplain posteriors; scikit-learn GaussianProcessRegressor fitted "
    "on a 2-D y; BoTorch ModelListGP, multi-output SingleTaskGP (as gx.from_botorch accepts "
    "them) or MultiTaskGP (no input transform; outcome transform None or Standardize(m=1); "
    "MultitaskMean of constant means; HadamardGaussianLikelihood or fixed noise); BoTorch "
    "KroneckerMultiTaskGP or a GPyTorch ExactGP with a MultitaskKernel or an LCMKernel of "
    "MultitaskKernels (affine input transform "
    "or none, Standardize or none, MultitaskMean of constant means, MultitaskGaussianLikelihood "
    "of rank 0: noise per task, not correlated across tasks); a GPyTorch ExactGP trained on "
    "(x, task index) with an IndexKernel task_covar_module multiplying covar_module(x) "
    "(GPyTorch's Hadamard multitask model; constant or multitask constant mean, Gaussian "
    "likelihood)."
)
#: Largest relative gap allowed between a Hadamard multitask model's own latent prediction
#: and the ICM read from its modules (both exact: the gap is rounding, ~1e-12, or a forward
#: of another form).
_HADAMARD_RTOL = 1e-6


def as_multi_output(model, *, output_names=None, feature_names=None) -> MultiOutputPosterior:
    """The multi-output posterior of a fitted model, in the user's units.

    Parameters
    ----------
    model : MultiOutputPosterior, sequence of Posterior, sklearn GaussianProcessRegressor,
        botorch ModelListGP, SingleTaskGP, MultiTaskGP or KroneckerMultiTaskGP, or a
        gpytorch ExactGP whose covar_module is a MultitaskKernel or an LCMKernel
    output_names : sequence of str, optional
        One per output (default ``y0, y1, ...``; for a MultiTaskGP ``task <value>``).
    feature_names : sequence of str, optional
        One per input feature (for a MultiTaskGP: excluding the task column).

    Returns
    -------
    IndependentOutputs, CoregionalizedPosterior or LMCPosterior
        Its ``predict`` equals the source library's latent predictions per output.

    Raises
    ------
    TypeError
        An unsupported model, transform, mean or likelihood (named, with what is supported).
    ValueError
        An unfitted model, bad ``output_names``.
    """
    if isinstance(model, MultiOutputPosterior):
        return model
    if isinstance(model, list | tuple):
        return IndependentOutputs(model, output_names)
    module = type(model).__module__
    if module.startswith("sklearn."):
        return _from_sklearn_2d(model, output_names, feature_names)
    if module.startswith("botorch."):
        models = require("botorch.models", "botorch", "as_multi_output")
        if type(model) is models.MultiTaskGP:
            return _from_multitask_gp(model, output_names, feature_names)
        if type(model) is models.KroneckerMultiTaskGP:
            return _from_kronecker(model, output_names, feature_names)
        posteriors = from_botorch(model, feature_names=feature_names)
        if isinstance(posteriors, Posterior):
            posteriors = [posteriors]
        return IndependentOutputs(posteriors, output_names)
    import gpytorch

    if isinstance(model, gpytorch.models.ExactGP) and isinstance(
        getattr(model, "covar_module", None),
        gpytorch.kernels.MultitaskKernel | gpytorch.kernels.LCMKernel,
    ):
        return _from_kronecker(model, output_names, feature_names)
    if isinstance(model, gpytorch.models.ExactGP) and isinstance(
        getattr(model, "task_covar_module", None), gpytorch.kernels.IndexKernel
    ):
        return _from_hadamard(model, output_names, feature_names)
    raise TypeError(f"model {type(model).__name__} is not supported; {_SUPPORTED}")


def _from_sklearn_2d(gpr, output_names, feature_names) -> IndependentOutputs:
    from sklearn.gaussian_process import GaussianProcessRegressor

    if not isinstance(gpr, GaussianProcessRegressor):
        raise TypeError(f"model {type(gpr).__name__} is not supported; {_SUPPORTED}")
    if not hasattr(gpr, "X_train_"):
        raise ValueError("the GaussianProcessRegressor is not fitted yet; call fit(X, y) first.")
    y = np.asarray(gpr.y_train_, dtype=np.float64)
    y = y[:, None] if y.ndim == 1 else y
    t = y.shape[1]
    means = np.broadcast_to(np.asarray(gpr._y_train_mean, dtype=np.float64).reshape(-1), (t,))
    stds = np.broadcast_to(np.asarray(gpr._y_train_std, dtype=np.float64).reshape(-1), (t,))
    alpha = np.unique(np.asarray(gpr.alpha, dtype=np.float64))
    if alpha.size != 1:
        raise ValueError("a per-sample alpha with different values is not supported; pass a "
                         "scalar alpha.")
    stationary, variance, white = _split_sklearn_kernel(gpr.kernel_)
    X = np.asarray(gpr.X_train_, dtype=np.float64)
    posteriors = [
        ExactPosterior(
            X, y[:, i] * stds[i] + means[i],
            _convert_stationary(stationary, variance * stds[i] ** 2, X.shape[1]),
            (white + float(alpha[0])) * stds[i] ** 2, mean=means[i], feature_names=feature_names,
        )
        for i in range(t)
    ]
    return IndependentOutputs(posteriors, output_names)


def _from_multitask_gp(model, output_names, feature_names) -> CoregionalizedPosterior:
    """A BoTorch MultiTaskGP as an ICM posterior in the objective's units."""
    import gpytorch

    if getattr(model, "input_transform", None) is not None:
        raise TypeError(
            f"MultiTaskGP with input transform {type(model.input_transform).__name__} is not "
            f"supported (the task column would be transformed too); {_SUPPORTED}"
        )
    y_mean, y_scale = _standardize(model, 0)  # refuses non-Standardize transforms by name
    if getattr(model, "outcome_transform", None) is not None and np.size(
        to_numpy(model.outcome_transform.means)
    ) != 1:
        raise TypeError(f"a Standardize outcome transform with one scale per task is not "
                        f"supported; {_SUPPORTED}")
    fitted = copy.deepcopy(model).eval()  # eval(): BoTorch fills unobserved tasks' factors
    raw = np.asarray(to_numpy(fitted.train_inputs[0]), dtype=np.float64)
    column = fitted._task_feature % raw.shape[1]
    X = np.delete(raw, column, axis=1)
    tasks = np.asarray(to_numpy(fitted._map_tasks(fitted.train_inputs[0][:, column]
                                                  .to(dtype=fitted.train_inputs[0].dtype)
                                                  .long())), dtype=np.int64).reshape(-1)
    data_module, task_module = fitted.covar_module.kernels
    if not isinstance(task_module, gpytorch.kernels.IndexKernel):
        raise TypeError(f"task kernel {type(task_module).__name__} is not an IndexKernel; "
                        f"{_SUPPORTED}")
    B = np.asarray(to_numpy(task_module.covar_matrix.to_dense()), dtype=np.float64)
    B = B.reshape(B.shape[-2:]) * y_scale**2
    t = B.shape[0]
    means = _task_means(fitted.mean_module, t)
    data_module = copy.deepcopy(data_module)
    data_module.active_dims = None
    kernel = _original_units_kernel(data_module, np.zeros(X.shape[1]), np.ones(X.shape[1]), 1.0)
    noise = _task_noise(fitted.likelihood, tasks, t) * y_scale**2
    targets = np.asarray(to_numpy(fitted.train_targets), dtype=np.float64).reshape(-1)
    all_tasks = sorted(getattr(fitted, "_expected_task_values", range(t)))
    if output_names is None:
        output_names = [f"task {value}" for value in all_tasks]
    return CoregionalizedPosterior(
        X, tasks, y_mean + y_scale * targets, kernel, B, noise,
        mean=y_mean + y_scale * means, output_names=output_names, feature_names=feature_names,
    )


def _from_hadamard(model, output_names, feature_names) -> CoregionalizedPosterior:
    """A GPyTorch Hadamard multitask ExactGP as an ICM posterior, checked against the model.

    Raises
    ------
    TypeError
        Training inputs that are not ``(x, task index)``, unsupported modules, or a forward
        whose latent prediction differs from the ICM (the gap named).
    """
    import gpytorch
    import torch

    inputs = getattr(model, "train_inputs", None)
    if inputs is None or len(inputs) != 2:
        raise TypeError(
            f"{type(model).__name__} has an IndexKernel task_covar_module but its training "
            "inputs are not the pair (x, task index) of GPyTorch's Hadamard multitask model; "
            f"{_SUPPORTED}")
    X = np.asarray(to_numpy(inputs[0]), dtype=np.float64)
    X = X[:, None] if X.ndim == 1 else X
    tasks = np.asarray(to_numpy(inputs[1]), dtype=np.float64).reshape(-1)
    if len(tasks) != len(X) or np.any(tasks != np.round(tasks)) or tasks.min() < 0:
        raise TypeError(f"the second training input of {type(model).__name__} must hold one "
                        f"integer task index per row of x; {_SUPPORTED}")
    tasks = tasks.astype(np.int64)
    task_module = model.task_covar_module
    B = np.asarray(to_numpy(task_module.covar_matrix.to_dense()), dtype=np.float64)
    B = B.reshape(B.shape[-2:])
    t = B.shape[0]
    kernel = _original_units_kernel(model.covar_module, np.zeros(X.shape[1]),
                                    np.ones(X.shape[1]), 1.0)
    targets = np.asarray(to_numpy(model.train_targets), dtype=np.float64).reshape(-1)
    posterior = CoregionalizedPosterior(
        X, tasks, targets, kernel, B, _task_noise(model.likelihood, tasks, t),
        mean=_task_means(model.mean_module, t),
        output_names=output_names or [f"task {i}" for i in range(t)],
        feature_names=feature_names,
    )
    # The model's own latent prediction at one training input per task, every task.
    rows = np.unique(tasks, return_index=True)[1]
    points = np.repeat(X[rows], t, axis=0)
    point_tasks = np.tile(np.arange(t), len(rows))
    fitted = copy.deepcopy(model).eval()
    like = inputs[0]
    # Cholesky, not GPyTorch's conjugate gradients above 800 rows: an exact reference.
    with torch.no_grad(), gpytorch.settings.fast_computations(False, False, False):
        latent = fitted(torch.as_tensor(points, dtype=like.dtype, device=like.device),
                        torch.as_tensor(point_tasks[:, None], device=like.device))
        theirs = (to_numpy(latent.mean).reshape(-1), to_numpy(latent.variance).reshape(-1))
    ours_mean, ours_variance = posterior.predict(points)
    ours = (ours_mean[np.arange(len(points)), point_tasks],
            ours_variance[np.arange(len(points)), point_tasks])
    for name, mine, source in zip(("mean", "variance"), ours, theirs, strict=True):
        gap = np.max(np.abs(mine - source)) / max(np.max(np.abs(source)), 1e-300)
        if not gap <= _HADAMARD_RTOL:
            raise TypeError(
                f"{type(model).__name__}'s latent {name} differs from the intrinsic "
                f"coregionalisation model read from its modules by {gap:.3g} (relative): its "
                "forward is not covar_module(x) * task_covar_module(i) with these means; "
                f"{_SUPPORTED}")
    return posterior


def _task_means(mean_module, t: int) -> np.ndarray:
    import gpytorch

    if isinstance(mean_module, gpytorch.means.MultitaskMean):
        return np.array([_constant(base) for base in mean_module.base_means])
    return np.full(t, _constant(mean_module))


def _constant(mean_module) -> float:
    import gpytorch

    if isinstance(mean_module, gpytorch.means.ZeroMean):
        return 0.0
    if isinstance(mean_module, gpytorch.means.ConstantMean):
        return float(to_numpy(mean_module.constant).reshape(-1)[0])
    raise TypeError(f"mean module {type(mean_module).__name__} is not supported; {_SUPPORTED}")


def _task_noise(likelihood, tasks: np.ndarray, t: int):
    import gpytorch

    noise = np.asarray(to_numpy(likelihood.noise), dtype=np.float64).reshape(-1)
    if isinstance(likelihood, gpytorch.likelihoods.FixedNoiseGaussianLikelihood):
        return noise
    if type(likelihood).__name__ == "HadamardGaussianLikelihood":
        return noise[tasks] if noise.size == t else np.broadcast_to(noise, tasks.shape).copy()
    if isinstance(likelihood, gpytorch.likelihoods.GaussianLikelihood):
        return float(noise[0])
    raise TypeError(f"likelihood {type(likelihood).__name__} is not supported; {_SUPPORTED}")


def _from_kronecker(model, output_names, feature_names) -> TaskAugmentedPosterior:
    """Block design (every task observed at every input): BoTorch ``KroneckerMultiTaskGP`` or a
    GPyTorch ``ExactGP`` whose ``covar_module`` is a ``MultitaskKernel`` (ICM,
    ``K = B kron k(X, X)``), as a ``CoregionalizedPosterior`` over the n t (input, task) rows;
    or an ``LCMKernel`` (a sum of Q ``MultitaskKernel`` terms, the linear model of
    coregionalisation ``K = sum_q B^q kron k_q(X, X)``), as an ``LMCPosterior``.

    With BoTorch's ``Standardize`` (one mean ``mu_i`` and scale ``s_i`` per task) the kernel in
    the objective's units is ``s_i s_j B_ij k(x, x')``, the means ``mu_i + s_i c_i`` and the
    noise ``s_i^2 (task noise_i + global noise)``.
    """
    import gpytorch

    original = copy.deepcopy(model).train()  # train mode holds the untransformed inputs
    X = np.asarray(to_numpy(original.train_inputs[0]), dtype=np.float64)
    if X.ndim != 2:
        raise ValueError(f"batched multitask models (inputs {X.shape}) are not supported; "
                         f"{_SUPPORTED}")
    Y = np.asarray(to_numpy(original.train_targets), dtype=np.float64)
    n, t = Y.shape
    shift, scale = _affine_input_transform(original, X.shape[1])
    standardize = [_standardize(original, i) for i in range(t)]
    y_mean = np.array([mu for mu, _ in standardize])
    y_scale = np.array([s for _, s in standardize])
    kernel_module = original.covar_module
    if isinstance(kernel_module, gpytorch.kernels.LCMKernel):
        modules = list(kernel_module.covar_module_list)
    elif isinstance(kernel_module, gpytorch.kernels.MultitaskKernel):
        modules = [kernel_module]
    else:
        raise TypeError(f"covar_module {type(kernel_module).__name__} is not a MultitaskKernel "
                        f"or an LCMKernel; {_SUPPORTED}")
    matrices = [np.asarray(to_numpy(module.task_covar_module.covar_matrix.to_dense()),
                           dtype=np.float64).reshape(t, t) * np.outer(y_scale, y_scale)
                for module in modules]
    kernels = [_original_units_kernel(module.data_covar_module, shift, scale, 1.0)
               for module in modules]
    means = _task_means(original.mean_module, t)
    likelihood = original.likelihood
    if not isinstance(likelihood, gpytorch.likelihoods.MultitaskGaussianLikelihood):
        raise TypeError(f"likelihood {type(likelihood).__name__} is not supported; {_SUPPORTED}")
    if likelihood.rank != 0:
        raise TypeError(f"a MultitaskGaussianLikelihood of rank {likelihood.rank} (noise "
                        f"correlated across tasks) is not supported; {_SUPPORTED}")
    noise = np.zeros(t)
    if likelihood.has_task_noise:
        noise = noise + np.asarray(to_numpy(likelihood.task_noises), dtype=np.float64).reshape(t)
    if likelihood.has_global_noise:
        noise = noise + float(to_numpy(likelihood.noise).reshape(-1)[0])
    noise = noise * y_scale**2
    tasks = np.tile(np.arange(t), n)  # row-major: input n, then its t tasks
    data = (np.repeat(X, t, axis=0), tasks, (y_mean + y_scale * Y).reshape(-1))
    names = {"mean": y_mean + y_scale * means, "output_names": output_names,
             "feature_names": feature_names}
    if isinstance(kernel_module, gpytorch.kernels.LCMKernel):
        return LMCPosterior(*data, kernels, matrices, noise[tasks], **names)
    return CoregionalizedPosterior(*data, kernels[0], matrices[0], noise[tasks], **names)
