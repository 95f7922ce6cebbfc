"""Exact Shapley values of orthogonal additive GPs: local (with uncertainty) and global.

*Exact Shapley value for local and global explanation of additive Gaussian processes*
(anonymous authors, under double-blind review, 2024)
with the docs/errata.md corrections. For a GP with the orthogonal additive kernel
``k = sum_q sigma_q^2 e_q(kt_1, ..., kt_d)`` (``gx.kernels.OrthogonalAdditive``) the latent
function splits into independent functional-ANOVA components ``f = f_0 + sum_{S != {}} f_S`` that
integrate to zero under the kernel's product measure ``p = prod_i p_i``. Hence

* **local**: the Shapley value of feature i at x in the marginal game under that product
  measure, ``v(S) = E_{x_-S ~ prod_{j not in S} p_j} f(x_S, x_-S)``, is
  ``phi_i(x) = sum_{S ni i} f_S(x) / |S|`` (eq. 9). This is *not* the conditional game of
  eq. 5, nor KernelSHAP with a joint background sample. It is a linear functional of f, so
  under the posterior it is Gaussian with ``E phi = A a`` and ``Cov phi = P - A Q A^T``
  (``A``, ``P``: ``OrthogonalAdditive.shapley_cross`` and ``shapley_prior``; the functional is
  ``gpexplain.functionals.shapley.AdditiveShapley``, explained by the driver). The base value
  is ``v({}) = m0 + sigma_0^2 1^T a`` (Lemma 2 corrected, plus the constant prior mean m0),
  and completeness holds for the mean and the covariance: ``sum_i phi_i(x) = m(x) - v({})``
  and ``1^T Cov 1 = Var[f(x) - f_0]`` (f_0 the random constant).
* **global**: the Shapley effects of the variance of the posterior mean over x ~ p (Theorem 1,
  which needs the product measure), ``phi_i^G = sum_{S ni i} Var_p(m_S) / |S|``, and the
  first-order Sobol variances ``Var_p(m_{i})``.

Cost: O(n d Q) per explained point and O(n^2 d Q) for the global values (Q <= d the highest
interaction order), by leave-one-out elementary symmetric polynomials; never 2^d.
"""

from __future__ import annotations

import numpy as np

from gpexplain._validation import check_finite_result
from gpexplain.attribution import Attribution
from gpexplain.explain._driver import explain
from gpexplain.functionals.shapley import AdditiveShapley, not_additive_message
from gpexplain.global_attribution import GlobalShapleyValues
from gpexplain.kernels.orthogonal_additive import OrthogonalAdditive
from gpexplain.parallel import default_chunk_size
from gpexplain.posterior import as_posterior

__all__ = ["shapley_values", "global_shapley_values"]


def shapley_values(
    model_or_posterior, X, *, return_cov: bool = True, chunk_size: int | None = None,
    client=None, output_path=None,
) -> Attribution:
    """Exact local Shapley values of an orthogonal additive GP, with their posterior covariance.

    Implements the additive-Shapley paper, Lemma 1 / eq. 9 (the Shapley values of the marginal game
    under the
    kernel's product measure, docs/errata.md), extended to the full posterior::

        mean[p, i]   = sum_n A[p, i, n] a_n
        cov[p, i, j] = P[p, i, j] - A[p, i, :] Q A[p, j, :]^T

    with ``A[p, i, n] = sum_{S ni i} sigma_|S|^2 / |S| prod_{l in S} kt_l(x_pl, z_nl)`` and
    ``P_ij = sum_{S contains i, j} sigma_|S|^2 / |S|^2 prod_{l in S} kt_l(x_pl, x_pl)``.

    Parameters
    ----------
    model_or_posterior : fitted ``AdditiveGPRegressor`` or a posterior whose kernel is
        ``gx.kernels.OrthogonalAdditive``
    X : array-like of shape (n_points, n_features)
        Points to explain, in the original units (NumPy, pandas or torch).
    return_cov : bool, default True
        Also compute the (n_points, n_features, n_features) posterior covariance.
    chunk_size : int, optional
        Points processed at once (bounds memory); chosen automatically by default.
    client, output_path : distributed.Client, and str or pathlib.Path, optional
        Run the chunks on a Dask cluster (same results), and stream them to a ``.parquet``
        file whose path is returned instead (``gpexplain.explain._driver.explain``).

    Returns
    -------
    Attribution
        ``mean`` (n_points, n_features) in units of y; ``cov`` or None; ``baseline=None`` (the
        game has a reference *distribution*, not a point); ``baseline_prediction`` = base value
        ``v({}) = m0 + sigma_0^2 1^T a``, the mean of the posterior mean over the measure;
        ``difference_variance`` = posterior ``Var[f(x) - f_0]``, so ``completeness_gap()`` checks
        ``mean.sum(1) == prediction - baseline_prediction`` and ``cov.sum((1, 2))`` against it.
        For an ``AdditiveGPRegressor`` the game is that of the model on its transformed inputs
        (``input_transform_``), reported per original feature, in units of y.

    Raises
    ------
    TypeError
        Not a fitted estimator or posterior, its kernel is not ``OrthogonalAdditive``, or
        ``client`` is not a ``distributed.Client``.
    ValueError
        Bad query points (wrong number of features, NaN/inf, mismatched DataFrame columns) or
        ``chunk_size`` < 1.
    """
    return explain(
        model_or_posterior, X, AdditiveShapley(), return_cov=return_cov, chunk_size=chunk_size,
        client=client, output_path=output_path, caller="shapley_values",
    )


def global_shapley_values(model_or_posterior, *, chunk_size: int | None = None):
    """Exact global Shapley effects of the posterior mean of an orthogonal additive GP.

    The additive-Shapley paper, Theorem 1 (product measure, docs/errata.md): the variance of the
    posterior mean
    ``m(x) = m0 + k(x, Z) a`` over ``x ~ p`` (the kernel's measure) decomposes over the ANOVA
    components, ``Var_p m = sum_{S != {}} sigma_|S|^4 a^T (Hadamard_{l in S} M_l) a`` with
    ``M_l[n, k] = E_{s ~ p_l}[kt_l(s, z_nl) kt_l(s, z_kl)]``, and the Shapley effect of feature i
    is ``sum_{S ni i} Var_p(m_S) / |S|``. O(n^2 d Q) with Q the highest interaction order.

    These are importances of the posterior *mean*; their posterior uncertainty is not computed.

    Parameters
    ----------
    model_or_posterior : fitted ``AdditiveGPRegressor`` or a posterior with an
        ``OrthogonalAdditive`` kernel
    chunk_size : int, optional
        Rows of Z processed at once (bounds memory); automatic by default.

    Returns
    -------
    GlobalShapleyValues
        ``values`` (n_features,) Shapley effects and ``first_order`` (n_features,) Sobol
        variances, in squared units of y; ``total_variance`` = ``Var_p m`` = ``values.sum()``.

    Raises
    ------
    TypeError
        Not a fitted estimator or posterior, or its kernel is not ``OrthogonalAdditive``.
    """
    posterior = as_posterior(model_or_posterior)
    if not isinstance(posterior.kernel, OrthogonalAdditive):
        raise TypeError(not_additive_message(posterior.kernel))
    kernel, Z, alpha = posterior.kernel, posterior.train_inputs, posterior.alpha
    n_train, n_features = Z.shape
    if chunk_size is None:
        chunk_size = default_chunk_size(n_train, n_features, copies_per_point=kernel.order + 2)
    values, first_order, total = np.zeros(n_features), np.zeros(n_features), 0.0
    for start in range(0, n_train, chunk_size):
        rows = slice(start, start + chunk_size)
        shapley, first, whole = kernel.variance_functionals(Z[rows], Z)
        values += np.einsum("a,abd,b->d", alpha[rows], shapley, alpha)
        first_order += np.einsum("a,abd,b->d", alpha[rows], first, alpha)
        total += float(alpha[rows] @ whole @ alpha)
    check_finite_result("global_shapley_values", values, first_order, np.array(total))
    return GlobalShapleyValues(
        values=values,
        first_order=first_order,
        total_variance=max(total, 0.0),
        feature_names=list(posterior.feature_names),
        method=(
            "global Shapley effects of the posterior mean (orthogonal additive GP, "
            f"{type(kernel.measure).__name__.lower()} measure)"
        ),
    )
