"""Integrated-gradient attributions of GP regression, as Gaussians with exact mean and covariance.

Butler, Feng and Djuric, *Explainable Learning with Gaussian Processes*, Theorem 1 and
Corollary 1: the IG attribution ``attr_i(x) = (x_i - xt_i) int_0^1 d_i f(xt + t (x - xt)) dt``
is a linear functional of f, so under the GP posterior it is Gaussian. Its mean and its full
feature-by-feature covariance follow from the generic formula of
``gpexplain.explain._gaussian_functional`` once the kernel supplies the cross term
``A[i, n] = attr_i k(., z_n)`` and the prior term ``P[i, j]`` (closed form for the squared
exponential, corrected as in ERRATA; quadrature with autograd for any other kernel).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from gpexplain._validation import check_finite_result, to_numpy
from gpexplain.attribution import Attribution
from gpexplain.explain._gaussian_functional import functional_posterior
from gpexplain.explain.quadrature import (
    QUADRATURE_RULES,
    integrated_gradient_functionals,
    integrated_gradient_mean,
    quadrature_rule,
)
from gpexplain.parallel import default_chunk_size, map_chunks
from gpexplain.posterior import as_posterior

__all__ = ["integrated_gradients", "resolve_baseline", "BASELINE_NAMES"]

BASELINE_NAMES = ("mean", "median", "zeros")
METHODS = ("closed-form", "quadrature")


def resolve_baseline(baseline, train_inputs: np.ndarray, feature_names: list[str]) -> np.ndarray:
    """Turn a baseline specification into a vector of shape (n_features,).

    Parameters
    ----------
    baseline : {"mean", "median", "zeros"} or array-like of shape (n_features,)
        ``"mean"`` and ``"median"`` are taken over the training inputs, column by column.

    Raises
    ------
    ValueError
        Unknown name, wrong length, or non-finite entries.
    """
    if isinstance(baseline, str):
        if baseline == "mean":
            return train_inputs.mean(axis=0)
        if baseline == "median":
            return np.median(train_inputs, axis=0)
        if baseline == "zeros":
            return np.zeros(train_inputs.shape[1])
        raise ValueError(
            f"unknown baseline {baseline!r}; use one of {BASELINE_NAMES} or a vector of "
            f"{train_inputs.shape[1]} feature values."
        )
    if isinstance(baseline, pd.Series | pd.DataFrame):
        baseline = baseline.to_numpy()
    vector = np.asarray(to_numpy(baseline), dtype=np.float64).reshape(-1)
    if vector.shape[0] != train_inputs.shape[1]:
        raise ValueError(
            f"baseline has {vector.shape[0]} values but the model has {train_inputs.shape[1]} "
            f"features ({', '.join(feature_names)})."
        )
    if not np.all(np.isfinite(vector)):
        bad = feature_names[int(np.flatnonzero(~np.isfinite(vector))[0])]
        raise ValueError(f"baseline has a non-finite value for feature {bad!r}.")
    return vector


def integrated_gradients(
    model_or_posterior,
    X,
    baseline="mean",
    *,
    method: str = "closed-form",
    rule: str = "gauss-legendre",
    n_steps: int = 64,
    return_cov: bool = True,
    chunk_size: int | None = None,
) -> Attribution:
    """Integrated-gradient attributions of a GP regression posterior, with uncertainty.

    Implements Butler et al., Corollary 1 (eqs. 29-30), with the ARD-SE closed form of
    Sec. 4.1 in the corrected, numerically safe form of ERRATA, extended from per-feature
    variances to the full covariance across features:

        mean[p, i]   = sum_n A[p, i, n] a_n
        cov[p, i, j] = P[p, i, j] - A[p, i, :] (K + noise I)^{-1} A[p, j, :]^T

    Completeness holds for both: ``mean.sum(1) == prediction - baseline_prediction`` and
    ``cov.sum((1, 2)) == Var[f(x) - f(baseline)]``.

    Parameters
    ----------
    model_or_posterior : fitted estimator (e.g. ``GPRegressor``) or ``ExactPosterior``
    X : array-like of shape (n_points, n_features)
        Points to explain, in the original units (NumPy, pandas or torch).
    baseline : {"mean", "median", "zeros"} or array-like of shape (n_features,), default "mean"
        Reference point; "mean"/"median" are over the training inputs.
    method : {"closed-form", "quadrature"}
        ``closed-form`` needs a kernel with closed-form functionals (``gx.kernels.RBF``).
        ``quadrature`` works for any differentiable GPyTorch kernel (Seitz's Riemann-sum
        construction, generalised to the rules of ``rule``).
    rule : {"gauss-legendre", "trapezoid", "simpson", "right"}
        Quadrature rule (``method="quadrature"`` only).
    n_steps : int, default 64
        Nodes (Gauss-Legendre, right) or intervals (trapezoid, Simpson) of the rule.
    return_cov : bool, default True
        Compute the (n_points, n_features, n_features) covariance; False returns the mean only
        (faster), with ``cov=None``.
    chunk_size : int, optional
        Points processed at once (bounds memory); chosen automatically by default.

    Returns
    -------
    Attribution
        ``mean`` (n_points, n_features) and ``cov`` (n_points, n_features, n_features) in the
        units of y; ``prediction`` and ``baseline_prediction`` are latent posterior means.

    Raises
    ------
    ValueError
        Bad query (wrong number of features, NaN/inf), unknown baseline/method/rule, or a
        closed form requested for a kernel that has none.
    TypeError
        ``model_or_posterior`` is neither a fitted estimator nor a posterior.
    """
    posterior = as_posterior(model_or_posterior)
    X = posterior.check_inputs(X)
    names = posterior.feature_names
    xt = resolve_baseline(baseline, posterior.data_inputs, names)
    Z = posterior.train_inputs
    kernel = posterior.kernel

    if method == "closed-form":
        if not hasattr(kernel, "integrated_gradient_cross"):
            raise ValueError(
                f"no closed-form integrated gradients for {kernel!r}; use "
                "method='quadrature'."
            )

        def explain_block(block):
            if not return_cov:  # contract with alpha without forming the cross term
                return kernel.integrated_gradient_mean(block, xt, Z, posterior.alpha), None
            cross = kernel.integrated_gradient_cross(block, xt, Z)
            prior = kernel.integrated_gradient_prior(block, xt)
            return functional_posterior(posterior, cross, prior)

        label = "integrated gradients (closed form)"
    elif method == "quadrature":
        nodes, weights = quadrature_rule(rule, n_steps)
        torch_kernel = kernel.torch_kernel(Z.shape[1])

        def explain_block(block):
            if not return_cov:
                mean = integrated_gradient_mean(
                    torch_kernel, block, xt, Z, posterior.alpha, nodes, weights
                )
                return mean, None
            cross, prior = integrated_gradient_functionals(
                torch_kernel, block, xt, Z, nodes, weights
            )
            return functional_posterior(posterior, cross, prior)

        label = f"integrated gradients ({rule} quadrature, n_steps={n_steps})"
    else:
        raise ValueError(f"unknown method {method!r}; choose one of {METHODS}.")
    if rule not in QUADRATURE_RULES:
        raise ValueError(f"unknown quadrature rule {rule!r}; choose one of {QUADRATURE_RULES}.")

    if chunk_size is None:
        # Quadrature holds every (node, training point) pair of a point in its autograd graph.
        copies = len(nodes) if method == "quadrature" else 1
        chunk_size = default_chunk_size(*Z.shape, copies_per_point=copies)
    mean, cov = map_chunks(explain_block, X, chunk_size)
    prediction = posterior.predict_mean(X)
    baseline_prediction = posterior.predict_mean(xt[None, :])
    difference_variance = posterior.difference_variance(X, xt) if return_cov else None
    check_finite_result("integrated_gradients", mean, cov)
    return Attribution(
        mean=mean,
        cov=cov,
        X=X,
        prediction=prediction,
        baseline=xt,
        baseline_prediction=float(baseline_prediction[0]),
        feature_names=list(names),
        method=label,
        difference_variance=difference_variance,
    )
