"""Adapter from Ax: the fitted surrogate of each metric as a posterior over Ax's parameters.

Ax (1.1: ``ax.Client``; the older service API's ``AxClient`` too) fits a BoTorch model inside
a ``TorchAdapter`` after its own transforms of the parameters and the data. The surrogate of a
metric in Ax's units is a GP exactly when every transform applied is affine or the identity:

* parameters: ``RemoveFixed`` (a fixed parameter is no input), ``Cast``, ``MapKeyToFloat``
  without map metrics, and the Ax-side ``Log`` / ``Logit`` / ``LogIntToFloat`` /
  ``OneHot`` / ``OrderedChoiceToIntegerRange`` only while no parameter is on a log or logit
  scale and none is a choice (then they do nothing); the BoTorch model's own ``Normalize``
  is undone by ``gx.from_botorch``;
* outcomes: ``Derelativize`` (constraint bounds only), ``Winsorize`` while it clips no
  observation of the metric (checked), ``BilogY`` for metrics that are not
  outcome constraints (it transforms only those), and ``StandardizeY`` (``y = Ymean + Ystd
  y_t``: the kernel times ``Ystd^2``, the constant mean ``Ymean + Ystd m0``, the noise times
  ``Ystd^2``), with the BoTorch model's ``Standardize`` undone by ``gx.from_botorch``.

Everything else (log-scale and choice parameters, a clipping ``Winsorize``, ``BilogY`` of a
constraint metric, ``UnitX`` of the legacy generators, other models) is refused by name: the
posterior in Ax's units would not be a GP.
"""

from __future__ import annotations

import numpy as np

from gpexplain.kernels import RBF, as_kernel
from gpexplain.kernels.gpytorch_adapter import GPyTorchKernel, input_scaled
from gpexplain.posterior.botorch import from_botorch
from gpexplain.posterior.exact import ExactPosterior

__all__ = ["ax_adapter", "from_ax"]

# Transforms that change nothing the posterior depends on, given the checks below.
_PASSING = {"Cast", "MapKeyToFloat", "RemoveFixed", "Derelativize", "OneHot",
            "OrderedChoiceToIntegerRange", "LogIntToFloat", "Log", "Logit", "BilogY",
            "StandardizeY", "Winsorize"}


def ax_adapter(source, refit: bool = False):
    """The fitted ``TorchAdapter`` of an Ax ``Client``, ``AxClient`` or the adapter itself.

    The generation strategy's current adapter when it is a fitted ``TorchAdapter`` (the one
    that proposed the last candidate) and ``refit`` is False; otherwise Ax's default
    modular BoTorch adapter (``Generators.BOTORCH_MODULAR``) fitted to the experiment's data.

    Raises
    ------
    TypeError
        Not an Ax client or adapter.
    """
    from ax.adapter.torch import TorchAdapter

    if isinstance(source, TorchAdapter):
        return source
    experiment = getattr(source, "_experiment", None) or getattr(source, "experiment", None)
    strategy = (getattr(source, "_generation_strategy", None)
                or getattr(source, "generation_strategy", None))
    if experiment is None or strategy is None:
        raise TypeError(
            f"expected an Ax Client (ax.Client), an AxClient (ax.service.ax_client) or a "
            f"TorchAdapter, got {type(source).__name__}."
        )
    if not refit:
        try:
            adapter = strategy.adapter
        except Exception:  # noqa: BLE001 - no adapter yet (Ax raises its own error types)
            adapter = None
        if isinstance(adapter, TorchAdapter):
            return adapter
    from ax.adapter.registry import Generators

    return Generators.BOTORCH_MODULAR(experiment=experiment, data=experiment.lookup_data())


def _search_space(source):
    """The search space of a client (before any fit) or of an adapter."""
    experiment = getattr(source, "_experiment", None) or getattr(source, "experiment", None)
    if getattr(source, "_search_space", None) is not None:
        return source._search_space
    return None if experiment is None else experiment.search_space


def _check_search_space(search_space) -> None:
    from ax.core.parameter import ChoiceParameter, FixedParameter, RangeParameter

    for name, parameter in search_space.parameters.items():
        if isinstance(parameter, FixedParameter):
            continue
        if isinstance(parameter, ChoiceParameter):
            raise TypeError(
                f"parameter {name!r} is a choice parameter: Ax one-hot encodes it (or maps it "
                "to integers), and the surrogate over the choices is not a GP over one input; "
                "gx.from_ax supports range parameters (float or int, linear scale)."
            )
        if not isinstance(parameter, RangeParameter):
            raise TypeError(f"parameter {name!r} ({type(parameter).__name__}) is not supported; "
                            "gx.from_ax supports range parameters on a linear scale.")
        if parameter.log_scale or getattr(parameter, "logit_scale", False):
            raise TypeError(
                f"parameter {name!r} is on a {'log' if parameter.log_scale else 'logit'} scale: "
                "Ax models its logarithm, and the surrogate is not a stationary GP in the "
                "parameter itself; use a linear scale (or explain the log-parameter yourself)."
            )


def _check_transforms(adapter, metric: str) -> None:
    for name, transform in adapter.transforms.items():
        kind = type(transform).__name__
        if kind not in _PASSING:
            raise TypeError(
                f"Ax transform {kind} ({name}) is not supported by gx.from_ax: the surrogate "
                "in Ax's units would not be a GP (supported: "
                f"{', '.join(sorted(_PASSING))}, under the conditions in the module docs)."
            )
        if kind == "BilogY" and metric in getattr(transform, "metric_to_bound", {}):
            raise TypeError(
                f"metric {metric!r} is an outcome constraint, which Ax models after BilogY (a "
                "nonlinear transform): its surrogate in the metric's units is not a GP."
            )
        if kind == "Winsorize":
            _check_unclipped(adapter, metric, transform)
        if kind == "MapKeyToFloat" and getattr(transform, "_parameter_list", None):
            raise TypeError("map metrics (MapKeyToFloat with map keys) are not supported.")


def _check_unclipped(adapter, metric: str, transform) -> None:
    """``Winsorize`` is the identity while no observation of the metric lies beyond its
    cutoffs (Ax's default cutoffs usually leave every observation as it is)."""
    lower, upper = transform.cutoffs.get(metric, (-np.inf, np.inf))
    frame = adapter._experiment.lookup_data().df
    values = frame.loc[frame["metric_name"] == metric, "mean"].to_numpy(dtype=float)
    clipped = int(np.sum((values < lower) | (values > upper)))
    if clipped:
        raise TypeError(
            f"Ax's Winsorize transform clipped {clipped} observation(s) of {metric!r} to "
            f"[{lower:.6g}, {upper:.6g}] before fitting: the surrogate is of the clipped data, "
            "not a GP of the metric; gx.from_ax refuses it (configure the experiment without "
            "winsorization, or remove the outliers)."
        )


def _scaled(posterior: ExactPosterior, mean: float, std: float, names) -> ExactPosterior:
    """``y = mean + std y_t``: the same GP in the metric's units."""
    kernel = posterior.kernel
    if isinstance(kernel, RBF):
        kernel = RBF(kernel.lengthscale, kernel.variance * std**2)
    elif isinstance(kernel, GPyTorchKernel):
        d = posterior.n_features
        kernel = as_kernel(input_scaled(kernel.module, np.zeros(d), np.ones(d), std**2))
    else:  # pragma: no cover - from_botorch returns one of the two
        raise TypeError(f"unexpected kernel {kernel!r}")
    return ExactPosterior(
        posterior.train_inputs, mean + std * posterior.train_targets, kernel,
        posterior.noise * std**2, mean=mean + std * posterior.mean, feature_names=names,
    )


def from_ax(source, metrics=None, *, refit: bool = False) -> dict:
    """The fitted surrogate of each metric of an Ax experiment, as gpexplain posteriors.

    Parameters
    ----------
    source : ax.Client, ax.service.ax_client.AxClient or ax.adapter.torch.TorchAdapter
    metrics : sequence of str, optional
        Default: every metric the surrogate models.
    refit : bool, default False
        Fit Ax's default modular BoTorch adapter to the experiment's current data instead
        of taking the generation strategy's adapter (which was fitted when the last
        candidate was generated). Without a fitted BoTorch adapter (still in the Sobol
        phase) one is fitted either way.

    Returns
    -------
    dict of str -> ExactPosterior
        Over Ax's parameters (fixed ones left out), named as in Ax, in the metric's units:
        latent mean and variance equal Ax's own ``adapter.predict`` (to round-off).

    Raises
    ------
    TypeError
        A choice, log- or logit-scale parameter; a transform that is not affine (each
        named); not an Ax client or adapter.
    ValueError
        An unknown metric.
    """
    search_space = _search_space(source)
    if search_space is not None:  # refused before a fit where possible
        _check_search_space(search_space)
    adapter = ax_adapter(source, refit)
    _check_search_space(adapter._search_space)
    surrogate = adapter.generator.surrogate
    outcomes = list(surrogate.outcomes)
    wanted = outcomes if metrics is None else [str(m) for m in metrics]
    unknown = [m for m in wanted if m not in outcomes]
    if unknown:
        raise ValueError(f"unknown metric(s) {unknown}; the surrogate models {outcomes}.")
    names = list(adapter.parameters)
    posteriors = from_botorch(surrogate.model, feature_names=names, output_names=outcomes)
    standardize = adapter.transforms.get("StandardizeY")
    result = {}
    for metric in wanted:
        _check_transforms(adapter, metric)
        mean, std = 0.0, 1.0
        if standardize is not None:
            mean, std = float(standardize.Ymean[metric]), float(standardize.Ystd[metric])
        result[metric] = _scaled(posteriors[metric], mean, std, names)
    return result
