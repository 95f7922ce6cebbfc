"""The explanation methods POE is compared with (Tadesse et al. 2025, Sec. 6.1).

* ``smoothgrad``: the average gradient over Gaussian perturbations (Smilkov et al. 2017),
  ``w_n = 1/S sum_s grad f(x_n + delta eps_s)``, ``eps_s ~ N(0, I)``;
* ``lime_no_intercept``: the paper's LIME equation, ``argmin_w sum_s (f(x~_s) - w . x~_s)^2``
  over ``x~_s ~ N(x_n, delta^2 I)``: a function-matching explanation;
* ``lime``: LIME as Ribeiro et al.'s code runs it, a local linear fit *with an intercept*,
  ``argmin_{w, b} sum_s (f(x~_s) - b - w . (x~_s - x_n))^2``: a gradient estimate
  (``docs/errata.md``: the two differ whenever f(x_n) != grad f . x_n);
* ``agg``: AGG (Decker et al. 2024), the convex combination of base explanations that
  minimises a given mix of properties, ``min over alpha in the simplex of
  sum_i lambda_i L_i(sum_m alpha_m W_m)``, solved exactly by cvxpy.

Every function returns an ``Attribution`` (``agg`` a ``POEResult`` with its weights).
"""

from __future__ import annotations

import numpy as np

from gpexplain._optional import require
from gpexplain._validation import as_feature_matrix, check_finite_result
from gpexplain.attribution import Attribution
from gpexplain.poe._inputs import POESolverError, as_gradients, as_lambdas, as_values
from gpexplain.poe._quadratic import QuadraticProblem
from gpexplain.poe.losses import _losses, objective
from gpexplain.poe.qcqp import (
    CERTIFIED_RTOL,
    _convex_terms,
    lagrangian_problem,
    primal_value,
    solve_convex,
    solve_program,
)
from gpexplain.poe.similarity import as_similarity
from gpexplain.poe.target import as_target, evaluate
from gpexplain.poe.transductive import POEResult

__all__ = ["agg", "lime", "lime_no_intercept", "smoothgrad"]


def _check_sampling(delta, n_samples, minimum: int = 1) -> tuple[float, int]:
    delta = float(delta)
    if not np.isfinite(delta) or delta < 0:
        raise ValueError(f"delta must be a finite number >= 0, got {delta!r}.")
    if isinstance(n_samples, bool) or not isinstance(n_samples, int | np.integer) or (
        n_samples < minimum
    ):
        raise ValueError(f"n_samples must be an integer >= {minimum}, got {n_samples!r}.")
    return delta, int(n_samples)


def _attribution(W, X, f_values, names, method) -> Attribution:
    check_finite_result(method, W)
    return Attribution(W, None, X, f_values, None, None, names, method)


def smoothgrad(f, X, delta: float, n_samples: int = 50, seed=0) -> Attribution:
    """SmoothGrad: gradients averaged over Gaussian perturbations (Smilkov et al. 2017).

    Implements Tadesse et al. (2025), Sec. 6.1, eq. 14:
    ``w_n = 1/S sum_s grad f(x~_{n,s})``, ``x~_{n,s} ~ N(x_n, delta^2 I)``.

    Parameters
    ----------
    f : GP model/posterior, torch callable, or ``(f, grad_f)`` (see ``gx.poe.as_target``).
    X : array-like (n_points, n_features)
    delta : float >= 0
        Standard deviation of the perturbations, in the units of X (0 gives the gradient).
    n_samples : int >= 1
        Perturbations per point (S).
    seed : int or numpy Generator

    Returns
    -------
    Attribution
        mean (n_points, n_features), no covariance, ``prediction`` = f(X).

    Raises
    ------
    ValueError, TypeError
        Bad delta, n_samples, X or f.
    """
    delta, n_samples = _check_sampling(delta, n_samples)
    X, names = as_feature_matrix(X, "X")
    target = as_target(f)
    rng = np.random.default_rng(seed)
    n, d = X.shape
    perturbed = X[:, None, :] + delta * rng.standard_normal((n, n_samples, d))
    gradients = evaluate(target, perturbed.reshape(-1, d), "gradients").reshape(n, n_samples, d)
    return _attribution(gradients.mean(axis=1), X, evaluate(target, X, "values"), names,
                        f"SmoothGrad (delta={delta:g}, S={n_samples})")


def _lime(f, X, delta, n_samples, seed, intercept: bool) -> tuple:
    delta, n_samples = _check_sampling(delta, n_samples, minimum=2)
    X, names = as_feature_matrix(X, "X")
    if delta == 0:
        raise ValueError("delta must be > 0 for LIME (the local fit needs spread samples).")
    target = as_target(f)
    rng = np.random.default_rng(seed)
    n, d = X.shape
    perturbed = X[:, None, :] + delta * rng.standard_normal((n, n_samples, d))
    values = evaluate(target, perturbed.reshape(-1, d), "values").reshape(n, n_samples)
    W = np.empty((n, d))
    for row in range(n):
        if intercept:  # centred design: the intercept is the fit's value at x_n
            design = np.column_stack([np.ones(n_samples), perturbed[row] - X[row]])
        else:
            design = perturbed[row]
        solution, *_ = np.linalg.lstsq(design, values[row], rcond=None)
        W[row] = solution[1:] if intercept else solution
    return W, X, names, evaluate(target, X, "values")


def lime(f, X, delta: float, n_samples: int = 500, seed=0) -> Attribution:
    """LIME as its authors' code runs it: a local linear fit with an intercept.

    ``(w_n, b_n) = argmin sum_s (f(x~_s) - b - w . (x~_s - x_n))^2``,
    ``x~_s ~ N(x_n, delta^2 I)``, by ordinary least squares. Ribeiro et al.'s code
    (``lime``, 2016) also fits an intercept; it additionally weights samples by an
    exponential kernel and uses a ridge penalty, which are left out here so that locality
    comes from delta alone, as in the paper's comparison; a linear f is then recovered
    exactly. Compare ``lime_no_intercept``, the paper's equation
    (Tadesse et al. 2025, Sec. 6.1; ``docs/errata.md``).

    Parameters and errors as ``smoothgrad`` (delta > 0, n_samples >= 2); ``n_samples``
    should exceed n_features + 1.
    """
    W, X, names, values = _lime(f, X, delta, n_samples, seed, intercept=True)
    return _attribution(W, X, values, names,
                        f"LIME with intercept (delta={delta:g}, S={n_samples})")


def lime_no_intercept(f, X, delta: float, n_samples: int = 500, seed=0) -> Attribution:
    """LIME as Tadesse et al. (2025, Sec. 6.1) print it: ``argmin_w sum_s (f(x~_s) - w . x~_s)^2``.

    Without an intercept the fit matches function values through the origin (a
    function-matching explanation, cf. F_func), not the gradient: for ``f(x) = a . x + c``
    it returns ``a`` only when ``c = 0`` (``docs/errata.md``). Parameters and errors as
    ``lime``.
    """
    W, X, names, values = _lime(f, X, delta, n_samples, seed, intercept=False)
    return _attribution(W, X, values, names,
                        f"LIME without intercept (paper; delta={delta:g}, S={n_samples})")


def agg(base, X, gradients, values=None, S=None, S_tilde=None, lambdas=None) -> POEResult:
    """AGG: the best convex combination of base explanations for a mix of properties.

    Decker et al. (2024), extended to a mix of properties as in Tadesse et al. (2025),
    Sec. 6.1: ``alpha* = argmin over alpha >= 0, sum alpha = 1 of
    sum_i lambda_i L_i(sum_m alpha_m W_m)``, a convex program in alpha solved by cvxpy
    (Clarabel) on rescaled data (``docs/errata.md``).

    Parameters
    ----------
    base : sequence of Attribution or arrays (n_points, n_features)
        The base explanations W_m (at least one).
    X, gradients, values, S, S_tilde, lambdas
        As in ``gx.poe.transductive``.

    Returns
    -------
    POEResult
        ``certificate["alpha"]`` holds the weights of the combination.

    Raises
    ------
    ValueError, TypeError
        Bad inputs (as ``transductive``), or no base explanation.
    POESolverError
        The solver did not return "optimal".
    """
    cp = require("cvxpy", "poe", "agg")

    X, names = as_feature_matrix(X, "X")
    weights = as_lambdas({"F_grad": 1.0} if lambdas is None else lambdas)
    G = as_gradients(gradients, X)
    f = None if values is None else as_values(values, X.shape[0])
    if weights["F_func"] and f is None:
        raise ValueError("lambdas['F_func'] > 0 needs values (f at each explained point).")
    bases = [b.mean if isinstance(b, Attribution) else b for b in base]
    if not bases:
        raise ValueError("base must hold at least one explanation.")
    bases = [as_gradients(b, X, f"base[{m}]") for m, b in enumerate(bases)]
    points = as_similarity(S, X.shape[0], "S")
    features = as_similarity(S_tilde, X.shape[1], "S_tilde")
    problem = QuadraticProblem(X, G, f, weights, points, features)
    scale = problem.data_scale()
    alpha = cp.Variable(len(bases))
    combined = sum(alpha[m] * (bases[m] / scale) for m in range(len(bases)))
    stacked = np.stack(bases)
    program, status, multipliers = solve_convex(
        problem, combined, lambda: np.tensordot(alpha.value, stacked, axes=1) / scale, scale,
        weights["R_max"], weights["C"], starts=bases,
        extra_constraints=[alpha >= 0, cp.sum(alpha) == 1])
    alpha_value = np.clip(np.asarray(alpha.value), 0.0, None)
    alpha_value /= alpha_value.sum()
    W = sum(a * b for a, b in zip(alpha_value, bases, strict=True))
    if multipliers is not None:
        # Certify by weak duality: the Lagrangian's minimum over the simplex (an R_avg
        # problem, solved to Clarabel's certified tolerance) bounds AGG's optimum from below.
        scaled = problem.scaled(scale)
        beta = cp.Variable(len(bases))
        inner, inner_status = solve_program(
            cp.sum(_convex_terms(lagrangian_problem(scaled, multipliers),
                                 sum(beta[m] * (bases[m] / scale) for m in range(len(bases))),
                                 1.0, weights["C"] / scale)),
            [beta >= 0, cp.sum(beta) == 1])
        lower = inner.value - inner_status["tolerance"] * max(1.0, abs(inner.value))
        primal = primal_value(scaled, W / scale, weights["R_max"], weights["C"] / scale)
        status["relative_gap"] = max(primal - lower, 0.0) / max(abs(primal), 1e-300)
        if not status["relative_gap"] <= CERTIFIED_RTOL:
            raise POESolverError(
                f"AGG: cvxpy/Clarabel ({status['status']}) returned a combination whose "
                f"certified relative duality gap is {status['relative_gap']:.3g} > "
                f"{CERTIFIED_RTOL:g}.")
    check_finite_result("AGG", W)
    property_losses = _losses(W, X, G, f, points, features)
    attribution = Attribution(W, None, X, f.copy() if f is not None else np.zeros(X.shape[0]),
                              None, None, names, "AGG (convex combination of base explanations)")
    certificate = {"method": "AGG by cvxpy", "solver": "CLARABEL", **status,
                   "alpha": alpha_value.tolist()}
    return POEResult(attribution, property_losses, objective(property_losses, weights), weights,
                     certificate)
