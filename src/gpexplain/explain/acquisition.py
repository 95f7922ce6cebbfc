"""What Bayesian optimisation will do next: attributions of a BoTorch acquisition function.

An acquisition function ``alpha(x)`` (UCB, EI, log EI, PI, and their q-batch Monte Carlo
versions with fixed quasi-Monte Carlo base samples) is a deterministic function of the
posterior, explained as a function (DESIGN.md): integrated gradients along the straight path
from a baseline, by Gauss-Legendre quadrature with autograd
(``gpexplain.functionals.function_paths``), completeness ``sum_i IG_i = alpha(x) -
alpha(xt)`` measured at every point and warned with the gap when missed.

Upper confidence bounds split exactly: ``UCB(x) = m(x) + sqrt(beta) s(x)`` (``-m`` when
minimising), so their integrated gradients are the **exploitation** part, the integrated
gradients of the posterior mean (exact, closed form for squared exponentials, with their
posterior covariance: ``gx.integrated_gradients`` on ``gx.from_botorch(model)``), plus the
**exploration** part, the integrated gradients of ``alpha(x) - (+-m(x))`` (``sqrt(beta) s(x)``
for the analytic UCB; for ``qUpperConfidenceBound`` whatever its Monte Carlo estimate adds to
the mean). The parts sum to the total up to the quadrature's measured gap.

Shapley values (``method="shapley"``) are those of the baseline game ``v(S) = alpha(x_S,
xt_-S)``, exact by enumerating the ``2^d`` coalitions
(``gpexplain.functionals.function_shapley``; at most 16 features): the standard deviation in
an acquisition function is not a sum of product games, so the multilinear route of
``gx.shapley_values`` does not apply to it. For UCB-type functions the exploitation part is the
mean's exact baseline-game Shapley values with their posterior covariance
(``gx.shapley_values``, product kernels), and the exploration part the enumerated values of
``alpha - (+-m)``; both games are linear in the function, so the parts sum to the total up to
rounding.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, replace
from functools import partial

import numpy as np

from gpexplain._optional import require
from gpexplain.accuracy import COMPLETENESS_RTOL, CompletenessWarning
from gpexplain.attribution import Attribution
from gpexplain.functionals.function_paths import function_integrated_gradients
from gpexplain.functionals.function_shapley import function_shapley_values

__all__ = ["AcquisitionExplanation", "explain_acquisition"]

_METHODS = {"ig", "shapley"}


@dataclass(frozen=True)
class AcquisitionExplanation:
    """Attributions of an acquisition function, and of its parts for UCB-type functions.

    Attributes
    ----------
    total : Attribution
        Integrated gradients or Shapley values of the acquisition value (deterministic:
        zero covariance).
    exploitation : Attribution or None
        UCB-type only: the same attributions of the (signed) posterior mean, with their
        posterior covariance.
    exploration : Attribution or None
        UCB-type only: the same attributions of the acquisition value minus the signed mean
        (deterministic).
    """

    total: Attribution
    exploitation: Attribution | None = None
    exploration: Attribution | None = None

    def split_gap(self) -> float:
        """Largest ``|exploitation + exploration - total|`` over points and features (0.0
        without a split)."""
        if self.exploitation is None:
            return 0.0
        parts = self.exploitation.mean + self.exploration.mean
        return float(np.max(np.abs(parts - self.total.mean)))


def _ucb_sign(acquisition_function) -> float | None:
    """+1 / -1 for the mean's sign in a UCB-type function, None for others (or when a
    posterior transform or objective makes the mean something else)."""
    acquisition = require("botorch.acquisition", "botorch", "explain_acquisition")
    if getattr(acquisition_function, "posterior_transform", None) is not None:
        return None
    if isinstance(acquisition_function, acquisition.UpperConfidenceBound):
        return 1.0 if acquisition_function.maximize else -1.0
    if isinstance(acquisition_function, acquisition.qUpperConfidenceBound):
        from botorch.acquisition.objective import IdentityMCObjective

        identity = isinstance(acquisition_function.objective, IdentityMCObjective)
        return 1.0 if identity else None
    return None


def _torch_functions(acquisition_function):
    """``x (n, d) -> alpha(x)`` and ``x -> m(x)`` as torch functions (one point per t-batch)."""
    import gpytorch

    model = acquisition_function.model

    def acquisition(x):
        with gpytorch.settings.max_cholesky_size(10**9):
            return acquisition_function(x.unsqueeze(-2)).reshape(-1)

    def mean(x):
        with gpytorch.settings.max_cholesky_size(10**9):
            return model.posterior(x.unsqueeze(-2)).mean.reshape(-1)

    return acquisition, mean


def explain_acquisition(
    acquisition_function,
    X,
    *,
    baseline=None,
    method: str = "ig",
    n_steps: int = 64,
    feature_names=None,
    split: bool = True,
    max_panels: int = 256,
) -> AcquisitionExplanation:
    """Integrated gradients or exact Shapley values of a BoTorch acquisition function (and the
    UCB split).

    Parameters
    ----------
    acquisition_function : botorch.acquisition.AcquisitionFunction
        Evaluated on t-batches of one point (q = 1): ``UpperConfidenceBound``,
        ``ExpectedImprovement``, ``LogExpectedImprovement``, ``ProbabilityOfImprovement``,
        ``qExpectedImprovement``, ``qUpperConfidenceBound``, ... For Monte Carlo functions
        pass a sampler with a ``seed`` (fixed base samples), or the function is random.
    X : array-like (n_points, n_features)
        Candidates, in the model's (untransformed) input units.
    baseline : "mean" or array-like (n_features,), optional
        Start of the path (default "mean": the training inputs' mean, which needs the model
        to be accepted by ``gx.from_botorch``; pass a point otherwise).
    method : {"ig", "shapley"}
        Integrated gradients along the straight path from the baseline, or the exact Shapley
        values of the baseline game ``v(S) = alpha(x_S, baseline_-S)`` by enumerating the
        ``2^d`` coalitions (at most 16 features; ``2^d`` acquisition evaluations per point).
    n_steps : int, default 64
        ``method="ig"``: starting Gauss-Legendre nodes (doubled, up to 16 times, where
        completeness misses by more than 1e-8 of the acquisition's scale).
    feature_names : sequence of str, optional
    split : bool, default True
        For UCB-type functions, also the exploitation and exploration parts (with
        ``method="shapley"`` the exploitation part needs a product kernel, as
        ``gx.shapley_values`` does).
    max_panels : int, default 256
        Where the first rule misses completeness, at most this many adaptively bisected
        16-node panels per point (``gpexplain.functionals.function_paths``).

    Returns
    -------
    AcquisitionExplanation

    Raises
    ------
    ValueError
        Unknown method; bad X or baseline; baseline "mean" for a model ``gx.from_botorch``
        refuses; ``method="shapley"`` with more than 16 features.
    ImportError
        BoTorch not installed.

    Warns
    -----
    CompletenessWarning
        With the measured gap, when the quadrature misses completeness.
    """
    if method not in _METHODS:
        raise ValueError(f"method must be one of {sorted(_METHODS)} for explain_acquisition, "
                         f"got {method!r}.")
    X = np.atleast_2d(np.asarray(X, dtype=np.float64))
    if not np.all(np.isfinite(X)):
        raise ValueError("X must be finite.")
    n_features = X.shape[1]
    names = ([f"x{i}" for i in range(n_features)] if feature_names is None
             else [str(name) for name in feature_names])
    if len(names) != n_features:
        raise ValueError(f"feature_names must have {n_features} names, got {len(names)}.")
    sign = _ucb_sign(acquisition_function) if split else None
    posterior = _adapted(acquisition_function, names, needed=sign is not None
                         or baseline is None or isinstance(baseline, str))
    point = _baseline(baseline, posterior, n_features)
    acquisition, mean = _torch_functions(acquisition_function)
    like = next(acquisition_function.model.parameters())
    label = type(acquisition_function).__name__
    if method == "ig":
        rule = {"n_steps": n_steps, "like": like, "max_panels": max_panels}
        compute = partial(function_integrated_gradients, **rule)
        how = f"integrated gradients (Gauss-Legendre quadrature, from n_steps={n_steps})"
    else:
        compute = partial(function_shapley_values, like=like)
        how = "exact Shapley values of the baseline game (all 2^d coalitions)"
    total = _attribution(compute, acquisition, X, point, names,
                         f"acquisition function {label}: {how}")
    if sign is None:
        return AcquisitionExplanation(total)
    exploitation = _exploitation(method, posterior, X, point)
    exploitation = replace(
        exploitation, mean=sign * exploitation.mean, prediction=sign * exploitation.prediction,
        baseline_prediction=sign * exploitation.baseline_prediction,
        method=f"exploitation ({'+' if sign > 0 else '-'}posterior mean) of {label}: "
               f"{exploitation.method}",
    )

    def exploration_function(x):
        return acquisition(x) - sign * mean(x)

    exploration = _attribution(compute, exploration_function, X, point, names,
                               f"exploration (acquisition minus the mean) of {label}: {how}")
    return AcquisitionExplanation(total, exploitation, exploration)


def _exploitation(method: str, posterior, X, point) -> Attribution:
    """The (unsigned) posterior mean's explanation, exact with its posterior covariance."""
    if method == "ig":
        from gpexplain.explain.integrated_gradients import integrated_gradients

        return integrated_gradients(posterior, X, baseline=point)
    from gpexplain.explain.shapley import shapley_values

    try:
        return shapley_values(posterior, X, game="baseline", baseline=point)
    except (TypeError, ValueError) as error:
        raise ValueError(
            f"the exploitation part's exact Shapley values need a product kernel ({error}); "
            "pass split=False for the acquisition's Shapley values alone, or use method='ig'."
        ) from None


def _adapted(acquisition_function, names, needed: bool):
    """``gx.from_botorch`` of the acquisition function's model (None when not needed)."""
    if not needed:
        return None
    from gpexplain.posterior.botorch import from_botorch

    try:
        return from_botorch(acquisition_function.model, feature_names=names)
    except (TypeError, ValueError) as error:
        raise ValueError(
            f"the exploitation part and baseline='mean' need the model in gx.from_botorch "
            f"({error}); pass baseline= as a point and split=False."
        ) from None


def _baseline(baseline, posterior, n_features):
    if baseline is None or isinstance(baseline, str):
        from gpexplain._baselines import resolve_baseline

        return resolve_baseline(baseline or "mean", posterior.data_inputs,
                                posterior.feature_names)
    point = np.asarray(baseline, dtype=np.float64).reshape(-1)
    if point.shape != (n_features,) or not np.all(np.isfinite(point)):
        raise ValueError(f"baseline must be {n_features} finite values, got {baseline!r}.")
    return point


def _attribution(compute, function, X, point, names, method) -> Attribution:
    values, prediction, base_value, gap = compute(function, X, point)
    scale = max(float(np.max(np.abs(prediction), initial=0.0)), abs(base_value), 1e-300)
    if np.max(gap) > COMPLETENESS_RTOL * scale:
        warnings.warn(
            f"explain_acquisition ({method}) misses completeness: the attributions' sum "
            f"differs from alpha(x) - alpha(baseline) by up to {np.max(gap):.3g} "
            f"({np.max(gap) / scale:.2g} of the largest value); along an integrated-gradient "
            "path the acquisition function is not smooth (a kink or a jump, e.g. at an "
            "observed point for cached Monte Carlo functions), or it is random (give its "
            "sampler a seed).",
            CompletenessWarning, stacklevel=3,
        )
    n_points, n_features = values.shape
    return Attribution(
        mean=values, cov=np.zeros((n_points, n_features, n_features)), X=X,
        prediction=prediction, baseline=point, baseline_prediction=base_value,
        feature_names=names, method=method,
    )
