"""``as_posterior``: the posterior an explanation works on, from an estimator or a posterior.

Apart from ``base`` because a mixture is one of the posteriors it accepts, and
``MixturePosterior`` builds on ``Posterior``.
"""

from __future__ import annotations

from gpexplain.posterior.base import Posterior
from gpexplain.posterior.mixture import MixturePosterior
from gpexplain.posterior.multi_output import MultiOutputPosterior

__all__ = ["as_posterior"]


def as_posterior(model_or_posterior):
    """Return the posterior of a fitted estimator (its ``posterior_``) or the posterior itself.

    A posterior is a ``Posterior`` (representer form), a ``MixturePosterior`` (moments of a
    mixture of them, which explanations handle component by component) or a
    ``MultiOutputPosterior`` (several outputs, explained by ``gpexplain.explain.multi_output``).

    Raises
    ------
    TypeError
        Neither a posterior nor an estimator with ``posterior_``.
    ValueError
        An estimator that has not been fitted.
    """
    if isinstance(model_or_posterior, Posterior | MixturePosterior | MultiOutputPosterior):
        return model_or_posterior
    if hasattr(type(model_or_posterior), "posterior_") or hasattr(model_or_posterior, "fit"):
        posterior = getattr(model_or_posterior, "posterior_", None)
        if posterior is None:
            raise ValueError(
                f"{type(model_or_posterior).__name__} is not fitted yet; call fit(X, y) first."
            )
        return posterior
    raise TypeError(
        "expected a fitted gpexplain estimator or a posterior (e.g. gx.ExactPosterior), got "
        f"{type(model_or_posterior).__name__}."
    )
