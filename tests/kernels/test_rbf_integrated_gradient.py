"""RBF integrated-gradient functionals against an independent mpmath reference.

The reference (``tests/reference/ig_rbf_mpmath.py``) integrates the definitions numerically at
high precision; nothing here uses the closed forms of ``gpexplain.kernels``.

Error measures: the cross term ``A[p, :, n]`` is compared relative to ``max_i |A_ref[p, i, n]|``
and the prior term ``P[p]`` relative to ``max_ij |P_ref[p]|`` (single components can vanish by
cancellation, so elementwise relative error is meaningless). An absolute floor of
``1e-280 * variance`` only matters where everything underflows.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
from mpmath import mp, mpf

from gpexplain.kernels._gaussian_integrals import (
    exp_difference,
    path_integral_unit_gaussian,
    segment_moments,
)
from gpexplain.kernels.rbf import RBF
from tests.reference import ig_rbf_mpmath as ref

RTOL = 1e-10
FLOOR = 1e-280  # times the variance


def _unit(rng, d):
    v = rng.normal(size=d)
    return v / np.linalg.norm(v)


def _full_lengthscale(lengthscale, d):
    return np.broadcast_to(np.asarray(lengthscale, float), (d,)).copy()


def _near_path(rng, xt, x, lengthscale, fraction, distance):
    """A point at ``distance`` lengthscale units from ``g(fraction)``, off the path direction."""
    d = xt.size
    point = xt + fraction * (x - xt)
    if d == 1:
        return point + distance * lengthscale
    u = (x - xt) / lengthscale
    n = rng.normal(size=d)
    n -= (n @ u) / (u @ u) * u
    return point + distance * lengthscale * n / np.linalg.norm(n)


def _build_cases():
    """``id -> (X, baseline, Z, lengthscale, variance)``; fixed seed plus hand-picked points."""
    rng = np.random.default_rng(20240531)
    cases = {}

    # x within 1e-8 and 1e-12 lengthscales of the baseline.
    for eps, d, lengthscale in [
        (1e-8, 3, np.array([0.3, 1.0, 4.0])),
        (1e-12, 2, 0.7),
        (1e-12, 5, np.array([0.5, 1.0, 2.0, 0.2, 3.0])),
    ]:
        xt = rng.normal(size=d)
        ls = _full_lengthscale(lengthscale, d)
        X = np.stack([xt + eps * ls * _unit(rng, d) for _ in range(2)])
        Z = np.vstack([rng.normal(size=(2, d)), xt + 0.5 * ls * _unit(rng, d)])
        cases[f"near-baseline-{eps:g}-{d}d"] = (X, xt, Z, lengthscale, 1.7)

    # Moderate distances, 1-D to 5-D, isotropic and ARD.
    for d, lengthscale in [
        (1, 0.8),
        (2, np.array([0.5, 2.0])),
        (5, 1.3),
        (5, np.array([0.4, 0.9, 1.5, 2.5, 6.0])),
    ]:
        kind = "ard" if np.ndim(lengthscale) else "iso"
        X = rng.normal(size=(2, d))
        cases[f"moderate-{d}d-{kind}"] = (
            X,
            rng.normal(size=d),
            rng.normal(size=(2, d)),
            lengthscale,
            0.9,
        )

    # 1-D, training point on the path: the integrand is odd about it and A is a difference of
    # two small kernel values.
    cases["1d-train-on-path"] = (
        np.array([[9.0], [4.0]]),
        np.array([-1.0]),
        np.array([[3.7], [0.2]]),
        0.5,
        1.0,
    )

    # Far from the baseline (|u| ~ 25-40): training points along the path at O(1) distance,
    # beyond the ends, and far off.
    d, lengthscale = 2, np.array([0.6, 1.1])
    xt = np.array([0.2, -0.4])
    X = np.stack([xt + np.array([25 * 0.6, 3.0]), xt + np.array([-2.0, 40 * 1.1])])
    Z = np.stack(
        [
            _near_path(rng, xt, X[0], lengthscale, 0.5, 1.0),
            _near_path(rng, xt, X[0], lengthscale, 0.05, 0.3),
            _near_path(rng, xt, X[1], lengthscale, 0.8, 2.0),
            _near_path(rng, xt, X[1], lengthscale, 1.1, 0.5),
            xt + np.array([-5.0, 3.0]),
        ]
    )
    cases["far-from-baseline-2d"] = (X, xt, Z, lengthscale, 2.5)

    # Far from the training point at both ends (|v| ~ 20-35), the path crossing the Gaussian
    # at distances 0.5, 2 and 6 (in lengthscales), or passing it by.
    d, lengthscale = 3, 1.5
    z = np.array([[0.3, -0.2, 1.0]])
    rows = []
    for distance, fraction in [(0.5, 0.4), (2.0, 0.7), (6.0, 0.5), (3.0, -0.3)]:
        direction = _unit(rng, d)
        normal = _unit(rng, d)
        normal -= (normal @ direction) * direction
        normal /= np.linalg.norm(normal)
        length = rng.uniform(40, 60) * lengthscale
        start = z[0] + distance * lengthscale * normal - fraction * length * direction
        rows.append((start, start + length * direction))
    for k, (start, end) in enumerate(rows):
        cases[f"far-from-training-3d-{k}"] = (end[None, :], start, z, lengthscale, 0.6)

    # Short lengthscales (1e-2 of the data scale): most values underflow, training points
    # within a few lengthscales of the path give O(1) attributions.
    lengthscale = np.array([0.01, 0.02])
    xt = np.array([0.1, 0.5])
    X = np.array([[0.9, -0.3], [0.12, 0.51]])
    Z = np.stack(
        [
            _near_path(rng, xt, X[0], lengthscale, 0.3, 0.4),
            _near_path(rng, xt, X[0], lengthscale, 0.9, 1.5),
            _near_path(rng, xt, X[1], lengthscale, 0.5, 0.1),
            xt + np.array([0.005, -0.01]),
            rng.normal(size=2),
        ]
    )
    cases["lengthscale-1e-2-2d"] = (X, xt, Z, lengthscale, 3.0)

    # Long lengthscales (1e2 of the data scale).
    cases["lengthscale-1e2-3d"] = (
        rng.normal(size=(2, 3)),
        rng.normal(size=3),
        rng.normal(size=(2, 3)),
        100.0,
        1.1,
    )
    # Lengthscales spanning 1e-2 .. 1e2 in one ARD kernel.
    d = 5
    lengthscale = np.array([0.01, 0.1, 1.0, 10.0, 100.0])
    xt = rng.normal(size=d)
    X = xt + rng.normal(size=(2, d)) * lengthscale * 3
    Z = np.vstack([xt + rng.normal(size=(1, d)) * lengthscale, rng.normal(size=(1, d))])
    cases["lengthscale-spread-5d"] = (X, xt, Z, lengthscale, 1.0)

    # Random lengthscales, log-uniform in [1e-2, 1e2], data scale 1; training points drawn
    # around the path so that the values are not all underflowed.
    for k in range(4):
        d = (1, 2, 3, 5)[k]
        lengthscale = 10 ** rng.uniform(-2, 2, size=d) if k % 2 else 10 ** rng.uniform(-2, 2)
        ls = _full_lengthscale(lengthscale, d)
        xt = rng.normal(size=d)
        X = xt + rng.normal(size=(1, d)) * ls * rng.uniform(0.5, 10)
        Z = np.stack(
            [xt + rng.uniform(-0.2, 1.2) * (X[0] - xt) + ls * rng.normal(size=d) for _ in range(2)]
        )
        cases[f"random-scales-{d}d"] = (X, xt, Z, lengthscale, 10 ** rng.uniform(-2, 2))

    # A feature switched off by an infinite lengthscale.
    d = 3
    lengthscale = np.array([0.8, np.inf, 1.6])
    xt = rng.normal(size=d)
    cases["infinite-lengthscale-3d"] = (
        rng.normal(size=(2, d)) * 2,
        xt,
        rng.normal(size=(2, d)),
        lengthscale,
        1.2,
    )

    # Everything underflows.
    cases["underflow-2d"] = (
        np.array([[3.0, 3.0]]),
        np.array([2.5, 3.2]),
        np.array([[-4.0, 0.0], [10.0, -10.0]]),
        0.01,
        1.0,
    )
    return cases


CASES = _build_cases()


def _as_float(values):
    return np.array(values, dtype=object).astype(float)


def _reference_cross(X, xt, Z, lengthscale, variance):
    """Reference ``A`` (as floats), after checking its completeness at high precision."""
    A = np.empty((X.shape[0], X.shape[1], Z.shape[0]))
    for p, x in enumerate(X):
        for n, z in enumerate(Z):
            values = ref.ig_cross(x, xt, z, lengthscale, variance)
            with mp.workdps(40):
                k_x = ref.rbf_kernel(x, z, lengthscale, variance, dps=40)
                k_xt = ref.rbf_kernel(xt, z, lengthscale, variance, dps=40)
                size = sum(abs(a) for a in values) + k_x + k_xt
                error = abs(sum(values) - (k_x - k_xt))
                assert error <= mpf(10) ** -18 * size, "reference broken"
            A[p, :, n] = _as_float(values)
    return A


def _reference_prior(X, xt, lengthscale, variance):
    """Reference ``P`` (as floats), after checking ``sum_ij P = 2 s2 (1 - exp(-a/2))``."""
    P = []
    ls = _full_lengthscale(lengthscale, X.shape[1])
    for x in X:
        values = ref.ig_prior(x, xt, lengthscale, variance)
        with mp.workdps(40):
            a = sum(
                ((mpf(xi) - mpf(ti)) / mpf(li)) ** 2
                for xi, ti, li in zip(x, xt, ls, strict=True)
                if not math.isinf(li)
            )
            expected = -2 * mpf(variance) * mpmath.expm1(-a / 2)
            total = sum(sum(row) for row in values)
            size = sum(sum(abs(e) for e in row) for row in values) * (1 + mpmath.sqrt(a))
            assert abs(total - expected) <= mpf(10) ** -18 * size, "reference broken"
        P.append(_as_float(values))
    return np.array(P)


def _describe(**arrays):
    with np.printoptions(precision=17, floatmode="maxprec"):
        return "\n".join(f"  {name} = {np.asarray(value)!r}" for name, value in arrays.items())


# -- cross term ----------------------------------------------------------------------------------
@pytest.mark.parametrize("case", list(CASES))
def test_cross_term_matches_reference(case):
    X, xt, Z, lengthscale, variance = CASES[case]
    A = RBF(lengthscale, variance).integrated_gradient_cross(X, xt, Z)
    A_ref = _reference_cross(X, xt, Z, lengthscale, variance)
    assert A.shape == A_ref.shape == (X.shape[0], X.shape[1], Z.shape[0])
    failures = []
    for p in range(X.shape[0]):
        for n in range(Z.shape[0]):
            err = np.max(np.abs(A[p, :, n] - A_ref[p, :, n]))
            scale = np.max(np.abs(A_ref[p, :, n]))
            if err > RTOL * scale + FLOOR * variance:
                failures.append(
                    f"p={p}, n={n}: rel err {err / scale:.3g}\n"
                    + _describe(
                        x=X[p],
                        baseline=xt,
                        z=Z[n],
                        lengthscale=lengthscale,
                        ours=A[p, :, n],
                        reference=A_ref[p, :, n],
                    )
                )
    assert not failures, "\n".join(failures)


def test_cross_term_is_zero_at_the_baseline():
    rng = np.random.default_rng(1)
    for d, lengthscale in [(1, 0.3), (2, np.array([1e-2, 1e2])), (5, 1.0)]:
        xt = rng.normal(size=d)
        X = np.vstack([xt, rng.normal(size=d), xt])
        Z = np.vstack([rng.normal(size=(3, d)), xt])
        A = RBF(lengthscale, 2.0).integrated_gradient_cross(X, xt, Z)
        assert np.all(A[[0, 2]] == 0.0)
        assert np.all(np.isfinite(A))


def test_cross_term_infinite_lengthscale_feature_is_exactly_zero_and_dropped():
    X, xt, Z, lengthscale, variance = CASES["infinite-lengthscale-3d"]
    A = RBF(lengthscale, variance).integrated_gradient_cross(X, xt, Z)
    assert np.all(A[:, 1, :] == 0.0)
    keep = [0, 2]
    A_reduced = RBF(lengthscale[keep], variance).integrated_gradient_cross(
        X[:, keep], xt[keep], Z[:, keep]
    )
    np.testing.assert_allclose(A[:, keep, :], A_reduced, rtol=1e-14, atol=0)


def test_isotropic_equals_ard_with_equal_lengthscales():
    rng = np.random.default_rng(2)
    X, xt, Z = rng.normal(size=(3, 4)), rng.normal(size=4), rng.normal(size=(5, 4))
    iso, ard = RBF(0.7, 1.3), RBF(np.full(4, 0.7), 1.3)
    np.testing.assert_array_equal(
        iso.integrated_gradient_cross(X, xt, Z), ard.integrated_gradient_cross(X, xt, Z)
    )
    np.testing.assert_array_equal(
        iso.integrated_gradient_prior(X, xt), ard.integrated_gradient_prior(X, xt)
    )


@pytest.mark.parametrize("case", list(CASES))
def test_cross_term_completeness(case):
    """``sum_i A[p, i, n] = k(x_p, z_n) - k(xt, z_n)``."""
    X, xt, Z, lengthscale, variance = CASES[case]
    A = RBF(lengthscale, variance).integrated_gradient_cross(X, xt, Z)
    expected = np.array(
        [
            [
                float(
                    ref.rbf_kernel(x, z, lengthscale, variance)
                    - ref.rbf_kernel(xt, z, lengthscale, variance)
                )
                for z in Z
            ]
            for x in X
        ]
    )
    np.testing.assert_allclose(A.sum(axis=1), expected, rtol=0, atol=1e-13 * variance)


def _path_geometry(x, xt, z, lengthscale):
    ls = _full_lengthscale(lengthscale, x.size)
    return (x - xt) / ls, (xt - z) / ls


# -- training point (almost) on the path, D >= 2 ------------------------------------------------
# With u = (x - xt)/l, v = (xt - z)/l, d = u/|u|: far from both ends (E0, E1 << r J0) the cross
# term is A_i ~ -s2 d_i v_perp_i r J0, proportional to the distance |v_perp| of z from the line.
# Such A are ill-conditioned: one-ulp changes of x, xt or z change them by ~eps |v| / |v_perp|
# relative. Below ~1e-7 lengthscales the 1e-10 tolerance cannot be met by any float algorithm.


def _ulp_sensitivity(x, xt, z, lengthscale, variance, A_ref):
    """Largest relative change of the reference when one input coordinate moves by one ulp."""
    worst = 0.0
    for which in range(3):
        for k in range(x.size):
            args = [x.copy(), xt.copy(), z.copy()]
            args[which][k] = np.nextafter(args[which][k], np.inf)
            moved = _as_float(ref.ig_cross(*args, lengthscale, variance))
            worst = max(worst, np.max(np.abs(moved - A_ref)) / np.max(np.abs(A_ref)))
    return worst


NEAR_PATH_CASES = [
    (  # z ~2e-8 lengthscales from the path, 11 lengthscales from the baseline
        np.array([800.6429739174608, 42.14535173712235]),
        np.array([-1.9125624836303927, 0.7579546637146332]),
        np.array([489.72475224235654, 26.11144980120124]),
        44.83796434468934,
    ),
    (  # ARD, z ~4e-6 lengthscales from the path
        np.array([-1.22918658723371, -16.872803298952295]),
        np.array([0.22380079125852775, -0.1395799857488353]),
        np.array([-0.20863628367072734, -5.119683594755639]),
        np.array([0.466238483176921, 0.48853853549557896]),
    ),
]


def test_cross_term_near_the_path_error_within_input_sensitivity():
    """Forward error no worse than a few one-ulp perturbations of the inputs would cause."""
    failures = []
    for x, xt, z, lengthscale in NEAR_PATH_CASES:
        A = RBF(lengthscale, 1.3).integrated_gradient_cross(x[None], xt, z[None])[0, :, 0]
        A_ref = _as_float(ref.ig_cross(x, xt, z, lengthscale, 1.3))
        rel = np.max(np.abs(A - A_ref)) / np.max(np.abs(A_ref))
        sensitivity = _ulp_sensitivity(x, xt, z, lengthscale, 1.3, A_ref)
        if rel > 4 * sensitivity:
            failures.append(f"rel err {rel:.3g} vs one-ulp sensitivity {sensitivity:.3g}")
    assert not failures, failures


def test_cross_term_near_the_path_error_is_at_the_rounding_level_of_v():
    """Near the path the absolute error stays below ``1e-14 s2 max(|v|, |v + u|) r J0``."""
    rng = np.random.default_rng(3)
    for _ in range(4):
        d = int(rng.integers(2, 5))
        lengthscale = 10 ** rng.uniform(-1, 1, size=d)
        xt = rng.normal(size=d)
        x = xt + lengthscale * rng.normal(size=d) * rng.uniform(5, 30)
        z = _near_path(rng, xt, x, lengthscale, rng.uniform(0.2, 0.8), 10 ** rng.uniform(-9, -5))
        variance = 1.5
        A = RBF(lengthscale, variance).integrated_gradient_cross(x[None], xt, z[None])[0, :, 0]
        A_ref = _as_float(ref.ig_cross(x, xt, z, lengthscale, variance))
        u, v = _path_geometry(x, xt, z, lengthscale)
        rJ0 = float(ref.path_integral(u, v))
        rounding = variance * max(np.linalg.norm(v), np.linalg.norm(u + v)) * rJ0
        err = np.max(np.abs(A - A_ref))
        assert err <= RTOL * np.max(np.abs(A_ref)) + 1e-14 * rounding, _describe(
            x=x, baseline=xt, z=z, lengthscale=lengthscale, ours=A, reference=A_ref
        )


# -- prior term ----------------------------------------------------------------------------------
def _prior_cases():
    rng = np.random.default_rng(7)
    cases = {}
    for name, d, lengthscale, distance in [
        ("1e-8", 3, np.array([0.3, 1.0, 4.0]), 1e-8),
        ("1e-12", 2, 0.7, 1e-12),
        ("1e-12-5d", 5, np.array([0.5, 1.0, 2.0, 0.2, 3.0]), 1e-12),
        ("moderate-1d", 1, 0.8, 1.5),
        ("moderate-2d-ard", 2, np.array([0.5, 2.0]), 1.2),
        ("moderate-5d-iso", 5, 1.3, 0.8),
        ("near-series-limit", 3, np.array([0.9, 1.1, 1.3]), math.sqrt(2.0)),
        ("far-1e2", 3, np.array([0.4, 1.0, 2.5]), 1e2),
        ("far-1e4", 2, 1.0, 1e4),
        ("lengthscale-1e-2", 2, np.array([0.01, 0.02]), 60.0),
        ("lengthscale-1e2", 3, 100.0, 0.02),
    ]:
        xt = rng.normal(size=d)
        ls = _full_lengthscale(lengthscale, d)
        X = np.stack([xt + distance * ls * _unit(rng, d) for _ in range(2)])
        cases[name] = (X, xt, lengthscale, 1.4)
    lengthscale = np.array([0.01, 0.1, 1.0, 10.0, 100.0])
    xt = rng.normal(size=5)
    cases["lengthscale-spread-5d"] = (xt + rng.normal(size=(2, 5)), xt, lengthscale, 0.3)
    lengthscale = np.array([0.8, np.inf, 1.6])
    cases["infinite-lengthscale-3d"] = (
        rng.normal(size=(2, 3)) * 2,
        rng.normal(size=3),
        lengthscale,
        2.0,
    )
    return cases


PRIOR_CASES = _prior_cases()


@pytest.mark.parametrize("case", list(PRIOR_CASES))
def test_prior_term_matches_reference(case):
    X, xt, lengthscale, variance = PRIOR_CASES[case]
    P = RBF(lengthscale, variance).integrated_gradient_prior(X, xt)
    P_ref = _reference_prior(X, xt, lengthscale, variance)
    assert P.shape == P_ref.shape
    for p in range(X.shape[0]):
        err = np.max(np.abs(P[p] - P_ref[p]))
        scale = np.max(np.abs(P_ref[p]))
        assert err <= RTOL * scale + FLOOR * variance, f"rel err {err / scale:.3g}\n" + _describe(
            x=X[p], baseline=xt, lengthscale=lengthscale, ours=P[p], reference=P_ref[p]
        )


def test_prior_reference_reduction_matches_double_integral():
    """The 1-D ``tau`` reduction in the reference agrees with the plain 2-D quadrature."""
    x, xt, lengthscale = np.array([0.3, -0.5]), np.array([0.1, 0.2]), np.array([0.4, 1.1])
    one = _as_float(ref.ig_prior(x, xt, lengthscale, 1.3))
    two = _as_float(ref.ig_prior_2d(x, xt, lengthscale, 1.3))
    np.testing.assert_allclose(one, two, rtol=1e-15, atol=0)


def test_prior_term_is_zero_at_the_baseline():
    rng = np.random.default_rng(4)
    for d, lengthscale in [(1, 0.3), (3, np.array([1e-2, 1.0, 1e2]))]:
        xt = rng.normal(size=d)
        X = np.vstack([xt, rng.normal(size=d)])
        P = RBF(lengthscale, 2.0).integrated_gradient_prior(X, xt)
        assert np.all(P[0] == 0.0)
        assert np.all(np.isfinite(P))


def test_prior_term_infinite_lengthscale_feature_is_exactly_zero_and_dropped():
    X, xt, lengthscale, variance = PRIOR_CASES["infinite-lengthscale-3d"]
    P = RBF(lengthscale, variance).integrated_gradient_prior(X, xt)
    assert np.all(P[:, 1, :] == 0.0) and np.all(P[:, :, 1] == 0.0)
    keep = [0, 2]
    P_reduced = RBF(lengthscale[keep], variance).integrated_gradient_prior(X[:, keep], xt[keep])
    np.testing.assert_allclose(P[:, keep][:, :, keep], P_reduced, rtol=1e-14, atol=0)


@pytest.mark.parametrize("case", list(PRIOR_CASES))
def test_prior_term_completeness_symmetry_and_psd(case):
    X, xt, lengthscale, variance = PRIOR_CASES[case]
    P = RBF(lengthscale, variance).integrated_gradient_prior(X, xt)
    ls = _full_lengthscale(lengthscale, X.shape[1])
    for p in range(X.shape[0]):
        a = float(np.sum(((X[p] - xt) / ls) ** 2))
        expected = -2.0 * variance * math.expm1(-a / 2)
        # Each diagonal entry u_i^2 (M0 - u_i^2 M2) cancels, for large a, from terms of size
        # about u_i^2 sqrt(2 pi / a): the rounding scale of the sum is s2 sqrt(2 pi a).
        rounding_scale = variance * (1.0 + math.sqrt(2 * math.pi * a))
        assert abs(P[p].sum() - expected) <= 1e-14 * rounding_scale, (P[p].sum(), expected)
        # Symmetric up to the rounding of the product u_i^2 u_j^2 M2 (one ulp).
        np.testing.assert_allclose(P[p], P[p].T, rtol=5e-16, atol=0)
        eigenvalues = np.linalg.eigvalsh(P[p])
        assert eigenvalues.min() >= -1e-12 * np.max(np.abs(P[p]))


# -- helpers of _gaussian_integrals ---------------------------------------------------------------
SEGMENT_ARGS = [0.0, 1e-12, 1e-6, 1e-3, 0.5, 1.999, 2.0, 2.001, 10.0, 1e3, 1e8]


def test_segment_moments_match_reference():
    M0, M2 = segment_moments(np.array(SEGMENT_ARGS))
    for a, m0, m2 in zip(SEGMENT_ARGS, M0, M2, strict=True):
        r0, r2 = float(ref.segment_m0(a)), float(ref.segment_m2(a))
        assert abs(m0 - r0) <= 1e-13 * r0, (a, m0, r0)
        assert abs(m2 - r2) <= 1e-13 * r2, (a, m2, r2)


def test_segment_moment_reference_matches_double_integral():
    for a in (0.7, 3.0):
        m0, m2 = ref.segment_moments_2d(a)
        assert abs(m0 - ref.segment_m0(a)) < mpf(10) ** -17 * m0
        assert abs(m2 - ref.segment_m2(a)) < mpf(10) ** -17 * m2


def _branch(r, z0):
    """The regime ``path_integral_unit_gaussian`` picks (as documented there)."""
    width = r / math.sqrt(2.0)
    z1, mid = z0 + width, z0 + width / 2
    if width * (abs(mid) + width) <= 1.0:
        return "short"
    if z0 >= 0:
        return "both positive"
    if z1 <= 0:
        return "both negative"
    return "straddle"


def _path_integral_grid():
    grid = []
    for r in (1e-12, 1e-6, 0.1, 0.5, 1.2):
        for z0 in (-4.0, -0.3, 0.0, 0.25, 3.0):
            grid.append((r, z0 - r / math.sqrt(8.0)))  # centred on mid = z0
    for r in (2.0, 10.0, 100.0, 1e4):
        w = r / math.sqrt(2.0)
        for z0 in (0.0, 0.05, 0.7, 3.0, 20.0, 26.0):
            grid.append((r, z0))  # both limits positive (or short, for tiny intervals)
            grid.append((r, -w - z0))  # mirror image: both negative
        for f in (0.02, 0.3, 0.5, 0.9, 0.999):
            grid.append((r, -f * w))  # straddling zero
    for r, z0 in [(0.05, 30.0), (0.05, -30.0), (3.0, 0.0), (3.0, -3 / math.sqrt(2))]:
        grid.append((r, z0))
    return grid


@pytest.mark.parametrize("h2", [0.0, 1.7, 60.0])
def test_path_integral_unit_gaussian_matches_reference(h2):
    """All four regimes, in one vectorised call; ``u = (r, 0)``, ``v = (sqrt(2) z0, sqrt(h2))``.

    The reference is built from the same float ``(r, z0, h2)`` exactly. Besides the rounding of
    ``E0`` and ``E1``, the function must form ``z1 = z0 + r / sqrt(2)`` in floating point, an
    absolute error of up to ``eps (|z0| + r)``; as ``dI/dz1 = sqrt(2) E1`` this allows
    ``eps sqrt(2) E1 (|z0| + r)`` on top of the 1e-13 relative tolerance (it matters only for
    ``r`` or ``|z0|`` in the thousands).
    """
    grid = _path_integral_grid()
    branches = {_branch(r, z0) for r, z0 in grid}
    assert branches == {"short", "both positive", "both negative", "straddle"}
    r = np.array([g[0] for g in grid])
    z0 = np.array([g[1] for g in grid])
    expected, E0, E1 = [], [], []
    with mp.workdps(40):
        for ri, z0i in grid:
            u = [mpf(ri), mpf(0)]
            v = [mpmath.sqrt(2) * mpf(z0i), mpmath.sqrt(mpf(h2))]
            expected.append(float(ref.path_integral(u, v)))
            z1 = mpf(z0i) + mpf(ri) / mpmath.sqrt(2)
            E0.append(float(mpmath.exp(-mpf(h2) / 2 - mpf(z0i) ** 2)))
            E1.append(float(mpmath.exp(-mpf(h2) / 2 - z1**2)))
    result = path_integral_unit_gaussian(r, z0, np.full_like(r, h2), np.array(E0), np.array(E1))
    expected = np.array(expected)
    z1_rounding = 4 * np.finfo(float).eps * math.sqrt(2) * np.array(E1) * (np.abs(z0) + r)
    bad = np.abs(result - expected) > 1e-13 * expected + z1_rounding + 1e-300
    assert not bad.any(), [
        (grid[k], _branch(*grid[k]), result[k], expected[k]) for k in np.flatnonzero(bad)
    ]


def test_path_integral_unit_gaussian_from_vectors():
    """``(u, v)`` in 3-D, invariants computed at high precision and rounded to float."""
    rng = np.random.default_rng(5)
    for _ in range(8):
        u = rng.normal(size=3) * 10 ** rng.uniform(-3, 1.5)
        v = rng.normal(size=3) * 10 ** rng.uniform(-1, 0.8)
        with mp.workdps(40):
            um, vm = [mpf(c) for c in u], [mpf(c) for c in v]
            r = mpmath.sqrt(sum(c * c for c in um))
            beta = sum(a * b for a, b in zip(um, vm, strict=True)) / r
            h2 = sum(b * b for b in vm) - beta**2
            E0 = mpmath.exp(-sum(b * b for b in vm) / 2)
            E1 = mpmath.exp(-sum((a + b) ** 2 for a, b in zip(um, vm, strict=True)) / 2)
            args = [np.array([float(c)]) for c in (r, beta / mpmath.sqrt(2), h2, E0, E1)]
            expected = float(ref.path_integral(u, v))
        result = path_integral_unit_gaussian(*args)[0]
        # Rounding h2 and z0 to float perturbs the result by about eps (h2/2 + 2 z0^2).
        cond = 1.0 + float(h2) / 2 + float(beta) ** 2
        assert abs(result - expected) <= 1e-15 * cond * expected, (u, v, result, expected)


def test_exp_difference_matches_reference():
    cases = [
        (1.0, 0.0),
        (0.3, 1e-300),
        (0.3, -1e-300),
        (2.0, 1e-12),
        (2.0, -1e-12),
        (1e-30, 1e-5),
        (1e-30, -1e-5),
        (5.0, 0.5),
        (5.0, -0.5),
        (1.0, 1.0),
        (1.0, -1.0),
        (1.0, 1.0000001),
        (1.0, -1.0000001),
        (0.7, 3.0),
        (1e-100, -3.0),
        (1.0, 50.0),
        (1e-30, -50.0),
        (1.0, 700.0),
        (0.0, 0.3),
        (0.0, 3.0),
    ]
    E0 = np.array([c[0] for c in cases])
    c = np.array([c[1] for c in cases])
    with mp.workdps(40):
        E1 = np.array([float(mpf(e) * mpmath.exp(-mpf(ci))) for e, ci in cases])
        expected = np.array([float(mpf(e) * -mpmath.expm1(-mpf(ci))) for e, ci in cases])
    result = exp_difference(E0, E1, c)
    # Beyond |c| = 1 the plain difference of the rounded E0, E1 loses at most about one bit.
    np.testing.assert_allclose(result, expected, rtol=1e-15, atol=0)
