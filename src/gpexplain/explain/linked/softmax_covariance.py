"""Posterior covariance of softmax probability-level integrated gradients, C >= 3 classes
(issue 12): second-order Stein over pairs of path nodes, its expectations by randomised QMC.

For ``p = S_c(f_1, .., f_C)`` over independent latent GPs and the straight path
``g(s) = xt + s Delta``, a Gauss-Legendre rule (nodes s, t, weights w) gives

    IG_k = Delta_k sum_s w_s sum_i s_i(F_s) G_ik,    s_i = d_i S_c,

with ``F_s = (f_1(g(s)), .., f_C(g(s)))`` and ``G_ik = d_k f_i(g(s))``. As for binary links
(``gpexplain.explain.linked.link_covariance``), ``E[IG_k IG_l]`` is a sum over node pairs and
class pairs of ``E[phi G_ik H_jl]``, ``phi = s_i(F_s) s_j(F_t)``, ``H_jl = d_l f_j(g(t))``, and
second-order Stein over the Gaussian vector ``(F_s, F_t)`` removes the gradients without
inverting any covariance:

    E[phi G H] = E[phi] (mu_G mu_H + delta_ij Cov(G, H))
               + mu_G sum_n Cov(H, X_n) E[d_n phi] + mu_H sum_m Cov(G, X_m) E[d_m phi]
               + sum_mn Cov(G, X_m) Cov(H, X_n) E[d_m d_n phi],

where G correlates only with ``f_i(g(s))`` and ``f_i(g(t))`` (``m`` in ``{i_s, i_t}``) and H
only with ``f_j`` at both nodes (the latents are independent). The expectations left are nine
``E[u(F_s) v(F_t)]`` per node pair and class pair, u and v derivatives of S_c up to the third
(``gpexplain.links.softmax_class_derivatives``): 2C-dimensional, so they are estimated by
randomised QMC over joint samples of the latent values at all path nodes (one Gaussian of
G + 2 values per class; scrambled Sobol, ``n_qmc`` points times ``n_replicates``
independent scramblings of the ``Softmax`` link). The gradient moments (``mu``,
``Cov(G, X_m)`` and the contraction of ``Cov(G, H)`` with the pair weights) are exact, as in
the binary case (``term_path_moments``, ``term_weighted_gradient_cov``).

Each replicate gives a covariance (its mean subtracted from the same samples); the result
averages them, and their spread gives the standard error of every entry. Completeness,
``sum_kl Cov(IG_k, IG_l) = Var(S_c(x) - S_c(xt))``, is checked against the same samples (the
latents at x and xt are sampled jointly with the path): the path node count doubles (from
the count at which the mean completed, 8 .. 64) until the gap is within ``Z_COMPLETE``
standard errors of the difference (plus 1e-9 relative), and a ``CompletenessWarning``
reports a larger one. The estimate is symmetric;
it is positive semi-definite only up to its Monte Carlo error.

Cost per point and rule: ``n_qmc * n_replicates`` samples of G + 2 values per class, the
derivatives of S_c up to the third at each (C + 2 C^2 values per node), nine (C, C, G, G)
sample products, and per replicate C weighted gradient contractions: about 0.2 s per point
for C = 3 with 3 features, 1.5 s for the 10-class digits (64 features, 32 inducing points,
16 path nodes). The standard error grows with the latent uncertainty along the path (the
Stein terms weigh derivatives of S_c by ``Cov(grad f, f)``).
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy.special import log_softmax

from gpexplain.accuracy import CompletenessWarning
from gpexplain.explain.linked.link_covariance import (
    PATH_RTOL,
    term_path_moments,
    term_weighted_gradient_cov,
)
from gpexplain.functionals.quadrature import quadrature_rule
from gpexplain.links import softmax_class_derivatives

__all__ = ["softmax_integrated_gradient_covariance", "PATH_NODES", "Z_COMPLETE"]

PATH_NODES = (8, 16, 32, 64)
#: Completeness is accepted within this many standard errors of the estimated gap.
Z_COMPLETE = 4.0
_BATCH_VALUES = 2**21  # float64 values per (C, C, samples, nodes) block of derivatives


def _sqrt_psd(cov: np.ndarray) -> np.ndarray:
    """A square root R of a PSD matrix (R R^T = cov; eigenvalues below zero by round-off,
    from nearly coincident path nodes, are set to zero)."""
    values, vectors = np.linalg.eigh(0.5 * (cov + cov.T))
    return vectors * np.sqrt(np.maximum(values, 0.0))


def _pair_products(u, v):
    """``sum_n u[i, j, n, s] v[i, j, n, t]`` as (C, C, G, G); u and v broadcast over the
    class axes (a singleton stands for "the same for every i" or "every j")."""
    return np.swapaxes(u, -1, -2) @ v


def _sample_expectations(target, latents, n_nodes):
    """Sample sums over one replicate's latents (N, C, G + 2): the nine pair products (9, C,
    C, G, G), ``sum s_i(F_s)`` and ``sum d_i^2 S_c(F_s)`` (C, G), and the sums of
    ``S_c(x) - S_c(xt)`` and of its square."""
    n_samples, n_classes, _ = latents.shape
    pairs = np.zeros((9, n_classes, n_classes, n_nodes, n_nodes))
    first_sum, diagonal_sum = np.zeros((n_classes, n_nodes)), np.zeros((n_classes, n_nodes))
    ends = [0.0, 0.0]
    batch = max(1, _BATCH_VALUES // (n_classes * n_classes * n_nodes))
    classes = np.arange(n_classes)
    for start in range(0, n_samples, batch):
        f = np.swapaxes(latents[start:start + batch], 1, 2)  # (b, G + 2, C)
        first, second, third = softmax_class_derivatives(f[:, :n_nodes], target)
        diagonal = second[classes, classes]
        row_i, row_j = first[:, None], first[None]  # s_i at (i, .), s_j at (., j)
        pairs += np.stack([
            _pair_products(row_i, row_j),                       # E0: s_i(F_s) s_j(F_t)
            _pair_products(second, row_j),                      # d_j s_i(F_s) s_j(F_t)
            _pair_products(row_i, diagonal[None]),              # s_i(F_s) d_j s_j(F_t)
            _pair_products(diagonal[:, None], row_j),           # d_i s_i(F_s) s_j(F_t)
            _pair_products(row_i, second),                      # s_i(F_s) d_i s_j(F_t)
            _pair_products(third, row_j),                       # d_i d_j s_i(F_s) s_j(F_t)
            _pair_products(diagonal[:, None], diagonal[None]),  # d_i s_i(F_s) d_j s_j(F_t)
            _pair_products(second, second),                     # d_j s_i(F_s) d_i s_j(F_t)
            _pair_products(row_i, np.swapaxes(third, 0, 1)),    # s_i(F_s) d_i d_j s_j(F_t)
        ])
        first_sum += first.sum(1)
        diagonal_sum += diagonal.sum(1)
        difference = np.exp(log_softmax(f[:, -2], axis=-1)[:, target]) - np.exp(
            log_softmax(f[:, -1], axis=-1)[:, target])
        ends[0] += difference.sum()
        ends[1] += (difference * difference).sum()
    return pairs, first_sum, diagonal_sum, ends


def _second_moment(expectations, weights, mu, own, mixed, gradient_terms):
    """``sum_st w_s w_t E[(sum_i s_i(F_s) G_i)(sum_j s_j(F_t) H_j)^T]`` (d, d) by the Stein
    expansion of the module docstring; ``own[i, s] = Cov(grad f_i(s), f_i(s))``,
    ``mixed[i, s, t] = Cov(grad f_i(s), f_i(t))``, ``gradient_terms(i, W)`` the weighted
    ``sum_st W_st Cov(grad f_i(s), grad f_i(t))``."""
    pair = weights[:, None] * weights[None, :]
    weighted = expectations * pair
    # (einsum spec, left factor, right factor) of the nine terms, in the order of the pair
    # products of _sample_expectations: the mean-mean term, the four one-sided Stein terms
    # and the four two-sided ones.
    terms = (("ijst,isk,jtl->kl", mu, mu), ("ijst,isk,jtsl->kl", mu, mixed),
             ("ijst,isk,jtl->kl", mu, own), ("ijst,isk,jtl->kl", own, mu),
             ("ijst,istk,jtl->kl", mixed, mu), ("ijst,isk,jtsl->kl", own, mixed),
             ("ijst,isk,jtl->kl", own, own), ("ijst,istk,jtsl->kl", mixed, mixed),
             ("ijst,istk,jtl->kl", mixed, own))
    moment = sum(np.einsum(spec, e, left, right, optimize=True)
                 for (spec, left, right), e in zip(terms, weighted, strict=True))
    e0 = weighted[0]
    return moment + sum(gradient_terms(i, e0[i, i]) for i in range(len(mu)))


def _estimate_on_rule(link, posteriors, schemes, target, x, baseline, n_nodes):
    """Covariance (d, d), ``Var(S_c(x) - S_c(xt))``, the covariance's standard error (d, d)
    and that of the completeness gap, with an n-node path rule."""
    delta = x - baseline
    t, w = quadrature_rule("gauss-legendre", n_nodes)
    path = baseline[None, :] + t[:, None] * delta[None, :]
    points = np.vstack([path, x[None], baseline[None]])
    moments = [term_path_moments(post, scheme, path)
               for post, scheme in zip(posteriors, schemes, strict=True)]
    mu = np.stack([m[1] for m in moments])  # (C, G, d)
    mixed = np.stack([m[3] for m in moments])  # (C, G, G, d): [i, s, t] Cov(grad f_i(s), f_i(t))
    own = np.einsum("issk->isk", mixed)
    value_moments = [post.predict(points, return_cov=True) for post in posteriors]
    value_mean = np.stack([m for m, _ in value_moments])  # (C, G + 2)
    roots = np.stack([_sqrt_psd(cov) for _, cov in value_moments])  # (C, G + 2, G + 2)

    def gradient_terms(i, pair_weights):
        return term_weighted_gradient_cov(posteriors[i], schemes[i], path, moments[i][4],
                                          pair_weights)

    n_classes, dimension = value_mean.shape
    covs, gaps, second_moments, means, squares, differences = [], [], [], [], [], []
    for normal in link.scrambled_normals(n_classes * dimension):
        normal = normal.reshape(-1, n_classes, dimension)
        latents = value_mean + np.einsum("jab,njb->nja", roots, normal)
        pairs, first_sum, diagonal_sum, ends = _sample_expectations(target, latents, n_nodes)
        n = len(latents)
        moment = _second_moment(pairs / n, w, mu, own, mixed, gradient_terms)
        mean = (np.einsum("s,is,isk->k", w, first_sum / n, mu)
                + np.einsum("s,is,isk->k", w, diagonal_sum / n, own))
        difference, square = ends[0] / n, ends[1] / n
        cov = np.outer(delta, delta) * (moment - np.outer(mean, mean))
        covs.append(cov)
        gaps.append(cov.sum() - (square - difference**2))
        second_moments.append(moment)
        means.append(mean)
        squares.append(square)
        differences.append(difference)
    mean = np.mean(means, 0)
    cov = np.outer(delta, delta) * (np.mean(second_moments, 0) - np.outer(mean, mean))
    target_variance = max(float(np.mean(squares) - np.mean(differences) ** 2), 0.0)
    replicates = np.sqrt(link.n_replicates)
    return (0.5 * (cov + cov.T), target_variance, np.std(covs, 0, ddof=1) / replicates,
            float(np.std(gaps, ddof=1)) / replicates)


def softmax_integrated_gradient_covariance(link, posteriors, schemes, target, X, baseline,
                                           first_nodes: int = PATH_NODES[0]):
    """Estimated posterior covariance of the integrated gradients of ``S_c`` at each row of X.

    Parameters
    ----------
    link : gpexplain.links.Softmax
        Its ``n_qmc``, ``n_replicates`` and ``seed`` set the randomised QMC.
    posteriors : list of C Posterior
        The independent latent posteriors, in class order.
    schemes : list of C Scheme
        ``Gradient().bind(posterior.kernel, posterior.train_inputs)`` of each.
    target : int
        Index c of the explained class.
    X : ndarray (n_points, n_features)
    baseline : ndarray (n_features,)
    first_nodes : int
        The smallest path rule tried: the node count at which the mean completed (its path
        integrand is as smooth as this one). Completeness within the Monte Carlo error alone
        can accept a coarser rule whose path error hides in that error (seen on the digits:
        8 nodes 0.006 off, 3.9 standard errors).

    Returns
    -------
    cov : ndarray (n_points, n_features, n_features)
        Symmetric; PSD up to its Monte Carlo error.
    difference_variance : ndarray (n_points,)
        ``Var(S_c(x) - S_c(xt))`` estimated from the same samples.
    n_nodes : int
        The largest path node count used.
    standard_error : float
        The largest standard error of an entry of ``cov`` (from the replicates' spread).

    Warns
    -----
    gpexplain.CompletenessWarning
        ``cov.sum((1, 2))`` misses ``difference_variance`` by more than ``Z_COMPLETE``
        standard errors (plus 1e-9 relative) at the finest path rule.
    """
    n_points, n_features = X.shape
    cov = np.zeros((n_points, n_features, n_features))
    target_variance = np.zeros(n_points)
    used, largest_error = 0, 0.0
    rules = tuple(n for n in PATH_NODES if n >= first_nodes) or PATH_NODES[-1:]
    for p, x in enumerate(X):
        if np.all(x == baseline):
            continue  # every path node coincides: IG is exactly 0, so is its covariance
        for n_nodes in rules:
            cov[p], target_variance[p], error, gap_error = _estimate_on_rule(
                link, posteriors, schemes, target, x, baseline, n_nodes)
            gap = abs(cov[p].sum() - target_variance[p])
            tolerance = PATH_RTOL * target_variance[p] + Z_COMPLETE * gap_error
            if gap <= tolerance:
                break
        else:
            warnings.warn(
                f"the estimated covariance of softmax integrated gradients at point {p} sums "
                f"to Var(p(x) - p(xt)) only within {gap:.3g} (> {tolerance:.3g}, "
                f"{Z_COMPLETE:g} standard errors) with {n_nodes} path nodes.",
                CompletenessWarning, stacklevel=5,
            )
        used = max(used, n_nodes)
        largest_error = max(largest_error, float(error.max()))
    return cov, target_variance, used, largest_error
