"""Robustness as maximum difference (R-max), with any other properties, by cvxpy.

Tadesse et al. (2025), Sec. 5, eq. 12: ``R_max = sum_n max_n' |w_n - w_n'|^2`` is minimised
through the epigraph program

    minimise  Q(W) + lRmax sum_n Delta_n + lC |W|_1
    s.t.      |w_n - w_n'|^2 <= Delta_n   for every pair n != n'

(a convex QCQP; ``Q`` the quadratic properties, written with square roots of the two
Laplacians so that cvxpy sees sums of squares). Each unordered pair is one second-order cone
shared by both epigraph variables. Gradients and values are first divided by ``max |G|``
(``docs/errata.md``: interior-point solvers otherwise stop at "optimal_inaccurate"); the
minimiser scales back exactly. Any status but "optimal" raises, and the solver's optimal value
is checked against the objective re-evaluated from the returned explanations.
"""

from __future__ import annotations

import numpy as np

from gpexplain.poe._inputs import POESolverError
from gpexplain.poe._quadratic import QuadraticProblem
from gpexplain.poe.similarity import Similarity

__all__ = ["convex_objective", "solve_program", "solve_qcqp"]

# Clarabel's interior-point tolerances: gap and feasibility to 1e-10 on the rescaled problem.
_CLARABEL = {"tol_gap_abs": 1e-10, "tol_gap_rel": 1e-10, "tol_feas": 1e-10,
             "tol_ktratio": 1e-8, "max_iter": 500}
# The solver's value and the objective recomputed from its W must agree to this (relative).
_VALUE_RTOL = 1e-6


def _laplacian_root(similarity: Similarity, n: int, name: str) -> np.ndarray:
    """F with ``Lap = F F^T``; ValueError if the Laplacian is indefinite (non-convex loss)."""
    values, vectors = np.linalg.eigh(similarity.laplacian(n))
    if values[0] < -1e-10 * max(abs(values[-1]), 1.0):
        raise ValueError(
            f"the Laplacian of {name} has a negative eigenvalue ({values[0]:.3g}): the loss is "
            "not convex, and R_max or C cannot be optimised with it. Use a non-negative "
            "similarity."
        )
    return vectors * np.sqrt(np.maximum(values, 0.0))


def convex_objective(problem: QuadraticProblem, W, scale: float, r_max: float, l1: float):
    """cvxpy objective and constraints of the POE program in the explanations ``W``.

    ``W`` is an (n, d) cvxpy expression (a variable, or AGG's combination of base
    explanations); the data are divided by ``scale`` (the objective is then ``1/scale^2`` of
    the original one).
    """
    import cvxpy as cp

    n, d = problem.X.shape
    weights = problem.weights
    terms = []
    if weights["F_grad"]:
        terms.append(weights["F_grad"] * cp.sum_squares(W - problem.G / scale))
    if weights["F_func"]:
        terms.append(weights["F_func"] * cp.sum_squares(
            cp.sum(cp.multiply(W, problem.X), axis=1) - problem.f / scale))
    if weights["R_avg"]:
        if problem.points.is_uniform:
            centred = W - np.ones((n, 1)) @ cp.reshape(cp.sum(W, axis=0) / n, (1, d), order="C")
            terms.append(2 * weights["R_avg"] * problem.points.value * n * cp.sum_squares(centred))
        else:
            root = _laplacian_root(problem.points, n, "S")
            terms.append(2 * weights["R_avg"] * cp.sum_squares(root.T @ W))
    if weights["S"]:
        root = _laplacian_root(problem.features, d, "S_tilde")
        terms.append(2 * weights["S"] * cp.sum_squares(W @ root))
    constraints = []
    if r_max and n > 1:
        delta = cp.Variable(n)
        first, second = np.triu_indices(n, k=1)
        pair = cp.sum(cp.square(W[first, :] - W[second, :]), axis=1)
        constraints += [pair <= delta[first], pair <= delta[second]]
        terms.append(r_max * cp.sum(delta))
    if l1:
        terms.append((l1 / scale) * cp.norm1(W))
    return cp.sum(terms), constraints


def solve_program(objective, constraints) -> tuple[object, int]:
    """Solve with Clarabel at tight tolerances; POESolverError unless status is optimal."""
    import cvxpy as cp

    program = cp.Problem(cp.Minimize(objective), constraints)
    try:
        program.solve(solver=cp.CLARABEL, **_CLARABEL)
    except cp.error.SolverError as error:
        raise POESolverError(f"cvxpy/Clarabel failed: {error}") from error
    if program.status != cp.OPTIMAL:
        raise POESolverError(
            f"cvxpy/Clarabel ended with status {program.status!r}, not 'optimal'; the "
            "explanations would be inaccurate."
        )
    return program, program.solver_stats.num_iters


def solve_qcqp(problem: QuadraticProblem, r_max: float, l1: float) -> tuple[np.ndarray, dict]:
    """Minimise ``Q(W) + r_max R_max(W) + l1 |W|_1`` with cvxpy (Clarabel).

    Returns
    -------
    W : ndarray (n_points, n_features)
    certificate : dict
        ``solver``, ``status``, ``solver_value`` (objective in original units; the caller
        compares it with the objective recomputed from W), ``iterations``, ``scale``.

    Raises
    ------
    POESolverError
        Status other than "optimal".
    ValueError
        An indefinite similarity Laplacian.
    """
    import cvxpy as cp

    scale = problem.data_scale()
    W = cp.Variable(problem.X.shape)
    program, iterations = solve_program(*convex_objective(problem, W, scale, r_max, l1))
    return scale * np.asarray(W.value), {
        "method": "cvxpy epigraph QCQP",
        "solver": "CLARABEL",
        "status": program.status,
        "iterations": iterations,
        "solver_value": float(program.value) * scale**2,
        "scale": scale,
        "tolerances": dict(_CLARABEL),
    }
