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
independent one).

Posterior standard deviations. Write an index as ``F[f] = <f, W f>`` with a pair measure W:
per feature ``P_j = p_j x p_j`` (independent points), ``D_j`` (the same point twice) and
``E_j = D_j - P_j``; first order ``E_i prod_{j != i} P_j``, total ``E_i prod_{j != i} D_j``,
Shapley ``E_i int_0^1 prod_{j != i} (P_j + t E_j) dt``, total variance ``prod D - prod P``.
Every W kills constants, so the prior mean drops out, and for ``f ~ GP(m, c)``

    Var F = 2 tr(W c W c) + 4 m W c W m
          = 2 s2^2 T + 4 s2^3 sum(G * (a a^T - Q)) + 2 s2^4 tr(H Q H Q) - 4 s2^4 (H a)^T Q (H a)

(``c = s2 kappa - s2^2 kappa(., Z) Q kappa(Z, .)``; Gaussian quadratic forms). Each term
factorises over features into per-feature integrals bilinear in the pair measures, tabulated
over {P, E} without cancellation (``ProductStructure.trace_moments``, ``centred_cross_moment``,
``centred_sandwich``, ``centred_second_moment``): the trace ``T = int W kappa W kappa``, the
three-kernel ``G = kappa(Z, .) W kappa W kappa(., Z)`` and the two-kernel ``H = kappa(Z, .) W
kappa(., Z)`` (the pair matrices above). Shapley effects need the double integral over (t, u)
(tensor Gauss-Legendre, exact); the total variance telescopes. Cost: O(n^2 d ceil(d/2)^2 / 2)
for G and, for ``tr(H Q H Q)``, one n x n by n x n product per index, 2 (1 + 3 d) n^3 flops
in all (500 points and 32 features, pumadyn-32nm in ``benchmarks/gp_sensitivity_speed.py``:
12 s of CPU on one core).

Sums of product kernels: the outputs of a linear model of coregionalisation (LMC, issue 24).
Output i of ``k((x, i), (x', j)) = sum_q B^q_ij s2_q kappa_q(x, x')`` has the posterior mean
``m_i = m0_i + sum_q s2_q kappa_q(., Z) (B^q[i, tasks] * a)`` and covariance ``c_i = sum_q
B^q_ii s2_q kappa_q - U_i K^{-1} U_i^T``, ``U_i = sum_q B^q[i, tasks] s2_q kappa_q(., Z)``: one
function on the stacked basis of rows (q, n) (``gpexplain.kernels.product_pairs.ProductTerms``)
with coefficients ``s2_q B^q[i, tasks] a``, data form ``R`` (``K^{-1}`` between the stacked
weights) and a prior that is a weighted sum of the terms' kernels. Every formula above holds
on that basis with the per-feature tables summed over the terms they mix: the pair matrices
H over (q, r) blocks (``PairStructure(kappa_q, kappa_r)``: the same Gaussian integrals with
two lengthscales), the prior term of the expectation over q with weight ``b_q = B^q_ii s2_q``,
the trace T over pairs (q, r) with ``b_q b_r`` and the three-kernel G over the middle term p
with ``b_p``. One kernel is the case Q = 1, ``b = 1`` (its variance kept as s2), and the
covariance of an index between outputs i and j of an ICM or LMC is the two-function case
(``b_q = B^q_ij s2_q``). Cost: Q^2 pair tables and Q^3 three-kernel tables; the n x n
products become (Q n) x (Q n).

Precision (issue 27, item 15). Every quantity above is a sum of per-pair entries weighted by
``a a^T`` or R, which for a nearly interpolating GP are ~1e9 and ~1e10 while the sums are O(1):
float64 keeps ``eps s2^2 |a|_1^2`` of them, and per-entry rounding cannot be removed later. The
same code therefore runs on binary128 arrays (``gpexplain._quad``) when that bound passes
``_QUAD_TRIGGER`` of the variance: points, coefficients, atoms and Shapley nodes in binary128
(the float64 inputs are exact there), R from the binary128 inverse of the Cholesky factor.
Constants rounded once (lengthscale ratios, a Gaussian measure's moments) perturb the mean by
``eps |a|_1`` alike for every index, so the identities between indices hold to binary128.
"""

from __future__ import annotations

import itertools
import warnings
from dataclasses import dataclass, replace

import numpy as np

from gpexplain._quad import QUAD_EPS, is_quad, lower_triangular_inverse, matmul, to_quad
from gpexplain._threads import native_threads
from gpexplain._torch import to_numpy
from gpexplain._validation import check_finite_result
from gpexplain.accuracy import CompletenessWarning, warn_if_sobol_inconsistent
from gpexplain.explain._pipeline import through_pipeline
from gpexplain.functionals.product_shapley import (
    gauss_legendre_unit,
    leave_one_out_products,
    multilinear_shapley,
    not_product_message,
)
from gpexplain.functionals.terms import CoregionalTerms, sum_terms
from gpexplain.global_attribution import GlobalSensitivity, MultiOutputSensitivity
from gpexplain.kernels.measures import Gaussian, check_measure, in_quad_precision
from gpexplain.kernels.product import product_structure
from gpexplain.kernels.product_pairs import ProductTerms
from gpexplain.parallel import _MEMORY_BUDGET_BYTES, default_chunk_size
from gpexplain.posterior.linked import latent_posterior
from gpexplain.posterior.mixture import MixturePosterior
from gpexplain.posterior.multi_output import MultiOutputPosterior, TaskAugmentedPosterior

__all__ = ["global_sensitivity"]

# Recompute in binary128 when the float64 rounding of the quadratic forms, ``eps s2^2
# |a|_1^2``, exceeds this share of the variance: 1e-10, a hundredth of the identities'
# tolerance (``COMPLETENESS_RTOL``), so a result that passes in float64 is left as it is.
_QUAD_TRIGGER = 1e-10
# Binary128 matrix products cost ~5e-8 s per multiply-add on one core (numpy-quaddtype 1.0,
# measured at n = 300); the posterior stds need one n x n product per index. Above this many
# estimated seconds the stds stay float64, with a warning.
_QUAD_SECONDS_PER_PRODUCT = 6e-8
_QUAD_STD_SECONDS = 60.0


@through_pipeline
def global_sensitivity(
    model_or_posterior, measure=None, *, chunk_size: int | None = None,
    target_class=None, output: str | None = None, interactions: bool = False, outputs=None,
) -> GlobalSensitivity | MultiOutputSensitivity:
    """Sobol indices and Shapley effects of a product-kernel GP, in closed form, with their
    posterior expectations and posterior standard deviations.

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
        classifier (see above), or an output of a linear model of coregionalisation
        (``gx.LMCPosterior``'s ``marginal(i)``, a sum of such product kernels, one per term;
        module docstring). A fitted ``gx.make_pipeline(...)`` too: the indices are of
        its encoded columns (one per indicator), by default under the empirical measure of the
        encoded training rows.
    measure : gx.measures.Gaussian, Empirical or Uniform, optional
        The product measure of the inputs. Default: independent Gaussians with each training
        column's mean and standard deviation (squared-exponential factors only; use
        ``Empirical(X)`` for Matern or RQ factors). ``Uniform(low, high)``: a box (the
        measure of Ax / BoTorch's Sobol indices), SE and RQ factors. Parameters given as
        labelled pandas Series (``Empirical``: a DataFrame) are matched to the features by
        name.
    chunk_size : int, optional
        Rows of Z processed at once (bounds memory); automatic by default.
    target_class : class label, optional
        Classifiers: the class whose latent is analysed. Binary: ``classes_[1]`` (the
        default; ``classes_[0]`` is refused: its log-odds is the negative, with the same
        indices). Softmax: required.
    output : {"latent"}, optional
        The only level these indices have (the default); "probability" is refused.
    interactions : bool, default False
        Also the second-order (pure interaction) Sobol variances ``V_ij = Var g_ij`` of every
        pair, ``s2^2 a^T (C_i C_j Had_{l != i, j} B_l) a`` for the posterior mean, with their
        posterior expectations and standard deviations (the same quadratic-form moments as
        the other indices, ``W_ij = E_i E_j prod_{l != i, j} P_l``). Extra cost per pair: two
        products of n x n matrices; memory O(n^2 d).
    outputs : output name or index, or a sequence of them, optional
        A multi-output posterior or estimator (``gx.as_multi_output``, ``gx.GPRegressor`` on
        a 2-D y) only: the outputs to analyse (default all). Each output's indices are those
        of its marginal posterior (``posterior.marginal(i)``), all under the same measure
        (by default the Gaussian of the shared training inputs), returned as a
        ``MultiOutputSensitivity``, with the posterior covariance of each index between the
        outputs (``index_covariance``): exact for an ICM and an LMC (``gx.LMCPosterior``,
        ``GPRegressor(multi_output="lmc")``: ``_quadratic_moments`` with the two outputs'
        cross-covariance ``sum_q B^q_ij s2_q kappa_q - U_i K^{-1} U_j^T``), zero for
        independent outputs.

    Returns
    -------
    GlobalSensitivity (MultiOutputSensitivity for a multi-output model: one per output)
        Unnormalised variances (squared units of y; classifiers: squared latent units) of the
        posterior mean, their posterior expectations and posterior standard deviations over f
        (``first_order_std``, ``total_std``, ``shapley_effects_std``, ``total_variance_std``:
        exact moments of a quadratic form of a Gaussian, module docstring); indices (shares of
        ``Var m``) as properties. With ``interactions=True``: ``second_order``,
        ``expected_second_order`` and ``second_order_std``, symmetric (d, d) with a zero
        diagonal (``interactions_frame()``: one row per pair).

    Notes
    -----
    Cost: O(n^2 d ceil(d/2)^2) elementwise work and (1 + 3 d) products of n x n matrices
    (``tr(H Q H Q)``, O(n^3) per index); memory O(n^2 (1 + 3 d)) up to 256 MiB, then the
    n^3 products are grouped and the pair matrices recomputed per group. An index that the
    data pin down far below the prior's scale has a posterior variance that is a difference
    of prior and data terms; round-off can make it slightly negative, and it is then reported
    as a standard deviation of 0. An LMC output of Q terms costs as one kernel on Q n basis
    rows, plus Q^3 three-kernel tables.

    Nearly interpolating GPs (noise variance ~1e-10, scikit-learn's default ``alpha``):
    the indices are quadratic forms ``a^T H a`` in ``a = K^{-1} y``, which then reaches
    1e6-1e10, and float64 rounds them at ``eps s2^2 |a|_1^2``, far above the variance. When
    that bound exceeds 1e-10 of the variance, everything is recomputed in binary128
    (``gpexplain._quad``: the pair tables, the sums, and ``K^{-1}`` from the binary128
    inverse of the float64 Cholesky factor, an exact posterior of the model with the
    factor's backward error added to its noise); ``method`` then ends in "quadruple
    precision". Measured on 60 points with |a|_1 = 6e8: 2e-3 to 3e-3 of the variance off a
    40-digit reference in float64, 5e-16 in binary128. Its products have no BLAS (~5e-8 s
    per multiply-add): 200 points and 5 features of red wine take 9.4 s against 0.07 s
    (``benchmarks/interpolating_sensitivity.py``; the bound is worst-case, and float64 had
    been accurate to 3e-11 there).

    Raises
    ------
    TypeError
        Not a fitted estimator or posterior; a mixture posterior (indices are not linear in f,
        so they do not mix); a kernel (or an LMC term's kernel) without the product
        structure (integrated gradients named as the alternative); a measure that is not
        Gaussian, Empirical or Uniform, Gaussian with a Matern / RQ factor, or Uniform with a
        Matern factor;
        ``output="probability"``.
    ValueError
        ``chunk_size`` not a positive integer; a measure with the wrong number of features,
        or with labels that are not the features' names;
        a Uniform box more than 512 lengthscales wide;
        ``target_class`` missing (softmax), not a class, ``classes_[0]`` of a binary model, or
        given for a regression or a multi-output model; an unknown ``output``; ``outputs``
        for a single-output model, or naming an unknown output.

    Warns
    -----
    CompletenessWarning
        The indices of the posterior mean break ``0 <= first_order <= shapley_effects <=
        total`` or ``sum(shapley_effects) == total_variance`` by more than 1e-8 of the
        variance (``gpexplain.accuracy.warn_if_sobol_inconsistent``): even binary128 cannot
        hold them (``|a|_1`` beyond ~1e12). The message gives the measured gaps; a larger
        noise variance is the remedy. Also when the binary128 posterior stds would take more
        than 60 s (estimated, ``3 + 3 d`` (plus ``d (d - 1)`` with ``interactions``) products
        of n x n matrices): the stds are then the float64 ones, with the estimate and the
        scale below which they keep no digit.
    """
    if chunk_size is not None and (
        isinstance(chunk_size, bool) or not isinstance(chunk_size, int | np.integer)
        or chunk_size < 1
    ):
        raise ValueError(f"chunk_size must be a positive integer, got {chunk_size!r}.")
    several = (model_or_posterior if isinstance(model_or_posterior, MultiOutputPosterior)
               else getattr(model_or_posterior, "posterior_", None))
    if isinstance(several, MultiOutputPosterior):
        return _per_output(several, measure, outputs, target_class, chunk_size=chunk_size,
                           output=output, interactions=interactions)
    if outputs is not None:
        raise ValueError("outputs= applies to multi-output posteriors; global_sensitivity got "
                         "a single-output model: drop outputs.")
    posterior, latent = latent_posterior(model_or_posterior, target_class, output,
                                         "global_sensitivity")
    if isinstance(posterior, MixturePosterior):
        raise TypeError(
            "global_sensitivity needs one Gaussian posterior, not a MixturePosterior: Sobol "
            "indices are quadratic in f, so the mixture's are not the mixture of its parts'. "
            "Use a model with one posterior (gx.GPRegressor, gx.SparseGPRegressor, or "
            "gx.RandomFeatureGPRegressor(n_models=1))."
        )
    n_features = posterior.train_inputs.shape[1]
    form = _term_form(posterior)
    n_basis = form.terms.n_basis  # rows of the stacked basis: Q n for an LMC output
    if measure is None:
        measure = _training_measure(posterior.data_inputs)
    check_measure(measure)
    measure = measure.resolve(n_features, posterior.feature_names)
    if not isinstance(interactions, bool | np.bool_):
        raise TypeError(f"interactions must be True or False, got {interactions!r}.")
    chunk_size, sandwich_rows = _row_blocks(n_basis, n_features, chunk_size)
    with native_threads(n_basis):
        of_mean, expected, std = _moments(form, measure, chunk_size, sandwich_rows)
    weight = np.sum(np.abs(form.left)) ** 2 * form.s2**2
    rounding = np.finfo(float).eps * weight
    names = ("second_order", "expected_second_order", "second_order_std")
    precision, pairs = "", {}
    quad = rounding > _QUAD_TRIGGER * max(abs(of_mean[0]), abs(expected[0]))
    if quad:
        n_products = 3 + 3 * n_features + (n_features * (n_features - 1) if interactions else 0)
        seconds = _QUAD_SECONDS_PER_PRODUCT * n_products * n_basis**3
        stds = seconds <= _QUAD_STD_SECONDS
    if interactions and not (quad and stds):  # binary128 with stds replaces all of it
        pairs = dict(zip(names, _second_order(form, measure), strict=True))
    if quad:
        # Nearly interpolating: float64 keeps too few digits of the quadratic forms.
        quad_form, quad_measure = _term_form(posterior, quad=True), in_quad_precision(measure)
        of_mean, expected, quad_std = (None if part is None else np.asarray(part).astype(
            np.float64) for part in _moments(quad_form, quad_measure, max(1, chunk_size // 2),
                                             sandwich_rows, covariance=stds))
        std = quad_std if stds else std
        if interactions:
            quad_pairs = _second_order(quad_form, quad_measure, covariance=stds)
            pairs.update(zip(names[:len(quad_pairs)], quad_pairs, strict=True))
        rounding, precision = QUAD_EPS * weight, ", quadruple precision"
        if not stds:
            warnings.warn(
                f"global_sensitivity: a nearly interpolating GP (|K^-1 y|_1 = "
                f"{np.sum(np.abs(form.left)):.3g}): the indices and their expectations are "
                "computed in quadruple precision, but their posterior standard deviations "
                f"would take an estimated {seconds:.0f} s there ({n_products} products of "
                f"{n_basis} x {n_basis} binary128 matrices), so they are the float64 ones, "
                f"which keep no digit below about "
                f"{np.sqrt(np.finfo(float).eps * weight):.3g}. A larger noise variance "
                "makes them accurate.",
                CompletenessWarning, stacklevel=3)
    check_finite_result("global_sensitivity", of_mean, expected, std, *pairs.values())
    total_variance, first, total, shapley = _split(of_mean)
    _, expected_first, expected_total, expected_shapley = _split(expected)
    result = GlobalSensitivity(
        first_order=first,
        total=total,
        shapley_effects=shapley,
        total_variance=max(float(total_variance), 0.0),
        expected_first_order=expected_first,
        expected_total=expected_total,
        expected_shapley_effects=expected_shapley,
        expected_total_variance=float(expected[0]),
        first_order_std=_split(std)[1],
        total_std=_split(std)[2],
        shapley_effects_std=_split(std)[3],
        total_variance_std=float(std[0]),
        feature_names=list(posterior.feature_names),
        **pairs,
        method=(
            "Sobol indices and Shapley effects ("
            + ("product kernel" if len(form.terms.structures) == 1 else
               f"LMC output, {len(form.terms.structures)} product-kernel terms")
            + f", {type(measure).__name__.lower()} measure{precision})"
            + ("" if latent is None else f" of the {latent}")
        ),
    )
    warn_if_sobol_inconsistent(result, "global_sensitivity", rounding)
    return result


def _in_quad(form: _TermForm) -> _TermForm:
    """``form`` with its points, coefficients and data form in binary128 (``gpexplain._quad``:
    each float64 is exact there, so this is the same function, now summed to ~34 digits)."""
    return replace(form, terms=replace(form.terms, Z=to_quad(form.terms.Z)),
                   left=to_quad(form.left), R=form.R if is_quad(form.R) else to_quad(form.R),
                   right=None if form.right is None else to_quad(form.right))


def _row_blocks(n_basis: int, n_features: int, chunk_size: int | None) -> tuple[int, int]:
    """``(chunk_size, sandwich_rows)``: rows of the (stacked) basis per pass over the pair
    matrices H (the caller's, or from the memory budget) and per pass over the three-kernel
    G (at most ``chunk_size``)."""
    # The leave-one-out products of G run fastest on (rows, n) slabs of ~4096 numbers, which
    # stay in cache (measured: 8 rows of 500 take 25% less time per row than 4 or 16).
    sandwich_rows = max(1, 4096 // n_basis)
    if chunk_size is None:
        # Per row of Z: the Shapley pair matrices' path, ~3 (n, d) slabs per Gauss-Legendre
        # node, and ~8 more for the other pair matrices.
        nodes = len(gauss_legendre_unit(n_features)[0])
        chunk_size = default_chunk_size(n_basis, n_features, copies_per_point=3 * nodes + 8)
    return chunk_size, min(sandwich_rows, chunk_size)


def _training_measure(data: np.ndarray) -> Gaussian:
    """The default measure: independent Gaussians with the training columns' moments."""
    return Gaussian(data.mean(0), np.maximum(data.std(0), 1e-12))


def _per_output(posterior: MultiOutputPosterior, measure, outputs, target_class, **options):
    """``global_sensitivity`` of each selected output's marginal posterior, under one measure
    (default: that of the training inputs all outputs share)."""
    if target_class is not None:
        raise ValueError(
            f"target_class={target_class!r} applies to classifiers; this model has several "
            f"regression outputs {posterior.output_names}: choose them with outputs=."
        )
    index = posterior.output_index(outputs)
    if measure is None:
        measure = _training_measure(posterior.data_inputs)
    names = [posterior.output_names[i] for i in index]
    results = [
        replace(result, method=f"{result.method}, output {name!r}")
        for name, result in zip(
            names, (global_sensitivity(posterior.marginal(i), measure, **options) for i in index),
            strict=True)
    ]
    variances = np.stack([np.concatenate([[r.total_variance_std], r.first_order_std,
                                          r.total_std, r.shapley_effects_std]) ** 2
                          for r in results], axis=-1)  # (1 + 3 d, t)
    between = None
    if posterior.independent:
        between = variances[:, :, None] * np.eye(len(index))
    elif isinstance(posterior, TaskAugmentedPosterior):  # ICM or LMC
        between = _between_outputs(posterior, index, measure, options["chunk_size"], variances)
    if between is not None:
        total_variance, first, total, shapley = _split(np.moveaxis(between, 0, -1))
        between = {"total_variance": total_variance, "first_order": np.moveaxis(first, -1, 0),
                   "total": np.moveaxis(total, -1, 0),
                   "shapley_effects": np.moveaxis(shapley, -1, 0)}
    return MultiOutputSensitivity(results, names, posterior.independent, between)


@dataclass(frozen=True)
class _TermForm:
    """A function ``f_i = m0_i + s2 sum_q kappa_q(., Z) w^i_q + g_i`` over the stacked basis of
    ``ProductTerms`` (rows (q, n)), with a second such function ``f_j`` for a covariance.

    Attributes
    ----------
    terms : ProductTerms
        The terms kappa_q and the prior cross-covariance weights ``b_q`` of ``Cov(g_i, g_j) =
        s2 sum_q b_q kappa_q - s2^2 kappa_Z R kappa_Z^T``.
    left, right : ndarray (Q N,)
        Stacked coefficients of the two means; right None: the same function as left.
    R : ndarray (Q N, Q N)
        The data term's quadratic form on the stacked basis.
    s2 : float
        A common kernel variance kept out of the tables (one kernel: its variance; LMC: 1,
        each term's variance being in ``b_q``, ``left``, ``right`` and R).
    """

    terms: ProductTerms
    left: np.ndarray
    right: np.ndarray | None
    R: np.ndarray
    s2: float


def _term_form(posterior, quad: bool = False) -> _TermForm:
    """The ``_TermForm`` of a single-output posterior: one product kernel (``b = 1``, R =
    K^{-1}-like ``quadratic_form(I)``), or an LMC output's ``CoregionalTerms`` (one term per
    kernel, ``_stacked_form``); with ``quad``, in binary128 (``_data_form``).

    Raises
    ------
    TypeError
        A kernel (or a term's kernel) without the product structure.
    """
    Z, kernel = posterior.train_inputs, posterior.kernel
    if isinstance(kernel, CoregionalTerms):
        cross = np.broadcast_to(kernel.cross_weights, (len(kernel.kernels), len(Z)))
        return _stacked_form(posterior, kernel.kernels, kernel.prior_weights, cross, None, quad)
    structure = product_structure(kernel, Z.shape[1])
    if structure is None:
        raise TypeError(not_product_message(kernel, "global Sobol indices"))
    form = _TermForm(ProductTerms((structure,), np.ones(1), Z), posterior.alpha, None,
                     _data_form(posterior, np.eye(len(Z)), None, quad), structure.variance)
    return _in_quad(form) if quad else form


def _data_form(posterior, left_rows, right_rows, quad):
    """``left_rows K^{-1} right_rows^T`` (right None: left), from the posterior's
    ``quadratic_form``; with ``quad``, in binary128 through the inverse of its Cholesky factor
    (``gpexplain._quad.lower_triangular_inverse``: an exact posterior covariance of a model
    with the factor's tiny backward error added to the noise) where it has one, else its
    float64 form."""
    factor = getattr(posterior, "cholesky", None)
    if not quad or factor is None:
        R = posterior.quadratic_form(left_rows, right_rows)
        return to_quad(R) if quad else R
    whitening = lower_triangular_inverse(to_numpy(factor)).T  # (n, n): K^{-1} = W W^T
    left = matmul(to_quad(left_rows), whitening)
    right = left if right_rows is None else matmul(to_quad(right_rows), whitening)
    return matmul(left, np.ascontiguousarray(right.T))


def _stacked_form(posterior, kernels, prior_weights, left_weights, right_weights, quad=False):
    """``_TermForm`` of a sum of coregionalised terms: ``f_i``'s mean ``sum_q s2_q kappa_q(.,
    Z) (B^q[i, tasks] * a)`` and the covariance ``sum_q B^q_ij s2_q kappa_q - U_i K^{-1}
    U_j^T`` with ``U_i = sum_q B^q[i, tasks] s2_q kappa_q(., Z)``.

    ``prior_weights`` (Q,) are ``B^q_ij``, ``left_weights``/``right_weights`` (Q, N) are
    ``B^q[i, tasks]`` and ``B^q[j, tasks]`` (right None: j = i); ``posterior.quadratic_form``
    supplies ``K^{-1}`` between the stacked weight matrices.

    Raises
    ------
    TypeError
        A term's kernel without the product structure.
    """
    Z = posterior.train_inputs
    structures = tuple(product_structure(kernel, Z.shape[1]) for kernel in kernels)
    for kernel, structure in zip(kernels, structures, strict=True):
        if structure is None:
            raise TypeError(not_product_message(kernel, "global Sobol indices of every term"))
    s2 = np.array([structure.variance for structure in structures])

    def stacked(weights):  # rows (q, n): s2_q B^q[i, task_n] e_n, (Q N, N)
        scaled = s2[:, None] * np.asarray(weights)
        return (scaled[:, :, None] * np.eye(len(Z))).reshape(-1, len(Z)), scaled.reshape(-1)

    left_rows, left = stacked(left_weights)
    right_rows, right = (None, None) if right_weights is None else stacked(right_weights)
    R = _data_form(posterior, left_rows, right_rows, quad)
    alpha = np.tile(posterior.alpha, len(structures))
    form = _TermForm(ProductTerms(structures, np.asarray(prior_weights) * s2, Z),
                     left * alpha, None if right is None else right * alpha, R, 1.0)
    return _in_quad(form) if quad else form


def _between_outputs(posterior, index, measure, chunk_size, variances):
    """Posterior covariance of every index between the selected outputs of an ICM or LMC,
    (1 + 3 d, t, t) in ``_split``'s layout, with ``variances`` (the per-output squared stds,
    (1 + 3 d, t)) on the diagonal.

    Output o is ``m0_o + sum_q s2_q kappa_q(., Z) (B^q[o, tasks] a) + g_o`` and ``Cov(g_o,
    g_o') = sum_q B^q_oo' s2_q kappa_q - U_o K^{-1} U_o'^T`` (``_stacked_form``), the
    two-function case of ``_quadratic_moments``.
    """
    Z = posterior.train_inputs
    check_measure(measure)
    measure = measure.resolve(Z.shape[1], posterior.feature_names)
    kernels = [kernel for kernel, _ in posterior.coregionalization_terms]
    task_weights = posterior.term_task_weights(index)  # (Q, t, N)
    between_terms = posterior.term_coregionalizations(index)  # (Q, t, t)
    chunk_size, sandwich_rows = _row_blocks(len(Z) * len(kernels), Z.shape[1], chunk_size)
    between = variances[:, :, None] * np.eye(len(index))
    with native_threads(len(Z) * len(kernels)):
        for a, b in itertools.combinations(range(len(index)), 2):
            form = _stacked_form(posterior, kernels, between_terms[:, a, b],
                                 task_weights[:, a], task_weights[:, b])
            covariance = _quadratic_moments(form, measure, chunk_size, sandwich_rows)[2]
            between[:, a, b] = between[:, b, a] = covariance
    check_finite_result("global_sensitivity", between)
    return between


def _leave_two_out(ee, pp):
    """``ee_i ee_j prod_{l != i, j} pp_l`` for every pair ``i < j`` (features on the last
    axis): a generator of ``(i, j, array)`` (division-free leave-one-out products of pp with
    ``pp_i`` set to 1)."""
    n_features = pp.shape[-1]
    for i in range(n_features - 1):
        held = pp.copy()
        held[..., i] = 1.0
        without = leave_one_out_products(held)
        for j in range(i + 1, n_features):
            yield i, j, ee[..., i] * ee[..., j] * without[..., j]


def _pairwise(weighted_tables, contract=lambda x: x):
    """``{(i, j): sum_k w_k contract(ee_i ee_j prod_{l != i, j} pp_l)}`` over weighted
    ``(w_k, (pp, ee))`` tables (features on the last axis)."""
    out = {}
    for weight, (pp, ee) in weighted_tables:
        for i, j, value in _leave_two_out(ee, pp):
            out[i, j] = out.get((i, j), 0.0) + weight * contract(value)
    return out


def _second_order(form, measure, covariance=True):
    """Second-order Sobol variances of the posterior mean, their posterior expectations and
    standard deviations, each (d, d) symmetric with a zero diagonal.

    For ``W_ij = E_i E_j prod_{l != i, j} P_l`` (the pure interaction component's variance),
    the pair matrix is ``H = C_i C_j Had_{l != i, j} B_l``, the prior term ``Cd_i Cd_j prod M_l``
    and the trace and three-kernel terms ``EE_i EE_j prod PP_l`` of the {P, E} tables: the
    module docstring's formulas with the pair in place of one feature, each summed over the
    terms (``ProductTerms``: prior per term, trace per pair of terms, three-kernel per middle
    term). Without ``covariance``: the first two only (no n x n products).
    """
    terms, alpha, Q, s2 = form.terms, form.left, form.R, form.s2
    n_features = terms.Z.shape[1]
    data_weight = np.outer(alpha, alpha) - Q
    mu = terms.embedding(measure)
    B = mu[:, None, :] * mu[None, :, :]
    everything = list(terms.blocks(len(terms.Z)))  # one block per term
    C = np.concatenate([terms.centred_second_moment(q, rows, measure)
                        for _, q, rows in everything])
    prior = _pairwise((b, (M, Cd)) for b, M, Cd in terms.priors(measure))
    value, expected, std = (np.zeros((n_features, n_features)) for _ in range(3))
    if not covariance:
        for i, j, H in _leave_two_out(C, B):
            of_mean = matmul(alpha, matmul(H, alpha))
            value[i, j] = value[j, i] = s2**2 * of_mean
            expected[i, j] = expected[j, i] = (s2**2 * of_mean + s2 * prior[i, j]
                                               - s2**2 * np.sum(Q * H))
        return value, expected
    trace = _pairwise((w, (tables[0], tables[3])) for w, tables in terms.trace_tables(measure))
    lam = terms.cross_moments(measure)
    by_middle = zip(*(terms.sandwich_tables(q, rows, measure, mu, lam)
                      for _, q, rows in everything), strict=True)
    sandwich = _pairwise(
        ((parts[0][0], (np.moveaxis(np.concatenate([t[1][0] for t in parts], axis=1), 0, -1),
                        np.moveaxis(np.concatenate([t[1][3] for t in parts], axis=1), 0, -1)))
         for parts in by_middle),
        lambda g: np.sum(g * data_weight))
    for i, j, H in _leave_two_out(C, B):
        HQ = matmul(H, Q)
        H_alpha = matmul(H, alpha)
        of_mean = matmul(alpha, H_alpha)
        variance = (2 * s2**2 * trace[i, j] + 4 * s2**3 * sandwich[i, j]
                    + 2 * s2**4 * np.sum(HQ * HQ.T)
                    - 4 * s2**4 * matmul(matmul(H_alpha, Q), H_alpha))
        entries = (s2**2 * of_mean,
                   s2**2 * of_mean + s2 * prior[i, j] - s2**2 * np.sum(Q * H),
                   np.sqrt(np.maximum(variance, 0.0)))
        for matrix, entry in zip((value, expected, std), entries, strict=True):
            matrix[i, j] = matrix[j, i] = entry
    return value, expected, std


def _split(stacked):
    """``(total variance, first order (d,), total (d,), Shapley (d,))`` of a stacked (1 + 3 d,)
    vector, the layout every helper below uses for the indices."""
    d = (stacked.shape[-1] - 1) // 3
    return (stacked[..., 0], stacked[..., 1:d + 1], stacked[..., d + 1:2 * d + 1],
            stacked[..., 2 * d + 1:])


def _moments(form, measure, chunk_size, sandwich_rows, covariance=True):
    """Indices of the posterior mean, their posterior expectations and standard deviations,
    each stacked (1 + 3 d,) (``_split``; stds None without ``covariance``).

    The prior term of the expectation is ``s2 sum_q b_q H_q(E2 -> 1, B -> M)`` and the data
    terms come from ``_quadratic_moments`` with both functionals on the same f (module
    docstring).
    """
    n_features = form.terms.Z.shape[1]
    nodes, weights = gauss_legendre_unit(n_features, quad=is_quad(form.left))
    of_mean, of_reduction, variance = _quadratic_moments(form, measure, chunk_size,
                                                         sandwich_rows, covariance)
    prior = sum_terms(b * _stacked(_pair_functionals(
        np.ones((1, 1, n_features)), M[None, None, :], Cd[None, None, :], nodes, weights,
    ))[0, 0] for b, M, Cd in form.terms.priors(measure))
    s2 = form.s2
    # A difference of prior and data terms: an index the data pin down to round-off can come
    # out slightly negative; its standard deviation is then zero to working precision.
    std = None if variance is None else np.sqrt(np.maximum(variance, 0.0))
    return s2**2 * of_mean, s2**2 * of_mean + s2 * prior - s2**2 * of_reduction, std


def _quadratic_moments(form, measure, chunk_size, sandwich_rows, covariance=True):
    """``(a_i^T H a_j, sum(R * H), Cov(F[f_i], F[f_j]))`` for every index (each (1 + 3 d,),
    ``_split``'s layout; H the index's pair matrix on the stacked basis), where ``f_i = m0_i +
    s2 kappa(., Z) a_i + g_i`` and ``f_j`` are jointly Gaussian with cross-covariance ``c_ij =
    s2 sum_q b_q kappa_q - s2^2 kappa_Z R kappa_Z^T`` (``form``: ``a_i = left``, ``a_j =
    right``; right None: the same f, so R symmetric).

    For a quadratic functional ``F = <f, W f>`` Isserlis' theorem gives ``Cov(F[f_i], F[f_j])
    = 2 tr(W c_ij W c_ji) + 4 m_i W c_ij W m_j`` (``c_ji = c_ij^T``), that is

        2 s2^2 T + 4 s2^3 sum(G * (a_i a_j^T - R))
            + 2 s2^4 tr(H R H R^T) - 4 s2^4 (H a_i)^T R (H a_j)

    with ``T = sum_{q r} b_q b_r tr(W kappa_q W kappa_r)`` and ``G = sum_p b_p kappa_Z W
    kappa_p W kappa_Z`` (G symmetric, so ``sum(G * X) = sum(G * X^T)``). ``tr(H R H R^T)``
    needs all of ``H R`` (and of ``H R^T`` unless R is symmetric): it is accumulated for as
    many indices as fit in the memory budget of ``gpexplain.parallel`` (all of them in the
    first pass while (1 + 3 d) n^2 <= 32 Mi numbers); further groups of indices recompute H
    in further passes, by row chunks of the stacked basis (``chunk_size`` rows for H,
    ``sandwich_rows`` for the three-kernel G). Without ``covariance`` only the first two are
    computed (O(n^2 d^2), no n x n products) and the third is None.
    """
    terms, left, right, Q = form.terms, form.left, form.right, form.R
    symmetric = right is None
    right = left if symmetric else right
    n_basis, n_features = terms.n_basis, terms.Z.shape[1]
    nodes, weights = gauss_legendre_unit(n_features, quad=is_quad(left))
    mu = terms.embedding(measure)
    data_weight = np.outer(left, right) - Q
    n_indices = 1 + 3 * n_features
    # Contractions by 2-D matmul and sums, accumulators in the inputs' dtype: the same code
    # runs in binary128 (gpexplain._quad: no einsum or stacked matmul there, and no silent
    # cast into float64).
    of_mean, of_reduction, sandwich, data_trace = (np.zeros(n_indices, dtype=left.dtype)
                                                   for _ in range(4))
    H_left, H_right = (np.zeros((n_basis, n_indices), dtype=left.dtype) for _ in range(2))
    copies = 1 if symmetric else 2
    group = max(1, _MEMORY_BUDGET_BYTES // (left.dtype.itemsize * copies * n_basis * n_basis))
    for first_index in range(0, n_indices if covariance else 1, group):
        chosen = (slice(first_index, min(first_index + group, n_indices)) if covariance
                  else slice(0, 0))
        HQ = np.empty((chosen.stop - chosen.start, n_basis, n_basis), dtype=left.dtype)
        HQt = HQ if symmetric else np.empty_like(HQ)
        for rows, q, local in terms.blocks(chunk_size):
            H = _index_pairs(terms, measure, mu, rows, q, local, nodes, weights)
            for k, index in enumerate(range(chosen.start, chosen.stop)):
                HQ[k, rows] = matmul(H[..., index], Q)
                if not symmetric:
                    HQt[k, rows] = matmul(H[..., index], Q.T)
            if first_index > 0:
                continue
            of_mean += matmul(right, matmul(left[rows], H.reshape(len(H), -1)).reshape(
                n_basis, n_indices))
            of_reduction += matmul(Q[rows].reshape(-1), H.reshape(-1, n_indices))
            H_left[rows] = np.sum(H * left[:, None], axis=1)
            H_right[rows] = H_left[rows] if symmetric else np.sum(H * right[:, None], axis=1)
        data_trace[chosen] = [np.sum(hq * hqt.T) for hq, hqt in zip(HQ, HQt, strict=True)]
    if not covariance:
        return of_mean, of_reduction, None
    lam = terms.cross_moments(measure)
    for rows, q, local in terms.blocks(sandwich_rows):
        for b, tables in terms.sandwich_tables(q, local, measure, mu, lam):
            sandwich += b * _bilinear_indices(*tables, data_weight[rows], nodes, weights)
    trace = sum_terms(w * _bilinear_indices(*tables, np.ones(()), nodes, weights)
                      for w, tables in terms.trace_tables(measure))
    s2 = form.s2
    covariance = (
        2 * s2**2 * trace + 4 * s2**3 * sandwich + 2 * s2**4 * data_trace
        - 4 * s2**4 * np.sum(H_left * matmul(Q, H_right), axis=0)
    )
    return of_mean, of_reduction, covariance


def _index_pairs(terms, measure, mu, rows, q, local, nodes, weights):
    """The two-kernel matrices ``H = kappa(Z, .) W kappa(., Z)`` of every index for the stacked
    rows ``rows`` (term q, rows ``local`` of Z), (rows, Q N, 1 + 3 d) stacked as in
    ``_split``."""
    B = mu[rows, None, :] * mu[None, :, :]
    C = terms.centred_second_moment(q, local, measure)
    return _stacked(_pair_functionals(B + C, B, C, nodes, weights))


def _stacked(parts):
    total, first, total_effects, shapley = parts
    return np.concatenate([total[..., None], first, total_effects, shapley], axis=-1)


def _bilinear_indices(PP, PE, EP, EE, weight, nodes, weights):
    """``sum(weight * X_W)`` of every index W, stacked (1 + 3 d,), for a bilinear integral X
    that factorises over features, ``X(A_1 x ... x A_d, B_1 x ... x B_d) = prod_j x_j(A_j,
    B_j)``, given per feature for A, B in {P, E} (features on the FIRST axis, the other axes
    matched by ``weight``: the trace T has none, the three-kernel G has (rows, n)).

    Each index is ``W = int E_i prod_{j != i} (P_j + t E_j) dnu(t)`` with nu = delta_0 (first
    order), delta_1 (total: P + E = D) or Lebesgue on [0, 1] (Shapley), so ``X(W, W)`` is the
    double integral over (t, u) of ``x_i(E, E) prod_{j != i} x_j(P + t E, P + u E)``: a
    leave-one-out product, for Shapley on the tensor Gauss-Legendre grid (exact: degree d - 1
    in t and in u; the (t, u) and (u, t) terms are equal after the sum, as x(A, B) = x(B,
    A)^T, so only t <= u is formed). The total variance ``prod D - prod P = sum_i E_i
    prod_{j < i} D_j prod_{j > i} P_j`` (telescoped) is summed over both indices by a
    four-state recursion over features (``_telescoped``).
    """
    n_features = PP.shape[0]
    PP, PE, EP, EE = (table.reshape(n_features, -1) for table in (PP, PE, EP, EE))
    weighted = weight.reshape(-1) * EE

    def contract(t, u):
        return _weighted_leave_one_out(weighted, PP + t * EP + u * PE + (t * u) * EE)

    shapley = np.zeros(n_features, dtype=weighted.dtype)
    for a, t in enumerate(nodes):
        # x(P + t E, P + u E) = left + u right: two passes per (t, u) pair instead of seven
        left, right = PP + t * EP, PE + t * EE
        for b in range(a, len(nodes)):
            pair_weight = weights[a] * weights[b] * (1.0 if a == b else 2.0)
            shapley += pair_weight * _weighted_leave_one_out(weighted, left + nodes[b] * right)
    variance = np.sum(weight.reshape(-1) * _telescoped(PP, PE, EP, EE))
    return np.concatenate([np.reshape(variance, 1), contract(0.0, 0.0), contract(1.0, 1.0),
                           shapley])


def _weighted_leave_one_out(weighted, factors):
    """``out[i] = sum_k weighted[i, k] prod_{j != i} factors[j, k]``, (d,), by prefix and suffix
    products over the first axis (no division; one (K,) slab at a time: ~10x faster than a
    cumprod over a short last axis, and 2x faster than batching several (t, u) pairs, whose
    larger slabs leave the cache)."""
    prefix = np.empty(factors.shape, dtype=np.result_type(weighted, factors))
    running = np.ones(factors.shape[1])
    for j in range(factors.shape[0]):
        np.multiply(weighted[j], running, out=prefix[j])
        running = running * factors[j]
    out = np.empty(factors.shape[0], dtype=prefix.dtype)
    running = np.ones(factors.shape[1])
    for j in range(factors.shape[0] - 1, -1, -1):
        out[j] = matmul(prefix[j], running)
        running = running * factors[j]
    return out


def _telescoped(PP, PE, EP, EE):
    """``sum_{i, k} prod_j x_j(A^i_j, A^k_j)`` with ``A^i = (D, .., D, E_i, P, .., P)``.

    Four states per pair (has the left, has the right sequence passed its E?) carried over
    the features (first axis); D = P + E enters as sums of the accurate {P, E} tables.
    """
    both_before = np.ones(PP.shape[1:])
    left_after = right_after = both_after = np.zeros(PP.shape[1:])
    for pp, pe, ep, ee in zip(PP, PE, EP, EE, strict=True):
        both_before, left_after, right_after, both_after = (
            both_before * (pp + pe + ep + ee),
            both_before * (ep + ee) + left_after * (pp + pe),
            both_before * (pe + ee) + right_after * (pp + ep),
            both_before * ee + left_after * pe + right_after * ep + both_after * pp,
        )
    return both_after


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
