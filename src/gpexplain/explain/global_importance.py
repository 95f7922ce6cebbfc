"""Exact posterior of global feature importance over a data set (issue 25).

A local explanation method gives, at each of n points, attributions ``A_p = (A_p1 .. A_pD)``
that are jointly Gaussian across points and features (``return_cov="points"``,
``gpexplain.explain._points``; Butler, Feng and Djuric 2024, Theorem 1: the attribution is a GP
over the inputs). A global importance summarises feature i over the points, and its posterior
moments are exact:

* ``mean``: ``G_i = (1/n) sum_p A_pi`` is Gaussian, ``Cov(G_i, G_j) = (1/n^2) sum_pq
  Cov(A_pi, A_qj)``; ``P(G_a > G_b) = Phi((E G_a - E G_b) / sd(G_a - G_b))`` exactly;
* ``mean_sq``: ``G_i = (1/n) sum_p A_pi^2`` is a quadratic form of a Gaussian:
  ``E G_i = (1/n) sum_p (mu_pi^2 + S_pi,pi)``, ``Cov(G_i, G_j) = (1/n^2) sum_pq (2 S_pi,qj^2 +
  4 mu_pi S_pi,qj mu_qj)`` (Mathai and Provost, *Quadratic forms in random variables*, 1992);
* ``mean_abs``: ``G_i = (1/n) sum_p |A_pi|``: ``E|A|`` of the folded normal and
  ``Var G_i = (1/n^2) sum_pq Cov(|A_pi|, |A_qi|)`` from the bivariate folded-normal product
  moment (``gpexplain._numerics_folded_normal``: Rosenbaum 1961, Owen's T).

``P(G_a > G_b)`` for ``mean_abs`` and ``mean_sq`` is Monte Carlo over draws from the exact joint
Gaussian of all n D attributions (standard error ``sqrt(p (1 - p) / n_samples)``, reported).
A ``MixturePosterior`` (e.g. fully Bayesian hyperparameters) gives a mixture of Gaussians: the
components' exact moments are combined by the laws of total expectation and covariance, and
every probability is Monte Carlo over draws from the mixture.

Several outputs (a ``MultiOutputAttribution``, e.g. of ``gx.CoregionalizedPosterior``,
``gx.LMCPosterior`` or ``gx.IndependentOutputs``) give a ``MultiOutputImportance``: each output
summarised from its own attributions and covariance across points (so it equals the
single-output result of that output's marginal posterior), and ``between_outputs``, the
posterior covariance of each feature's importance between outputs i and j, from the same sums
over the joint covariance across points and outputs (``joint_point_cov``): for ``mean`` and
``mean_sq`` the formulas above with the (output, feature) pairs as the columns, for
``mean_abs`` ``(1/n^2) sum_pq Cov(|A_pia|, |A_qja|)`` by the same bivariate folded-normal
product moment. Zero for independent outputs (the model says so; not computed). Probabilities
compare features within one output only (outputs have their own units).

Cost: the covariance blocks of ``PointCovariance`` (stated there) over the n^2 / 2 pairs of
points, plus per pair O(D^2) for ``mean`` and ``mean_sq`` and D bivariate normal CDFs (eight
Owen's T evaluations each) for ``mean_abs``; memory stays at one block pair. Several
outputs: each output's own pass, and one over the joint blocks ((t D)^2 per pair of points for
``mean``/``mean_sq``, D t (t - 1) bivariate CDFs for ``mean_abs``). The probabilities
of ``mean_abs``/``mean_sq`` need the dense (n D)^2 matrix and its eigendecomposition, O((n D)^3):
they are computed when ``n D <= max_joint`` and are None (with a note) above.
"""

from __future__ import annotations

import warnings
from dataclasses import replace
from numbers import Integral

import numpy as np
from scipy.special import ndtr

from gpexplain._numerics_folded_normal import mean_abs, mean_abs_product
from gpexplain._validation import check_finite_result
from gpexplain.explain._points import MixturePointCovariance
from gpexplain.global_attribution import GlobalImportance, MultiOutputImportance
from gpexplain.multi_output_attribution import MultiOutputAttribution

__all__ = ["SUMMARIES", "global_importance", "importance_of"]

SUMMARIES = ("mean_abs", "mean_sq", "mean")
#: Default largest n_points * n_features for the Monte Carlo probabilities (dense joint).
MAX_JOINT = 3000


def _check_positive_int(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, Integral) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}.")
    return int(value)


def global_importance(
    model_or_posterior,
    X,
    method: str = "integrated-gradients",
    summary: str = "mean_abs",
    *,
    n_samples: int = 4000,
    max_joint: int = MAX_JOINT,
    random_state=0,
    client=None,
    **options,
) -> GlobalImportance | MultiOutputImportance:
    """Posterior mean and standard deviation of each feature's global importance, exactly.

    The attributions of ``method`` at the rows of X are jointly Gaussian across points and
    features (their covariance across points, ``return_cov="points"``); the global importance
    of feature i is ``mean_abs`` ``(1/n) sum_p |A_pi|``, ``mean_sq`` ``(1/n) sum_p A_pi^2`` or
    ``mean`` ``(1/n) sum_p A_pi``, and its posterior moments are computed in closed form (module
    docstring: folded-normal moments, Leone et al. 1961 and Rosenbaum 1961; quadratic forms of
    a Gaussian, Mathai and Provost 1992) from the covariance across points, not from per-point
    standard deviations.

    Parameters
    ----------
    model_or_posterior : fitted estimator or Posterior
    X : array-like (n_points, n_features)
        The points the importance summarises (NumPy, pandas or torch).
    method : str, default "integrated-gradients"
        A local method of ``gpexplain.explain.methods.METHODS`` whose functional has a
        two-point prior term: "integrated-gradients", "gradients", "shapley" (product
        kernels), "gpx-contributions"; others raise ``NotImplementedError`` by name.
    summary : {"mean_abs", "mean_sq", "mean"}, default "mean_abs"
    n_samples : int, default 4000
        Monte Carlo draws for ``probability_greater`` (``mean_abs``, ``mean_sq``); standard
        error at most ``0.5 / sqrt(n_samples)`` (0.008 at the default).
    max_joint : int, default 3000
        Largest ``n_points * n_features`` for which the probabilities are sampled (the dense
        joint covariance and its eigendecomposition, O((n D)^3)); above it
        ``probability_greater`` is None and ``note`` says so. The moments are computed for any n.
    random_state : int or numpy.random.Generator, default 0
    client : distributed.Client, optional
        Compute the covariance blocks on this Dask cluster.
    **options
        Passed to the method (e.g. ``baseline=``, ``game=``, ``n_steps=``).

    Returns
    -------
    GlobalImportance
        Or, for a multi-output model (``outputs=`` among ``options`` selects some), a
        ``MultiOutputImportance``: one ``GlobalImportance`` per output, equal to that of the
        output's marginal posterior, and the posterior covariance of each feature's importance
        between outputs (module docstring).

    Raises
    ------
    ValueError
        Unknown or non-local method, unknown summary, ``n_samples``/``max_joint`` not a
        positive integer, ``return_cov`` among ``options``, or the method's own errors.
    NotImplementedError
        The method's functional has no two-point prior term for this kernel, or a
        probability-level (``output="probability"``) or mixture explanation.
    """
    from gpexplain.explain.methods import METHODS

    entry = METHODS.get(method)
    if not entry.local:
        raise ValueError(f"method {method!r} is global; choose a local method: "
                         f"{', '.join(n for n in METHODS.names() if METHODS.get(n).local)}.")
    if "return_cov" in options:
        raise ValueError("return_cov is set by global_importance (to 'points'); drop it.")
    _check_summary(summary)
    if client is not None:
        options["client"] = client
    attribution = entry.function(model_or_posterior, X, return_cov="points", **options)
    return importance_of(attribution, summary, n_samples=n_samples, max_joint=max_joint,
                         random_state=random_state)


def _check_summary(summary) -> None:
    if summary not in SUMMARIES:
        raise ValueError(f"unknown summary {summary!r}; choose one of {SUMMARIES}.")


def importance_of(attribution, summary: str = "mean_abs", *, n_samples: int = 4000,
                  max_joint: int = MAX_JOINT, random_state=0
                  ) -> GlobalImportance | MultiOutputImportance:
    """``global_importance`` of an ``Attribution`` (or ``MultiOutputAttribution``) computed
    with ``return_cov="points"``.

    Returns
    -------
    GlobalImportance, or MultiOutputImportance for a ``MultiOutputAttribution`` (each output
    summarised on its own, with the same arguments; ``_multi_output_importance``).

    Raises
    ------
    ValueError
        No ``point_cov`` on the attribution (on an output's, for several outputs), unknown
        summary, bad ``n_samples``/``max_joint``.
    """
    _check_summary(summary)
    n_samples = _check_positive_int(n_samples, "n_samples")
    max_joint = _check_positive_int(max_joint, "max_joint")
    if isinstance(attribution, MultiOutputAttribution):
        return _multi_output_importance(attribution, summary, n_samples, max_joint,
                                        random_state)
    point_cov = getattr(attribution, "point_cov", None)
    if point_cov is None:
        raise ValueError("the attribution has no covariance across points: explain with "
                         "return_cov='points' (or call gx.global_importance).")
    if isinstance(point_cov, MixturePointCovariance):
        return _mixture_importance(attribution, summary, n_samples, max_joint, random_state)
    mean_attr, var_attr = attribution.mean, attribution.var
    n_points, n_features = mean_attr.shape
    sampled = summary != "mean" and n_points * n_features <= max_joint
    # sampled: the dense matrix once, its moments from it (the blocks are not computed twice)
    dense = point_cov.dense() if sampled else None
    blocks = [(0, 0, dense)] if sampled else point_cov.blocks()
    expected, cov, variance = _moments(blocks, mean_attr, var_attr, summary)
    std = np.sqrt(np.maximum(variance, 0.0))
    note, used_samples, standard_error = "", 0, 0.0
    if summary == "mean":
        probability = _gaussian_probabilities(expected, cov)
    elif sampled:
        probability = _sampled_probabilities(dense, mean_attr, summary, n_samples,
                                             np.random.default_rng(random_state))
        used_samples, standard_error = n_samples, _standard_error(probability, n_samples)
    else:
        probability, note = _not_sampled(n_points, n_features, max_joint)
    if probability is not None:
        np.fill_diagonal(probability, 0.0)  # strictly greater than itself: never
    return GlobalImportance(
        mean=expected, std=std, cov=cov, probability_greater=probability,
        probability_standard_error=standard_error, summary=summary, n_points=n_points,
        n_samples=used_samples, feature_names=list(attribution.feature_names),
        method=attribution.method, note=note,
    )


def _multi_output_importance(attribution, summary, n_samples, max_joint, random_state):
    """Each output's importance from its own ``Attribution`` (the single-output result of that
    output, probabilities with the same ``random_state``), and the covariance of each
    feature's importance between outputs: zero for independent outputs (the model says so),
    otherwise from the blocks of ``joint_point_cov`` with the stacked (output, feature)
    values as the columns of ``_moments`` (``mean``, ``mean_sq``: the whole (t D, t D)
    matrix, its same-feature entries kept; ``mean_abs``: the folded-normal product moment of
    the same-feature pairs of different outputs only)."""
    names = attribution.output_names
    for name, part in zip(names, attribution.attributions, strict=True):
        if getattr(part, "point_cov", None) is None:
            raise ValueError(
                f"output {name!r} has no covariance across points: explain the multi-output "
                "model with return_cov='points' (or call gx.global_importance on it)."
            )
    results = [
        replace(importance_of(part, summary, n_samples=n_samples, max_joint=max_joint,
                              random_state=random_state),
                method=f"{part.method}, output {name!r}")
        for name, part in zip(names, attribution.attributions, strict=True)
    ]
    n_outputs = len(names)
    variances = np.stack([result.std**2 for result in results], axis=-1)  # (D, t)
    between, note = variances[:, :, None] * np.eye(n_outputs), ""
    if not attribution.independent:
        joint = attribution.joint_point_cov
        if joint is None:
            between, note = None, ("the covariance across points and outputs "
                                   "(joint_point_cov) was not computed or not saved")
        else:
            between += _importance_between_outputs(joint, attribution, summary)
    if between is not None:
        check_finite_result("global_importance", between)
    return MultiOutputImportance(results, list(names), attribution.independent, between, note)


def _importance_between_outputs(joint, attribution, summary) -> np.ndarray:
    """``Cov[G_a(output i), G_a(output j)]`` for i != j, zero on the diagonal, (D, t, t)."""
    n_points, n_outputs, n_features = attribution.mean.shape
    mu = attribution.mean.reshape(n_points, n_outputs * n_features)
    var = np.concatenate([part.var for part in attribution.attributions], axis=1)
    i, j = np.triu_indices(n_outputs, 1)
    feature = np.repeat(np.arange(n_features), len(i))
    i, j = np.tile(i, n_features), np.tile(j, n_features)
    left, right = i * n_features + feature, j * n_features + feature
    between = np.zeros((n_features, n_outputs, n_outputs))
    if summary == "mean_abs":
        covariance = _moments(joint.blocks(), mu, var, summary, (left, right))[2]
    else:
        covariance = _moments(joint.blocks(), mu, var, summary)[1][left, right]
    between[feature, i, j] = between[feature, j, i] = covariance
    return between


def _standard_error(probability: np.ndarray, n_samples: int) -> float:
    """Largest Monte Carlo standard error ``sqrt(p (1 - p) / n_samples)`` of the entries."""
    return float(np.sqrt(np.max(probability * (1 - probability)) / n_samples))


def _not_sampled(n_points: int, n_features: int, max_joint: int):
    """No probabilities (None), and the note saying why (``n D`` above ``max_joint``)."""
    note = (f"probabilities not computed: n_points x n_features = {n_points * n_features} "
            f"exceeds max_joint = {max_joint} (dense joint covariance, O((n D)^3)).")
    return None, note


def _mixture_importance(attribution, summary, n_samples, max_joint, random_state):
    """A mixture's importance: the components' exact moments combined by the laws of total
    expectation and covariance; every probability (``mean`` too: a mixture is not Gaussian)
    by Monte Carlo over draws from the mixture."""
    from types import SimpleNamespace

    point_cov = attribution.point_cov
    parts = [
        importance_of(SimpleNamespace(
            mean=mean, var=np.maximum(np.einsum("pii->pi", cov), 0.0), point_cov=covariance,
            feature_names=attribution.feature_names, method=attribution.method,
        ), summary, max_joint=1)
        for mean, cov, covariance in point_cov.components
    ]
    weights = point_cov.weights
    expected = sum(w * part.mean for w, part in zip(weights, parts, strict=True))
    if summary == "mean_abs":
        second = sum(w * (part.std**2 + part.mean**2) for w, part in zip(weights, parts,
                                                                         strict=True))
        cov, variance = None, second - expected**2
    else:
        second = sum(w * (part.cov + np.outer(part.mean, part.mean))
                     for w, part in zip(weights, parts, strict=True))
        cov = second - np.outer(expected, expected)
        variance = np.diag(cov).copy()
    n_points, n_features = attribution.mean.shape
    note, used, standard_error = "", 0, 0.0
    if n_points * n_features <= max_joint:
        draws = point_cov.sample(attribution.mean, n_samples, np.random.default_rng(random_state))
        summaries = {"mean": draws, "mean_abs": np.abs(draws), "mean_sq": draws**2}[summary]
        summaries = summaries.mean(axis=1)
        probability = (summaries[:, :, None] > summaries[:, None, :]).mean(axis=0)
        used, standard_error = n_samples, _standard_error(probability, n_samples)
    else:
        probability, note = _not_sampled(n_points, n_features, max_joint)
    if probability is not None:
        np.fill_diagonal(probability, 0.0)
    return GlobalImportance(
        mean=expected, std=np.sqrt(np.maximum(variance, 0.0)), cov=cov,
        probability_greater=probability, probability_standard_error=standard_error,
        summary=summary, n_points=n_points, n_samples=used,
        feature_names=list(attribution.feature_names), method=attribution.method, note=note,
    )


def _moments(blocks, mu, var, summary, pairs=None):
    """Exact posterior mean, covariance (or None) and variance of the importances, from the
    ``(start1, start2, block)`` blocks of the covariance across points (upper triangle).

    ``pairs`` (``mean_abs`` only): ``(left, right)`` column arrays; the covariances
    ``Cov(G_left[k], G_right[k])`` are then returned in place of the variances (default: each
    column with itself, the variances).
    """
    n_points, n_features = mu.shape
    abs_mean = mean_abs(mu, var)  # (n, D)
    if summary == "mean":
        expected = mu.mean(0)
    elif summary == "mean_sq":
        expected = (mu**2 + var).mean(0)
    else:
        expected = abs_mean.mean(0)
    columns = np.arange(n_features)
    left, right = (columns, columns) if pairs is None else pairs
    total = np.zeros((n_features, n_features) if summary != "mean_abs" else len(left))
    for start1, start2, block in blocks:
        n1, n2 = block.shape[0], block.shape[2]
        rows1, rows2 = slice(start1, start1 + n1), slice(start2, start2 + n2)
        if summary == "mean":
            part = block.sum(axis=(0, 2))
        elif summary == "mean_sq":
            part = 2.0 * np.einsum("piqj,piqj->ij", block, block) + 4.0 * np.einsum(
                "pi,piqj,qj->ij", mu[rows1], block, mu[rows2])
        else:
            moments = (block, rows1, rows2, mu, var, abs_mean)
            part = _abs_covariance(*moments, left, right, start1 == start2)
            if start1 != start2:  # the mirrored block: (left, right) there is (right, left) here
                part = part + (part if pairs is None else
                               _abs_covariance(*moments, right, left, False))
            total = total + part
            continue
        total = total + (part if start1 == start2 else part + part.T)
    total = total / n_points**2
    if summary == "mean_abs":
        return expected, None, total
    total = 0.5 * (total + total.T)
    return expected, total, np.diag(total).copy()


def _abs_covariance(block, rows1, rows2, mu, var, abs_mean, left, right, same_points):
    """``sum_{p in rows1, q in rows2} Cov(|A_p,left[k]|, |A_q,right[k]|)`` for each k, from
    the bivariate folded-normal product moment; ``same_points``: rows1 = rows2."""
    cross = block[:, left, :, right]  # (K, n1, n2)
    m1, m2 = mu[rows1][:, left].T[:, :, None], mu[rows2][:, right].T[:, None, :]
    v1, v2 = var[rows1][:, left].T[:, :, None], var[rows2][:, right].T[:, None, :]
    product = mean_abs_product(m1, m2, v1, v2, cross)
    if same_points:  # one variable with itself: E|X|^2 = mu^2 + var, exactly
        diagonal, itself = np.arange(cross.shape[1]), np.flatnonzero(left == right)
        product[itself[:, None], diagonal, diagonal] = (
            mu[rows1] ** 2 + var[rows1])[:, left[itself]].T
    return (product - abs_mean[rows1][:, left].T[:, :, None]
            * abs_mean[rows2][:, right].T[:, None, :]).sum(axis=(1, 2))


def _gaussian_probabilities(expected, cov):
    """``P(G_a > G_b)`` for Gaussian importances, exactly."""
    difference = expected[:, None] - expected[None, :]
    var = np.diag(cov)[:, None] + np.diag(cov)[None, :] - 2.0 * cov
    sd = np.sqrt(np.maximum(var, 0.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(sd > 0, difference / np.where(sd > 0, sd, 1.0), np.sign(difference) * np.inf)
    return np.where(np.isnan(z), 0.5, ndtr(np.nan_to_num(z, nan=0.0)))


def _square_root(matrix: np.ndarray) -> np.ndarray:
    """``R`` with ``R R^T`` = the PSD ``matrix``: Cholesky with the package's adaptive jitter
    (at most 1e-4 of the mean diagonal; several times faster than an eigendecomposition), or
    the eigendecomposition with negative round-off clipped when even that fails."""
    from gpexplain.posterior.exact import cholesky_with_jitter

    try:
        # The attributions' joint covariance is singular by construction (completeness ties
        # features together), so a jitter is the rule here, not a defect of a kernel matrix;
        # at most 1e-4 of the diagonal, it is far below the Monte Carlo error of the
        # probabilities this root samples (1 / sqrt(n_samples)), so its warning is not shown.
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return cholesky_with_jitter(matrix)[0]
    except np.linalg.LinAlgError:
        values, vectors = np.linalg.eigh(matrix)
        return vectors * np.sqrt(np.clip(values, 0.0, None))


def _sampled_probabilities(dense, mu, summary, n_samples, rng):
    """``P(G_a > G_b)`` by Monte Carlo over the exact joint Gaussian of all attributions."""
    n_points, n_features = mu.shape
    root = _square_root(dense.reshape(n_points * n_features, -1))
    probability = np.zeros((n_features, n_features))
    for start in range(0, n_samples, 500):  # memory: 500 draws of n D values at a time
        count = min(500, n_samples - start)
        draws = mu.ravel() + rng.standard_normal((count, len(root))) @ root.T
        draws = draws.reshape(count, n_points, n_features)
        summaries = (np.abs(draws) if summary == "mean_abs" else draws**2).mean(axis=1)
        probability += (summaries[:, :, None] > summaries[:, None, :]).sum(axis=0)
    return probability / n_samples
