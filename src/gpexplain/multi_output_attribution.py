"""``MultiOutputAttribution``: one explanation of several outputs at the same points (issue 24).

Holds one ``Attribution`` per output (each complete on its own, with its own prediction and
base value) and, for coregionalised outputs, the joint posterior covariance of all outputs'
values at each point and (``return_cov="points"``) across points; for independent outputs
those covariances are zero off the output-diagonal blocks by construction (``independent``),
not computed.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from gpexplain.attribution import Attribution, GaussianValues, dense_to_save
from gpexplain.point_covariance import MAX_DENSE_ENTRIES, DensePointCovariance

__all__ = ["MultiOutputAttribution", "output_position"]


def output_position(names: list[str], output) -> int:
    """The position of ``output`` (a name among ``names``, or a position itself).

    Raises
    ------
    KeyError
        An unknown name (the outputs are listed).
    """
    if isinstance(output, str):
        if output not in names:
            raise KeyError(f"unknown output {output!r}; the outputs are {names}.")
        return names.index(output)
    return output


class MultiOutputAttribution:
    """Explanations of t outputs at the same n points, with covariance across outputs.

    Parameters
    ----------
    attributions : sequence of Attribution (or ShapleyInteractions)
        One per output, over the same points and features (or interaction terms).
    output_names : sequence of str
    joint_cov : ndarray (n_points, t, D, t, D) or None
        ``Cov[value_(i,a), value_(j,b)]`` at each point; None for independent outputs (then
        the off-diagonal output blocks are zero and the diagonal blocks are the
        attributions' own ``cov``) or when no covariance was computed.
    independent : bool
        The outputs are independent a posteriori.
    joint_point_cov : BlockMatrix of shape (n_points, t D, n_points, t D), optional
        The covariance across points, outputs and values (``return_cov="points"`` of a
        coregionalised posterior): entry ``[p, i D + a, q, j D + b]`` is
        ``Cov[value_(i,a)(x_p), value_(j,b)(x_q)]``, evaluated block by block of points
        (``blocks()``, ``dense()``, ``sample``; ``gpexplain.explain._points``). None for
        independent outputs (the blocks between outputs are zero by the model, each output's
        own is its ``Attribution.point_cov``) or when it was not asked for.

    Attributes
    ----------
    mean : ndarray (n_points, t, D)
    cov : ndarray (n_points, t, D, t, D) or None

    Raises
    ------
    ValueError
        Mismatched shapes or names.
    """

    #: saved as the tree of its attributes by ``gx.save`` (``gpexplain.persistence``).
    _save_kind = "model"

    def __init__(self, attributions, output_names, joint_cov=None, independent=False,
                 joint_point_cov=None):
        attributions = list(attributions)
        names = [str(name) for name in output_names]
        if not attributions or len(attributions) != len(names) or len(set(names)) != len(names):
            raise ValueError(
                f"need one Attribution per distinct output name; got {len(attributions)} "
                f"attributions and names {names!r}."
            )
        shape = attributions[0].mean.shape
        for name, attribution in zip(names, attributions, strict=True):
            if not isinstance(attribution, Attribution | GaussianValues):
                raise TypeError(f"output {name!r}: expected an Attribution, got "
                                f"{type(attribution).__name__}.")
            if attribution.mean.shape != shape:
                raise ValueError(f"output {name!r} has shape {attribution.mean.shape}, "
                                 f"the first output {shape}.")
        if joint_cov is not None:
            expected = (shape[0], len(names), shape[1], len(names), shape[1])
            if joint_cov.shape != expected:
                raise ValueError(f"joint_cov must have shape {expected}, got {joint_cov.shape}.")
        if joint_point_cov is not None:
            size = len(names) * shape[1]
            expected = (shape[0], size, shape[0], size)
            if tuple(joint_point_cov.shape) != expected:
                raise ValueError(f"joint_point_cov must have shape {expected}, got "
                                 f"{tuple(joint_point_cov.shape)}.")
        self.attributions = attributions
        self.output_names = names
        self.joint_cov = joint_cov
        self.independent = bool(independent)
        self.joint_point_cov = joint_point_cov

    def _saved_state(self) -> dict:
        """What ``gx.save`` stores: the attributes, with ``joint_point_cov`` dense or None
        (each output's ``point_cov`` likewise, by ``Attribution._saved_state``)."""
        dense = dense_to_save(self.joint_point_cov, "joint_point_cov")
        return {**vars(self),
                "joint_point_cov": None if dense is None else DensePointCovariance(dense)}

    def __repr__(self) -> str:
        n, d = self.attributions[0].mean.shape
        return (f"MultiOutputAttribution(n_points={n}, outputs={self.output_names}, "
                f"n_features={d}, independent={self.independent})")

    def __getitem__(self, output) -> Attribution:
        """The ``Attribution`` of one output, by name or position."""
        return self.attributions[output_position(self.output_names, output)]

    @property
    def feature_names(self) -> list[str]:
        return list(self.attributions[0].feature_names)

    @property
    def method(self) -> str:
        return self.attributions[0].method

    @property
    def mean(self) -> np.ndarray:
        """Posterior means, (n_points, n_outputs, n_features)."""
        return np.stack([a.mean for a in self.attributions], axis=1)

    @property
    def prediction(self) -> np.ndarray:
        """Latent posterior mean of each output, (n_points, n_outputs)."""
        return np.stack([a.prediction for a in self.attributions], axis=1)

    @property
    def cov(self) -> np.ndarray | None:
        """Joint covariance (n_points, n_outputs, n_features, n_outputs, n_features).

        For independent outputs the blocks between different outputs are zero (the model
        says so; they are filled, not computed). None without covariances.
        """
        if self.joint_cov is not None:
            return self.joint_cov
        if any(a.cov is None for a in self.attributions):
            return None
        n, d = self.attributions[0].mean.shape
        t = len(self.attributions)
        cov = np.zeros((n, t, d, t, d))
        for i, attribution in enumerate(self.attributions):
            cov[:, i, :, i, :] = attribution.cov
        return cov

    def output_cov(self, i, j) -> np.ndarray | None:
        """``Cov[values of output i, values of output j]`` at each point, (n_points, D, D)."""
        cov = self.cov
        if cov is None:
            return None
        names = self.output_names
        i = names.index(i) if isinstance(i, str) else i
        j = names.index(j) if isinstance(j, str) else j
        return cov[:, i, :, j, :]

    def point_cov_dense(self) -> np.ndarray | None:
        """The covariance across points, outputs and values as one array, (n_points,
        n_outputs, D, n_points, n_outputs, D): entry ``[p, i, a, q, j, b]`` is
        ``Cov[value_(i,a)(x_p), value_(j,b)(x_q)]``.

        From ``joint_point_cov`` (coregionalised outputs); for independent outputs each
        output's ``point_cov`` on the diagonal output blocks and zeros between outputs (the
        model says so; filled, not computed). None without covariances across points.

        Raises
        ------
        MemoryError
            More than ``MAX_DENSE_ENTRIES`` values (``(n_points t D)^2``); use
            ``joint_point_cov.blocks()`` or each output's ``point_cov``.
        """
        n, d = self.attributions[0].mean.shape
        t = len(self.attributions)
        if self.joint_point_cov is not None:
            return self.joint_point_cov.dense().reshape(n, t, d, n, t, d)
        parts = [attribution.point_cov for attribution in self.attributions]
        if not self.independent or any(part is None for part in parts):
            return None
        if (n * t * d) ** 2 > MAX_DENSE_ENTRIES:
            raise MemoryError(
                f"the covariance across {n} points, {t} outputs and {d} values has "
                f"{(n * t * d) ** 2:.3g} entries (limit {MAX_DENSE_ENTRIES:.3g}); use each "
                "output's point_cov.blocks().")
        dense = np.zeros((n, t, d, n, t, d))
        for i, part in enumerate(parts):
            dense[:, i, :, :, i, :] = part.dense()
        return dense

    def to_shap(self, level: float = 0.95):
        """All outputs as one ``shap.Explanation`` in shap's multi-output layout.

        Returns
        -------
        shap.Explanation
            ``values`` (n_points, n_features, n_outputs), ``base_values`` (n_points,
            n_outputs), ``data`` (n_points, n_features), ``feature_names``,
            ``output_names``, and ``error_std``, ``lower_bounds``, ``upper_bounds`` (n_points,
            n_features, n_outputs); ``explanation[..., k]`` is output k's
            ``Attribution.to_shap()``.

        Raises
        ------
        ImportError
            shap is not installed. ``ValueError``: ``level`` not in (0, 1).
        """
        parts = [attribution.to_shap(level) for attribution in self.attributions]
        stacked = {
            name: np.stack([getattr(part, name) for part in parts], axis=-1)
            for name in ("values", "base_values", "lower_bounds", "upper_bounds", "error_std")
        }
        return type(parts[0])(
            data=parts[0].data, feature_names=self.feature_names,
            output_names=list(self.output_names), **stacked,
        )

    def to_frame(self, level: float = 0.95) -> pd.DataFrame:
        """Tidy table: ``Attribution.to_frame`` of each output with an ``output`` column first."""
        frames = []
        for name, attribution in zip(self.output_names, self.attributions, strict=True):
            frame = attribution.to_frame(level)
            frame.insert(0, "output", name)
            frames.append(frame)
        return pd.concat(frames, ignore_index=True)
