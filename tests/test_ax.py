"""gx.from_ax and gx.ax: Ax's surrogate as a posterior (its predictions equal Ax's own, with
Ax's transforms), the search box's Sobol indices with posterior stds (against Monte Carlo over
posterior sample paths and against Ax's own Monte Carlo indices), refusals by name."""

from __future__ import annotations

import logging
import warnings

import numpy as np
import pytest
import torch

from tests.botorch_settings import unchanged_gpytorch_settings

with unchanged_gpytorch_settings():
    ax = pytest.importorskip("ax")
    from ax import Client, RangeParameterConfig  # noqa: E402

import gpexplain as gx  # noqa: E402
from gpexplain.posterior.ax import ax_adapter  # noqa: E402

LOW, HIGH = np.array([0.0, -5.0]), np.array([1.0, 10.0])


def _objective(parameters):
    return (100.0 + 30.0 * (parameters["x1"] - 0.3) ** 2 + 0.5 * (parameters["x2"] - 2.0) ** 2
            + 3.0 * parameters["x1"] * parameters["x2"])


def _client(log_scale=False, n_trials=7):
    logging.getLogger("ax").setLevel(logging.WARNING)
    client = Client(random_seed=0)
    second = (RangeParameterConfig(name="x2", parameter_type="float", bounds=(0.1, 10.0),
                                   scaling="log") if log_scale else
              RangeParameterConfig(name="x2", parameter_type="float", bounds=(-5.0, 10.0)))
    client.configure_experiment(parameters=[
        RangeParameterConfig(name="x1", parameter_type="float", bounds=(0.0, 1.0)), second,
    ])
    client.configure_optimization(objective="-loss")
    for index, parameters in client.get_next_trials(max_trials=n_trials).items():
        client.complete_trial(index, raw_data={"loss": _objective(parameters)})
    return client


@pytest.fixture(scope="module")
def client():
    return _client()


@pytest.fixture(scope="module")
def adapter(client):
    """Ax's default BoTorch adapter on the Sobol trials, fitted once (gx.from_ax fits it when
    the generation strategy has none yet: passing it saves the refit)."""
    return ax_adapter(client)


def test_predictions_equal_ax_with_its_transforms(adapter):
    from ax.core.observation import ObservationFeatures

    posterior = gx.from_ax(adapter)["loss"]
    assert posterior.feature_names == ["x1", "x2"]
    assert "StandardizeY" in adapter.transforms  # a non-trivial outcome transform is undone
    points = LOW + (HIGH - LOW) * np.random.default_rng(1).uniform(size=(6, 2))
    mean, cov = adapter.predict([ObservationFeatures(parameters={"x1": a, "x2": b})
                                 for a, b in points])
    ours_mean, ours_var = posterior.predict(points)
    np.testing.assert_allclose(ours_mean, mean["loss"], rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(ours_var, cov["loss"]["loss"], rtol=1e-8, atol=1e-8)
    # the surrogate's explanations work in Ax's units
    attribution = gx.explain_variance(posterior, points, method="ig")
    assert attribution.completeness_gap()["mean"] < 1e-8


def _first_order_by_sample_paths(posterior, n_nodes=12, n_samples=2000, seed=0):
    """V_1[f] = Var_x1(E_x2 f) over the box for posterior sample paths on a Gauss-Legendre
    grid (the first feature), and the same for the posterior mean."""
    nodes, weights = np.polynomial.legendre.leggauss(n_nodes)
    nodes, weights = 0.5 * (nodes + 1), 0.5 * weights
    grid = np.array([[LOW[0] + (HIGH[0] - LOW[0]) * a, LOW[1] + (HIGH[1] - LOW[1]) * b]
                     for a in nodes for b in nodes])
    mean, cov = posterior.predict(grid, return_cov=True)
    values, vectors = np.linalg.eigh(cov)
    root = vectors * np.sqrt(np.maximum(values, 0.0))
    rng = np.random.default_rng(seed)
    paths = mean + rng.normal(size=(n_samples, len(grid))) @ root.T  # (S, n*n)

    def first_order(f):
        f = f.reshape(*f.shape[:-1], n_nodes, n_nodes)
        marginal = f @ weights  # E over x2
        centre = marginal @ weights
        return ((marginal - centre[..., None]) ** 2) @ weights

    return first_order(paths), first_order(mean)


def test_sensitivity_stds_against_sample_paths_and_ax(adapter):
    result = gx.ax.sensitivity(adapter, "loss")
    table = result.table
    assert list(table.index) == ["x1", "x2"]
    posterior = gx.from_ax(adapter)["loss"]
    direct = gx.global_sensitivity(posterior, gx.measures.Uniform(LOW, HIGH))
    np.testing.assert_allclose(table["first_order"], direct.expected_first_order)
    samples, of_mean = _first_order_by_sample_paths(posterior)
    np.testing.assert_allclose(result.result.first_order[0], of_mean, rtol=1e-6)
    standard_error = samples.std() / np.sqrt(len(samples))
    assert abs(samples.mean() - table["first_order"].iloc[0]) < 4 * standard_error
    np.testing.assert_allclose(table["first_order_std"].iloc[0], samples.std(), rtol=0.08)
    # Ax's own (Monte Carlo) first-order indices of the mean, on the same surrogate
    from ax.utils.sensitivity.sobol_measures import ax_parameter_sens

    # Ax's estimator is Monte Carlo over torch's global generator: seeded, and with 2^12
    # samples its spread (about 0.1 at 2^10, which an unseeded run exceeded) is half the
    # tolerance.
    torch.manual_seed(0)
    theirs = ax_parameter_sens(adapter, ["loss"], order="first", signed=False,
                               num_mc_samples=2**12)
    np.testing.assert_allclose(table["first_order_index"], [theirs["loss"][n] for n in
                                                            ["x1", "x2"]], atol=0.1)
    figure = result.figure()
    assert figure.axes[0].containers  # bars with error bars


def test_log_scale_parameter_is_refused_by_name():
    client = _client(log_scale=True, n_trials=5)
    with pytest.raises(TypeError, match="'x2' is on a log scale"):
        gx.from_ax(client)


def test_older_service_api(adapter):
    """``AxClient`` (ax.service) gives the same kind of posterior."""
    from ax.service.ax_client import AxClient, ObjectiveProperties

    logging.getLogger("ax").setLevel(logging.WARNING)
    client = AxClient(random_seed=0, verbose_logging=False)
    client.create_experiment(
        name="older", objectives={"loss": ObjectiveProperties(minimize=True)},
        parameters=[{"name": "x1", "type": "range", "bounds": [0.0, 1.0]},
                    {"name": "x2", "type": "range", "bounds": [-5.0, 10.0]}])
    for _ in range(5):
        parameters, index = client.get_next_trial()
        client.complete_trial(index, raw_data={"loss": _objective(parameters)})
    posterior = gx.from_ax(client)["loss"]
    assert posterior.feature_names == ["x1", "x2"] and posterior.train_inputs.shape == (5, 2)



def test_explain_candidate_ig_and_shapley_against_the_acquisition_values():
    """The candidate Ax generated after its Sobol trials: its acquisition value equals Ax's
    acquisition function's; integrated gradients are complete to their warned gap; the
    two-feature Shapley values equal the closed form 1/2 [(v(i) - v()) + (v(12) - v(j))] on
    values of Ax's acquisition function."""
    client = _client()
    (index, parameters), = client.get_next_trials(max_trials=1).items()
    acquisition = ax_adapter(client).generator._acquisition.acqf
    candidate = np.array([parameters["x1"], parameters["x2"]])
    with warnings.catch_warnings():  # qLogNEI's quadrature gap (~4e-7 relative) is warned
        warnings.simplefilter("ignore", gx.CompletenessWarning)
        result = gx.ax.explain_candidate(client)
    total = result.total
    assert total.feature_names == ["x1", "x2"]
    np.testing.assert_allclose(total.X[0], candidate, rtol=1e-12)

    def value(points):
        with torch.no_grad():
            return acquisition(torch.as_tensor(np.atleast_2d(points))[:, None, :]).numpy()

    baseline = total.baseline
    np.testing.assert_allclose(total.prediction, value(candidate), rtol=1e-10)
    gap = abs(total.mean.sum() - (total.prediction[0] - total.baseline_prediction))
    assert gap < 1e-5 * abs(total.prediction[0] - total.baseline_prediction)
    shapley = gx.ax.explain_candidate(client, index, method="shapley").total
    v_none, v_all = value(baseline)[0], value(candidate)[0]
    v_1, v_2 = value([candidate[0], baseline[1]])[0], value([baseline[0], candidate[1]])[0]
    reference = [0.5 * ((v_1 - v_none) + (v_all - v_2)), 0.5 * ((v_2 - v_none) + (v_all - v_1))]
    np.testing.assert_allclose(shapley.mean[0], reference, rtol=1e-10,
                               atol=1e-12 * abs(v_all - v_none))
