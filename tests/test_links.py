"""gx.links: Gaussian expectations of classifier links against independent references."""

from __future__ import annotations

import math

import numpy as np
import pytest

from gpexplain import links
from tests.reference import link_expectations_mpmath as ref
from tests.reference import softmax_quadrature as softmax_reference

CASES = [(-3.0, 0.01), (0.4, 0.5), (-0.7, 9.0), (2.0, 25.0), (-4.0, 150.0)]
MU = np.array([0.8, -1.3])
C = np.array([0.35, -0.2])


def _joint(s2):
    """A valid joint covariance of (f, g1, g2) with Var f = s2 (c scaled to stay PSD)."""
    c = C * np.sqrt(s2)
    G = np.array([[1.0, 0.3], [0.3, 0.7]])
    return c, G


@pytest.mark.parametrize("name", ["logit", "probit"])
@pytest.mark.parametrize(("m", "s2"), CASES)
def test_binary_expectations_match_mpmath(name, m, s2):
    link = links.get_link(name)
    c, G = _joint(s2)
    mean, var = np.array([m]), np.array([s2])
    assert link.expected_response(mean, var)[0] == pytest.approx(
        ref.expected_response(name, m, s2), abs=1e-11)
    expected = ref.expected_gradient(name, m, s2, MU, c)
    np.testing.assert_allclose(link.expected_gradient(mean, var, MU[None], c[None])[0],
                               expected, rtol=0, atol=1e-11)
    second = ref.gradient_second_moment(name, m, s2, MU, c, G)
    cov = link.gradient_covariance(mean, var, MU[None], c[None], G[None])[0]
    np.testing.assert_allclose(cov, second - np.outer(expected, expected), rtol=0, atol=1e-11)


def test_gradient_moments_match_monte_carlo_over_joint_samples():
    """Monte Carlo over joint (f, g) samples: every entry within 5 standard errors."""
    rng = np.random.default_rng(1)
    m, s2 = 0.6, 1.7
    c, G = _joint(s2)
    joint = np.block([[np.array([[s2]]), c[None]], [c[:, None], G]])
    samples = rng.multivariate_normal(np.r_[m, MU], joint, size=400_000)
    f, g = samples[:, 0], samples[:, 1:]
    slope = 1.0 / (4.0 * np.cosh(f / 2.0) ** 2)
    values = slope[:, None] * g
    link = links.Logit()
    mean = link.expected_gradient([m], [s2], MU[None], c[None])[0]
    z = (values.mean(0) - mean) / (values.std(0) / np.sqrt(len(f)))
    assert np.all(np.abs(z) < 5), z
    cov = link.gradient_covariance([m], [s2], MU[None], c[None], G[None])[0]
    centred = values - mean
    products = centred[:, :, None] * centred[:, None, :]
    z_cov = (products.mean(0) - cov) / (products.std(0) / np.sqrt(len(f)))
    assert np.all(np.abs(z_cov) < 5), z_cov


def test_zero_variance_is_the_plug_in_gradient():
    link = links.Logit()
    m = np.array([0.3])
    slope = np.exp(-0.3) / (1 + np.exp(-0.3)) ** 2
    np.testing.assert_allclose(link.expected_gradient(m, [0.0], MU[None], C[None] * 0)[0],
                               slope * MU, rtol=1e-13)
    assert link.expected_response(m, [0.0])[0] == pytest.approx(1 / (1 + np.exp(-0.3)))


@pytest.mark.parametrize("name", ["logit", "probit"])
def test_taylor_is_the_corrected_eq33(name):
    """sigma'(m) mu + (s2/2) sigma'''(m) mu + c sigma''(m), derivatives by mpmath."""
    m, s2 = 0.7, 0.3
    link = links.get_link(name)
    taylor = type(link)(approximation="taylor")
    d1, d2, d3 = (float(ref.sigma_derivative(name, m, k)) for k in (1, 2, 3))
    expected = d1 * MU + 0.5 * s2 * d3 * MU + C * d2
    np.testing.assert_allclose(taylor.expected_gradient([m], [s2], MU[None], C[None])[0],
                               expected, rtol=1e-10)
    d0 = float(ref.sigma_derivative(name, m, 0))
    assert taylor.expected_response([m], [s2])[0] == pytest.approx(d0 + 0.5 * s2 * d2, rel=1e-10)


def test_taylor_errs_once_the_latent_variance_nears_one():
    exact, taylor = links.Logit(), links.Logit(approximation="taylor")
    mu, c = np.array([[1.0]]), np.array([[0.0]])
    small = [exact.expected_gradient([0.5], [s2], mu, c)[0, 0] for s2 in (0.01,)]
    close = taylor.expected_gradient([0.5], [0.01], mu, c)[0, 0]
    assert abs(close / small[0] - 1) < 1e-4
    for s2 in (1.5, 3.0):
        truth = exact.expected_gradient([0.5], [s2], mu, c)[0, 0]
        approx = taylor.expected_gradient([0.5], [s2], mu, c)[0, 0]
        assert abs(approx / truth - 1) > 0.10, (s2, approx, truth)
    # and flips the sign for s2 ~ 5: 0.25 + 2.5 sigma'''(0) = 0.25 - 0.3125 < 0
    assert taylor.expected_gradient([0.0], [5.0], mu, c)[0, 0] < 0
    assert exact.expected_gradient([0.0], [5.0], mu, c)[0, 0] > 0


# -- softmax ---------------------------------------------------------------------------------
@pytest.mark.parametrize("n_classes", [2, 3])
def test_softmax_matches_brute_force_tensor_quadrature(n_classes):
    """Response, expected gradient and gradient covariance against tensor Gauss-Legendre in
    the latents, the gradients through their conditional moments given f (no Stein's lemma,
    first derivatives of S only)."""
    rng = np.random.default_rng(n_classes)
    mean = rng.normal(size=n_classes)
    var = rng.uniform(0.2, 1.5, n_classes)
    mu = rng.normal(size=(n_classes, 2))
    c = 0.3 * rng.normal(size=(n_classes, 2)) * np.sqrt(var)[:, None]
    # Cov(g_j) = conditional part (a random PSD matrix) + c_j c_j^T / s2_j: a valid joint law
    A = rng.normal(size=(n_classes, 2, 2))
    G = (A @ np.swapaxes(A, 1, 2) + c[:, :, None] * c[:, None, :] / var[:, None, None])
    link = links.Softmax()
    for target in range(n_classes):
        response, gradient, second = softmax_reference.brute_force_moments(
            mean, var, mu, c, G, target, 200 if n_classes == 2 else 120)
        np.testing.assert_allclose(link.expected_response(mean[None], var[None])[0, target],
                                   response, atol=1e-10)
        np.testing.assert_allclose(
            link.expected_gradient(mean[None], var[None], mu[None], c[None], target)[0],
            gradient, atol=1e-9)
        np.testing.assert_allclose(
            link.gradient_covariance(mean[None], var[None], mu[None], c[None], G[None],
                                     target)[0],
            second - np.outer(gradient, gradient), atol=1e-9)


def test_two_class_softmax_is_the_logit_of_the_difference():
    """S_1(f0, f1) = sigma(f1 - f0): exact and Taylor forms both reduce to the binary link."""
    mean, var = np.array([[0.3, -0.4]]), np.array([[0.6, 0.9]])
    mu = np.array([[[0.5, -1.0], [1.2, 0.4]]])
    c = np.array([[[0.1, 0.2], [-0.3, 0.05]]])
    for approximation in ("quadrature", "taylor"):
        soft = links.Softmax(approximation=approximation)
        logit = links.Logit(approximation=approximation)
        diff_m, diff_v = mean[:, 1] - mean[:, 0], var.sum(1)
        np.testing.assert_allclose(soft.expected_response(mean, var)[:, 1],
                                   logit.expected_response(diff_m, diff_v), atol=1e-10)
        np.testing.assert_allclose(
            soft.expected_gradient(mean, var, mu, c, 1),
            logit.expected_gradient(diff_m, diff_v, mu[:, 1] - mu[:, 0], c[:, 1] + c[:, 0]),
            atol=1e-10)


def test_randomised_qmc_reports_a_standard_error_that_covers_the_exact_value():
    rng = np.random.default_rng(4)
    mean, var = rng.normal(size=(2, 3)), rng.uniform(0.2, 1.0, (2, 3))
    mu, c = rng.normal(size=(2, 3, 3)), 0.2 * rng.normal(size=(2, 3, 3))
    exact = links.Softmax().expected_gradient(mean, var, mu, c, 2)
    qmc = links.Softmax(max_tensor_classes=2)
    estimate = qmc.expected_gradient(mean, var, mu, c, 2)
    assert 0 < qmc.standard_error_ < 1e-3
    assert np.max(np.abs(estimate - exact)) < 6 * qmc.standard_error_


def test_probabilities_sum_to_one():
    mean, var = np.array([[0.1, 2.0, -1.0]]), np.array([[0.5, 2.0, 0.1]])
    assert links.Softmax().expected_response(mean, var).sum() == pytest.approx(1, abs=1e-10)


def test_bad_inputs_are_named():
    with pytest.raises(ValueError, match="var must be >= 0"):
        links.Logit().expected_response([0.0], [-1.0])
    with pytest.raises(ValueError, match="grad_cov"):
        links.Logit().expected_gradient([0.0], [1.0], [[1.0, 2.0]], [[1.0]])
    with pytest.raises(ValueError, match="target_class"):
        links.Softmax().expected_gradient([[0, 1]], [[1, 1]], np.ones((1, 2, 1)),
                                          np.ones((1, 2, 1)), 2)
    with pytest.raises(ValueError, match="approximation"):
        links.Probit(approximation="laplace")
    with pytest.raises(ValueError, match="unknown link"):
        links.get_link("tanh")
    with pytest.raises(ValueError, match="covariance"):
        links.Logit(approximation="taylor").gradient_covariance(
            [0.0], [1.0], [[1.0]], [[0.0]], [[[1.0]]])


def test_narrow_and_wide_latents_in_one_call_match_one_by_one():
    """Latent variances on both sides of the switch between Gauss-Hermite and the trapezoid
    rule, batched, equal the same points computed alone."""
    link = links.Logit()
    mean, var = np.array([0.3, -2.0, 5.0, 0.0]), np.array([0.2, 1.0, 40.0, 3.0])
    mu, c = np.tile(MU, (4, 1)), np.tile(C, (4, 1))
    together = link.expected_gradient(mean, var, mu, c)
    alone = np.vstack([link.expected_gradient(mean[i:i + 1], var[i:i + 1], mu[i:i + 1],
                                              c[i:i + 1]) for i in range(4)])
    np.testing.assert_allclose(together, alone, rtol=0, atol=1e-12)
    assert ref.expected_response("logit", 5.0, 40.0) == pytest.approx(
        link.expected_response(mean, var)[2], abs=1e-11)


# -- bivariate expectations E[sigma^(p)(a) sigma^(q)(b)] (probability-level IG covariance) ----
PAIR_CASES = [  # mean_a, mean_b, var_a, var_b, correlation
    (0.3, -0.5, 0.5, 0.8, 0.6),
    (0.3, -0.5, 0.5, 0.5, 1.0),  # the diagonal s = t of the path: a singular covariance
    (-1.2, 0.4, 0.3, 1.7, -1.0),
    (1.0, 2.0, 25.0, 16.0, 0.9),  # wide: the logit's sharp case
    (-0.5, 0.2, 64.0, 49.0, 0.99),
    (0.7, 0.7, 1e-12, 2.0, 0.5),
]


@pytest.mark.parametrize("name", ["logit", "probit"])
@pytest.mark.parametrize(("ma", "mb", "va", "vb", "rho"), PAIR_CASES)
def test_pair_expectations_match_nested_quadrature(name, ma, mb, va, vb, rho):
    """Against the nested conditional integral (composite Gauss-Legendre, hand-differentiated
    derivatives), every order the covariance uses and the response product (0, 0)."""
    link = links.get_link(name)
    cov = rho * np.sqrt(va * vb)
    orders = (*links.PAIR_ORDERS, (0, 0))
    values = link.pair_expectations(*(np.array([v]) for v in (ma, mb, va, vb, cov)),
                                    orders=orders)[:, 0]
    for value, (p, q) in zip(values, orders, strict=True):
        # the reference conditions on a: give it the wider variable unless a is degenerate
        if va >= vb:
            reference = ref.pair_expectation_float(name, p, q, ma, mb, va, vb, cov)
        else:
            reference = ref.pair_expectation_float(name, q, p, mb, ma, vb, va, cov)
        assert value == pytest.approx(reference, abs=1e-12), (p, q)


@pytest.mark.parametrize("name", ["logit", "probit"])
def test_pair_expectations_match_mpmath_at_correlation_one(name):
    """The singular case (b a function of a) against the mpmath reference."""
    ma, mb, va, vb, rho = PAIR_CASES[1]
    cov = rho * np.sqrt(va * vb)
    values = links.get_link(name).pair_expectations(
        *(np.array([v]) for v in (ma, mb, va, vb, cov)))[:, 0]
    for value, (p, q) in zip(values, links.PAIR_ORDERS, strict=True):
        assert value == pytest.approx(ref.pair_expectation(name, p, q, ma, mb, va, vb, cov),
                                      abs=1e-13)


@pytest.mark.slow
def test_pair_expectations_match_mpmath_off_the_diagonal():
    """A correlated pair against the nested mpmath quadrature (about 30 s)."""
    ma, mb, va, vb, rho = PAIR_CASES[0]
    cov = rho * np.sqrt(va * vb)
    value = links.Logit().pair_expectations(
        *(np.array([v]) for v in (ma, mb, va, vb, cov)), orders=((2, 2),))[0, 0]
    assert value == pytest.approx(ref.pair_expectation("logit", 2, 2, ma, mb, va, vb, cov),
                                  abs=1e-13)


def _logistic_derivative(order, f):
    """sigma^(order)(f) for the reference below, written from sigma alone (scalar)."""
    e = math.exp(-abs(f))
    s = 1.0 / (1.0 + e) if f >= 0 else e / (1.0 + e)
    slope = s * (1.0 - s)
    return (s, slope, slope * (1.0 - 2.0 * s), slope * (1.0 - 6.0 * slope))[order]


def _logit_pair_by_dblquad(p, q, ma, mb, va, vb, rho):
    """``E[sigma^(p)(a) sigma^(q)(b)]``: scipy's adaptive ``dblquad`` of the product times
    the bivariate normal density, over m +- 9 sd of each variable (clipped to +-40, where
    sigma' and its derivatives are below 5e-18, for p, q >= 1). Returns (value, error
    estimate)."""
    from scipy.integrate import dblquad

    sa, sb, det = math.sqrt(va), math.sqrt(vb), 1.0 - rho * rho
    norm = 1.0 / (2.0 * math.pi * sa * sb * math.sqrt(det))

    def integrand(w, u):
        x, y = (u - ma) / sa, (w - mb) / sb
        return (_logistic_derivative(p, u) * _logistic_derivative(q, w) * norm
                * math.exp(-(x * x - 2.0 * rho * x * y + y * y) / (2.0 * det)))

    def limits(m, s, order):
        reach = 40.0 if order else math.inf
        return max(m - 9.0 * s, -reach), min(m + 9.0 * s, reach)

    return dblquad(integrand, *limits(ma, sa, p), *limits(mb, sb, q), epsabs=1e-14,
                   epsrel=1e-12)


@pytest.mark.parametrize("rho", [-0.99, -0.9, -0.5, 0.0, 0.3, 0.8, 0.96, 0.975, 0.99])
@pytest.mark.parametrize(("ma", "mb", "va", "vb"), [(0.3, -0.4, 0.01, 0.02),
                                                    (-1.1, 0.8, 1.0, 0.7),
                                                    (1.5, 2.5, 100.0, 60.0)])
def test_logit_pair_expectations_match_dblquad(ma, mb, va, vb, rho):
    """Issue 27 item 9: Mehler's series (|rho| <= 0.97) and the tensor rule (above) against
    scipy's adaptive 2-D quadrature of the bivariate normal density, every order the
    covariance uses and the response product, to 1e-12 absolute (the rules' own tolerance)
    plus dblquad's error estimate (itself required below 1e-12)."""
    orders = (*links.PAIR_ORDERS, (0, 0))
    cov = rho * math.sqrt(va * vb)
    values = links.Logit().pair_expectations(
        *(np.array([v]) for v in (ma, mb, va, vb, cov)), orders=orders)[:, 0]
    for value, (p, q) in zip(values, orders, strict=True):
        reference, error = _logit_pair_by_dblquad(p, q, ma, mb, va, vb, rho)
        assert error < 1e-12
        assert abs(value - reference) <= 1e-12 + error, (p, q, value - reference)


def test_series_and_tensor_rule_agree_at_the_switch():
    """Just below and just above SERIES_CORRELATION (the series and the tensor rule) the
    expectations are continuous in the correlation to 1e-12 (their derivative in rho is
    O(0.1))."""
    from gpexplain.links.binary import SERIES_CORRELATION

    rho = SERIES_CORRELATION * np.array([1.0, 1.0 + 1e-13])
    va, vb = np.full(2, 19.0), np.full(2, 12.0)
    values = links.Logit().pair_expectations(np.full(2, 0.4), np.full(2, -0.6), va, vb,
                                             rho * np.sqrt(va * vb))
    np.testing.assert_allclose(values[:, 0], values[:, 1], rtol=0, atol=1e-12)


def test_probit_pair_response_is_the_bivariate_normal_cdf():
    """E[Phi(a) Phi(b)] = P(Z1 <= a, Z2 <= b) = Phi_2(m_a / sqrt(1 + v_a), m_b / sqrt(1 + v_b);
    cov / sqrt((1 + v_a)(1 + v_b))) (scipy's bivariate normal CDF)."""
    from scipy.stats import multivariate_normal

    ma, mb, va, vb, cov = 0.4, -0.9, 2.0, 0.7, 0.8
    value = links.Probit().pair_expectations(*(np.array([v]) for v in (ma, mb, va, vb, cov)),
                                             orders=((0, 0),))[0, 0]
    rho = cov / np.sqrt((1 + va) * (1 + vb))
    reference = multivariate_normal([0, 0], [[1, rho], [rho, 1]]).cdf(
        [ma / np.sqrt(1 + va), mb / np.sqrt(1 + vb)])
    assert value == pytest.approx(reference, abs=1e-7)  # scipy's CDF is good to ~1e-8


def test_pair_expectations_refuse_bad_input():
    one = np.array([0.0])
    with pytest.raises(ValueError, match="var_b"):
        links.Logit().pair_expectations(one, one, one + 1, one - 1, one)
    with pytest.raises(ValueError, match="same shape"):
        links.Logit().pair_expectations(one, one, one, one, np.zeros(2))
    with pytest.raises(ValueError, match="orders"):
        links.Logit().pair_expectations(one, one, one, one, one, orders=((4, 0),))


def test_taylor_warns_when_an_expected_probability_leaves_the_unit_interval():
    """Issue 27 item 21: the Taylor form sigma(m) + (s2/2) sigma''(m) reached 1.65 and -0.53
    silently. It is returned as computed (documented choice), with a warning giving the count
    and the range; a value inside [0, 1] gives none."""
    import warnings

    import mpmath

    link = links.Logit(approximation="taylor")
    mean, var = np.array([-2.0, 2.0, 0.3]), np.array([30.0, 30.0, 0.1])
    with pytest.warns(RuntimeWarning, match=r"2 of 3 expected probabilities outside \[0, 1\]"):
        values = link.expected_response(mean, var)
    sigma = [1 / (1 + mpmath.exp(-mpmath.mpf(m))) for m in mean]
    reference = [float(s + 0.5 * v * s * (1 - s) * (1 - 2 * s))
                 for s, v in zip(sigma, var, strict=True)]
    np.testing.assert_allclose(values, reference, rtol=1e-12)
    assert values[0] > 1 and values[1] < 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        link.expected_response(mean[2:], var[2:])
