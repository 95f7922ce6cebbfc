"""The linear model of coregionalisation (LMC) posterior (issue 24) against an independent
NumPy reference: the full (N x N) covariance of the task-augmented observations built by hand
from sum_q B^q_ij k_q(x, x') and conditioned with np.linalg.solve (no library code)."""

from __future__ import annotations

import numpy as np
import pytest

import gpexplain as gx
from gpexplain.posterior.multi_output import CoregionalizedPosterior


def rbf(X1, X2, lengthscale, variance=1.0):
    """The ARD squared exponential, written here from its definition."""
    diff = (X1[:, None, :] - X2[None, :, :]) / np.asarray(lengthscale)
    return variance * np.exp(-0.5 * np.sum(diff**2, axis=-1))


def lmc_problem(seed=0, n=18, d=2, t=2):
    """Heterotopic data (each row observes one random output), two terms with different ARD
    lengthscales and coregionalisation matrices W W^T + diag(v)."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n, d))
    tasks = rng.integers(0, t, size=n)
    tasks[:t] = np.arange(t)
    lengthscales = [np.array([0.6, 1.4][:d] + [1.0] * (d - 2)),
                    np.array([2.5, 0.9][:d] + [1.5] * (d - 2))]
    matrices = []
    for _ in range(2):
        W = rng.normal(size=(t, 1))
        matrices.append(W @ W.T + np.diag(rng.uniform(0.05, 0.3, size=t)))
    y = np.sin(2 * X[:, 0]) * (tasks + 1) + 0.5 * X[:, 1] + 0.05 * rng.normal(size=n)
    noise = np.array([0.02, 0.05, 0.03][:t])[tasks]
    mean = np.array([0.3, -0.2, 0.1][:t])
    return X, tasks, y, lengthscales, matrices, noise, mean


def reference(problem, Xq):
    """Mean (m, t), joint covariance over (point, output) pairs (m t, m t), and the LML."""
    X, tasks, y, lengthscales, matrices, noise, mean = problem
    t = matrices[0].shape[0]

    def joint(X1, tasks1, X2, tasks2):
        return sum(B[np.ix_(tasks1, tasks2)] * rbf(X1, X2, ls)
                   for ls, B in zip(lengthscales, matrices, strict=True))

    K = joint(X, tasks, X, tasks) + np.diag(noise)
    m = len(Xq)
    Xs, ts = np.repeat(Xq, t, axis=0), np.tile(np.arange(t), m)  # (point, output) pairs
    cross = joint(Xs, ts, X, tasks)
    residual = y - mean[tasks]
    post_mean = mean[ts] + cross @ np.linalg.solve(K, residual)
    post_cov = joint(Xs, ts, Xs, ts) - cross @ np.linalg.solve(K, cross.T)
    sign, logdet = np.linalg.slogdet(K)
    lml = -0.5 * residual @ np.linalg.solve(K, residual) - 0.5 * logdet - 0.5 * len(y) * np.log(
        2 * np.pi)
    return post_mean.reshape(m, t), post_cov, lml


def lmc_posterior(problem, **kwargs):
    X, tasks, y, lengthscales, matrices, noise, mean = problem
    return gx.LMCPosterior(X, tasks, y, [gx.kernels.RBF(ls, 1.0) for ls in lengthscales],
                           matrices, noise, mean=mean, **kwargs)


@pytest.mark.parametrize("t", [2, 3])
def test_lmc_predictions_and_likelihood_equal_the_conditioned_joint_gaussian(t):
    problem = lmc_problem(seed=t, t=t)
    Xq = np.random.default_rng(9).uniform(-2.5, 2.5, size=(6, 2))
    posterior = lmc_posterior(problem)
    ref_mean, ref_cov, ref_lml = reference(problem, Xq)
    mean, var = posterior.predict(Xq)
    np.testing.assert_allclose(mean, ref_mean, rtol=1e-10, atol=1e-12)
    ref_var = np.diag(ref_cov).reshape(len(Xq), t)
    np.testing.assert_allclose(var, ref_var, rtol=1e-9, atol=1e-12)
    _, cov = posterior.predict(Xq, return_cov=True)  # cross-output covariance at each point
    for p in range(len(Xq)):
        block = ref_cov[p * t:(p + 1) * t, p * t:(p + 1) * t]
        np.testing.assert_allclose(cov[p], block, rtol=1e-9, atol=1e-12)
    assert np.abs(cov[:, 0, 1]).max() > 1e-3  # the outputs are correlated a posteriori
    assert posterior.log_marginal_likelihood() == pytest.approx(ref_lml, rel=1e-10)
    assert posterior.output_names == [f"y{i}" for i in range(t)] and posterior.n_components == 2


def test_lmc_marginal_is_one_output_with_its_covariance_across_points():
    problem = lmc_problem(seed=4)
    Xq = np.random.default_rng(3).uniform(-2, 2, size=(5, 2))
    posterior = lmc_posterior(problem, output_names=["yield", "cost"])
    ref_mean, ref_cov, _ = reference(problem, Xq)
    marginal = posterior.marginal("cost")
    mean, cov = marginal.predict(Xq, return_cov=True)
    np.testing.assert_allclose(mean, ref_mean[:, 1], rtol=1e-10)
    np.testing.assert_allclose(cov, ref_cov[1::2, 1::2], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(marginal.predict_mean(Xq), ref_mean[:, 1], rtol=1e-10)
    # Var[f(x) - f(xt)] against the reference's joint covariance of the two points
    both = np.vstack([Xq[:1], Xq[1:2]])
    _, pair_cov, _ = reference(problem, both)
    expected = pair_cov[1, 1] + pair_cov[3, 3] - 2 * pair_cov[1, 3]
    got = marginal.difference_variance(Xq[:1], Xq[1])
    assert got[0] == pytest.approx(expected, rel=1e-9)


def test_one_term_lmc_is_the_icm():
    X, tasks, y, lengthscales, matrices, noise, mean = lmc_problem(seed=2)
    Xq = np.random.default_rng(5).uniform(-2, 2, size=(7, 2))
    kernel = gx.kernels.RBF(lengthscales[0], 1.0)
    lmc = gx.LMCPosterior(X, tasks, y, [kernel], [matrices[0]], noise, mean=mean)
    icm = CoregionalizedPosterior(X, tasks, y, kernel, matrices[0], noise, mean=mean)
    for ours, theirs in zip(lmc.predict(Xq, return_cov=True), icm.predict(Xq, return_cov=True),
                            strict=True):
        np.testing.assert_allclose(ours, theirs, rtol=1e-12, atol=1e-14)
    assert lmc.log_marginal_likelihood() == pytest.approx(icm.log_marginal_likelihood(),
                                                          rel=1e-12)
    np.testing.assert_allclose(lmc.marginal(1).predict(Xq, return_cov=True)[1],
                               icm.marginal(1).predict(Xq, return_cov=True)[1], rtol=1e-12,
                               atol=1e-14)


@pytest.mark.parametrize(("change", "message"), [
    (lambda k, B: (k, [B[0] + np.array([[0, 0.1], [0, 0]]), B[1]]),
     "coregionalizations\\[0\\] must be finite and symmetric"),
    (lambda k, B: (k, [B[0], np.array([[1.0, 2.0], [2.0, 1.0]])]),
     "coregionalizations\\[1\\] must be positive semi-definite"),
    (lambda k, B: (k[:1], B), "one coregionalization matrix per kernel"),
    (lambda k, B: ([], []), "at least one term"),
    (lambda k, B: (k, [B[0], np.eye(3)]), "all be t x t"),
    (lambda k, B: (k, [B[0], np.ones(2)]), "coregionalizations\\[1\\] must be a square matrix"),
])
def test_lmc_refuses_bad_terms_by_name(change, message):
    X, tasks, y, lengthscales, matrices, noise, mean = lmc_problem()
    kernels, matrices = change([gx.kernels.RBF(ls, 1.0) for ls in lengthscales], matrices)
    with pytest.raises(ValueError, match=message):
        gx.LMCPosterior(X, tasks, y, kernels, matrices, noise, mean=mean)


def test_lmc_refuses_bad_tasks_and_targets_by_name():
    X, tasks, y, lengthscales, matrices, noise, mean = lmc_problem()
    kernels = [gx.kernels.RBF(ls, 1.0) for ls in lengthscales]
    with pytest.raises(ValueError, match="tasks must be integers in 0..1"):
        gx.LMCPosterior(X, tasks + 1, y, kernels, matrices, noise)
    with pytest.raises(ValueError, match="y must be 18 finite values"):
        gx.LMCPosterior(X, tasks, np.r_[y[:-1], np.nan], kernels, matrices, noise)
