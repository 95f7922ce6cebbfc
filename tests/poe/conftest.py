"""Small random POE problems shared by the tests (seeded, well-conditioned)."""

import numpy as np
import pytest


@pytest.fixture
def problem():
    rng = np.random.default_rng(11)
    n, d = 9, 3
    X = rng.normal(size=(n, d))
    G = rng.normal(size=(n, d)) * 3.0
    f = rng.normal(size=n) * 2.0
    S = np.exp(-0.5 * np.sum((X[:, None] - X[None]) ** 2, axis=2))
    S_tilde = rng.uniform(0.1, 1.0, size=(d, d))
    return X, G, f, S, S_tilde


def laplacian(S):
    """Graph Laplacian of the symmetrised S with its diagonal ignored (written out here)."""
    sym = 0.5 * (S + S.T)
    sym = sym - np.diag(np.diag(sym))
    return np.diag(sym.sum(axis=1)) - sym


def dense_objective_matrix(X, weights, S, S_tilde):
    """Hessian/2 of the quadratic objective in row-major vec(W), built from Kronecker products."""
    n, d = X.shape
    H = weights.get("F_grad", 0) * np.eye(n * d)
    H += 2 * weights.get("R_avg", 0) * np.kron(laplacian(S), np.eye(d))
    H += 2 * weights.get("S", 0) * np.kron(np.eye(n), laplacian(S_tilde))
    blocks = np.zeros((n * d, n * d))
    for i in range(n):
        blocks[i * d:(i + 1) * d, i * d:(i + 1) * d] = np.outer(X[i], X[i])
    return H + weights.get("F_func", 0) * blocks


def dense_rhs(X, G, f, weights):
    return (weights.get("F_grad", 0) * G + weights.get("F_func", 0) * f[:, None] * X).ravel()
