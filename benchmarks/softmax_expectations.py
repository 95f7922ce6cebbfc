"""Softmax expectations for C = 3 classes: the difference-plane product rule against the tensor
Gauss-Hermite it replaced (issue 12), by latent variance.

For 200 points per regime (latent means N(0, 2^2); variances uniform in [0.05, 1] "narrow",
[1, 5] "mid", [10, 100] "wide"), times

(a) the previous rule, tensor Gauss-Hermite over the three latents with 8, 16, 32, 64 nodes
    per class until two successive rules agree to 1e-10 (reproduced here as it was in
    ``gpexplain.links``), for ``E[S_c], E[d_j S_c], E[d_j^2 S_c]``;
(b) ``Softmax().class_expectations`` (the same expectations, the product trapezoid over the
    two latent differences);
(c) ``Softmax().gradient_moments`` (also the gradient covariance, d = 5 features: the C x C
    blocks of second moments on the same nodes);

and measures the error of (a) and (b) on the first 5 points of each regime against the
independent reference of the test suite (``tests/reference/softmax_quadrature.py``: sympy
derivatives, composite Gauss-Legendre in the difference plane). Errors are max absolute over
the checked points and rows (target class 1).

Run from the repository root (~2 min on 2 cores; writes
``benchmarks/results/softmax_expectations.json``)::

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/softmax_expectations.py
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import numpy as np
from _common import best_of, machine_info, write_results

from gpexplain import links

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from tests.reference.softmax_quadrature import difference_plane_expectations  # noqa: E402

N_POINTS, N_CLASSES, N_FEATURES, TARGET, N_CHECKED = 200, 3, 5, 1, 5
REGIMES = {"narrow": (0.05, 1.0), "mid": (1.0, 5.0), "wide": (10.0, 100.0)}


def tensor_gauss_hermite(mean, var):
    """The replaced rule: ``E[S_c], E[d_j S_c], E[d_j^2 S_c]`` (n, 1 + 2C) by tensor
    Gauss-Hermite, 8 .. 64 nodes per class, until successive rules agree to 1e-10."""

    def function(f):
        return links._class_integrands(f, TARGET, False)

    def rule(n_nodes):
        nodes, weights = links.base.hermite_rule(n_nodes)
        grid = np.stack(np.meshgrid(*([nodes] * N_CLASSES), indexing="ij"), -1).reshape(
            -1, N_CLASSES)
        grid_weights = np.prod(np.stack(np.meshgrid(*([weights] * N_CLASSES), indexing="ij"),
                                        -1).reshape(-1, N_CLASSES), 1)
        batch = max(1, links._MAX_TENSOR_SIZE // (len(grid) * N_CLASSES))
        return np.concatenate([
            function(mean[i:i + batch, None, :] + np.sqrt(var[i:i + batch, None, :]) * grid[None])
            @ grid_weights for i in range(0, len(mean), batch)
        ])

    return links._refine((8, 16, 32, 64), rule, 1e-10, lambda n, gap: (
        f"tensor Gauss-Hermite did not converge with {n} nodes per class (gap {gap:.3g})"))


def main() -> None:
    rng = np.random.default_rng(0)
    results = {}
    for name, (low, high) in REGIMES.items():
        mean = 2.0 * rng.normal(size=(N_POINTS, N_CLASSES))
        var = rng.uniform(low, high, (N_POINTS, N_CLASSES))
        mu = rng.normal(size=(N_POINTS, N_CLASSES, N_FEATURES))
        c = 0.3 * rng.normal(size=mu.shape) * np.sqrt(var)[..., None]
        G = np.broadcast_to(np.eye(N_FEATURES), (N_POINTS, N_CLASSES, N_FEATURES, N_FEATURES))
        link = links.Softmax()
        with warnings.catch_warnings(record=True) as old_warnings:
            warnings.simplefilter("always")
            old, old_seconds = best_of(lambda mean=mean, var=var: tensor_gauss_hermite(mean, var))
        with warnings.catch_warnings(record=True) as new_warnings:
            warnings.simplefilter("always")
            new, new_seconds = best_of(lambda link=link, mean=mean, var=var: np.column_stack(
                link.class_expectations(mean, var, TARGET)))
            _, full_seconds = best_of(lambda link=link, mean=mean, var=var, mu=mu, c=c, G=G:
                                      link.gradient_moments(mean, var, mu, c, G, TARGET))
        reference = np.stack([
            difference_plane_expectations(mean[p], var[p], TARGET)[:1 + 2 * N_CLASSES]
            for p in range(N_CHECKED)
        ])
        results[name] = {
            "variance_range": [low, high],
            "tensor_gauss_hermite_seconds": old_seconds,
            "tensor_gauss_hermite_error": float(np.abs(old[:N_CHECKED] - reference).max()),
            "tensor_gauss_hermite_warnings": len(old_warnings),
            "product_trapezoid_seconds": new_seconds,
            "product_trapezoid_error": float(np.abs(new[:N_CHECKED] - reference).max()),
            "product_trapezoid_warnings": len(new_warnings),
            "with_covariance_seconds": full_seconds,
        }
        row = results[name]
        print(f"{name:7s} tensor GH {old_seconds:6.2f} s (error "
              f"{row['tensor_gauss_hermite_error']:.1e})"
              f" | product trapezoid {new_seconds:6.2f} s (error "
              f"{row['product_trapezoid_error']:.1e}, {old_seconds / new_seconds:5.1f}x faster)"
              f" | with covariance {full_seconds:6.2f} s")
    path = write_results("softmax_expectations", {
        "machine": machine_info(), "n_points": N_POINTS, "n_classes": N_CLASSES,
        "n_features": N_FEATURES, "target_class": TARGET, "n_checked": N_CHECKED,
        "results": results,
    })
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
