"""Closed-form RBF integrated gradients on paths from 1e-8 to 1e14 lengthscales (issue 10,
class 4): the cross term lost completeness like eps (|x - b| / l)^2 (2e-6 relative at 1e5,
an overflow to inf at 1e11) because the far end's distance was formed as
|v|^2 + 2 r beta + r^2. References: ``tests.reference.ig_rbf_mpmath`` (the definitions
integrated in mpmath; up to 1e11, where its own quadrature still certifies itself) and,
at every length, the completeness identity with the kernel evaluated in mpmath.
"""

from __future__ import annotations

import numpy as np
import pytest

from gpexplain.kernels.rbf import RBF
from tests.reference import ig_rbf_mpmath as ref

LENGTHSCALE = np.array([0.7, 1.3, 2.0])
VARIANCE = 1.3
LENGTHS = [1e-8, 1e-4, 1.0, 1e2, 1e5, 1e8, 1e11, 1e14]
EPS = np.finfo(float).eps


def _geometry(length, seed=0):
    rng = np.random.default_rng(seed)
    xt = rng.normal(size=3)
    direction = rng.normal(size=3)
    x = xt + length * LENGTHSCALE * direction / np.linalg.norm(direction)
    off = np.cross(direction, rng.normal(size=3))
    off = LENGTHSCALE * off / np.linalg.norm(off)
    return x, xt, {
        "near-x": x + 0.3 * off,
        "near-baseline": xt + 0.5 * off,
        "beside-the-middle": xt + 0.4 * (x - xt) + 0.7 * off,
    }


@pytest.mark.parametrize("length", LENGTHS)
def test_cross_term_completeness_at_round_off_for_every_path_length(length):
    x, xt, points = _geometry(length)
    kernel = RBF(LENGTHSCALE, VARIANCE)
    Z = np.array(list(points.values()))
    A = kernel.integrated_gradient_cross(x[None], xt, Z)[0]  # (D, n)
    target = [
        float(ref.rbf_kernel(x, z, LENGTHSCALE, VARIANCE)
              - ref.rbf_kernel(xt, z, LENGTHSCALE, VARIANCE))
        for z in Z
    ]
    np.testing.assert_allclose(A.sum(axis=0), target, rtol=0, atol=1e-15 * VARIANCE)


@pytest.mark.parametrize("length", [v for v in LENGTHS if v <= 1e11])
@pytest.mark.parametrize("where", ["near-x", "near-baseline", "beside-the-middle"])
def test_cross_term_matches_mpmath(length, where):
    x, xt, points = _geometry(length)
    z = points[where]
    got = RBF(LENGTHSCALE, VARIANCE).integrated_gradient_cross(x[None], xt, z[None])[0, :, 0]
    expected = np.array([float(a) for a in ref.ig_cross(x, xt, z, LENGTHSCALE, VARIANCE)])
    # Beside the middle of a long path the term is as sensitive as its inputs: one ulp of x
    # moves the path near z by ~eps * length lengthscales.
    sensitivity = EPS * length if where == "beside-the-middle" else 0.0
    scale = np.max(np.abs(expected))
    np.testing.assert_allclose(got, expected, rtol=0, atol=(1e-12 + sensitivity) * scale)


@pytest.mark.parametrize("length", LENGTHS)
def test_prior_term_for_every_path_length(length):
    x, xt, _ = _geometry(length)
    P = RBF(LENGTHSCALE, VARIANCE).integrated_gradient_prior(x[None], xt)[0]
    entries = np.abs(P).max()
    # Var[f(x) - f(xt)] = 2 s2 (1 - exp(-a / 2)), a = |(x - xt) / l|^2 of the float inputs.
    a = float(np.sum(((x - xt) / LENGTHSCALE) ** 2))
    target = 2 * VARIANCE * -np.expm1(-a / 2)
    # The entries grow like sqrt(2 pi) s2 |u| and cancel in the sum: round-off of the entries.
    assert abs(P.sum() - target) <= 1e-14 * np.abs(P).sum() + 1e-15 * target
    eigenvalues = np.linalg.eigvalsh(P)
    assert eigenvalues[0] >= -1e-14 * eigenvalues[-1]
    if length <= 1e11:
        expected = np.array([[float(v) for v in row]
                             for row in ref.ig_prior(x, xt, LENGTHSCALE, VARIANCE)])
        np.testing.assert_allclose(P, expected, rtol=0, atol=1e-12 * entries)
