"""Exact Shapley values of GPs with a product kernel, a linear functional of f.

For ``k(x, z) = s2 prod_j k_j(x_j, z_j)`` (``gpexplain.kernels.product``) and a game that fills
the features outside a coalition S from a reference distribution R,

    v(S) = E_{r ~ R} f(x_S, r_{-S}),

three references are offered (the games of ``gpexplain.functionals.games``): one point xt
("baseline"), the rows of a background sample averaged jointly ("interventional": the game of
shap's Exact and Permutation explainers and KernelSHAP), or a product measure ``prod_j p_j``
("product-measure"). Each kernel section ``g_n = k(., z_n)`` of the posterior mean gives a
product game ``v_n(S) = s2 E_r prod_{j in S} p_j prod_{j not in S} q_j(r)`` with ``p_j =
k_j(x_j, z_nj)`` and ``q_j = k_j(r_j, z_nj)`` (the product measure: ``q_j = mu_j(z_nj)``, the
kernel mean embedding). The Shapley value of a multilinear game is the integral of the partial
derivative of its multilinear extension along the diagonal (Owen 1972, *Multilinear extensions
of games*), so

    A_i(x, z_n) = s2 E_r (p_i - q_i) int_0^1 prod_{j != i} (q_j + t (p_j - q_j)) dt,

a polynomial of degree d - 1 in t: Gauss-Legendre with ceil(d / 2) nodes is exact. The product
over ``j != i`` is a leave-one-out product (prefix times suffix products, no division). Cost
O(|R| n d ceil(d/2)) per point, linear in the background size.

The prior term ``P_ij = L_i L_j' k`` is the same construction on both arguments: with
``g_l(u, w) = (1-u)(1-w) k_l(r_l, r'_l) + u (1-w) k_l(x_l, r'_l) + (1-u) w k_l(r_l, x_l)
+ u w`` (the bilinear extension of one factor; ``k_l(x_l, x_l) = 1``),

    P_ij = s2 E_{r, r'} int int d_u g_i d_w g_j prod_{l != i, j} g_l dt ds      (i != j)
    P_ii = s2 E_{r, r'} int int d_u d_w g_i prod_{l != i} g_l dt ds,

at u = t, w = s, exact on a ceil(d/2)^2 tensor Gauss-Legendre grid. ``g_l >= t s > 0`` at the
nodes, so the leave-two-out products are ``G a_i b_j`` with ``G = prod_l g_l``, ``a = d_u g / g``,
``b = d_w g / g`` (bounded by 1 / (t s)). For the product measure ``k_l(x_l, r'_l)`` becomes
``mu_l(x_l)`` and ``k_l(r_l, r'_l)`` becomes ``M_l``. The interventional game's prior term pairs
every two background rows: O(B^2 d^2 ceil(d/2)^2) per point (the mean-only path stays O(B)).

Completeness: the base value is ``v({}) = E_r m(r)`` (product measure: ``m0 + s2 sum_n a_n
prod_j mu_j(z_nj)``), and ``1^T Cov 1 = Var[f(x) - E_r f(r)]``, both computed from the kernel
directly, not from A and P (for an output of a linear model of coregionalisation, term by
term: ``sum_q B^q[i, task_n] s2_q prod_j mu_qj(z_nj)`` and the prior ``sum_q B^q_ii (...)``).
"""

from __future__ import annotations

import numpy as np

from gpexplain._quad import gauss_legendre
from gpexplain.functionals.base import LinearFunctional, Scheme
from gpexplain.functionals.terms import CoregionalTerms, sum_terms, term_scheme
from gpexplain.kernels.gpytorch_adapter import GPyTorchKernel
from gpexplain.kernels.product import product_structure
from gpexplain.kernels.rbf import RBF

__all__ = ["ProductShapley", "gauss_legendre_unit", "not_product_message"]


def not_product_message(kernel, what: str = "exact Shapley values") -> str:
    """The error for a kernel without the product structure (local and global values)."""
    return (
        f"{what} need a product kernel: the ARD squared exponential (gx.kernels.RBF, "
        "GPRegressor(kernel='ard'|'isotropic')) or a GPyTorch ScaleKernel/ProductKernel of "
        "RBFKernel and one-dimensional MaternKernel/RQKernel factors (active_dims); got kernel "
        f"{kernel!r}. Use gx.integrated_gradients for other kernels (or gx.AdditiveGPRegressor "
        "for exact Shapley values of an additive GP)."
    )


def gauss_legendre_unit(n_features: int, quad: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """Nodes and weights on [0, 1] integrating polynomials of degree ``n_features - 1``
    exactly: ``ceil(n_features / 2)`` Gauss-Legendre nodes (degree ``2 m - 1``); with
    ``quad``, to binary128 accuracy (``gpexplain._quad.gauss_legendre``)."""
    n_nodes = max(1, -(-n_features // 2))
    nodes, weights = (gauss_legendre(n_nodes) if quad
                      else np.polynomial.legendre.leggauss(n_nodes))
    return 0.5 * (nodes + 1.0), 0.5 * weights


def leave_one_out_products(c: np.ndarray) -> np.ndarray:
    """``out[..., i] = prod_{j != i} c[..., j]`` by prefix and suffix products (no division)."""
    ones = np.ones(c.shape[:-1] + (1,), dtype=c.dtype)
    prefix = np.cumprod(np.concatenate([ones, c[..., :-1]], axis=-1), axis=-1)
    suffix = np.cumprod(np.concatenate([ones, c[..., :0:-1]], axis=-1), axis=-1)[..., ::-1]
    return prefix * suffix


def multilinear_shapley(p: np.ndarray, q: np.ndarray, nodes, weights, delta=None) -> np.ndarray:
    """Shapley values of the product games ``v(S) = prod_{j in S} p_j prod_{j not in S} q_j``.

    Parameters
    ----------
    p, q : ndarray, broadcastable, features on the last axis
    nodes, weights : Gauss-Legendre rule on [0, 1] exact for degree d - 1
    delta : ndarray, optional
        ``p - q`` when the caller has it without cancellation.

    Returns
    -------
    ndarray, broadcast shape: ``(p_i - q_i) int_0^1 prod_{j != i} (q_j + t (p_j - q_j)) dt``
    """
    if delta is None:
        delta = p - q
    path = q[..., None, :] + nodes[:, None] * delta[..., None, :]  # (..., m, d)
    # a sum, not einsum or a stacked matmul: it must also hold for binary128 arrays
    # (gpexplain._quad)
    return delta * np.sum(leave_one_out_products(path) * weights[:, None], axis=-2)


class ProductShapley(LinearFunctional):
    """Local Shapley values of ``v(S) = E_{r ~ R} f(x_S, r_{-S})`` for product kernels.

    Parameters
    ----------
    game : str
        A name in ``gpexplain.functionals.games.GAMES``; "baseline" explains from one point.
    references : ndarray (n_references, n_features), optional
        The baseline (one row) or the background rows; validated by the caller.
    measure : gx.measures.Gaussian, Empirical or Uniform, optional
        The product measure (resolved to the number of features by the caller).
    """

    name = "exact Shapley values"

    def __init__(self, game: str, references: np.ndarray | None = None, measure=None):
        self.game, self.references, self.measure = game, references, measure
        self.baseline = None if references is None else (
            references[0] if game == "baseline" else references
        )

    def unsupported_kernel_message(self, kernel) -> str:
        return not_product_message(kernel, f"exact Shapley values of the {self.game} game")

    def completeness_target(self, posterior, X: np.ndarray, return_var: bool):
        """``(v({}), Var[f(x) - E_r f(r)])`` from the posterior and kernel, not from A and P."""
        if self.references is not None:
            base_value = float(np.mean(posterior.predict_mean(self.references)))
            variance = posterior.difference_variance(X, self.references) if return_var else None
            return base_value, variance
        # Term by term for an output of an LMC (prior weights B^q_ii, cross weights
        # B^q[i, task_n]); one term of weights 1 otherwise.
        kernel, Z = posterior.kernel, posterior.train_inputs
        terms = kernel.terms if isinstance(kernel, CoregionalTerms) else [(kernel, 1.0, 1.0)]
        structures = [(product_structure(k, posterior.n_features), prior, cross)
                      for k, prior, cross in terms]
        reference_cross = sum_terms(
            cross * structure.variance * structure.embedding(Z, self.measure).prod(-1)
            for structure, _, cross in structures)
        base_value = posterior.mean + float(reference_cross @ posterior.alpha)
        if not return_var:
            return base_value, None
        prior = kernel.diag(X) - sum_terms(
            2.0 * weight * structure.variance * structure.embedding(X, self.measure).prod(-1)
            for structure, weight, _ in structures) + sum_terms(
            weight * structure.variance * structure.double_embedding(self.measure).prod()
            for structure, weight, _ in structures)
        cross = posterior.cross_kernel(X) - reference_cross
        reduction = posterior.quadratic_form(cross[:, None, :])[:, 0, 0]
        return base_value, np.maximum(prior - reduction, 0.0)

    def describe(self, scheme: Scheme) -> str:
        return f"{self.name} ({self.game} game, product kernel, {scheme.label})"


@ProductShapley.register(RBF)
@ProductShapley.register(GPyTorchKernel)
class ProductShapleyScheme(Scheme):
    """Closed form for kernels with a ``ProductStructure`` (see the module docstring)."""

    label = "closed form"

    def __init__(self, functional, kernel, Z):
        super().__init__(functional, kernel, Z)
        self.structure = product_structure(kernel, Z.shape[1])
        if self.structure is None:  # e.g. a sum, or a Matern over several features
            raise TypeError(functional.unsupported_kernel_message(kernel))
        self.nodes, self.weights = gauss_legendre_unit(Z.shape[1])
        structure, measure = self.structure, functional.measure
        if functional.references is None:  # product measure: one "virtual" reference
            self.reference_cross = structure.embedding(Z, measure)[None]  # (R, n, d)
            self.reference_gram = structure.double_embedding(measure)[None, None]  # (R, R, d)
        else:
            self.reference_cross = structure.matrices(functional.references, Z)
            references = functional.references
            self.reference_gram = structure.matrices(references, references)

    def _query_references(self, X):
        """``k_j(x_j, r_j)`` for every reference (P, R, d); ``mu_j(x_j)`` for the measure."""
        functional = self.functional
        if functional.references is None:
            return self.structure.embedding(X, functional.measure)[:, None, :]
        return self.structure.matrices(X, functional.references)

    def cross(self, X):
        p = self.structure.matrices(X, self.Z)  # k_j(x_j, z_nj), (P, n, d)
        total = np.zeros(p.shape)
        for q in self.reference_cross:  # one reference at a time: memory O(P n d m)
            total += multilinear_shapley(p, q[None], self.nodes, self.weights)
        scale = self.structure.variance / len(self.reference_cross)
        return scale * np.swapaxes(total, 1, 2)

    def prior(self, X):
        # u = t on axis -3, w = s on axis -2 of the (P, R', m, m, d) arrays below.
        tt, ss = self.nodes[:, None, None], self.nodes[None, :, None]
        node_weights = self.weights[:, None] * self.weights[None, :]
        query = self._query_references(X)  # (P, R, d)
        n_points, n_references, n_features = query.shape
        prior = np.zeros((n_points, n_features, n_features))
        for r in range(n_references):  # pairs (r, r'), r' vectorised
            k_rr = self.reference_gram[r][None, :, None, None, :]  # (1, R', 1, 1, d)
            k_xr2 = query[:, :, None, None, :]  # k(x, r')
            k_rx = query[:, r][:, None, None, None, :]  # k(r, x)
            g = (1 - tt) * (1 - ss) * k_rr + tt * (1 - ss) * k_xr2 + (1 - tt) * ss * k_rx + tt * ss
            du = (1 - ss) * (k_xr2 - k_rr) + ss * (1.0 - k_rx)
            dw = (1 - tt) * (k_rx - k_rr) + tt * (1.0 - k_xr2)
            duw = k_rr - k_xr2 - k_rx + 1.0
            G = node_weights * g.prod(-1)  # (P, R', m, m)
            a, b = du / g, dw / g
            prior += np.einsum("prts,prtsi,prtsj->pij", G, a, b)
            diagonal = np.einsum("prts,prtsi->pi", G, duw / g - a * b)
            prior[:, np.arange(n_features), np.arange(n_features)] += diagonal
        return (self.structure.variance / n_references**2) * prior

    def prior_between(self, X1, X2):
        """Two-point prior term: the construction of ``prior`` with x on the first argument and
        x' on the second (``g_l(u, w) = (1-u)(1-w) k_l(r_l, r'_l) + u (1-w) k_l(x_l, r'_l)
        + (1-u) w k_l(r_l, x'_l) + u w k_l(x_l, x'_l)``), exact on the same tensor grid.

        ``k_l(x_l, x'_l)`` may underflow to 0 for distant points, so the leave-two-out products
        are formed directly (prefix and suffix products per left-out feature), not by division.
        Cost O(n1 n2 R^2 m^2 d^2) for R reference rows (1 for the baseline and product-measure
        games), m = ceil(d / 2) nodes; shape (n1, n2, d, d).
        """
        tt, ss = self.nodes[:, None, None], self.nodes[None, :, None]  # u = t, w = s
        node_weights = self.weights[:, None] * self.weights[None, :]
        query1, query2 = self._query_references(X1), self._query_references(X2)  # (P, R, d)
        k_xx = self.structure.matrices(X1, X2)[:, :, None, None, :]  # (P1, P2, 1, 1, d)
        n_references, n_features = query1.shape[1], query1.shape[2]
        eye = np.eye(n_features, dtype=bool)
        prior = np.zeros((len(X1), len(X2), n_features, n_features))
        for r in range(n_references):
            for r2 in range(n_references):
                k_rr = self.reference_gram[r, r2]  # (d,)
                k_xr2 = query1[:, r2][:, None, None, None, :]  # k(x, r')
                k_rx2 = query2[:, r][None, :, None, None, :]  # k(r, x')
                g = ((1 - tt) * (1 - ss) * k_rr + tt * (1 - ss) * k_xr2
                     + (1 - tt) * ss * k_rx2 + tt * ss * k_xx)  # (P1, P2, m, m, d)
                du = (1 - ss) * (k_xr2 - k_rr) + ss * (k_xx - k_rx2)
                dw = (1 - tt) * (k_rx2 - k_rr) + tt * (k_xx - k_xr2)
                duw = k_rr - k_xr2 - k_rx2 + k_xx
                # loo2[..., i, j] = prod_{l != i, j} g_l (j = i: prod_{l != i} g_l)
                left_out = np.where(eye, 1.0, g[..., None, :])  # (..., d_i, d)
                loo2 = leave_one_out_products(left_out)
                loo1 = np.einsum("...ii->...i", loo2)
                prior += np.einsum("ts,pqtsi,pqtsj,pqtsij->pqij", node_weights, du, dw, loo2)
                diagonal = np.einsum("ts,pqtsi->pqi", node_weights, (duw - du * dw) * loo1)
                prior[:, :, np.arange(n_features), np.arange(n_features)] += diagonal
        return (self.structure.variance / n_references**2) * prior

    def copies_per_point(self) -> int:
        # The cross term's leave-one-out products hold about three (n_basis, n_features) slabs
        # per quadrature node; the prior term about six (n_references, m, m, n_features)
        # arrays per point (one reference row at a time), counted here in the same slabs.
        m, n_references = len(self.nodes), len(self.reference_cross)
        prior = -(-6 * n_references * m * m // max(self.Z.shape[0], 1))
        return max(3 * m + 3, prior)


# An output of a linear model of coregionalisation: each term's scheme, summed.
ProductShapley.register(CoregionalTerms)(term_scheme)
