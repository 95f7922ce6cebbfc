"""Exact Shapley values of GPs: orthogonal additive GPs (local with uncertainty, and global)
and product-kernel GPs (local with uncertainty, three games; see
``gpexplain.functionals.product_shapley`` and docs/shapley_product_kernels.md).

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
from gpexplain.explain._pipeline import through_pipeline
from gpexplain.explain.linked import name_latent
from gpexplain.functionals.games import GAMES
from gpexplain.functionals.shapley import AdditiveShapley, not_additive_message
from gpexplain.global_attribution import GlobalShapleyValues
from gpexplain.kernels.orthogonal_additive import OrthogonalAdditive
from gpexplain.parallel import default_chunk_size
from gpexplain.posterior import as_posterior
from gpexplain.posterior.linked import latent_posterior
from gpexplain.posterior.multi_output import TaskAugmentedPosterior

__all__ = ["shapley_values", "global_shapley_values"]


@through_pipeline
def shapley_values(
    model_or_posterior,
    X,
    *,
    game: str | None = None,
    baseline=None,
    background=None,
    measure=None,
    return_cov: bool | str = True,
    chunk_size: int | None = None,
    client=None,
    output_path=None,
    outputs=None,
    target_class=None,
    output: str | None = None,
) -> Attribution:
    """Exact local Shapley values of a GP, with their posterior covariance.

    Two model families, one result:

    * **orthogonal additive GPs** (``AdditiveGPRegressor``, kernel ``OrthogonalAdditive``; the
      default when no game is given): the additive-Shapley paper, Lemma 1 / eq. 9 (the marginal
      game under the kernel's product measure, docs/errata.md), extended to the full posterior,
      with ``A[p, i, n] = sum_{S ni i} sigma_|S|^2 / |S| prod_{l in S} kt_l(x_pl, z_nl)`` and
      ``P_ij = sum_{S contains i, j} sigma_|S|^2 / |S|^2 prod_{l in S} kt_l(x_pl, x_pl)``;
    * **product kernels** (ARD squared exponential, GPyTorch products of one-dimensional
      RBF / Matern / RQ kernels; exact, sparse variational and adapted posteriors): the game
      ``v(S) = E_{r ~ R} f(x_S, r_-S)`` with R one point (``game="baseline"``), the rows of a
      background sample (``"interventional"``, the game of shap's Exact/Permutation explainers
      and KernelSHAP) or a product measure (``"product-measure"``), evaluated exactly through
      the multilinear extension (Owen 1972) with ceil(d/2) Gauss-Legendre nodes
      (``gpexplain.functionals.product_shapley``; derivation in
      docs/shapley_product_kernels.md). Never 2^d, no sampling.

    In both cases ``mean[p, i] = sum_n A[p, i, n] a_n`` and ``cov[p, i, j] = P[p, i, j] -
    A[p, i, :] Q A[p, j, :]^T`` (the generic formula of the driver).

    **Classifiers** (``gx.GPClassifier``, ``gx.from_sklearn(GaussianProcessClassifier)``): the
    game is played by the latent function, which is Gaussian; class probabilities are not
    linear in it, so they have no exact Shapley values here (their attributions are
    ``gx.integrated_gradients(model, X, output="probability")``). A binary model's latent is the
    log-odds of ``classes_[1]`` given f (logit link; with the probit link, ``Phi^{-1}`` of its
    probability); the predicted probability ``E[sigma(f(x))]`` is nearer 1/2 than
    ``sigma`` of the latent mean. In the baseline game, ``phi_i`` is feature i's share of the
    change in log-odds from the baseline point to x, additive in features: the values sum to
    ``f(x) - f(baseline)``, and ``exp(phi_i)`` is the factor feature i multiplies the odds of
    ``classes_[1]`` by, not a change in probability. A softmax model has one latent ``f_c``
    per class, and ``target_class`` chooses it; the softmax is unchanged by adding the same
    function to every latent, so ``f_c`` is identified only up to that common shift and its
    values are not log-odds of class c against the rest (only differences ``f_c - f_c'``
    are); the values still sum to ``f_c(x)`` minus the base value, and compare features
    within class c.

    Parameters
    ----------
    model_or_posterior : fitted estimator or posterior (``MixturePosterior`` too)
        A fitted ``gx.make_pipeline(...)`` too: its rows (a DataFrame with text columns) are
        encoded and each text column's value is the sum of its indicators'.
    X : array-like of shape (n_points, n_features)
        Points to explain, in the original units (NumPy, pandas or torch).
    game : {"baseline", "interventional", "product-measure"}, optional
        Default: the game of the argument given (``baseline=`` -> "baseline", ``background=``
        -> "interventional", ``measure=`` -> "product-measure"); with none of them, the
        additive GP's own product-measure game for ``OrthogonalAdditive`` kernels and
        ``"baseline"`` with the training mean for product kernels.
    baseline : {"mean", "median", "zeros"} or array-like (n_features,), optional
        The reference point of the baseline game (default "mean", over the training inputs);
        pandas labels are matched by name.
    background : array-like (n_background, n_features), optional
        Rows of the interventional game (required for it). The mean costs O(n_background) per
        point; the covariance pairs rows, O(n_background^2 d^2 ceil(d/2)^2) per point: use
        tens of rows, or ``return_cov=False``.
    measure : gx.measures.Gaussian, Empirical or Uniform, optional
        The product measure (required for "product-measure" with a product kernel; Gaussian
        needs squared-exponential factors, Uniform refuses Matern ones). Additive GPs use
        their kernel's own measure.
    return_cov : bool or "points", default True
        Also compute the (n_points, n_features, n_features) posterior covariance.
        "points": also ``point_cov``, the covariance across points and features, lazily in
        memory-bounded blocks (``gpexplain.explain._points``, where its cost is stated).
    chunk_size : int, optional
        Points processed at once (bounds memory); chosen automatically by default.
    client, output_path : distributed.Client, and str or pathlib.Path, optional
        Run the chunks on a Dask cluster (same results), and stream them to a ``.parquet``
        file whose path is returned instead (``gpexplain.explain._driver.explain``).
    target_class : class label, optional
        Classifiers: the class whose latent is explained. Binary: ``classes_[1]`` (the
        default; ``classes_[0]`` is refused, its log-odds being the negative). Softmax:
        required.
    output : {"latent"}, optional
        The only level Shapley values have (the default); "probability" is refused.

    outputs : output name or index, or a sequence of them, optional
        A multi-output posterior (``gx.posterior.as_multi_output``) only: the outputs to
        explain (default all). The result is then a ``MultiOutputAttribution``: one
        ``Attribution`` per output and the covariance across outputs (issue 24; with
        ``return_cov="points"`` also across points, ``joint_point_cov``).

    Returns
    -------
    Attribution
        ``mean`` (n_points, n_features) in units of y (classifiers: latent units, e.g.
        log-odds); ``cov`` or None; ``method`` names the game (and, for a classifier, the
        latent: "... of the latent log-odds of class 'b'"); ``baseline`` the reference point
        (baseline game), the background rows (interventional) or None;
        ``baseline_prediction`` = base value ``v({})`` (the posterior mean averaged over the
        reference; additive GP: ``m0 + sigma_0^2 1^T a``);
        ``difference_variance`` = posterior ``Var[f(x) - E_r f(r)]`` (additive GP:
        ``Var[f(x) - f_0]``), so ``completeness_gap()`` checks ``mean.sum(1) == prediction -
        baseline_prediction`` and ``cov.sum((1, 2))`` against it. For an
        ``AdditiveGPRegressor`` the game is that of the model on its transformed inputs
        (``input_transform_``), reported per original feature, in units of y.

    Raises
    ------
    TypeError
        Not a fitted estimator or posterior; a kernel without the structure the game needs
        (the message names integrated gradients as the alternative); a measure that is not
        Gaussian or Empirical; ``client`` is
        not a ``distributed.Client``; ``output="probability"``.
    ValueError
        ``target_class`` missing (softmax), not a class, ``classes_[0]`` of a binary model, or
        given for a regression; unknown ``output`` or ``game``; an argument that does not
        belong to the game (e.g. ``background`` with ``game="baseline"``); a missing
        background or measure; bad query points, baseline or background rows (wrong number
        of features, NaN/inf, mismatched DataFrame columns); ``chunk_size`` < 1.
    """
    posterior, latent = latent_posterior(model_or_posterior, target_class, output,
                                         "shapley_values")
    functional = _shapley_functional(posterior, game, baseline, background, measure)
    result = explain(
        posterior, X, functional, return_cov=return_cov, chunk_size=chunk_size,
        client=client, output_path=output_path, caller="shapley_values", outputs=outputs,
    )
    return name_latent(result, latent)


def _shapley_functional(posterior, game, baseline, background, measure):
    """Validate the game's arguments and build its functional (``AdditiveShapley``, or the
    ``ProductShapley`` of a game in ``GAMES``)."""
    arguments = {"baseline": baseline, "background": background, "measure": measure}
    given = {name: value for name, value in arguments.items() if value is not None}
    implied = {entry.argument: name for name, entry in GAMES.items()}
    kernel = _kernel_of(posterior)
    if game is None:
        if len(given) > 1:
            raise ValueError(
                f"pass one of baseline=, background=, measure= (got {sorted(given)}), or name "
                "the game with game=."
            )
        if given:
            game = implied[next(iter(given))]
        else:
            game = "product-measure" if isinstance(kernel, OrthogonalAdditive) else "baseline"
    entry = GAMES.get(game)
    for name in given:
        if implied[name] != game:
            raise ValueError(
                f"{name}= does not apply to the {game} game; it belongs to game="
                f"{implied[name]!r}."
            )
    if isinstance(kernel, OrthogonalAdditive):
        if game != "product-measure" or measure is not None:
            raise TypeError(
                "an orthogonal additive GP has exact Shapley values for its own product-measure "
                "game only (call gx.shapley_values(model, X) without game, baseline, background "
                "or measure); it is not a product kernel. Use gx.integrated_gradients for "
                "baseline explanations."
            )
        return AdditiveShapley()
    return entry.functional(game, posterior, arguments[entry.argument])


def _kernel_of(posterior):
    """The kernel of a posterior (of its first component for a mixture: all share the type;
    of its first term for a coregionalised posterior, whose games are checked per term)."""
    if isinstance(posterior, TaskAugmentedPosterior):
        return posterior.coregionalization_terms[0][0]
    components = getattr(posterior, "components", None)
    return (components[0] if components else posterior).kernel


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
    kernel = _kernel_of(posterior)
    if not isinstance(kernel, OrthogonalAdditive):
        raise TypeError(not_additive_message(kernel))
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
