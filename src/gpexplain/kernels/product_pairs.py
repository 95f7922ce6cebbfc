"""Integrals that mix two (or three) product kernels over a product measure, per feature.

The Sobol indices of a sum of product kernels (the outputs of a linear model of
coregionalisation, ``sum_q B^q_ii k_q``, each ``k_q = s2_q prod_j k_{q,j}`` with its own ARD
lengthscales) are quadratic forms whose pair matrices mix two terms: for the kernel sections
``k_q(., a)`` and ``k_r(., b)`` of feature j under ``s ~ p_j``,

    C^{qr}(a, b)   = E_s[(k_q(s, a) - mu_q(a)) (k_r(s, b) - mu_r(b))]
    lam^{pr}(b)    = Cov_s(mu_p(s), k_r(s, b))
    G^{qpr}(a, b)  = E_{s, s'}[c_q(s, a) k_p(s, s') c_r(s', b)]        (c: centred sections)
    T^{qr}         = (M_q M_r, Cov_s(mu_q(s), mu_r(s)), E_{s, s'}[kc_q(s, s') kc_r(s, s')])

(kc: doubly centred kernel). ``PairStructure(left, right)`` evaluates them for two
``ProductStructure``s; ``ProductStructure``'s own centred moments are the pair of a kernel
with itself (they call this module), so one set of formulas serves a single kernel and every
pair of terms.

Gaussian measure, SE factors, in units of the feature's std (``L = l_q^2 / std^2``, ``R =
l_r^2 / std^2``, ``P`` the middle kernel's, ``u, v`` the centred points): the product of
sections is a Gaussian integral, and its ratio to the product of embeddings is ``exp(Delta)``
with the cancellation-free

    Delta_{L,R}(u, v) = log1p(1 / S) / 2 - u^2 / (2 S (L + 1)) - v^2 / (2 S (R + 1)) + u v / S,
    S = L R + L + R,

so ``C = mu_q(u) mu_r(v) expm1(Delta_{L,R}(u, v))``; ``lam = M_p mu_r(v) expm1(Delta_{P+1,
R}(0, v))`` (``mu_p`` is itself a squared exponential of squared lengthscale ``P + 1``); the
three-kernel ``G = M_p mu_q mu_r (expm1(d_a) expm1(d_b) + exp(d_a + d_b) expm1(eps))`` with
``d_a = Delta_{P+1,L}(0, u)``, ``d_b = Delta_{P+1,R}(0, v)`` and (derived with SymPy, the
two-dimensional Gaussian integral over (s, s'))

    eps = log1p(1 / ((P + 2) T)) / 2 - u^2 / (2 S_{P+1,L} T) - v^2 / (2 S_{P+1,R} T) + u v / T,
    T = P L R + P L + P R + P + 2 L R + L + R;

the trace tables ``M_q M_r (1, expm1(d1), expm1(d2) - 2 expm1(d1))`` with ``d1 = log1p(1 /
S_{L+1,R+1}) / 2`` and ``d2 = log1p(4 / (L R + 2 L + 2 R)) / 2``. With L = R = P these are
``ProductStructure``'s single-kernel forms. A feature that a kernel ignores (infinite
lengthscale: its factor is 1, its centred section 0) makes every centred quantity of that
feature 0. Empirical and Uniform measures: weighted atoms common to the kernels (the finer
Uniform rule of the two), averages of centred sections (``ProductStructure.centred_sections``).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from gpexplain._quad import matmul
from gpexplain.kernels.measures import Empirical, Uniform

__all__ = ["PairStructure", "ProductTerms"]

_ATOM_MEASURES = (Empirical, Uniform)


def _log_ratio(L, R, u, v):
    """``Delta_{L,R}(u, v)`` of the module docstring (broadcast)."""
    S = L * R + L + R
    return 0.5 * np.log1p(1.0 / S) - u * u / (2.0 * S * (L + 1.0)) - v * v / (
        2.0 * S * (R + 1.0)) + u * v / S


@dataclass(frozen=True)
class PairStructure:
    """Per-feature integrals mixing two product kernels ``left`` (q) and ``right`` (r).

    Attributes
    ----------
    left, right : ProductStructure
        Over the same features; ``PairStructure(k, k)`` gives ``k``'s own centred moments.
    """

    left: object
    right: object

    def _units(self, measure, *points):
        """``(L, R, [u, ...])``: both kernels' squared lengthscales in std units, centred
        points (``ProductStructure._gaussian_units``; D = 1)."""
        L, _, scaled = self.left._gaussian_units(measure, *points)
        R, _, _ = self.right._gaussian_units(measure)
        return L, R, scaled

    def _rules(self, measure, *others) -> list:
        """Atoms and weights per feature fine enough for every kernel involved."""
        kernels = [self.left, self.right, *others]
        if all(kernel is self.left for kernel in kernels):
            return self.left._rules(measure)
        factors = tuple(sum(parts, ()) for parts in zip(*(k.factors for k in kernels),
                                                         strict=True))
        return type(self.left)(1.0, factors)._rules(measure)

    def centred_second_moment(self, X1: np.ndarray, X2: np.ndarray, measure) -> np.ndarray:
        """``C[a, b, j] = E_s[(k_{q,j}(s, X1[a, j]) - mu_q) (k_{r,j}(s, X2[b, j]) - mu_r)]``,
        (n1, n2, n_features), without cancellation (module docstring).

        Raises
        ------
        TypeError
            As ``ProductStructure.embedding`` (a measure or factor without a closed form).
        """
        if isinstance(measure, _ATOM_MEASURES):
            return self._atom_products(X1, X2, measure, centred=True)
        L, R, (u, v) = self._units(measure, X1, X2)
        u, v = u[:, None, :], v[None, :, :]
        mu1, mu2 = self.left.embedding(X1, measure), self.right.embedding(X2, measure)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            C = mu1[:, None, :] * mu2[None, :, :] * np.expm1(_log_ratio(L, R, u, v))
        return np.where(np.isinf(L) | np.isinf(R), 0.0, C)

    def centred_cross_moment(self, X: np.ndarray, measure) -> np.ndarray:
        """``lam[a, j] = Cov_{s ~ p_j}(mu_{q,j}(s), k_{r,j}(s, X[a, j]))``, (n, n_features): the
        left kernel's mean embedding against the right kernel's sections.

        Raises
        ------
        TypeError
            As ``ProductStructure.embedding``.
        """
        if isinstance(measure, _ATOM_MEASURES):
            columns = []
            for j, (atoms, weights) in enumerate(self._rules(measure)):
                centred = self.right.centred_sections(j, X[:, j], atoms, weights)  # (n, S)
                # mu_q(s) - M_q = sum_t w_t c_q(t, s): the centred embedding, no cancellation
                atom_embedding = matmul(weights,
                                        self.left.centred_sections(j, atoms, atoms, weights))
                columns.append(matmul(centred, weights * atom_embedding))
            return np.stack(columns, axis=-1).reshape(X.shape[0], self.left.n_features)
        L, R, (v,) = self._units(measure, X)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            lam = (self.left.double_embedding(measure) * self.right.embedding(X, measure)
                   * np.expm1(_log_ratio(L + 1.0, R, 0.0, v)))
        return np.where(np.isinf(L) | np.isinf(R), 0.0, lam)

    def centred_sandwich(self, X1: np.ndarray, X2: np.ndarray, measure,
                         middle=None) -> np.ndarray:
        """``G[a, b, j] = E_{s, s'}[c_q(s, X1[a, j]) k_p(s, s') c_r(s', X2[b, j])]``, (n1, n2,
        n_features), with ``k_p`` the ``middle`` kernel's factor (default: ``left``).

        Raises
        ------
        TypeError
            As ``ProductStructure.embedding``.
        """
        middle = self.left if middle is None else middle
        if isinstance(measure, _ATOM_MEASURES):
            slabs = []
            for j, (atoms, weights) in enumerate(self._rules(measure, middle)):
                left = self.left.centred_sections(j, X1[:, j], atoms, weights) * weights
                right = self.right.centred_sections(j, X2[:, j], atoms, weights) * weights
                # left and right sum to zero over the atoms, so the Gram matrix may be
                # replaced by its doubly centred form, which is small where they are
                slabs.append(matmul(matmul(left, middle._doubly_centred_gram(j, atoms, weights)),
                                     right.T))
            return np.stack(slabs, axis=-1).reshape(X1.shape[0], X2.shape[0],
                                                    self.left.n_features)
        L, R, (u, v) = self._units(measure, X1, X2)
        P, _, _ = middle._gaussian_units(measure)
        u, v = u[:, None, :], v[None, :, :]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            T = P * L * R + P * L + P * R + P + 2.0 * L * R + L + R
            S_left, S_right = (P + 1.0) * L + P + 1.0 + L, (P + 1.0) * R + P + 1.0 + R
            eps = (0.5 * np.log1p(1.0 / ((P + 2.0) * T)) - u * u / (2.0 * S_left * T)
                   - v * v / (2.0 * S_right * T) + u * v / T)
            delta_a = _log_ratio(P + 1.0, L, 0.0, u)
            delta_b = _log_ratio(P + 1.0, R, 0.0, v)
            mu1, mu2 = self.left.embedding(X1, measure), self.right.embedding(X2, measure)
            G = (middle.double_embedding(measure) * mu1[:, None, :] * mu2[None, :, :]) * (
                np.expm1(delta_a) * np.expm1(delta_b) + np.exp(delta_a + delta_b) * np.expm1(eps)
            )
        return np.where(np.isinf(L) | np.isinf(R) | np.isinf(P), 0.0, G)

    def trace_moments(self, measure) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(T_PP, T_PE, T_EE)``, each (n_features,): ``T(A, B) = int A(s1, s2) k_q(s2, s3)
        B(s3, s4) k_r(s4, s1)`` for the independent pair measure P and ``E = D - P``:
        ``M_q M_r``, ``Cov_s(mu_q(s), mu_r(s))`` (also ``T_EP``) and ``E kc_q kc_r``.

        Raises
        ------
        TypeError
            As ``ProductStructure.embedding``.
        """
        MM = self.left.double_embedding(measure) * self.right.double_embedding(measure)
        if isinstance(measure, _ATOM_MEASURES):
            between, within = np.zeros_like(MM), np.zeros_like(MM)
            for j, (atoms, weights) in enumerate(self._rules(measure)):
                left = matmul(weights, self.left.centred_sections(j, atoms, atoms, weights))
                right = matmul(weights, self.right.centred_sections(j, atoms, atoms, weights))
                between[j] = matmul(weights, left * right)
                within[j] = matmul(matmul(weights, (
                    self.left._doubly_centred_gram(j, atoms, weights)
                    * self.right._doubly_centred_gram(j, atoms, weights))), weights)
            return MM, between, within
        L, R, _ = self._units(measure)
        with np.errstate(divide="ignore", invalid="ignore"):
            d1 = np.expm1(0.5 * np.log1p(1.0 / ((L + 1.0) * (R + 1.0) + L + R + 2.0)))
            d2 = np.expm1(0.5 * np.log1p(4.0 / (L * R + 2.0 * L + 2.0 * R)))
        wide = np.isinf(L) | np.isinf(R)
        return MM, np.where(wide, 0.0, MM * d1), np.where(wide, 0.0, MM * (d2 - 2 * d1))

    def _atom_products(self, X1, X2, measure, centred: bool) -> np.ndarray:
        """``sum_s w_s e_q(s, X1[a, j]) e_r(s, X2[b, j])`` over each feature's atoms, ``e`` the
        factor or its centred section, (n1, n2, n_features)."""
        slabs = []
        for j, (atoms, weights) in enumerate(self._rules(measure)):
            if centred:
                left = self.left.centred_sections(j, X1[:, j], atoms, weights)
                right = self.right.centred_sections(j, X2[:, j], atoms, weights)
            else:
                left = self.left.feature_matrix(j, X1[:, j], atoms)
                right = self.right.feature_matrix(j, X2[:, j], atoms)
            slabs.append(matmul(left * weights, right.T))
        return np.stack(slabs, axis=-1).reshape(X1.shape[0], X2.shape[0], self.left.n_features)


@dataclass(frozen=True)
class ProductTerms:
    """A weighted sum of Q product kernels, ``sum_q b_q kappa_q``, on a stacked basis.

    Row ``(q, n)`` of the stacked basis (index ``q N + n``) is the section ``kappa_q(., Z[n])``
    of term q's unit-variance kernel, so a function ``sum_q kappa_q(., Z) w_q`` is one
    coefficient vector over Q N rows and every pair matrix of the Sobol indices is (Q N, Q N)
    with (q, r) blocks from ``PairStructure(kappa_q, kappa_r)``. One term with weight 1 is a
    single product kernel (``gpexplain.explain.sensitivity``'s plain case).

    Attributes
    ----------
    structures : tuple of ProductStructure (Q,)
        The terms' kernels (their ``variance`` is not used: callers put it in the weights).
    weights : ndarray (Q,)
        ``b_q``, the prior covariance's weight of each term.
    Z : ndarray (N, n_features)
        The basis points every term shares.
    """

    structures: tuple
    weights: np.ndarray
    Z: np.ndarray

    @property
    def n_basis(self) -> int:
        """Q N, the rows of the stacked basis."""
        return len(self.structures) * len(self.Z)

    def blocks(self, chunk_size: int):
        """``(stacked rows, q, rows of Z)`` slices of at most ``chunk_size`` rows, each within
        one term, covering the stacked basis in order."""
        n = len(self.Z)
        for q in range(len(self.structures)):
            for start in range(0, n, chunk_size):
                local = slice(start, min(start + chunk_size, n))
                yield slice(q * n + local.start, q * n + local.stop), q, local

    def embedding(self, measure) -> np.ndarray:
        """``mu_q(Z[n])`` stacked, (Q N, n_features)."""
        return np.concatenate([s.embedding(self.Z, measure) for s in self.structures])

    def centred_second_moment(self, q: int, rows: slice, measure) -> np.ndarray:
        """``C^{qr}(Z[rows], Z)`` for every r, stacked on the second axis, (rows, Q N, d)."""
        return np.concatenate([
            PairStructure(self.structures[q], right).centred_second_moment(
                self.Z[rows], self.Z, measure) for right in self.structures], axis=1)

    def priors(self, measure):
        """``(b_p, M_p, 1 - M_p)`` per term: the prior term of each index's expectation."""
        for weight, structure in zip(self.weights, self.structures, strict=True):
            yield (weight, structure.double_embedding(measure),
                   structure.centred_double_embedding(measure))

    def trace_tables(self, measure):
        """``(b_q b_r, (PP, PE, EP, EE))`` per pair of terms (each table (d,)): the trace
        ``tr(W k W k)`` of ``k = sum_q b_q kappa_q`` is the weighted sum of the pairs'."""
        for (bq, left), (br, right) in itertools.product(
                zip(self.weights, self.structures, strict=True), repeat=2):
            PP, PE, EE = PairStructure(left, right).trace_moments(measure)
            yield bq * br, (PP, PE, PE, EE)

    def cross_moments(self, measure) -> list:
        """Per middle term p, ``lam^{pr}(Z)`` stacked over r, (Q N, d)."""
        return [np.concatenate([PairStructure(middle, right).centred_cross_moment(
            self.Z, measure) for right in self.structures]) for middle in self.structures]

    def sandwich_tables(self, q: int, rows: slice, measure, mu, lam):
        """``(b_p, tables)`` per middle term p: the three-kernel ``kappa_q(Z[rows], .) W
        kappa_p W kappa_r(., Z)`` per feature for A, B in {P, E}, (PP, PE, EP, EE), each
        (d, rows, Q N) (features first), given ``mu = embedding`` and ``lam =
        cross_moments``."""
        n = len(self.Z)
        here = slice(q * n + rows.start, q * n + rows.stop)
        left = self.structures[q]
        for p, (weight, middle) in enumerate(zip(self.weights, self.structures, strict=True)):
            EE = np.concatenate([PairStructure(left, right).centred_sandwich(
                self.Z[rows], self.Z, measure, middle) for right in self.structures], axis=1)
            yield weight, (
                middle.double_embedding(measure)[:, None, None] * mu.T[:, here, None]
                * mu.T[:, None, :],
                mu.T[:, here, None] * lam[p].T[:, None, :],
                lam[p].T[:, here, None] * mu.T[:, None, :],
                np.moveaxis(EE, -1, 0),
            )
