"""Shared pieces of the POE benchmarks: the paper's synthetic functions, baselines, dominance.

Functions of Tadesse et al. (2025), Sec. 6.1 and Appendix C.3, written for torch (gradients
by autograd through ``gx.poe.gradients_and_values``).
"""

from __future__ import annotations

import numpy as np
import torch

import gpexplain as gx

FUNCTIONS = {
    "cubic": lambda x: (x**3).sum(1),
    "cubic_interactions": lambda x: (x**3).sum(1) + x.sum(1) ** 3,  # sum over all (d, d', d'')
    "periodic": lambda x: torch.sin(x).sum(1),
    "quasi_periodic_linear": lambda x: (x + torch.sin(3 * x)).sum(1),
    "quasi_periodic_quadratic": lambda x: (x**2 / 10 + torch.sin(3 * x)).sum(1),
    "quasi_periodic_exponentiated": lambda x: torch.sin(torch.exp(x) / 10).sum(1),
    "quasi_periodic_linear_exponentiated": lambda x: (x + torch.sin(torch.exp(x) / 10)).sum(1),
    "exponential": lambda x: torch.exp(x).sum(1),
    "quadratic": lambda x: (x**2).sum(1),
}


def grid(per_axis: int, dimension: int, low: float, high: float) -> np.ndarray:
    axes = [np.linspace(low, high, per_axis)] * dimension
    return np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, dimension)


def poe_losses(W, X, G, values, names=("F_grad", "R_avg")) -> list[float]:
    losses = gx.poe.losses(W, X, G, values)
    return [float(losses[name]) for name in names]


def baseline_points(f, X, G, values, deltas, seed=0, lime_samples=200, sg_samples=50):
    """SmoothGrad and both LIMEs over a delta sweep: {method: [(delta, W), ...]}."""
    out = {"smoothgrad": [], "lime": [], "lime_no_intercept": []}
    for i, delta in enumerate(deltas):
        out["smoothgrad"].append(
            (float(delta), gx.poe.smoothgrad(f, X, delta, sg_samples, seed=seed + i).mean))
        out["lime"].append((float(delta), gx.poe.lime(f, X, delta, lime_samples, seed + i).mean))
        out["lime_no_intercept"].append(
            (float(delta), gx.poe.lime_no_intercept(f, X, delta, lime_samples, seed + i).mean))
    return out


def agg_bases(explanations: dict) -> list[np.ndarray]:
    """The paper's AGG bases: three SmoothGrad and three LIME (with intercept) explanations,
    at the smallest, middle and largest delta."""
    bases = []
    for method in ("smoothgrad", "lime"):
        sweep = explanations[method]
        for index in (0, len(sweep) // 2, len(sweep) - 1):
            bases.append(sweep[index][1])
    return bases


def quadratic_front(X, G, point, S=None, tolerance=1e-9) -> tuple[bool, float]:
    """Is (F_grad, R_avg) = point dominated by POE's exact F_grad-R_avg front, and by how much?

    The front is {(F(mu), R(mu))}: POE with lambdas (1, mu); R decreases and F increases in mu.
    Bisection in log mu finds R(mu) = R_point; the point is dominated iff F(mu) < F_point
    (relative tolerance), or if R_point > R(0) and F_point >= 0 = F(0). Returns that and
    F(mu) (the front's faithfulness loss at the point's robustness loss).
    """
    f_point, r_point = point

    def solve(mu):
        result = gx.poe.transductive(X, G, S=S, lambdas={"F_grad": 1.0, "R_avg": mu})
        return result.losses["F_grad"], result.losses["R_avg"]

    r_zero = gx.poe.losses(G, X, G, S=S)["R_avg"]
    if r_point >= r_zero:
        dominated = f_point > tolerance * max(1.0, r_zero) or r_point > r_zero * (1 + tolerance)
        return bool(dominated), 0.0
    low, high = -20.0, 20.0  # log10 mu
    for _ in range(100):
        middle = 0.5 * (low + high)
        _, r_mid = solve(10**middle)
        if r_mid > r_point:
            low = middle
        else:
            high = middle
        if high - low < 1e-10:
            break
    f_front, _ = solve(10**high)  # R(10**high) <= r_point
    return bool(f_front < f_point * (1 - tolerance)), float(f_front)


def grid_dominated(front: np.ndarray, point, tolerance=1e-9) -> bool:
    """Some sampled POE point is <= in every loss and < in one (conservative for the front)."""
    point = np.asarray(point)
    weakly = np.all(front <= point * (1 + tolerance), axis=1)
    strictly = np.any(front < point * (1 - tolerance), axis=1)
    return bool(np.any(weakly & strictly))
