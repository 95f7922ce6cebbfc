"""``Attribution``: the one result object every explanation method returns.

An attribution of a GP model is Gaussian: at each explained point it has a mean vector over
features and a feature-by-feature covariance. Plots, tables and metrics all read this object.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import norm

from gpexplain._optional import require
from gpexplain.point_covariance import DensePointCovariance

__all__ = ["Attribution", "GaussianValues", "dense_to_save", "group_matrix", "grouped_values"]

# The saved directory (``Attribution.save``): the tidy table, plus these arrays in arrays.npz.
_TABLE = "attribution.parquet"
_SAVED_ARRAYS = ("cov", "prediction", "baseline", "difference_variance")
#: Largest (n_points n_features)^2 of a ``point_cov`` that ``save`` writes (2e7 float64
#: values: 160 MB).
MAX_SAVED_POINT_COV_ENTRIES = 20_000_000


def dense_to_save(covariance, name: str) -> np.ndarray | None:
    """A covariance across points as the dense array a save stores, or None: warned when it is
    not stored (a mixture's is not one Gaussian matrix; one above
    ``MAX_SAVED_POINT_COV_ENTRIES`` values is not written whole)."""
    if covariance is None:
        return None
    entries = int(np.prod(covariance.shape))
    if getattr(covariance, "components", None) is not None:
        reason = "a mixture posterior's is not one Gaussian matrix"
    elif entries > MAX_SAVED_POINT_COV_ENTRIES:
        reason = (f"it has {entries:.3g} values, above {MAX_SAVED_POINT_COV_ENTRIES:.3g}; "
                  f"explain fewer points, or save {name}.blocks() yourself")
    else:
        return covariance.dense()
    warnings.warn(f"save: the covariance across points ({name}) is not saved: {reason}.",
                  UserWarning, stacklevel=5)
    return None


class GaussianValues:
    """Per-value posterior summaries of a result with ``mean`` (n_points, D) and ``cov``
    (n_points, D, D) or None: ``Attribution`` and ``ShapleyInteractions``."""

    @property
    def var(self) -> np.ndarray:
        """Posterior variance of each value, (n_points, D); zeros without cov."""
        if self.cov is None:
            return np.zeros_like(self.mean)
        return np.maximum(np.einsum("pii->pi", self.cov), 0.0)

    @property
    def std(self) -> np.ndarray:
        """Posterior standard deviation of each value, (n_points, D)."""
        return np.sqrt(self.var)

    def interval(self, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
        """Central credible interval of each value (Gaussian), each (n_points, D).

        Raises
        ------
        ValueError
            ``level`` not strictly between 0 and 1.
        """
        if not 0.0 < level < 1.0:
            raise ValueError(f"level must lie strictly between 0 and 1, got {level}.")
        half = norm.ppf(0.5 + level / 2.0) * self.std
        return self.mean - half, self.mean + half

    def sample(self, n: int, random_state=None) -> np.ndarray:
        """Joint posterior draws of the values over all explained points.

        The attribution is a GP over the inputs (Butler et al. 2024, Theorem 1), so the draws
        are from ``N(mean, point_cov)`` jointly across points (a mixture posterior: from the
        mixture of its components' Gaussians): each draw is one attribution function evaluated
        at the explained points (factorised by an eigendecomposition, O((n_points
        n_features)^3); ``point_cov.dense()`` bounds the size).

        Parameters
        ----------
        n : int
            Number of draws (>= 1).
        random_state : int or numpy.random.Generator, optional

        Returns
        -------
        ndarray (n, n_points, D)

        Raises
        ------
        ValueError
            No covariance across points (explain with ``return_cov="points"``), or n not a
            positive integer.
        """
        if isinstance(n, bool) or not isinstance(n, int | np.integer) or n < 1:
            raise ValueError(f"n must be a positive integer, got {n!r}.")
        if self.point_cov is None:
            raise ValueError("sample needs the covariance across points: explain with "
                             "return_cov='points'.")
        return self.point_cov.sample(self.mean, int(n), np.random.default_rng(random_state))

    def _point_cov_to_save(self) -> np.ndarray | None:
        """``point_cov`` as the dense array ``save`` stores, or None (warned when one is not
        stored: a mixture's is not Gaussian, and a large one is not written whole)."""
        return dense_to_save(self.point_cov, "point_cov")

    def _saved_state(self) -> dict:
        """What ``gx.save`` stores of this result inside another (a
        ``MultiOutputAttribution``): its fields, with ``point_cov`` dense or None."""
        dense = self._point_cov_to_save()
        return {**vars(self),
                "point_cov": None if dense is None else DensePointCovariance(dense)}

    def save(self, path):
        """Save to a directory: metadata in ``gpexplain.json``, the covariance and per-point
        arrays in ``arrays.npz`` (an ``Attribution`` also writes ``attribution.parquet``, the
        table of ``to_frame``).

        ``gx.load(path)`` reads it back identically (no pickle; see ``gpexplain.persistence``).

        Parameters
        ----------
        path : str or os.PathLike
            A directory, created if needed.

        Returns
        -------
        pathlib.Path
        """
        from gpexplain.persistence import save

        return save(self, path)

@dataclass(frozen=True)
class Attribution(GaussianValues):
    """Posterior of feature attributions at a set of points.

    Attributes
    ----------
    mean : ndarray (n_points, n_features)
        Posterior mean of the attributions, in the units of the target.
    cov : ndarray (n_points, n_features, n_features) or None
        Posterior covariance across features at each point (None when not computed).
    X : ndarray (n_points, n_features)
        The explained points, in their original units (object dtype after ``group`` when a
        grouped feature is categorical: then it holds the category labels).
    prediction : ndarray (n_points,)
        Posterior mean of the latent function at each point.
    baseline : ndarray (n_features,) or (n_baselines, n_features) or None
        Reference point of baseline methods (integrated gradients), or the points of a
        baseline distribution; None for methods without one (Shapley values, GPX).
    baseline_prediction : float or None
        Posterior mean at the baseline (averaged over a baseline distribution); for methods
        without a baseline, the base value the attributions complete to (Shapley values:
        v(empty); GPX: 0), or None when there is none (gradients).
    feature_names : list of str
    method : str
        What was computed, e.g. ``"integrated_gradients (closed form)"``.
    difference_variance : ndarray (n_points,) or None
        Posterior ``Var[f(x) - mean_b f(baseline_b)]`` (or of ``f(x)`` minus the base value);
        completeness requires ``1^T cov 1`` to equal it.
    point_cov : gpexplain.explain._points.PointCovariance or MixturePointCovariance or None
        The covariance across points and features, (n_points, n_features, n_points,
        n_features), evaluated lazily in blocks; set by ``return_cov="points"``, else None
        (``group`` maps it with the group matrix; ``save`` stores it dense up to
        ``MAX_SAVED_POINT_COV_ENTRIES`` values, and ``gx.load`` reads it back as a
        ``DensePointCovariance``; a mixture's, or a larger one, is not saved, with a warning).
    """

    mean: np.ndarray
    cov: np.ndarray | None
    X: np.ndarray
    prediction: np.ndarray
    baseline: np.ndarray | None
    baseline_prediction: float | None
    feature_names: list[str]
    method: str
    difference_variance: np.ndarray | None = None
    point_cov: object | None = field(default=None, repr=False, compare=False)

    def __post_init__(self):
        n_points, n_features = self.mean.shape
        if self.cov is not None and self.cov.shape != (n_points, n_features, n_features):
            raise ValueError(
                f"cov must have shape {(n_points, n_features, n_features)}, got {self.cov.shape}."
            )
        if len(self.feature_names) != n_features:
            raise ValueError("feature_names must have one name per feature.")

    @property
    def n_points(self) -> int:
        return self.mean.shape[0]

    @property
    def n_features(self) -> int:
        return self.mean.shape[1]

    def completeness_gap(self) -> dict[str, float]:
        """Largest completeness violations over the points.

        Returns
        -------
        dict with ``mean``: max |sum_i mean_i - (prediction - baseline_prediction)| and
        ``variance``: max |1^T cov 1 - difference_variance| (NaN-free; 0.0 when not defined).
        """
        gaps = {"mean": 0.0, "variance": 0.0}
        if self.baseline_prediction is not None:
            target = self.prediction - self.baseline_prediction
            gaps["mean"] = float(np.max(np.abs(self.mean.sum(axis=1) - target)))
        if self.cov is not None and self.difference_variance is not None:
            total = self.cov.sum(axis=(1, 2))
            gaps["variance"] = float(np.max(np.abs(total - self.difference_variance)))
        return gaps

    def group(
        self,
        groups: Mapping[str, Sequence[str]],
        X=None,
        baseline=None,
    ) -> Attribution:
        """Attributions of groups of features: the exact sums of their members' attributions.

        With the 0/1 matrix ``A`` (``A[g, i] = 1`` when feature ``i`` belongs to group ``g``),
        the grouped attribution is the linear map ``A a`` of the Gaussian attribution ``a``:
        mean ``A mean`` and covariance ``A cov A^T`` (the covariance summed over each pair of
        blocks). Every feature lies in exactly one group, so ``1^T A = 1^T``: the sum of the
        attributions, its variance ``1^T cov 1`` and hence completeness are unchanged. For
        integrated gradients the sum over a block is the integrated gradient of the block
        (the path integral is linear in the gradient); for Shapley values it is the sum of the
        members' values, not the Shapley value of a game in which the block is one player.

        Parameters
        ----------
        groups : mapping of str to sequence of str
            Group name -> names of its member features. Features in no group stay as they are.
            The grouped features come in the order of their first member in
            ``feature_names``.
        X : array-like of shape (n_points, n_groups), optional
            Values of the grouped features at the explained points (any dtype, e.g. the
            category labels of a one-hot block). Default: the member's value for one-member
            groups; required when a group has several members.
        baseline : array-like of shape (n_groups,) or (n_baselines, n_groups), optional
            The baseline described per group (any dtype). Default: the member's baseline value
            when every group has one member, else None (the baseline prediction and the
            completeness target are kept either way).

        Returns
        -------
        Attribution
            ``n_features`` = number of groups; ``prediction``, ``baseline_prediction`` and
            ``difference_variance`` unchanged.

        Raises
        ------
        TypeError
            ``groups`` is not a mapping of names to sequences of names.
        ValueError
            An unknown or repeated member, an empty group, a group name that is also an
            ungrouped feature, or ``X``/``baseline`` of the wrong shape (or ``X`` missing for a
            group with several members).
        """
        names, matrix = group_matrix(groups, self.feature_names)
        X, single, member = grouped_values(X, matrix, names, self.X)
        if baseline is None and self.baseline is not None and single.all():
            baseline = self.baseline[..., member]
        if baseline is not None:
            baseline = np.asarray(baseline)
            if baseline.shape[-1:] != (len(names),) or baseline.ndim > 2:
                raise ValueError(
                    f"baseline must have shape ({len(names)},) or (n_baselines, {len(names)}), "
                    f"got {baseline.shape}."
                )
        cov = None
        if self.cov is not None:
            cov = np.einsum("gi,pij,hj->pgh", matrix, self.cov, matrix)
        return replace(
            self, mean=self.mean @ matrix.T, cov=cov, X=X, baseline=baseline, feature_names=names,
            point_cov=None if self.point_cov is None else self.point_cov.grouped(matrix),
        )

    def to_frame(self, level: float = 0.95) -> pd.DataFrame:
        """Tidy table: one row per (point, feature).

        Columns: ``point``, ``feature``, ``value`` (feature value), ``attribution`` (mean),
        ``std``, ``lower``, ``upper`` (central ``level`` credible interval).
        """
        lower, upper = self.interval(level)
        n_points, n_features = self.mean.shape
        return pd.DataFrame(
            {
                "point": np.repeat(np.arange(n_points), n_features),
                "feature": np.tile(np.asarray(self.feature_names, dtype=object), n_points),
                "value": self.X.ravel(),
                "attribution": self.mean.ravel(),
                "std": self.std.ravel(),
                "lower": lower.ravel(),
                "upper": upper.ravel(),
            }
        )

    def to_shap(self, level: float = 0.95):
        """This result as a ``shap.Explanation``, for shap's waterfall, bar and beeswarm plots.

        Parameters
        ----------
        level : float, default 0.95
            Level of the central credible interval stored in ``lower_bounds``/``upper_bounds``.

        Returns
        -------
        shap.Explanation
            ``values``: the posterior means (n_points, n_features), in units of the target;
            ``base_values``: ``baseline_prediction`` for every point (n_points,);
            ``data``: the explained points ``X``; ``feature_names``; and the uncertainty
            alongside: ``error_std`` (posterior standard deviations, (n_points, n_features))
            and ``lower_bounds``/``upper_bounds`` (the ``level`` interval of ``interval``).
            shap's plots read the means and base values; ``values.sum(1) + base_values`` is
            the prediction for complete methods (integrated gradients, Shapley values, GPX).

        Raises
        ------
        ImportError
            shap is not installed (``pip install "gpexplain[shap]"``).
        ValueError
            ``level`` not strictly between 0 and 1.

        Warns
        -----
        UserWarning
            For results without a base value (plain gradients): ``base_values`` are then 0,
            so the f(x) that shap's waterfall shows is the sum of the values, not the
            prediction.
        """
        shap = require("shap", "shap", "Attribution.to_shap")
        lower, upper = self.interval(level)
        base = self.baseline_prediction
        if base is None:
            warnings.warn(
                f"{self.method} has no base value the attributions complete to; base_values "
                "are set to 0, so shap's f(x) is the sum of the values, not the prediction.",
                UserWarning,
                stacklevel=2,
            )
            base = 0.0
        return shap.Explanation(
            values=self.mean.copy(),
            base_values=np.full(self.n_points, float(base)),
            data=self.X.copy(),
            feature_names=list(self.feature_names),
            lower_bounds=lower,
            upper_bounds=upper,
            error_std=self.std,
        )

    # ``gx.save``/``gx.load`` (``gpexplain.persistence``) use these for the format of its own
    # that ``_save_kind`` declares; persistence finds this class by the name in the header and
    # so does not import this module (the two are in one layer, and this one imports it).
    _save_kind = "attribution"

    def _save_to(self, path: Path) -> Path:
        from gpexplain.persistence import _header, _write

        if path.suffix == ".npz":
            raise ValueError(
                f"an Attribution is saved to a directory (Parquet table + covariance), got "
                f"the file name {str(path)!r}; pass a directory path."
            )
        path.mkdir(parents=True, exist_ok=True)
        self.to_frame().to_parquet(path / _TABLE, index=False)
        arrays = {
            name: np.asarray(getattr(self, name))
            for name in _SAVED_ARRAYS
            if getattr(self, name) is not None
        }
        point_cov = self._point_cov_to_save()
        if point_cov is not None:
            arrays["point_cov"] = point_cov
        header = _header(self._save_kind, self)
        header.update(
            n_points=self.n_points,
            feature_names=list(self.feature_names),
            method=self.method,
            baseline_prediction=self.baseline_prediction,
        )
        _write(path, header, arrays)
        return path

    @classmethod
    def _load_from(cls, path: Path, header: dict, arrays: dict[str, np.ndarray]) -> Attribution:
        import pyarrow.parquet as pq

        shape = (header["n_points"], len(header["feature_names"]))
        # The row count from the file's footer before its columns are decoded: a small file
        # can declare billions of rows (run-length encoding), which would take minutes and
        # gigabytes to read.
        rows = pq.read_metadata(path / _TABLE).num_rows
        if rows != shape[0] * shape[1]:
            raise ValueError(
                f"the gpexplain save at {path} is damaged: {_TABLE} has {rows} rows, but its "
                f"header describes {shape[0]} points x {shape[1]} features; save it again."
            )
        table = pd.read_parquet(path / _TABLE, columns=["attribution", "value"])
        return cls(
            mean=table["attribution"].to_numpy(dtype=np.float64).reshape(shape),
            X=table["value"].to_numpy(dtype=np.float64).reshape(shape),
            feature_names=list(header["feature_names"]),
            method=header["method"],
            baseline_prediction=header["baseline_prediction"],
            **{name: arrays.get(name) for name in _SAVED_ARRAYS},
            point_cov=(DensePointCovariance(arrays["point_cov"]) if "point_cov" in arrays
                       else None),
        )

    def __repr__(self) -> str:
        cov = "full covariance" if self.cov is not None else "no covariance"
        return (
            f"Attribution({self.method}: {self.n_points} points x {self.n_features} features, "
            f"{cov})"
        )


def group_matrix(groups, feature_names: list[str]) -> tuple[list[str], np.ndarray]:
    """``(names, A)``: the grouped features' names and the 0/1 matrix ``A[g, i]`` (feature i
    in group g) of ``Attribution.group`` (features in no group stay as they are, in the order
    of their first member).

    Raises
    ------
    TypeError, ValueError
        As ``Attribution.group``.
    """
    if not isinstance(groups, Mapping):
        raise TypeError(f"groups must map group names to feature names, got {type(groups)}.")
    owner: dict[str, str] = {}
    for name, members in groups.items():
        if isinstance(members, str) or not isinstance(members, Sequence):
            raise TypeError(f"group {name!r} must be a sequence of feature names.")
        if len(members) == 0:
            raise ValueError(f"group {name!r} is empty; give at least one feature name.")
        for member in members:
            if member not in feature_names:
                raise ValueError(
                    f"group {name!r} names unknown feature {member!r}; the features are "
                    f"{feature_names}."
                )
            if member in owner:
                raise ValueError(
                    f"feature {member!r} is in groups {owner[member]!r} and {name!r}; "
                    "each feature belongs to one group."
                )
            owner[member] = str(name)
    clash = set(map(str, groups)) & (set(feature_names) - set(owner))
    if clash:
        raise ValueError(f"group names {sorted(clash)} are also ungrouped feature names.")
    names = list(dict.fromkeys(owner.get(f, f) for f in feature_names))
    matrix = np.zeros((len(names), len(feature_names)))
    for i, feature in enumerate(feature_names):
        matrix[names.index(owner.get(feature, feature)), i] = 1.0
    return names, matrix


def grouped_values(X, matrix: np.ndarray, names: list[str], own_X: np.ndarray):
    """The grouped features' values ``X`` (given, or the members' own for one-member groups),
    checked to shape (n_points, n_groups); also which groups have one member and its position.
    """
    n_points = len(own_X)
    single = matrix.sum(axis=1) == 1
    member = matrix.argmax(axis=1)  # the one member of one-member groups
    if X is None:
        if not single.all():
            raise ValueError(
                "X is required when a group has several members: give the values of the "
                f"grouped features, shape ({n_points}, {len(names)})."
            )
        X = own_X[:, member]
    X = np.asarray(X)
    if X.shape != (n_points, len(names)):
        raise ValueError(
            f"X must hold one column per group, in the order of the grouped feature names "
            f"{names}, and one row per explained point: shape {(n_points, len(names))}, got "
            f"{X.shape} (for a pipeline's text columns: the original table's columns)."
        )
    return X, single, member
