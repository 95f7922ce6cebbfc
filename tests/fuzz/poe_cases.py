"""Fuzz cases over transductive POE (issue 27 items 17 and 22).

Each problem's truth comes from plain NumPy: the dense Hessian of the quadratic part
(Kronecker products of graph Laplacians, ``tests.poe.conftest``), its eigenvalues (is the
objective bounded, is its minimiser unique) and its normal equations; the objective written
out here; and, with R_max, the objective at two feasible points that any minimiser must beat.
"""

from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

import gpexplain as gx
from tests.fuzz.harness import Outcome, call, guarded
from tests.fuzz.strategies import log_uniform
from tests.poe.conftest import dense_objective_matrix

EPS = np.finfo(float).eps


def _objective(W, X, G, f, S, S_tilde, weights) -> float:
    """The POE objective written out (Tadesse et al. 2025, Table 2)."""
    pair = np.sum((W[:, None, :] - W[None, :, :]) ** 2, axis=2)
    feature = (W[:, :, None] - W[:, None, :]) ** 2
    losses = {
        "F_grad": np.sum((W - G) ** 2),
        "F_func": np.sum((np.sum(W * X, axis=1) - f) ** 2),
        "R_avg": np.sum((S - np.diag(np.diag(S))) * pair),
        "R_max": np.sum(pair.max(axis=1)),
        "S": np.sum((S_tilde - np.diag(np.diag(S_tilde))) * feature),
        "C": np.sum(np.abs(W)),
    }
    return float(sum(weight * losses[name] for name, weight in weights.items()))


@st.composite
def _points(draw, max_n: int = 8, max_d: int = 3):
    n, d = draw(st.integers(3, max_n)), draw(st.integers(1, max_d))
    rng = np.random.default_rng(draw(st.integers(0, 2**31 - 1)))
    # wide points give F_func a large curvature, which hid an indefinite R_avg before
    scale = draw(log_uniform(1e-1, 3e1))
    X = scale * rng.normal(size=(n, d))
    G = draw(log_uniform(1e-2, 1e2)) * rng.normal(size=(n, d))
    f = rng.normal(size=n)
    return X, G, f, scale, rng


@guarded
def poe_uniqueness_case(data) -> Outcome:
    """Item 17: F_func, R_avg and C over similarities with and without negative entries. A
    result for an unbounded objective, or a refusal of one with a unique minimiser, is a
    defect; so is a solution off the dense normal equations."""
    X, G, f, scale, rng = data.draw(_points())
    n, d = X.shape
    S = np.exp(-0.5 * np.sum((X[:, None] - X[None]) ** 2, axis=2) / scale**2)
    if data.draw(st.booleans()):  # a few negative pairs
        for _ in range(data.draw(st.integers(1, 3))):
            a, b = rng.choice(n, size=2, replace=False)
            S[a, b] = S[b, a] = -data.draw(log_uniform(1e-3, 1e1))
    S_tilde = rng.uniform(0.1, 1.0, size=(d, d))
    weights = {"F_func": data.draw(st.sampled_from([0.0, 1.0])),
               "F_grad": data.draw(st.sampled_from([0.0, 0.0, 0.0, 1.0, 1e-3])),
               "R_avg": data.draw(log_uniform(1e-2, 1e1)),
               "S": data.draw(st.sampled_from([0.0, 0.3])),
               "C": data.draw(st.sampled_from([0.0, 0.0, 0.1]))}
    H = dense_objective_matrix(X, weights, S, S_tilde)
    eigenvalues = np.linalg.eigvalsh(H)
    top = np.max(np.abs(eigenvalues))
    unbounded = eigenvalues[0] < -1e-8 * top
    unique = eigenvalues[0] > 1e-6 * top  # clearly: a small margin is undecided
    result, error, _ = call(gx.poe.transductive, X, G, f, S=S, S_tilde=S_tilde, lambdas=weights)
    label = f"weights {weights}, smallest eigenvalue {eigenvalues[0]:.3g} of {top:.3g}"
    if error is not None:
        if isinstance(error, ValueError) and not unique:
            named = any(name in str(error) for name in ("Laplacian of S", "lambdas['F_grad']"))
            return Outcome("ok" if named else "unclear_error", f"refused: {error}")
        if unique and isinstance(error, ValueError | gx.poe.POESolverError):
            return Outcome("unclear_error", f"{label}: refused a problem with a unique "
                                            f"minimiser: {error}")
        return Outcome("unclear_error", f"{label}: {type(error).__name__}: {error}")
    if unbounded:
        return Outcome("silently_wrong", f"{label}: solved an objective unbounded below "
                                         f"({result.certificate.get('status')})")
    if not unique:
        return Outcome("ok", "solved a nearly singular problem")
    b = (weights["F_grad"] * G + weights["F_func"] * f[:, None] * X).ravel()
    reference = np.linalg.solve(H, b).reshape(n, d)
    W = result.explanations
    if weights["C"]:  # the L1 minimiser is no worse than the quadratic one
        worse = _objective(W, X, G, f, S, S_tilde, weights) - _objective(
            reference, X, G, f, S, S_tilde, weights)
        if worse > 1e-8 * max(result.objective, 1e-300):
            return Outcome("silently_wrong", f"{label}: L1 solution {worse:.3g} above the "
                                             "quadratic minimiser's objective")
        return Outcome("ok")
    # transductive promises a relative residual of 1e-11 (conjugate gradients with F_func):
    # |W - W*| <= 1e-11 |b| / lambda_min, plus the rounding of the dense reference itself
    tolerance = 1e-11 * np.linalg.norm(b) / eigenvalues[0] + 100 * np.linalg.cond(H) * EPS * max(
        np.linalg.norm(reference), 1e-300)
    if np.linalg.norm(W - reference) > tolerance:
        return Outcome("silently_wrong", f"{label}: {np.linalg.norm(W - reference):.3g} off "
                                         "the dense normal equations")
    return Outcome("ok")


@guarded
def poe_r_max_case(data) -> Outcome:
    """Item 22: R_max weighted up to 1e4 times F_grad must solve to its certified gap, or be
    refused naming the weights and ``tol``; the solution beats two feasible points."""
    X, G, f, _, _ = data.draw(_points(max_n=15, max_d=4))
    weights = {"F_grad": 1.0, "R_max": data.draw(log_uniform(1e-2, 1e4)),
               "C": data.draw(st.sampled_from([0.0, 0.0, 0.3])),
               "R_avg": data.draw(st.sampled_from([0.0, 0.0, 0.1]))}
    result, error, _ = call(gx.poe.transductive, X, G, lambdas=weights)
    label = f"R_max {weights['R_max']:.3g}"
    if error is not None:
        if isinstance(error, gx.poe.POESolverError) and "lambdas['R_max']" in str(error) \
                and "tol" in str(error):
            return Outcome("ok", f"refused naming the remedy: {error}")
        return Outcome("unclear_error", f"{label}: {type(error).__name__}: {error}")
    S, S_tilde = np.ones((len(X), len(X))), np.ones((X.shape[1],) * 2)
    value = _objective(result.explanations, X, G, f, S, S_tilde, weights)
    if abs(value - result.objective) > 1e-9 * max(value, 1e-300):
        return Outcome("silently_wrong", f"{label}: reported objective {result.objective:.10g}"
                                         f" but its explanations give {value:.10g}")
    candidates = (G, np.ones((len(X), 1)) * G.mean(axis=0))
    best = min(_objective(W, X, G, f, S, S_tilde, weights) for W in candidates)
    if value > best * (1 + 1e-7):
        return Outcome("silently_wrong", f"{label}: objective {value:.6g} above a feasible "
                                         f"point's {best:.6g}")
    if not result.certificate["relative_gap"] <= 1e-7:
        return Outcome("silently_wrong", f"{label}: accepted at gap "
                                         f"{result.certificate['relative_gap']:.3g}")
    return Outcome("ok")


POE_CASES = (poe_uniqueness_case, poe_r_max_case)
