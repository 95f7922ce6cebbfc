"""Product kernels: ``k(x, x') = variance * prod_j k_j(x_j, x'_j)`` with one-dimensional factors.

Exact Shapley values of ordinary GPs (``gpexplain.functionals.product_shapley``) and closed-form
Sobol indices (``gpexplain.explain.sensitivity``) need the kernel as a product over features of
one-dimensional stationary correlation functions ``k_j`` with ``k_j(a, a) = 1``. This module
recognises that structure and evaluates it:

* ``gx.kernels.RBF`` (isotropic or ARD): ``k_j(a, b) = exp(-(a - b)^2 / (2 l_j^2))``; features
  with an infinite lengthscale get ``k_j = 1``;
* GPyTorch kernels (``GPyTorchKernel``) built from ``RBFKernel`` (on any number of features: the
  squared exponential factorises), ``MaternKernel`` (nu 1/2, 3/2, 5/2) and ``RQKernel`` acting on
  *one* feature each, combined by ``ScaleKernel``, ``ProductKernel`` and the input scaling of
  ``GPRegressor`` (``InputScaledKernel``). A Matern or RQ kernel over several features is a
  function of their joint distance, not a product, and a sum is not a product: both are
  refused (``product_structure`` returns None).

Several factors acting on the same feature multiply into that feature's ``k_j``.

Per feature, the games of the Shapley values also need the kernel mean embedding under a
one-dimensional measure p_j, ``mu_j(a) = E_{s ~ p_j} k_j(a, s)``, its double integral
``M_j = E_{s, s' ~ p_j} k_j(s, s')`` and (for Sobol indices) the second moments
``E_{s ~ p_j} k_j(s, a) k_j(s, b)``: closed form for squared-exponential factors under
``gx.measures.Gaussian`` (``mu = sqrt(L / (L + D)) exp(-(a - m)^2 / (2 (L + D)))``, ``M =
sqrt(L / (L + 2 D))`` with ``L = l^2``, ``D = std^2``; a product of squared exponentials on one
feature is one squared exponential with ``1 / L = sum 1 / L_f``), exact averages under
``gx.measures.Empirical`` for every factor.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpexplain.kernels.gpytorch_tree import Frame, KernelTreeVisitor
from gpexplain.kernels.measures import Empirical, Gaussian

__all__ = ["Factor", "ProductStructure", "product_structure"]

_SQRT3, _SQRT5 = np.sqrt(3.0), np.sqrt(5.0)


@dataclass(frozen=True)
class Factor:
    """One stationary correlation function of one feature, ``k(a, b) = phi(|a - b| / l)``.

    Attributes
    ----------
    kind : {"se", "matern", "rq"}
    lengthscale : float
        In the units of the feature (positive, finite).
    shape : float
        Matern smoothness nu (0.5, 1.5 or 2.5) or RQ alpha; unused for "se".
    """

    kind: str
    lengthscale: float
    shape: float = 0.0

    def __call__(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """``k(a, b)`` elementwise (broadcast), in [0, 1]."""
        r = np.abs(a - b) / self.lengthscale
        if self.kind == "se":
            return np.exp(-0.5 * r * r)
        if self.kind == "rq":
            return (1.0 + 0.5 * r * r / self.shape) ** -self.shape
        if self.shape == 0.5:
            return np.exp(-r)
        if self.shape == 1.5:
            return (1.0 + _SQRT3 * r) * np.exp(-_SQRT3 * r)
        return (1.0 + _SQRT5 * r + 5.0 / 3.0 * r * r) * np.exp(-_SQRT5 * r)


@dataclass(frozen=True)
class ProductStructure:
    """``k(x, x') = variance * prod_j prod_{f in factors[j]} f(x_j, x'_j)``.

    Attributes
    ----------
    variance : float
        ``k(x, x)``, in squared units of the target.
    factors : tuple of tuples of Factor, one tuple per feature (empty: the kernel ignores it)
    """

    variance: float
    factors: tuple

    @property
    def n_features(self) -> int:
        return len(self.factors)

    def matrices(self, X1: np.ndarray, X2: np.ndarray) -> np.ndarray:
        """``K[a, b, j] = k_j(X1[a, j], X2[b, j])``, shape (n1, n2, n_features); 1 for ignored
        features. ``variance * K.prod(-1)`` is the kernel matrix."""
        return np.stack(
            [self.feature_matrix(j, X1[:, j], X2[:, j]) for j in range(self.n_features)], axis=-1
        )

    def feature_matrix(self, j: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """``k_j(a_s, b_t)`` for two 1-D arrays of values of feature j, shape (len(a), len(b))."""
        K = np.ones((a.shape[0], b.shape[0]))
        for factor in self.factors[j]:
            K *= factor(a[:, None], b[None, :])
        return K

    def embedding(self, X: np.ndarray, measure) -> np.ndarray:
        """Kernel mean embeddings ``mu_j(X[a, j]) = E_{s ~ p_j} k_j(X[a, j], s)``, (n, n_features).

        Raises
        ------
        TypeError
            A Gaussian measure with a Matern or RQ factor (no closed form; use
            ``gx.measures.Empirical``), or a measure that is neither Gaussian nor Empirical.
        """
        if isinstance(measure, Empirical):
            return self.matrices(X, measure.points).mean(axis=1)
        L = self._gaussian_squared_lengthscales(measure)
        D = measure.std**2
        centred_sq = (X - measure.mean) ** 2
        with np.errstate(divide="ignore", invalid="ignore"):
            mu = np.sqrt(L / (L + D)) * np.exp(-0.5 * centred_sq / (L + D))
        return np.where(np.isinf(L), 1.0, mu)

    def double_embedding(self, measure) -> np.ndarray:
        """``M_j = E_{s, s' ~ p_j} k_j(s, s')`` (independent copies), shape (n_features,)."""
        if isinstance(measure, Empirical):
            return self.matrices(measure.points, measure.points).mean(axis=(0, 1))
        L = self._gaussian_squared_lengthscales(measure)
        with np.errstate(divide="ignore", invalid="ignore"):
            M = np.sqrt(L / (L + 2.0 * measure.std**2))
        return np.where(np.isinf(L), 1.0, M)

    def second_moment(self, X1: np.ndarray, X2: np.ndarray, measure) -> np.ndarray:
        """``E2[a, b, j] = E_{s ~ p_j} k_j(s, X1[a, j]) k_j(s, X2[b, j])``, (n1, n2, n_features).

        Gaussian measure (SE factors, ``L = l^2``, ``D = std^2``): the product of two squared
        exponentials is one centred at the midpoint, so
        ``E2 = exp(-(a - b)^2 / (4 L)) sqrt(L / (L + 2 D)) exp(-((a + b) / 2 - mean)^2 /
        (L + 2 D))``. Empirical: the average over the atoms.
        """
        if isinstance(measure, Empirical):
            left = self.matrices(measure.points, X1)
            right = self.matrices(measure.points, X2)
            return np.einsum("sad,sbd->abd", left, right) / measure.points.shape[0]
        L = self._gaussian_squared_lengthscales(measure)
        a, b = X1[:, None, :], X2[None, :, :]
        with np.errstate(divide="ignore", invalid="ignore"):
            E2 = np.exp(-0.25 * (a - b) ** 2 / L) * np.sqrt(L / (L + 2.0 * measure.std**2)) * (
                np.exp(-((0.5 * (a + b) - measure.mean) ** 2) / (L + 2.0 * measure.std**2))
            )
        return np.where(np.isinf(L), 1.0, E2)

    def centred_second_moment(self, X1: np.ndarray, X2: np.ndarray, measure) -> np.ndarray:
        """``C[a, b, j] = E_s[(k_j(s, a) - mu_j(a)) (k_j(s, b) - mu_j(b))]``, (n1, n2, n_features):
        ``second_moment - embedding(X1) embedding(X2)`` without the cancellation.

        For a lengthscale l much wider than the measure's std both terms are close to 1 and
        their difference is O((std / l)^2): subtracting them loses eps (l / std)^2 relative
        (3e-10 at l / std = 1e3; Sobol variances and Shapley effects then disagree with the
        total variance by that much). Gaussian measure: with ``u = a - mean``, ``v = b -
        mean``, ``L = l^2``, ``D = std^2`` the ratio of the two terms is ``exp(Delta)``,

            Delta = log1p(D^2 / (L (L + 2 D))) / 2 - D (u - v)^2 / (4 L (L + D))
                    + D (u + v)^2 / (4 (L + D) (L + 2 D)),

        every term free of cancellation, and ``C = mu(a) mu(b) expm1(Delta)``. Empirical: the
        average over the atoms of the centred products.
        """
        if isinstance(measure, Empirical):
            left = self.matrices(measure.points, X1)
            right = self.matrices(measure.points, X2)
            left = left - left.mean(axis=0)
            right = right - right.mean(axis=0)
            return np.einsum("sad,sbd->abd", left, right) / measure.points.shape[0]
        L = self._gaussian_squared_lengthscales(measure)
        D = measure.std**2
        u, v = (X1 - measure.mean)[:, None, :], (X2 - measure.mean)[None, :, :]
        mu1, mu2 = self.embedding(X1, measure), self.embedding(X2, measure)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            delta = (
                0.5 * np.log1p(D * D / (L * (L + 2.0 * D)))
                - D * (u - v) ** 2 / (4.0 * L * (L + D))
                + D * (u + v) ** 2 / (4.0 * (L + D) * (L + 2.0 * D))
            )
            C = mu1[:, None, :] * mu2[None, :, :] * np.expm1(delta)
        return np.where(np.isinf(L), 0.0, C)

    def centred_double_embedding(self, measure) -> np.ndarray:
        """``1 - double_embedding`` (the prior variance of a centred factor, k_j(s, s) = 1)
        without the cancellation: Gaussian ``-expm1(-log1p(2 D / L) / 2)``."""
        if isinstance(measure, Empirical):
            return 1.0 - self.double_embedding(measure)
        L = self._gaussian_squared_lengthscales(measure)
        with np.errstate(divide="ignore"):
            return -np.expm1(-0.5 * np.log1p(2.0 * measure.std**2 / L))

    def centred_cross_moment(self, X: np.ndarray, measure) -> np.ndarray:
        """``lam[a, j] = E_s[(k_j(s, X[a, j]) - mu_j(X[a, j])) mu_j(s)]``, (n, n_features): the
        covariance over ``s ~ p_j`` of a kernel section with the mean embedding, i.e.
        ``nu_j(a) - M_j mu_j(a)`` with ``nu_j(a) = E_{s, s'} k_j(a, s) k_j(s, s')``.

        Gaussian measure (SE factors, ``u = a - mean``, ``L = l^2``, ``D = std^2``, ``S1 = L^2
        + 3 L D + D^2``): ``lam = M mu(a) expm1(delta(u))`` with the cancellation-free

            delta(u) = log1p(D^2 / S1) / 2 - D^2 u^2 / (2 (L + D) S1).

        Empirical: the average over the atoms of the centred sections times ``mu_j``.
        """
        if isinstance(measure, Empirical):
            columns = []
            for j in range(self.n_features):
                atoms = measure.points[:, j]
                sections = self.feature_matrix(j, X[:, j], atoms)  # (n, S)
                centred = sections - sections.mean(axis=1, keepdims=True)
                atom_embedding = self.feature_matrix(j, atoms, atoms).mean(axis=1)  # mu_j(s)
                columns.append(centred @ atom_embedding / atoms.shape[0])
            return np.stack(columns, axis=-1).reshape(X.shape[0], self.n_features)
        L, D, u = self._gaussian_squared_lengthscales(measure), measure.std**2, X - measure.mean
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            delta = self._embedding_log_ratio(u, L, D)
            lam = self.double_embedding(measure) * self.embedding(X, measure) * np.expm1(delta)
        return np.where(np.isinf(L), 0.0, lam)

    def centred_sandwich(self, X1: np.ndarray, X2: np.ndarray, measure) -> np.ndarray:
        """``G[a, b, j] = E_{s, s'}[c_j(s, X1[a, j]) k_j(s, s') c_j(s', X2[b, j])]`` with the
        centred sections ``c_j(s, a) = k_j(s, a) - mu_j(a)`` and ``s, s' ~ p_j`` independent,
        (n1, n2, n_features): the three-kernel integral ``int k(a, .) E k E k(., b)`` of the
        posterior variance of Sobol indices (``E = D - P``, same-point minus independent pair
        measure).

        Gaussian measure (SE factors): with ``delta`` as in ``centred_cross_moment`` and the
        interaction exponent (``S1`` as there)

            eps(u, v) = log1p(D^4 / (L (L + D) (L + 2 D) (L + 3 D))) / 2
                        - D^2 (D^2 (u - v)^2 - 2 L (L + 3 D) u v) / (2 L (L + D) (L + 3 D) S1),

        the four-term combination ``Gamma - nu mu' - mu nu' + M mu mu'`` is ``M mu(a) mu(b)
        (expm1(delta_a) expm1(delta_b) + exp(delta_a + delta_b) expm1(eps))``, free of the
        cancellation that makes each term ~1 and G ~ (std / l)^6 for wide lengthscales.
        Empirical: ``C1 diag(w) K_ss diag(w) C2^T`` over the atoms (C: centred sections).
        """
        if isinstance(measure, Empirical):
            slabs = []
            for j in range(self.n_features):
                atoms = measure.points[:, j]
                left = self.feature_matrix(j, X1[:, j], atoms)
                right = self.feature_matrix(j, X2[:, j], atoms)
                left = left - left.mean(axis=1, keepdims=True)
                right = right - right.mean(axis=1, keepdims=True)
                gram = self.feature_matrix(j, atoms, atoms)
                slabs.append(left @ gram @ right.T / atoms.shape[0] ** 2)
            return np.stack(slabs, axis=-1).reshape(X1.shape[0], X2.shape[0], self.n_features)
        L, D = self._gaussian_squared_lengthscales(measure), measure.std**2
        u, v = (X1 - measure.mean)[:, None, :], (X2 - measure.mean)[None, :, :]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            S1 = L * L + 3.0 * L * D + D * D
            eps = 0.5 * np.log1p(D**4 / (L * (L + D) * (L + 2.0 * D) * (L + 3.0 * D))) - (
                D * D * (D * D * (u - v) ** 2 - 2.0 * L * (L + 3.0 * D) * u * v)
                / (2.0 * L * (L + D) * (L + 3.0 * D) * S1)
            )
            delta_a = self._embedding_log_ratio(u, L, D)
            delta_b = self._embedding_log_ratio(v, L, D)
            mu1, mu2 = self.embedding(X1, measure), self.embedding(X2, measure)
            G = (self.double_embedding(measure) * mu1[:, None, :] * mu2[None, :, :]) * (
                np.expm1(delta_a) * np.expm1(delta_b) + np.exp(delta_a + delta_b) * np.expm1(eps)
            )
        return np.where(np.isinf(L), 0.0, G)

    def trace_moments(self, measure) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(T_PP, T_PE, T_EE)``, each (n_features,): ``T(A, B) = int A(s1, s2) k_j(s2, s3)
        B(s3, s4) k_j(s4, s1)`` for the independent pair measure P and the centred ``E = D -
        P`` (D: the same point twice): ``T_PP = M^2``, ``T_PE = Var_s mu_j(s)``, ``T_EE =
        E_{s, s'} kc_j(s, s')^2`` with the doubly centred kernel ``kc``.

        Gaussian measure (SE factors): ``T_PE = M^2 expm1(d1)``, ``T_EE = M^2 (expm1(d2) - 2
        expm1(d1))``, ``d1 = log1p(D^2 / ((L + D) (L + 3 D))) / 2``, ``d2 = log1p(4 D^2 / (L
        (L + 4 D))) / 2`` (both O((D / L)^2), so no digits are lost for wide lengthscales).
        """
        M = self.double_embedding(measure)
        if isinstance(measure, Empirical):
            between, within = np.zeros(self.n_features), np.zeros(self.n_features)
            for j in range(self.n_features):
                gram = self.feature_matrix(j, measure.points[:, j], measure.points[:, j])
                row_means = gram.mean(axis=1)
                between[j] = np.mean((row_means - M[j]) ** 2)
                centred = gram - row_means[:, None] - row_means[None, :] + M[j]
                within[j] = np.mean(centred**2)
            return M * M, between, within
        L, D = self._gaussian_squared_lengthscales(measure), measure.std**2
        with np.errstate(divide="ignore", invalid="ignore"):
            d1 = np.expm1(0.5 * np.log1p(D * D / ((L + D) * (L + 3.0 * D))))
            d2 = np.expm1(0.5 * np.log1p(4.0 * D * D / (L * (L + 4.0 * D))))
        wide = np.isinf(L)
        return M * M, np.where(wide, 0.0, M * M * d1), np.where(wide, 0.0, M * M * (d2 - 2 * d1))

    @staticmethod
    def _embedding_log_ratio(u, L, D):
        """``log(nu(a) / (M mu(a)))`` for an SE factor under a Gaussian (centred ``u``)."""
        S1 = L * L + 3.0 * L * D + D * D
        return 0.5 * np.log1p(D * D / S1) - D * D * u * u / (2.0 * (L + D) * S1)

    def _gaussian_squared_lengthscales(self, measure) -> np.ndarray:
        """Per feature, the squared lengthscale of the product of its SE factors (inf if none)."""
        if not isinstance(measure, Gaussian):
            raise TypeError(
                "measure must be gx.measures.Gaussian or gx.measures.Empirical, got "
                f"{type(measure).__name__}."
            )
        inverse = np.zeros(self.n_features)
        for j, factors in enumerate(self.factors):
            for factor in factors:
                if factor.kind != "se":
                    raise TypeError(
                        f"feature {j} has a {factor.kind} kernel factor: its mean embedding "
                        "under a Gaussian measure has no closed form; use "
                        "gx.measures.Empirical(X) (exact averages over a sample) instead."
                    )
                inverse[j] += factor.lengthscale**-2.0
        with np.errstate(divide="ignore"):
            return 1.0 / inverse


def product_structure(kernel, n_features: int) -> ProductStructure | None:
    """The product structure of a gpexplain kernel, or None when it has none.

    Parameters
    ----------
    kernel : gpexplain kernel (``RBF`` or ``GPyTorchKernel``; anything else gives None)
    n_features : int

    Returns
    -------
    ProductStructure or None
    """
    from gpexplain.kernels.gpytorch_adapter import GPyTorchKernel
    from gpexplain.kernels.rbf import RBF

    if type(kernel) is RBF:
        lengthscale = kernel._lengthscales(n_features)
        factors = tuple(
            (Factor("se", float(length)),) if np.isfinite(length) else ()
            for length in lengthscale
        )
        return ProductStructure(float(kernel.variance), factors)
    if type(kernel) is GPyTorchKernel:
        return _Product(n_features).visit(kernel.module, n_features)
    return None


class _Product(KernelTreeVisitor["ProductStructure | None"]):
    """Fold a GPyTorch kernel tree into a ``ProductStructure``; None for anything else."""

    def __init__(self, n_features: int):
        self.n_features = n_features

    def unsupported(self, module, reason: str) -> None:
        return None

    def scaled(self, result, outputscale: float):
        if result is None:
            return None
        return ProductStructure(result.variance * outputscale, result.factors)

    def sum(self, results):
        return None  # a sum of products is not a product

    def product(self, results):
        variance, factors = 1.0, [() for _ in range(self.n_features)]
        for found in results:  # lazily: stop at the first part that is not a product
            if found is None:
                return None
            variance *= found.variance
            factors = [mine + theirs for mine, theirs in zip(factors, found.factors, strict=True)]
        return ProductStructure(variance, tuple(factors))

    def leaf(self, module, frame: Frame) -> ProductStructure | None:
        import gpytorch.kernels as gk

        kind = type(module)  # exact types: subclasses may change the formula
        if kind not in (gk.RBFKernel, gk.MaternKernel, gk.RQKernel):
            return None
        if kind is not gk.RBFKernel and frame.size != 1:
            return None  # a function of the joint distance of several features
        lengthscale = module.lengthscale.detach().double().numpy().reshape(-1)
        lengthscale = np.broadcast_to(lengthscale, frame.dims.shape) * frame.scale
        if kind is gk.RBFKernel:
            made = [Factor("se", float(length)) for length in lengthscale]
        elif kind is gk.MaternKernel:
            made = [Factor("matern", float(lengthscale[0]), float(module.nu))]
        else:
            alpha = float(module.alpha.detach().reshape(-1)[0])
            made = [Factor("rq", float(lengthscale[0]), alpha)]
        factors = [() for _ in range(self.n_features)]
        for dim, factor in zip(frame.dims, made, strict=True):
            factors[int(dim)] = factors[int(dim)] + (factor,)
        return ProductStructure(1.0, tuple(factors))
