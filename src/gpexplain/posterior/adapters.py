"""Posteriors of models fitted elsewhere: GPyTorch exact and variational GPs, scikit-learn GPR.

Each adapter reads the fitted model's hyperparameters and data (never refits anything) and
returns the equivalent gpexplain posterior, whose latent mean and variance equal the source
library's predictions up to round-off; every explainer then accepts it.
"""

from __future__ import annotations

import copy

import numpy as np

from gpexplain._torch import as_tensor, to_numpy
from gpexplain.kernels import RBF, GPyTorchKernel, as_kernel
from gpexplain.posterior.base import Posterior
from gpexplain.posterior.exact import ExactPosterior
from gpexplain.posterior.laplace import LaplacePosterior
from gpexplain.posterior.variational import VariationalPosterior

__all__ = ["from_gpytorch", "from_sklearn"]

_GPYTORCH_SUPPORTED = (
    "supported: gpytorch.models.ExactGP, or gpytorch.models.ApproximateGP with a "
    "VariationalStrategy (whitened) or UnwhitenedVariationalStrategy and a Gaussian "
    "variational distribution; a ConstantMean or ZeroMean; a GaussianLikelihood; no batch "
    "or multitask shapes."
)
_SKLEARN_SUPPORTED = (
    "supported: [ConstantKernel *] RBF or Matern(nu in {0.5, 1.5, 2.5, inf}) "
    "[+ WhiteKernel], operands in any order, for a single-output GaussianProcessRegressor."
)
_MATERN_NUS = (0.5, 1.5, 2.5)


# -- GPyTorch -----------------------------------------------------------------------------
def from_gpytorch(model, likelihood, *, train_inputs=None, feature_names=None) -> Posterior:
    """The gpexplain posterior of a fitted GPyTorch regression model.

    Parameters
    ----------
    model : gpytorch.models.ExactGP or gpytorch.models.ApproximateGP
        ExactGP: its ``train_inputs``/``train_targets``, ``mean_module`` and ``covar_module``
        are used. ApproximateGP: its ``variational_strategy`` (``VariationalStrategy``,
        whitened, or ``UnwhitenedVariationalStrategy``), inducing points, variational
        distribution (any Gaussian one), its ``jitter_val`` and the modules.
    likelihood : gpytorch.likelihoods.GaussianLikelihood
        Its noise variance is the ``noise`` of an exact posterior.
    train_inputs : array-like of shape (n_data, n_features), optional
        ApproximateGP only: the training inputs, which the "mean"/"median" baselines
        summarise (an ApproximateGP does not store them). Without them those baselines use
        the inducing points, with a warning.
    feature_names : sequence of str, optional

    Returns
    -------
    ExactPosterior or VariationalPosterior
        In the model's own input and output units, float64. Its ``predict`` equals the
        model's eval-mode latent ``model(X)`` mean and variance; GPyTorch's variational
        strategies add ``jitter_val`` to the variance at the query points, which the latent
        variance here does not include.

    Raises
    ------
    TypeError
        Unsupported model, strategy, variational distribution, mean or likelihood (named,
        with what is supported).
    ValueError
        Batch shapes, several input tensors, or an ApproximateGP never called (its variational
        parameters are not initialised yet).

    Notes
    -----
    The covariance module is copied and passed through ``gpexplain.kernels.as_kernel`` (a
    scaled RBF kernel gets the closed-form integrated gradients where ``as_kernel`` converts
    it; any other differentiable kernel is explained by quadrature). The model itself is not
    modified.
    """
    import gpytorch

    if not isinstance(likelihood, gpytorch.likelihoods.GaussianLikelihood):
        raise TypeError(
            f"likelihood {type(likelihood).__name__} is not supported; {_GPYTORCH_SUPPORTED}"
        )
    mean = _constant_mean(model)
    kernel = as_kernel(copy.deepcopy(model.covar_module))
    if isinstance(model, gpytorch.models.ExactGP):
        return _from_exact_gp(model, likelihood, kernel, mean, feature_names)
    if isinstance(model, gpytorch.models.ApproximateGP):
        return _from_approximate_gp(model, kernel, mean, train_inputs, feature_names)
    raise TypeError(f"model {type(model).__name__} is not supported; {_GPYTORCH_SUPPORTED}")


def _constant_mean(model) -> float:
    import gpytorch

    mean_module = getattr(model, "mean_module", None)
    if isinstance(mean_module, gpytorch.means.ZeroMean):
        return 0.0
    if isinstance(mean_module, gpytorch.means.ConstantMean):
        constant = to_numpy(mean_module.constant).astype(np.float64)
        if constant.size != 1:
            raise ValueError(f"batched ConstantMean (shape {constant.shape}) is not supported.")
        return float(constant.reshape(-1)[0])
    raise TypeError(
        f"mean_module {type(mean_module).__name__} is not supported; {_GPYTORCH_SUPPORTED}"
    )


def _as_matrix(tensor, name: str) -> np.ndarray:
    """A GPyTorch input tensor as float64 (n, n_features); 1-D inputs are one feature."""
    values = np.asarray(to_numpy(tensor), dtype=np.float64)
    if values.ndim == 1:
        values = values[:, None]
    if values.ndim != 2:
        raise ValueError(f"{name} has shape {values.shape}; {_GPYTORCH_SUPPORTED}")
    return values


def _from_exact_gp(model, likelihood, kernel, mean, feature_names) -> ExactPosterior:
    inputs = model.train_inputs
    if inputs is None or len(inputs) != 1:
        raise ValueError(
            "the ExactGP must hold exactly one training input tensor (model.train_inputs); "
            f"{_GPYTORCH_SUPPORTED}"
        )
    X = _as_matrix(inputs[0], "model.train_inputs[0]")
    y = np.asarray(to_numpy(model.train_targets), dtype=np.float64)
    noise = np.asarray(to_numpy(likelihood.noise), dtype=np.float64).reshape(-1)
    if y.ndim != 1 or noise.size != 1:
        raise ValueError(
            f"batched or multi-output ExactGP (targets {y.shape}, noise {noise.shape}) is not "
            f"supported; {_GPYTORCH_SUPPORTED}"
        )
    return ExactPosterior(X, y, kernel, float(noise[0]), mean=mean, feature_names=feature_names)


def _from_approximate_gp(model, kernel, mean, train_inputs, feature_names):
    import gpytorch
    from gpytorch.variational import UnwhitenedVariationalStrategy, VariationalStrategy

    strategy = model.variational_strategy
    # Exact types: subclasses (e.g. BatchDecoupledVariationalStrategy) change the predictive.
    if type(strategy) not in (VariationalStrategy, UnwhitenedVariationalStrategy):
        raise TypeError(
            f"variational strategy {type(strategy).__name__} is not supported; "
            f"{_GPYTORCH_SUPPORTED}"
        )
    if not bool(strategy.variational_params_initialized.item()) or not bool(
        getattr(strategy, "updated_strategy", np.array(True)).item()
    ):
        raise ValueError(
            "the variational distribution is not initialised yet; train the model (or call "
            "it once on some inputs) before converting it."
        )
    import torch

    with torch.no_grad():
        q = strategy.variational_distribution
        if not isinstance(q, gpytorch.distributions.MultivariateNormal):
            raise TypeError(
                f"variational distribution giving {type(q).__name__} is not supported; "
                f"{_GPYTORCH_SUPPORTED}"
            )
        variational_mean = to_numpy(q.mean).astype(np.float64)
        variational_covariance = to_numpy(q.covariance_matrix).astype(np.float64)
    Z = _as_matrix(strategy.inducing_points, "inducing_points")
    if variational_mean.ndim != 1:
        raise ValueError(
            f"batched variational distribution (mean shape {variational_mean.shape}) is not "
            f"supported; {_GPYTORCH_SUPPORTED}"
        )
    return VariationalPosterior(
        Z,
        variational_mean,
        variational_covariance,
        kernel,
        mean,
        whitened=type(strategy) is VariationalStrategy,
        jitter=float(strategy.jitter_val),
        data_inputs=None if train_inputs is None else to_numpy(train_inputs),
        feature_names=feature_names,
    )


# -- scikit-learn -------------------------------------------------------------------------
def from_sklearn(gpr, *, feature_names=None) -> ExactPosterior | LaplacePosterior:
    """The gpexplain posterior of a fitted ``sklearn.gaussian_process.GaussianProcessRegressor``
    or binary ``GaussianProcessClassifier``.

    A classifier becomes a ``LaplacePosterior`` (see ``_from_sklearn_classifier``): the latent
    log-odds of ``classes_[1]`` under scikit-learn's own Laplace approximation, carrying
    ``link="logit"`` so that explanations default to class probabilities.

    Parameters
    ----------
    gpr : GaussianProcessRegressor
        Fitted, single output, with kernel ``[ConstantKernel *] RBF`` or ``[ConstantKernel *]
        Matern(nu in {0.5, 1.5, 2.5, inf})``, optionally ``+ WhiteKernel``, operands in any
        order; ``normalize_y`` on or off.
    feature_names : sequence of str, optional

    Returns
    -------
    ExactPosterior
        In the original units of X and y: kernel variance ``constant * y_std^2``, prior mean
        ``y_mean`` (``y_std = 1``, ``y_mean = 0`` without ``normalize_y``), noise variance
        ``(white noise_level + alpha) * y_std^2``. scikit-learn's ``alpha`` is added to the
        diagonal of the training kernel matrix exactly like a noise variance, so it is one.
        The kernel is ``gx.kernels.RBF`` for RBF and Matern(nu=inf) (closed-form
        explanations), else ``GPyTorchKernel(ScaleKernel(MaternKernel(nu)))`` (explained by
        quadrature). ``predict`` gives scikit-learn's mean, and its variance without the white
        noise term (the latent f, not a new observation).

    Raises
    ------
    TypeError
        Not a GaussianProcessRegressor, or an unsupported kernel (its class named, e.g.
        "DotProduct", with what is supported).
    ValueError
        Not fitted, several outputs, a per-sample ``alpha`` with different values, or an
        unsupported Matern nu.
    """
    from sklearn.gaussian_process import GaussianProcessClassifier, GaussianProcessRegressor

    if isinstance(gpr, GaussianProcessClassifier):
        return _from_sklearn_classifier(gpr, feature_names)
    if not isinstance(gpr, GaussianProcessRegressor):
        raise TypeError(
            "expected a GaussianProcessRegressor or GaussianProcessClassifier, got "
            f"{type(gpr).__name__}."
        )
    if not hasattr(gpr, "X_train_"):
        raise ValueError("the GaussianProcessRegressor is not fitted yet; call fit(X, y) first.")
    y_normalised = np.asarray(gpr.y_train_, dtype=np.float64)
    if y_normalised.ndim == 2 and y_normalised.shape[1] == 1:
        y_normalised = y_normalised[:, 0]
    if y_normalised.ndim != 1:
        raise ValueError(
            f"multi-output GaussianProcessRegressor (targets {y_normalised.shape}) is not "
            "one posterior; gx.as_multi_output(gpr) gives one per output."
        )
    y_mean = float(np.reshape(gpr._y_train_mean, -1)[0])
    y_std = float(np.reshape(gpr._y_train_std, -1)[0])
    alpha = np.unique(np.asarray(gpr.alpha, dtype=np.float64))
    if alpha.size != 1:
        raise ValueError(
            "a per-sample alpha with different values is not supported (the posterior has "
            "one noise variance); pass a scalar alpha."
        )
    stationary, variance, white = _split_sklearn_kernel(gpr.kernel_)
    X = np.asarray(gpr.X_train_, dtype=np.float64)
    return ExactPosterior(
        X,
        y_normalised * y_std + y_mean,
        _convert_stationary(stationary, variance * y_std**2, X.shape[1]),
        (white + float(alpha[0])) * y_std**2,
        mean=y_mean,
        feature_names=feature_names,
    )


def _from_sklearn_classifier(gpc, feature_names) -> LaplacePosterior:
    """A binary ``GaussianProcessClassifier``'s Laplace approximation (Rasmussen and Williams
    2006, Alg. 3.2): ``Z = X``, ``a = y - pi`` and ``Q`` from ``W`` and ``B``, read from the
    fitted model (no refit); latent mean and variance equal scikit-learn's
    ``latent_mean_and_variance``.

    Raises
    ------
    ValueError
        Not fitted, or a multiclass (one-vs-rest / one-vs-one) model: its per-class latents are
        separate binary problems, not one posterior, and are refused by name.
    TypeError
        An unsupported kernel, or a WhiteKernel (a latent white-noise term has no gradient).
    """
    if not hasattr(gpc, "base_estimator_"):
        raise ValueError("the GaussianProcessClassifier is not fitted yet; call fit(X, y) first.")
    if len(gpc.classes_) != 2:
        raise ValueError(
            f"multiclass GaussianProcessClassifier ({len(gpc.classes_)} classes, "
            f"multi_class={gpc.multi_class!r}) is not supported: its one-vs-rest latents are "
            "not one posterior; fit a binary model per class, or gx.GPClassifier (softmax)."
        )
    binary = gpc.base_estimator_
    stationary, variance, white = _split_sklearn_kernel(binary.kernel_)
    if white:
        raise TypeError(
            "a WhiteKernel in a GaussianProcessClassifier is not supported (white noise in the "
            f"latent function has no input gradient); {_SKLEARN_SUPPORTED}"
        )
    X = np.asarray(binary.X_train_, dtype=np.float64)
    return LaplacePosterior(
        X, binary.y_train_, binary.pi_, _convert_stationary(stationary, variance, X.shape[1]),
        classes=gpc.classes_, feature_names=feature_names,
    )


def _split_sklearn_kernel(kernel) -> tuple[object, float, float]:
    """(the one RBF/Matern factor, product of the constants, sum of the white noise levels)."""
    from sklearn.gaussian_process import kernels


    def operands(node, kind):
        if isinstance(node, kind):
            return operands(node.k1, kind) + operands(node.k2, kind)
        return [node]

    def unsupported(node, why="is not supported"):
        return TypeError(f"kernel {type(node).__name__} ({node}) {why}; {_SKLEARN_SUPPORTED}")

    white, signal = 0.0, []
    for term in operands(kernel, kernels.Sum):
        if isinstance(term, kernels.WhiteKernel):
            white += float(term.noise_level)
        else:
            signal.append(term)
    if not signal:
        raise unsupported(kernel, "has no RBF or Matern term")
    if len(signal) > 1:
        names = " + ".join(type(term).__name__ for term in signal)
        raise unsupported(kernel, f"adds several signal terms ({names})")
    variance, stationary = 1.0, []
    for factor in operands(signal[0], kernels.Product):
        if isinstance(factor, kernels.ConstantKernel):
            variance *= float(factor.constant_value)
        elif isinstance(factor, kernels.RBF):  # Matern subclasses RBF in scikit-learn
            stationary.append(factor)
        else:
            raise unsupported(factor)
    if len(stationary) != 1:
        raise unsupported(signal[0], "multiplies several RBF/Matern factors")
    return stationary[0], variance, white


def _convert_stationary(kernel, variance: float, n_features: int):
    """An sklearn RBF/Matern with output variance as a gpexplain kernel (same units)."""
    from sklearn.gaussian_process.kernels import Matern

    lengthscale = np.asarray(kernel.length_scale, dtype=np.float64)
    nu = float(kernel.nu) if isinstance(kernel, Matern) else np.inf
    if np.isinf(nu):
        # A length-1 array (one feature) is one lengthscale: ``item()``, since NumPy 2 refuses
        # ``float`` of a 1-D array.
        return RBF(lengthscale if lengthscale.size > 1 else lengthscale.item(), variance)
    if nu not in _MATERN_NUS:
        raise ValueError(
            f"Matern nu={nu} is not supported (GPyTorch's MaternKernel has nu in "
            f"{_MATERN_NUS}); {_SKLEARN_SUPPORTED}"
        )
    import gpytorch

    ard = lengthscale.size > 1
    base = gpytorch.kernels.MaternKernel(nu=nu, ard_num_dims=n_features if ard else None)
    module = gpytorch.kernels.ScaleKernel(base).double()
    base.lengthscale = as_tensor(lengthscale.reshape(-1), like=base)
    module.outputscale = as_tensor(variance, like=module)
    return GPyTorchKernel(module)
