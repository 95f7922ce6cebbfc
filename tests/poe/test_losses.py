"""The six POE property losses against brute-force loops and the Laplacian identities."""

import numpy as np
import pytest

import gpexplain as gx
from tests.poe.conftest import laplacian


def brute_force(W, X, G, f, S, S_tilde):
    n, d = W.shape
    r_avg = sum(S[a, b] * np.sum((W[a] - W[b]) ** 2) for a in range(n) for b in range(n))
    r_max = sum(max(np.sum((W[a] - W[b]) ** 2) for b in range(n)) for a in range(n))
    smooth = sum(
        S_tilde[p, q] * (W[a, p] - W[a, q]) ** 2
        for a in range(n) for p in range(d) for q in range(d)
    )
    return {
        "F_grad": sum(np.sum((W[a] - G[a]) ** 2) for a in range(n)),
        "F_func": sum((W[a] @ X[a] - f[a]) ** 2 for a in range(n)),
        "R_avg": r_avg,
        "R_max": r_max,
        "S": smooth,
        "C": sum(abs(W[a, p]) for a in range(n) for p in range(d)),
    }


def test_losses_match_brute_force_with_asymmetric_signed_similarities(problem):
    X, G, f, S, S_tilde = problem
    rng = np.random.default_rng(3)
    W = rng.normal(size=X.shape)
    S = S + rng.normal(size=S.shape) * 0.3  # asymmetric, some entries negative
    got = gx.poe.losses(W, X, G, f, S, S_tilde)
    want = brute_force(W, X, G, f, S, S_tilde)
    for name, value in want.items():
        assert got[name] == pytest.approx(value, rel=1e-12, abs=1e-12), name


def test_laplacian_identities(problem):
    X, G, f, S, S_tilde = problem
    W = np.random.default_rng(4).normal(size=X.shape)
    got = gx.poe.losses(W, X, G, f, S, S_tilde)
    assert got["R_avg"] == pytest.approx(2 * np.trace(W.T @ laplacian(S) @ W), rel=1e-12)
    assert got["S"] == pytest.approx(2 * np.trace(W @ laplacian(S_tilde) @ W.T), rel=1e-12)


def test_ordered_pairs_count_each_unordered_pair_twice():
    X = np.zeros((2, 2))
    W = np.array([[1.0, 0.0], [0.0, 2.0]])
    one_way = np.array([[0.0, 1.0], [0.0, 0.0]])
    both_ways = np.array([[0.0, 1.0], [1.0, 0.0]])
    assert gx.poe.losses(W, X, W, S=one_way)["R_avg"] == pytest.approx(5.0)
    assert gx.poe.losses(W, X, W, S=both_ways)["R_avg"] == pytest.approx(10.0)
    assert gx.poe.losses(W, X, W)["R_avg"] == pytest.approx(10.0)  # default uniform 1
    assert gx.poe.losses(W, X, W)["R_max"] == pytest.approx(10.0)  # each point's farthest


def test_uniform_similarity_equals_its_dense_matrix(problem):
    X, G, f, _, _ = problem
    W = np.random.default_rng(5).normal(size=X.shape)
    uniform = gx.poe.losses(W, X, G, f, gx.poe.similarity.uniform(0.7), "uniform")
    dense = gx.poe.losses(W, X, G, f, np.full((9, 9), 0.7), np.ones((3, 3)))
    for name in uniform:
        assert uniform[name] == pytest.approx(dense[name], rel=1e-12)


def test_f_func_is_none_without_values(problem):
    X, G, _, _, _ = problem
    assert gx.poe.losses(G, X, G)["F_func"] is None
    assert gx.poe.losses(G, X, G)["F_grad"] == 0.0


def test_metrics_property_losses_of_any_attribution(problem):
    X, G, f, S, S_tilde = problem
    result = gx.poe.transductive(X, G, f, S, S_tilde, {"F_grad": 1, "R_avg": 0.2})
    got = gx.metrics.property_losses(result.attribution, G, f, S, S_tilde)
    want = brute_force(result.explanations, X, G, f, S, S_tilde)
    for name, value in want.items():
        assert got[name] == pytest.approx(value, rel=1e-10), name


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"W": np.zeros((2, 3))}, "W must have the shape of X"),
        ({"gradients": np.zeros((3, 3))}, "gradients must have the shape"),
        ({"values": np.zeros(4)}, r"values must have shape \(3,\)"),
        ({"S": np.zeros((2, 2))}, r"S must have shape \(3, 3\)"),
        ({"S_tilde": np.full((2, 2), np.nan)}, "S_tilde has a NaN"),
        ({"S": "gaussian"}, "S must be None, 'uniform'"),
    ],
)
def test_bad_inputs_are_named(kwargs, message):
    arguments = {"W": np.zeros((3, 2)), "X": np.zeros((3, 2)), "gradients": np.zeros((3, 2))}
    arguments.update(kwargs)
    with pytest.raises(ValueError, match=message):
        gx.poe.losses(**arguments)


def test_objective_validates_lambdas(problem):
    X, G, f, S, S_tilde = problem
    values = gx.poe.losses(G, X, G, f, S, S_tilde)
    assert gx.poe.objective(values, {"F_func": 2.0, "C": 0.5}) == pytest.approx(
        2.0 * values["F_func"] + 0.5 * values["C"]
    )
    with pytest.raises(ValueError, match="unknown property 'F'"):
        gx.poe.objective(values, {"F": 1})
    with pytest.raises(ValueError, match="cannot be negative"):
        gx.poe.objective(values, {"R_avg": -1})
    with pytest.raises(ValueError, match="F_func loss is missing"):
        gx.poe.objective(gx.poe.losses(G, X, G), {"F_func": 1})
    with pytest.raises(TypeError, match="must be a mapping"):
        gx.poe.objective(values, [("F_grad", 1)])
