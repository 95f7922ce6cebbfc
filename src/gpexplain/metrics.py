"""Quantitative metrics of feature attributions: faithfulness, sufficiency, stability, completeness.

Every metric works with *any* explainer and predictor, given as callables:

* ``predict(*inputs) -> ndarray (n_points,)``: the model's prediction, e.g. ``model.predict``;
* ``explainer(*inputs) -> Attribution or ndarray (n_points, n_features)``: attributions of
  those predictions (an ``Attribution`` contributes its ``mean``).

``inputs`` is what the metric was given as ``X``: one feature matrix, or a tuple ``(X, Z)``
for models that predict from an original input ``x`` and explain through a separate
simplified representation ``z`` (GPX, Yoshikawa and Iwata 2021); the callables are then called
as ``predict(X, Z)`` and ``explainer(X, Z)``, and attributions are over the columns of the
*last* array. With a single matrix, ``x`` and ``z`` are the same thing. A DataFrame in ``X``
reaches the callables as a DataFrame with the same columns (removed features included), so
that a model matches it by name or refuses it; a labelled ``reference`` Series is matched to
those columns by name.

Yoshikawa and Iwata (Sec. 5.2) leave the metrics under-specified; the choices made here
(see ``docs/errata.md``) are stated in each docstring:

* **Removing a feature** replaces it by a reference value, by default in *every* input array
  (so in ``x`` as well as in ``z``: removing it from ``z`` alone leaves GPX's weights
  unchanged and makes its faithfulness trivially 1). The reference should be the training
  mean (0 after standardisation). Arrays that do not share the attributed columns need a
  ``remove`` hook.
* **Correlations** are Pearson correlations across features at one point; a (numerically)
  constant vector has no defined correlation, and counts as 0.

Example (a GP explained by integrated gradients, and GPX by its own contributions)::

    reference = X_train.mean(axis=0)
    ig = lambda X: gx.integrated_gradients(gpr, X, baseline=reference, return_cov=False)
    faithfulness(gpr.predict, ig, X_test, reference).mean()
    sufficiency(gpx.predict, gpx.explain, X_test, k=[1, 2, 3], reference=reference)
    stability(lambda X: gpx.explain(X, what="weights"), X_test, epsilon=0.05)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from gpexplain._validation import (
    as_feature_matrix,
    check_finite_result,
    order_by_name,
    to_numpy,
)
from gpexplain.attribution import Attribution
from gpexplain.poe.losses import losses

__all__ = ["completeness", "faithfulness", "property_losses", "stability", "sufficiency"]

# A vector whose spread is below this fraction of its largest magnitude is constant up to
# rounding (e.g. f(x) - f(x_-l) for a model that ignores every feature): its Pearson
# correlation would be a ratio of rounding errors.
_CONSTANT_RTOL = 1e-12


# -- shared helpers -------------------------------------------------------------------------
class _Inputs(tuple):
    """The validated float64 arrays of ``X``, remembering which were DataFrames (``columns``).

    ``labelled(arrays)`` hands arrays of the same shapes back to the model as DataFrames with
    the user's columns, so that the model matches them by name (or refuses them) instead of
    taking a reordered table by position.
    """

    columns: tuple

    def labelled(self, arrays=None) -> tuple:
        arrays = self if arrays is None else arrays
        return tuple(
            array if names is None else pd.DataFrame(array, columns=names)
            for array, names in zip(arrays, self.columns, strict=True)
        )


def _as_inputs(X) -> _Inputs:
    """Validate ``X`` (one matrix or a tuple of matrices with equal row counts).

    Only a tuple means several arrays: a list is a (nested-list) matrix.
    """
    if isinstance(X, tuple):
        if len(X) == 0:
            raise ValueError("X is an empty tuple; pass a feature matrix or a tuple (X, Z).")
        tables = X
        arrays = tuple(
            as_feature_matrix(array, f"X[{index}]")[0] for index, array in enumerate(X)
        )
        rows = {array.shape[0] for array in arrays}
        if len(rows) > 1:
            raise ValueError(
                f"the arrays of X have different numbers of rows {[a.shape[0] for a in arrays]}; "
                "every array must describe the same points."
            )
    else:
        tables, arrays = (X,), (as_feature_matrix(X, "X")[0],)
    inputs = _Inputs(arrays)
    inputs.columns = tuple(
        list(table.columns) if isinstance(table, pd.DataFrame) else None for table in tables
    )
    return inputs


def _as_reference(reference, inputs: _Inputs) -> tuple[np.ndarray, ...]:
    """One finite reference vector per input array."""
    if len(inputs) == 1:
        references = (reference,)
    elif isinstance(reference, tuple) and len(reference) == len(inputs):
        references = tuple(reference)
    else:
        raise ValueError(
            f"X is a tuple of {len(inputs)} arrays, so reference must be a tuple of "
            f"{len(inputs)} vectors (one per array)."
        )
    vectors = []
    for index, (value, array) in enumerate(zip(references, inputs, strict=True)):
        name = "reference" if len(inputs) == 1 else f"reference[{index}]"
        if value is None:
            raise ValueError(
                f"{name} is missing; pass the training mean of the features "
                "(0 after standardisation), or a remove hook."
            )
        if isinstance(value, pd.Series) and inputs.columns[index] is not None:
            value = order_by_name(value, [str(c) for c in inputs.columns[index]], name)
        vector = np.asarray(to_numpy(value), dtype=np.float64).reshape(-1)
        if vector.shape[0] != array.shape[1]:
            raise ValueError(
                f"{name} has {vector.shape[0]} values but the matching array of X has "
                f"{array.shape[1]} columns."
            )
        if not np.all(np.isfinite(vector)):
            position = int(np.flatnonzero(~np.isfinite(vector))[0])
            raise ValueError(f"{name} has a non-finite value at position {position}.")
        vectors.append(vector)
    return tuple(vectors)


def _removal(reference, remove, inputs: _Inputs, n_features: int) -> Callable:
    """The function ``mask -> inputs with the masked entries removed``.

    ``mask`` is boolean (n_points, n_features), True where a feature is removed at a point.
    """
    if remove is not None:
        if not callable(remove):
            raise TypeError(f"remove must be a callable remove(inputs, mask), got {remove!r}.")

        def apply_hook(mask):
            # Copies: a hook that edits its arguments in place must not corrupt the original
            # points, which every later removal starts from.
            result = remove(tuple(array.copy() for array in inputs), mask.copy())
            arrays = result if isinstance(result, tuple | list) else (result,)
            arrays = tuple(np.asarray(to_numpy(a), dtype=np.float64) for a in arrays)
            if len(arrays) != len(inputs) or any(
                a.shape != b.shape for a, b in zip(arrays, inputs, strict=True)
            ):
                raise ValueError(
                    "remove(inputs, mask) must return arrays of the same shapes as X, got "
                    f"{[a.shape for a in arrays]} for {[b.shape for b in inputs]}."
                )
            return arrays

        return apply_hook
    references = _as_reference(reference, inputs)
    widths = [array.shape[1] for array in inputs]
    if any(width != n_features for width in widths):
        raise ValueError(
            f"the arrays of X have {widths} columns but the attributions have {n_features}; "
            "removing a feature then needs remove=callable(inputs, mask) saying how each "
            "array changes."
        )

    def replace(mask):
        return tuple(
            np.where(mask, vector[None, :], array)
            for array, vector in zip(inputs, references, strict=True)
        )

    return replace


def _predictions(predict, inputs: _Inputs, arrays=None, name: str = "predict") -> np.ndarray:
    """Call the predictor on ``arrays`` (default: the inputs themselves), labelled like the
    inputs, and check it returns one finite number per point."""
    if not callable(predict):
        raise TypeError(f"{name} must be a callable predict(X) -> (n_points,), got {predict!r}.")
    values = np.asarray(to_numpy(predict(*inputs.labelled(arrays))), dtype=np.float64)
    n_points = inputs[0].shape[0]
    if values.ndim == 2 and values.shape[1] == 1:
        values = values[:, 0]
    if values.shape != (n_points,):
        raise ValueError(
            f"{name} returned shape {values.shape}; expected ({n_points},), one prediction "
            "per point."
        )
    if not np.all(np.isfinite(values)):
        raise ValueError(f"{name} returned a non-finite prediction.")
    return values


def _attributions(explainer, inputs: _Inputs) -> np.ndarray:
    """Call the explainer and check it returns a finite (n_points, n_features) matrix."""
    if not callable(explainer):
        raise TypeError(
            "explainer must be a callable explainer(X) -> Attribution or ndarray "
            f"(n_points, n_features), got {explainer!r}."
        )
    result = explainer(*inputs.labelled())
    values = result.mean if isinstance(result, Attribution) else to_numpy(result)
    values = np.asarray(values, dtype=np.float64)
    n_points = inputs[0].shape[0]
    if values.ndim != 2 or values.shape[0] != n_points:
        raise ValueError(
            f"explainer returned shape {values.shape}; expected (n_points={n_points}, "
            "n_features)."
        )
    if not np.all(np.isfinite(values)):
        raise ValueError("explainer returned a non-finite attribution.")
    return values


def _is_constant(values: np.ndarray) -> np.ndarray:
    """Rows of ``values`` that are constant up to rounding (see ``_CONSTANT_RTOL``)."""
    spread = np.ptp(values, axis=1)
    scale = np.max(np.abs(values), axis=1)
    return spread <= _CONSTANT_RTOL * scale


def _row_correlation(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Pearson correlation of each row of ``a`` with the same row of ``b``; 0 if one is constant."""
    constant = _is_constant(a) | _is_constant(b)
    a = a - a.mean(axis=1, keepdims=True)
    b = b - b.mean(axis=1, keepdims=True)
    denominator = np.sqrt(np.sum(a * a, axis=1) * np.sum(b * b, axis=1))
    safe = np.where(constant, 1.0, denominator)
    correlation = np.where(constant, 0.0, np.sum(a * b, axis=1) / safe)
    # Rounding can push |r| a hair above 1.
    return np.clip(correlation, -1.0, 1.0)


# -- metrics --------------------------------------------------------------------------------
def faithfulness(predict, explainer, X, reference=None, *, remove=None) -> np.ndarray:
    """Faithfulness: correlation of attributions with the effect of removing each feature.

    For each point ``x`` and each feature ``l``, the prediction change
    ``delta_l = f(x) - f(x with feature l removed)`` is computed; the score of the point is
    the Pearson correlation, across the features, between the attributions ``phi(x)`` and
    ``delta(x)`` (Alvarez-Melis and Jaakkola 2018; Bhatt et al. 2020; Yoshikawa and Iwata
    2021, Sec. 5.2, Table 2). Higher is better; the score lies in [-1, 1].

    Choices where the papers are silent (docs/errata.md):

    * removing feature ``l`` replaces it by ``reference[l]`` in *every* input array: for GPX
      in ``x`` (the kernel input) as well as in ``z`` (otherwise GPX's weights do not move and
      its faithfulness is trivially 1). Use the training mean (0 after standardisation);
    * ``delta_l`` is the original prediction minus the prediction without ``l``, so that an
      attribution of the right sign correlates positively;
    * a point where ``phi`` or ``delta`` is constant across features up to rounding (spread
      below 1e-12 times its largest magnitude, e.g. a point equal to the reference) has no
      defined correlation and scores 0.

    Parameters
    ----------
    predict : callable ``predict(*inputs) -> (n_points,)``
    explainer : callable ``explainer(*inputs) -> Attribution or ndarray (n_points, n_features)``
    X : array-like (n_points, n_features) or tuple of arrays ``(X, Z)``
        Points to explain; a tuple for models with a separate simplified input (attributions
        are over the columns of the last array).
    reference : array-like (n_features,), or a tuple of one vector per array of ``X``
        Value a removed feature takes, in the units of ``X``. Not needed with ``remove``.
    remove : callable ``remove(inputs, mask) -> inputs``, optional
        Custom removal: ``inputs`` is the tuple of arrays, ``mask`` a boolean
        (n_points, n_features) array, True where a feature is removed; must return arrays of
        the same shapes. Needed when the arrays of a tuple ``X`` do not share columns.

    Returns
    -------
    ndarray (n_points,)
        Faithfulness of each point (average it for a data set score, as in Table 2).

    Raises
    ------
    ValueError
        Fewer than 2 features (a correlation across features needs two), inconsistent shapes,
        a missing or non-finite reference, non-finite predictions or attributions.
    TypeError
        ``predict``, ``explainer`` or ``remove`` is not callable.
    """
    inputs = _as_inputs(X)
    phi = _attributions(explainer, inputs)
    n_points, n_features = phi.shape
    if n_features < 2:
        raise ValueError(
            "faithfulness correlates attributions across features and needs at least 2 "
            f"features, got {n_features}."
        )
    removed = _removal(reference, remove, inputs, n_features)
    original = _predictions(predict, inputs)
    delta = np.empty((n_points, n_features))
    for feature in range(n_features):
        mask = np.zeros((n_points, n_features), dtype=bool)
        mask[:, feature] = True
        delta[:, feature] = original - _predictions(predict, inputs, removed(mask))
    scores = _row_correlation(phi, delta)
    check_finite_result("faithfulness", scores)
    return scores


def sufficiency(predict, explainer, X, k, reference=None, *, remove=None):
    """Sufficiency at k: prediction error when only the k most important features are kept.

    At each point the features are ranked by the absolute value of their attribution; the
    ``k`` largest are kept, every other feature is removed (replaced by ``reference``), and
    the prediction is compared with the original one (Yoshikawa and Iwata 2021, Sec. 5.2,
    Fig. 2). Lower is better; 0 means the k features alone reproduce every prediction.

    Choices where the paper is silent:

    * the comparison is the mean squared difference ``mean_p (f(x_p) - f(x_p, top k))^2``
      over the points, in squared units of the prediction;
    * removal is as in :func:`faithfulness` (in every input array, by ``reference``, the
      training mean);
    * ties in ``|phi|`` are broken in favour of the feature with the lower column index.

    Parameters
    ----------
    predict, explainer, X, reference, remove
        As in :func:`faithfulness`.
    k : int or sequence of int
        Number(s) of kept features, each in ``0 .. n_features``. The explainer is called once
        for all of them.

    Returns
    -------
    float, or ndarray (len(k),) when ``k`` is a sequence

    Raises
    ------
    ValueError
        ``k`` outside ``0 .. n_features`` or not an integer, plus the errors of
        :func:`faithfulness` (other than the 2-feature minimum).
    TypeError
        ``predict``, ``explainer`` or ``remove`` is not callable.
    """
    scalar = not isinstance(k, Sequence | np.ndarray)
    ks = [k] if scalar else list(k)
    inputs = _as_inputs(X)
    phi = _attributions(explainer, inputs)
    n_points, n_features = phi.shape
    for value in ks:
        if isinstance(value, bool) or not isinstance(value, int | np.integer):
            raise ValueError(f"k must be an integer number of features, got {value!r}.")
        if not 0 <= value <= n_features:
            raise ValueError(f"k must lie in 0..{n_features} (number of features), got {value}.")
    removed = _removal(reference, remove, inputs, n_features)
    original = _predictions(predict, inputs)
    # Stable sort of -|phi|: equal magnitudes keep column order, so lower indices win ties.
    order = np.argsort(-np.abs(phi), axis=1, kind="stable")
    rank = np.empty_like(order)
    np.put_along_axis(rank, order, np.arange(n_features)[None, :].repeat(n_points, 0), axis=1)
    scores = np.array(
        [
            np.mean((original - _predictions(predict, inputs, removed(rank >= value))) ** 2)
            for value in ks
        ]
    )
    check_finite_result("sufficiency", scores)
    return float(scores[0]) if scalar else scores


def stability(
    explainer, X, epsilon: float = 0.05, *, standardize: bool = False, return_counts: bool = False
):
    """Local Lipschitz stability of attributions over neighbouring points (eq. 19).

    Yoshikawa and Iwata (2021), eq. 19, after Alvarez-Melis and Jaakkola (2018):

        L(x, z) = max over (x', z') in B_eps(x) of ||phi(x', z') - phi(x, z)||_2 / ||z' - z||_2
        B_eps(x) = {(x', z') in the given points : ||x' - x||_2 / m < eps}

    where ``m`` is the number of columns of ``x``. Lower is better; global (constant)
    attributions score 0. The paper applies it to the local *weights* ``w`` (pass an explainer
    returning weights, e.g. ``GPXRegressor.explain(..., what="weights")``); any attribution
    works. The paper's ``w`` are "standardized estimated weights"; ``standardize=True`` reads
    this as standardising each point's vector across its features (mean 0, standard
    deviation 1), which makes the score independent of each method's scale.

    Choices where the paper is silent:

    * the neighbours are the other given points (the paper's test set): pass the whole set to
      explain as ``X``;
    * a neighbour with ``z' == z`` (a duplicate point) is skipped: the ratio is undefined;
    * a point without any neighbour scores 0 (the maximum of non-negative ratios over an
      empty set); ``return_counts=True`` returns the neighbour counts so that such points can
      be excluded from an average, as the benchmarks do: ``values[counts > 0].mean()``.

    Parameters
    ----------
    explainer : callable ``explainer(*inputs) -> Attribution or ndarray (n_points, n_features)``
    X : array-like (n_points, n_features) or tuple of arrays ``(X, Z)``
        The points; with a tuple, distances in the ball use the first array and the ratio's
        denominator the last.
    epsilon : float, default 0.05
        Radius of the ball in units of ``X`` per column (the paper's 0.05 on standardised X).
    standardize : bool, default False
        Standardise each point's attribution vector across features first (population
        standard deviation; a constant vector becomes zeros). The score is then invariant to
        a positive scale and a shift of each vector.
    return_counts : bool, default False
        Also return the number of neighbours of each point.

    Returns
    -------
    values : ndarray (n_points,)
    counts : ndarray of int (n_points,), only with ``return_counts=True``

    Raises
    ------
    ValueError
        ``epsilon`` not positive and finite, inconsistent shapes, non-finite attributions.
    TypeError
        ``explainer`` is not callable.
    """
    if not (np.isfinite(epsilon) and epsilon > 0):
        raise ValueError(f"epsilon must be a positive radius, got {epsilon!r}.")
    inputs = _as_inputs(X)
    phi = _attributions(explainer, inputs)
    if standardize:
        centred = phi - phi.mean(axis=1, keepdims=True)
        spread = centred.std(axis=1, keepdims=True)
        constant = _is_constant(phi)[:, None]
        phi = np.where(constant, 0.0, centred / np.where(constant, 1.0, spread))
    x, z = inputs[0], inputs[-1]
    if z.shape[1] != phi.shape[1]:
        raise ValueError(
            f"the attributions have {phi.shape[1]} features but the last array of X has "
            f"{z.shape[1]} columns."
        )
    values = np.zeros(x.shape[0])
    counts = np.zeros(x.shape[0], dtype=int)
    for point in range(x.shape[0]):
        x_distance = np.linalg.norm(x - x[point], axis=1) / x.shape[1]
        z_distance = np.linalg.norm(z - z[point], axis=1)
        neighbours = np.flatnonzero((x_distance < epsilon) & (z_distance > 0))
        counts[point] = neighbours.size
        if neighbours.size:
            change = np.linalg.norm(phi[neighbours] - phi[point], axis=1)
            values[point] = np.max(change / z_distance[neighbours])
    check_finite_result("stability", values)
    return (values, counts) if return_counts else values


def completeness(predict, explainer, X, reference=None, *, remove=None) -> np.ndarray:
    """Completeness gap of any explainer: ``sum_l phi_l(x) - (f(x) - f(reference))``.

    An attribution is complete (efficient) when it splits the prediction's difference from
    the reference exactly: integrated gradients with that baseline, Shapley values with that
    single reference, and GPX contributions with reference 0 (``sum_l w_l z_l = f(x)`` and
    ``f`` of a zero ``z`` is 0) are; LIME is not. ``f(reference)`` is the prediction with every
    feature removed (as in :func:`faithfulness`). For an ``Attribution`` that carries its own
    baseline, ``Attribution.completeness_gap()`` gives the same check (and its variance part)
    without calling the model.

    Parameters
    ----------
    predict, explainer, X, reference, remove
        As in :func:`faithfulness`.

    Returns
    -------
    ndarray (n_points,)
        Signed gap at each point, in the units of the prediction (0 = complete).

    Raises
    ------
    ValueError, TypeError
        As :func:`faithfulness` (other than the 2-feature minimum).
    """
    inputs = _as_inputs(X)
    phi = _attributions(explainer, inputs)
    removed = _removal(reference, remove, inputs, phi.shape[1])
    original = _predictions(predict, inputs)
    at_reference = _predictions(predict, inputs, removed(np.ones(phi.shape, dtype=bool)))
    gap = phi.sum(axis=1) - (original - at_reference)
    check_finite_result("completeness", gap)
    return gap


def property_losses(attribution, gradients, values=None, S=None, S_tilde=None) -> dict:
    """The six explanation properties of Tadesse et al. (2025, Table 2) of any ``Attribution``.

    Faithfulness (``F_grad``, ``F_func``), robustness (``R_avg``, ``R_max``), smoothness
    (``S``) and complexity (``C``) of the explanations ``attribution.mean`` at the points
    ``attribution.X``; lower is better for all six. See ``gpexplain.poe.losses`` for the
    definitions.

    Parameters
    ----------
    attribution : Attribution
        Any explainer's result (integrated gradients, SmoothGrad, POE, ...).
    gradients : array-like (n_points, n_features)
        ``grad f`` at ``attribution.X`` (e.g. ``gx.gradients(model, X, return_cov=False).mean``).
    values : array-like (n_points,), optional
        ``f`` at ``attribution.X``, for ``F_func`` (None without it).
    S, S_tilde : similarities between points and between features (default uniform 1).

    Returns
    -------
    dict ``{"F_grad", "F_func", "R_avg", "R_max", "S", "C"}`` -> float.

    Raises
    ------
    TypeError
        ``attribution`` is not an ``Attribution``.
    ValueError
        Shapes that do not match ``attribution.X``.
    """
    if not isinstance(attribution, Attribution):
        raise TypeError(
            f"attribution must be a gx.Attribution, got {type(attribution).__name__}."
        )
    return losses(attribution.mean, attribution.X, gradients, values, S, S_tilde)
