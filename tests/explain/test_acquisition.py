"""gx.explain_acquisition: integrated gradients of BoTorch acquisition functions against a
finite-difference reference, Shapley values against the permutation formula on BoTorch's own
values, completeness, and the exact UCB split."""

from __future__ import annotations

import itertools
from math import factorial

import numpy as np
import pytest

from tests.botorch_settings import unchanged_gpytorch_settings

with unchanged_gpytorch_settings():
    botorch = pytest.importorskip("botorch")
import torch  # noqa: E402
from botorch.acquisition import (  # noqa: E402
    LogExpectedImprovement,
    ProbabilityOfImprovement,
    UpperConfidenceBound,
    qExpectedImprovement,
    qUpperConfidenceBound,
)
from botorch.models import SingleTaskGP  # noqa: E402
from botorch.models.transforms.input import Normalize  # noqa: E402
from botorch.models.transforms.outcome import Standardize  # noqa: E402
from botorch.sampling import SobolQMCNormalSampler  # noqa: E402

import gpexplain as gx  # noqa: E402

LOWER = np.array([0.0, 100.0, -5.0])
UPPER = np.array([1.0, 900.0, 5.0])


@pytest.fixture(scope="module")
def model():
    """A SingleTaskGP with transforms, hyperparameters set (no fitting: fast)."""
    rng = np.random.default_rng(0)
    X = LOWER + (UPPER - LOWER) * rng.uniform(size=(12, 3))
    unit = (X - LOWER) / (UPPER - LOWER)
    Y = 50 + 8 * np.sin(4 * unit[:, 0]) + 5 * unit[:, 1] * unit[:, 2]
    gp = SingleTaskGP(torch.tensor(X), torch.tensor(Y)[:, None], input_transform=Normalize(3),
                      outcome_transform=Standardize(1))
    gp.covar_module.lengthscale = torch.tensor([[0.4, 0.7, 0.5]], dtype=torch.float64)
    gp.likelihood.noise = torch.tensor([1e-3], dtype=torch.float64)
    return gp.eval()


def _query(n=3, seed=1):
    rng = np.random.default_rng(seed)
    return LOWER + (UPPER - LOWER) * rng.uniform(size=(n, 3))


def _sampler():
    return SobolQMCNormalSampler(torch.Size([128]), seed=0)


def _finite_difference_ig(acquisition, x, baseline, n_nodes=48):
    """IG by Gauss-Legendre over central differences of the acquisition values (no autograd)."""
    def value(points):
        with torch.no_grad():
            return acquisition(torch.as_tensor(points)[:, None, :]).numpy()

    nodes, weights = np.polynomial.legendre.leggauss(n_nodes)
    nodes, weights = 0.5 * (nodes + 1), 0.5 * weights
    path = baseline + nodes[:, None] * (x - baseline)
    step = 1e-4 * (UPPER - LOWER)
    gradient = np.stack([(value(path + step * e) - value(path - step * e)) / (2 * step[i])
                         for i, e in enumerate(np.eye(3))], axis=1)
    return (x - baseline) * (weights @ gradient)


@pytest.mark.parametrize("kind", ["ucb", "log-ei", "pi", "qucb"])
def test_ig_matches_finite_differences_and_is_complete(model, kind):
    best = float(model.outcome_transform.untransform(model.train_targets[:, None])[0].max())
    acquisition = {
        "ucb": lambda: UpperConfidenceBound(model, 2.0),
        "log-ei": lambda: LogExpectedImprovement(model, best - 2.0),
        "pi": lambda: ProbabilityOfImprovement(model, best - 2.0),
        "qucb": lambda: qUpperConfidenceBound(model, 2.0, sampler=_sampler()),
    }[kind]()
    X = _query()
    baseline = 0.5 * (LOWER + UPPER)
    result = gx.explain_acquisition(acquisition, X, baseline=baseline)
    total = result.total
    assert total.method.startswith(f"acquisition function {type(acquisition).__name__}")
    scale = np.abs(total.prediction).max() + abs(total.baseline_prediction)
    np.testing.assert_allclose(total.mean.sum(1), total.prediction - total.baseline_prediction,
                               rtol=0, atol=1e-8 * scale)
    with torch.no_grad():
        direct = acquisition(torch.as_tensor(X)[:, None, :]).numpy()
    np.testing.assert_allclose(total.prediction, direct, rtol=1e-12, atol=1e-14)
    for p, x in enumerate(X):
        reference = _finite_difference_ig(acquisition, x, baseline)
        np.testing.assert_allclose(total.mean[p], reference, rtol=1e-5,
                                   atol=1e-6 * np.abs(reference).max())


@pytest.mark.parametrize("maximize", [True, False])
def test_ucb_splits_into_exploitation_and_exploration(model, maximize):
    beta = 2.0
    acquisition = UpperConfidenceBound(model, beta, maximize=maximize)
    X = _query(seed=2)
    result = gx.explain_acquisition(acquisition, X, feature_names=["a", "b", "c"])
    assert result.split_gap() < 1e-8 * np.abs(result.total.mean).max()
    exploitation, exploration = result.exploitation, result.exploration
    assert exploitation.feature_names == ["a", "b", "c"]
    assert np.all(exploitation.std > 0) and np.allclose(exploration.cov, 0.0)
    sign = 1.0 if maximize else -1.0
    with torch.no_grad():
        posterior = model.posterior(torch.as_tensor(X))
        mean = posterior.mean.numpy().ravel()
        std = posterior.variance.sqrt().numpy().ravel()
    np.testing.assert_allclose(exploitation.prediction, sign * mean, rtol=1e-8)
    np.testing.assert_allclose(exploration.prediction, np.sqrt(beta) * std, rtol=1e-8)
    # exploitation: the closed-form IG of the mean of gx.from_botorch, with its covariance
    plain = gx.integrated_gradients(gx.from_botorch(model), X, baseline=exploitation.baseline)
    np.testing.assert_allclose(exploitation.mean, sign * plain.mean, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(exploitation.cov, plain.cov)


def test_qucb_split_and_refusals(model):
    acquisition = qUpperConfidenceBound(model, 1.5, sampler=_sampler())
    result = gx.explain_acquisition(acquisition, _query(2), baseline=0.5 * (LOWER + UPPER))
    assert result.split_gap() < 1e-8 * np.abs(result.total.mean).max()
    assert gx.explain_acquisition(acquisition, _query(2), split=False).exploitation is None
    with pytest.raises(ValueError, match="method must be one of"):
        gx.explain_acquisition(acquisition, _query(2), method="kernelshap")
    with pytest.raises(ValueError, match="feature_names"):
        gx.explain_acquisition(acquisition, _query(2), feature_names=["a"])


def test_a_kinked_acquisition_is_warned_with_its_measured_gap(model):
    """qEI takes max(0, .) of each Monte Carlo sample: kinks along the path, so the
    quadrature misses completeness, and says by how much (qLogEI's piecewise smoothing of
    the same max, C1 only, leaves ~1e-6 relative after 1024 nodes: warned likewise)."""
    best = float(model.outcome_transform.untransform(model.train_targets[:, None])[0].max())
    acquisition = qExpectedImprovement(model, best - 2.0, sampler=_sampler())
    with pytest.warns(gx.CompletenessWarning, match="misses completeness") as record:
        result = gx.explain_acquisition(acquisition, _query(1), n_steps=16, max_panels=16,
                                        baseline=0.5 * (LOWER + UPPER))
    total = result.total
    gap = abs(total.mean.sum() - (total.prediction[0] - total.baseline_prediction))
    assert f"{gap:.3g}" in str(record[0].message)


def _permutation_shapley(value, x, baseline):
    """Shapley values of S -> value(x_S, baseline_-S) as the average over all orders of each
    feature's marginal contribution (Shapley 1953), as matrices W (d, 2^d-ish hybrids) applied
    to value: returns (phi, W, hybrids) with phi = W @ value(hybrids)."""
    d = len(x)
    hybrids, index = [], {}

    def column(members):
        key = frozenset(members)
        if key not in index:
            index[key] = len(hybrids)
            hybrids.append(np.where([i in key for i in range(d)], x, baseline))
        return index[key]

    rows = []
    for order in itertools.permutations(range(d)):
        row = {}
        for k, i in enumerate(order):
            before, after = column(order[:k]), column(order[:k + 1])
            row[(i, after)] = row.get((i, after), 0.0) + 1.0
            row[(i, before)] = row.get((i, before), 0.0) - 1.0
        rows.append(row)
    W = np.zeros((d, len(hybrids)))
    for row in rows:
        for (i, j), w in row.items():
            W[i, j] += w / factorial(d)
    hybrids = np.array(hybrids)
    return W @ value(hybrids), W, hybrids


def test_shapley_values_match_the_permutation_formula_and_split_exactly(model):
    beta = 2.0
    acquisition = UpperConfidenceBound(model, beta)
    X, baseline = _query(2, seed=3), 0.5 * (LOWER + UPPER)
    result = gx.explain_acquisition(acquisition, X, baseline=baseline, method="shapley",
                                    feature_names=["a", "b", "c"])
    total, exploitation, exploration = result.total, result.exploitation, result.exploration
    assert "Shapley" in total.method and np.allclose(total.cov, 0.0)

    def ucb(points):
        with torch.no_grad():
            return acquisition(torch.as_tensor(points)[:, None, :]).numpy()

    def posterior(points):
        with torch.no_grad():
            joint = model.posterior(torch.as_tensor(points))
            return joint.mean.numpy().ravel(), joint.covariance_matrix.numpy()

    for p, x in enumerate(X):
        phi, W, hybrids = _permutation_shapley(ucb, x, baseline)
        scale = np.abs(phi).max()
        np.testing.assert_allclose(total.mean[p], phi, rtol=0, atol=1e-10 * scale)
        mean, cov = posterior(hybrids)
        np.testing.assert_allclose(exploitation.mean[p], W @ mean, rtol=0, atol=1e-9 * scale)
        reference_cov = W @ cov @ W.T
        np.testing.assert_allclose(exploitation.cov[p], reference_cov, rtol=0,
                                   atol=1e-7 * np.abs(reference_cov).max())
        std = np.sqrt(np.diag(cov))
        np.testing.assert_allclose(exploration.mean[p], np.sqrt(beta) * W @ std, rtol=0,
                                   atol=1e-9 * scale)
    np.testing.assert_allclose(total.mean.sum(1), total.prediction - total.baseline_prediction,
                               rtol=0, atol=1e-12 * np.abs(total.prediction).max())
    assert result.split_gap() < 1e-10 * np.abs(total.mean).max()


def test_monte_carlo_shapley_values_split_and_too_many_features_are_refused(model):
    acquisition = qUpperConfidenceBound(model, 1.5, sampler=_sampler())
    result = gx.explain_acquisition(acquisition, _query(2), method="shapley")
    assert result.split_gap() < 1e-10 * np.abs(result.total.mean).max()
    wide = SingleTaskGP(torch.rand(5, 17, dtype=torch.float64),
                        torch.rand(5, 1, dtype=torch.float64)).eval()
    with pytest.raises(ValueError, match="2\\^17 evaluations per point"):
        gx.explain_acquisition(UpperConfidenceBound(wide, 2.0), np.full((1, 17), 0.5),
                               baseline=np.zeros(17), method="shapley", split=False)
