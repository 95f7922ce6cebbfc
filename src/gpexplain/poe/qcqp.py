"""Robustness as maximum difference (R-max), with any other properties, by cvxpy.

Tadesse et al. (2025), Sec. 5, eq. 12: ``R_max = sum_n max_n' |w_n - w_n'|^2`` is minimised
through the epigraph program

    minimise  Q(W) + lRmax sum_n t_n^2 + lC |W|_1
    s.t.      |w_n - w_n'| <= t_n   for every pair n != n'

(a convex second-order cone program, equivalent to the paper's QCQP with Delta_n = t_n^2;
``Q`` the quadratic properties, written with square roots of the two Laplacians so that cvxpy
sees sums of squares). The cones bound distances, not squared distances: with R_max weighted
far above faithfulness the explanations nearly coincide, and Delta_n ~ |w_n - w_n'|^2 fell
below the interior-point solver's feasibility tolerance (R_max at 100 times F_grad failed all
of 10 random problems at relative gap ~1e-6; t_n stays representable). The N (N - 1) cone
constraints are generated lazily (only the pairs that bind), which is exact (see
``solve_convex``). Gradients and values are first divided by ``max |G|`` (``docs/errata.md``:
interior-point solvers otherwise stop at "optimal_inaccurate"); the minimiser scales back
exactly. Solutions are accepted at a certified duality gap, and the solver's optimal value is
checked against the objective re-evaluated from the returned explanations.
"""

from __future__ import annotations

import warnings

import numpy as np

from gpexplain._optional import require
from gpexplain.poe._inputs import POESolverError
from gpexplain.poe._quadratic import QuadraticProblem
from gpexplain.poe.losses import largest_squared_distances
from gpexplain.poe.proximal import solve_l1
from gpexplain.poe.similarity import Similarity

__all__ = ["solve_convex", "solve_program", "solve_qcqp"]

# Clarabel's interior-point tolerances (gap and feasibility) on the rescaled problem, tightest
# first: a program that stops short of one ("optimal_inaccurate") is re-solved at the next;
# the tolerance reached is reported, and a failure at 1e-8 (cvxpy's default) is an error.
_TOLERANCES = (1e-10, 1e-9, 1e-8)
# R_max solutions are accepted when the weak-duality gap they certify is below this (relative).
CERTIFIED_RTOL = 1e-7
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
    cp = require("cvxpy", "poe", "POE's convex solvers")

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
                 starts: list, extra_constraints=()) -> tuple[object, dict, np.ndarray | None]:
    """Minimise the POE objective in the expression W (data divided by ``scale``).

    R_max's epigraph ``|w_n - w_n'| <= t_n`` is generated lazily: starting from each
    point's two farthest partners in the ``starts`` explanations, every round adds, for each
    point, its farthest partner at the current solution if that pair violates its epigraph
    constraint, until none does. The last program is then a relaxation of the full one whose
    solution is feasible for it, hence optimal for it; and it avoids the N^2 nearly
    redundant cones of the full program.

    Returns the program, its status and, with R_max, the Lagrange multipliers of the
    epigraph as an (n, n) matrix (rows summing to ``r_max``; see ``lagrangian_similarity``):
    the caller turns them into a certified lower bound. Without R_max the status must be
    "optimal"; with it "optimal_inaccurate" is passed on, to be certified by that bound.
    """
    cp = require("cvxpy", "poe", "POE's convex solvers")
    from scipy.spatial.distance import cdist

    terms = _convex_terms(problem, W, scale, l1)
    n = problem.X.shape[0]
    if not r_max or n < 2:
        program, status = solve_program(cp.sum(terms), list(extra_constraints))
        return program, {**status, "rounds": 1, "pairs": 0}, None
    pairs = set()
    for start in starts:
        pairs |= _farthest_pairs(start / scale, 2)
    radius = cp.Variable(n)
    for rounds in range(1, 101):  # each round adds >= 1 pair; in practice a few rounds
        first, second = (np.array(index) for index in zip(*sorted(pairs), strict=True))
        epigraph = cp.norm(W[first, :] - W[second, :], 2, axis=1) <= radius[first]
        program, status = solve_program(cp.sum([*terms, r_max * cp.sum_squares(radius)]),
                                        [epigraph, *extra_constraints], allow_inaccurate=True)
        current = cdist(value_of(), value_of(), "euclidean")
        partner = np.argmax(current, axis=1)
        largest = current[np.arange(n), partner]
        radii = np.asarray(radius.value)
        violated = largest > radii + 1e-8 * max(float(largest.max()), np.finfo(float).tiny)
        new = {(a, int(partner[a])) for a in np.flatnonzero(violated)} - pairs
        if not new:
            multipliers = np.zeros((n, n))
            np.add.at(multipliers, (first, second), np.maximum(epigraph.dual_value, 0.0))
            return program, {**status, "rounds": rounds, "pairs": len(pairs)}, (
                lagrangian_similarity(multipliers, r_max, current))
        pairs |= new
    raise POESolverError("R_max constraint generation did not settle in 100 rounds.")


def lagrangian_similarity(multipliers: np.ndarray, r_max: float, distances: np.ndarray):
    """Feasible Lagrange multipliers of the R_max epigraph, as a similarity matrix.

    The cone multipliers nu_nn' of ``|w_n - w_n'| <= t_n`` satisfy ``sum_n' nu_nn' =
    2 r_max t_n`` (stationarity in t_n), so ``mu_nn' = nu_nn' / (2 t_n)``, the multipliers of
    ``|w_n - w_n'|^2 <= t_n^2``, are the rows of nu rescaled to sum to r_max. For multipliers
    ``mu_nn' >= 0`` with ``sum_n' mu_nn' = r_max``, minimising the Lagrangian over W gives the
    POE objective with R_max replaced by ``sum_nn' mu_nn' |w_n - w_n'|^2``, an R_avg term with
    similarity mu: by weak duality its minimum is a lower bound on the R_max program's. A row
    without multipliers puts r_max on the point's farthest partner.
    """
    totals = multipliers.sum(axis=1)
    empty = totals <= 0
    multipliers = multipliers.copy()
    multipliers[empty, np.argmax(distances[empty], axis=1)] = 1.0
    totals[empty] = 1.0
    return multipliers * (r_max / totals)[:, None]


def solve_program(objective, constraints, allow_inaccurate: bool = False):
    """Solve with Clarabel at the tightest tolerance it certifies; POESolverError otherwise.

    Returns the solved program and ``{"status", "tolerance", "iterations"}``. With
    ``allow_inaccurate``, "optimal_inaccurate" at the loosest tolerance is returned too (the
    caller certifies the solution itself).
    """
    cp = require("cvxpy", "poe", "POE's convex solvers")

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
    if allow_inaccurate and program.status == cp.OPTIMAL_INACCURATE:
        return program, {"status": program.status, "tolerance": _TOLERANCES[-1],
                         "iterations": program.solver_stats.num_iters}
    raise POESolverError(
        f"cvxpy/Clarabel ended with statuses {statuses} at tolerances {list(_TOLERANCES)}, "
        "never 'optimal'; the explanations would be inaccurate."
    )


def solve_qcqp(problem: QuadraticProblem, r_max: float, l1: float,
               tol: float = CERTIFIED_RTOL) -> tuple[np.ndarray, dict]:
    """Minimise ``Q(W) + r_max R_max(W) + l1 |W|_1`` with cvxpy (Clarabel).

    The solution is accepted at a certified relative duality gap of ``max(tol,
    CERTIFIED_RTOL)``.

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
        Clarabel failed, or the certified gap exceeds the accepted one; the message names
        the remedies (the weights to rebalance, ``tol``).
    ValueError
        An indefinite similarity Laplacian.
    """
    cp = require("cvxpy", "poe", "POE's convex solvers")

    accepted = max(tol, CERTIFIED_RTOL)
    scale = problem.data_scale()
    W = cp.Variable(problem.X.shape)
    try:
        program, status, multipliers = solve_convex(problem, W, lambda: W.value, scale, r_max,
                                                    l1, starts=[problem.G])
    except POESolverError as error:
        raise POESolverError(f"{error} {_remedy(problem.weights, accepted)}") from error
    solution = np.asarray(W.value)
    scaled = problem.scaled(scale)
    primal = primal_value(scaled, solution, r_max, l1 / scale)
    lower = _dual_bound(scaled, multipliers, l1 / scale)
    gap = max(primal - lower, 0.0)
    relative = gap / max(abs(primal), np.finfo(float).tiny)
    if not relative <= accepted:
        raise POESolverError(
            f"cvxpy/Clarabel ({status['status']}) returned a solution whose certified relative "
            f"duality gap is {relative:.3g} > {accepted:g}; the explanations would be "
            f"inaccurate. {_remedy(problem.weights, accepted)}")
    return scale * solution, {
        "method": "cvxpy epigraph cone program",
        "solver": "CLARABEL",
        **status,
        "solver_value": float(program.value) * scale**2,
        "duality_gap": gap * scale**2,
        "relative_gap": relative,
        "scale": scale,
    }


def _remedy(weights: dict, accepted: float) -> str:
    """What a user can change when the R_max program cannot be certified."""
    faithfulness = max(weights["F_grad"], weights["F_func"])
    ratio = (f" ({weights['R_max'] / faithfulness:.3g} times the faithfulness weight)"
             if faithfulness else "")
    return (f"Lower lambdas['R_max'] (now {weights['R_max']:g}{ratio}) or raise "
            f"lambdas['F_grad'], or accept a larger relative duality gap with tol (now "
            f"{accepted:g}, e.g. tol=1e-5).")


def lagrangian_problem(scaled: QuadraticProblem, multipliers: np.ndarray) -> QuadraticProblem:
    """The quadratic problem whose minimum (plus the L1 term) is the Lagrangian dual value."""
    n = scaled.X.shape[0]
    similarity = multipliers + scaled.weights["R_avg"] * scaled.points.symmetric(n)
    weights = {**scaled.weights, "R_avg": 1.0, "R_max": 0.0, "C": 0.0}
    return QuadraticProblem(scaled.X, scaled.G, scaled.f, weights,
                            Similarity(matrix=similarity, description="Lagrangian"),
                            scaled.features)


def primal_value(scaled: QuadraticProblem, W: np.ndarray, r_max: float, l1: float) -> float:
    return (scaled.value(W) + l1 * float(np.sum(np.abs(W)))
            + r_max * float(np.sum(largest_squared_distances(W))))


def _dual_bound(scaled: QuadraticProblem, multipliers: np.ndarray, l1: float) -> float:
    """Weak-duality lower bound: the certified minimum of the Lagrangian (an R_avg problem).

    ``multipliers`` (rows summing to r_max) replace R_max by an R_avg term with that
    similarity, added to the problem's own R_avg; the minimum is solved exactly (eigen-
    decomposition) or by the proximal method, and its own certified error is subtracted.
    """
    inner = lagrangian_problem(scaled, multipliers)
    if l1:
        W, certificate = solve_l1(inner, l1, tol=1e-12)
        return inner.value(W) + l1 * float(np.sum(np.abs(W))) - certificate["duality_gap"]
    W, certificate = inner.solve()
    return inner.value(W) - certificate["suboptimality_bound"]
