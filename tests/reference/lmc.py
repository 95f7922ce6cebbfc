"""A linear model of coregionalisation (LMC) written with NumPy from its definition, sharing no
code with ``gpexplain.posterior.lmc`` or ``gpexplain.functionals.terms``.

``k((x, i), (x', j)) = sum_q B^q_ij k_q(x, x')`` with ``k_q`` the unit-variance ARD squared
exponential ``exp(-0.5 sum((x - x')^2 / l_q^2))``; on observations ``(x_n, task_n, y_n)``,
``K = sum_q B^q[task, task] * k_q(X, X) + diag(noise)`` is inverted explicitly.

* ``joint_moments``: mean and covariance of all outputs' function values at given points;
* ``derivative_terms``: the gradient functional applied to the kernel in closed form,
  ``d/dx_a k_q(x, z) = -k_q (x_a - z_a) / l_a^2`` and
  ``d^2/dx_a dx'_b k_q(x, x') = k_q (delta_ab / l_a^2 - (x_a - x'_a)(x_b - x'_b) / (l_a^2 l_b^2))``,
  from which the test forms gradients (at one point) and integrated gradients (Gauss-Legendre
  quadrature along the path, exact to round-off at 64 nodes for these smooth integrands).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def rbf(X1, X2, lengthscale):
    """``exp(-0.5 sum((x - x')^2 / l^2))``, (len(X1), len(X2))."""
    diff = (X1[:, None, :] - X2[None, :, :]) / np.asarray(lengthscale)
    return np.exp(-0.5 * np.sum(diff**2, axis=-1))


@dataclass
class LMC:
    X: np.ndarray
    tasks: np.ndarray
    y: np.ndarray
    lengthscales: list
    matrices: list
    noise: np.ndarray
    means: np.ndarray

    @property
    def n_outputs(self) -> int:
        return self.matrices[0].shape[0]

    def terms(self):
        return zip(self.lengthscales, self.matrices, strict=True)

    def inverse(self) -> np.ndarray:
        K = sum(B[np.ix_(self.tasks, self.tasks)] * rbf(self.X, self.X, ls)
                for ls, B in self.terms())
        return np.linalg.inv(K + np.diag(self.noise))

    def weights(self) -> np.ndarray:
        """``a = K^{-1} (y - m0[task])``."""
        return self.inverse() @ (self.y - self.means[self.tasks])


def problem(seed=0, n=30, d=3, t=2) -> LMC:
    """Heterotopic observations (each row one random output), two terms with different ARD
    lengthscales and coregionalisation matrices of opposite correlation signs."""
    rng = np.random.default_rng(seed)
    X = rng.uniform(-2, 2, size=(n, d))
    tasks = rng.integers(0, t, size=n)
    tasks[:t] = np.arange(t)
    lengthscales = [np.linspace(0.7, 1.6, d), np.linspace(2.4, 0.9, d)]
    W1, W2 = rng.normal(size=(t, 1)), rng.normal(size=(t, 1))
    W2[1:] = -np.sign(W1[1:] * W1[0] * W2[0]) * np.abs(W2[1:])  # opposite sign to term 1
    matrices = [W1 @ W1.T + np.diag(np.full(t, 0.1)), W2 @ W2.T + np.diag(np.full(t, 0.2))]
    f = [np.sin(1.5 * X[:, 0]) + 0.3 * X[:, 1], np.cos(0.5 * X[:, -1]) - 0.4 * X[:, 1] ** 2]
    y = np.array([f[task % 2][k] for k, task in enumerate(tasks)]) + 0.05 * rng.normal(size=n)
    noise = np.full(n, 0.01)
    means = np.linspace(0.2, -0.3, t)
    return LMC(X, tasks, y, lengthscales, matrices, noise, means)


def joint_moments(model: LMC, points: np.ndarray):
    """Mean (t, m) and covariance (t m, t m), output-major, of ``f_i(points)`` for all i."""
    t, m = model.n_outputs, len(points)
    cross = np.concatenate([
        sum(B[i, model.tasks][None] * rbf(points, model.X, ls) for ls, B in model.terms())
        for i in range(t)
    ])  # (t m, N)
    prior = sum(np.kron(B, rbf(points, points, ls)) for ls, B in model.terms())
    mean = np.repeat(model.means, m) + cross @ model.weights()
    cov = prior - cross @ model.inverse() @ cross.T
    return mean.reshape(t, m), 0.5 * (cov + cov.T)


def derivative_terms(model: LMC, P1: np.ndarray, P2: np.ndarray):
    """Gradient functional on the LMC's kernel, closed form.

    Returns
    -------
    cross : ndarray (t, m1, d, N)
        ``sum_q B^q[i, task_n] d/dx_a k_q(p, x_n)`` at each point p of P1.
    prior : ndarray (t, m1, d, t, m2, d)
        ``sum_q B^q_ij d^2/dx_a dx'_b k_q(p, p')`` for p in P1, p' in P2.
    """
    t = model.n_outputs
    cross, prior = 0.0, 0.0
    for ls, B in model.terms():
        inv2 = 1.0 / np.asarray(ls) ** 2
        k = rbf(P1, model.X, ls)  # (m1, N)
        dk = -(P1[:, None, :] - model.X[None]) * inv2 * k[:, :, None]  # (m1, N, d)
        cross = cross + np.stack([B[i, model.tasks][None, None, :]
                                  * np.swapaxes(dk, 1, 2) for i in range(t)])
        diff = P1[:, None, :] - P2[None, :, :]  # (m1, m2, d)
        kk = rbf(P1, P2, ls)
        mixed = kk[:, :, None, None] * (np.diag(inv2)[None, None]
                                        - (diff * inv2)[:, :, :, None] * (diff * inv2)[:, :, None])
        prior = prior + np.einsum("ij,pqab->ipajqb", B, mixed)
    return cross, prior
