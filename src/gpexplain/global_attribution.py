"""``GlobalShapleyValues``: the result of a global (variance-based) Shapley explanation.

Global importances decompose the variance of the model's prediction over the input distribution
among the features (Owen 2014; Song, Nelson and Staum 2016): the Shapley effect of a feature is
its Shapley value in the game ``v(S) = Var(E[f(x) | x_S])``; under independent inputs it equals
``sum_{S ni i} Var(f_S) / |S|`` over the functional-ANOVA components, and the effects sum to the
total variance. The first-order Sobol variance ``V_i = Var(f_{i})`` leaves out every interaction.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

__all__ = ["GlobalShapleyValues"]


@dataclass(frozen=True)
class GlobalShapleyValues:
    """Variance-based global feature importances of a model's prediction.

    Attributes
    ----------
    values : ndarray (n_features,)
        Shapley effects, in squared units of the target; ``values.sum() == total_variance``.
    first_order : ndarray (n_features,)
        First-order Sobol variances ``V_i`` (unnormalised, squared units of the target);
        ``first_order <= values`` and their sum leaves out all interaction variance.
    total_variance : float
        Variance of the explained function over the input measure.
    feature_names : list of str
    method : str
        What was computed and under which measure.
    """

    values: np.ndarray
    first_order: np.ndarray
    total_variance: float
    feature_names: list[str]
    method: str = "global Shapley effects"

    def __post_init__(self):
        n_features = len(self.feature_names)
        for name in ("values", "first_order"):
            if np.shape(getattr(self, name)) != (n_features,):
                raise ValueError(
                    f"{name} must have shape ({n_features},), got {np.shape(getattr(self, name))}."
                )

    @property
    def n_features(self) -> int:
        return len(self.feature_names)

    @property
    def indices(self) -> np.ndarray:
        """Shapley effects as shares of the total variance (sum to 1), (n_features,).

        All zeros when the total variance is zero (a constant function has nothing to share).
        """
        return self._normalise(self.values)

    @property
    def first_order_indices(self) -> np.ndarray:
        """First-order Sobol indices ``S_i = V_i / Var f``, (n_features,)."""
        return self._normalise(self.first_order)

    def _normalise(self, array: np.ndarray) -> np.ndarray:
        if self.total_variance <= 0:
            return np.zeros_like(array)
        return array / self.total_variance

    def to_frame(self) -> pd.DataFrame:
        """One row per feature: ``feature``, ``shapley_effect``, ``shapley_index``,
        ``first_order_variance``, ``first_order_index``, ``interaction_variance``
        (``shapley_effect - first_order_variance``, this feature's share of interactions)."""
        return pd.DataFrame(
            {
                "feature": list(self.feature_names),
                "shapley_effect": self.values,
                "shapley_index": self.indices,
                "first_order_variance": self.first_order,
                "first_order_index": self.first_order_indices,
                "interaction_variance": self.values - self.first_order,
            }
        )

    def __repr__(self) -> str:
        return (
            f"GlobalShapleyValues({self.method}: {self.n_features} features, "
            f"total variance {self.total_variance:.4g})"
        )
