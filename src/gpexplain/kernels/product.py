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
``gx.measures.Empirical`` for every factor, and under ``gx.measures.Uniform`` weighted sums over
a composite Gauss-Legendre rule fine enough for the feature's SE and RQ factors to be exact to
~1e-15 (``Uniform.rule``, ``_resolution``; Matern factors, with their kink, are refused). Both
are weighted atoms per feature (``_rules``); centred quantities are summed from differences
to a central atom (``centred_sections``), so they keep their digits when the lengthscale is far
longer than the box.

The centred moments (``centred_second_moment``, ``centred_cross_moment``, ``centred_sandwich``,
``trace_moments``) are computed as those of the kernel paired with itself,
``gpexplain.kernels.product_pairs.PairStructure(k, k)``, whose formulas also mix the different
lengthscales of two or three kernels (the terms of a linear model of coregionalisation).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpexplain._quad import matmul
from gpexplain._torch import to_numpy
from gpexplain.kernels.gpytorch_adapter import GPyTorchKernel
from gpexplain.kernels.gpytorch_tree import Frame, KernelTreeVisitor
from gpexplain.kernels.measures import Empirical, Uniform, check_measure
from gpexplain.kernels.product_pairs import PairStructure
from gpexplain.kernels.rbf import RBF

__all__ = ["Factor", "ProductStructure", "product_structure"]

_SQRT3, _SQRT5 = np.sqrt(3.0), np.sqrt(5.0)

# Measures integrated by weighted atoms (``rule``): the data's columns, or Gauss-Legendre.
_ATOM_MEASURES = (Empirical, Uniform)


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
        return np.exp(self.log(a, b))

    def log(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """``log k(a, b)`` elementwise (broadcast), <= 0, accurate relative to itself for
        nearby points (log1p), where ``1 - k`` would cancel."""
        r = np.abs(a - b) / self.lengthscale
        if self.kind == "se":
            return -0.5 * r * r
        if self.kind == "rq":
            return -self.shape * np.log1p(0.5 * r * r / self.shape)
        if self.shape == 0.5:
            return -r
        if self.shape == 1.5:
            return np.log1p(_SQRT3 * r) - _SQRT3 * r
        return np.log1p(_SQRT5 * r + 5.0 / 3.0 * r * r) - _SQRT5 * r


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
        K = np.ones((a.shape[0], b.shape[0]), dtype=np.result_type(a, b, np.float64))
        for factor in self.factors[j]:
            K *= factor(a[:, None], b[None, :])
        return K

    def log_feature_matrix(self, j: int, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """``log k_j(a_s, b_t)``, shape (len(a), len(b)) (see ``Factor.log``)."""
        log_K = np.zeros((a.shape[0], b.shape[0]), dtype=np.result_type(a, b, np.float64))
        for factor in self.factors[j]:
            log_K += factor.log(a[:, None], b[None, :])
        return log_K

    def centred_sections(self, j: int, x: np.ndarray, atoms: np.ndarray,
                         weights: np.ndarray) -> np.ndarray:
        """``c[a, s] = k_j(x_a, s_s) - sum_t w_t k_j(x_a, t_t)`` over a weighted rule of feature
        j, shape (len(x), len(atoms)).

        When the correlation varies little over the atoms (lengthscales far wider than their
        spread) ``c`` is O(spread / l) (O((spread / l)^2) near the centre) while each term is
        ~1, and subtracting them loses ``eps (l / spread)^2`` relative. Instead the sections
        are first taken relative to one atom r near the centre, ``d(x, s) = k(x, s) - k(x, r)
        = k(x, r) expm1(log k(x, s) - log k(x, r))`` (exact to round-off; where the exponent
        is not small the plain difference is as accurate), and ``c = d - sum_t w_t d(x, t)``:
        d is of the order of c, so this subtraction keeps c's digits.
        """
        log_k = self.log_feature_matrix(j, x, atoms)
        sections = np.exp(log_k)  # the feature matrix, from the logs already at hand
        ref = int(np.argmin(np.abs(atoms - matmul(weights, atoms))))
        exponent = log_k - log_k[:, ref:ref + 1]
        at_ref = sections[:, ref:ref + 1]
        differences = np.where(np.abs(exponent) < 1.0,
                               at_ref * np.expm1(np.minimum(exponent, 1.0)), sections - at_ref)
        return differences - matmul(differences, weights)[:, None]

    def embedding(self, X: np.ndarray, measure) -> np.ndarray:
        """Kernel mean embeddings ``mu_j(X[a, j]) = E_{s ~ p_j} k_j(X[a, j], s)``, (n, n_features).

        Raises
        ------
        TypeError
            A Gaussian measure with a Matern or RQ factor (no closed form; use
            ``gx.measures.Empirical``), a Uniform one with a Matern factor, or a measure that
            is not Gaussian, Empirical or Uniform.
        ValueError
            A Uniform box more than 512 lengthscales wide (``Uniform.rule``).
        """
        if isinstance(measure, _ATOM_MEASURES):
            columns = [matmul(self.feature_matrix(j, X[:, j], nodes), weights)
                       for j, (nodes, weights) in enumerate(self._rules(measure))]
            return np.stack(columns, axis=-1).reshape(X.shape[0], self.n_features)
        L, D, (u,) = self._gaussian_units(measure, X)
        with np.errstate(divide="ignore", invalid="ignore"):
            mu = np.sqrt(L / (L + D)) * np.exp(-0.5 * u * u / (L + D))
        return np.where(np.isinf(L), 1.0, mu)

    def double_embedding(self, measure) -> np.ndarray:
        """``M_j = E_{s, s' ~ p_j} k_j(s, s')`` (independent copies), shape (n_features,)."""
        if isinstance(measure, _ATOM_MEASURES):
            return np.array([matmul(matmul(weights, self.feature_matrix(j, nodes, nodes)), weights)
                             for j, (nodes, weights) in enumerate(self._rules(measure))])
        L, D, _ = self._gaussian_units(measure)
        with np.errstate(divide="ignore", invalid="ignore"):
            M = np.sqrt(L / (L + 2.0 * D))
        return np.where(np.isinf(L), 1.0, M)

    def second_moment(self, X1: np.ndarray, X2: np.ndarray, measure) -> np.ndarray:
        """``E2[a, b, j] = E_{s ~ p_j} k_j(s, X1[a, j]) k_j(s, X2[b, j])``, (n1, n2, n_features).

        Gaussian measure (SE factors, ``L = l^2``, ``D = std^2``): the product of two squared
        exponentials is one centred at the midpoint, so
        ``E2 = exp(-(a - b)^2 / (4 L)) sqrt(L / (L + 2 D)) exp(-((a + b) / 2 - mean)^2 /
        (L + 2 D))``. Empirical: the average over the atoms.
        """
        if isinstance(measure, _ATOM_MEASURES):
            return PairStructure(self, self)._atom_products(X1, X2, measure, centred=False)
        L, D, (u, v) = self._gaussian_units(measure, X1, X2)
        u, v = u[:, None, :], v[None, :, :]
        with np.errstate(divide="ignore", invalid="ignore"):
            E2 = np.exp(-0.25 * (u - v) ** 2 / L) * np.sqrt(L / (L + 2.0 * D)) * (
                np.exp(-((0.5 * (u + v)) ** 2) / (L + 2.0 * D))
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
        return PairStructure(self, self).centred_second_moment(X1, X2, measure)

    def centred_double_embedding(self, measure) -> np.ndarray:
        """``1 - double_embedding`` (the prior variance of a centred factor, k_j(s, s) = 1)
        without the cancellation: Gaussian ``-expm1(-log1p(2 D / L) / 2)``."""
        if isinstance(measure, _ATOM_MEASURES):  # 1 - k = -expm1(log k), pair by pair
            return np.array([-matmul(matmul(
                weights, np.expm1(self.log_feature_matrix(j, atoms, atoms))), weights)
                             for j, (atoms, weights) in enumerate(self._rules(measure))])
        L, D, _ = self._gaussian_units(measure)
        with np.errstate(divide="ignore"):
            return -np.expm1(-0.5 * np.log1p(2.0 * D / L))

    def centred_cross_moment(self, X: np.ndarray, measure) -> np.ndarray:
        """``lam[a, j] = E_s[(k_j(s, X[a, j]) - mu_j(X[a, j])) mu_j(s)]``, (n, n_features): the
        covariance over ``s ~ p_j`` of a kernel section with the mean embedding, i.e.
        ``nu_j(a) - M_j mu_j(a)`` with ``nu_j(a) = E_{s, s'} k_j(a, s) k_j(s, s')``.

        Gaussian measure (SE factors, ``u = a - mean``, ``L = l^2``, ``D = std^2``, ``S1 = L^2
        + 3 L D + D^2``): ``lam = M mu(a) expm1(delta(u))`` with the cancellation-free

            delta(u) = log1p(D^2 / S1) / 2 - D^2 u^2 / (2 (L + D) S1).

        Empirical: the average over the atoms of the centred sections times ``mu_j``.
        """
        return PairStructure(self, self).centred_cross_moment(X, measure)

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
        return PairStructure(self, self).centred_sandwich(X1, X2, measure)

    def trace_moments(self, measure) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(T_PP, T_PE, T_EE)``, each (n_features,): ``T(A, B) = int A(s1, s2) k_j(s2, s3)
        B(s3, s4) k_j(s4, s1)`` for the independent pair measure P and the centred ``E = D -
        P`` (D: the same point twice): ``T_PP = M^2``, ``T_PE = Var_s mu_j(s)``, ``T_EE =
        E_{s, s'} kc_j(s, s')^2`` with the doubly centred kernel ``kc``.

        Gaussian measure (SE factors): ``T_PE = M^2 expm1(d1)``, ``T_EE = M^2 (expm1(d2) - 2
        expm1(d1))``, ``d1 = log1p(D^2 / ((L + D) (L + 3 D))) / 2``, ``d2 = log1p(4 D^2 / (L
        (L + 4 D))) / 2`` (both O((D / L)^2), so no digits are lost for wide lengthscales).
        """
        return PairStructure(self, self).trace_moments(measure)

    def _doubly_centred_gram(self, j, atoms, weights) -> np.ndarray:
        """``kc(s, t) = k_j(s, t) - mu_j(s) - mu_j(t) + M_j`` over the atoms, (m, m), from the
        centred sections ``c(s, t) = k_j(s, t) - mu_j(s)``: ``kc = c - w^T c``."""
        sections = self.centred_sections(j, atoms, atoms, weights)
        return sections - matmul(weights, sections)

    def _rules(self, measure) -> list:
        """Per feature, the atoms and weights of an Empirical or Uniform measure.

        Raises
        ------
        TypeError
            A Matern factor under a Uniform measure: its kink at every point would limit the
            Gauss-Legendre rule to a few digits.
        """
        if isinstance(measure, Empirical):
            return [measure.rule(j) for j in range(self.n_features)]
        return [measure.rule(j, self._resolution(j)) for j in range(self.n_features)]

    def _resolution(self, j: int) -> float:
        """The length over which feature j's correlation varies, for ``Uniform.rule``: the
        lengthscale of an SE factor; ``l min(1, sqrt(alpha / 2))`` of an RQ one (its poles at
        ``+-i l sqrt(2 alpha)`` bound the Gauss-Legendre convergence); the smallest over the
        factors (inf without factors)."""
        lengths = [np.inf]
        for factor in self.factors[j]:
            if factor.kind == "matern":
                raise TypeError(
                    f"feature {j} has a Matern kernel factor: its kink at every point limits "
                    "Gauss-Legendre integration over a gx.measures.Uniform box to a few "
                    "digits, so it is refused; use gx.measures.Empirical(sample) with a sample "
                    "drawn from the box (exact averages over that sample) instead."
                )
            scale = 1.0 if factor.kind == "se" else min(1.0, np.sqrt(factor.shape / 2.0))
            lengths.append(factor.lengthscale * scale)
        return min(lengths)

    def _gaussian_units(self, measure, *points) -> tuple:
        """``(L, D, [u, ...])`` of the Gaussian-measure closed forms in units of each feature's
        std: ``L = l^2 / std^2``, ``D = 1``, ``u = (x - mean) / std`` for each array of points.

        Every closed form is a function of ``L / D`` and ``u^2 / D`` (kernel values are
        dimensionless), so these units change no value; in the file's units products such as
        ``L (L + D) (L + 3 D) S1 ~ std^10`` overflow once a column's std passes ~1e30.
        """
        std = measure.std
        L = self._gaussian_squared_lengthscales(measure) / std**2
        return L, np.ones_like(L), [(P - measure.mean) / std for P in points]

    def _gaussian_squared_lengthscales(self, measure) -> np.ndarray:
        """Per feature, the squared lengthscale of the product of its SE factors (inf if none)."""
        # Atom measures (Empirical, Uniform) never reach here: what remains must be Gaussian.
        check_measure(measure)
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
        lengthscale = to_numpy(module.lengthscale).astype(np.float64).reshape(-1)
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
