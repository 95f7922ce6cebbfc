"""``gx.GPRegressor(multi_output="lmc")`` (issue 24): a linear model of coregionalisation
fitted by maximising the exact log marginal likelihood, on two outputs mixing two latent
processes of different length scales (which one ICM, one shared lengthscale, cannot
represent), against the ICM fitted on the same data and a NumPy reference of its
predictions (``tests.reference.lmc``, explicit inverse)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import gpexplain as gx
from tests.reference.lmc import LMC, joint_moments


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(4)
    n = 45
    X = pd.DataFrame(rng.uniform(-3, 3, size=(n, 2)), columns=["a", "b"])
    smooth = np.sin(0.5 * X.a) + 0.3 * X.b  # long length scale
    wiggly = np.sin(3.0 * X.a) * np.cos(2.5 * X.b)  # short length scale
    Y = pd.DataFrame({"first": smooth + 0.6 * wiggly, "second": 5 + 2 * smooth - 0.8 * wiggly})
    Y += 0.02 * rng.normal(size=Y.shape)
    return X, Y


@pytest.fixture(scope="module")
def fits(data):
    X, Y = data
    lmc = gx.GPRegressor(multi_output="lmc", n_components=2).fit(X, Y)
    icm = gx.GPRegressor(multi_output="icm").fit(X, Y)
    return lmc, icm


def test_lmc_fit_reaches_at_least_the_icms_likelihood(data, fits):
    X, Y = data
    lmc, icm = fits
    posterior = lmc.posterior_
    assert isinstance(posterior, gx.LMCPosterior) and posterior.n_components == 2
    assert lmc.coregionalization_.shape == (2, 2, 2) and len(lmc.kernel_) == 2
    # Stage 1 is the ICM's fit, the same operations: the same likelihood, bit for bit.
    assert lmc.icm_log_marginal_likelihood_ == icm.log_marginal_likelihood_value_
    # Both in the standardised units of the fit; the LMC nests the ICM and starts near its
    # optimum (term 1 there, the new term small), so it should not end below it.
    assert lmc.log_marginal_likelihood_value_ >= icm.log_marginal_likelihood_value_ + 5.0, (
        lmc.log_marginal_likelihood_value_, icm.log_marginal_likelihood_value_)
    # The same likelihood in the units of y: minus n log(s_i) per output (the Jacobian).
    scales = Y.to_numpy().std(0)
    in_units = lmc.log_marginal_likelihood_value_ - len(X) * np.log(scales).sum()
    assert posterior.log_marginal_likelihood() == pytest.approx(in_units, rel=1e-8)
    # Two length scales: the terms' lengthscales of feature a differ by more than 2x.
    first, second = (kernel.lengthscale[0] for kernel in lmc.kernel_)
    assert max(first, second) > 2 * min(first, second), (first, second)


def test_lmc_model_saves_and_loads_bit_identically(data, fits, tmp_path):
    X, _ = data
    lmc, _ = fits
    gx.save(lmc, tmp_path / "lmc")
    loaded = gx.load(tmp_path / "lmc")
    assert isinstance(loaded.posterior_, gx.LMCPosterior) and loaded.n_components == 2
    for got, expected in zip(loaded.predict(X[:5], return_std=True),
                             lmc.predict(X[:5], return_std=True), strict=True):
        np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(gx.integrated_gradients(loaded, X[:2]).cov,
                                  gx.integrated_gradients(lmc, X[:2]).cov)


def test_lmc_predictions_equal_the_numpy_reference_of_its_hyperparameters(data, fits):
    X, Y = data
    lmc, _ = fits
    posterior = lmc.posterior_
    reference = LMC(posterior.train_inputs, posterior.train_tasks, posterior.train_targets,
                    [kernel.lengthscale for kernel in posterior.kernels],
                    list(posterior.coregionalizations), posterior.noise, posterior.mean)
    Xq = X.to_numpy()[:6] + 0.1
    mean, cov = joint_moments(reference, Xq)  # (2, 6), (12, 12) output-major
    predicted, std = lmc.predict(pd.DataFrame(Xq, columns=["a", "b"]), return_std=True)
    np.testing.assert_allclose(predicted, mean.T, rtol=1e-9, atol=1e-10)
    # Variances near the data are a cancellation of the prior variance (~1e-2 of it left):
    # both sides are accurate to round-off of the prior scale there.
    prior = posterior.coregionalizations.sum(0).diagonal().max()
    np.testing.assert_allclose(std**2, np.diag(cov).reshape(2, 6).T, rtol=0, atol=1e-9 * prior)
    result = gx.integrated_gradients(lmc, Xq[:2], outputs="second")
    assert result.output_names == ["second"] and result.mean.shape == (2, 1, 2)


def test_lmc_parameters_are_validated_by_name(data):
    X, Y = data
    with pytest.raises(ValueError, match="n_components applies to multi_output='lmc'"):
        gx.GPRegressor(multi_output="icm", n_components=2).fit(X, Y)
    with pytest.raises(ValueError, match="n_components"):
        gx.GPRegressor(multi_output="lmc", n_components=0).fit(X, Y)
    with pytest.raises(ValueError, match="lmc"):
        gx.GPRegressor(multi_output="lmcc").fit(X, Y)
    with pytest.raises(ValueError, match="rank must be at most the number of outputs, 2"):
        gx.GPRegressor(multi_output="lmc", rank=3).fit(X, Y)
    with pytest.raises(ValueError, match="multi_output='lmc' fits an ARD squared-exponential"):
        gx.GPRegressor(multi_output="lmc", kernel="isotropic").fit(X, Y)


def test_one_component_lmc_fit_is_the_icm_fit(data, fits):
    X, Y = data
    _, icm = fits
    one = gx.GPRegressor(multi_output="lmc", n_components=1).fit(X, Y)
    assert one.log_marginal_likelihood_value_ == icm.log_marginal_likelihood_value_
    np.testing.assert_array_equal(one.coregionalization_[0], icm.coregionalization_)
    for ours, theirs in zip(one.predict(X[:5], return_std=True),
                            icm.predict(X[:5], return_std=True), strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-12)


def test_lmc_fit_on_real_targets_reaches_at_least_the_icms_likelihood():
    """Two targets of one bundled table (Taipei real estate, 100 rows: the price per unit area
    and the number of convenience stores, from four features): the LMC (Q = 2) starts near
    the ICM's optimum and reaches at least the ICM's likelihood (measured: -33.7 against
    -132.6, standardised units; its second term has a short lengthscale, a correlation of the
    two targets at the same row that one shared kernel cannot hold)."""
    from gpexplain.datasets import load_dataset

    X, price = load_dataset("taipei-real-estate")
    features = ["X2 house age", "X3 distance to the nearest MRT station", "X5 latitude",
                "X6 longitude"]
    Y = pd.DataFrame({"price": price, "stores": X["X4 number of convenience stores"]})
    lmc = gx.GPRegressor(multi_output="lmc").fit(X[features].iloc[:100], Y.iloc[:100])
    icm = gx.GPRegressor(multi_output="icm").fit(X[features].iloc[:100], Y.iloc[:100])
    assert lmc.icm_log_marginal_likelihood_ == icm.log_marginal_likelihood_value_
    assert lmc.log_marginal_likelihood_value_ >= icm.log_marginal_likelihood_value_
    assert np.all(np.isfinite(lmc.predict(X[features].iloc[100:110])))
