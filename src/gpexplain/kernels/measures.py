"""Product probability measures over the inputs, and the integrals of the SE kernel against them.

An orthogonal additive kernel (Durrande et al. 2011; Lu, Boukouvalas and Hensman 2022) makes
every interaction component integrate to zero under a *product* measure ``p = prod_i p_i`` over
the features. A measure here supplies, per feature i and for the unit-variance squared-exponential
base kernel ``k_i(a, b) = exp(-(a - b)^2 / (2 l_i^2))``:

* the normalised kernel mean embedding ``h_i(a) = m_i(a) / sqrt(M_i)`` with
  ``m_i(a) = int k_i(a, s) dp_i(s)`` and ``M_i = int int k_i(s, s') dp_i(s) dp_i(s')``, so that the
  constrained kernel of eq. 4 (docs/errata.md: per-feature measure) is ``k_i(a, b) - h_i(a)
  h_i(b)``;
* the second moments ``int kt_i(s, a) kt_i(s, b) dp_i(s)`` of the constrained kernel, which give
  the variance of each ANOVA component of a posterior mean (Theorem 1 of the additive-Shapley
  paper).

``Uniform`` (a box) serves the product kernels of Sobol indices and product-measure Shapley
values only (``gpexplain.kernels.product``), through a Gauss-Legendre ``rule`` per feature;
``Empirical`` offers its atoms the same way.

``se_embedding`` accepts NumPy arrays or torch tensors (the torch path is differentiable in the
lengthscales, for marginal-likelihood fitting); ``constrained_se_second_moment`` is NumPy only.
"""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd

from gpexplain._quad import to_quad
from gpexplain._registry import Registry
from gpexplain._validation import as_feature_matrix, order_by_name

__all__ = ["MEASURES", "Gaussian", "Empirical", "Uniform", "check_measure"]

# Every input measure, registered under the name the estimators' ``measure=`` options use.
MEASURES = Registry("measure")


# Above this ratio of squared lengthscale to variance the closed-form second moment cancels
# (see ``Gaussian.constrained_se_second_moment``); Gauss-Hermite with this many nodes is exact
# to round-off there.
_WIDE_KERNEL = 100.0
_HERMITE_NODES = 40

# Composite Gauss-Legendre for ``Uniform``: 16 nodes per panel and panels at most two
# resolution lengths wide integrate a squared exponential of std l / sqrt(2) (a product of two
# SE sections of lengthscale l) to 2e-15 relative wherever its centre lies (measured against
# erf; 8 nodes leave 1e-12). More than this many nodes per feature would make the (m, m)
# Gram matrices of the posterior-std integrals too large.
_LEGENDRE_NODES = 16
_LEGENDRE_RULE = np.polynomial.legendre.leggauss(_LEGENDRE_NODES)
_PANEL_WIDTH = 2.0
_MAX_UNIFORM_NODES = 4096


def _backend(x):
    """Array namespace of ``x`` (torch for tensors, else NumPy) and a constant converter."""
    if type(x).__module__.startswith("torch"):
        import torch

        return torch, lambda value: torch.as_tensor(value, dtype=x.dtype, device=x.device)
    return np, lambda value: np.asarray(value, dtype=np.float64)


class _PerFeaturePair:
    """A product measure given by two per-feature parameter arrays (``_NAMES``), scalars
    broadcasting to every feature: their validation, ``n_features``, ``resolve`` and repr."""

    _NAMES: tuple[str, str]

    def __init__(self, first, second):
        arrays = []
        # A labelled Series is matched to the model's features by name in ``resolve``.
        self._labels = {}
        for name, value in zip(self._NAMES, (first, second), strict=True):
            if isinstance(value, pd.Series) and not isinstance(value.index, pd.RangeIndex):
                self._labels[name] = value.index
            value = np.asarray(value, dtype=np.float64)
            if value.ndim > 1:
                raise ValueError(
                    f"{name} must be a scalar or a 1-D array, got shape {value.shape}."
                )
            if not np.all(np.isfinite(value)):
                raise ValueError(f"{name} must be finite, got {value}.")
            arrays.append(value)
        first, second = arrays
        if first.ndim == 1 and second.ndim == 1 and first.shape != second.shape:
            raise ValueError(
                f"{self._NAMES[0]} has {first.shape[0]} entries but {self._NAMES[1]} has "
                f"{second.shape[0]}; give one per feature (or scalars)."
            )
        for name, value in zip(self._NAMES, arrays, strict=True):
            setattr(self, name, value)

    def _pair(self) -> tuple[np.ndarray, np.ndarray]:
        return tuple(getattr(self, name) for name in self._NAMES)

    @property
    def n_features(self) -> int | None:
        """Number of features fixed by the parameters (None when both are scalars)."""
        for value in self._pair():
            if value.ndim == 1:
                return value.shape[0]
        return None

    def __repr__(self) -> str:
        first, second = self._pair()
        return (f"{type(self).__name__}({self._NAMES[0]}={first.tolist()!r}, "
                f"{self._NAMES[1]}={second.tolist()!r})")

    def resolve(self, n_features: int, feature_names=None):
        """The same measure with per-feature arrays of length ``n_features``, in the order of
        ``feature_names``.

        A parameter given as a pandas Series with labels is matched to ``feature_names`` by
        name (``gpexplain._validation.order_by_name``), never by position; plain arrays and
        unlabelled Series are positional.

        Raises
        ------
        ValueError
            The measure was given for a different number of features; a labelled parameter
            whose labels are not exactly ``feature_names``.
        """
        if self.n_features not in (None, n_features):
            raise ValueError(
                f"the {type(self).__name__} measure has {self.n_features} features but the "
                f"inputs have {n_features}."
            )
        values = []
        for name, value in zip(self._NAMES, self._pair(), strict=True):
            if name in self._labels and feature_names is not None:
                labelled = pd.Series(value, index=self._labels[name])
                value = order_by_name(labelled, feature_names,
                                      f"{type(self).__name__} {name}").to_numpy()
            values.append(np.broadcast_to(value, (n_features,)).copy())
        return type(self)(*values)


@MEASURES.register("gaussian")
class Gaussian(_PerFeaturePair):
    """Independent Gaussian features: ``p_i = N(mean_i, std_i^2)``.

    With this measure the constrained SE kernel has the closed form (docs/errata.md, with ``a``,
    ``b``
    centred at ``mean_i``, ``L = l^2`` and ``D = std_i^2``)::

        kt(a, b) = exp(-(a - b)^2 / (2 L))
                   - l sqrt(L + 2 D) / (L + D) exp(-(a^2 + b^2) / (2 (L + D)))

    Parameters
    ----------
    mean : float or array-like of shape (n_features,), default 0.0
        Centre of each feature's measure, in the units of that feature.
    std : float or array-like of shape (n_features,), default 1.0
        Positive standard deviation of each feature's measure. Scalars broadcast to every
        feature.

    Raises
    ------
    ValueError
        Non-finite ``mean``, non-positive or non-finite ``std``, arrays that are not 1-D, or
        ``mean`` and ``std`` of different lengths.
    """

    _NAMES = ("mean", "std")

    def __init__(self, mean=0.0, std=1.0):
        super().__init__(mean, std)
        if np.any(self.std <= 0):
            raise ValueError(f"std must be positive for every feature, got {self.std}.")

    def subset(self, features) -> Gaussian:
        """The marginal measure of the listed features (per-feature arrays required)."""
        return Gaussian(self.mean[features], self.std[features])

    def se_embedding(self, X, lengthscale):
        """``h_i(x_i) = m_i(x_i) / sqrt(M_i)`` for each entry of X, shape of X.

        Closed form: ``h(a) = (L (L + 2 D))^{1/4} / sqrt(L + D) exp(-(a - mean)^2 / (2 (L + D)))``;
        an infinite lengthscale gives ``h = 1`` (the base kernel is then the constant 1 and the
        constrained kernel is identically zero).

        Parameters
        ----------
        X : ndarray or torch.Tensor of shape (..., n_features)
        lengthscale : ndarray or torch.Tensor of shape (n_features,)
        """
        xp, const = _backend(X)
        L = lengthscale**2
        D = const(self.std**2)
        ratio = D / (L + D)  # -> 0 for an infinite lengthscale, where the kernel is constant
        amplitude = (1.0 - ratio**2) ** 0.25  # = (L (L + 2D))^{1/4} / sqrt(L + D)
        centred = X - const(self.mean)
        return amplitude * xp.exp(-0.5 * centred**2 / (L + D))

    def constrained_se_second_moment(
        self, X1: np.ndarray, X2: np.ndarray, lengthscale: np.ndarray
    ) -> np.ndarray:
        """``E_{s ~ p_i}[kt_i(s, a) kt_i(s, b)]`` for all pairs of rows, shape (n1, n2, n_features).

        Expanding ``kt = k - h h`` gives four Gaussian integrals, each of the form
        ``I(a, A, b, B) = E_{s ~ N(0, D)} exp(-(s - a)^2 / (2A) - (s - b)^2 / (2B))`` (centred
        inputs), evaluated in closed form by completing the square::

            E[kt kt] = I(a, L, b, L) - h(b) c I(a, L, 0, L+D) - h(a) c I(b, L, 0, L+D)
                       + h(a) h(b) c^2 I(0, L+D, 0, L+D),     c = h(a) / exp(-a^2 / (2 (L+D)))

        Features with an infinite lengthscale contribute exactly 0.

        The four terms are O(1) while their sum is O((D / L)^2): for lengthscales much longer
        than the feature's spread (``L > 100 D``) the expansion would lose about
        ``eps (L / D)^2`` relative (23% at lengthscale / std = 1000). There ``kt`` is evaluated
        without cancellation (``_smooth_constrained_kernel``) and the expectation by
        Gauss-Hermite quadrature, which is exact to round-off because the integrand varies on
        the scale of the lengthscale, far wider than the measure.
        """
        n_features = X1.shape[1]
        result = np.zeros((X1.shape[0], X2.shape[0], n_features))
        finite = np.isfinite(lengthscale)
        wide = finite & (lengthscale**2 > _WIDE_KERNEL * self.std**2)
        if wide.any():
            result[:, :, wide] = self._wide_second_moment(X1, X2, lengthscale, wide)
        finite = np.flatnonzero(finite & ~wide)
        if finite.size == 0:
            return result
        L = lengthscale[finite] ** 2
        D = self.std[finite] ** 2
        a = (X1[:, finite] - self.mean[finite])[:, None, :]
        b = (X2[:, finite] - self.mean[finite])[None, :, :]
        c = (1.0 - (D / (L + D)) ** 2) ** 0.25
        h_a = c * np.exp(-0.5 * a**2 / (L + D))
        h_b = c * np.exp(-0.5 * b**2 / (L + D))

        def integral(u, A, v, B):
            # exp(-(s-u)^2/2A - (s-v)^2/2B) = exp(-(u-v)^2 / 2(A+B)) exp(-(s-w)^2 / 2C)
            C = A * B / (A + B)
            w = (u * B + v * A) / (A + B)
            return (
                np.exp(-0.5 * (u - v) ** 2 / (A + B))
                * np.sqrt(C / (C + D))
                * np.exp(-0.5 * w**2 / (C + D))
            )

        result[:, :, finite] = (
            integral(a, L, b, L)
            - h_b * c * integral(a, L, 0.0, L + D)
            - h_a * c * integral(b, L, 0.0, L + D)
            + h_a * h_b * c**2 * integral(0.0, L + D, 0.0, L + D)
        )
        return result

    def _smooth_constrained_kernel(self, S, X, lengthscale, features) -> np.ndarray:
        """``kt_i(s, x)`` for nodes S (m, d_sub) and rows X (n, d_sub): shape (n, m, d_sub).

        ``kt = h(s) h(x) expm1(q)`` with ``q = -(s - x)^2 / (2L) + (s^2 + x^2) / (2(L + D))
        - log c^2`` (centred inputs, ``c`` the amplitude of h): every term of q is small when
        L >> D, so q keeps its relative accuracy and ``expm1`` the difference ``k - h h``.
        """
        L = lengthscale[features] ** 2
        D = self.std[features] ** 2
        s = (S - self.mean[features])[None, :, :]
        x = (X[:, features] - self.mean[features])[:, None, :]
        log_c2 = 0.5 * np.log1p(-((D / (L + D)) ** 2))
        q = -0.5 * (s - x) ** 2 / L + 0.5 * (s**2 + x**2) / (L + D) - log_c2
        h_s_h_x = np.exp(log_c2 - 0.5 * (s**2 + x**2) / (L + D))
        return h_s_h_x * np.expm1(q)

    def _wide_second_moment(self, X1, X2, lengthscale, features) -> np.ndarray:
        """``E_s[kt(s, a) kt(s, b)]`` by Gauss-Hermite over ``s ~ N(mean, std^2)``."""
        nodes, weights = np.polynomial.hermite_e.hermegauss(_HERMITE_NODES)
        weights = weights / np.sqrt(2.0 * np.pi)
        S = self.mean[features] + nodes[:, None] * self.std[features]
        left = self._smooth_constrained_kernel(S, X1, lengthscale, features)
        right = self._smooth_constrained_kernel(S, X2, lengthscale, features)
        return np.einsum("m,amd,bmd->abd", weights, left, right)


@MEASURES.register("empirical")
class Empirical:
    """Empirical product measure: feature i is uniform over the column ``X[:, i]``.

    Every integral is a finite average over the rows (with their multiplicities), taken column by
    column, so the measure is the product of the empirical marginals, not the joint empirical
    distribution: ``m_i(a) = mean_s k_i(a, X[s, i])`` and
    ``M_i = mean_{s, s'} k_i(X[s, i], X[s', i])``.

    Parameters
    ----------
    X : array-like of shape (n_atoms, n_features)
        Sample whose columns define the marginals, usually the training inputs (NumPy, pandas
        or torch).

    Raises
    ------
    ValueError, TypeError
        From the input checks (non-numeric, non-finite, not 2-D; the entry is named).
    """

    def __init__(self, X):
        # A DataFrame's column names are matched to the model's features in ``resolve``.
        self._columns = (
            X.columns if isinstance(X, pd.DataFrame)
            and not isinstance(X.columns, pd.RangeIndex) else None
        )
        self.points, _ = as_feature_matrix(X, "X")

    @property
    def n_features(self) -> int:
        return self.points.shape[1]

    def __repr__(self) -> str:
        return f"Empirical(n_atoms={self.points.shape[0]}, n_features={self.n_features})"

    def resolve(self, n_features: int, feature_names=None) -> Empirical:
        """Self after checking the number of features, or, for a DataFrame with column
        names and given ``feature_names``, the measure with its columns matched to them by
        name (``gpexplain._validation.order_by_name``), never by position.

        Raises
        ------
        ValueError
            A different number of features; column names that are not exactly
            ``feature_names``.
        """
        if n_features != self.n_features:
            raise ValueError(
                f"the empirical measure has {self.n_features} features but the inputs have "
                f"{n_features}."
            )
        if self._columns is None or feature_names is None:
            return self
        table = pd.DataFrame(self.points, columns=self._columns)
        return Empirical(order_by_name(table, feature_names, "Empirical X").to_numpy())

    def subset(self, features) -> Empirical:
        """The marginal measure of the listed features."""
        return Empirical(self.points[:, features])

    def _kernel_to_atoms(self, X, lengthscale):
        """``k_i(x_i, s_i)`` for every atom s: shape (..., n_atoms, n_features)."""
        xp, const = _backend(X)
        atoms = const(self.points)
        return xp.exp(-0.5 * (X[..., None, :] - atoms) ** 2 / lengthscale**2)

    def se_embedding(self, X, lengthscale):
        """``h_i(x_i) = m_i(x_i) / sqrt(M_i)`` by averages over the atoms, shape of X.

        Parameters
        ----------
        X : ndarray or torch.Tensor of shape (..., n_features)
        lengthscale : ndarray or torch.Tensor of shape (n_features,)
        """
        _, const = _backend(X)
        kernel_mean = self._kernel_to_atoms(X, lengthscale).mean(-2)
        double_mean = self._kernel_to_atoms(const(self.points), lengthscale).mean((0, 1))
        return kernel_mean / double_mean**0.5

    def constrained_se_second_moment(
        self, X1: np.ndarray, X2: np.ndarray, lengthscale: np.ndarray
    ) -> np.ndarray:
        """``mean_s kt_i(s, a) kt_i(s, b)`` over the atoms s, shape (n1, n2, n_features)."""
        h_atoms = self.se_embedding(self.points, lengthscale)  # (n_atoms, d)

        def constrained_to_atoms(X):  # kt_i(s, x) as (n_atoms, n, d)
            k = np.swapaxes(self._kernel_to_atoms(X, lengthscale), 0, 1)
            return k - h_atoms[:, None, :] * self.se_embedding(X, lengthscale)[None, :, :]

        left, right = constrained_to_atoms(X1), constrained_to_atoms(X2)
        return np.einsum("sad,sbd->abd", left, right) / self.points.shape[0]


    def rule(self, feature: int) -> tuple[np.ndarray, np.ndarray]:
        """The atoms of feature ``feature`` and their weights (each ``1 / n_atoms``), (n_atoms,)
        each."""
        atoms = self.points[:, feature]
        return _in_precision(self, atoms, np.full(atoms.shape[0], 1.0 / atoms.shape[0]))


@MEASURES.register("uniform")
class Uniform(_PerFeaturePair):
    """Independent uniform features: ``p_i = U(low_i, high_i)``, e.g. a BoTorch / Ax box.

    Products of one-dimensional kernels are integrated against it by composite Gauss-Legendre
    quadrature (``rule``): 16 nodes per panel, panels at most twice the feature's resolution
    length wide (``ProductStructure``: the lengthscale of a squared-exponential factor,
    ``l min(1, sqrt(alpha / 2))`` for a rational-quadratic one, whose poles lie at ``+-i l
    sqrt(2 alpha)``). The integrands are analytic, so every integral (mean embedding, second
    and centred moments, the three- and four-kernel integrals of the posterior stds) is exact
    to about 1e-15 relative to the kernel's scale, and the centred ones (which are
    O((width / l)^2) for lengthscales far longer than the box) are summed from differences to
    a central atom (``ProductStructure.centred_sections``), so they keep that relative accuracy
    too (measured against mpmath from l = 1e-2 to 1e3 box widths). Matern factors have a kink
    at every point, which would limit the rule to a few digits: they are refused.

    Parameters
    ----------
    low, high : float or array-like of shape (n_features,)
        The box, in the units of each feature; scalars broadcast to every feature.

    Raises
    ------
    ValueError
        Non-finite bounds, arrays that are not 1-D, ``low`` and ``high`` of different lengths,
        or ``low >= high`` for some feature (named).
    """

    _NAMES = ("low", "high")

    def __init__(self, low=0.0, high=1.0):
        super().__init__(low, high)
        lows, highs = (np.atleast_1d(bound) for bound in np.broadcast_arrays(self.low, self.high))
        empty = np.flatnonzero(lows >= highs)
        if empty.size:
            j = int(empty[0])
            raise ValueError(
                f"low must be below high for every feature; feature {j} has low = {lows[j]} "
                f">= high = {highs[j]}."
            )

    def rule(self, feature: int, resolution: float) -> tuple[np.ndarray, np.ndarray]:
        """Composite Gauss-Legendre nodes in ``[low, high]`` of one feature and weights summing
        to 1 (the density ``1 / (high - low)`` included), (n_nodes,) each.

        Parameters
        ----------
        feature : int
        resolution : float
            The length over which the integrands vary (feature units; ``inf`` for a feature the
            kernel ignores): panels are at most ``2 * resolution`` wide.

        Raises
        ------
        ValueError
            The box is more than 512 resolution lengths wide (over 4096 nodes): the kernel is
            then close to white noise on this box.
        """
        low, high = float(self.low[feature]), float(self.high[feature])
        panels = max(1, int(np.ceil((high - low) / (_PANEL_WIDTH * resolution))))
        if panels * _LEGENDRE_NODES > _MAX_UNIFORM_NODES:
            raise ValueError(
                f"feature {feature}: the Uniform box [{low}, {high}] is "
                f"{(high - low) / resolution:.3g} kernel lengthscales wide; at most "
                f"{_MAX_UNIFORM_NODES // _LEGENDRE_NODES * _PANEL_WIDTH:.0f} are integrated "
                "(the kernel is then close to white noise on the box)."
            )
        x, w = _LEGENDRE_RULE
        edges = np.linspace(low, high, panels + 1)
        width = np.diff(edges)[:, None]
        nodes = edges[:-1, None] + 0.5 * width * (x + 1.0)
        weights = 0.5 * width * w / (high - low)
        return _in_precision(self, nodes.ravel(), weights.ravel())


def in_quad_precision(measure):
    """A copy of ``measure`` whose ``rule`` gives binary128 atoms and weights (Empirical,
    Uniform), for the quadruple-precision Sobol indices (``gpexplain._quad``); a Gaussian
    measure is returned as it is (its closed forms take their precision from the points)."""
    if not isinstance(measure, Empirical | Uniform):
        return measure
    extended = copy.copy(measure)
    extended._quad = True
    return extended


def _in_precision(measure, atoms, weights):
    """A rule in the measure's arithmetic: as given, or in binary128 with the weights
    renormalised to sum to 1 to that precision (float64's ``1 / n`` misses it by ~1e-16, a
    mass every centred section would carry into the cancelling sums)."""
    if not getattr(measure, "_quad", False):
        return atoms, weights
    weights = to_quad(weights)
    return to_quad(atoms), weights / np.sum(weights)


def check_measure(measure, accepted=None):
    """Return ``measure`` if it is an instance of a registered measure (of ``accepted`` ones).

    Parameters
    ----------
    measure : object
    accepted : tuple of str, optional
        Names in ``MEASURES`` that the caller supports; all registered measures by default.

    Raises
    ------
    TypeError
        ``measure`` is not an instance of an accepted measure; the message names them.
    """
    names = MEASURES.names() if accepted is None else accepted
    classes = tuple(MEASURES.get(name) for name in names)
    if not isinstance(measure, classes):
        listed = ", ".join(f"gx.measures.{cls.__name__}" for cls in classes)
        raise TypeError(f"measure must be one of {listed}; got {type(measure).__name__}.")
    return measure
