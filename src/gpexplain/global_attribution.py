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

from gpexplain.multi_output_attribution import output_position

__all__ = [
    "GlobalImportance",
    "GlobalSensitivity",
    "GlobalShapleyValues",
    "MultiOutputImportance",
    "MultiOutputSensitivity",
]


class _PerFeatureVariances:
    """Shared by the global results: shape checks of the per-feature arrays named in
    ``_per_feature``, ``n_features`` and normalisation by ``total_variance``."""

    _per_feature: tuple[str, ...] = ()

    def __post_init__(self):
        n_features = len(self.feature_names)
        for name in self._per_feature:
            if np.shape(getattr(self, name)) != (n_features,):
                raise ValueError(
                    f"{name} must have shape ({n_features},), got {np.shape(getattr(self, name))}."
                )

    @property
    def n_features(self) -> int:
        return len(self.feature_names)

    def _normalise(self, array: np.ndarray) -> np.ndarray:
        if self.total_variance <= 0:
            return np.zeros_like(array)
        return array / self.total_variance


@dataclass(frozen=True)
class GlobalShapleyValues(_PerFeatureVariances):
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
    _per_feature = ("values", "first_order")

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


@dataclass(frozen=True)
class GlobalSensitivity(_PerFeatureVariances):
    """Variance-based global sensitivity of a GP under a product measure, with uncertainty.

    Two levels, both in squared units of the target (unnormalised):

    * of the **posterior mean** m (exact, closed form): ``first_order`` ``V_i = Var(E[m | x_i])``,
      ``total`` ``T_i = E[Var(m | x_-i)]``, ``shapley_effects`` (sum to ``total_variance`` =
      ``Var m``); ``first_order <= shapley_effects <= total``;
    * over the **GP posterior** of f (each is a quadratic functional of f): the posterior
      expectations ``expected_*`` and posterior standard deviations ``*_std`` (both exact:
      moments of a quadratic form of a Gaussian).

    Attributes
    ----------
    first_order, total, shapley_effects : ndarray (n_features,)
    total_variance : float
    expected_first_order, expected_total, expected_shapley_effects : ndarray (n_features,)
    expected_total_variance : float
    first_order_std, total_std, shapley_effects_std : ndarray (n_features,)
        Posterior standard deviations of ``V_i[f]``, ``T_i[f]`` and the Shapley effects of f,
        in squared units of the target (per feature; their covariances are not computed).
    total_variance_std : float
        Posterior standard deviation of ``Var_x f(x)``.
    feature_names : list of str
    method : str
    second_order, expected_second_order, second_order_std : ndarray (n_features, n_features)
        or None
        With ``interactions=True``: the pure second-order (interaction) Sobol variances
        ``V_ij = Var g_ij`` of the posterior mean (symmetric, zero diagonal), their posterior
        expectations and standard deviations over f; None otherwise.
    """

    first_order: np.ndarray
    total: np.ndarray
    shapley_effects: np.ndarray
    total_variance: float
    expected_first_order: np.ndarray
    expected_total: np.ndarray
    expected_shapley_effects: np.ndarray
    expected_total_variance: float
    first_order_std: np.ndarray
    total_std: np.ndarray
    shapley_effects_std: np.ndarray
    total_variance_std: float
    feature_names: list[str]
    method: str = "global sensitivity"
    second_order: np.ndarray | None = None
    expected_second_order: np.ndarray | None = None
    second_order_std: np.ndarray | None = None
    _per_feature = ("first_order", "total", "shapley_effects", "expected_first_order",
                    "expected_total", "expected_shapley_effects", "first_order_std",
                    "total_std", "shapley_effects_std")

    @property
    def first_order_indices(self) -> np.ndarray:
        """First-order Sobol indices ``S_i = V_i / Var m`` of the posterior mean."""
        return self._normalise(self.first_order)

    @property
    def total_indices(self) -> np.ndarray:
        """Total Sobol indices ``S_Ti = T_i / Var m`` of the posterior mean."""
        return self._normalise(self.total)

    @property
    def shapley_indices(self) -> np.ndarray:
        """Shapley effects of the posterior mean as shares of its variance (sum to 1)."""
        return self._normalise(self.shapley_effects)

    def to_frame(self) -> pd.DataFrame:
        """One row per feature: the indices of the posterior mean (``first_order_index``,
        ``total_index``, ``shapley_index``), its unnormalised variances (``first_order``,
        ``total``, ``shapley_effect``), their posterior expectations over f (``expected_*``)
        and posterior standard deviations (``first_order_std``, ``total_std``,
        ``shapley_effect_std``), all in squared units of the target. The total variance and
        its std are scalars (``expected_total_variance``, ``total_variance_std``), not
        columns."""
        return pd.DataFrame(
            {
                "feature": list(self.feature_names),
                "first_order_index": self.first_order_indices,
                "total_index": self.total_indices,
                "shapley_index": self.shapley_indices,
                "first_order": self.first_order,
                "total": self.total,
                "shapley_effect": self.shapley_effects,
                "expected_first_order": self.expected_first_order,
                "first_order_std": self.first_order_std,
                "expected_total": self.expected_total,
                "total_std": self.total_std,
                "expected_shapley_effect": self.expected_shapley_effects,
                "shapley_effect_std": self.shapley_effects_std,
            }
        )

    def interactions_frame(self) -> pd.DataFrame:
        """One row per pair ``i < j``: ``feature_i``, ``feature_j``, ``second_order_index``
        (``V_ij / Var m``), ``second_order`` (``V_ij`` of the posterior mean),
        ``expected_second_order`` and ``second_order_std`` over f, and ``closed_index``
        (``(V_i + V_j + V_ij) / Var m``, the closed second-order index of the pair).

        Raises
        ------
        ValueError
            The result was computed without ``interactions=True``.
        """
        if self.second_order is None:
            raise ValueError("no second-order indices: call gx.global_sensitivity(..., "
                             "interactions=True).")
        rows, cols = np.triu_indices(self.n_features, 1)
        names = np.asarray(self.feature_names, dtype=object)
        pure = self.second_order[rows, cols]
        return pd.DataFrame({
            "feature_i": names[rows],
            "feature_j": names[cols],
            "second_order_index": self._normalise(pure),
            "second_order": pure,
            "expected_second_order": self.expected_second_order[rows, cols],
            "second_order_std": self.second_order_std[rows, cols],
            "closed_index": self._normalise(pure + self.first_order[rows]
                                            + self.first_order[cols]),
        })

    def __repr__(self) -> str:
        return (
            f"GlobalSensitivity({self.method}: {self.n_features} features, variance of the "
            f"posterior mean {self.total_variance:.4g})"
        )


def _correlation(covariance: np.ndarray) -> np.ndarray:
    """Covariances between outputs (..., t, t) scaled to correlations, 0 where a value has no
    posterior spread, clipped to [-1, 1] (round-off)."""
    scale = np.sqrt(np.maximum(np.diagonal(covariance, axis1=-2, axis2=-1), 0.0))
    outer = scale[..., :, None] * scale[..., None, :]
    with np.errstate(invalid="ignore", divide="ignore"):
        correlation = np.where(outer > 0, covariance / np.where(outer > 0, outer, 1.0), 0.0)
    return np.clip(correlation, -1.0, 1.0)


class _PerOutput:
    """Shared by the multi-output global results (``results``, one per ``output_names``):
    the length check, selection of one output, and tables stacked with an ``output``
    column."""

    _kind = ""  # the per-output result type, for the error message

    def __post_init__(self):
        if len(self.results) != len(self.output_names) or not self.results:
            raise ValueError(f"need one {self._kind} per output; got {len(self.results)} "
                             f"results and outputs {self.output_names!r}.")

    def __getitem__(self, output):
        """The result of one output, by name or position.

        Raises
        ------
        KeyError
            An unknown output name.
        """
        return self.results[output_position(self.output_names, output)]

    @property
    def feature_names(self) -> list[str]:
        return list(self.results[0].feature_names)

    def _stacked(self, name: str) -> pd.DataFrame:
        frames = []
        for output, result in zip(self.output_names, self.results, strict=True):
            frame = getattr(result, name)()
            frame.insert(0, "output", output)
            frames.append(frame)
        return pd.concat(frames, ignore_index=True)

    def _pairs_frame(self, kinds: dict, columns: list[str]) -> pd.DataFrame:
        """One row per kind of value, feature and pair of outputs ``output_a`` before
        ``output_b``: ``kinds`` maps a kind's name to its covariance between outputs
        (n_features, t, t), or (t, t) for a value of all features (feature ``"(all)"``)."""
        rows = []
        for kind, covariance in kinds.items():
            features = ["(all)"] if np.ndim(covariance) == 2 else self.feature_names
            covariance = np.reshape(covariance, (len(features),) + np.shape(covariance)[-2:])
            correlation = _correlation(covariance)
            for f, feature in enumerate(features):
                for a, b in zip(*np.triu_indices(len(self.output_names), 1), strict=True):
                    rows.append(dict(zip(columns, (
                        kind, feature, self.output_names[a], self.output_names[b],
                        covariance[f, a, b], correlation[f, a, b]), strict=True)))
        return pd.DataFrame(rows, columns=columns)


# The indices whose covariance between outputs MultiOutputSensitivity carries.
_BETWEEN_OUTPUTS = ("total_variance", "first_order", "total", "shapley_effects")


@dataclass(frozen=True)
class MultiOutputSensitivity(_PerOutput):
    """``GlobalSensitivity`` of each output of a multi-output GP, under one input measure.

    Each output's indices are those of its marginal posterior (``posterior.marginal(i)``),
    so they equal a single-output ``gx.global_sensitivity`` of that marginal. Their posterior
    covariance between outputs (the indices of the posterior mean are fixed numbers; the
    covariance is that of the indices of the random function f over the joint posterior of
    all outputs) is ``index_covariance``: zero between independent outputs, exact for an
    intrinsic coregionalisation model (ICM) and a linear model of coregionalisation (LMC).

    Attributes
    ----------
    results : list of GlobalSensitivity
        One per output, in ``output_names`` order (``result[output]`` selects one, by name
        or position; ``KeyError`` for an unknown name).
    output_names : list of str
    independent : bool
        The outputs are independent a posteriori (then so are their indices).
    between_outputs : dict of str to ndarray, optional
        Posterior covariance of each index between the outputs: ``"total_variance"`` (t, t),
        ``"first_order"``, ``"total"``, ``"shapley_effects"`` (d, t, t), in squared variance
        units (units of y to the fourth). None where it is not computed (a multi-output form
        other than the ICM or LMC with dependent outputs); for independent outputs it holds the
        variances on the diagonal and zeros elsewhere. Read it with ``index_covariance``.
    """

    results: list
    output_names: list[str]
    independent: bool
    between_outputs: dict | None = None
    _kind = "GlobalSensitivity"

    def index_covariance(self, index: str = "total") -> np.ndarray:
        """Posterior covariance of one kind of index between the outputs.

        Parameters
        ----------
        index : {"total", "first_order", "shapley_effects", "total_variance"}
            The unnormalised variances (``GlobalSensitivity`` fields of the same names).

        Returns
        -------
        ndarray (d, t, t), or (t, t) for ``"total_variance"``
            ``Cov[V_i(f_o), V_i(f_o')]`` for outputs o, o' (``output_names`` order) and each
            feature i; the diagonal is the square of the per-output ``*_std``.

        Raises
        ------
        ValueError
            An unknown ``index``; the covariance was not computed (``between_outputs`` None).
        """
        if index not in _BETWEEN_OUTPUTS:
            raise ValueError(f"index must be one of {_BETWEEN_OUTPUTS}, got {index!r}.")
        if self.between_outputs is None:
            raise ValueError(
                "the covariance of indices between outputs was not computed for this model "
                "(it is exact for independent outputs and for the ICM and LMC only)."
            )
        return self.between_outputs[index]

    def index_correlation(self, index: str = "total") -> np.ndarray:
        """``index_covariance(index)`` scaled to correlations (0 where an index has no
        posterior spread), same shape and errors."""
        return _correlation(self.index_covariance(index))

    def between_outputs_frame(self) -> pd.DataFrame:
        """One row per kind of index, feature and pair of outputs ``output_a`` before
        ``output_b``: the posterior ``covariance`` and ``correlation`` of that index between
        the two outputs (``index_covariance``; the total variance has feature ``"(all)"``).

        Raises
        ------
        ValueError
            The covariance was not computed (``between_outputs`` None).
        """
        return self._pairs_frame({index: self.index_covariance(index)
                                  for index in _BETWEEN_OUTPUTS},
                                 ["index", "feature", "output_a", "output_b", "covariance",
                                  "correlation"])

    def to_frame(self) -> pd.DataFrame:
        """``GlobalSensitivity.to_frame`` of each output with an ``output`` column first."""
        return self._stacked("to_frame")

    def interactions_frame(self) -> pd.DataFrame:
        """``GlobalSensitivity.interactions_frame`` of each output with an ``output`` column
        first (``ValueError`` without ``interactions=True``)."""
        return self._stacked("interactions_frame")

    def __repr__(self) -> str:
        return (f"MultiOutputSensitivity(outputs={self.output_names}, "
                f"{len(self.feature_names)} features, independent={self.independent})")


@dataclass(frozen=True)
class MultiOutputImportance(_PerOutput):
    """``GlobalImportance`` of each output of a multi-output explanation, over the same points.

    Each output's result is ``gx.global_importance`` of that output's own attributions (its
    ``Attribution`` and covariance across points), so it equals the single-output result of
    that output's marginal posterior. ``between_outputs`` adds the posterior covariance of
    each feature's importance between the outputs (does the feature that matters for one
    output also matter for the other, and how sure are we?), exact for every summary (module
    docstring of ``gpexplain.explain.global_importance``).

    Attributes
    ----------
    results : list of GlobalImportance
        One per output, in ``output_names`` order (``result[output]`` selects one, by name or
        position; ``KeyError`` for an unknown name).
    output_names : list of str
    independent : bool
        The outputs are independent a posteriori (then so are their importances).
    between_outputs : ndarray (n_features, t, t) or None
        ``[a, o, o']``: ``Cov[G_a(output o), G_a(output o')]``, the posterior covariance of
        feature a's importance between outputs o and o' (units of the target squared; to the
        fourth for ``mean_sq``); the diagonal is the square of the per-output ``std``. Zero
        off the diagonal for independent outputs (the model says so; not computed). None
        where the covariance across points and outputs was not computed
        (``MultiOutputAttribution.joint_point_cov`` None); ``note`` says so.
    note : str
        What was left out, or "".
    """

    results: list
    output_names: list[str]
    independent: bool
    between_outputs: np.ndarray | None = None
    note: str = ""
    _kind = "GlobalImportance"

    @property
    def summary(self) -> str:
        return self.results[0].summary

    @property
    def mean(self) -> np.ndarray:
        """Posterior expectation of each output's importances, (t, n_features)."""
        return np.stack([result.mean for result in self.results])

    @property
    def std(self) -> np.ndarray:
        """Posterior standard deviation of each output's importances, (t, n_features)."""
        return np.stack([result.std for result in self.results])

    def _between(self) -> np.ndarray:
        if self.between_outputs is None:
            raise ValueError(f"the covariance of importances between outputs was not "
                             f"computed: {self.note or 'no covariance across outputs'}; "
                             "explain with return_cov='points' (gx.global_importance does).")
        return self.between_outputs

    def importance_covariance(self) -> np.ndarray:
        """``between_outputs``, (n_features, t, t).

        Raises
        ------
        ValueError
            It was not computed (``note`` says why).
        """
        return self._between()

    def importance_correlation(self) -> np.ndarray:
        """``between_outputs`` scaled to correlations (0 where an importance has no posterior
        spread), (n_features, t, t); ``ValueError`` where it was not computed."""
        return _correlation(self._between())

    def between_outputs_frame(self) -> pd.DataFrame:
        """One row per feature and pair of outputs ``output_a`` before ``output_b``: the
        summary, and the posterior ``covariance`` and ``correlation`` of the feature's
        importance between the two outputs.

        Raises
        ------
        ValueError
            The covariance was not computed (``between_outputs`` None).
        """
        return self._pairs_frame({self.summary: self._between()},
                                 ["summary", "feature", "output_a", "output_b", "covariance",
                                  "correlation"])

    def to_frame(self) -> pd.DataFrame:
        """``GlobalImportance.to_frame`` of each output with an ``output`` column first."""
        return self._stacked("to_frame")

    def __repr__(self) -> str:
        return (f"MultiOutputImportance({self.summary}, outputs={self.output_names}, "
                f"{len(self.feature_names)} features, independent={self.independent})")


@dataclass(frozen=True)
class GlobalImportance:
    """Posterior of each feature's global importance over a set of explained points.

    The importance of feature i is a summary of its attributions ``A_pi`` over the n points:
    ``mean`` ``(1/n) sum_p A_pi``, ``mean_abs`` ``(1/n) sum_p |A_pi|`` or ``mean_sq`` ``(1/n)
    sum_p A_pi^2``; under the GP posterior it is a random variable, and its moments here are
    exact (``gx.global_importance``).

    Attributes
    ----------
    mean : ndarray (n_features,)
        Posterior expectation of each importance (units of the target; squared for mean_sq).
    std : ndarray (n_features,)
        Posterior standard deviation of each importance (exact).
    cov : ndarray (n_features, n_features) or None
        Posterior covariance between the importances (exact; ``mean`` and ``mean_sq``
        summaries only, None for ``mean_abs``).
    probability_greater : ndarray (n_features, n_features) or None
        ``[a, b]``: posterior probability that feature a's importance exceeds feature b's
        (exact for ``mean``; Monte Carlo over the exact joint Gaussian of the attributions
        otherwise); None where not computed (``note`` says why).
    probability_standard_error : float
        Largest Monte Carlo standard error of an entry of ``probability_greater``
        (``sqrt(p (1 - p) / n_samples)``, at most ``0.5 / sqrt(n_samples)``); 0.0 when exact.
    summary : {"mean", "mean_abs", "mean_sq"}
    n_points : int
    n_samples : int
        Monte Carlo draws behind ``probability_greater`` (0 when exact or not computed).
    feature_names : list of str
    method : str
        The explanation method whose attributions are summarised.
    note : str
        What was bounded or left out, or "".
    """

    mean: np.ndarray
    std: np.ndarray
    cov: np.ndarray | None
    probability_greater: np.ndarray | None
    probability_standard_error: float
    summary: str
    n_points: int
    n_samples: int
    feature_names: list[str]
    method: str
    note: str = ""

    def __post_init__(self):
        n_features = len(self.feature_names)
        for name in ("mean", "std"):
            if np.shape(getattr(self, name)) != (n_features,):
                raise ValueError(f"{name} must have shape ({n_features},).")
        if self.probability_greater is not None and \
                np.shape(self.probability_greater) != (n_features, n_features):
            raise ValueError(f"probability_greater must have shape ({n_features}, {n_features}).")

    @property
    def n_features(self) -> int:
        return len(self.feature_names)

    def to_frame(self) -> pd.DataFrame:
        """One row per feature: ``feature``, ``importance`` (posterior mean), ``std`` and
        ``min_probability_greater``, the smallest posterior probability that it exceeds
        another feature's importance (a column left out where the probabilities were not
        computed)."""
        frame = pd.DataFrame({
            "feature": list(self.feature_names),
            "importance": self.mean,
            "std": self.std,
        })
        if self.probability_greater is not None:
            pairwise = np.where(np.eye(self.n_features, dtype=bool), 1.0,
                                self.probability_greater)
            frame["min_probability_greater"] = (pairwise.min(axis=1) if self.n_features > 1
                                                else 1.0)
        return frame

    def __repr__(self) -> str:
        return (f"GlobalImportance({self.summary} of {self.method}: {self.n_features} features "
                f"over {self.n_points} points)")
