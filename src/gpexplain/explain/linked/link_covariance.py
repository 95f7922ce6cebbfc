"""Posterior covariance of probability-level integrated gradients, binary links (issue 12).

For ``p = sigma(f)`` and the straight path ``g(s) = xt + s Delta``, ``Delta = x - xt``,

    IG_k = Delta_k int_0^1 sigma'(f(g(s))) d_k f(g(s)) ds

is not Gaussian, but its second moments are exact Gaussian expectations. With a Gauss-Legendre
rule (nodes s, t, weights w) along the path, ``a = f(g(s))``, ``b = f(g(t))``,
``G_k = d_k f(g(s))``, ``H_l = d_l f(g(t))`` and ``phi(a, b) = sigma'(a) sigma'(b)``,

    Cov(IG_k, IG_l) = Delta_k Delta_l sum_st w_s w_t E[phi G_k H_l] - E[IG_k] E[IG_l],

and (a, b, G_k, H_l) are jointly Gaussian, so second-order Stein (Gaussian integration by
parts, no inverse of the singular Cov(a, b) at s = t) gives

    E[phi G_k H_l] = E[phi] (Cov(G_k, H_l) + mu_k mu_l)
                   + mu_k sum_i Cov(H_l, i) E[d_i phi] + mu_l sum_i Cov(G_k, i) E[d_i phi]
                   + sum_{i, j in {a, b}} Cov(G_k, i) Cov(H_l, j) E[d_i d_j phi],

whose expectations are the six bivariate ``E[sigma^(p)(a) sigma^(q)(b)]`` of
``gpexplain.links.PAIR_ORDERS`` (closed form for probit, converged quadrature for logit). The
joint moments across path nodes come from the representer form: ``Cov(f(s), f(t))``,
``Cov(d_k f(s), f(t))`` (the gradient functional's cross term, with the path nodes as basis
points, for the prior part) and ``sum_st W_st Cov(d_k f(s), d_l f(t))`` contracted with the
pair weights before it is formed (``RBF.weighted_gradient_prior`` in closed form; for
GPyTorch kernels autograd at distinct nodes, ``functionals.quadrature.weighted_pair_hessian``,
and the derivative recursion on the diagonal s = t, where autograd fails).

Completeness of the covariance, ``sum_kl Cov(IG_k, IG_l) = Var(sigma(f(x)) - sigma(f(xt)))``
(a bivariate expectation computed separately), is the convergence check of the path rule:
the node count doubles (8 .. 128) until it holds to 1e-9 relative, point by point; the driver
then reports any remaining gap through ``gpexplain.accuracy.warn_if_incomplete``. Kernels with
a kink at zero distance (Matern 3/2, 5/2) make the double path integral converge only
algebraically: the warning then states the measured gap.

An RBF feature whose lengthscale is short against its step along the path
(``l_i / |x_i - xt_i| < 1/16``: a one-hot indicator with a fitted lengthscale of 0.0036)
makes the latent decorrelate over that fraction of the path, a ridge along s = t that no
tensor rule coarser than it resolves (Guerry: a variance completeness gap of 407 at 64^2
pairs). Such points use the panelled pair rule of ``gpexplain.explain.linked.path_pairs``
instead (8 then 16 nodes per panel, the same identity as the check, priced the same way); a
point where even its first rule is priced past ``MAX_QUADRATURE_SECONDS`` keeps the tensor
rule, and a ``CompletenessWarning`` names the short step and the estimate.

The latent may be a linear combination ``sum_i c_i f_i`` of independent latent posteriors
(``LatentTerm``): its joint moments along the path are ``sum_i c_i`` (means) and
``sum_i c_i^2`` (covariances) of each term's. A 2-class softmax is the logistic of
``f_c - f_other`` (``S_c(f) = sigma(f_c - f_other)``), so its covariance is this one.

Cost per point and rule: G^2 node pairs, each a bivariate link expectation (logit: Mehler's
series where the pair's latents are correlated up to 0.97, microseconds; a 2-D quadrature
above) and O(d^2) work, plus one kernel Hessian per pair for GPyTorch kernels. The 2-D
quadrature's grid grows with the latent variance, and before a rule runs its pairs'
correlations are not known, so each pair is priced at the dearest
(``BinaryLink.pair_expectation_seconds`` with no correlation: 6.6 ms at variance 100) from the
largest variance along the path, and the doubling stops before a rule that would take the
point past ``MAX_QUADRATURE_SECONDS`` (the quadrature schemes' limit; a
``CompletenessWarning`` states the estimate, and the driver's the measured gap). The first
rule always runs: its 36 pairs are priced under 0.5 s up to variance 400.

One point is processed at a time; memory is the (G, d, n_basis) gradient cross term of its
path plus bounded blocks (32 MiB for the weighted gradient covariance, about 100 MiB for the
bivariate quadrature).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from gpexplain.accuracy import CompletenessWarning
from gpexplain.explain.linked.path_pairs import (
    PANEL_NODES,
    SHORT_STEP,
    pair_rule_covariance,
    pair_rule_seconds,
    path_step_scale,
)
from gpexplain.functionals.integrated_gradient import MAX_QUADRATURE_SECONDS
from gpexplain.functionals.quadrature import quadrature_rule, weighted_pair_hessian
from gpexplain.kernels.rbf import RBF
from gpexplain.links import PAIR_ORDERS

__all__ = ["LatentTerm", "integrated_gradient_covariance", "PATH_NODES", "PATH_RTOL"]

PATH_NODES = (8, 16, 32, 64, 128)
#: Relative completeness of the covariance at which the node doubling stops (tighter than the
#: documented ``COMPLETENESS_RTOL`` = 1e-8 that the warning checks).
PATH_RTOL = 1e-9
# Absolute floor of that check: the bivariate expectations are converged to 1e-12 absolute,
# and the target is a difference of O(1) expectations.
_PATH_ATOL = 1e-14
# float64 values per (nodes, features, basis) block of the weighted gradient covariance
# (32 MiB), beside the (G, d, n_basis) gradient cross term the path needs anyway.
_BLOCK_VALUES = 2**22


@dataclass(frozen=True)
class LatentTerm:
    """One term ``coefficient * f`` of the explained latent ``sum_i coefficient_i f_i``, the
    f_i independent.

    Attributes
    ----------
    coefficient : float
    posterior : Posterior
        The posterior of f (representer form).
    scheme : Scheme
        ``Gradient().bind(posterior.kernel, posterior.train_inputs)``.
    """

    coefficient: float
    posterior: object
    scheme: object


def _path_moments(terms, path):
    """``term_path_moments`` of the combination: means add with the coefficients,
    covariances with their squares (independent terms); the last item is the list of the
    terms' gradient cross terms."""
    parts = [term_path_moments(term.posterior, term.scheme, path) for term in terms]
    combined = [
        sum(term.coefficient ** power * part[i] for term, part in zip(terms, parts, strict=True))
        for i, power in enumerate((1, 1, 2, 2))
    ]
    return (*combined, [part[4] for part in parts])


def term_path_moments(posterior, scheme, path):
    """Joint moments of f and grad f at the path nodes (G, d):

    mean (G,), gradient mean (G, d), ``Cov(f(s), f(t))`` (G, G),
    ``Cov(d_k f(s), f(t))`` as [s, t, k] (G, G, d), and the gradient cross term (G, d, n)."""
    values = scheme.kernel_matrix(path)
    cross = scheme.cross(path)
    n_nodes, n_features, n_basis = cross.shape
    mean = posterior.mean + values @ posterior.alpha
    gradient_mean = cross @ posterior.alpha
    value_cov = posterior.kernel(path, path) - posterior.quadratic_form(values)
    # Prior Cov(d_k f(s), f(t)) = d/dx_k k(x, g(t)) at x = g(s): the gradient functional's
    # cross term with the path nodes themselves as basis points.
    prior = type(scheme)(scheme.functional, posterior.kernel, path).cross(path)  # [s, k, t]
    posterior_part = posterior.quadratic_form(cross.reshape(n_nodes * n_features, n_basis),
                                              values).reshape(n_nodes, n_features, n_nodes)
    gradient_value = np.transpose(prior - posterior_part, (0, 2, 1))
    return mean, gradient_mean, 0.5 * (value_cov + value_cov.T), gradient_value, cross


def _weighted_gradient_cov(terms, path, crosses, weights):
    """``sum_st W_st Cov(d_k f(s), d_l f(t))`` (d, d) of the combination (independent terms:
    each term's, times its coefficient squared)."""
    return sum(term.coefficient**2 * term_weighted_gradient_cov(term.posterior, term.scheme,
                                                                 path, cross, weights)
               for term, cross in zip(terms, crosses, strict=True))


def term_weighted_gradient_cov(posterior, scheme, path, cross, weights):
    """``sum_st W_st Cov(d_k f(s), d_l f(t))`` (d, d): prior minus the representer part,
    ``sum_s cross_s Q (sum_t W_st cross_t)^T``, never forming the (G, G, d, d) array."""
    kernel = posterior.kernel
    if isinstance(kernel, RBF):
        prior = kernel.weighted_gradient_prior(path, weights)
    else:
        prior = (weighted_pair_hessian(scheme.module, path, weights)
                 + np.einsum("s,skl->kl", np.diag(weights), scheme.prior(path)))
    n_nodes, n_features, n_basis = cross.shape
    block = max(1, _BLOCK_VALUES // (n_features * max(n_basis, 1)))
    data_part = np.zeros((n_features, n_features))
    for start in range(0, n_nodes, block):
        rows = slice(start, start + block)
        mixed = np.einsum("st,tkn->skn", weights[rows], cross)
        data_part += posterior.quadratic_form(cross[rows], mixed).sum(0)
    return prior - data_part


def _node_pair_expectations(link, mean, var, value_cov):
    """``E[sigma^(p)(f(s)) sigma^(q)(f(t))]`` over ``PAIR_ORDERS``, (6, G, G), from the pairs
    s <= t only: swapping s and t swaps p and q, and the orders are closed under that."""
    first, second = np.triu_indices(len(mean))
    upper = link.pair_expectations(mean[first], mean[second], var[first], var[second],
                                   value_cov[first, second], PAIR_ORDERS)
    out = np.empty((len(PAIR_ORDERS), len(mean), len(mean)))
    for row, (p, q) in enumerate(PAIR_ORDERS):
        out[row, first, second] = upper[row]
        out[row, second, first] = upper[PAIR_ORDERS.index((q, p))]
    return out


def _covariance_on_rule(link, terms, x, baseline, n_nodes):
    """The (d, d) covariance of the IG of ``sigma(f)`` at x with an n-node path rule."""
    delta = x - baseline
    t, w = quadrature_rule("gauss-legendre", n_nodes)
    path = baseline[None, :] + t[:, None] * delta[None, :]
    mean, mu, value_cov, gradient_value, crosses = _path_moments(terms, path)
    var = np.maximum(np.diag(value_cov), 0.0)
    e11, e21, e12, e31, e22, e13 = _node_pair_expectations(link, mean, var, value_cov)
    pair = w[:, None] * w[None, :]
    c = np.einsum("ssk->sk", gradient_value)  # Cov(d_k f(s), f(s))
    weights = pair * e11
    moment = _weighted_gradient_cov(terms, path, crosses, weights) + mu.T @ weights @ mu
    # The terms linear in one Cov(., a or b) come in transposed pairs (swap s and t, and
    # E[sigma^(p)(a) sigma^(q)(b)] becomes E[sigma^(q)(a) sigma^(p)(b)]): add each once, then
    # its transpose.
    transposed = np.swapaxes(gradient_value, 0, 1)  # [s, t, l] = Cov(d_l f(t), f(s))
    one_sided = (
        mu.T @ np.einsum("st,stl->sl", pair * e21, transposed)
        + mu.T @ (pair * e12) @ c
        + c.T @ np.einsum("st,stl->sl", pair * e31, transposed)
    )
    n_features = len(x)
    both = (pair * e22)[:, :, None] * gradient_value
    moment += (one_sided + one_sided.T + c.T @ (pair * e22) @ c
               + both.reshape(-1, n_features).T @ transposed.reshape(-1, n_features))
    _, slope, curvature = link.response_expectations(mean, var)
    expected = w @ (slope[:, None] * mu + curvature[:, None] * c)
    cov = np.outer(delta, delta) * (moment - np.outer(expected, expected))
    return 0.5 * (cov + cov.T)


def _difference_variance(link, terms, x, baseline):
    """``Var(sigma(f(x)) - sigma(f(xt)))`` from the joint Gaussian of (f(x), f(xt)): three
    bivariate expectations ``E[sigma(a) sigma(b)]`` (independent of the path rule)."""
    points = np.stack([x, baseline])
    parts = [term.posterior.predict(points, return_cov=True) for term in terms]
    mean = sum(term.coefficient * part[0] for term, part in zip(terms, parts, strict=True))
    cov = sum(term.coefficient**2 * part[1] for term, part in zip(terms, parts, strict=True))
    var = np.maximum(np.diag(cov), 0.0)
    first, second = np.array([0, 1, 0]), np.array([0, 1, 1])
    squares = link.pair_expectations(mean[first], mean[second], var[first], var[second],
                                     np.array([var[0], var[1], cov[0, 1]]), ((0, 0),))[0]
    response = link.response_expectations(mean, var)[0]
    difference = response[0] - response[1]
    return max(squares[0] + squares[1] - 2.0 * squares[2] - difference**2, 0.0)


def _path_variance(terms, X, baseline) -> np.ndarray:
    """Largest latent variance at 33 equispaced points of each row's path, ends included:
    what sets the grid of the bivariate expectations, (n_points,)."""
    steps = np.linspace(0.0, 1.0, 33)[None, :, None]
    paths = (baseline + steps * (X - baseline)[:, None, :]).reshape(-1, X.shape[1])
    variance = sum(term.coefficient**2 * term.posterior.predict(paths)[1] for term in terms)
    return np.max(np.reshape(variance, (len(X), -1)), axis=1)


def _rule_seconds(link, terms, X, baseline):
    """Estimated seconds of each path rule (``PATH_NODES``) at each point, (n_points, n_rules)
    (the rule's node pairs times the bivariate expectations' cost per pair), and the largest
    latent variance along each path, (n_points,)."""
    variance = _path_variance(terms, X, baseline)
    per_pair = link.pair_expectation_seconds(variance)
    n_pairs = np.array([n * (n + 1) / 2 for n in PATH_NODES])
    return per_pair[:, None] * n_pairs[None, :], variance


def integrated_gradient_covariance(link, terms, X, baseline):
    """Posterior covariance of the integrated gradients of ``sigma(f)`` at each row of X.

    Parameters
    ----------
    link : gpexplain.links.Logit or Probit (approximation "quadrature")
    terms : sequence of LatentTerm
        The latent ``f = sum_i c_i f_i`` (independent f_i): one term with coefficient 1 for a
        binary classifier (log-odds of the positive class); ``f_c - f_other`` for a 2-class
        softmax.
    X : ndarray (n_points, n_features)
    baseline : ndarray (n_features,)
        One baseline (several couple through pairs of paths: not supported here).

    Returns
    -------
    cov : ndarray (n_points, n_features, n_features)
        Symmetric; the same for the negative class (``1 - sigma`` flips the sign of IG only).
    difference_variance : ndarray (n_points,)
        ``Var(sigma(f(x)) - sigma(f(xt)))``, what ``cov.sum((1, 2))`` completes to.
    description : str
        The rules used: the largest tensor rule ("up to G^2 node pairs") and, where a
        feature's lengthscale is short against its step (``path_pairs.SHORT_STEP``), the
        panelled pair rule's largest node count per panel.

    Warns
    -----
    CompletenessWarning
        The node doubling stopped at the time limit at some points (estimate stated).
    """
    n_points, n_features = X.shape
    cov = np.zeros((n_points, n_features, n_features))
    target = np.zeros(n_points)
    used = panelled = 0
    rule_seconds, variance = _rule_seconds(link, terms, X, baseline)
    stopped = {}  # point -> estimated seconds of the rule it did not run
    unresolved = {}  # point -> (scaled step, estimated seconds of the first panelled rule)
    for p, x in enumerate(X):
        if np.all(x == baseline):
            continue  # every path node coincides: IG is exactly 0, so is its covariance
        target[p] = _difference_variance(link, terms, x, baseline)
        scale = path_step_scale(terms, x, baseline)
        # A feature's lengthscale short against its step: the panelled pair rule
        # (gpexplain.explain.linked.path_pairs), refined by the same identity.
        paired = scale is not None and scale < SHORT_STEP
        if paired:
            panel_seconds = pair_rule_seconds(link, terms, x, baseline, scale, variance[p])
            if panel_seconds[0] > MAX_QUADRATURE_SECONDS:
                # Not affordable even once: the tensor rule runs, and the warning says why
                # its result misses completeness.
                unresolved[p] = (scale, panel_seconds[0])
                paired = False
        rules = (zip(PANEL_NODES, panel_seconds, strict=True) if paired
                 else zip(PATH_NODES, rule_seconds[p], strict=True))
        spent = 0.0
        for n_nodes, seconds in rules:
            if spent and spent + seconds > MAX_QUADRATURE_SECONDS:
                stopped[p] = seconds  # the previous rule's result stands
                break
            spent += seconds
            cov[p] = (pair_rule_covariance(link, terms, x, baseline, scale, n_nodes) if paired
                      else _covariance_on_rule(link, terms, x, baseline, n_nodes))
            if paired:
                panelled = max(panelled, n_nodes)
            else:
                used = max(used, n_nodes)
            if abs(cov[p].sum() - target[p]) <= PATH_RTOL * target[p] + _PATH_ATOL:
                break
    if stopped:
        points = list(stopped)
        warnings.warn(
            f"the covariance of probability-level integrated gradients stopped refining its "
            f"path rule at {len(points)} point(s) (rows {points[:5]}"
            f"{'...' if len(points) > 5 else ''}): the next rule was estimated at up to "
            f"{max(stopped.values()):.3g} s, past the {MAX_QUADRATURE_SECONDS:g} s per point "
            f"limit, as the latent variance reaches {variance[points].max():.3g} along the path "
            f"(the {link.name} expectations' grid grows with it). The measured completeness "
            "gap follows; return_cov=False or output='latent' avoid it.",
            CompletenessWarning, stacklevel=2,
        )
    if unresolved:
        points = list(unresolved)
        scales, seconds = zip(*unresolved.values(), strict=True)
        warnings.warn(
            f"at {len(points)} point(s) (rows {points[:5]}{'...' if len(points) > 5 else ''}) "
            f"a feature's lengthscale is short against its step along the path (down to "
            f"{min(scales):.3g} of the path): the latent decorrelates over that scale, which "
            f"the tensor path rule cannot resolve, and the panelled rule that does was "
            f"estimated at {min(seconds):.3g} s or more, past the {MAX_QUADRATURE_SECONDS:g} s "
            f"per point limit (the {link.name} expectations at latent variance up to "
            f"{variance[points].max():.3g}). The covariance there is unreliable (the measured "
            "completeness gap follows); return_cov=False or output='latent' avoid it.",
            CompletenessWarning, stacklevel=2,
        )
    description = f"up to {used}^2 node pairs" if used or not panelled else ""
    if panelled:
        description += (f"{'; ' if used else ''}panelled node pairs (a feature's lengthscale short "
                        f"against its step), up to {panelled} nodes per panel")
    return cov, target, description
