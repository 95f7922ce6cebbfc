"""Gradient explanations of GP regression with uncertainty: the posterior derivative process.

Seitz, *Gradient-based explanations for Gaussian process regression and classification
models* (2022), Sec. 4, eqs. 15-20: the input gradient of f is a linear functional of f, so
under the GP posterior it is Gaussian, with

    E[d_i f(x)]               = d_i m(x)  = (d_i k(x, Z)) a
    Cov[d_i f(x), d_j f(x)]   = d_i d'_j k(x, x') |_{x'=x}  -  (d_i k(x, Z)) Q (d_j k(x, Z))^T

(the generic formula of the explanation driver, ``gpexplain.explain._driver``). As corrected
in docs/errata.md, the prior term is the derivative kernel, not k, and the cross term is the
derivative in the query argument. The functional and its schemes per kernel type are
``gpexplain.functionals.gradient.Gradient``; this module validates the arguments.

Two different quantities are easy to confuse, and only the first is computed here:

* the **posterior covariance of the gradient** ``Cov[grad f(x)]`` (how sure the model is
  about each partial derivative), and
* the **gradient of the predictive variance** ``d/dx Var[f(x)]`` (how the uncertainty about
  the prediction changes as x moves), which is not an attribution and is not returned.
"""

from __future__ import annotations

from gpexplain._baselines import resolve_baseline
from gpexplain.attribution import Attribution
from gpexplain.explain._driver import explain
from gpexplain.explain.linked import name_latent
from gpexplain.functionals.gradient import Gradient
from gpexplain.posterior.linked import resolve_output

__all__ = ["gradients"]


def gradients(
    model_or_posterior,
    X,
    *,
    gradient_x_input: bool = False,
    baseline=None,
    return_cov: bool | str = True,
    chunk_size: int | None = None,
    link=None,
    output: str | None = None,
    target_class=None,
    approximation: str = "quadrature",
    client=None,
    output_path=None,
    outputs=None,
) -> Attribution:
    """Posterior of the input gradient of a GP regression model, with its full covariance.

    For each query point x this returns the Gaussian posterior of the gradient of the latent
    function, ``grad f(x) | data`` (Seitz 2022, eq. 20, with the docs/errata.md corrections):

        mean[p, i]   = d/dx_i m(x_p)
        cov[p, i, j] = Cov[d_i f(x_p), d_j f(x_p)]
                     = d_i d'_j k(x_p, x_p) - (d_i k(x_p, Z)) Q (d_j k(x_p, Z))^T

    ``cov`` is the **posterior covariance of the gradient process**: the uncertainty about each
    partial derivative. It is *not* the gradient of the predictive variance
    ``d/dx Var[f(x)]``, a different quantity that this function does not compute.

    With ``gradient_x_input=True`` the attribution is gradient x input (Shrikumar et al. 2016;
    Seitz 2022, eq. 10), ``x_i d_i f(x)``, again Gaussian, with mean ``x_i mean_i`` and
    covariance ``x_i x_j cov_ij``. Given a ``baseline`` xt it is ``(x_i - xt_i) d_i f(x)``, the
    first-order Taylor estimate of ``f(x) - f(xt)``.

    The kernel pieces are closed forms for ``gx.kernels.RBF`` and otherwise come from
    ``gpexplain.kernels.derivatives``: the cross term by autograd, the derivative kernel at
    coinciding points analytically, for the GPyTorch kernels listed in
    ``gpexplain.kernels.derivatives.SUPPORTED_KERNELS`` (RBF, Matern 3/2 and 5/2, rational
    quadratic, periodic, random Fourier features, linear, constant, and scaled, summed and
    multiplied combinations of them).

    Parameters
    ----------
    model_or_posterior : fitted estimator (e.g. ``GPRegressor``) or any ``Posterior``
        (exact, sparse variational, random-feature).
    X : array-like of shape (n_points, n_features)
        Points to explain, in the original units (NumPy, pandas or torch).
    gradient_x_input : bool, default False
        Return gradient x input (an attribution in units of y) instead of the gradient (units
        of y per unit of each feature).
    baseline : {"mean", "median", "zeros"} or array-like of shape (n_features,), optional
        Only with ``gradient_x_input=True``: multiply the gradient by ``x - baseline`` instead
        of x. The default (None) is the plain ``x * gradient`` of the literature.
    return_cov : bool or "points", default True
        Compute the (n_points, n_features, n_features) covariance; False returns the mean only,
        with ``cov=None``.
        "points": also ``point_cov``, the covariance across points and features, lazily in
        memory-bounded blocks (``gpexplain.explain._points``, where its cost is stated).
    chunk_size : int, optional
        Points processed at once (bounds memory); chosen automatically by default.
    link : {"logit", "probit", "softmax"} or gx.links.Link, optional
        Explain a class probability ``p = link(f)`` (Seitz 2022, eq. 29-30, exact by Stein's
        lemma, see ``gx.links``): ``mean`` is ``E[d p(x) / dx_k]``, ``cov`` its posterior
        covariance (binary and softmax links; None for Taylor), ``prediction`` ``E[p(x)]``.
        A classifier (``link_``) or ``from_sklearn(GaussianProcessClassifier)`` uses its own
        link by default; a plain posterior is explained as a regression unless this is given.
        Softmax takes a list of C per-class posteriors (or a multiclass classifier).
    output : {"probability", "latent"}, optional
        Default "probability" when there is a link, else "latent" (the Gaussian gradient of
        the log-odds of ``classes_[1]``, or of latent ``target_class`` for multiclass).
    target_class : class label, optional
        Class whose probability (or latent) is explained; default ``classes_[1]`` for binary
        models (``classes_[0]`` explains ``1 - p``); required for multiclass.
    approximation : {"quadrature", "taylor"}, default "quadrature"
        ``"taylor"``: the paper's second-order Taylor forms (eq. 33 corrected, eq. 37), for
        comparison only (no covariance).
    client, output_path : distributed.Client, and str or pathlib.Path, optional
        Run the chunks on a Dask cluster (same results), and stream them to a ``.parquet``
        file whose path is returned instead (``gpexplain.explain._driver.explain``).

    outputs : output name or index, or a sequence of them, optional
        A multi-output posterior (``gx.posterior.as_multi_output``) only: the outputs to
        explain (default all). The result is then a ``MultiOutputAttribution``: one
        ``Attribution`` per output and the covariance across outputs (issue 24; with
        ``return_cov="points"`` also across points, ``joint_point_cov``).

    Returns
    -------
    Attribution
        ``mean`` (n_points, n_features), ``cov`` (n_points, n_features, n_features) or None;
        ``prediction`` is the latent posterior mean at X. ``difference_variance`` is None:
        gradients do not satisfy completeness. ``baseline`` and ``baseline_prediction`` are
        None, except for gradient x input with a baseline, where ``completeness_gap()["mean"]``
        then reports the error of the first-order Taylor estimate.
        ``method`` says which quantity it is: ``"posterior gradient (derivative process)"``,
        ``"gradient x input (derivative process)"`` or
        ``"(x - baseline) x gradient (derivative process)"``.

    Raises
    ------
    ValueError
        Bad query (wrong number of features, NaN/inf, DataFrame columns that do not match),
        a baseline given without ``gradient_x_input=True``, a bad baseline or ``chunk_size``,
        or a kernel without a derivative process (Matern 1/2) or of an unsupported type (the
        message lists the supported kernels).
        Unknown ``link``/``output``/``approximation``, or a ``target_class`` that is not a
        class of the model.
    TypeError
        ``model_or_posterior`` is neither a fitted estimator nor a posterior; ``client`` is
        not a ``distributed.Client``.
    FloatingPointError
        A non-finite result (an ill-conditioned posterior); never returned silently.
    """
    if baseline is not None and not gradient_x_input:
        raise ValueError(
            "baseline applies only to gradient x input; pass gradient_x_input=True, or drop "
            "baseline for plain gradients (which have no reference point)."
        )
    posterior, latent = resolve_output(model_or_posterior, link, output, target_class,
                                       approximation)
    if baseline is not None:
        baseline = resolve_baseline(baseline, posterior.data_inputs, posterior.feature_names)
    return name_latent(explain(
        posterior, X, Gradient(gradient_x_input, baseline), return_cov=return_cov,
        chunk_size=chunk_size, client=client,
        output_path=output_path, caller="gradients", outputs=outputs,
    ), latent)
