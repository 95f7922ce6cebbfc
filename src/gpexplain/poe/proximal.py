"""Complexity (L1) with the quadratic properties: accelerated proximal gradient, certified.

Minimises ``P(W) = Q(W) + lC |W|_1`` with ``Q(W) = <W, A W> - 2 <B, W> + c`` the quadratic
part (``gpexplain.poe._quadratic``): Tadesse et al. (2025), Sec. 5, "complexity as sparsity".
The paper solves it by sequential quadratic programs; here FISTA (Beck and Teboulle 2009) with
gradient-based adaptive restart (O'Donoghue and Candès 2015) does, and every result carries a
**duality gap** that bounds its suboptimality:

    dual  D(u) = c - 1/4 (2B - u)^T A^{-1} (2B - u),   |u|_inf <= lC
    gap   P(W) - D(u) >= P(W) - min P,   u = clip of -grad Q(W) to the box,

(Fenchel duality with ``lC |W|_1 = max over |u|_inf <= lC of <u, W>``), and by strong
convexity ``|W - W*|^2 <= gap / lambda_min(A)``. ``A^{-1}`` is applied exactly through the
eigendecompositions (or by conjugate gradients with F_func).

The gradients and values are first divided by ``max |G|`` (``docs/errata.md``: rescale
before a convex solver); the minimiser scales back exactly (lC is divided by the same factor).
"""

from __future__ import annotations

import numpy as np

from gpexplain.poe._inputs import POESolverError
from gpexplain.poe._quadratic import QuadraticProblem

__all__ = ["solve_l1"]

_GAP_EVERY = 20  # iterations between duality-gap evaluations (each costs one solve with A)


def _soft_threshold(V: np.ndarray, threshold: float) -> np.ndarray:
    return np.sign(V) * np.maximum(np.abs(V) - threshold, 0.0)


def _primal(problem: QuadraticProblem, W: np.ndarray, l1: float) -> float:
    return problem.value(W) + l1 * float(np.sum(np.abs(W)))


def _dual(problem: QuadraticProblem, W: np.ndarray, l1: float) -> float:
    B = problem.rhs()
    u = 2.0 * (B - problem.apply(W))
    largest = float(np.max(np.abs(u)))
    if largest > l1:
        u *= l1 / largest
    V = 2.0 * B - u
    Ainv_V, _ = problem.solve_rhs(V)
    return problem.constant() - 0.25 * float(np.sum(V * Ainv_V))


def solve_l1(
    problem: QuadraticProblem, l1: float, tol: float = 1e-10, max_iter: int = 200_000
) -> tuple[np.ndarray, dict]:
    """Minimise ``Q(W) + l1 |W|_1`` to relative duality gap ``tol``.

    Returns
    -------
    W : ndarray (n_points, n_features)
    certificate : dict
        ``duality_gap`` (absolute, in the objective's units), ``relative_gap``,
        ``error_bound`` (bound on the Frobenius distance to the minimiser), ``iterations``,
        ``scale`` (the rescaling factor).

    Raises
    ------
    ValueError
        No unique minimiser (``lambda_min(A)`` zero to working precision, or negative: the
        objective is unbounded below).
    POESolverError
        The gap did not fall below ``tol`` within ``max_iter`` iterations (gap reported).
    """
    smallest = problem.require_unique_minimiser()
    scale = problem.data_scale()
    scaled = problem.scaled(scale)
    threshold_weight = l1 / scale
    step = 1.0 / (2.0 * scaled.largest_eigenvalue_bound())

    W, _ = scaled.solve()  # the minimiser without L1: a good start
    W = _soft_threshold(W, threshold_weight * step)
    Y, t = W.copy(), 1.0
    gap = primal = np.inf
    iteration = 0
    for iteration in range(1, max_iter + 1):
        gradient = 2.0 * (scaled.apply(Y) - scaled.rhs())
        W_next = _soft_threshold(Y - step * gradient, threshold_weight * step)
        if np.sum((Y - W_next) * (W_next - W)) > 0:  # momentum points uphill: restart
            t, Y_base = 1.0, W_next
        else:
            Y_base = W_next
        t_next = 0.5 * (1.0 + np.sqrt(1.0 + 4.0 * t * t))
        Y = Y_base + ((t - 1.0) / t_next) * (W_next - W)
        W, t = W_next, t_next
        if iteration % _GAP_EVERY == 0:
            primal = _primal(scaled, W, threshold_weight)
            gap = max(primal - _dual(scaled, W, threshold_weight), 0.0)
            if gap <= tol * max(abs(primal), np.finfo(float).tiny):
                break
    relative = gap / max(abs(primal), np.finfo(float).tiny)
    if not relative <= tol:
        raise POESolverError(
            f"the proximal solver stopped after {iteration} iterations at relative duality gap "
            f"{relative:.3g} > tol {tol:g}; raise max_iter or tol."
        )
    return scale * W, {
        "method": "FISTA with adaptive restart",
        "status": "optimal",  # a gap above tol raises before a result is returned
        "iterations": iteration,
        "duality_gap": gap * scale**2,
        "relative_gap": relative,
        "error_bound": float(scale * np.sqrt(gap / smallest)),
        "scale": scale,
    }
