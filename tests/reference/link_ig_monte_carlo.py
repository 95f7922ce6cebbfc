"""Monte Carlo reference for probability-level integrated gradients of an exact RBF GP.

Joint posterior sample paths: (f, grad f) at the nodes of a Gauss-Legendre rule along the
path, sampled from their exact joint Gaussian (squared-exponential kernel derivatives and the
conditioning on the training data written out here, independently of gpexplain); each sample
gives ``IG_k = Delta_k sum_s w_s sigma'(f_s) d_k f_s``. Softmax over independent latents
(one exact GP each): ``IG_k = Delta_k sum_s w_s sum_j d_j S_c(f_s) d_k f_js`` with
``d_j S_c = S_c (delta_jc - S_j)``.
"""

from __future__ import annotations

import numpy as np
from scipy.special import expit, softmax


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


def _path(x, baseline, n_nodes):
    """Gauss-Legendre nodes (G, d) on the straight path from baseline to x, weights (G,)."""
    t, w = np.polynomial.legendre.leggauss(n_nodes)
    return baseline + 0.5 * (t[:, None] + 1) * (x - baseline), 0.5 * w


def integrated_gradient_samples(link, train_inputs, targets, lengthscale, variance, noise, x,
                                baseline, n_samples, seed, n_nodes=24, batch=50_000):
    """(n_samples, d) samples of the IG of ``sigma(f)`` (sigma by ``link``: logit/probit)."""
    path, w = _path(x, baseline, n_nodes)
    delta = x - baseline
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


def softmax_integrated_gradient_samples(latents, target, x, baseline, n_samples, seed,
                                        n_nodes=24, batch=50_000):
    """(n_samples, d) samples of the IG of ``S_target(f_1, .., f_C)``; ``latents`` is one
    ``(train_inputs, targets, lengthscale, variance, noise)`` per class (independent GPs)."""
    path, w = _path(x, baseline, n_nodes)
    roots = []
    for latent in latents:
        mean, cov = joint_path_moments(*latent, path)
        eigenvalues, vectors = np.linalg.eigh(cov)
        roots.append((mean, vectors * np.sqrt(np.maximum(eigenvalues, 0.0))))
    rng = np.random.default_rng(seed)
    d, out = len(x), []
    for start in range(0, n_samples, batch):
        size = min(batch, n_samples - start)
        draws = np.stack([mean + rng.standard_normal((size, len(mean))) @ root.T
                          for mean, root in roots], -1)  # (size, G + G d, C)
        values = draws[:, :n_nodes]  # (size, G, C)
        gradients = draws[:, n_nodes:].reshape(size, n_nodes, d, len(latents))
        S = softmax(values, axis=-1)
        slopes = S[..., target, None] * (np.eye(len(latents))[target] - S)  # d_j S_c
        out.append((x - baseline) * np.einsum("s,psj,pskj->pk", w, slopes, gradients))
    return np.concatenate(out)


def assert_moments_match(samples, mean, cov, z_score, cov_error=0.0):
    """The sample mean (d,) and every sample covariance entry (d, d) of ``samples`` (N, d)
    within ``z_score`` standard errors (each entry's own, from the samples) of mean, cov;
    ``cov_error``, the standard error of an estimated ``cov``, is added in quadrature."""
    sample_mean = samples.mean(0)
    assert np.all(np.abs(sample_mean - mean)
                  <= z_score * samples.std(0) / np.sqrt(len(samples)))
    centred = samples - sample_mean
    products = centred[:, :, None] * centred[:, None, :]
    error = products.std(0) / np.sqrt(len(samples))
    np.testing.assert_array_less(np.abs(products.mean(0) - cov),
                                 z_score * np.hypot(error, cov_error))
