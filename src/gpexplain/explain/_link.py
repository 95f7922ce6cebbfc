"""The link step of the explanation driver: explanations of class probabilities.

A GP classifier's class probability is ``p(x) = sigma(f(x))`` (binary) or
``S_c(f_1(x), ..., f_C(x))`` (softmax over independent latents). Its gradient is not a linear
functional of f, so the generic formula of the driver does not apply; what is exact is the
expectation under the latent Gaussian posterior (``gpexplain.links``). This module

1. resolves what to explain (``resolve_output``): an estimator with ``link_`` (and
   ``posterior_`` or ``posteriors_``), a posterior carrying ``link`` (``from_sklearn`` of a
   ``GaussianProcessClassifier``), or any posterior with an explicit ``link=``; the latent
   (``output="latent"``) goes back to the Gaussian path of the driver unchanged, and
   explanations that exist for the latent only (Shapley values, global sensitivity) choose
   it with ``latent_posterior``;
2. computes, per point, the joint Gaussian moments of ``f(x)`` and ``grad f(x)`` (mean,
   variance, ``E grad f``, ``Cov(f, grad f)`` and optionally ``Cov(grad f)``) from the
   posterior's representer form and the gradient functional's scheme for its kernel;
3. maps them through the link: expected gradients (with their covariance) and
   integrated gradients of the expected probability,

       IG_k(x) = (x_k - xt_k) int_0^1 E[d_k p(xt + t (x - xt))] dt,

   by Gauss-Legendre along the path, the node count doubled (16 .. 1024) until completeness,
   ``sum_k IG_k = E[p(x)] - E[p(xt)]``, holds to 1e-10 at every point (expectation and path
   integral commute, so this is exact up to the rule; a warning reports any remaining gap).
   With softmax by randomised QMC the expected gradient and E[p] are separate Monte Carlo
   estimates, so the tolerance is widened by 10 standard errors (stated in ``method``);
   a ``CompletenessWarning`` reports any remaining gap;
4. for binary links and the 2-class softmax (quadrature, one baseline) the exact posterior
   covariance of those integrated gradients (``gpexplain.explain._link_covariance``:
   second-order Stein over pairs of path nodes, its own node doubling until
   ``cov.sum((1, 2))`` equals ``Var(p(x) - p(xt))`` to 1e-9 relative, then
   ``warn_if_incomplete``). The 2-class softmax is the logistic of the latent difference,
   ``S_c = sigma(f_c - f_other)``, a Gaussian process with independent parts, so it takes the
   logit's path (``exact_covariance_latent``). Softmax with C >= 3: the same Stein expansion
   with its 2C-dimensional expectations estimated by randomised QMC
   (``gpexplain.explain._softmax_covariance``; standard error in ``method``, completeness
   checked within it). The Taylor approximation returns ``cov=None``; several baselines
   with ``return_cov=True`` are refused (pairs of paths would couple).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, replace

import numpy as np

from gpexplain._validation import check_finite_result
from gpexplain.accuracy import CompletenessWarning, warn_if_incomplete
from gpexplain.attribution import Attribution
from gpexplain.explain._link_covariance import LatentTerm, integrated_gradient_covariance
from gpexplain.explain._softmax_covariance import softmax_integrated_gradient_covariance
from gpexplain.functionals.gradient import Gradient
from gpexplain.functionals.integrated_gradient import IntegratedGradient
from gpexplain.links import APPROXIMATIONS, Link, Logit, Softmax, get_link
from gpexplain.parallel import default_chunk_size, map_chunks
from gpexplain.posterior import as_posterior
from gpexplain.posterior.base import Posterior
from gpexplain.posterior.mixture import MixturePosterior

__all__ = ["LinkedPosterior", "latent_posterior", "resolve_output", "name_latent",
           "explain_linked", "OUTPUTS"]

OUTPUTS = ("probability", "latent")
COMPLETENESS_TOLERANCE = 1e-10
_PATH_NODES = (16, 32, 64, 128, 256, 512, 1024)
_PRIOR_BLOCK = 64  # points per block of the prior Cov(f, grad f) (a block x block slab)


@dataclass
class LinkedPosterior:
    """What a probability-level explanation explains.

    Attributes
    ----------
    posteriors : list of Posterior
        One (binary: latent log-odds of the positive class) or C (softmax, in class order).
    link : gpexplain.links.Link
    target_class : int
        Softmax: index of the explained class. Binary: 1 for the positive class, 0 for the
        negative one (probability ``1 - sigma(f)``).
    class_label : object
        The explained class's label.
    """

    posteriors: list
    link: Link
    target_class: int
    class_label: object

    @property
    def feature_names(self) -> list[str]:
        return list(self.posteriors[0].feature_names)

    @property
    def data_inputs(self) -> np.ndarray:
        return self.posteriors[0].data_inputs

    def check_inputs(self, X) -> np.ndarray:
        return self.posteriors[0].check_inputs(X)


def _class_index(classes, target_class, default):
    """Index of ``target_class`` among ``classes`` (matched by label), or ``default``."""
    labels = list(np.asarray(classes).tolist())
    if target_class is None:
        if default is None:
            raise ValueError(
                f"target_class is required for a multiclass model; choose one of {labels}."
            )
        return default
    matches = [i for i, label in enumerate(labels) if label == target_class]
    if not matches:
        raise ValueError(f"target_class {target_class!r} is not a class of the model {labels}.")
    return matches[0]


def _latents(model_or_posterior):
    """``(posteriors, link, classes)`` of a model, a posterior or a list of C posteriors.

    ``link`` is the model's own (``link_``, or a posterior's ``link``; None for a regression
    or a bare list); ``classes`` the class labels (``[0, 1]`` or ``range(C)`` when unnamed).
    """
    if isinstance(model_or_posterior, list | tuple):
        posteriors = [as_posterior(part) for part in model_or_posterior]
        return posteriors, None, list(range(len(posteriors)))
    if isinstance(model_or_posterior, Posterior | MixturePosterior):
        return ([model_or_posterior], getattr(model_or_posterior, "link", None),
                getattr(model_or_posterior, "classes", [0, 1]))
    many = getattr(model_or_posterior, "posteriors_", None)
    posteriors = list(many) if many is not None else [as_posterior(model_or_posterior)]
    classes = getattr(model_or_posterior, "classes_", list(range(max(len(posteriors), 2))))
    return posteriors, getattr(model_or_posterior, "link_", None), classes


def _pick_latent(posteriors, link, classes, target_class):
    """``(posterior, description)`` of the latent chosen by ``target_class``.

    ``description`` names it for ``method`` strings ("latent log-odds of class 'b'"; None for
    a regression, which has no classes). Binary links explain the one latent, of
    ``classes[1]``; the softmax needs ``target_class``.
    """
    if len(posteriors) > 1:
        index = _class_index(classes, target_class, None)
        label = np.asarray(classes).tolist()[index]
        return posteriors[index], f"softmax latent of class {label!r}"
    if link is None:
        if target_class is not None:
            raise ValueError(
                f"target_class={target_class!r} applies to classifiers; this model is a "
                "regression (one latent function, no classes): drop target_class."
            )
        return posteriors[0], None
    positive = np.asarray(classes).tolist()[1]
    scale = "probit" if getattr(link, "name", link) == "probit" else "log-odds"
    if target_class is not None and _class_index(classes, target_class, 1) != 1:
        raise ValueError(
            f"the latent of a binary model is the {scale} of class {positive!r} (that of "
            f"class {target_class!r} is its negative): explain target_class={positive!r} and "
            f"negate, or explain output='probability' for class {target_class!r} with "
            "gx.integrated_gradients or gx.gradients."
        )
    return posteriors[0], f"latent {scale} of class {positive!r}"


def latent_posterior(model_or_posterior, target_class=None, output=None,
                     caller: str = "explain"):
    """The Gaussian latent posterior that a linear explanation of a classifier explains.

    For explanations that exist for the latent function only (Shapley values, global
    sensitivity): a regression's posterior as it is; a binary classifier's one latent (the
    log-odds, or probit, of ``classes_[1]``); a softmax classifier's latent ``f_c`` of
    ``target_class``.

    Parameters
    ----------
    model_or_posterior : fitted estimator, Posterior / MixturePosterior, or list of C Posteriors
        Classifiers as in ``resolve_output``: ``link_`` with ``posterior_`` or ``posteriors_``
        and ``classes_``, or a posterior carrying ``link`` (``from_sklearn`` of a
        ``GaussianProcessClassifier``).
    target_class : label, optional
        Binary: None or ``classes_[1]``. Softmax: required, by label.
    output : {"latent"}, optional
        Accepted for symmetry with ``gx.integrated_gradients``; "probability" is refused.
    caller : str
        Public function name used in error messages.

    Returns
    -------
    (Posterior or MixturePosterior, str or None)
        The latent posterior, and what it is for ``method`` strings ("latent log-odds of
        class 'b'", "softmax latent of class 2"), None for a regression.

    Raises
    ------
    TypeError
        ``output="probability"`` (the message names integrated gradients of the probability
        as the alternative); not a model or posterior.
    ValueError
        Another unknown ``output``; ``target_class`` missing (softmax), not a class, the
        negative class of a binary model, or given for a regression; an unfitted estimator.
    """
    if output == "probability":
        raise TypeError(
            f"{caller} explains the latent function (a Gaussian, additive in features); class "
            "probabilities are not linear in it. Use gx.integrated_gradients(model, X, "
            "output='probability', target_class=...) for attributions of the probability, or "
            "output='latent' here."
        )
    if output is not None and output != "latent":
        raise ValueError(f"output must be 'latent' for {caller}, got {output!r}.")
    return _pick_latent(*_latents(model_or_posterior), target_class)


def resolve_output(model_or_posterior, link=None, output=None, target_class=None,
                   approximation: str = "quadrature"):
    """What an explanation function explains: a Gaussian posterior, or a ``LinkedPosterior``.

    Parameters
    ----------
    model_or_posterior : fitted estimator, Posterior, or list of C Posteriors (softmax)
        A classifier (``link_`` with ``posterior_`` or ``posteriors_``, ``classes_``), a
        posterior carrying ``link`` (``from_sklearn(GaussianProcessClassifier)``), or any
        posterior.
    link : {"logit", "probit", "softmax"} or gx.links.Link, optional
        Overrides the model's link; required for probabilities of a plain posterior.
    output : {"probability", "latent"}, optional
        Default: "probability" when there is a link, else "latent".
    target_class : label, optional
        Class to explain (by label; default the positive class ``classes_[1]`` of a binary
        model; required for multiclass). The latent of a binary model is that of
        ``classes_[1]`` only; a regression has none.
    approximation : {"quadrature", "taylor"}

    Returns
    -------
    (Posterior or MixturePosterior or LinkedPosterior, str or None)
        What to explain, and for a classifier's latent what it is (as ``latent_posterior``
        returns it, for ``name_latent``); None for probabilities and regressions.

    Raises
    ------
    ValueError
        Unknown output/approximation/class, probabilities without a link, a link that does
        not match the number of latents, ``target_class`` with the latent of a regression.
    TypeError
        A mixture posterior with a link, or not a model/posterior.
    """
    if output is not None and output not in OUTPUTS:
        raise ValueError(f"output must be one of {OUTPUTS}, got {output!r}.")
    if approximation not in APPROXIMATIONS:
        raise ValueError(f"approximation must be one of {APPROXIMATIONS}, got {approximation!r}.")
    posteriors, default_link, classes = _latents(model_or_posterior)
    chosen = default_link if link is None else link
    output = output or ("probability" if chosen is not None else "latent")
    multiclass = len(posteriors) > 1
    if output == "latent":
        if approximation != "quadrature":
            raise ValueError("approximation applies to output='probability' only.")
        return _pick_latent(posteriors, chosen, classes, target_class)
    if chosen is None:
        raise ValueError(
            "output='probability' needs a link: pass link='logit' or 'probit' for a latent "
            "Gaussian posterior (or a list of per-class posteriors with link='softmax')."
        )
    if isinstance(chosen, str) and chosen in ("logit", "probit", "softmax"):
        chosen = type(get_link(chosen))(approximation=approximation)
    chosen = get_link(chosen)
    if any(isinstance(part, MixturePosterior) for part in posteriors):
        raise TypeError("probability-level explanations of a MixturePosterior are not supported.")
    if isinstance(chosen, Softmax) != multiclass:
        raise ValueError(
            f"link {chosen.name!r} does not fit {len(posteriors)} latent posterior(s): softmax "
            "needs one per class (C >= 2), logit/probit exactly one."
        )
    index = _class_index(classes, target_class, None if multiclass else 1)
    return LinkedPosterior(posteriors, chosen, index, np.asarray(classes).tolist()[index]), None


def name_latent(result, latent: str | None):
    """``result`` with "of the <latent>" appended to its ``method`` when it explains a
    classifier's latent (``latent`` from ``resolve_output`` or ``latent_posterior``), so the
    log-odds of one class is never mistaken for a regression's output. Results written to a
    file (``output_path``) and regressions (``latent`` None) pass unchanged."""
    if latent is None or not isinstance(result, Attribution):
        return result
    return replace(result, method=f"{result.method} of the {latent}")


# -- joint Gaussian moments of f(x) and grad f(x) ---------------------------------------------
def _prior_value_gradient(scheme_at, kernel, X: np.ndarray) -> np.ndarray:
    """Prior ``Cov(f(x), d_k f(x)) = d/dq_k k(q, x)`` at q = x, (n, d): zero for stationary
    kernels, not for e.g. a linear one; the gradient functional's cross term evaluated with
    the point itself as the only basis point, in blocks so memory stays small."""
    rows = []
    for start in range(0, len(X), _PRIOR_BLOCK):
        block = X[start:start + _PRIOR_BLOCK]
        cross = scheme_at(kernel, block).cross(block)  # (b, d, b)
        rows.append(np.einsum("pkp->pk", cross))
    return np.concatenate(rows) if rows else np.zeros((0, X.shape[1]))


def latent_gradient_moments(posterior, scheme, X: np.ndarray, full: bool):
    """``(mean, var, grad_mean, grad_cov, grad_grad_cov)`` of ``(f(x), grad f(x))`` at X.

    Shapes (n,), (n,), (n, d), (n, d) and (n, d, d) (None unless ``full``): the generic
    formula of DESIGN.md applied to the stacked functionals ``(f, d_1 f, ..., d_d f)``.
    """
    cross_f = scheme.kernel_matrix(X)  # (n, n_basis)
    if full:
        cross_g, prior_g = scheme.cross_and_prior(X)
    else:
        cross_g, prior_g = scheme.cross(X), None
    left = cross_f[:, None, :]
    mean = posterior.mean + cross_f @ posterior.alpha
    var = np.maximum(posterior.kernel.diag(X) - posterior.quadratic_form(left)[:, 0, 0], 0.0)
    grad_mean = cross_g @ posterior.alpha
    prior_fg = _prior_value_gradient(
        lambda kernel, Z: Gradient().bind(kernel, Z), posterior.kernel, X
    )
    grad_cov = prior_fg - posterior.quadratic_form(left, cross_g)[:, 0, :]
    grad_grad_cov = None
    if full:
        grad_grad_cov = prior_g - posterior.quadratic_form(cross_g)
        grad_grad_cov = 0.5 * (grad_grad_cov + np.swapaxes(grad_grad_cov, 1, 2))
    return mean, var, grad_mean, grad_cov, grad_grad_cov


def expected_probability_and_gradient(linked: LinkedPosterior, schemes, X: np.ndarray,
                                      full: bool = False):
    """``E[p(x)]`` (n,), ``E[grad p(x)]`` (n, d) and, if ``full`` (approximation
    "quadrature"), ``Cov[grad p(x)]`` (n, d, d) else None; softmax computes all three in one
    pass over its nodes."""
    moments = [
        latent_gradient_moments(posterior, scheme, X, full)
        for posterior, scheme in zip(linked.posteriors, schemes, strict=True)
    ]
    link = linked.link
    if isinstance(link, Softmax):
        mean, var, grad_mean, grad_cov = (np.stack([m[i] for m in moments], 1) for i in range(4))
        if full:
            grad_grad_cov = np.stack([m[4] for m in moments], 1)
            return link.gradient_moments(mean, var, grad_mean, grad_cov, grad_grad_cov,
                                         linked.target_class)
        if link.approximation == "taylor":
            probability = link.expected_response(mean, var)[:, linked.target_class]
            gradient = link.expected_gradient(mean, var, grad_mean, grad_cov,
                                              linked.target_class)
            return probability, gradient, None
        probability, first, second = link.class_expectations(mean, var, linked.target_class)
        return probability, link.chain(first, second, grad_mean, grad_cov), None
    mean, var, grad_mean, grad_cov, grad_grad_cov = moments[0]
    probability = link.expected_response(mean, var)
    gradient = link.expected_gradient(mean, var, grad_mean, grad_cov)
    cov = (link.gradient_covariance(mean, var, grad_mean, grad_cov, grad_grad_cov)
           if full else None)
    if linked.target_class == 0:  # p_0 = 1 - sigma(f): the gradient flips, its covariance not
        probability, gradient = 1.0 - probability, -gradient
    return probability, gradient, cov


def _describe_link(linked: LinkedPosterior) -> str:
    link = linked.link
    how = "second-order Taylor (Seitz 2022)" if link.approximation == "taylor" else (
        "closed form" if link.name == "probit" else
        "randomised QMC" if isinstance(link, Softmax)
        and len(linked.posteriors) > link.max_tensor_classes else
        "product trapezoid over class differences" if isinstance(link, Softmax) else
        "Gauss-Hermite / latent trapezoid"
    )
    return f"{link.name} link, class {linked.class_label!r}, {how}"


def exact_covariance_latent(linked: LinkedPosterior, schemes):
    """``(link, terms)`` of the binary link and latent ``sum_i c_i f_i`` whose integrated
    gradients have the exact covariance of ``_link_covariance``, or None (Taylor; softmax
    with C >= 3, whose covariance is estimated instead).

    Binary: the one latent (the negative class's IG is minus the positive's, with the same
    covariance). 2-class softmax: ``S_c(f) = 1 / (1 + exp(f_other - f_c)) = sigma(f_c -
    f_other)``, the logistic of the difference of two independent latents.
    """
    link = linked.link
    if link.approximation != "quadrature":
        return None
    if not isinstance(link, Softmax):
        return link, [LatentTerm(1.0, linked.posteriors[0], schemes[0])]
    if len(linked.posteriors) != 2:
        return None
    own, other = linked.target_class, 1 - linked.target_class
    return Logit(), [LatentTerm(1.0, linked.posteriors[own], schemes[own]),
                     LatentTerm(-1.0, linked.posteriors[other], schemes[other])]


def _standard_error(linked: LinkedPosterior) -> float:
    return float(getattr(linked.link, "standard_error_", 0.0))


# -- the explanations -------------------------------------------------------------------------
def explain_linked(linked: LinkedPosterior, X, functional, *, return_cov: bool = True,
                   chunk_size: int | None = None, caller: str = "explain") -> Attribution:
    """Probability-level ``gradients`` or ``integrated_gradients`` of a ``LinkedPosterior``.

    Gradients (``Gradient``; gradient x input weighs them by ``w`` as in the Gaussian case):
    mean ``E[grad p(x)]``, covariance ``Cov[grad p(x)]`` (``approximation="quadrature"``,
    binary and softmax links; None for Taylor). Integrated gradients
    (``IntegratedGradient``; its ``baselines`` and ``rule`` must be Gauss-Legendre): mean as in
    the module docstring, averaged over baselines; covariance exact for binary links and the
    2-class softmax with ``approximation="quadrature"`` and one baseline (with
    ``difference_variance`` ``Var(p(x) - p(xt))``), estimated by randomised QMC for softmax
    with C >= 3 (standard error in ``method``), None for Taylor.
    ``prediction`` is ``E[p(x)]``, ``baseline_prediction`` the average ``E[p(xt_b)]``.

    Raises
    ------
    TypeError
        Another functional (e.g. Shapley values), which has no probability-level form here.
    ValueError
        Bad X, an integrated-gradient rule other than Gauss-Legendre, or several baselines
        with ``return_cov=True`` (any link with a covariance).

    Warns
    -----
    gpexplain.CompletenessWarning
        The mean or the covariance misses completeness (measured gaps in the message; an
        estimated covariance by more than 4 of its standard errors).
    """
    X = linked.check_inputs(X)
    difference_variance, sampled_cov = None, False
    schemes = [Gradient().bind(post.kernel, post.train_inputs) for post in linked.posteriors]
    n_basis = max(post.train_inputs.shape[0] for post in linked.posteriors)
    per_point = default_chunk_size(n_basis * len(schemes), X.shape[1], 2)

    def at(points, full=False):
        return map_chunks(
            lambda block: expected_probability_and_gradient(linked, schemes, block, full),
            points, chunk_size or per_point,
        )

    if isinstance(functional, IntegratedGradient):
        if functional.rule != "gauss-legendre":
            raise ValueError(
                "probability-level integrated gradients use Gauss-Legendre along the path; "
                f"rule={functional.rule!r} is not available with a link."
            )
        exact_cov = exact_covariance_latent(linked, schemes) if return_cov else None
        # Softmax with C >= 3: the covariance estimated by randomised QMC (see module docs).
        sampled_cov = (return_cov and exact_cov is None and isinstance(linked.link, Softmax)
                       and linked.link.approximation == "quadrature")
        if (exact_cov or sampled_cov) and len(functional.baselines) > 1:
            raise ValueError(
                "the covariance of probability-level integrated gradients is available for one "
                f"baseline; got {len(functional.baselines)}. Pass return_cov=False for the "
                "mean over a baseline distribution, or explain against one baseline."
            )
        prediction, mean, baseline_prediction, nodes = _integrated(linked, at, X,
                                                                    functional.baselines)
        cov, method = None, (
            f"integrated gradients of E[p] ({_describe_link(linked)}; Gauss-Legendre path, "
            f"up to {nodes} nodes"
        )
        if exact_cov:
            cov, difference_variance, cov_nodes = integrated_gradient_covariance(
                *exact_cov, X, functional.baselines[0])
            method += "; covariance by second-order Stein" + (
                " on the logistic of the latent difference f_c - f_other"
                if isinstance(linked.link, Softmax) else "")
            method += f", up to {cov_nodes}^2 node pairs"
        if sampled_cov:
            link = linked.link
            cov, difference_variance, cov_nodes, cov_error = (
                softmax_integrated_gradient_covariance(
                    link, linked.posteriors, schemes, linked.target_class, X,
                    functional.baselines[0], first_nodes=nodes))
            method += (f"; covariance by second-order Stein over up to {cov_nodes}^2 node "
                       f"pairs, randomised QMC ({link.n_replicates} x {link.n_qmc} samples), "
                       f"covariance standard error {cov_error:.2g}")
        method += ")"
    elif isinstance(functional, Gradient):
        full = return_cov and linked.link.approximation == "quadrature"
        prediction, mean, cov = at(X, full)
        weights = functional.output_weights(X)
        if weights is not None:
            mean = weights * mean
            cov = None if cov is None else weights[:, :, None] * cov * weights[:, None, :]
        baseline_prediction = None
        if functional.baseline is not None:
            baseline_prediction = float(at(functional.baseline[None, :])[0][0])
        method = f"expected gradient of p ({_describe_link(linked)})"
    else:
        raise TypeError(
            f"{functional.name or type(functional).__name__} has no probability-level form; "
            "use output='latent' (the Gaussian explanation of the log-odds)."
        )
    error = _standard_error(linked)
    if error:
        method = method[:-1] + f"; Monte Carlo standard error {error:.2g})"
    check_finite_result(caller, mean, cov, prediction)
    attribution = Attribution(
        mean=mean, cov=cov, X=functional.explained_inputs(X), prediction=prediction,
        baseline=functional.baseline, baseline_prediction=baseline_prediction,
        feature_names=linked.feature_names, method=method,
        difference_variance=difference_variance,
    )
    if difference_variance is not None and not sampled_cov:
        # (an estimated covariance was checked within its standard error when computed)
        warn_if_incomplete(attribution, caller)
    return attribution


def _integrated(linked, at, X, baselines):
    """Gauss-Legendre path integral of the expected gradient, nodes doubled until complete."""
    prediction = at(X)[0]
    n, d = X.shape
    attributions, baseline_values, used = np.zeros((n, d)), [], 0
    for baseline in baselines:
        baseline_value = float(at(baseline[None, :])[0][0])
        target = prediction - baseline_value
        for n_nodes in _PATH_NODES:
            t, w = np.polynomial.legendre.leggauss(n_nodes)
            t, w = 0.5 * (t + 1.0), 0.5 * w
            path = baseline[None, None, :] + t[None, :, None] * (X - baseline)[:, None, :]
            gradient = at(path.reshape(-1, d))[1].reshape(n, n_nodes, d)
            ig = (X - baseline) * np.einsum("g,pgk->pk", w, gradient)
            gap = float(np.max(np.abs(ig.sum(1) - target), initial=0.0))
            tolerance = COMPLETENESS_TOLERANCE + 10.0 * _standard_error(linked)
            if gap <= tolerance:
                break
        else:
            warnings.warn(
                f"integrated gradients of the expected probability complete only to {gap:.3g} "
                f"(> {tolerance:.3g}) with {n_nodes} Gauss-Legendre nodes along the path.",
                CompletenessWarning, stacklevel=4,
            )
        used = max(used, n_nodes)
        attributions += ig / len(baselines)
        baseline_values.append(baseline_value)
    return prediction, attributions, float(np.mean(baseline_values)), used
