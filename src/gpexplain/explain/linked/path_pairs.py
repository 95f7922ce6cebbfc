"""Panelled node-pair rule for the covariance of probability-level integrated gradients when
a feature's lengthscale is short against its step along the path (issue 27 item 9).

``gpexplain.explain.linked.link_covariance`` writes ``E[IG_k IG_l]`` as a double integral
over pairs of path positions (s, t) of ``F(s, t) = E[phi(a, b) G_k H_l]`` and evaluates it
with a tensor Gauss-Legendre rule. For an RBF kernel with a feature i whose scaled step
``eps_i = l_i / |x_i - xt_i|`` is small (a one-hot indicator with a fitted lengthscale of
0.0036 switching from 0 to 1), F has two kinds of fast structure:

* a **ridge** along the whole diagonal s = t: the prior covariance of the latent along the
  path, ``k(g(s), g(t)) = s2 exp(-(s - t)^2 / (2 eps^2)) ...``, decorrelates over
  ``|s - t| ~ eps``, and its second derivative (``Cov(d_k f(s), d_l f(t))``, of size
  ``s2 / eps^2``) integrates to almost nothing across the ridge. Between the categories
  (indicator near 1/2) the posterior is the prior, so the ridge runs along most of the
  path; a tensor rule coarser than ``eps`` samples it only at its diagonal nodes, with
  weight ``w_s^2`` instead of ``w_s * sqrt(2 pi) eps``: variance completeness gaps of
  hundreds (Guerry's Region_S, 85 rows, logit: 407 with 64^2 pairs, 179 with 128^2, for a
  difference variance of 0.054; probit on the same posterior: 325 with 128^2 and still
  0.018 with a 2048-node composite tensor rule);
* **layers** of width ``eps_i`` at the cuts ``t* = (z_ni - xt_i) / (x_i - xt_i)`` where the
  path passes a basis point in feature i (for one-hot features: the path's ends).

The rule here integrates the outer variable s over panels graded geometrically towards the
cuts (widths ``eps, 2 eps, 4 eps, ..``, at most ``MAX_PANEL``), and, for each outer node s,
the inner variable t over panels graded the same way towards the cuts **and towards s
itself**, with ``n`` Gauss-Legendre nodes per panel. Both integrands are then smooth on
every panel (the ridge sits at a panel edge, on the scale of the panels next to it), so the
rule converges exponentially in ``n``. The pair moments are exact for the RBF kernel (the
prior's derivatives in closed form, the representer part by the posterior's quadratic form
per outer node); only pairs whose latents are correlated (``|Cov(a, b)| > 1e-13
sqrt(Var a Var b)``) need the link's bivariate expectations: for the others
``E[sigma^(p)(a) sigma^(q)(b)] = E[sigma^(p)(a)] E[sigma^(q)(b)]`` up to that correlation.
Most pairs are of that kind (far apart against ``eps``, in the prior region), which is what
makes the rule affordable: about ``16 n`` correlated inner nodes per outer node, plus the
pairs of layers that the data correlate.

The caller (``integrated_gradient_covariance``) doubles ``n`` (``PANEL_NODES``) until the
completeness identity ``sum_kl Cov(IG_k, IG_l) = Var(sigma(f(x)) - sigma(f(xt)))`` holds,
pricing each rule first from its count of correlated pairs, as for the tensor rule.
"""

from __future__ import annotations

import numpy as np

from gpexplain.functionals.quadrature import quadrature_rule
from gpexplain.kernels.rbf import RBF
from gpexplain.links import PAIR_ORDERS
from gpexplain.links.binary import pair_correlation

__all__ = ["MAX_PANEL", "PANEL_NODES", "SHORT_STEP", "path_step_scale", "pair_rule_covariance",
           "pair_rule_seconds"]

#: The pair rule replaces the tensor rule where ``min_i l_i / |x_i - xt_i|`` is below this.
SHORT_STEP = 1.0 / 16.0
#: Gauss-Legendre nodes per panel, doubled until completeness (4 missed it by more than the
#: difference variance itself on Guerry; 8 by 3e-3 of it, 16 by 2e-7, probit).
PANEL_NODES = (8, 16)
#: The widest panel, as a fraction of the path.
MAX_PANEL = 1.0 / 8.0
# Latent pairs correlated less than this (relative) are taken as independent.
_INDEPENDENT = 1e-13
# Relative rounding under which link expectations' arguments count as equal.
_QUANTUM = 1e-14
# Cuts within this many scales of the previous one are merged into it: they lie where the
# panels graded towards it are at most 2 scales wide.
_MERGE = 4.0
# Measured on Guerry (13 features, 64 inducing points, probit, 322k pairs in 30 s on a shared
# machine): seconds per node pair, feature and basis point of the array work.
_SECONDS_PER_PAIR_VALUE = 5e-8
# float64 values per block of (outer, inner, feature, basis) arrays (32 MiB).
_BLOCK_VALUES = 2**22


def path_step_scale(terms, x, baseline) -> float | None:
    """``min_i l_i / |x_i - xt_i|`` over the terms' RBF kernels (inf when x = xt), or None
    when some term's kernel is not an RBF (the pair rule's moments are the RBF's)."""
    delta = np.abs(x - baseline)
    scale = np.inf
    for term in terms:
        kernel = term.posterior.kernel
        if type(kernel) is not RBF:
            return None
        lengthscale = kernel._lengthscales(len(x))
        with np.errstate(divide="ignore"):
            scale = min(scale, float(np.min(np.where(delta > 0, lengthscale / delta, np.inf))))
    return scale


def _cuts(terms, x, baseline, scale):
    """Positions on [0, 1] where the path passes a basis point in a feature whose scaled step
    is short (clipped to the path), with the path's ends; cuts closer than
    ``_MERGE * scale`` to the previous one kept are merged into it."""
    delta = x - baseline
    cuts = [0.0, 1.0]
    for term in terms:
        lengthscale = term.posterior.kernel._lengthscales(len(x))
        moving = (delta != 0) & (lengthscale < SHORT_STEP * np.abs(np.where(delta == 0, 1, delta)))
        for i in np.flatnonzero(moving):
            positions = (term.posterior.train_inputs[:, i] - baseline[i]) / delta[i]
            cuts.extend(np.clip(positions, 0.0, 1.0).tolist())
    merged = []
    for cut in np.sort(cuts):
        if not merged or cut - merged[-1] > _MERGE * scale:
            merged.append(float(cut))
    return np.array(merged)


def _graded_edges(centres, scale):
    """Panel edges on [0, 1] graded geometrically towards each centre (widths scale, 2 scale,
    .., at most ``MAX_PANEL``), plus a uniform grid of ``MAX_PANEL``; edges closer than
    ``scale / 4`` to the previous one are dropped (the ends are kept)."""
    steps = scale * 2.0 ** np.arange(int(np.ceil(np.log2(MAX_PANEL / scale))) + 1)
    steps = np.concatenate([[0.0], steps[steps <= MAX_PANEL]])
    edges = [np.linspace(0.0, 1.0, int(round(1.0 / MAX_PANEL)) + 1)]
    for centre in np.atleast_1d(centres):
        edges.append(centre - steps)
        edges.append(centre + steps)
    edges = np.sort(np.clip(np.concatenate(edges), 0.0, 1.0))
    kept = [0.0]
    for edge in edges[1:]:
        if edge - kept[-1] > 0.25 * scale:
            kept.append(float(edge))
    kept[-1] = 1.0
    return np.array(kept)


def _panel_rule(edges, n_nodes):
    """Composite Gauss-Legendre nodes and weights, ``n_nodes`` per panel."""
    x, w = quadrature_rule("gauss-legendre", n_nodes)
    length = np.diff(edges)[:, None]
    return (edges[:-1, None] + length * x).ravel(), (length * w).ravel()


def _univariate(link, mean, var):
    """``E[sigma^(r)(f)]`` for r = 0 .. 3, (4, ...), by the link's own univariate rule
    (Gauss-Hermite, or the logit's latent trapezoid at wide variances), once per distinct
    (mean, variance) (``_distinct``)."""
    def function(f):
        return np.stack(link.derivatives(f, 3))
    mean, var = np.asarray(mean, float), np.maximum(var, 0.0)
    first, inverse = _distinct(mean.ravel(), var.ravel())
    unique = link._expect(function, mean.ravel()[first], var.ravel()[first],
                          f"{link.name} derivative", response_row=True)
    return unique[:, inverse].reshape(-1, *mean.shape)


def _distinct(*columns):
    """Indices of the first of each distinct row of ``columns`` and the inverse map, rows
    compared after rounding to ``_QUANTUM`` of each column's largest magnitude. Nodes in the
    region where the posterior is the prior (the kernel values to every basis point
    underflow) share the prior's mean and variance, and pairs there at the same separation
    share their covariance up to round-off: their expectations are computed once (a change
    of 1e-14 of the scale in an argument changes them by about as much)."""
    keys = np.stack([np.round(c / (_QUANTUM * max(np.max(np.abs(c), initial=0.0), 1e-300)))
                     for c in columns], axis=1)
    _, first, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    return first, inverse.ravel()


def rule_positions(terms, x, baseline, scale, n_nodes):
    """The outer nodes and weights of the pair rule and the cuts (for pricing and tests)."""
    cuts = _cuts(terms, x, baseline, scale)
    outer, weights = _panel_rule(_graded_edges(cuts, scale), n_nodes)
    return outer, weights, cuts


def pair_rule_seconds(link, terms, x, baseline, scale, variance):
    """Estimated seconds of each rule of ``PANEL_NODES`` at one point: the bivariate link
    expectations of its correlated pairs plus the array work, ``_SECONDS_PER_PAIR_VALUE`` per
    node pair, feature and basis point (the whole cost of a closed-form link: many cuts, e.g.
    a short-lengthscale numeric feature with training points all along the path, multiply
    the panels).

    The pairs and their correlations, which set each pair's cost
    (``BinaryLink.pair_expectation_seconds``): on the ridge, every outer node with the inner
    nodes within 16 ``scale`` of it, correlated at most as the prior along the path,
    ``exp(-(s - t)^2 / (2 scale^2))``, at the largest latent ``variance`` along it; near the
    cuts, where the data correlate the latent, the pairs of outer nodes within 16 ``scale``
    of a cut, at their posterior correlation and variances."""
    n_values = len(x) * sum(term.posterior.train_inputs.shape[0] for term in terms)
    seconds = []
    for n_nodes in PANEL_NODES:
        outer, _, cuts = rule_positions(terms, x, baseline, scale, n_nodes)
        inner = _panel_rule(_graded_edges(np.append(cuts, 0.5), scale), n_nodes)[0]
        ridge = inner[np.abs(inner - 0.5) < 16 * scale]
        prior = np.exp(-0.5 * ((ridge - 0.5) / scale) ** 2)
        ridge_seconds = np.sum(link.pair_expectation_seconds(np.full(len(ridge), variance),
                                                             correlation=prior))
        near = outer[np.min(np.abs(outer[:, None] - cuts[None, :]), 1) < 16 * scale]
        path = baseline + near[:, None] * (x - baseline)
        cov = sum(term.coefficient**2 * term.posterior.predict(path, return_cov=True)[1]
                  for term in terms)
        sd = np.sqrt(np.maximum(np.diag(cov), 0.0))
        larger = np.maximum(sd[:, None], sd[None, :]) ** 2
        cut_seconds = np.sum(link.pair_expectation_seconds(
            larger, correlation=pair_correlation(sd[:, None] ** 2, sd[None, :] ** 2, cov)))
        seconds.append(len(outer) * ridge_seconds + cut_seconds
                       + _SECONDS_PER_PAIR_VALUE * len(outer) * len(inner) * n_values)
    return np.array(seconds)


def _inner_rules(cuts, outer, scale, n_nodes):
    """Inner nodes and weights (B, M) for a block of outer nodes, padded with zero-weight
    nodes at t = 1 to the block's longest rule."""
    rules = [_panel_rule(_graded_edges(np.append(cuts, s), scale), n_nodes) for s in outer]
    width = max(len(t) for t, _ in rules)
    nodes, weights = np.ones((len(outer), width)), np.zeros((len(outer), width))
    for b, (t, w) in enumerate(rules):
        nodes[b, :len(t)], weights[b, :len(t)] = t, w
    return nodes, weights


def _term_nodes(term, x, baseline, positions, representer):
    """One term's moments at path positions (any shape P): mean P, gradient mean (P, d),
    ``Var f`` P, ``Cov(d_k f, f)`` (P, d), the path points (P, d), and the kernel values
    (P, n) and gradient cross terms (P, d, n), also with ``representer`` Q (n, n) applied.
    Q is formed once per point (``quadratic_form`` of the identity) so that every pair's
    representer part is a product; variances are ``k(x, x) - v Q v``, which loses digits
    only where the posterior variance is below about 1e-16 of the prior's."""
    shape, d = positions.shape, len(x)
    path = baseline + positions.reshape(-1, 1) * (x - baseline)
    values = term.scheme.kernel_matrix(path)
    cross = term.scheme.cross(path)
    posterior = term.posterior
    values_q, cross_q = values @ representer, cross @ representer
    var = posterior.kernel.diag(path) - np.einsum("pn,pn->p", values_q, values)
    own = -np.einsum("pkn,pn->pk", cross, values_q)  # the RBF's prior part is 0 at s = t
    return dict(
        mean=(posterior.mean + values @ posterior.alpha).reshape(shape),
        mu=(cross @ posterior.alpha).reshape(*shape, d),
        var=var.reshape(shape), own=own.reshape(*shape, d), path=path.reshape(*shape, d),
        values=values.reshape(*shape, -1), cross=cross.reshape(*shape, d, -1),
        values_q=values_q.reshape(*shape, -1), cross_q=cross_q.reshape(*shape, d, -1))


def _combined(parts, coefficients):
    """Mean, gradient mean, ``Var f`` and ``Cov(grad f, f)`` of ``sum_i c_i f_i`` from the
    terms' (independent) node moments: means add with c_i, covariances with c_i^2."""
    def total(key, power):
        return sum(c**power * part[key] for c, part in zip(coefficients, parts, strict=True))
    return (total("mean", 1), total("mu", 1), np.maximum(total("var", 2), 0.0),
            total("own", 2))


def pair_rule_covariance(link, terms, x, baseline, scale, n_nodes):
    """The (d, d) covariance of the IG of ``sigma(f)`` at x with the panelled pair rule of
    the module docstring, ``n_nodes`` Gauss-Legendre nodes per panel."""
    delta, d = x - baseline, len(x)
    cuts = _cuts(terms, x, baseline, scale)
    s_nodes, s_weights = _panel_rule(_graded_edges(cuts, scale), n_nodes)
    coefficients = [term.coefficient for term in terms]
    representers = [term.posterior.quadratic_form(np.eye(term.posterior.train_inputs.shape[0]))
                    for term in terms]
    outer = [_term_nodes(term, x, baseline, s_nodes, q)
             for term, q in zip(terms, representers, strict=True)]
    mean_s, mu_s, var_s, own_s = _combined(outer, coefficients)
    first_s = _univariate(link, mean_s, var_s)
    n_basis = max(q.shape[0] for q in representers)
    moment = np.zeros((d, d))
    width = len(_panel_rule(_graded_edges(np.append(cuts, 0.5), scale), n_nodes)[0])
    block = max(1, _BLOCK_VALUES // (2 * width * d * n_basis))
    for start in range(0, len(s_nodes), block):
        rows = slice(start, start + block)
        t_nodes, t_weights = _inner_rules(cuts, s_nodes[rows], scale, n_nodes)
        inner = [_term_nodes(term, x, baseline, t_nodes, q)
                 for term, q in zip(terms, representers, strict=True)]
        mean_t, mu_t, var_t, own_t = _combined(inner, coefficients)
        value_cov = np.zeros(t_nodes.shape)
        gradient_value = np.zeros((*t_nodes.shape, d))
        value_gradient = np.zeros((*t_nodes.shape, d))
        for c, term, o, i in zip(coefficients, terms, outer, inner, strict=True):
            lengthscale_sq = term.posterior.kernel._lengthscales(d) ** 2
            separation = (o["path"][rows, None, :] - i["path"]) / lengthscale_sq  # (B, M, d)
            prior = np.exp(-0.5 * np.sum(separation**2 * lengthscale_sq, -1)) * float(
                term.posterior.kernel.variance)
            i["separation"], i["prior"], i["lengthscale_sq"] = separation, prior, lengthscale_sq
            value_cov += c**2 * (prior - np.einsum("bn,bmn->bm", o["values_q"][rows],
                                                   i["values"]))
            gradient_value += c**2 * (-separation * prior[..., None] - np.einsum(
                "bkn,bmn->bmk", o["cross_q"][rows], i["values"]))  # Cov(G_s, b)
            value_gradient += c**2 * (separation * prior[..., None] - np.einsum(
                "bn,bmkn->bmk", o["values_q"][rows], i["cross"]))  # Cov(H_t, a)
        e11, e21, e12, e31, e22, e13 = _pair_expectations(
            link, mean_s[rows], var_s[rows], first_s[:, rows], mean_t, var_t, value_cov)
        u = s_weights[rows, None] * t_weights
        a11 = u * e11
        for c, o, i in zip(coefficients, outer, inner, strict=True):
            weighted = a11 * i["prior"]
            moment += c**2 * (np.diag(weighted.sum() / i["lengthscale_sq"])
                              - np.einsum("bm,bmk,bml->kl", weighted, i["separation"],
                                          i["separation"])
                              - np.einsum("bkn,bm,bmln->kl", o["cross_q"][rows], a11,
                                          i["cross"]))
        mu, own = mu_s[rows], own_s[rows]
        moment += np.einsum("bk,bl->kl", mu, np.einsum("bm,bml->bl", a11, mu_t)
                            + np.einsum("bm,bml->bl", u * e21, value_gradient)
                            + np.einsum("bm,bml->bl", u * e12, own_t))
        moment += np.einsum("bk,bl->kl", own, np.einsum("bm,bml->bl", u * e21, mu_t)
                            + np.einsum("bm,bml->bl", u * e31, value_gradient)
                            + np.einsum("bm,bml->bl", u * e22, own_t))
        moment += np.einsum("bmk,bml->kl", gradient_value,
                            (u * e12)[..., None] * mu_t + (u * e22)[..., None] * value_gradient
                            + (u * e13)[..., None] * own_t)
    slope, curvature = first_s[1], first_s[2]
    expected = s_weights @ (slope[:, None] * mu_s + curvature[:, None] * own_s)
    cov = np.outer(delta, delta) * (moment - np.outer(expected, expected))
    return 0.5 * (cov + cov.T)


def _pair_expectations(link, mean_a, var_a, first_a, mean_b, var_b, cov_ab):
    """``E[sigma^(p)(a) sigma^(q)(b)]`` over ``PAIR_ORDERS``, (6, B, M), for B a's (their
    univariate ``first_a`` (4, B)) against M b's each: the link's bivariate expectations
    where correlated, products of univariate ones elsewhere."""
    first_b = _univariate(link, mean_b, var_b)
    out = np.stack([first_a[p][:, None] * first_b[q] for p, q in PAIR_ORDERS])
    correlated = np.abs(cov_ab) > _INDEPENDENT * np.sqrt(var_a[:, None] * var_b)
    if np.any(correlated):
        rows = np.nonzero(correlated)[0]
        arguments = (mean_a[rows], mean_b[correlated], var_a[rows], var_b[correlated],
                     cov_ab[correlated])
        first, inverse = _distinct(*arguments)
        unique = link.pair_expectations(*(a[first] for a in arguments), PAIR_ORDERS)
        out[:, correlated] = unique[:, inverse]
    return out
