"""Hyperparameter fitting shared by the estimators: bounds, parameter checks, the L-BFGS loop.

Every estimator that maximises a marginal likelihood does it the same way: torch's L-BFGS
with a strong Wolfe line search in float64, GPyTorch with Cholesky forced at every size, and
the jitter warnings of line searches far from the optimum silenced. The numbers below are in
standardised units (the estimators standardise X and y before fitting).
"""

from __future__ import annotations

import copy
import warnings

import gpytorch
import numpy as np
import torch
from linear_operator.utils.warnings import NumericalWarning

from gpexplain._torch import as_tensor

__all__ = [
    "log_uniform",
    "CONVERGENCE_WINDOW",
    "DEFAULT_NOISE",
    "LENGTHSCALE_LOWER_BOUND",
    "NOISE_LOWER_BOUND",
    "OPTIMIZERS",
    "ExactGPModel",
    "gaussian_likelihood",
    "maximise_exact_marginal_likelihood",
    "minimise_keeping_best",
    "run_lbfgs",
]

OPTIMIZERS = ("lbfgs", None)
NOISE_LOWER_BOUND = 1e-6  # below scikit-learn's WhiteKernel bound 1e-5
DEFAULT_NOISE = 0.1  # the first start's noise variance when none is given
# Lengthscales below 1e-4 standard deviations only fit noise and make duplicated rows
# numerically singular; bounding them keeps L-BFGS out of that degenerate corner.
LENGTHSCALE_LOWER_BOUND = 1e-4
# Evaluations over which a tolerance on the loss's improvement is judged
# (minimise_keeping_best): L-BFGS has stretches of small steps before larger ones, so one
# evaluation's change is not a stop criterion.
CONVERGENCE_WINDOW = 10


class FitError(RuntimeError):
    """Hyperparameter optimisation failed (from every starting point, for multi-start fits)."""


def log_uniform(rng, low: float, high: float, size=None):
    """Draws log-uniform in [low, high]: the random restarts' starting points."""
    return np.exp(rng.uniform(np.log(low), np.log(high), size=size))


def gaussian_likelihood() -> gpytorch.likelihoods.GaussianLikelihood:
    """GPyTorch Gaussian likelihood in float64 with the noise bounded below."""
    return gpytorch.likelihoods.GaussianLikelihood(
        noise_constraint=gpytorch.constraints.GreaterThan(NOISE_LOWER_BOUND)
    ).double()


def run_lbfgs(parameters, loss, max_iter: int, on_evaluation=None) -> None:
    """Minimise ``loss()`` over ``parameters`` (torch tensors) in place with L-BFGS.

    Strong Wolfe line search, at most ``max_iter`` iterations; GPyTorch computations are
    exact (Cholesky at every size, no fast approximations). ``on_evaluation(loss_value)`` is
    called after every evaluation (the parameters then hold the evaluated point).

    Raises
    ------
    RuntimeError, ValueError
        Whatever an evaluation raises, e.g. ``NotPSDError`` in a line search; the caller
        decides whether a start that failed is kept or discarded.
    """
    optimizer = torch.optim.LBFGS(
        parameters,
        lr=1.0,
        max_iter=max_iter,
        line_search_fn="strong_wolfe",
        tolerance_grad=1e-5,
        tolerance_change=1e-9,
        history_size=20,
    )

    def closure():
        optimizer.zero_grad()
        value = loss()
        value.backward()
        if on_evaluation is not None:
            on_evaluation(value)
        return value

    with (
        gpytorch.settings.max_cholesky_size(10**9),
        gpytorch.settings.fast_computations(False, False, False),
        warnings.catch_warnings(),
    ):
        # Jitter added during line searches far from the optimum is expected, not news.
        warnings.simplefilter("ignore", category=NumericalWarning)
        optimizer.step(closure)


class ExactGPModel(gpytorch.models.ExactGP):
    """GPyTorch exact GP with the given mean and covariance modules."""

    def __init__(self, X, y, likelihood, mean_module, covar_module):
        super().__init__(X, y, likelihood)
        self.mean_module = mean_module
        self.covar_module = covar_module

    def forward(self, x):
        return gpytorch.distributions.MultivariateNormal(
            self.mean_module(x), self.covar_module(x)
        )


def maximise_exact_marginal_likelihood(
    Xs, ys, mean_module, covar_module, noise, max_iter, callback, start_index, n_starts
):
    """Maximise the exact log marginal likelihood from one starting point with GPyTorch.

    ``mean_module`` and ``covar_module`` (standardised units, set to the start) are trained
    in place together with a Gaussian likelihood starting at ``noise``. ``callback(step,
    total)`` reports progress over ``n_starts * max_iter`` steps, this being start
    ``start_index``.

    Returns
    -------
    (model, likelihood, stopped_early), or None when the optimiser failed before any
    evaluation. ``stopped_early``: the optimiser raised (e.g. a matrix not positive definite
    in a line search) and the model holds the best point it had evaluated.
    """
    X_t, y_t = as_tensor(Xs), as_tensor(ys)
    likelihood = gaussian_likelihood()
    model = ExactGPModel(X_t, y_t, likelihood, mean_module, covar_module).double()
    likelihood.noise = torch.tensor(float(noise))
    model.train()
    likelihood.train()
    objective = gpytorch.mlls.ExactMarginalLogLikelihood(likelihood, model)
    stopped_early = minimise_keeping_best(
        model, lambda: -objective(model(X_t), y_t), max_iter, callback, start_index, n_starts
    )
    if stopped_early is None:
        return None
    return model, likelihood, stopped_early


class _Converged(Exception):
    """The loss stopped improving by the caller's tolerance (not an error: not a
    ``RuntimeError``, so ``minimise_keeping_best`` tells it from a failed evaluation)."""


def minimise_keeping_best(module, loss, max_iter, callback, start_index, n_starts,
                          tolerance=None, window=CONVERGENCE_WINDOW):
    """``run_lbfgs`` over ``module``'s trainable parameters, keeping the best point on failure.

    ``callback(step, total)`` reports progress over ``n_starts * max_iter`` steps, this being
    start ``start_index``. With ``tolerance`` (in units of the loss), the optimiser also stops
    once the best loss found has improved by less than ``tolerance`` over the last ``window``
    evaluations, and ``module`` holds the best point evaluated (a deterministic rule: the
    same losses give the same stop).

    Returns
    -------
    stopped_early : bool, or None when the optimiser failed before any evaluation.
        True: the optimiser raised (e.g. a matrix not positive definite in a line search)
        and ``module`` holds the best point it had evaluated. A stop by ``tolerance`` is not
        early: False.
    """
    evaluations = [0]
    best = {"loss": np.inf}
    history = []  # the best loss after each evaluation

    def on_evaluation(value):
        evaluations[0] += 1
        if float(value.detach()) < best["loss"]:  # the point the loss was evaluated at
            best["loss"] = float(value.detach())
            best["state"] = copy.deepcopy(module.state_dict())
        history.append(best["loss"])
        if callback is not None:
            step = start_index * max_iter + min(evaluations[0], max_iter)
            callback(step, n_starts * max_iter)
        if (tolerance is not None and len(history) > window
                and history[-1 - window] - history[-1] < tolerance):
            raise _Converged

    parameters = [parameter for parameter in module.parameters() if parameter.requires_grad]
    try:
        run_lbfgs(parameters, loss, max_iter, on_evaluation)
    except _Converged:
        module.load_state_dict(best["state"])
        if callback is not None:  # the start is done: its share of the progress is complete
            callback((start_index + 1) * max_iter, n_starts * max_iter)
    except (RuntimeError, ValueError):  # e.g. NotPSDError in a line search
        if "state" not in best:
            return None
        module.load_state_dict(best["state"])
        return True
    return False


def best_of_starts(starts, optimise, log_marginal_likelihood, failure_hint: str):
    """The one restart loop of the multi-start estimators: optimise from every start, keep the
    best log marginal likelihood.

    Policy (the same for every estimator): a start whose optimiser raised part-way (e.g. a
    kernel matrix that is not positive definite in a line search, typical of nearly noise-free
    data) keeps the best point it had evaluated and is marked ``stopped_early``; a start that
    failed before any evaluation, ended at non-finite values, or whose point is not positive
    definite when re-evaluated is discarded.

    Parameters
    ----------
    starts : list
        Starting points, in the estimator's own parameterisation.
    optimise : callable(index, start) -> (hyper, stopped_early) or None
    log_marginal_likelihood : callable(hyper) -> float
        Raises ValueError when the point is not positive definite.
    failure_hint : str
        What to try when every start failed (appended to the ``FitError`` message).

    Returns
    -------
    best_lml : float
    best_hyper : the ``hyper`` of the best start
    restarts : list of dict
        Per start: ``start`` (index), ``log_marginal_likelihood`` (None when discarded) and
        ``stopped_early`` (None when the optimiser produced nothing).

    Raises
    ------
    FitError
        Every start was discarded.
    """
    results, restarts = [], []
    for index, start in enumerate(starts):
        outcome = optimise(index, start)
        lml = None
        if outcome is not None:
            try:
                lml = log_marginal_likelihood(outcome[0])
            except ValueError:  # not positive definite at these hyperparameters
                pass
        restarts.append({
            "start": index,
            "log_marginal_likelihood": lml,
            "stopped_early": None if outcome is None else outcome[1],
        })
        if lml is not None:
            results.append((lml, outcome[0]))
    if not results:
        raise FitError(
            f"hyperparameter optimisation failed from every starting point; {failure_hint}"
        )
    best_lml, best_hyper = max(results, key=lambda item: item[0])
    return best_lml, best_hyper, restarts
