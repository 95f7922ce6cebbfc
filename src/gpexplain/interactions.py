"""``ShapleyInteractions``: order-1 values and pairwise Shapley interactions with uncertainty.

At each explained point an interaction index of order 2 (k-SII, SII or STII) has
``D = d + d (d - 1) / 2`` values: the d order-1 values, then the pairs ``(i, j)``, ``i < j``,
in lexicographic order. Under a GP posterior they are jointly Gaussian: a mean vector and a
``D x D`` covariance per point (``gx.shapley_interactions``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd

from gpexplain._optional import require
from gpexplain.attribution import Attribution, GaussianValues, group_matrix, grouped_values

__all__ = ["ShapleyInteractions"]

_SAVED = ("mean", "cov", "X", "prediction", "baseline", "difference_variance")


@dataclass(frozen=True)
class ShapleyInteractions(GaussianValues):
    """Posterior of an order-2 Shapley interaction index at a set of points.

    Attributes
    ----------
    mean : ndarray (n_points, D), ``D = d + d (d - 1) / 2``
        Posterior mean of the values: columns ``0..d-1`` the order-1 values, then the pairs
        of ``pairs`` (units of the target).
    cov : ndarray (n_points, D, D) or None
        Their joint posterior covariance at each point (None when not computed).
    X : ndarray (n_points, d)
        The explained points, in their original units.
    prediction : ndarray (n_points,)
        Posterior mean of the latent function at each point.
    baseline : ndarray or None
        The reference point (baseline game) or background rows (interventional game).
    baseline_prediction : float
        The base value ``v({})``.
    feature_names : list of str (d,)
    index : {"k-SII", "SII", "STII"}
    method : str
    difference_variance : ndarray (n_points,) or None
        Posterior ``Var[f(x) - v({})]``: ``e^T cov e`` must equal it (``efficiency_gap``).
    point_cov : gpexplain.explain._points.PointCovariance or None
        The covariance across points and values, (n_points, D, n_points, D), evaluated lazily
        in blocks; set by ``return_cov="points"`` (baseline and product-measure games), else
        None (not saved by ``save``).
    """

    mean: np.ndarray
    cov: np.ndarray | None
    X: np.ndarray
    prediction: np.ndarray
    baseline: np.ndarray | None
    baseline_prediction: float
    feature_names: list[str]
    index: str
    method: str
    difference_variance: np.ndarray | None = None
    point_cov: object | None = field(default=None, repr=False, compare=False)

    def __post_init__(self):
        d = len(self.feature_names)
        n_terms = d + d * (d - 1) // 2
        if self.mean.ndim != 2 or self.mean.shape[1] != n_terms:
            raise ValueError(
                f"mean must have shape (n_points, {n_terms}) for {d} features, got "
                f"{self.mean.shape}."
            )
        if self.cov is not None and self.cov.shape != (self.n_points, n_terms, n_terms):
            raise ValueError(f"cov must have shape {(self.n_points, n_terms, n_terms)}, got "
                             f"{self.cov.shape}.")

    @property
    def n_points(self) -> int:
        return self.mean.shape[0]

    @property
    def n_features(self) -> int:
        return len(self.feature_names)

    @property
    def pairs(self) -> list[tuple[int, int]]:
        """The pairs ``(i, j)``, ``i < j``, in the order of ``mean[:, d:]``."""
        d = self.n_features
        return [(i, j) for i in range(d) for j in range(i + 1, d)]

    @property
    def term_names(self) -> list[str]:
        """Names of the D values: the features, then ``"a x b"``."""
        names = self.feature_names
        return list(names) + [f"{names[i]} x {names[j]}" for i, j in self.pairs]

    @property
    def efficiency_weights(self) -> np.ndarray:
        """``e`` (D,): ``e^T mean = prediction - baseline_prediction`` (ones for k-SII and
        STII; ones on the order-1 values only for SII, which is not efficient over pairs)."""
        d = self.n_features
        pair_weight = 0.0 if self.index == "SII" else 1.0
        return np.concatenate([np.ones(d), np.full(len(self.pairs), pair_weight)])

    def main_effects(self) -> np.ndarray:
        """The order-1 values, (n_points, d)."""
        return self.mean[:, : self.n_features]

    def shapley_values(self) -> Attribution:
        """The exact Shapley values with their covariance, a linear map of these values.

        ``phi = A values`` with ``A = [I, 0]`` for SII (its order-1 values are the Shapley
        values) and ``A = [I, H / 2]`` for k-SII and STII (each pair's half given back to its
        two members, ``H`` the (d, pairs) incidence matrix); covariance ``A cov A^T``.

        Returns
        -------
        Attribution
            Complete: sums to ``prediction - baseline_prediction`` (and its covariance to
            ``difference_variance``).
        """
        d = self.n_features
        A = np.zeros((d, self.mean.shape[1]))
        A[:, :d] = np.eye(d)
        if self.index != "SII":
            for p, (i, j) in enumerate(self.pairs):
                A[[i, j], d + p] = 0.5
        cov = None if self.cov is None else np.einsum("ia,pab,jb->pij", A, self.cov, A)
        return Attribution(
            mean=self.mean @ A.T, cov=cov, X=self.X, prediction=self.prediction,
            baseline=self.baseline, baseline_prediction=self.baseline_prediction,
            feature_names=list(self.feature_names),
            method=f"exact Shapley values from the {self.method}",
            difference_variance=self.difference_variance, point_cov=self._mapped_points(A),
        )

    def group(self, groups, X=None, baseline=None) -> ShapleyInteractions:
        """The values of groups of features (e.g. the indicators of a one-hot column): a linear
        map ``T`` of the Gaussian values, mean ``T mean`` and covariance ``T cov T^T``.

        A group's order-1 value is the sum of its members' order-1 values plus (k-SII, STII)
        the pairs inside the group, so the efficiency identity is kept exactly; for SII, whose
        efficiency holds on the order-1 values alone, the pairs inside a group are left out.
        The pair of two groups is the sum of the pairs between their members. These are sums
        of the members' values, not the index of a game in which a block is one player.

        Parameters
        ----------
        groups, X, baseline
            As ``Attribution.group``.

        Returns
        -------
        ShapleyInteractions
            Over the grouped features.

        Raises
        ------
        TypeError, ValueError
            As ``Attribution.group``.
        """
        names, membership = group_matrix(groups, self.feature_names)
        X, single, member = grouped_values(X, membership, names, self.X)
        if baseline is None and self.baseline is not None and single.all():
            baseline = self.baseline[..., member]
        owner = membership.argmax(axis=0)
        g, d = len(names), self.n_features
        new_pairs = {pair: g + p for p, pair in enumerate(
            (a, b) for a in range(g) for b in range(a + 1, g))}
        T = np.zeros((g + len(new_pairs), self.mean.shape[1]))
        T[owner, np.arange(d)] = 1.0
        inside = 0.0 if self.index == "SII" else 1.0
        for p, (i, j) in enumerate(self.pairs):
            a, b = sorted((owner[i], owner[j]))
            T[a if a == b else new_pairs[a, b], d + p] = inside if a == b else 1.0
        cov = None if self.cov is None else np.einsum("ia,pab,jb->pij", T, self.cov, T)
        return replace(self, mean=self.mean @ T.T, cov=cov, X=X, baseline=baseline,
                       feature_names=list(names), point_cov=self._mapped_points(T))

    def _mapped_points(self, matrix: np.ndarray):
        """``point_cov`` of the values ``matrix @ values`` (None without it)."""
        return None if self.point_cov is None else self.point_cov.grouped(matrix)

    def matrix(self, what: str = "mean") -> np.ndarray:
        """Pairwise values as symmetric (n_points, d, d) matrices with a zero diagonal.

        Parameters
        ----------
        what : {"mean", "std"}

        Raises
        ------
        ValueError
            ``what`` is not "mean" or "std".
        """
        if what not in ("mean", "std"):
            raise ValueError(f"what must be 'mean' or 'std', got {what!r}.")
        values = (self.mean if what == "mean" else self.std)[:, self.n_features:]
        out = np.zeros((self.n_points, self.n_features, self.n_features))
        if self.pairs:
            rows, cols = np.array(self.pairs).T
            out[:, rows, cols] = values
            out[:, cols, rows] = values
        return out

    def efficiency_gap(self) -> dict[str, float]:
        """Largest violations of the index's efficiency identity over the points.

        Returns
        -------
        dict with ``mean``: max |e^T mean - (prediction - baseline_prediction)| and
        ``variance``: max |e^T cov e - difference_variance| (0.0 when not defined).
        """
        e = self.efficiency_weights
        gaps = {"mean": float(np.max(np.abs(
            self.mean @ e - (self.prediction - self.baseline_prediction)), initial=0.0)),
            "variance": 0.0}
        if self.cov is not None and self.difference_variance is not None:
            total = np.einsum("i,pij,j->p", e, self.cov, e)
            gaps["variance"] = float(np.max(np.abs(total - self.difference_variance),
                                            initial=0.0))
        return gaps

    def to_frame(self, level: float = 0.95) -> pd.DataFrame:
        """Tidy table, one row per (point, value).

        Columns: ``point``, ``order`` (1 or 2), ``feature_i``, ``feature_j`` ("" for order-1
        values), ``value`` (posterior mean), ``std``, ``lower``, ``upper`` (central ``level``
        credible interval).
        """
        lower, upper = self.interval(level)
        d, n_terms = self.n_features, self.mean.shape[1]
        names = np.asarray(self.feature_names, dtype=object)
        first = np.concatenate([np.arange(d), [i for i, _ in self.pairs]]).astype(int)
        second = [""] * d + [names[j] for _, j in self.pairs]
        return pd.DataFrame({
            "point": np.repeat(np.arange(self.n_points), n_terms),
            "order": np.tile(np.r_[np.ones(d, int), np.full(n_terms - d, 2)], self.n_points),
            "feature_i": np.tile(names[first], self.n_points),
            "feature_j": np.tile(np.asarray(second, dtype=object), self.n_points),
            "value": self.mean.ravel(),
            "std": self.std.ravel(),
            "lower": lower.ravel(),
            "upper": upper.ravel(),
        })

    def to_shapiq(self, point: int = 0):
        """The values at one point as shapiq's ``InteractionValues`` (posterior means).

        Parameters
        ----------
        point : int, default 0
            Row of ``X``.

        Returns
        -------
        shapiq.InteractionValues
            ``index`` this index, ``max_order`` 2, ``min_order`` 0, the empty coalition
            holding the base value ``v({})`` (as shapiq's ``ExactComputer`` reports for
            k-SII and STII; for SII shapiq's empty value is an interaction index of the empty
            set, not the base value), ``estimated=False``.

        Raises
        ------
        ImportError
            shapiq is not installed.
        IndexError
            ``point`` out of range.
        """
        shapiq = require("shapiq", "shapiq", "ShapleyInteractions.to_shapiq")
        if not -self.n_points <= point < self.n_points:
            raise IndexError(f"point must be in [0, {self.n_points}), got {point}.")
        lookup = {(): 0}
        lookup.update({(i,): 1 + i for i in range(self.n_features)})
        lookup.update({pair: 1 + self.n_features + p for p, pair in enumerate(self.pairs)})
        values = np.concatenate([[self.baseline_prediction], self.mean[point]])
        return shapiq.InteractionValues(
            values, index=self.index, max_order=2, min_order=0, n_players=self.n_features,
            interaction_lookup=lookup, estimated=False,
            baseline_value=float(self.baseline_prediction),
        )

    _save_kind = "shapley-interactions"

    def _save_to(self, path: Path) -> Path:
        from gpexplain.persistence import _header, _write

        if path.suffix == ".npz":
            raise ValueError(f"ShapleyInteractions are saved to a directory, got the file name "
                             f"{str(path)!r}; pass a directory path.")
        path.mkdir(parents=True, exist_ok=True)
        arrays = {name: np.asarray(getattr(self, name)) for name in _SAVED
                  if getattr(self, name) is not None}
        header = _header(self._save_kind, self)
        header.update(feature_names=list(self.feature_names), index=self.index,
                      method=self.method, baseline_prediction=self.baseline_prediction)
        _write(path, header, arrays)
        return path

    @classmethod
    def _load_from(cls, path: Path, header: dict, arrays: dict[str, np.ndarray]):
        return cls(
            feature_names=list(header["feature_names"]), index=header["index"],
            method=header["method"], baseline_prediction=header["baseline_prediction"],
            **{name: arrays.get(name) for name in _SAVED},
        )

    def __repr__(self) -> str:
        cov = "full covariance" if self.cov is not None else "no covariance"
        return (f"ShapleyInteractions({self.method}: {self.n_points} points x "
                f"{self.n_features} features, {len(self.pairs)} pairs, {cov})")
