"""Exact Shapley interactions (order 2) of an orthogonal additive GP, a linear functional of f.

For the orthogonal additive kernel ``k = sum_q sigma_q^2 e_q(kt_1, ..., kt_d)``
(``gx.kernels.OrthogonalAdditive``; Lu, Boukouvalas and Hensman 2022) f splits into independent
functional-ANOVA components ``f = f_0 + sum_T f_T`` that integrate to zero under the kernel's
product measure, and the marginal game under that measure is ``v(S) = sum_{T in S} f_T(x)``:
a sum of unanimity games ``f_T u_T``. Every index is linear in the game, and on ``u_T``
(|T| = q) it gives

* SII (Grabisch and Roubens 1999): ``1 / (q - 1)`` to each pair in T, ``1 / q`` (the Shapley
  value) to each member;
* k-SII of order 2 (Bordt and von Luxburg 2023): pairs as SII, members ``1 / q - 1/2`` for
  ``q >= 2`` and 1 for ``q = 1`` (Shapley value minus half of the member's pairs);
* STII of order 2 (Sundararajan, Dhamdhere and Agarwal 2020): ``1 / C(q, 2)`` to each pair in
  T, members 1 for ``q = 1`` and 0 otherwise (``v({i}) - v({}) = f_{i}``).

So a value with coalition U (a feature or a pair) is ``sum_{T >= U} beta_U(|T|) f_T(x)``, and
with independent components

    cross  L_U k(., z) = prod_{l in U} kt_l(x_l, z_l) sum_r beta_U(r + |U|) sigma_{r+|U|}^2
                         e_r(kt_{-U}(x, z)),
    prior  L_U L_V' k  = prod_{l in U+V} c_l sum_r beta_U beta_V (r + |U+V|) sigma^2_{r+|U+V|}
                         e_r(c_{-(U+V)}),   c_l = kt_l(x_l, x_l),

with the elementary symmetric polynomials of the other features (those of U set to zero).
O(d Q) per value and basis point, O(d Q) per pair of values for the prior term; never 2^d.
Efficiency (mean and variance) is that of ``AdditiveShapley``: base value ``m0 + sigma_0^2
1^T a``, ``Var[f(x) - f_0]``.
"""

from __future__ import annotations

import itertools

import numpy as np

from gpexplain.functionals.base import Scheme
from gpexplain.functionals.product_interactions import pair_list, term_names
from gpexplain.functionals.shapley import AdditiveShapley
from gpexplain.kernels.orthogonal_additive import OrthogonalAdditive, elementary_symmetric

__all__ = ["AdditiveShapleyInteraction", "unanimity_shares"]


def unanimity_shares(index: str, order: int) -> tuple[np.ndarray, np.ndarray]:
    """``(member, pair)``: the value a unanimity game ``u_T`` with ``|T| = q`` gives each member
    and each pair of T, indexed by q = 0..order (zero where undefined)."""
    q = np.arange(order + 1, dtype=float)
    member, pair = np.zeros(order + 1), np.zeros(order + 1)
    safe = np.maximum(q, 1.0)
    if index == "STII":
        member[1:2] = 1.0
        pair[2:] = 2.0 / (q[2:] * (q[2:] - 1.0))
        return member, pair
    member[1:] = 1.0 / safe[1:]
    pair[2:] = 1.0 / (q[2:] - 1.0)
    if index == "k-SII":
        member[2:] -= 0.5
    return member, pair


def _subset_sums(z: np.ndarray, subset: tuple[int, ...], weights: np.ndarray) -> np.ndarray:
    """``sum_{T >= U} weights[|T|] prod_{l in T} z_l`` over the last axis of z (U = subset)."""
    size, order = len(subset), len(weights) - 1
    if size > order:
        return np.zeros(z.shape[:-1])
    rest = z.copy()
    rest[..., list(subset)] = 0.0
    e = elementary_symmetric(rest, order - size)
    total = sum(weights[r + size] * e[r] for r in range(order - size + 1))
    return np.prod(z[..., list(subset)], axis=-1) * total


class AdditiveShapleyInteraction(AdditiveShapley):
    """Order-1 values and pairwise interactions of an orthogonal additive GP's own game.

    Parameters
    ----------
    index : {"k-SII", "SII", "STII"}
    """

    name = "exact Shapley interactions"
    complete = False  # the index's efficiency is checked by gx.shapley_interactions

    def __init__(self, index: str):
        self.index = index

    def output_names(self, posterior) -> list[str]:
        return term_names(posterior.feature_names)

    def describe(self, scheme: Scheme) -> str:
        measure = type(scheme.kernel.measure).__name__.lower()
        return (f"{self.name} ({self.index}, order 2; orthogonal additive GP, {measure} "
                "measure)")


@AdditiveShapleyInteraction.register(OrthogonalAdditive)
class AdditiveInteractionScheme(Scheme):
    """Closed form on ``OrthogonalAdditive`` (module docstring)."""

    label = "closed form"

    def __init__(self, functional, kernel, Z):
        super().__init__(functional, kernel, Z)
        d = Z.shape[1]
        member, pair = unanimity_shares(functional.index, kernel.order)
        self.subsets = [(i,) for i in range(d)] + pair_list(d)
        self.shares = [member] * d + [pair] * (len(self.subsets) - d)

    def cross(self, X):
        z = self.kernel.components(X, self.Z)  # (P, n, d)
        variances = self.kernel.order_variances
        return np.stack([_subset_sums(z, U, share * variances)
                         for U, share in zip(self.subsets, self.shares, strict=True)], axis=1)

    def prior(self, X):
        return self._prior_of(self.kernel.component_diag(X))

    def prior_between(self, X1, X2):
        """Two-point prior term, (n1, n2, D, D): ``prior``'s formula with the per-feature
        components ``kt_l(x_pl, x'_ql)`` in place of ``kt_l(x_l, x_l)`` (each f_S is a GP
        with kernel ``sigma_|S|^2 prod_{l in S} kt_l``, shared among the subsets as at one
        point, and kt_l is symmetric, so the blocks stay symmetric in the outputs).
        O(n1 n2 D^2 Q)."""
        c = self.kernel.components_by_feature(X1, X2)  # (d, n1, n2)
        prior = self._prior_of(c.reshape(c.shape[0], -1).T)
        return prior.reshape(len(X1), len(X2), *prior.shape[1:])

    def _prior_of(self, c: np.ndarray) -> np.ndarray:
        """``P`` (m, D, D) from the per-feature components ``c`` (m, d)."""
        variances = self.kernel.order_variances
        n_outputs = len(self.subsets)
        prior = np.zeros((len(c), n_outputs, n_outputs))
        for a, b in itertools.combinations_with_replacement(range(n_outputs), 2):
            union = tuple(sorted(set(self.subsets[a]) | set(self.subsets[b])))
            weights = self.shares[a] * self.shares[b] * variances
            prior[:, a, b] = prior[:, b, a] = _subset_sums(c, union, weights)
        return prior

    def copies_per_point(self) -> int:
        return len(self.subsets) // max(self.Z.shape[1], 1) + 4
