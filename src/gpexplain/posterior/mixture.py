"""A finite mixture of Gaussian posteriors, summarised by its exact first two moments.

Butler et al. (2024, Sec. 5.5) marginalise the random-feature GP over R independent frequency
draws: ``f ~ sum_r w_r GP_r``. The mixture is not Gaussian; this class reports its exact mean
and covariance (the moment-matched Gaussian), by the law of total covariance::

    E[f(x)]          = sum_r w_r m_r(x)
    Cov[f(x), f(x')] = sum_r w_r c_r(x, x') + sum_r w_r (m_r(x) - m(x)) (m_r(x') - m(x'))

Why ``MixturePosterior`` is not a ``Posterior``: the representer form ``m0 + k(x, Z) a``,
``k - k(., Z) Q k(Z, .)`` has one prior kernel k. The components have different kernels
(different frequencies), and the between-component term ``(m_r - m)(m_r - m)^T`` is a
rank-R covariance that is not of the form ``k - k Q k`` for any shared k; so a linear
functional of the mixture is explained per component and combined by the same law
(``gpexplain.explain._mixture.mixture_attribution``).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from gpexplain._validation import check_finite_result
from gpexplain.posterior.base import Posterior

__all__ = ["MixturePosterior", "check_mixture_weights", "mixture_moments"]

_WEIGHT_SUM_TOLERANCE = 1e-9


def check_mixture_weights(weights, n_components: int) -> np.ndarray:
    """Validate mixture weights; return them as float64 of shape (n_components,).

    ``None`` gives equal weights ``1 / n_components``.

    Raises
    ------
    ValueError
        Wrong length, a negative or non-finite weight, or weights that do not sum to 1
        (within 1e-9; they are then divided by their sum to remove the round-off).
    """
    if weights is None:
        return np.full(n_components, 1.0 / n_components)
    weights = np.asarray(weights, dtype=np.float64).reshape(-1)
    if weights.shape[0] != n_components:
        raise ValueError(
            f"weights has {weights.shape[0]} values but there are {n_components} components."
        )
    if not np.all(np.isfinite(weights)) or np.any(weights < 0):
        raise ValueError(f"weights must be finite and non-negative, got {weights}.")
    total = float(weights.sum())
    if abs(total - 1.0) > _WEIGHT_SUM_TOLERANCE:
        raise ValueError(
            f"weights must sum to 1 (they sum to {total!r}); pass weights / weights.sum() "
            "or None for equal weights."
        )
    return weights / total


def mixture_moments(weights: np.ndarray, means: np.ndarray, variances: np.ndarray):
    """Mean and variance of a mixture of scalar Gaussians, per column (law of total variance).

    Parameters
    ----------
    weights : ndarray (R,)
    means, variances : ndarray (R, n)
        Component means and variances.

    Returns
    -------
    ``(sum_r w_r m_r, sum_r w_r v_r + sum_r w_r (m_r - mean)^2)``, each (n,).
    """
    mean = weights @ means
    spread = means - mean[None, :]
    return mean, weights @ variances + weights @ (spread * spread)


class MixturePosterior:
    """Moment-matched mixture of posteriors over the same training data and features.

    Parameters
    ----------
    components : sequence of gpexplain.posterior.Posterior
        At least one; all with the same feature names and the same ``data_inputs`` (so that
        data-dependent baselines agree across components).
    weights : array-like of shape (n_components,), optional
        Non-negative mixture weights summing to 1; equal weights by default.

    Attributes
    ----------
    components : list of Posterior
    weights : ndarray (n_components,)
    feature_names : list of str

    Raises
    ------
    TypeError
        ``components`` is empty or holds something that is not a ``Posterior``.
    ValueError
        Components disagree on features or training inputs; bad weights.
    """

    #: Saved by ``gx.save`` as the tree of its attributes, like every ``Posterior``.
    _save_kind = "model"

    def __init__(self, components: Sequence[Posterior], weights=None):
        if isinstance(components, Posterior) or not isinstance(components, Sequence):
            raise TypeError(
                f"components must be a list of posteriors, got {type(components).__name__}."
            )
        components = list(components)
        if not components:
            raise TypeError("components must be a non-empty sequence of posteriors.")
        for index, component in enumerate(components):
            if not isinstance(component, Posterior):
                raise TypeError(
                    f"components[{index}] is a {type(component).__name__}, not a gpexplain "
                    "Posterior (e.g. ExactPosterior or RandomFeaturePosterior)."
                )
        first = components[0]
        for index, component in enumerate(components[1:], start=1):
            if component.feature_names != first.feature_names:
                raise ValueError(
                    f"components[{index}] has features {component.feature_names}, "
                    f"components[0] has {first.feature_names}."
                )
            if not np.array_equal(component.data_inputs, first.data_inputs):
                raise ValueError(
                    f"components[{index}] was trained on other inputs than components[0]; a "
                    "mixture needs the same training data in every component."
                )
        self.components = components
        self.weights = check_mixture_weights(weights, len(components))
        self.feature_names = list(first.feature_names)

    def __repr__(self) -> str:
        return (
            f"MixturePosterior(n_components={len(self.components)}, "
            f"first={self.components[0]!r})"
        )

    @property
    def n_features(self) -> int:
        return self.components[0].n_features

    @property
    def data_inputs(self) -> np.ndarray:
        """Training inputs shared by the components, (n_data, n_features)."""
        return self.components[0].data_inputs

    def check_inputs(self, X, name: str = "X") -> np.ndarray:
        """Validate query points (see ``Posterior.check_inputs``); float64 (n, n_features)."""
        return self.components[0].check_inputs(X, name)

    def predict_mean(self, X) -> np.ndarray:
        """Mixture mean ``sum_r w_r m_r(X)``, shape (n_points,)."""
        X = self.check_inputs(X)
        mean = self.weights @ np.stack([c.predict_mean(X) for c in self.components])
        check_finite_result("predict_mean", mean)
        return mean

    def predict(self, X, return_cov: bool = False):
        """Mean and variance (or covariance) of the mixture of latent functions at X.

        ``cov = sum_r w_r C_r + sum_r w_r (m_r - m)(m_r - m)^T`` (law of total covariance).

        Parameters
        ----------
        X : array-like of shape (n_points, n_features)
        return_cov : bool

        Returns
        -------
        mean : ndarray (n_points,)
        var_or_cov : ndarray (n_points,) or (n_points, n_points)
        """
        X = self.check_inputs(X)
        results = [c.predict(X, return_cov=return_cov) for c in self.components]
        means = np.stack([m for m, _ in results])
        if not return_cov:
            mean, var = mixture_moments(self.weights, means, np.stack([v for _, v in results]))
            check_finite_result("predict", mean, var)
            return mean, var
        mean = self.weights @ means
        spread = means - mean[None, :]
        cov = np.einsum("r,rij->ij", self.weights, np.stack([c for _, c in results]))
        cov += np.einsum("r,ri,rj->ij", self.weights, spread, spread)
        cov = 0.5 * (cov + cov.T)
        check_finite_result("predict", mean, cov)
        return mean, cov

    def difference_variance(self, X, baseline: np.ndarray) -> np.ndarray:
        """Mixture ``Var[f(x) - mean_b f(xt_b)]`` per row of X, shape (n_points,).

        ``baseline`` is (n_features,) or (n_baselines, n_features).
        ``sum_r w_r Var_r[f(x) - mean_b f(xt_b)] + sum_r w_r (d_r - d)^2`` with ``d_r = m_r(x) -
        mean_b m_r(xt_b)``: what ``1^T Cov(attributions) 1`` of the mixture attribution equals.
        """
        X = self.check_inputs(X)
        baselines = np.atleast_2d(np.asarray(baseline, dtype=np.float64))
        differences = np.stack(
            [c.predict_mean(X) - c.predict_mean(baselines).mean() for c in self.components]
        )
        variances = np.stack([c.difference_variance(X, baselines) for c in self.components])
        return mixture_moments(self.weights, differences, variances)[1]
