"""Monte Carlo reference for probability-level integrated gradients of an exact RBF GP.

Joint posterior sample paths: (f, grad f) at the nodes of a Gauss-Legendre rule along the
path, sampled from their exact joint Gaussian (squared-exponential kernel derivatives and the
conditioning on the training data written out here, independently of gpexplain); each sample
gives ``IG_k = Delta_k sum_s w_s sigma'(f_s) d_k f_s``.
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit


def _slope(link: str, f):
    if link == "logit":
        return expit(f) * expit(-f)
    return np.exp(-0.5 * f * f) / np.sqrt(2.0 * np.pi)


def joint_path_moments(train_inputs, targets, lengthscale, variance, noise, path):
    """Mean and covariance of ``(f(g_1), .., f(g_G), d_1 f(g_1), .., d_d f(g_1), ..)`` under
    the exact GP posterior (zero prior mean), G + G d entries."""
    inv = 1.0 / np.asarray(lengthscale, float) ** 2

    def k(A, B):
        r = A[:, None, :] - B[None, :, :]
        return variance * np.exp(-0.5 * np.sum(r * r * inv, -1)), r

    n_nodes, d = path.shape
    kpp, r = k(path, path)
    value_value = kpp
    value_gradient = (kpp[:, :, None] * r * inv).reshape(n_nodes, n_nodes * d)  # d/dq_l k(p, q)
    gradient_gradient = kpp[:, :, None, None] * (
        np.diag(inv)[None, None] - r[:, :, :, None] * r[:, :, None, :] * inv[:, None] * inv)
    gradient_gradient = gradient_gradient.transpose(0, 2, 1, 3).reshape(n_nodes * d, -1)
    prior = np.block([[value_value, value_gradient],
                      [value_gradient.T, gradient_gradient]])
    kpx, rx = k(path, train_inputs)
    cross = np.vstack([kpx, (-kpx[:, :, None] * rx * inv).transpose(0, 2, 1)
                       .reshape(n_nodes * d, -1)])
    kxx, _ = k(train_inputs, train_inputs)
    system = kxx + noise * np.eye(len(train_inputs))
    mean = cross @ np.linalg.solve(system, targets)
    cov = prior - cross @ np.linalg.solve(system, cross.T)
    return mean, 0.5 * (cov + cov.T)


def integrated_gradient_samples(link, train_inputs, targets, lengthscale, variance, noise, x,
                                baseline, n_samples, seed, n_nodes=24, batch=50_000):
    """(n_samples, d) samples of the IG of ``sigma(f)`` (sigma by ``link``: logit/probit)."""
    t, w = np.polynomial.legendre.leggauss(n_nodes)
    t, w = 0.5 * (t + 1), 0.5 * w
    delta = x - baseline
    path = baseline + t[:, None] * delta
    mean, cov = joint_path_moments(train_inputs, targets, lengthscale, variance, noise, path)
    eigenvalues, vectors = np.linalg.eigh(cov)
    root = vectors * np.sqrt(np.maximum(eigenvalues, 0.0))
    rng = np.random.default_rng(seed)
    d, out = len(x), []
    for start in range(0, n_samples, batch):
        draws = mean + rng.standard_normal((min(batch, n_samples - start), len(mean))) @ root.T
        values, gradients = draws[:, :n_nodes], draws[:, n_nodes:].reshape(-1, n_nodes, d)
        out.append(delta * np.einsum("s,ps,psk->pk", w, _slope(link, values), gradients))
    return np.concatenate(out)
