"""Exact Shapley interactions (order 2) of GPs with a product kernel, a linear functional of f.

Every interaction index of a cooperative game is a fixed linear combination of the game's
values ``v(S)``, and for the games of ``gpexplain.functionals.games`` (``v(S) = E_{r ~ R}
f(x_S, r_-S)``) each ``v(S)`` is linear in f, so every index is a linear functional of f and
its posterior is Gaussian (the generic formula of ``gpexplain.functionals.base``). For a product
kernel ``k(x, z) = s2 prod_j k_j(x_j, z_j)`` each kernel section ``k(., z_n)`` gives the product
game ``v_n(S) = s2 E_r prod_{j in S} p_j prod_{j not in S} q_j`` (``p_j = k_j(x_j, z_nj)``,
``q_j = k_j(r_j, z_nj)``, ``delta = p - q``) with multilinear extension
``F(y) = s2 E_r prod_j (q_j + y_j delta_j)`` (Owen 1972, *Multilinear extensions of games*).

**The three indices as integrals on the diagonal.** Let ``D_ij v(S) = v(S+ij) - v(S+i) -
v(S+j) + v(S)`` for ``S`` in ``N \\ {i, j}``. For a product game ``D_ij v(S) = delta_i
delta_j prod_{k in S} p_k prod_{k not in S, k != i, j} q_k``, and a sum over S with weights
that depend on |S| only is an integral against ``t^|S| (1 - t)^(d - 2 - |S|)``:

* pairwise Shapley interaction index, SII (Grabisch and Roubens 1999, *An axiomatic approach
  to the concept of interaction among players in cooperative games*): weights
  ``|S|! (d - |S| - 2)! / (d - 1)! = B(|S| + 1, d - 1 - |S|)``, so

      SII_ij = delta_i delta_j int_0^1 prod_{k != i, j} (q_k + t delta_k) dt;

  its order-1 values are the Shapley values ``phi_i = delta_i int_0^1 prod_{k != i} (q_k +
  t delta_k) dt`` (``gpexplain.functionals.product_shapley``);
* Shapley-Taylor interaction index of order 2, STII (Sundararajan, Dhamdhere and Agarwal 2020,
  *The Shapley Taylor interaction index*): top-order weights ``(2 / d) / C(d - 1, |S|) =
  2 |S|! (d - 1 - |S|)! / d! = 2 B(|S| + 1, d - |S|)``, so

      STII_ij = delta_i delta_j int_0^1 2 (1 - t) prod_{k != i, j} (q_k + t delta_k) dt,

  and its order-1 values are ``v({i}) - v({}) = d_i F(0)``. Integrating ``d/dt d_i F(t 1) =
  sum_{j != i} d_ij F(t 1)`` against ``(1 - t)`` by parts gives ``d_i F(0) = phi_i - 1/2
  sum_{j != i} STII_ij``: the order-1 values are Shapley values minus half of the pairs;
* k-SII of order 2 (Bordt and von Luxburg 2023, *From Shapley values to generalized additive
  models and back*; the index of shapiq): pairs ``SII_ij`` and order-1 values ``phi_i - 1/2
  sum_{j != i} SII_ij`` (the Bernoulli number B_1 = -1/2 of the aggregation).

So every index is ``M`` times the *primitives* ``(phi_1..phi_d, I_12, ..., I_(d-1)d)`` with
``I_ij = delta_i delta_j int_0^1 w(t) prod_{k != i, j} (q_k + t delta_k) dt``, ``w = 1``
(SII, k-SII) or ``w = 2 (1 - t)`` (STII), and ``M`` the identity (SII) or "subtract half of
each pair from its two members" (k-SII, STII). The integrands are polynomials of degree at most
``d - 1`` in t: ``ceil(d / 2)`` Gauss-Legendre nodes on (0, 1) are exact, never 2^d. The pair
products ``prod_{k != i, j}`` are prefix, middle and suffix products (no division).

**Efficiency** (checked on every result by ``gx.shapley_interactions``): with ``e`` the index's
efficiency weights, ``e^T values = v(N) - v({}) = m(x) - v({})`` and ``e^T Cov e = Var[f(x) -
E_r f(r)]``; ``e`` is all ones for k-SII and STII (the pairs' halves cancel) and ones on the
order-1 values only for SII (its order-1 values are the Shapley values; SII itself is not
efficient over the pairs).

**Prior term.** ``L_o L_o' k`` for two primitives with coalitions ``T`` (u side) and ``T'``
(w side) follows ``product_shapley``'s bilinear extension ``G(u, w) = prod_l g_l(u_l, w_l)``:
``P = s2 E_{r, r'} int int w_o(t) w_o'(s) d^T_u d^T'_w G(t 1, s 1) dt ds`` on the tensor
Gauss-Legendre grid. With ``a = d_u g / g``, ``b = d_w g / g``, ``c = d_u d_w g / g`` and
``e = c - a b`` (``g >= t s > 0`` at the nodes, so the ratios are bounded by ``1 / (t s)``),
``d^T_u d^T'_w G = G prod_{T} a prod_{T'} b`` with ``a_l b_l`` replaced by ``c_l = a_l b_l +
e_l`` for ``l`` in both: the main term is one outer product of the features ``(a_i, a_i a_j)``
and ``(b_k, b_k b_l)`` and the corrections are the few index patterns with a shared feature.
Cost per point: O(|R| n m d^2) for the cross term and O(|R|^2 m^2 (d^2/2)^2) for the prior
term (the interventional game pairs background rows: use tens of rows or the mean only).
"""

from __future__ import annotations

import numpy as np

from gpexplain.functionals.base import Scheme
from gpexplain.functionals.product_shapley import (
    ProductShapley,
    ProductShapleyScheme,
    gauss_legendre_unit,
    multilinear_shapley,
)
from gpexplain.functionals.terms import CoregionalTerms, term_scheme
from gpexplain.kernels.gpytorch_adapter import GPyTorchKernel
from gpexplain.kernels.rbf import RBF

__all__ = [
    "INTERACTION_INDICES", "ProductShapleyInteraction", "efficiency_weights", "index_matrix",
    "pair_list", "term_names",
]

#: The order-2 interaction indices offered, with what their efficiency weights are.
INTERACTION_INDICES = ("k-SII", "SII", "STII")


def pair_list(n_features: int) -> list[tuple[int, int]]:
    """The pairs ``(i, j)``, ``i < j``, in the order of the values after the order-1 ones."""
    return [(i, j) for i in range(n_features) for j in range(i + 1, n_features)]


def term_names(feature_names) -> list[str]:
    """Names of the ``d + d (d - 1) / 2`` values: the features, then ``"a x b"`` per pair."""
    names = list(feature_names)
    return names + [f"{names[i]} x {names[j]}" for i, j in pair_list(len(names))]


def efficiency_weights(index: str, n_features: int) -> np.ndarray:
    """``e`` with ``e^T values = v(N) - v({})``: ones (k-SII, STII), or ones on the order-1
    values and zeros on the pairs (SII)."""
    n_pairs = n_features * (n_features - 1) // 2
    return np.concatenate([np.ones(n_features), np.full(n_pairs, float(index != "SII"))])


def index_matrix(index: str, n_features: int) -> np.ndarray:
    """``M`` (D, D) with ``values = M primitives`` (see the module docstring)."""
    n_pairs = n_features * (n_features - 1) // 2
    M = np.eye(n_features + n_pairs)
    if index != "SII":
        for p, (i, j) in enumerate(pair_list(n_features)):
            M[[i, j], n_features + p] = -0.5
    return M


def _pair_index(n_features: int) -> np.ndarray:
    """``(d, d)`` table of each pair's position among the pairs (-1 on the diagonal)."""
    table = -np.ones((n_features, n_features), dtype=int)
    for p, (i, j) in enumerate(pair_list(n_features)):
        table[i, j] = table[j, i] = p
    return table


def multilinear_pairs(p, q, nodes, pair_weights, delta=None) -> np.ndarray:
    """``delta_i delta_j sum_m w_m prod_{k != i, j} (q_k + t_m delta_k)`` for ``i < j``.

    Parameters
    ----------
    p, q : ndarray, broadcastable, features on the last axis
    nodes, pair_weights : the rule on (0, 1), weights including ``w(t)``
    delta : ndarray, optional
        ``p - q``.

    Returns
    -------
    ndarray, broadcast shape with the last axis of length ``d (d - 1) / 2``
    """
    if delta is None:
        delta = p - q
    path = q[..., None, :] + nodes[:, None] * delta[..., None, :]  # (..., m, d)
    n_features = path.shape[-1]
    # prod_{k != i, j} = (prod_{k < i}) (prod_{i < k < j}) (prod_{k > j}): prefix and suffix
    # products once, the middle run per i by one cumulative product (no division).
    ones = np.ones(path.shape[:-1] + (1,))
    prefix = np.cumprod(np.concatenate([ones, path[..., :-1]], axis=-1), axis=-1)
    suffix = np.cumprod(np.concatenate([ones, path[..., :0:-1]], axis=-1), axis=-1)[..., ::-1]
    blocks = []
    for i in range(n_features - 1):
        middle = np.cumprod(np.concatenate([ones, path[..., i + 1:-1]], axis=-1), axis=-1)
        without = np.einsum("...mk,m->...k", prefix[..., i:i + 1] * middle
                            * suffix[..., i + 1:], pair_weights)
        blocks.append(delta[..., i:i + 1] * delta[..., i + 1:] * without)
    if not blocks:
        return np.zeros(path.shape[:-2] + (0,))
    return np.concatenate(blocks, axis=-1)


def _ratio(numerator: np.ndarray, g: np.ndarray) -> np.ndarray:
    """``numerator / g``, and 0 where ``g`` underflowed to 0: there the term's product
    ``G = prod_l g_l`` is 0 and every numerator is a combination of the same vanished kernel
    values, so the term is 0 (``0 / 0`` would make it NaN)."""
    return np.divide(numerator, g, out=np.zeros(np.broadcast_shapes(numerator.shape, g.shape)),
                     where=g != 0)


def _pair_products(v: np.ndarray) -> np.ndarray:
    """``v_i v_j`` for ``i < j`` on the last axis."""
    rows, cols = np.triu_indices(v.shape[-1], 1)
    return v[..., rows] * v[..., cols]


class ProductShapleyInteraction(ProductShapley):
    """Order-1 values and all pairwise interactions of ``v(S) = E_{r ~ R} f(x_S, r_-S)``.

    ``D = d + d (d - 1) / 2`` outputs per point (``term_names``): the index's order-1 values,
    then the pairs ``(i, j)``, ``i < j``, in ``pair_list`` order.

    Parameters
    ----------
    index : {"k-SII", "SII", "STII"}
    game, references, measure
        As for ``ProductShapley``.
    """

    name = "exact Shapley interactions"
    # The driver would check that all D values sum to the target; the efficiency identity of
    # the index (``efficiency_weights``) is checked by ``gx.shapley_interactions`` instead.
    complete = False

    def __init__(self, index: str, game: str, references=None, measure=None):
        super().__init__(game, references, measure)
        self.index = index

    def unsupported_kernel_message(self, kernel) -> str:
        return super().unsupported_kernel_message(kernel).replace(
            "exact Shapley values", "exact Shapley interactions", 1)

    def output_names(self, posterior) -> list[str]:
        return term_names(posterior.feature_names)

    def describe(self, scheme: Scheme) -> str:
        return (f"{self.name} ({self.index}, order 2; {self.game} game, product kernel, "
                f"{scheme.label})")


@ProductShapleyInteraction.register(RBF)
@ProductShapleyInteraction.register(GPyTorchKernel)
class ProductInteractionScheme(ProductShapleyScheme):
    """Closed form for kernels with a ``ProductStructure`` (see the module docstring)."""

    def __init__(self, functional, kernel, Z):
        super().__init__(functional, kernel, Z)
        n_features = Z.shape[1]
        self.nodes, self.weights = gauss_legendre_unit(n_features)
        shape = 2.0 * (1.0 - self.nodes) if functional.index == "STII" else 1.0
        self.pair_weights = self.weights * shape
        self.pair_index = _pair_index(n_features)
        self.aggregated = functional.index != "SII"
        # (d, n_pairs) incidence: half of each pair is taken from both of its members.
        self.incidence = np.zeros((n_features, n_features * (n_features - 1) // 2))
        for p, (i, j) in enumerate(pair_list(n_features)):
            self.incidence[[i, j], p] = 1.0

    def _to_index(self, values: np.ndarray, axis: int) -> np.ndarray:
        """Apply ``M`` (``index_matrix``) along ``axis`` of an array of primitives."""
        if not self.aggregated:
            return values
        d = self.incidence.shape[0]
        moved = np.moveaxis(values, axis, -1).copy()
        moved[..., :d] -= 0.5 * moved[..., d:] @ self.incidence.T
        return np.moveaxis(moved, -1, axis)

    def cross(self, X):
        p = self.structure.matrices(X, self.Z)  # (P, n, d)
        n_features = p.shape[-1]
        total = np.zeros(p.shape[:2] + (n_features + len(pair_list(n_features)),))
        for q in self.reference_cross:  # one reference at a time
            delta = p - q[None]
            total[..., :n_features] += multilinear_shapley(p, q[None], self.nodes, self.weights,
                                                           delta)
            total[..., n_features:] += multilinear_pairs(p, q[None], self.nodes,
                                                         self.pair_weights, delta)
        scale = self.structure.variance / len(self.reference_cross)
        return self._to_index(scale * np.swapaxes(total, 1, 2), axis=1)

    def prior(self, X):
        query = self._query_references(X)  # (P, R, d)
        return self._prior_pairs(query, query, np.ones((len(X), query.shape[-1])))

    def prior_between(self, X1, X2):
        """Two-point prior term ``L_o(x_p) L_o'(x'_q) k``, (n1, n2, D, D): ``prior``'s
        construction with ``k_l(x_l, x'_l)`` where one point has ``k_l(x_l, x_l) = 1``.

        Every game: ``g_l`` is a combination of four kernel values with the node weights
        ``(1 - t)(1 - s), t (1 - s), (1 - t) s, t s``, all positive, and the factors are
        non-negative correlation functions, so ``|a|, |b|, |e|`` stay below a few times the
        inverse of the smallest weight wherever ``g_l > 0``; where all four values underflow
        (distinct background rows and points far apart on feature l) the node's term has the
        factor ``g_l = 0`` and is zero (``_ratio``). Cost O(n1 n2 |R|^2 m^2 D^2) with m =
        ceil(d / 2) nodes and |R| reference rows.
        """
        query1, query2 = self._query_references(X1), self._query_references(X2)
        n1, n2, d = len(X1), len(X2), query1.shape[-1]
        k_xx = self.structure.matrices(X1, X2).reshape(n1 * n2, d)  # k_l(x_pl, x'_ql)
        pairs = self._prior_pairs(np.repeat(query1, n2, axis=0), np.tile(query2, (n1, 1, 1)),
                                  k_xx)
        return pairs.reshape(n1, n2, *pairs.shape[1:])

    def _prior_pairs(self, query1, query2, k_xx):
        """``L_o(x) L_o'(x') k`` for B pairs (x, x'): ``query1`` = ``k_l(x_l, r_l)`` and
        ``query2`` = ``k_l(r_l, x'_l)`` per reference row (B, R, d), ``k_xx`` = ``k_l(x_l,
        x'_l)`` (B, d); (B, D, D)."""
        tt, ss = self.nodes[:, None, None], self.nodes[None, :, None]
        w1, w2 = self.weights, self.pair_weights
        n_points, n_references, d = query1.shape
        n_outputs = d + d * (d - 1) // 2
        prior = np.zeros((n_points, n_outputs, n_outputs))
        # weights of the (t, s) grid per block: order-1 / pair on the u side, then the w side
        w11, w12 = np.outer(w1, w1), np.outer(w1, w2)
        w21, w22 = np.outer(w2, w1), np.outer(w2, w2)
        off = ~np.eye(d, dtype=bool)
        ii, ll = np.nonzero(off)
        single = np.arange(d)
        k_same = k_xx[:, None, None, None, :]
        for r in range(n_references):
            k_rr = self.reference_gram[r][None, :, None, None, :]
            k_xr2 = query1[:, :, None, None, :]  # k(x, r')
            k_rx = query2[:, r][:, None, None, None, :]  # k(r, x')
            g = ((1 - tt) * (1 - ss) * k_rr + tt * (1 - ss) * k_xr2 + (1 - tt) * ss * k_rx
                 + tt * ss * k_same)
            a = _ratio((1 - ss) * (k_xr2 - k_rr) + ss * (k_same - k_rx), g)
            b = _ratio((1 - tt) * (k_rx - k_rr) + tt * (k_same - k_xr2), g)
            e = _ratio(k_rr - k_xr2 - k_rx + k_same, g) - a * b
            G = g.prod(-1)  # (P, R', m, m)
            U = np.concatenate([a * w1[:, None, None], _pair_products(a) * w2[:, None, None]], -1)
            V = np.concatenate([b * w1[None, :, None], _pair_products(b) * w2[None, :, None]],
                               -1)
            U = (U * G[..., None]).reshape(n_points, -1, n_outputs)
            prior += np.einsum("pni,pnj->pij", U, V.reshape(n_points, -1, n_outputs))
            # corrections where the two coalitions share a feature (c_l = a_l b_l + e_l)
            prior[:, single, single] += np.einsum("prts,ts,prtsi->pi", G, w11, e)
            if d < 2:
                continue
            e12 = np.einsum("prts,ts,prtsi,prtsl->pil", G, w12, e, b)
            e21 = np.einsum("prts,ts,prtsi,prtsj->pij", G, w21, e, a)
            pairs = d + self.pair_index[ii, ll]
            prior[:, ii, pairs] += e12[:, ii, ll]
            prior[:, pairs, ii] += e21[:, ii, ll]
            e22 = np.einsum("prts,ts,prtsk,prtsj,prtsl->pkjl", G, w22, e, a, b, optimize=True)
            kk, jj, l2 = np.nonzero(off[:, :, None] & off[:, None, :])
            np.add.at(prior, (slice(None), d + self.pair_index[kk, jj],
                              d + self.pair_index[kk, l2]), e22[:, kk, jj, l2])
            ee = np.einsum("prts,ts,prtsi,prtsj->pij", G, w22, e, e)
            rows, cols = np.triu_indices(d, 1)
            prior[:, d + self.pair_index[rows, cols], d + self.pair_index[rows, cols]] += \
                ee[:, rows, cols]
        prior *= self.structure.variance / n_references**2
        return self._to_index(self._to_index(prior, axis=1), axis=2)

    def copies_per_point(self) -> int:
        m, d = len(self.nodes), self.Z.shape[1]
        n_outputs = d + d * (d - 1) // 2
        cross = 4 * m + 2 * -(-n_outputs // max(d, 1)) + 3
        n_references = len(self.reference_cross)
        prior = -(-4 * n_references * m * m * n_outputs // max(self.Z.shape[0] * d, 1))
        return max(cross, prior)


# An output of a linear model of coregionalisation: each term's scheme, summed.
ProductShapleyInteraction.register(CoregionalTerms)(term_scheme)
