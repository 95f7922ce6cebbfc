"""Global sensitivity (Sobol indices, Shapley effects) of product-kernel GPs, with uncertainty.

Under a product measure ``p = prod_j p_j`` over the inputs, every kernel section of a product
kernel, ``k(x, z) = s2 prod_j k_j(x_j, z_j)``, has the functional-ANOVA decomposition
``prod_j (mu_j(z_j) + c_j(x_j, z_j))`` with ``mu_j = E k_j`` and centred factors ``c_j = k_j -
mu_j`` (Sobol 1993; Durrande et al. 2013 for kernels): the component of a coalition S is
``prod_{j in S} c_j prod_{j not in S} mu_j``. For a function ``g = sum_n w_n k(., z_n)`` the
variance of its S component is therefore ``s2^2 w^T (Had_{j in S} C_j Had_{j not in S} B_j) w``
with the per-feature pair matrices

    E2_j[n, n'] = E_{s ~ p_j} k_j(s, z_nj) k_j(s, z_n'j),   B_j = mu_j mu_j^T,   C_j = E2_j - B_j

(Had: elementwise product), and the variance-based indices are sums over coalitions that
collapse to products, O(n^2 d^2) in all:

* total variance ``Had_j E2_j - Had_j B_j``;
* first order ``V_i``: ``C_i Had_{j != i} B_j``;
* total ``T_i = sum_{S ni i} Var g_S``: ``C_i Had_{j != i} E2_j``;
* Shapley effect ``sum_{S ni i} Var g_S / |S|`` (Owen 2014; Song, Nelson and Staum 2016):
  ``C_i int_0^1 Had_{j != i} (B_j + t C_j) dt``, the multilinear extension again (exact with
  ceil(d/2) Gauss-Legendre nodes; ``gpexplain.functionals.product_shapley``).

With ``H`` one of these (n, n) pair matrices, the index of the posterior mean ``m = m0 + k(., Z)
a`` is ``s2^2 a^T H a``. Each index is a quadratic functional F of f, so under the posterior
``f = m + g``, ``g ~ GP(0, c)``, ``c = k - k(., Z) Q k(Z, .)``, its expectation is exact:

    E F[f] = F[m] + s2 H(E2 -> 1, B -> M) - s2^2 sum_{n n'} Q_{nn'} H_{nn'},

(the prior term: ``k_j(x, x) = 1`` replaces the same-point moment, ``M_j = E k_j(s, s')`` the
independent one). The first-order variance ``V_i[f] = h^T A h`` is a quadratic form of the
Gaussian vector ``h = (E[f | x_i = u_g])_g`` at the nodes ``u_g`` of a rule for ``p_i``
(Gauss-Hermite, or the atoms of an empirical measure, which are exact), with ``A = diag(w) -
w w^T``; its posterior variance is ``2 tr((A S)^2) + 4 mu^T A S A mu`` (moments of a Gaussian
quadratic form).
"""

from __future__ import annotations

import numpy as np

from gpexplain._validation import check_finite_result
from gpexplain.explain._link import latent_posterior
from gpexplain.functionals.product_shapley import (
    gauss_legendre_unit,
    leave_one_out_products,
    multilinear_shapley,
    not_product_message,
)
from gpexplain.global_attribution import GlobalSensitivity
from gpexplain.kernels.measures import Empirical, Gaussian
from gpexplain.kernels.product import product_structure
from gpexplain.parallel import default_chunk_size
from gpexplain.posterior.mixture import MixturePosterior

__all__ = ["global_sensitivity"]


def global_sensitivity(
    model_or_posterior, measure=None, *, n_nodes: int = 64, chunk_size: int | None = None,
    target_class=None, output: str | None = None,
) -> GlobalSensitivity:
    """Sobol indices and Shapley effects of a product-kernel GP, in closed form, with their
    posterior expectation and (first order) posterior standard deviation.

    **Classifiers** (``gx.GPClassifier``, ``gx.from_sklearn(GaussianProcessClassifier)``): the
    indices are those of the latent function, which is Gaussian (class probabilities are not,
    and have no closed form here). Binary: the log-odds of ``classes_[1]`` (logit link;
    probit: ``Phi^{-1}`` of its probability given f), so the variances are in squared
    log-odds and say how much of the spread of the log-odds over the measure each feature
    drives. Softmax: the latent ``f_c`` of ``target_class``, identified only up to a
    function added to every class's latent alike, so its variance is not that of a log-odds
    of class c against the rest; compare features within one class.

    Parameters
    ----------
    model_or_posterior : fitted estimator or ``Posterior`` with a product kernel (ARD squared
        exponential, GPyTorch products of one-dimensional RBF / Matern / RQ kernels), or a
        classifier (see above)
    measure : gx.measures.Gaussian or gx.measures.Empirical, optional
        The product measure of the inputs. Default: independent Gaussians with each training
        column's mean and standard deviation (squared-exponential factors only; use
        ``Empirical(X)`` for Matern or RQ factors).
    n_nodes : int, default 64
        Gauss-Hermite nodes for the first-order posterior variance under a Gaussian measure
        (an empirical measure uses its atoms, exactly).
    chunk_size : int, optional
        Rows of Z processed at once (bounds memory); automatic by default.
    target_class : class label, optional
        Classifiers: the class whose latent is analysed. Binary: ``classes_[1]`` (the
        default; ``classes_[0]`` is refused: its log-odds is the negative, with the same
        indices). Softmax: required.
    output : {"latent"}, optional
        The only level these indices have (the default); "probability" is refused.

    Returns
    -------
    GlobalSensitivity
        Unnormalised variances (squared units of y; classifiers: squared latent units) of the
        posterior mean and their posterior expectations; indices (shares of ``Var m``) as
        properties.

    Raises
    ------
    TypeError
        Not a fitted estimator or posterior; a mixture posterior (indices are not linear in f,
        so they do not mix); a kernel without the product structure (integrated gradients
        named as the alternative); a measure that is not Gaussian or Empirical, or Gaussian
        with a Matern / RQ factor; ``output="probability"``.
    ValueError
        ``n_nodes`` or ``chunk_size`` not a positive integer; a measure with the wrong number of
        features; ``target_class`` missing (softmax), not a class, ``classes_[0]`` of a binary
        model, or given for a regression; an unknown ``output``.
    """
    for name, value in (("n_nodes", n_nodes), ("chunk_size", chunk_size)):
        if value is not None and (
            isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1
        ):
            raise ValueError(f"{name} must be a positive integer, got {value!r}.")
    posterior, _ = latent_posterior(model_or_posterior, target_class, output,
                                    "global_sensitivity")
    if isinstance(posterior, MixturePosterior):
        raise TypeError(
            "global_sensitivity needs one Gaussian posterior, not a MixturePosterior: Sobol "
            "indices are quadratic in f, so the mixture's are not the mixture of its parts'."
        )
    n_basis, n_features = posterior.train_inputs.shape
    structure = product_structure(posterior.kernel, n_features)
    if structure is None:
        raise TypeError(not_product_message(posterior.kernel, "global Sobol indices"))
    if measure is None:
        data = posterior.data_inputs
        measure = Gaussian(data.mean(0), np.maximum(data.std(0), 1e-12))
    if not isinstance(measure, Gaussian | Empirical):
        raise TypeError(
            "measure must be gx.measures.Gaussian or gx.measures.Empirical, got "
            f"{type(measure).__name__}."
        )
    measure = measure.resolve(n_features)
    Z, alpha = posterior.train_inputs, posterior.alpha
    nodes, weights = gauss_legendre_unit(n_features)
    mu = structure.embedding(Z, measure)
    Q = posterior.quadratic_form(np.eye(n_basis))
    if chunk_size is None:
        chunk_size = default_chunk_size(n_basis, n_features, copies_per_point=3 * len(nodes) + 6)
    of_mean = [0.0, np.zeros(n_features), np.zeros(n_features), np.zeros(n_features)]
    of_reduction = [0.0, np.zeros(n_features), np.zeros(n_features), np.zeros(n_features)]
    for start in range(0, n_basis, chunk_size):
        rows = slice(start, start + chunk_size)
        B = mu[rows, None, :] * mu[None, :, :]
        C = structure.centred_second_moment(Z[rows], Z, measure)
        for index, H in enumerate(_pair_functionals(B + C, B, C, nodes, weights)):
            of_mean[index] += np.einsum("a,ab...,b->...", alpha[rows], H, alpha)
            of_reduction[index] += np.einsum("ab,ab...->...", Q[rows], H)
    M = structure.double_embedding(measure)
    prior = _pair_functionals(
        np.ones((1, 1, n_features)), M[None, None, :],
        structure.centred_double_embedding(measure)[None, None, :], nodes, weights,
    )
    s2 = structure.variance
    mean_part = [s2**2 * value for value in of_mean]
    expected = [
        mean + s2 * prior_part[0, 0] - s2**2 * reduction
        for mean, prior_part, reduction in zip(mean_part, prior, of_reduction, strict=True)
    ]
    first_order_std = _first_order_std(posterior, structure, measure, mu, M, n_nodes)
    total_variance, first, total, shapley = mean_part
    check_finite_result("global_sensitivity", first, total, shapley, np.array(total_variance),
                        *expected[1:], np.array(expected[0]), first_order_std)
    return GlobalSensitivity(
        first_order=first,
        total=total,
        shapley_effects=shapley,
        total_variance=max(float(total_variance), 0.0),
        expected_first_order=expected[1],
        expected_total=expected[2],
        expected_shapley_effects=expected[3],
        expected_total_variance=float(expected[0]),
        first_order_std=first_order_std,
        feature_names=list(posterior.feature_names),
        method=(
            "Sobol indices and Shapley effects (product kernel, "
            f"{type(measure).__name__.lower()} measure)"
        ),
    )


def _pair_functionals(E2, B, C, nodes, weights):
    """Per pair (n, n'): the Hadamard matrices of the total variance (...,), and of the
    first-order, total and Shapley variances (..., d).

    ``C = E2 - B`` comes from the caller without cancellation (``centred_second_moment``);
    the total ``prod E2 - prod B`` telescopes into ``sum_i C_i prod_{j < i} E2_j prod_{j > i}
    B_j``, so every quantity is a sum of products of accurate factors.
    """
    before = np.cumprod(np.concatenate([np.ones_like(E2[..., :1]), E2[..., :-1]], -1), -1)
    after = np.cumprod(np.concatenate([np.ones_like(B[..., :1]), B[..., :0:-1]], -1), -1)
    total = np.sum(C * before * after[..., ::-1], axis=-1)
    return (
        total,
        C * leave_one_out_products(B),
        C * leave_one_out_products(E2),
        multilinear_shapley(E2, B, nodes, weights, delta=C),
    )


def _first_order_std(posterior, structure, measure, mu, M, n_nodes):
    """Posterior std of ``V_i[f]`` per feature, from the Gaussian vector of E[f | x_i] at nodes."""
    Z, alpha = posterior.train_inputs, posterior.alpha
    others_mu = leave_one_out_products(mu)  # prod_{j != i} mu_j(z_nj), (n, d)
    others_M = leave_one_out_products(M)
    s2 = structure.variance
    std = np.zeros(structure.n_features)
    for i in range(structure.n_features):
        if not structure.factors[i]:
            continue  # a feature the kernel ignores has V_i = 0 for every f
        if isinstance(measure, Empirical):
            u = measure.points[:, i]
            w = np.full(u.shape[0], 1.0 / u.shape[0])
        else:
            u, w = np.polynomial.hermite_e.hermegauss(n_nodes)
            u, w = measure.mean[i] + measure.std[i] * u, w / w.sum()
        section = structure.feature_matrix(i, u, Z[:, i]) * others_mu[:, i]  # (G, n)
        mean = s2 * section @ alpha
        cov = s2 * others_M[i] * structure.feature_matrix(i, u, u) - s2**2 * (
            posterior.quadratic_form(section)
        )
        A = np.diag(w) - np.outer(w, w)
        AS = A @ cov
        variance = 2.0 * np.sum(AS * AS.T) + 4.0 * mean @ AS @ A @ mean
        std[i] = np.sqrt(max(variance, 0.0))
    return std
