"""Transductive POE: the explanations of a fixed set of points optimal for a mix of properties.

Tadesse, Hüyük, Yacoby, Pan and Doshi-Velez, *Transparent trade-offs between properties of
explanations* (2025), Sec. 5: given the points X to explain, their gradients and values,

    W* = argmin_W  sum_i lambda_i L_i(W)

over the six properties of Table 2 (``gpexplain.poe.losses``). Which solver runs depends on
the weights:

* only F_grad, F_func, R_avg, S: the normal equations, solved exactly through the
  eigendecompositions of the two Laplacians (O(N D) for a uniform similarity), by
  preconditioned conjugate gradients when F_func couples the features
  (``gpexplain.poe._quadratic``); certified by the residual;
* with C (L1) but not R_max: accelerated proximal gradient, certified by a duality gap
  (``gpexplain.poe.proximal``);
* with R_max: the epigraph program of eq. 12 in cvxpy, as a second-order cone program
  (``gpexplain.poe.qcqp``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpexplain._validation import as_feature_matrix, check_finite_result
from gpexplain.attribution import Attribution
from gpexplain.poe._inputs import POESolverError, as_gradients, as_lambdas, as_values
from gpexplain.poe._quadratic import QuadraticProblem
from gpexplain.poe.losses import _losses, objective
from gpexplain.poe.proximal import solve_l1
from gpexplain.poe.qcqp import solve_qcqp
from gpexplain.poe.similarity import as_similarity

__all__ = ["POEResult", "transductive"]

DEFAULT_LAMBDAS = {"F_grad": 1.0, "F_func": 0.0, "R_avg": 0.0, "R_max": 0.0, "S": 0.0, "C": 0.0}


@dataclass(frozen=True)
class POEResult:
    """Explanations optimised for a mix of properties, with their properties reported.

    Attributes
    ----------
    attribution : Attribution
        ``mean`` = the explanations W (n_points, n_features); ``cov`` None (transductive) or
        the GP posterior covariance (inductive).
    losses : dict
        The six property losses of W (``gpexplain.poe.losses``).
    objective : float
        ``sum_i lambda_i L_i(W)``.
    lambdas : dict
        The property weights used.
    certificate : dict
        How the solution was obtained and how accurate it is (solver, status, residual or
        duality gap, bounds).
    """

    attribution: Attribution
    losses: dict
    objective: float
    lambdas: dict
    certificate: dict

    @property
    def explanations(self) -> np.ndarray:
        """W, (n_points, n_features)."""
        return self.attribution.mean


def transductive(
    X,
    gradients,
    values=None,
    S=None,
    S_tilde=None,
    lambdas=None,
    *,
    feature_names=None,
    tol: float = 1e-10,
    max_iter: int = 200_000,
) -> POEResult:
    """Property-optimised explanations of the points X (Tadesse et al. 2025, Sec. 5).

    Parameters
    ----------
    X : array-like (n_points, n_features)
        Points to explain (NumPy, pandas or torch).
    gradients : array-like (n_points, n_features)
        ``grad f(x_n)``, e.g. from ``gx.poe.gradients_and_values(model, X)``.
    values : array-like (n_points,), optional
        ``f(x_n)``; required when ``lambdas["F_func"] > 0``.
    S : None, "uniform", Similarity or array (n_points, n_points)
        Similarity between points for R_avg (default uniform 1). Build one with
        ``gx.poe.similarity.gaussian``, ``knn``, ``uniform`` or ``negative_precision``.
    S_tilde : None, "uniform", Similarity or array (n_features, n_features)
        Similarity between features for S (default uniform 1).
    lambdas : mapping, default ``{"F_grad": 1}``
        Weights >= 0 of ``"F_grad", "F_func", "R_avg", "R_max", "S", "C"`` (missing = 0).
    feature_names : list of str, optional
    tol : float, default 1e-10
        Relative accuracy: residual of the normal equations (quadratic case, tightened to
        1e-12) or relative duality gap (L1; with R_max the gap accepted is ``max(tol, 1e-7)``,
        the interior-point solver's reach).
    max_iter : int
        Iteration limit of the iterative solvers.

    Returns
    -------
    POEResult
        ``attribution`` (mean W, no covariance; ``prediction`` = values, zeros without
        them), ``losses``, ``objective``, ``certificate``.

    Raises
    ------
    ValueError, TypeError
        Bad lambdas (unknown name, negative), shapes, similarities, F_func without values,
        or an objective without a unique minimiser (e.g. no faithfulness weight).
    POESolverError
        A solver did not certify its accuracy (status, gap or residual in the message).
    """
    X, names = as_feature_matrix(X, "X", feature_names)
    weights = as_lambdas(DEFAULT_LAMBDAS if lambdas is None else lambdas)
    G = as_gradients(gradients, X)
    f = None if values is None else as_values(values, X.shape[0])
    if weights["F_func"] and f is None:
        raise ValueError("lambdas['F_func'] > 0 needs values (f at each explained point).")
    if not (isinstance(tol, int | float) and np.isfinite(tol) and 0 < tol < 1):
        raise ValueError(f"tol must lie in (0, 1), got {tol!r}.")
    if isinstance(max_iter, bool) or not isinstance(max_iter, int | np.integer) or max_iter < 1:
        raise ValueError(f"max_iter must be an integer >= 1, got {max_iter!r}.")
    points = as_similarity(S, X.shape[0], "S")
    features = as_similarity(S_tilde, X.shape[1], "S_tilde")
    problem = QuadraticProblem(X, G, f, weights, points, features)

    if weights["R_max"]:
        W, certificate = solve_qcqp(problem, weights["R_max"], weights["C"], tol)
    elif weights["C"]:
        W, certificate = solve_l1(problem, weights["C"], tol=tol, max_iter=max_iter)
    else:
        W, certificate = problem.solve(rtol=min(tol, 1e-12), maxiter=max_iter)
    check_finite_result("transductive POE", W)
    property_losses = _losses(W, X, G, f, points, features)
    total = objective(property_losses, weights)
    if "solver_value" in certificate:
        mismatch = abs(total - certificate["solver_value"]) / max(abs(total), np.finfo(float).tiny)
        certificate["recomputed_value"] = total
        if mismatch > max(1e-6, tol):
            raise POESolverError(
                f"the solver reported objective {certificate['solver_value']:.10g} but its "
                f"explanations give {total:.10g} (relative mismatch {mismatch:.2g})."
            )
    certificate["similarity"] = {"S": points.description, "S_tilde": features.description}
    if points.condition_number is not None:
        certificate["similarity"]["S_condition_number"] = points.condition_number
    attribution = Attribution(
        mean=W,
        cov=None,
        X=X,
        prediction=f.copy() if f is not None else np.zeros(X.shape[0]),
        baseline=None,
        baseline_prediction=None,
        feature_names=names,
        method=f"POE transductive ({certificate['method']})",
    )
    return POEResult(attribution, property_losses, total, weights, certificate)
