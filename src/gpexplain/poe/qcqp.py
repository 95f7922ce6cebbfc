"""Robustness as maximum difference (R-max), with any other properties, by cvxpy.

Tadesse et al. (2025), Sec. 5, eq. 12: ``R_max = sum_n max_n' |w_n - w_n'|^2`` is minimised
through the epigraph program

    minimise  Q(W) + lRmax sum_n Delta_n + lC |W|_1
    s.t.      |w_n - w_n'|^2 <= Delta_n   for every pair n != n'

(a convex QCQP; ``Q`` the quadratic properties, written with square roots of the two
Laplacians so that cvxpy sees sums of squares). The N (N - 1) epigraph constraints are
generated lazily (only the pairs that bind), which is exact (see ``solve_convex``).
Gradients and values are first divided by ``max |G|`` (``docs/errata.md``: interior-point
solvers otherwise stop at "optimal_inaccurate"); the minimiser scales back exactly. Any
status but "optimal" raises, and the solver's optimal value is checked against the objective
re-evaluated from the returned explanations.
"""

from __future__ import annotations

import warnings

import numpy as np

from gpexplain.poe._inputs import POESolverError
from gpexplain.poe._quadratic import QuadraticProblem
from gpexplain.poe.similarity import Similarity

__all__ = ["solve_convex", "solve_program", "solve_qcqp"]

# Clarabel's interior-point tolerances (gap and feasibility) on the rescaled problem, tightest
# first: a program that stops short of one ("optimal_inaccurate") is re-solved at the next;
# the tolerance reached is reported, and a failure at 1e-8 (cvxpy's default) is an error.
_TOLERANCES = (1e-10, 1e-9, 1e-8)
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


def _convex_terms(problem: QuadraticProblem, W, scale: float, l1: float) -> list:
    """cvxpy terms of every property but R_max, in the explanations ``W``.

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
    if l1:
        terms.append((l1 / scale) * cp.norm1(W))
    return terms


def _farthest_pairs(W: np.ndarray, count: int) -> set:
    """(n, n') for the ``count`` points n' farthest from each n in W."""
    from scipy.spatial.distance import cdist

    distances = cdist(W, W, "sqeuclidean")
    farthest = np.argsort(-distances, axis=1)[:, :count]
    return {(a, int(b)) for a, row in enumerate(farthest) for b in row if a != b}


def solve_convex(problem: QuadraticProblem, W, value_of, scale: float, r_max: float, l1: float,
                 starts: list, extra_constraints=()) -> tuple[object, dict]:
    """Minimise the POE objective in the expression W (data divided by ``scale``).

    R_max's epigraph ``|w_n - w_n'|^2 <= Delta_n`` is generated lazily: starting from each
    point's two farthest partners in the ``starts`` explanations, every round adds, for each
    point, its farthest partner at the current solution if that pair violates its epigraph
    constraint, until none does. The last program is then a relaxation of the full one whose
    solution is feasible for it, hence optimal for it; and it avoids the N^2 nearly
    redundant cones that make interior-point solvers stop at "optimal_inaccurate".
    """
    import cvxpy as cp
    from scipy.spatial.distance import cdist

    terms = _convex_terms(problem, W, scale, l1)
    n = problem.X.shape[0]
    if not r_max or n < 2:
        program, status = solve_program(cp.sum(terms), list(extra_constraints))
        return program, {**status, "rounds": 1, "pairs": 0}
    pairs = set()
    for start in starts:
        pairs |= _farthest_pairs(start / scale, 2)
    delta = cp.Variable(n)
    for rounds in range(1, 101):  # each round adds >= 1 pair; in practice a few rounds
        first, second = (np.array(index) for index in zip(*sorted(pairs), strict=True))
        epigraph = cp.sum(cp.square(W[first, :] - W[second, :]), axis=1) <= delta[first]
        program, status = solve_program(cp.sum([*terms, r_max * cp.sum(delta)]),
                                        [epigraph, *extra_constraints])
        current = cdist(value_of(), value_of(), "sqeuclidean")
        partner = np.argmax(current, axis=1)
        largest = current[np.arange(n), partner]
        violated = largest > np.asarray(delta.value) + status["tolerance"] * max(
            1.0, float(largest.max()))
        new = {(a, int(partner[a])) for a in np.flatnonzero(violated)} - pairs
        if not new:
            return program, {**status, "rounds": rounds, "pairs": len(pairs)}
        pairs |= new
    raise POESolverError("R_max constraint generation did not settle in 100 rounds.")


def solve_program(objective, constraints) -> tuple[object, dict]:
    """Solve with Clarabel at the tightest tolerance it certifies; POESolverError otherwise.

    Returns the solved program and ``{"status", "tolerance", "iterations"}``.
    """
    import cvxpy as cp

    program = cp.Problem(cp.Minimize(objective), constraints)
    statuses = []
    for tolerance in _TOLERANCES:
        try:
            with warnings.catch_warnings():
                # cvxpy warns on "optimal_inaccurate"; the status is acted on below.
                warnings.filterwarnings("ignore", message="Solution may be inaccurate")
                program.solve(solver=cp.CLARABEL, tol_gap_abs=tolerance, tol_gap_rel=tolerance,
                              tol_feas=tolerance, max_iter=500)
        except cp.error.SolverError as error:
            raise POESolverError(f"cvxpy/Clarabel failed: {error}") from error
        statuses.append(program.status)
        if program.status == cp.OPTIMAL:
            return program, {"status": program.status, "tolerance": tolerance,
                             "iterations": program.solver_stats.num_iters}
    raise POESolverError(
        f"cvxpy/Clarabel ended with statuses {statuses} at tolerances {list(_TOLERANCES)}, "
        "never 'optimal'; the explanations would be inaccurate."
    )


def solve_qcqp(problem: QuadraticProblem, r_max: float, l1: float) -> tuple[np.ndarray, dict]:
    """Minimise ``Q(W) + r_max R_max(W) + l1 |W|_1`` with cvxpy (Clarabel).

    Returns
    -------
    W : ndarray (n_points, n_features)
    certificate : dict
        ``solver``, ``status``, ``tolerance`` (the relative gap and feasibility tolerance
        Clarabel certified), ``solver_value`` (objective in original units; the caller
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
    program, status = solve_convex(problem, W, lambda: W.value, scale, r_max, l1,
                                   starts=[problem.G])
    return scale * np.asarray(W.value), {
        "method": "cvxpy epigraph QCQP",
        "solver": "CLARABEL",
        **status,
        "solver_value": float(program.value) * scale**2,
        "scale": scale,
    }
