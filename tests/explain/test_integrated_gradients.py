"""Integrated-gradient attributions of GP posteriors: completeness, axioms, quadrature, inputs."""

from __future__ import annotations

import warnings

import gpytorch
import numpy as np
import pandas as pd
import pytest
import torch

from gpexplain import Attribution, CompletenessWarning, ExactPosterior, integrated_gradients
from gpexplain.kernels import RBF
from tests.functionals.test_quadrature_stationary import gpytorch_rbf

LENGTHSCALE = np.array([0.9, 1.4, 2.0])
VARIANCE = 1.3
NOISE = 0.02
RULES = ("gauss-legendre", "trapezoid", "simpson", "right")


def _data(seed=0, n=40, d=3):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2.0, 2.0, size=(n, d))
    y = np.sin(1.5 * X[:, 0]) + 0.4 * X[:, -1] ** 2 + 0.05 * rng.normal(size=n)
    if d > 1:
        y = y + 0.6 * X[:, 0] * X[:, 1]
    return X, y


def _posterior(X, y, lengthscale=LENGTHSCALE, variance=VARIANCE, noise=NOISE, mean=0.0):
    return ExactPosterior(X, y, RBF(lengthscale=lengthscale, variance=variance), noise, mean=mean)


@pytest.fixture(scope="module")
def setup3():
    X, y = _data()
    posterior = _posterior(X, y, mean=0.4)
    rng = np.random.default_rng(11)
    Xq = rng.uniform(-2.5, 2.5, size=(6, 3))
    baseline = np.array([-0.3, 0.5, 0.1])
    return posterior, Xq, baseline


def _joint_difference(posterior, x, xt):
    mean, cov = posterior.predict(np.vstack([x, xt]), return_cov=True)
    return mean[0] - mean[1], cov[0, 0] + cov[1, 1] - 2.0 * cov[0, 1]


def _scale(array):
    return max(float(np.max(np.abs(array))), 1.0)


# -- completeness ----------------------------------------------------------------------------
def test_completeness_of_mean_and_covariance(setup3):
    posterior, Xq, baseline = setup3
    attr = integrated_gradients(posterior, Xq, baseline)
    assert isinstance(attr, Attribution)
    assert attr.mean.shape == (6, 3) and attr.cov.shape == (6, 3, 3)
    target = attr.prediction - attr.baseline_prediction
    np.testing.assert_allclose(attr.mean.sum(1), target, rtol=0, atol=1e-10 * _scale(target))
    total = attr.cov.sum((1, 2))
    np.testing.assert_allclose(total, attr.difference_variance, rtol=0, atol=1e-10 * VARIANCE)
    for p, x in enumerate(Xq):
        mean_diff, var_diff = _joint_difference(posterior, x, baseline)
        assert attr.mean[p].sum() == pytest.approx(mean_diff, abs=1e-10 * _scale(target))
        assert total[p] == pytest.approx(var_diff, abs=1e-10 * VARIANCE)
    gaps = attr.completeness_gap()
    assert gaps["mean"] < 1e-10 * _scale(target) and gaps["variance"] < 1e-10 * VARIANCE


def test_covariance_symmetric_and_psd(setup3):
    posterior, Xq, baseline = setup3
    attr = integrated_gradients(posterior, Xq, baseline)
    np.testing.assert_array_equal(attr.cov, np.swapaxes(attr.cov, 1, 2))
    eigenvalues = np.linalg.eigvalsh(attr.cov)
    assert eigenvalues.min() >= -1e-10 * VARIANCE
    # The posterior variance of an attribution cannot exceed its prior variance.
    prior = posterior.kernel.integrated_gradient_prior(Xq, baseline)
    assert np.all(attr.var <= np.einsum("pii->pi", prior) + 1e-12)


def test_return_cov_false_gives_same_mean(setup3):
    posterior, Xq, baseline = setup3
    full = integrated_gradients(posterior, Xq, baseline)
    light = integrated_gradients(posterior, Xq, baseline, return_cov=False)
    assert light.cov is None and light.difference_variance is None
    np.testing.assert_allclose(light.mean, full.mean, rtol=0, atol=1e-14)


def test_chunking_does_not_change_result(setup3):
    posterior, Xq, baseline = setup3
    full = integrated_gradients(posterior, Xq, baseline)
    chunked = integrated_gradients(posterior, Xq, baseline, chunk_size=4)
    np.testing.assert_allclose(chunked.mean, full.mean, rtol=0, atol=1e-14)
    np.testing.assert_allclose(chunked.cov, full.cov, rtol=0, atol=1e-14)


# -- independent checks ------------------------------------------------------------------------
def test_one_feature_attribution_is_the_difference():
    X, y = _data(seed=2, n=30, d=1)
    posterior = _posterior(X, y, lengthscale=0.7)
    Xq = np.array([[-2.2], [-0.4], [0.0], [0.9], [1.7], [3.5]])
    baseline = np.array([0.25])
    attr = integrated_gradients(posterior, Xq, baseline)
    for p, x in enumerate(Xq):
        mean_diff, var_diff = _joint_difference(posterior, x, baseline)
        assert attr.mean[p, 0] == pytest.approx(mean_diff, abs=1e-10 * _scale(y))
        assert attr.cov[p, 0, 0] == pytest.approx(var_diff, abs=1e-10 * VARIANCE)


def test_closed_form_matches_gauss_legendre_quadrature():
    X, y = _data(seed=3, n=30, d=2)
    posterior = _posterior(X, y, lengthscale=[0.8, 1.3])
    rng = np.random.default_rng(5)
    Xq = rng.uniform(-2.5, 2.5, size=(5, 2))
    baseline = np.array([0.2, -0.4])
    closed = integrated_gradients(posterior, Xq, baseline)
    quad = integrated_gradients(
        posterior, Xq, baseline, method="quadrature", rule="gauss-legendre", n_steps=64
    )
    np.testing.assert_allclose(quad.mean, closed.mean, rtol=0, atol=1e-9 * _scale(closed.mean))
    np.testing.assert_allclose(quad.cov, closed.cov, rtol=0, atol=1e-9 * VARIANCE)
    assert "quadrature" in quad.method and "closed form" in closed.method


# -- axioms ------------------------------------------------------------------------------------
def test_linearity_in_the_targets(setup3):
    posterior, Xq, baseline = setup3
    X = posterior.train_inputs
    rng = np.random.default_rng(8)
    y1, y2 = rng.normal(size=len(X)), np.cos(X[:, 1]) + X[:, 2]
    kernel = RBF(lengthscale=LENGTHSCALE, variance=VARIANCE)
    a1, a2, a12 = (
        integrated_gradients(ExactPosterior(X, y, kernel, NOISE), Xq, baseline)
        for y in (y1, y2, y1 + y2)
    )
    scale = _scale(a12.mean)
    np.testing.assert_allclose(a1.mean + a2.mean, a12.mean, rtol=0, atol=1e-10 * scale)
    np.testing.assert_allclose(a1.cov, a12.cov, rtol=0, atol=1e-14)
    np.testing.assert_allclose(a2.cov, a12.cov, rtol=0, atol=1e-14)


def test_dummy_feature_with_infinite_lengthscale():
    X, y = _data(seed=4, n=30, d=2)
    posterior = _posterior(X, y, lengthscale=[1.0, np.inf])
    Xq = np.random.default_rng(6).uniform(-2, 2, size=(5, 2))
    attr = integrated_gradients(posterior, Xq, np.array([0.3, -1.0]))
    assert np.all(attr.mean[:, 1] == 0.0)
    assert np.all(attr.cov[:, 1, :] == 0.0) and np.all(attr.cov[:, :, 1] == 0.0)
    assert np.all(attr.var[:, 0] > 0.0)
    # Completeness still holds with the remaining feature.
    target = attr.prediction - attr.baseline_prediction
    np.testing.assert_allclose(attr.mean[:, 0], target, rtol=0, atol=1e-10 * _scale(target))


def test_dummy_feature_with_infinite_lengthscale_by_quadrature():
    X, y = _data(seed=4, n=30, d=2)
    posterior = _posterior(X, y, lengthscale=[1.0, np.inf])
    Xq = np.random.default_rng(6).uniform(-2, 2, size=(3, 2))
    attr = integrated_gradients(posterior, Xq, np.array([0.3, -1.0]), method="quadrature")
    assert np.all(attr.mean[:, 1] == 0.0) and np.all(attr.var[:, 1] == 0.0)


def test_feature_at_its_baseline_value_gets_zero(setup3):
    posterior, Xq, baseline = setup3
    Xq = Xq.copy()
    Xq[:, 1] = baseline[1]
    attr = integrated_gradients(posterior, Xq, baseline)
    assert np.all(attr.mean[:, 1] == 0.0)
    assert np.all(attr.cov[:, 1, :] == 0.0) and np.all(attr.cov[:, :, 1] == 0.0)
    assert np.all(attr.var[:, [0, 2]] > 0.0)


@pytest.mark.parametrize("lengthscale", [1.1, [1.1, 1.1, 0.6]])
def test_symmetry_preserving(lengthscale):
    rng = np.random.default_rng(9)
    half = rng.uniform(-2, 2, size=(20, 3))
    swapped = half[:, [1, 0, 2]]
    y_half = np.sin(half[:, 0] + half[:, 1]) + half[:, 0] * half[:, 1] + 0.3 * half[:, 2]
    y_half = y_half + 0.2 * rng.normal(size=20)
    X = np.vstack([half, swapped])
    y = np.r_[y_half, y_half]  # each row and its (x0, x1)-swapped copy share a target
    posterior = _posterior(X, y, lengthscale=lengthscale)
    Xq = np.array([[0.7, 0.7, -0.5], [-1.2, -1.2, 1.0], [2.0, 2.0, 0.0]])
    baseline = np.array([-0.3, -0.3, 0.4])
    attr = integrated_gradients(posterior, Xq, baseline)
    scale = _scale(attr.mean)
    np.testing.assert_allclose(attr.mean[:, 0], attr.mean[:, 1], rtol=0, atol=1e-10 * scale)
    np.testing.assert_allclose(attr.var[:, 0], attr.var[:, 1], rtol=0, atol=1e-10 * VARIANCE)
    np.testing.assert_allclose(attr.cov[:, 0, 2], attr.cov[:, 1, 2], rtol=0, atol=1e-10 * VARIANCE)
    assert np.all(np.abs(attr.mean[:, 0]) > 1e-3)


def test_affine_reparametrisation_invariance(setup3):
    posterior, Xq, baseline = setup3
    X, y = posterior.train_inputs, posterior.train_targets
    scale = np.array([2.5, -0.4, 1.7])
    shift = np.array([3.0, -1.0, 0.5])
    moved = _posterior(
        X * scale + shift, y, lengthscale=LENGTHSCALE * np.abs(scale), mean=posterior.mean
    )
    original = integrated_gradients(posterior, Xq, baseline)
    transformed = integrated_gradients(moved, Xq * scale + shift, baseline * scale + shift)
    np.testing.assert_allclose(
        transformed.mean, original.mean, rtol=0, atol=1e-10 * _scale(original.mean)
    )
    np.testing.assert_allclose(transformed.cov, original.cov, rtol=0, atol=1e-10 * VARIANCE)
    np.testing.assert_allclose(transformed.prediction, original.prediction, atol=1e-10)


# -- quadrature rules --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def quad_setup():
    X, y = _data(seed=12, n=30, d=2)
    posterior = _posterior(X, y, lengthscale=[0.9, 1.5])
    Xq = np.array([[1.8, -1.5], [-2.0, 0.7], [0.4, 2.2]])
    baseline = np.array([-0.5, 0.3])
    closed = integrated_gradients(posterior, Xq, baseline)
    return posterior, Xq, baseline, closed


def _quadrature_errors(quad_setup, rule, n_steps):
    posterior, Xq, baseline, closed = quad_setup
    attr = integrated_gradients(
        posterior, Xq, baseline, method="quadrature", rule=rule, n_steps=n_steps
    )
    return (
        float(np.max(np.abs(attr.mean - closed.mean))),
        float(np.max(np.abs(attr.cov - closed.cov))),
    )


@pytest.mark.filterwarnings("ignore::gpexplain.CompletenessWarning")  # low orders
@pytest.mark.parametrize("rule", RULES)
def test_quadrature_rules_converge(quad_setup, rule):
    errors = {n: _quadrature_errors(quad_setup, rule, n) for n in (8, 32, 128)}
    for k in range(2):  # mean, covariance
        e8, e32, e128 = (errors[n][k] for n in (8, 32, 128))
        floor = 1e-12
        assert e32 < e8 or e8 < floor, (rule, k, errors)
        assert e128 < e32 or e32 < floor, (rule, k, errors)
        if rule == "trapezoid":
            assert e8 / e32 > 8.0, (rule, k, errors)
        if rule == "right":
            assert e8 / e32 > 2.5, (rule, k, errors)
    if rule == "simpson":
        assert max(errors[128]) < 1e-6
    if rule == "gauss-legendre":
        assert max(errors[32]) < 1e-9


def test_gauss_legendre_64_agrees_to_1e_9(quad_setup):
    mean_error, cov_error = _quadrature_errors(quad_setup, "gauss-legendre", 64)
    assert mean_error < 1e-9 and cov_error < 1e-9


def test_unknown_rule_and_bad_n_steps(setup3):
    posterior, Xq, baseline = setup3
    with pytest.raises(ValueError, match=r"unknown quadrature rule 'midpoint'"):
        integrated_gradients(posterior, Xq, baseline, method="quadrature", rule="midpoint")
    with pytest.raises(ValueError, match=r"n_steps must be a positive integer"):
        integrated_gradients(posterior, Xq, baseline, method="quadrature", n_steps=0)
    with pytest.raises(ValueError, match=r"unknown method 'exact'.*closed-form"):
        integrated_gradients(posterior, Xq, baseline, method="exact")


# -- baselines and inputs ----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("baseline", "expected"),
    [
        ("mean", lambda X: X.mean(0)),
        ("median", lambda X: np.median(X, 0)),
        ("zeros", lambda X: np.zeros(X.shape[1])),
        (np.array([0.5, -1.0, 2.0]), lambda X: np.array([0.5, -1.0, 2.0])),
        ([0.5, -1.0, 2.0], lambda X: np.array([0.5, -1.0, 2.0])),
    ],
)
def test_baselines(setup3, baseline, expected):
    posterior, Xq, _ = setup3
    attr = integrated_gradients(posterior, Xq, baseline)
    xt = expected(posterior.train_inputs)
    np.testing.assert_array_equal(attr.baseline, xt)
    base_mean, _ = posterior.predict(xt[None, :])
    assert attr.baseline_prediction == pytest.approx(base_mean[0], abs=1e-14)
    target = attr.prediction - attr.baseline_prediction
    np.testing.assert_allclose(attr.mean.sum(1), target, rtol=0, atol=1e-10 * _scale(target))


def test_baseline_as_pandas_series(setup3):
    posterior, Xq, _ = setup3
    series = pd.Series([0.5, -1.0, 2.0], index=["x0", "x1", "x2"])
    attr = integrated_gradients(posterior, Xq, series)
    np.testing.assert_array_equal(attr.baseline, series.to_numpy())


def test_bad_baselines(setup3):
    posterior, Xq, _ = setup3
    with pytest.raises(ValueError, match=r"unknown baseline 'average'.*mean.*median.*zeros"):
        integrated_gradients(posterior, Xq, "average")
    with pytest.raises(ValueError, match=r"baseline has 2 values but the model has 3 features"):
        integrated_gradients(posterior, Xq, [0.0, 1.0])
    with pytest.raises(ValueError, match=r"non-finite value for feature 'x1'"):
        integrated_gradients(posterior, Xq, [0.0, np.nan, 1.0])


def test_query_with_wrong_number_of_features(setup3):
    posterior, _, baseline = setup3
    with pytest.raises(ValueError, match=r"X has 2 (features|columns) but .*3"):
        integrated_gradients(posterior, np.zeros((4, 2)), baseline)
    with pytest.raises(ValueError, match=r"X has NaN"):
        integrated_gradients(posterior, np.array([[0.0, np.nan, 1.0]]), baseline)


def test_not_a_posterior():
    with pytest.raises(TypeError, match=r"expected a fitted gpexplain estimator or a posterior"):
        integrated_gradients(object(), np.zeros((1, 3)))


# -- GPyTorch kernels --------------------------------------------------------------------------
@pytest.fixture(scope="module")
def matern_setup():
    X, y = _data(seed=13, n=30, d=2)
    kernel = gpytorch.kernels.ScaleKernel(gpytorch.kernels.MaternKernel(nu=2.5, ard_num_dims=2))
    kernel = kernel.double()
    kernel.base_kernel.lengthscale = torch.tensor([0.9, 1.4], dtype=torch.float64)
    kernel.outputscale = torch.tensor(1.2, dtype=torch.float64)
    posterior = ExactPosterior(X, y, kernel, NOISE)
    Xq = np.array([[1.7, -1.3], [-1.9, 0.8], [0.35, 2.1]])
    return posterior, Xq, np.array([-0.45, 0.25])


def test_closed_form_on_matern_kernel_asks_for_quadrature(matern_setup):
    posterior, Xq, baseline = matern_setup
    with pytest.raises(ValueError, match=r"(?s)no closed-form.*method='quadrature'"):
        integrated_gradients(posterior, Xq, baseline, method="closed-form")


def test_matern_quadrature_completeness(matern_setup):
    posterior, Xq, baseline = matern_setup
    # The README promises 1e-8 at the default 64 nodes for the graded rule (measured here:
    # 1e-15 for the means, 1e-14 for the variances); this test used to allow 1e-6 at 256.
    attr = integrated_gradients(posterior, Xq, baseline, method="quadrature", n_steps=64)
    target = attr.prediction - attr.baseline_prediction
    np.testing.assert_allclose(attr.mean.sum(1), target, rtol=0, atol=1e-8 * _scale(target))
    np.testing.assert_allclose(
        attr.cov.sum((1, 2)), attr.difference_variance, rtol=0, atol=1e-8 * 1.2
    )
    assert np.linalg.eigvalsh(attr.cov).min() >= -1e-8


# -- result table ------------------------------------------------------------------------------
def test_to_frame(setup3):
    posterior, Xq, baseline = setup3
    attr = integrated_gradients(posterior, Xq, baseline)
    frame = attr.to_frame()
    assert list(frame.columns) == [
        "point",
        "feature",
        "value",
        "attribution",
        "std",
        "lower",
        "upper",
    ]
    assert len(frame) == 6 * 3
    assert not frame.duplicated(["point", "feature"]).any()
    np.testing.assert_array_equal(frame["point"], np.repeat(np.arange(6), 3))
    assert list(frame["feature"][:3]) == ["x0", "x1", "x2"]
    np.testing.assert_array_equal(frame["value"], Xq.ravel())
    np.testing.assert_array_equal(frame["attribution"], attr.mean.ravel())
    std = np.sqrt(np.einsum("pii->pi", attr.cov)).ravel()
    np.testing.assert_allclose(frame["std"], std, rtol=1e-14)
    np.testing.assert_allclose(frame["lower"], attr.mean.ravel() - 1.959964 * std, atol=1e-6)
    np.testing.assert_allclose(frame["upper"], attr.mean.ravel() + 1.959964 * std, atol=1e-6)


def test_feature_names_from_dataframe():
    X, y = _data(seed=1, n=25, d=2)
    frame = pd.DataFrame(X, columns=["age", "dose"])
    posterior = _posterior(frame, y, lengthscale=[1.0, 1.2])
    attr = integrated_gradients(posterior, frame.iloc[:2], "mean")
    assert attr.feature_names == ["age", "dose"]
    assert list(attr.to_frame()["feature"]) == ["age", "dose", "age", "dose"]


# -- numerical edge cases ----------------------------------------------------------------------
def _edge_points(baseline):
    return np.vstack(
        [
            baseline,
            baseline + 1e-10,
            baseline + np.array([1e-10, 0.0, -1e-10]),
            baseline + 100.0 * LENGTHSCALE,
            baseline - np.array([100.0, 0.0, 0.0]) * LENGTHSCALE,
        ]
    )


def test_no_nan_near_and_far_from_baseline(setup3):
    posterior, _, baseline = setup3
    attr = integrated_gradients(posterior, _edge_points(baseline), baseline)
    assert np.all(np.isfinite(attr.mean)) and np.all(np.isfinite(attr.cov))
    assert np.all(np.isfinite(attr.std)) and np.all(np.isfinite(attr.to_frame().iloc[:, 2:]))
    assert np.all(attr.mean[0] == 0.0) and np.all(attr.cov[0] == 0.0)
    assert np.max(np.abs(attr.mean[1:3])) < 1e-8
    assert np.max(np.abs(attr.cov[1:3])) < 1e-8
    target = attr.prediction - attr.baseline_prediction
    np.testing.assert_allclose(attr.mean.sum(1), target, rtol=0, atol=1e-10 * _scale(target))
    np.testing.assert_allclose(
        attr.cov.sum((1, 2)), attr.difference_variance, rtol=0, atol=1e-10 * VARIANCE
    )
    assert np.linalg.eigvalsh(attr.cov).min() >= -1e-10 * VARIANCE
    # Far away, f(x) is the prior: Var[f(x) - f(xt)] = s2 + Var[f(xt)].
    _, base_var = posterior.predict(baseline[None, :])
    assert attr.cov[3].sum() == pytest.approx(VARIANCE + base_var[0], rel=1e-9)


def test_quadrature_no_nan_near_and_far_from_baseline(setup3):
    # The graded rule does not resolve a squared exponential's bump on a path of 100
    # lengthscales with 64 nodes: finite, and said so (CompletenessWarning with the gaps);
    # near the baseline the result must be ~0.
    posterior, _, baseline = setup3
    points = _edge_points(baseline)[1:]
    with pytest.warns(CompletenessWarning, match=r"at 2 of 4 points: mean: .* up to"):
        attr = integrated_gradients(posterior, points, baseline, method="quadrature")
    assert np.all(np.isfinite(attr.mean)) and np.all(np.isfinite(attr.cov))
    assert np.max(np.abs(attr.mean[:2])) < 1e-8 and np.max(np.abs(attr.cov[:2])) < 1e-8


def test_quadrature_mean_only_at_baseline(setup3):
    posterior, Xq, baseline = setup3
    points = np.vstack([baseline, Xq[:2]])
    attr = integrated_gradients(posterior, points, baseline, method="quadrature",
                                return_cov=False)
    assert np.all(attr.mean[0] == 0.0)
    # The other rows were only checked finite: they are the mean of the full call, complete.
    full = integrated_gradients(posterior, points, baseline, method="quadrature")
    np.testing.assert_array_equal(attr.mean, full.mean)
    target = attr.prediction - attr.baseline_prediction
    np.testing.assert_allclose(attr.mean.sum(1), target, rtol=0, atol=1e-8 * _scale(target))


@pytest.mark.parametrize("alone", [False, True], ids=["in-batch", "alone"])
def test_quadrature_covariance_at_baseline(setup3, alone):
    posterior, Xq, baseline = setup3
    points = baseline[None, :] if alone else np.vstack([baseline, Xq[:2]])
    attr = integrated_gradients(posterior, points, baseline, method="quadrature")
    assert np.all(attr.mean[0] == 0.0) and np.all(attr.cov[0] == 0.0)


@pytest.mark.filterwarnings("ignore::gpexplain.CompletenessWarning")  # low orders
@pytest.mark.parametrize("rule", ["gauss-legendre", "simpson"])
def test_quadrature_mean_only_path_matches_full_path(setup3, rule):
    # The mean-only path differentiates k(., Z) alpha directly; the full path builds the
    # cross term and contracts it. Same rule, same numbers.
    posterior, Xq, baseline = setup3
    full = integrated_gradients(posterior, Xq, baseline, method="quadrature", rule=rule, n_steps=16)
    light = integrated_gradients(
        posterior, Xq, baseline, method="quadrature", rule=rule, n_steps=16, return_cov=False
    )
    np.testing.assert_allclose(light.mean, full.mean, rtol=0, atol=1e-12 * np.abs(full.mean).max())


def test_torch_and_pandas_queries_give_the_numpy_result(setup3):
    posterior, Xq, baseline = setup3
    reference = integrated_gradients(posterior, Xq, baseline)
    from_torch = integrated_gradients(posterior, torch.as_tensor(Xq), torch.as_tensor(baseline))
    from_pandas = integrated_gradients(posterior, pd.DataFrame(Xq), pd.Series(baseline))
    for other in (from_torch, from_pandas):
        np.testing.assert_array_equal(other.mean, reference.mean)
        np.testing.assert_array_equal(other.cov, reference.cov)


# -- automatic method choice -------------------------------------------------------------------
@pytest.mark.parametrize(
    "make_kernel",
    [
        lambda: RBF(lengthscale=[0.8, 1.3], variance=1.4),
        lambda: gpytorch_rbf([0.8, 1.3], 1.4),
        lambda: gpytorch_rbf([0.8, 1.3]),
        lambda: gpytorch_rbf(0.9),
    ],
    ids=["gx-RBF", "ScaleKernel(RBFKernel)", "RBFKernel", "isotropic RBFKernel"],
)
def test_auto_picks_closed_form_for_squared_exponential(make_kernel):
    X, y = _data(seed=3, n=30, d=2)
    posterior = ExactPosterior(X, y, make_kernel(), NOISE)
    Xq = np.random.default_rng(5).uniform(-2.5, 2.5, size=(4, 2))
    auto = integrated_gradients(posterior, Xq, np.array([0.2, -0.4]))
    assert auto.method == "integrated gradients (closed form)"
    quad = integrated_gradients(posterior, Xq, np.array([0.2, -0.4]), method="quadrature")
    assert "quadrature" in quad.method
    np.testing.assert_allclose(auto.mean, quad.mean, rtol=0, atol=1e-9 * _scale(auto.mean))
    np.testing.assert_allclose(auto.cov, quad.cov, rtol=0, atol=1e-9)


@pytest.mark.parametrize(
    "make_kernel",
    [
        lambda: gpytorch.kernels.MaternKernel(nu=2.5),
        lambda: gpytorch.kernels.RQKernel(),
        lambda: gpytorch_rbf([0.8], 1.4, active_dims=[1]),
        lambda: gpytorch_rbf([0.8, 1.3], 1.0) + gpytorch_rbf([2.0, 0.7], 0.5),
    ],
    ids=["matern", "rq", "rbf-active-dims", "sum-of-rbf"],
)
def test_auto_picks_quadrature_otherwise(make_kernel):
    X, y = _data(seed=3, n=30, d=2)
    posterior = ExactPosterior(X, y, make_kernel(), NOISE)
    attr = integrated_gradients(posterior, X[:3], np.array([0.2, -0.4]))
    assert attr.method == "integrated gradients (graded Gauss-Legendre quadrature, n_steps=64)"
    gaps = attr.completeness_gap()
    assert gaps["mean"] < 1e-8 and gaps["variance"] < 1e-8


# -- baseline distributions --------------------------------------------------------------------
@pytest.fixture(scope="module")
def background_setup():
    X, y = _data(seed=21, n=30, d=2)
    posterior = _posterior(X, y, lengthscale=[0.9, 1.5], mean=0.2)
    Xq = np.array([[1.8, -1.5], [-2.0, 0.7], [0.4, 2.2]])
    baselines = np.array([[-0.5, 0.3], [0.6, 1.1], [1.2, -0.9]])
    return posterior, Xq, baselines


def test_expected_ig_mean_is_average_over_baselines(background_setup):
    posterior, Xq, baselines = background_setup
    attr = integrated_gradients(posterior, Xq, baselines)
    singles = [integrated_gradients(posterior, Xq, b) for b in baselines]
    expected = np.mean([a.mean for a in singles], axis=0)
    np.testing.assert_allclose(attr.mean, expected, rtol=0, atol=1e-13 * _scale(expected))
    assert attr.baseline.shape == (3, 2)
    np.testing.assert_array_equal(attr.baseline, baselines)
    base_mean, _ = posterior.predict(baselines)
    assert attr.baseline_prediction == pytest.approx(base_mean.mean(), abs=1e-13)
    assert "expected over 3 baselines" in attr.method


def test_expected_ig_completeness(background_setup):
    posterior, Xq, baselines = background_setup
    attr = integrated_gradients(posterior, Xq, baselines)
    gaps = attr.completeness_gap()
    assert gaps["mean"] < 1e-10 and gaps["variance"] < 1e-10
    # Var[f(x) - mean_b f(xt_b)] by brute force from the joint posterior covariance.
    for p, x in enumerate(Xq):
        _, cov = posterior.predict(np.vstack([x, baselines]), return_cov=True)
        weights = np.r_[1.0, np.full(len(baselines), -1.0 / len(baselines))]
        assert attr.cov[p].sum() == pytest.approx(weights @ cov @ weights, abs=1e-10)


def test_expected_ig_covariance_against_independent_assembly(background_setup):
    # Cov[(1/B) sum_b attr_b] = (1/B^2) sum_{b,b'} (P_bb' - A_b Q A_b'^T), with every prior
    # block P_bb' from the scipy reference (adaptive double quadrature of the analytic SE
    # derivatives) and A_b from the single-baseline closed form.
    from tests.reference.ig_stationary_mpmath import leaf, prior_term

    posterior, Xq, baselines = background_setup
    attr = integrated_gradients(posterior, Xq[:1], baselines)
    kernel = posterior.kernel
    reference = [[leaf("se", kernel.lengthscale, [0, 1], kernel.variance)]]
    Z = posterior.train_inputs
    crosses = [kernel.integrated_gradient_cross(Xq[:1], b, Z)[0] for b in baselines]
    B = len(baselines)
    expected = np.zeros((2, 2))
    for a in range(B):
        for b in range(B):
            prior = np.array(prior_term(reference, Xq[0], baselines[a], baselines[b]))
            data = posterior.quadratic_form(crosses[a][None], crosses[b][None])[0]
            expected += (prior - data) / B**2
    np.testing.assert_allclose(attr.cov[0], expected, rtol=0, atol=1e-9)


def test_one_row_baseline_array_equals_vector(background_setup):
    posterior, Xq, baselines = background_setup
    vector = integrated_gradients(posterior, Xq, baselines[0])
    for row in (baselines[:1], pd.DataFrame(baselines[:1], columns=["x0", "x1"]),
                torch.as_tensor(baselines[:1])):
        table = integrated_gradients(posterior, Xq, row)
        np.testing.assert_array_equal(table.mean, vector.mean)
        np.testing.assert_array_equal(table.cov, vector.cov)
        np.testing.assert_array_equal(table.baseline, vector.baseline)
        assert table.method == vector.method


def test_expected_ig_mean_only_and_quadrature_agree(background_setup):
    posterior, Xq, baselines = background_setup
    full = integrated_gradients(posterior, Xq, baselines)
    light = integrated_gradients(posterior, Xq, baselines, return_cov=False)
    np.testing.assert_allclose(light.mean, full.mean, rtol=0, atol=1e-13)
    quad = integrated_gradients(posterior, Xq, baselines, method="quadrature")
    np.testing.assert_allclose(quad.mean, full.mean, rtol=0, atol=1e-9 * _scale(full.mean))
    np.testing.assert_allclose(quad.cov, full.cov, rtol=0, atol=1e-9)


def test_expected_ig_for_matern_kernel(matern_setup):
    posterior, Xq, baseline = matern_setup
    baselines = np.vstack([baseline, [0.9, -0.6], [-1.1, -1.4]])
    Xq = np.vstack([Xq, baselines[1]])  # one path of zero length
    attr = integrated_gradients(posterior, Xq, baselines)
    gaps = attr.completeness_gap()
    assert gaps["mean"] < 1e-8 and gaps["variance"] < 1e-8, gaps
    assert np.linalg.eigvalsh(attr.cov).min() > -1e-10


def test_bad_baseline_arrays(background_setup):
    posterior, Xq, baselines = background_setup
    with pytest.raises(ValueError, match=r"baseline row 1: baseline has a non-finite value"):
        integrated_gradients(posterior, Xq, np.array([[0.0, 1.0], [np.nan, 0.0]]))
    with pytest.raises(ValueError, match=r"baseline row 0: baseline has 3 values but the model"):
        integrated_gradients(posterior, Xq, np.zeros((2, 3)))
    with pytest.raises(ValueError, match=r"at least one row"):
        integrated_gradients(posterior, Xq, np.zeros((0, 2)))
    with pytest.raises(ValueError, match=r"\(n_baselines, 2\) array"):
        integrated_gradients(posterior, Xq, np.zeros((2, 2, 2)))


@pytest.mark.parametrize("rule", RULES)
def test_matern_half_is_refused_under_every_rule(rule):
    X, y = _data(n=10)
    module = gpytorch.kernels.ScaleKernel(gpytorch.kernels.MaternKernel(nu=0.5))
    posterior = ExactPosterior(X, y, module, 0.1)
    with pytest.raises(ValueError, match="not differentiable"):
        integrated_gradients(posterior, X[:2], rule=rule)


def test_quadrature_mean_only_path_keeps_its_digits_far_from_the_origin():
    # Found by the fuzzer: a periodic kernel on inputs near 100 (spread 1e-2) gave a mean-only
    # IG 1.9e-5 (relative) away from the mean of the full path, because the mean-only path
    # evaluated the kernel matrix through |a|^2 + |b|^2 - 2 a.b. Reference: the full path's
    # mean, which evaluates explicit pairs (and agrees with the closed form elsewhere).
    rng = np.random.default_rng(2)
    X = 100.0 + rng.uniform(-0.02, 0.02, size=(15, 1))
    kernel = gpytorch.kernels.ScaleKernel(gpytorch.kernels.PeriodicKernel()).double()
    kernel.base_kernel.lengthscale = torch.tensor(0.05, dtype=torch.float64)
    kernel.base_kernel.period_length = torch.tensor(0.03, dtype=torch.float64)
    posterior = ExactPosterior(X, np.sin(300.0 * X[:, 0]), kernel, 2e-3)
    Xq, baselines = X[:3] + 0.004, np.array([[100.012], [99.983]])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CompletenessWarning)  # Simpson over many periods
        full = integrated_gradients(posterior, Xq, baselines, rule="simpson")
        mean_only = integrated_gradients(posterior, Xq, baselines, rule="simpson",
                                         return_cov=False)
    scale = np.max(np.abs(full.mean))
    np.testing.assert_allclose(mean_only.mean, full.mean, rtol=0, atol=1e-10 * scale)
