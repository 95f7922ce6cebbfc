"""Orthogonal additive kernel (OAK) and its exact Shapley functionals.

Duvenaud, Nickisch and Rasmussen (2011) sum products of one-dimensional base kernels over all
feature subsets, weighted by one variance per interaction order; Lu, Boukouvalas and Hensman
(2022) constrain each base kernel to integrate to zero under a product measure ``p = prod p_i``,
so that the GP splits into mutually orthogonal functional-ANOVA components::

    k(x, x') = sum_{q=0}^{Q} sigma_q^2 e_q(z_1, ..., z_d),   z_i = kt_i(x_i, x'_i)
    kt_i(a, b) = k_i(a, b) - h_i(a) h_i(b)          (eq. 4 of the additive-Shapley paper,
    per-feature measure)

with ``k_i`` the unit-variance squared exponential, ``h_i`` its normalised mean embedding under
``p_i`` (``gpexplain.kernels.measures``) and ``e_q`` the elementary symmetric polynomial of order
q (eq. 2 with strict indices, docs/errata.md). Then ``f = sum_S f_S`` with ``f_S ~ GP(0, sigma_|S|^2
prod_{i in S} kt_i)`` independent, ``E_p[f_S | x_T] = 0`` unless ``S`` is inside ``T``.

Shapley functionals (the additive-Shapley paper, Lemma 1 / eq. 9, docs/errata.md). The Shapley
value of feature i in
the marginal game ``v(S) = E_{x_-S ~ prod p_j} f(x_S, x_-S)`` is ``sum_{S ni i} f_S(x) / |S|``,
a linear functional of f with cross term

    A_i(x, z) = z_i sum_{r=0}^{Q-1} sigma_{r+1}^2 / (r + 1) e_r(z_{-i}),

computed for all i at once from prefix elementary symmetric polynomials and a weighted suffix
recursion (``leave_one_out_weighted_sums``) in O(d Q) operations per pair (x, z): never 2^d.
Elementary symmetric polynomials are always accumulated with the recursion
``e_k <- e_k + z e_{k-1}`` (sums of products, stable), never by Newton-Girard power sums, which
cancel catastrophically for many features.
"""

from __future__ import annotations

import gpytorch
import numpy as np
import torch

from gpexplain._torch import as_tensor
from gpexplain.kernels._parameters import as_lengthscale
from gpexplain.kernels.base import Kernel
from gpexplain.kernels.measures import _backend, check_measure

__all__ = [
    "OrthogonalAdditive",
    "constrained_components",
    "elementary_symmetric",
    "leave_one_out_weighted_sums",
]

# The measures the constrained kernel has closed forms or finite sums for, by their names in
# ``gpexplain.kernels.measures.MEASURES`` (a uniform box would need its own constrained kernel).
ACCEPTED_MEASURES = ("gaussian", "empirical")


def elementary_symmetric(z, max_order: int) -> list:
    """Elementary symmetric polynomials ``e_0..e_Q`` of the last axis of z.

    ``e_q(z_1, ..., z_d) = sum_{i_1 < ... < i_q} z_{i_1} ... z_{i_q}`` by the recursion
    ``e_k <- e_k + z_i e_{k-1}`` over features, O(d Q). Works for NumPy arrays and torch tensors
    (no in-place updates, so autograd can differentiate it).

    Parameters
    ----------
    z : ndarray or torch.Tensor of shape (..., d)
    max_order : int
        Q, the highest order returned.

    Returns
    -------
    list of Q + 1 arrays of shape (...,)
    """
    first = z[..., 0]
    e = [first * 0 + 1] + [first * 0 for _ in range(max_order)]
    for i in range(z.shape[-1]):
        zi = z[..., i]
        for k in range(min(i + 1, max_order), 0, -1):  # downwards: e_{k-1} is still the old one
            e[k] = e[k] + zi * e[k - 1]
    return e


def constrained_components(x1, x2, lengthscale, measure, diag: bool = False):
    """Constrained base kernels ``kt_i(x1_i, x2_i)``, feature axis last; NumPy or torch.

    ``kt_i(a, b) = exp(-0.5 (a - b)^2 / l_i^2) - h_i(a) h_i(b)`` (eq. 4 of Lu et al. 2022 with
    the per-feature measure), with ``h_i`` the measure's normalised mean embedding. The one
    formula of the kernel's values: ``OrthogonalAdditive`` evaluates it on NumPy arrays, its
    GPyTorch module (``OrthogonalAdditive.torch_kernel``) on tensors, differentiably (twice)
    in inputs and hyperparameters. Distances are explicit differences, never an expanded
    square (which cancels for features far from zero) nor ``torch.cdist`` (no double backward).

    Parameters
    ----------
    x1 : ndarray or tensor (..., n1, d)
    x2 : ndarray or tensor (..., n2, d); (..., n1, d) with ``diag``
    lengthscale : ndarray or tensor (d,), finite
    measure : Gaussian or Empirical, resolved to d features
    diag : bool
        Pair row a of x1 with row a of x2 only.

    Returns
    -------
    ndarray or tensor of shape (..., n1, n2, d), or (..., n1, d) with ``diag``
    """
    xp, _ = _backend(x1)
    h1, h2 = measure.se_embedding(x1, lengthscale), measure.se_embedding(x2, lengthscale)
    if diag:
        difference, correction = x1 - x2, h1 * h2
    else:
        difference = x1[..., :, None, :] - x2[..., None, :, :]
        correction = h1[..., :, None, :] * h2[..., None, :, :]
    return xp.exp(-0.5 * difference**2 / lengthscale**2) - correction


def combine_orders(z, order_variances) -> object:
    """``k = sum_q sigma_q^2 e_q(z_1, ..., z_d)`` over the last axis of z (NumPy or torch)."""
    e = elementary_symmetric(z, len(order_variances) - 1)
    return sum(order_variances[q] * e[q] for q in range(len(order_variances)))


def leave_one_out_weighted_sums(z: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """``out_i = z_i sum_r weights[r] e_r(z_{-i})`` for every i, in O(d R) per batch element.

    ``e_r(z_{-i}) = sum_{a+b=r} e_a(z_1..z_{i-1}) e_b(z_{i+1}..z_d)``. The prefix polynomials are
    accumulated forwards; the weighted suffix ``G_j[a] = sum_b weights[a+b] e_b(z_j..z_d)`` obeys
    ``G_j[a] = G_{j+1}[a] + z_j G_{j+1}[a+1]`` with ``G_{d+1}[a] = weights[a]``, so
    ``out_i = z_i sum_a prefix_i[a] G_{i+1}[a]`` without any convolution. Only sums of products
    are formed (no subtraction, no division), so the result is as stable as the polynomials.

    Parameters
    ----------
    z : ndarray of shape (..., d)
    weights : ndarray of shape (R,)
        Weight of each leave-one-out order r = 0..R-1 (higher orders weigh zero).

    Returns
    -------
    ndarray of shape (..., d)
        A view of a feature-first array; a ``z`` that is itself such a view (as
        ``OrthogonalAdditive.components`` returns) is not copied.
    """
    z = np.asarray(z, dtype=np.float64)
    return np.moveaxis(_leave_one_out_by_feature(np.moveaxis(z, -1, 0), weights), 0, -1)


def _leave_one_out_by_feature(z: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """``leave_one_out_weighted_sums`` with the feature axis first: z and out of shape (d, ...).

    Feature and order axes lead so that every update of the recursions is one contiguous
    vectorised operation over the whole batch (with them last, each would be a strided slice);
    orders that are zero so far (``e_a`` of i features for a > i) are skipped.
    """
    shape = z.shape
    z = np.ascontiguousarray(z).reshape(shape[0], -1)  # (d, batch), free for contiguous z
    d, batch = z.shape
    R = weights.shape[0]
    # prefix[i, a] = e_a(z_1..z_{i-1}), stored for a <= min(i, R - 1) only (the rest is zero).
    prefix = np.empty((d, R, batch))
    prefix[0, 0] = 1.0
    for i in range(1, d):
        top, kept = min(i, R - 1), min(i - 1, R - 1)
        current, previous = prefix[i], prefix[i - 1]
        current[0] = 1.0
        np.multiply(previous[:top], z[i - 1], out=current[1:top + 1])
        current[1:kept + 1] += previous[1:kept + 1]
    G = np.repeat(np.asarray(weights, dtype=np.float64)[:, None], batch, axis=1)
    scratch = np.empty((R, batch))
    out = np.empty((d, batch))
    for j in range(d - 1, -1, -1):
        used = min(j, R - 1) + 1  # prefix orders a = 0..min(j, R - 1)
        np.multiply(prefix[j, :used], G[:used], out=scratch[:used])
        np.add.reduce(scratch[:used], axis=0, out=out[j])
        out[j] *= z[j]
        # The next feature reads G[a] for a <= min(j - 1, R - 1); G[R] is zero (no weight).
        updated = min(j, R - 1)
        np.multiply(G[1:updated + 1], z[j], out=scratch[:updated])
        G[:updated] += scratch[:updated]
    return out.reshape(shape)


class OrthogonalAdditive(Kernel):
    """Orthogonal additive kernel over squared-exponential base kernels.

    ``k(x, x') = sum_{q=0}^{Q} sigma_q^2 e_q(kt_1(x_1, x'_1), ..., kt_d(x_d, x'_d))`` with the
    constrained base kernels ``kt_i(a, b) = exp(-(a - b)^2 / (2 l_i^2)) - h_i(a) h_i(b)`` that
    integrate to zero under the measure (closed form for ``Gaussian``, finite sums for
    ``Empirical``; see ``gpexplain.kernels.measures``).

    Parameters
    ----------
    lengthscale : float or array-like of shape (n_features,)
        Positive lengthscale of each base kernel, in the units of its feature. ``np.inf``
        switches a feature off (its constrained kernel is identically 0, so is its Shapley value).
    order_variances : array-like of shape (Q + 1,)
        ``[sigma_0^2, sigma_1^2, ..., sigma_Q^2]`` (>= 0), in squared units of the target:
        variance of the constant, of the main effects, of the pairwise interactions, ...
    measure : gx.measures.Gaussian or gx.measures.Empirical
        Product measure the components are orthogonal under; it also defines the Shapley game.
    max_order : int, optional
        Q, the highest interaction order. Default: the number of features d, in which case
        ``order_variances`` needs d + 1 entries.

    Raises
    ------
    ValueError
        Non-positive lengthscale, negative or non-finite order variance, ``max_order`` < 1 or
        inconsistent with ``order_variances``, or parameters sized for different feature counts.
    TypeError
        ``measure`` is not a ``Gaussian`` or ``Empirical`` measure.
    """

    explanation_hint = (
        "An orthogonal additive GP has exact Shapley values in closed form: "
        "gx.shapley_values(model, X)."
    )

    def __init__(self, lengthscale, order_variances, measure, max_order: int | None = None):
        lengthscale = as_lengthscale(lengthscale)
        order_variances = np.asarray(order_variances, dtype=np.float64)
        if order_variances.ndim != 1 or order_variances.shape[0] < 2:
            raise ValueError(
                "order_variances must be a 1-D array [sigma_0^2, ..., sigma_Q^2] with Q >= 1, "
                f"got shape {order_variances.shape}."
            )
        if not np.all(np.isfinite(order_variances)) or np.any(order_variances < 0):
            raise ValueError(f"order_variances must be finite and >= 0, got {order_variances}.")
        check_measure(measure, ACCEPTED_MEASURES)
        if max_order is not None:
            if not isinstance(max_order, int | np.integer) or max_order < 1:
                raise ValueError(f"max_order must be a positive integer, got {max_order!r}.")
            if order_variances.shape[0] != max_order + 1:
                raise ValueError(
                    f"max_order={max_order} needs {max_order + 1} order_variances "
                    f"(sigma_0^2..sigma_{max_order}^2), got {order_variances.shape[0]}."
                )
        self.lengthscale = lengthscale
        self.order_variances = order_variances
        self.measure = measure
        self.max_order = None if max_order is None else int(max_order)
        sizes = {lengthscale.shape[0] if lengthscale.ndim else None, measure.n_features} - {None}
        if len(sizes) > 1:
            raise ValueError(
                f"lengthscale and measure are sized for different numbers of features {sizes}."
            )
        if sizes:
            self._resolve(sizes.pop())  # validates the order count now rather than at first use

    def __repr__(self) -> str:
        return (
            f"OrthogonalAdditive(lengthscale={self.lengthscale.tolist()!r}, "
            f"order_variances={self.order_variances.tolist()!r}, measure={self.measure!r}, "
            f"max_order={self.max_order!r})"
        )

    @property
    def order(self) -> int:
        """Q, the highest interaction order."""
        return self.order_variances.shape[0] - 1

    def _resolve(self, n_features: int):
        """Per-feature lengthscales and the measure for ``n_features`` inputs (validated)."""
        if self.lengthscale.ndim == 0:
            lengthscale = np.full(n_features, float(self.lengthscale))
        elif self.lengthscale.shape[0] != n_features:
            raise ValueError(
                f"the kernel has {self.lengthscale.shape[0]} lengthscales but the inputs have "
                f"{n_features} features."
            )
        else:
            lengthscale = self.lengthscale
        if self.order > n_features:
            raise ValueError(
                f"interaction order {self.order} exceeds the {n_features} features; give at "
                f"most {n_features + 1} order_variances."
            )
        if self.max_order is None and self.order != n_features:
            raise ValueError(
                f"order_variances has {self.order + 1} entries but {n_features} features need "
                f"{n_features + 1} (sigma_0^2..sigma_{n_features}^2); or set max_order="
                f"{self.order} to truncate the interactions."
            )
        return lengthscale, self.measure.resolve(n_features)

    # -- kernel values ------------------------------------------------------------------------
    def components(self, X1: np.ndarray, X2: np.ndarray) -> np.ndarray:
        """Constrained base-kernel matrices ``kt_i(X1[:, i], X2[:, i])``, shape (n1, n2, d).

        A view of a feature-first array: each feature's (n1, n2) matrix is contiguous, as the
        recursions over features want it.
        """
        return np.moveaxis(self.components_by_feature(X1, X2), 0, -1)

    def components_by_feature(self, X1: np.ndarray, X2: np.ndarray) -> np.ndarray:
        """``components`` with the feature axis first, shape (d, n1, n2), contiguous."""
        X1, X2 = np.asarray(X1, dtype=np.float64), np.asarray(X2, dtype=np.float64)
        lengthscale, measure = self._resolve(X1.shape[1])
        components = constrained_components(X1, X2, lengthscale, measure)
        return np.ascontiguousarray(np.moveaxis(components, -1, 0))

    def component_diag(self, X: np.ndarray) -> np.ndarray:
        """``kt_i(x_i, x_i)`` for each row and feature, shape (n, d), >= 0 up to round-off."""
        X = np.asarray(X, dtype=np.float64)
        lengthscale, measure = self._resolve(X.shape[1])
        return 1.0 - measure.se_embedding(X, lengthscale) ** 2

    def _combine(self, z: np.ndarray) -> np.ndarray:
        return combine_orders(z, self.order_variances)

    def __call__(self, X1: np.ndarray, X2: np.ndarray) -> np.ndarray:
        """Kernel matrix ``k(X1, X2)`` of shape (n1, n2)."""
        return self._combine(self.components(X1, X2))

    def diag(self, X: np.ndarray) -> np.ndarray:
        """``k(x, x)`` for each row of X, shape (n,)."""
        return self._combine(self.component_diag(X))

    def torch_kernel(self, n_features: int, lengthscale_constraint=None):
        """The same kernel as a float64 GPyTorch module (differentiable), e.g. for training.

        A thin torch view of this kernel: its ``forward`` evaluates ``constrained_components``
        and ``combine_orders``, the formulas ``__call__`` uses, with the lengthscales and
        order variances held as trainable GPyTorch parameters. Features with an infinite
        lengthscale (identically zero components) are left out through ``active_dims``.

        Parameters
        ----------
        n_features : int
        lengthscale_constraint : gpytorch.constraints.Interval, optional
            For training; default ``Positive()``.
        """
        lengthscale, measure = self._resolve(n_features)
        active = np.flatnonzero(np.isfinite(lengthscale))
        module = _TorchOrthogonalAdditive(
            measure.subset(active),
            n_features=active.size,
            max_order=min(self.order, active.size),
            lengthscale_constraint=lengthscale_constraint,
            active_dims=None if active.size == n_features else as_tensor(active, dtype=torch.long),
        ).double()
        module.lengthscale = as_tensor(lengthscale[active], like=module)
        module.order_variances = as_tensor(
            self.order_variances[: module.max_order + 1], like=module
        )
        return module

    # -- Shapley functionals ------------------------------------------------------------------
    def _shapley_weights(self, variances: np.ndarray) -> np.ndarray:
        """``variances[r + 1] / (r + 1)`` for r = 0..Q-1: each component shared among its |S|."""
        orders = np.arange(1, self.order + 1)
        return variances[1:] / orders

    def shapley_cross(self, X: np.ndarray, Z: np.ndarray) -> np.ndarray:
        """Cross term of the local Shapley values, ``A[p, i, n] = sum_{S ni i} sigma_|S|^2 / |S|
        prod_{l in S} kt_l(x_pl, z_nl)`` (the additive-Shapley paper eq. 9 before the product with
        alpha), of
        shape (n_points, d, n_train) for X (n_points, d) and Z (n_train, d);
        ``sum_i A[p, i, n] = k(x_p, z_n) - sigma_0^2``.
        """
        return self.shapley_cross_from_components(self.components_by_feature(X, Z))

    def shapley_cross_from_components(self, components: np.ndarray) -> np.ndarray:
        """``shapley_cross`` from ``components_by_feature(X, Z)`` (d, n_points, n_train), so
        that one set of components serves the cross term and ``k(X, Z)``
        (``kernel_from_components``)."""
        loo = _leave_one_out_by_feature(components, self._shapley_weights(self.order_variances))
        return np.ascontiguousarray(np.moveaxis(loo, 0, 1))

    def kernel_from_components(self, components: np.ndarray) -> np.ndarray:
        """``k(X, Z)`` from ``components_by_feature(X, Z)``, by the elementary-symmetric
        recursion (independently of the Shapley cross term)."""
        return self._combine(np.moveaxis(components, 0, -1))

    def shapley_prior(self, X: np.ndarray) -> np.ndarray:
        """Prior covariance of the local Shapley values at each point, shape (n_points, d, d).

        ``P_ij = sum_{S contains i, j} sigma_|S|^2 / |S|^2 prod_{l in S} c_l`` with
        ``c_l = kt_l(x_l, x_l)`` (docs/errata.md): the components f_S are independent, and feature i
        receives f_S / |S| of each S containing it. Diagonal: ``c_i sum_r u_{r+1} e_r(c_{-i})``;
        off-diagonal: ``c_i c_j sum_r u_{r+2} e_r(c_{-i,-j})`` with ``u_q = sigma_q^2 / q^2``,
        both through ``leave_one_out_weighted_sums`` (O(d^2 Q) per point).
        """
        return self._shapley_prior_of(self.component_diag(X).T)

    def shapley_prior_between(self, X1: np.ndarray, X2: np.ndarray) -> np.ndarray:
        """Two-point prior term ``Cov(phi_i(x_p), phi_j(x'_q))``, shape (n1, n2, d, d): the
        formula of ``shapley_prior`` with ``c_l = kt_l(x_pl, x'_ql)`` (each f_S is a GP with
        kernel ``sigma_|S|^2 prod_{l in S} kt_l``, and feature i receives f_S / |S|).
        O(n1 n2 d^2 Q)."""
        c = self.components_by_feature(X1, X2)  # (d, n1, n2)
        prior = self._shapley_prior_of(c.reshape(c.shape[0], -1))
        return prior.reshape(len(X1), len(X2), *prior.shape[1:])

    def _shapley_prior_of(self, c: np.ndarray) -> np.ndarray:
        """``P`` (m, d, d) from the per-feature components ``c`` (d, m)."""
        d, n_points = c.shape
        orders = np.arange(1, self.order + 1)
        squared_share = self.order_variances[1:] / orders**2  # u_1..u_Q
        prior = np.zeros((n_points, d, d))
        features = np.arange(d)
        prior[:, features, features] = _leave_one_out_by_feature(c, squared_share).T
        if self.order >= 2:
            # others[i] = the features other than i; all rows i in one batched recursion.
            others = np.array([np.delete(features, i) for i in features])  # (d, d - 1)
            pair = _leave_one_out_by_feature(c[others.T], squared_share[1:])  # (d-1, d, p)
            off_diagonal = c[:, None, :] * pair.transpose(1, 0, 2)  # (i, k, p)
            prior[:, features[:, None], others] = np.moveaxis(off_diagonal, -1, 0)
        return prior

    def variance_functionals(self, Z1: np.ndarray, Z2: np.ndarray):
        """Pairwise pieces of the variance decomposition of ``x -> k(x, Z) alpha`` under p.

        With ``M_l[n, m] = E_{s ~ p_l}[kt_l(s, z_nl) kt_l(s, z_ml)]`` (the measure's
        ``constrained_se_second_moment``) the posterior-mean components have
        ``Var f_S = sigma_|S|^4 alpha^T (Hadamard_{l in S} M_l) alpha`` (the additive-Shapley paper
        Theorem 1,
        product measure), hence

        * Shapley effect of i: ``sum_{S ni i} sigma_|S|^4 / |S| prod_{l in S} M_l`` (leave-one-out
          sums with weights ``sigma_q^4 / q``),
        * first-order Sobol variance of i: ``sigma_1^4 M_i``,
        * total variance: ``sum_{q >= 1} sigma_q^4 e_q(M_1, ..., M_d)``.

        Parameters
        ----------
        Z1 : ndarray (n1, d)
        Z2 : ndarray (n2, d)

        Returns
        -------
        shapley : ndarray (n1, n2, d)
        first_order : ndarray (n1, n2, d)
        total : ndarray (n1, n2)
        """
        lengthscale, measure = self._resolve(Z1.shape[1])
        moments = measure.constrained_se_second_moment(Z1, Z2, lengthscale)
        squared = self.order_variances**2
        shapley = leave_one_out_weighted_sums(moments, self._shapley_weights(squared))
        e = elementary_symmetric(moments, self.order)
        total = sum(s * e_q for s, e_q in zip(squared[1:], e[1:], strict=True))
        return shapley, squared[1] * moments, total


class _TorchOrthogonalAdditive(gpytorch.kernels.Kernel):
    """GPyTorch view of ``OrthogonalAdditive`` (built by ``OrthogonalAdditive.torch_kernel``).

    A GPyTorch module is needed to train the lengthscales and order variances (constraints,
    parameters, ``gpytorch.mlls``); it holds them and evaluates the kernel's own formulas
    (``constrained_components``, ``combine_orders``) on tensors, so there is one
    implementation of the math.

    Parameters
    ----------
    measure : Gaussian or Empirical
        Resolved to ``n_features`` features (the active ones).
    n_features : int
    max_order : int
        Q; the module holds Q + 1 order variances.
    lengthscale_constraint : gpytorch.constraints.Interval, optional
        Default: ``Positive()``.
    **kwargs
        Passed to ``gpytorch.kernels.Kernel`` (e.g. ``active_dims``).
    """

    has_lengthscale = True

    def __init__(self, measure, n_features: int, max_order: int, lengthscale_constraint=None,
                 **kwargs):
        super().__init__(
            ard_num_dims=n_features, lengthscale_constraint=lengthscale_constraint, **kwargs
        )
        self.measure = measure.resolve(n_features)
        self.max_order = int(max_order)
        self.register_parameter(
            "raw_order_variances", torch.nn.Parameter(torch.zeros(self.max_order + 1))
        )
        self.register_constraint("raw_order_variances", gpytorch.constraints.Positive())

    @property
    def order_variances(self) -> torch.Tensor:
        return self.raw_order_variances_constraint.transform(self.raw_order_variances)

    @order_variances.setter
    def order_variances(self, value):
        value = as_tensor(value, like=self.raw_order_variances)
        self.initialize(
            raw_order_variances=self.raw_order_variances_constraint.inverse_transform(value)
        )

    def forward(self, x1, x2, diag: bool = False, **params):
        z = constrained_components(x1, x2, self.lengthscale.reshape(-1), self.measure, diag)
        return combine_orders(z, self.order_variances)
