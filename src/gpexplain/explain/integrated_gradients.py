"""Integrated-gradient attributions of GP regression, as Gaussians with exact mean and covariance.

Butler, Feng and Djuric, *Explainable Learning with Gaussian Processes*, Theorem 1 and
Corollary 1: the IG attribution ``attr_i(x) = (x_i - xt_i) int_0^1 d_i f(xt + t (x - xt)) dt``
is a linear functional of f, so under the GP posterior it is Gaussian. Its mean and its full
feature-by-feature covariance follow from the generic formula of the explanation driver
(``gpexplain.explain._driver``) once the functional (``gpexplain.functionals.
integrated_gradient``) supplies the cross term ``A[i, n] = attr_i k(., z_n)`` and the prior
term ``P[i, j]`` (closed form for the squared exponential, corrected as in docs/errata.md;
quadrature with autograd for any other kernel, chosen automatically). A baseline
distribution (several baselines) gives the expected attribution, again one linear functional
of f. This module resolves baselines and validates the arguments.
"""

from __future__ import annotations

from gpexplain._baselines import resolve_baselines, warn_if_off_data
from gpexplain.attribution import Attribution
from gpexplain.explain._driver import explain
from gpexplain.explain._pipeline import through_pipeline
from gpexplain.explain.linked import name_latent
from gpexplain.functionals.integrated_gradient import IntegratedGradient
from gpexplain.posterior.linked import resolve_output

__all__ = ["integrated_gradients"]

@through_pipeline
def integrated_gradients(
    model_or_posterior,
    X,
    baseline="mean",
    *,
    method: str = "auto",
    rule: str = "gauss-legendre",
    n_steps: int = 64,
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
    """Integrated-gradient attributions of a GP regression posterior, with uncertainty.

    Implements Butler et al., Corollary 1 (eqs. 29-30), with the ARD-SE closed form of
    Sec. 4.1 in the corrected, numerically safe form of docs/errata.md, extended from per-feature
    variances to the full covariance across features:

        mean[p, i]   = sum_n A[p, i, n] a_n
        cov[p, i, j] = P[p, i, j] - A[p, i, :] (K + noise I)^{-1} A[p, j, :]^T

    Completeness holds for both: ``mean.sum(1) == prediction - baseline_prediction`` and
    ``cov.sum((1, 2)) == Var[f(x) - f(baseline)]``.

    With several baselines ``xt_1 .. xt_B`` (a baseline distribution, e.g. a background
    sample) the result is the expected attribution ``(1/B) sum_b attr(x; xt_b)``, again one
    linear functional of f: its cross term is the average ``A_bar = mean_b A_b`` and its prior
    term ``(1/B^2) sum_{b,b'} P_{b,b'}``, where the two-path terms ``P_{b,b'}`` (b != b') are
    computed by Gauss-Legendre quadrature (``gpexplain.functionals.quadrature.path_pair_prior``)
    for every kernel. Completeness
    then reads ``mean.sum(1) == prediction - mean_b f(xt_b)`` and ``cov.sum((1, 2)) ==
    Var[f(x) - mean_b f(xt_b)]``. The covariance costs ``B (B - 1) / 2`` two-path terms of
    ``2 n_steps^2`` kernel Hessians each per point: keep background samples small (tens), or
    pass ``return_cov=False`` (the mean costs B single-baseline means).

    Parameters
    ----------
    model_or_posterior : fitted estimator (e.g. ``GPRegressor``) or ``Posterior``
        A fitted ``gx.make_pipeline(...)`` too: its rows (a DataFrame with text columns) are
        encoded and the result is of the original columns (``CategoricalPipeline.explain``).
    X : array-like of shape (n_points, n_features)
        Points to explain, in the original units (NumPy, pandas or torch).
    baseline : {"mean", "median", "zeros"}, array-like of shape (n_features,) or
        (n_baselines, n_features), default "mean"
        Reference point(s); "mean"/"median" are over the training inputs. A (1, n_features)
        array is the same as the vector.
    method : {"auto", "closed-form", "quadrature"}, default "auto"
        ``auto`` uses the closed form when the kernel has one (``gx.kernels.RBF``, which a
        GPyTorch ``RBFKernel`` or ``ScaleKernel(RBFKernel)`` becomes through
        ``gx.kernels.as_kernel``) and quadrature otherwise. ``quadrature`` works for any
        differentiable GPyTorch kernel:

        * squared exponential, Matern 3/2 and 5/2, rational quadratic, and scalings, sums and
          products of them (``gpexplain.kernels.stationary.radial_leaves``): the cross term
          by a Gauss-Legendre rule graded towards each training point's closest approach to
          the path, the prior term as a single integral (``gpexplain.functionals.quadrature.
          stationary_prior``, split geometrically on long paths); both converge
          exponentially: at ``n_steps=64`` completeness (mean and variance) holds to 1e-8 or
          better (typically 1e-11) relative to what the attributions sum to;
        * any other kernel (non-stationary, e.g. linear or polynomial, or a custom one):
          Seitz's construction with the rule ``rule`` and a staggered Gauss-Legendre prior
          term (``integrated_gradient_functionals``); it converges as fast as the rule does
          for kernels smooth everywhere, algebraically (about 1e-3 at 64 nodes) where the
          kernel has a kink at zero distance.
    rule : {"gauss-legendre", "trapezoid", "simpson", "right"}
        Quadrature rule. Only ``gauss-legendre`` uses the accurate scheme for stationary
        kernels; the others reproduce Seitz's / Butler et al.'s sums (eq. 36, App. C.1).
    n_steps : int, default 64
        Nodes per path (graded rule: per (point, training point) pair), or intervals for
        trapezoid and Simpson. Also the nodes per direction of the two-path prior terms. At
        most 4096 (``gpexplain.functionals.integrated_gradient.MAX_N_STEPS``).
    return_cov : bool or "points", default True
        Compute the (n_points, n_features, n_features) covariance; False returns the mean only
        (faster), with ``cov=None``.
        "points": also ``point_cov``, the covariance across points and features, lazily in
        memory-bounded blocks (``gpexplain.explain._points``, where its cost is stated).
    chunk_size : int, optional
        Points processed at once (bounds memory); chosen automatically by default.
    link : {"logit", "probit", "softmax"} or gx.links.Link, optional
        Explain a class probability p = link(f): the integrated gradients of the expected
        probability, ``(x_k - xt_k) int_0^1 E[d_k p(xt + t (x - xt))] dt`` (expectation and
        path integral commute), by Gauss-Legendre with the node count doubled until
        ``mean.sum(1) == E[p(x)] - E[p(xt)]`` to 1e-10 (softmax by randomised QMC, C > 3: to
        10 standard errors, stated in ``method``; a ``CompletenessWarning`` reports a larger
        gap). ``cov``: for logit, probit and the 2-class softmax
        (``approximation="quadrature"``, one baseline) the exact posterior covariance of these
        attributions (second-order Stein over pairs of path nodes,
        ``gpexplain.explain.linked.link_covariance``; the 2-class softmax as the logistic of the
        latent difference ``f_c - f_other``), complete to
        ``difference_variance = Var(p(x) - p(xt))`` (1e-9 relative for RBF kernels; Matern
        kernels converge algebraically and warn with the gap). Softmax with C >= 3: the same
        second-order Stein expansion with its 2C-dimensional expectations estimated by
        randomised QMC over joint samples of the latents along the path
        (``gpexplain.explain.linked.softmax_covariance``; the link's ``n_qmc``, ``n_replicates``
        and ``seed``), its largest standard error in ``method``, ``difference_variance``
        estimated from the same samples and completeness checked to 4 standard errors. None
        for Taylor.
        ``prediction`` and ``baseline_prediction`` are ``E[p]``; ``method`` and ``n_steps``
        are not used. Defaults and classes as in ``gx.gradients``.
    output : {"probability", "latent"}, optional
        Default "probability" when there is a link (a classifier, or
        ``from_sklearn(GaussianProcessClassifier)``), else "latent".
    target_class : class label, optional
        Default ``classes_[1]`` for binary models; required for multiclass.
    approximation : {"quadrature", "taylor"}, default "quadrature"
        ``"taylor"``: the paper's second-order Taylor expected gradients along the path.
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
        ``mean`` (n_points, n_features) and ``cov`` (n_points, n_features, n_features) in the
        units of y; ``prediction`` and ``baseline_prediction`` (the average over baselines)
        are latent posterior means; ``baseline`` is (n_features,) for one baseline and
        (n_baselines, n_features) otherwise; ``method`` names the method used.

    Raises
    ------
    ValueError
        Bad query (wrong number of features, NaN/inf), unknown baseline/method/rule, a closed
        form requested for a kernel that has none, a Matern 1/2 kernel (not differentiable),
        ``n_steps`` above 4096, or a covariance whose prior term would cost more than
        ``MAX_PRIOR_EVALUATIONS`` (2e7) kernel second derivatives per point (the message gives
        the estimate; ``return_cov=False`` is not limited).
        Also: unknown ``link``/``output``/``approximation``/``target_class``, a rule
        other than Gauss-Legendre with a link, or several baselines with a binary link and
        ``return_cov=True`` (pass ``return_cov=False``).
    TypeError
        ``model_or_posterior`` is neither a fitted estimator nor a posterior; ``client`` is
        not a ``distributed.Client``.

    Warns
    -----
    gpexplain.CompletenessWarning
        The result misses completeness (or a covariance is indefinite) beyond
        ``gpexplain.accuracy.COMPLETENESS_RTOL``, with the measured gaps.
    gpexplain.BaselineWarning
        A baseline where the posterior variance is above half the prior's (the model knows
        little there; ``gpexplain._baselines.warn_if_off_data``).
    """
    posterior, latent = resolve_output(model_or_posterior, link, output, target_class,
                                       approximation)
    baselines = resolve_baselines(baseline, posterior.data_inputs, posterior.feature_names)
    warn_if_off_data(posterior, baselines, "integrated_gradients")
    functional = IntegratedGradient(baselines, method=method, rule=rule, n_steps=n_steps)
    return name_latent(explain(
        posterior, X, functional, return_cov=return_cov, chunk_size=chunk_size,
        client=client, output_path=output_path, caller="integrated_gradients", outputs=outputs,
    ), latent)
