"""The squared-exponential marginal likelihood GPRegressor maximises: its value against
scipy's multivariate normal density, its analytic gradient against central differences at
high precision (mpmath), and the fit against the previous GPyTorch path from the same starts."""

from __future__ import annotations

import mpmath
import numpy as np
import pytest
from scipy.stats import multivariate_normal

import gpexplain as gx
from gpexplain.models._kernel_choices import kernel_choice
from gpexplain.models._se_likelihood import negative_log_marginal_likelihood
from gpexplain.models._standardisation import FeatureScaling
from gpexplain.models.gp_regressor import _optimise


def _data(n=25, d=3, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d))
    return X, np.sin(X[:, 0]) + 0.5 * X[:, 1] ** 2 + 0.1 * rng.normal(size=n)


def _reference_value(params, X, y, digits=40):
    """-log N(y; m 1, K) with every operation in mpmath at ``digits`` digits."""
    with mpmath.workdps(digits):
        n_lengthscales = len(params) - 3
        lengthscale = [mpmath.exp(p) for p in params[:n_lengthscales]]
        outputscale, noise = mpmath.exp(params[-3]), mpmath.exp(params[-2])
        mean = mpmath.mpf(params[-1])
        n, d = X.shape
        K = mpmath.matrix(n, n)
        for i in range(n):
            for j in range(n):
                r2 = sum(
                    ((mpmath.mpf(X[i, k]) - mpmath.mpf(X[j, k]))
                     / lengthscale[k if n_lengthscales > 1 else 0]) ** 2
                    for k in range(d)
                )
                K[i, j] = outputscale * mpmath.exp(-r2 / 2) + (noise if i == j else 0)
        r = mpmath.matrix([mpmath.mpf(v) - mean for v in y])
        L = mpmath.cholesky(K)
        alpha = mpmath.cholesky_solve(K, r)
        quadratic = sum(r[i] * alpha[i] for i in range(n))
        logdet = 2 * sum(mpmath.log(L[i, i]) for i in range(n))
        return quadratic / 2 + logdet / 2 + n * mpmath.log(2 * mpmath.pi) / 2


@pytest.mark.parametrize("ard", [True, False])
def test_value_and_gradient_against_independent_references(ard):
    X, y = _data(n=12)
    params = np.array([0.3, -0.2, 0.5, 0.4, np.log(0.05), 0.1] if ard else
                      [0.2, 0.4, np.log(0.05), 0.1])
    value, gradient = negative_log_marginal_likelihood(params, X, y)
    lengthscale = np.exp(params[:-3])
    K = gx.kernels.RBF(lengthscale if ard else float(lengthscale[0]), np.exp(params[-3]))(X, X)
    expected = -multivariate_normal(np.full(len(y), params[-1]),
                                    K + np.exp(params[-2]) * np.eye(len(y))).logpdf(y)
    assert value == pytest.approx(expected, rel=1e-10)
    # Central differences of the 40-digit reference: step 1e-12, truncation error ~1e-24.
    step = mpmath.mpf("1e-12")
    for k in range(len(params)):
        with mpmath.workdps(40):
            up = [mpmath.mpf(p) for p in params]
            down = list(up)
            up[k] += step
            down[k] -= step
            derivative = (_reference_value(up, X, y) - _reference_value(down, X, y)) / (2 * step)
        assert gradient[k] == pytest.approx(float(derivative), rel=1e-8, abs=1e-10), k


@pytest.mark.parametrize("seed", [4, 5])
def test_fit_reaches_the_previous_gpytorch_optimum_or_better(seed):
    X, y = _data(n=60, d=3, seed=seed)
    model = gx.GPRegressor(n_restarts=3).fit(X, y)
    # The previous fit (GPyTorch ExactGP + torch L-BFGS) from the same four starts.
    choice = kernel_choice("ard")
    scaling = FeatureScaling(X, np.arange(3))
    Xs, ys = scaling.features(X), (y - y.mean()) / y.std()
    starts = model._starting_points(choice, True, scaling, y.std())
    rng = np.random.default_rng([0, 1])
    old = -np.inf
    for index, start in enumerate(starts):
        (module, noise, mean), _ = _optimise(
            Xs, ys, choice.module(start, index, rng), start[2], 200, None, index, len(starts)
        )
        old = max(old, gx.ExactPosterior(
            Xs, ys, gx.kernels.as_kernel(module), noise, mean=mean
        ).log_marginal_likelihood())
    # Both optimisers stop within ~1e-9 relative of an optimum (L-BFGS tolerances).
    assert model.log_marginal_likelihood_value_ >= old - 1e-6 * abs(old), (
        model.log_marginal_likelihood_value_, old
    )


def test_isotropic_fit_returns_one_lengthscale():
    X, y = _data(n=40)
    model = gx.GPRegressor(kernel="isotropic", n_restarts=0).fit(X, y)
    lengthscale = model.kernel_.lengthscale
    # One standardised lengthscale: original ones proportional to the column spreads.
    np.testing.assert_allclose(lengthscale / X.std(0), lengthscale[0] / X.std(0)[0], rtol=1e-12)


def test_restarts_on_a_subsample_then_refined_on_all_rows():
    X, y = _data(n=120, d=3, seed=4)
    full = gx.GPRegressor(n_restarts=3).fit(X, y)
    model = gx.GPRegressor(n_restarts=3, restart_rows=40).fit(X, y)
    assert [r["rows"] for r in model.restarts_] == [40, 40, 40, 40, 120]
    assert model.restarts_[-1]["start"] == "refined"
    assert model.restarts_[-1]["log_marginal_likelihood"] == model.log_marginal_likelihood_value_
    # The refined point is the optimum every start on all rows reaches on this problem.
    assert model.log_marginal_likelihood_value_ == pytest.approx(
        full.log_marginal_likelihood_value_, rel=1e-6
    )
    np.testing.assert_allclose(model.predict(X), full.predict(X), rtol=1e-3, atol=1e-4)


def test_restart_rows_is_refused_for_kernels_fitted_through_gpytorch():
    X, y = _data(n=20)
    with pytest.raises(ValueError, match="restart_rows applies to the squared-exponential"):
        gx.GPRegressor(kernel="matern52", restart_rows=10).fit(X, y)
    with pytest.raises(Exception, match="restart_rows must be an integer >= 2"):
        gx.GPRegressor(restart_rows=1).fit(X, y)
