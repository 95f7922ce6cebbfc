"""Classifiers resolved into posteriors: what an explanation of a classifier explains.

A GP classifier's class probability is ``p(x) = sigma(f(x))`` (binary) or
``S_c(f_1(x), ..., f_C(x))`` (softmax over independent latents). ``resolve_output`` takes an
estimator with ``link_`` (and ``posterior_`` or ``posteriors_``), a posterior carrying
``link`` (``from_sklearn`` of a ``GaussianProcessClassifier``), or any posterior with an
explicit ``link=``, and returns either a Gaussian latent posterior (``output="latent"``, which
the driver explains by the generic formula) or a ``LinkedPosterior``: the latents, the link
and the explained class, whose probability-level explanations ``gpexplain.explain.linked``
computes. Explanations that exist for the latent only (Shapley values, global sensitivity)
choose it with ``latent_posterior``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpexplain.links import APPROXIMATIONS, LINKS, Link, get_link
from gpexplain.posterior.base import Posterior
from gpexplain.posterior.mixture import MixturePosterior
from gpexplain.posterior.resolve import as_posterior

__all__ = ["OUTPUTS", "LinkedPosterior", "latent_posterior", "resolve_output"]

OUTPUTS = ("probability", "latent")


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

    def describe(self) -> str:
        """The link, the class and how the link's expectations are computed (``method``)."""
        how = self.link.describe(len(self.posteriors))
        return f"{self.link.name} link, class {self.class_label!r}, {how}"


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
    if isinstance(chosen, str) and chosen in LINKS:
        chosen = LINKS.get(chosen)(approximation=approximation)
    chosen = get_link(chosen)
    if any(isinstance(part, MixturePosterior) for part in posteriors):
        raise TypeError("probability-level explanations of a MixturePosterior are not supported.")
    chosen.check_latent_count(len(posteriors))
    index = _class_index(classes, target_class, None if multiclass else 1)
    return LinkedPosterior(posteriors, chosen, index, np.asarray(classes).tolist()[index]), None
