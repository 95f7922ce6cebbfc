"""The softmax link over C independent latent GPs, ``S_c(f) = exp(f_c) / sum_j exp(f_j)``.

Independent ``f_j ~ N(m_j, s2_j)`` with gradients ``g_j`` (``Cov(f_j, g_jk) = c_jk``):
``E[d S_c / dx_k] = sum_j mu_jk E[d_j S_c] + c_jk E[d_j^2 S_c]`` with
``d_j S_c = S_c (delta_jc - S_j)`` and ``d_j^2 S_c = S_c ((delta_jc - S_j)^2 - S_j (1 - S_j))``
(Seitz 2022, eq. 30); beyond the paper, the feature-by-feature covariance of ``d S_c / dx``
(``Softmax.gradient_covariance``: Stein's lemma per latent, derivatives of S up to the third,
no division by a variance). S depends on the latents only through their differences, so for
C <= ``max_tensor_classes`` the expectations are (C-1)-dimensional: a product trapezoid over
the Cholesky-whitened differences whose step resolves the softmax's unit-width transitions at
any latent variance (1e-10 at latent variances of 1e2 and more;
``gpexplain.links.difference_rule``); above, randomised quasi-Monte Carlo (scrambled Sobol,
``scipy.stats.qmc``) with a standard error.
"""

from __future__ import annotations

import numpy as np
from scipy.special import log_softmax, ndtri
from scipy.stats import qmc

from gpexplain.links.base import (
    LINKS,
    BinaryReduction,
    Form,
    LatentMoments,
    Link,
    as_moments,
    check_gradient_covariance,
    check_gradient_moments,
)
from gpexplain.links.difference_rule import MAX_TENSOR_SIZE, difference_rule
from gpexplain.links.logit import Logit
from gpexplain.links.taylor import SoftmaxTaylor

__all__ = ["Softmax", "SoftmaxQuadrature", "softmax_class_derivatives"]


class SoftmaxQuadrature(Form):
    """The softmax's expectations by the product trapezoid over class differences
    (C <= ``max_tensor_classes``) or randomised QMC (``Softmax._expect``)."""

    def describe(self, n_latents: int) -> str:
        if n_latents > self.link.max_tensor_classes:
            return "randomised QMC"
        return "product trapezoid over class differences"

    def response(self, mean, var):
        return self.link._expect(
            lambda f: np.swapaxes(np.exp(log_softmax(f, axis=-1)), 1, 2), mean, var)

    def gradient(self, mean, var, mu, c, target_class: int):
        return self.link.chain(*self.link.slope_expectations(mean, var, target_class), mu, c)

    def class_moments(self, mean, var, mu, c, target_class: int):
        """``E[S_c]`` (n,) and ``E[d S_c / dx]`` (n, d) from one pass over the nodes."""
        probability, first, second = self.link.class_expectations(mean, var, target_class)
        return probability, self.link.chain(first, second, mu, c)

    def covariance(self, mean, var, mu, c, G, target_class: int):
        """``E[S_c]``, ``E[d S_c / dx]`` and ``Cov[d S_c / dx]`` (``Softmax.gradient_moments``)
        from one pass over the nodes (``Softmax.gradient_covariance`` for the identity)."""
        C = mean.shape[1]
        values = self.link._expect(lambda f: _class_integrands(f, target_class, True),
                                   mean, var)
        probability, first, second = values[:, 0], values[:, 1:C + 1], values[:, C + 1:2 * C + 1]
        h0, h1, h2 = (values[:, 2 * C + 1 + i * C * C:2 * C + 1 + (i + 1) * C * C]
                      .reshape(-1, C, C) for i in range(3))
        gradient = self.link.chain(first, second, mu, c)
        cross = np.einsum("pja,pjk,pkb->pab", mu, h1, c)
        moment = (np.einsum("pja,pjk,pkb->pab", mu, h0, mu) + cross
                  + np.swapaxes(cross, 1, 2) + np.einsum("pja,pjk,pkb->pab", c, h2, c)
                  + np.einsum("pjj,pjab->pab", h0, G))
        cov = moment - gradient[:, :, None] * gradient[:, None, :]
        return probability, gradient, 0.5 * (cov + np.swapaxes(cov, 1, 2))


@LINKS.register("softmax")
class Softmax(Link):
    """Softmax over C independent latent GPs, ``S_c(f) = exp(f_c) / sum_j exp(f_j)``.

    Parameters
    ----------
    approximation : {"quadrature", "taylor"}, default "quadrature"
        ``"taylor"``: Seitz (2022) eq. 37, the Hessian diagonal of eq. 36 at the latent means
        by automatic differentiation (torch).
    max_tensor_classes : int, default 3
        Up to this many classes, a deterministic product rule over the C - 1 latent
        differences (trapezoid, step halved until the rule with twice the step agrees to
        1e-6, which leaves an error near 1e-12; a ``RuntimeWarning`` with the measured gap
        where the node budget of 2^18 per point is not enough); above it, randomised
        quasi-Monte Carlo.
    n_qmc : int, default 4096
        Scrambled Sobol points per replicate (a power of 2).
    n_replicates : int, default 8
        Independent scramblings; the spread of their means gives the standard error.
    seed : int, default 0
        Seed of the scramblings (results are reproducible).

    Attributes
    ----------
    standard_error_ : float
        After a call by randomised QMC: the largest standard error of the Gaussian
        expectations behind the returned values (E[S_c], E[d_j S_c], E[d_j^2 S_c] and, for
        the covariance, E[s_j s_l] and its derivatives); 0.0 for the product rule and Taylor,
        which are deterministic.
    """

    name = "softmax"
    forms = {"quadrature": SoftmaxQuadrature, "taylor": SoftmaxTaylor}

    def __init__(self, approximation: str = "quadrature", max_tensor_classes: int = 3,
                 n_qmc: int = 4096, n_replicates: int = 8, seed: int = 0):
        super().__init__(approximation)
        for label, value, low in (("max_tensor_classes", max_tensor_classes, 1),
                                  ("n_qmc", n_qmc, 2), ("n_replicates", n_replicates, 2)):
            if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < low:
                raise ValueError(f"{label} must be an integer >= {low}, got {value!r}.")
        if n_qmc & (n_qmc - 1):
            raise ValueError(f"n_qmc must be a power of 2 (Sobol balance), got {n_qmc}.")
        self.max_tensor_classes = int(max_tensor_classes)
        self.n_qmc, self.n_replicates, self.seed = int(n_qmc), int(n_replicates), seed

    # -- the C-dimensional expectation ------------------------------------------------------
    def _expect(self, function, mean: np.ndarray, var: np.ndarray) -> np.ndarray:
        """``E[function(f)]`` over independent f_j ~ N(mean_j, var_j); function maps
        (n, N, C) latent samples to (n, K, N) values and must be invariant to adding a
        constant to every f_j (true of S and all its derivatives); returns (n, K)."""
        C = mean.shape[1]
        if C <= self.max_tensor_classes:
            self.standard_error_ = 0.0
            return difference_rule(function, mean, var)
        return self._quasi_monte_carlo(function, mean, var)

    def scrambled_normals(self, dimension: int):
        """Standard normal draws, one (n_qmc, dimension) array per replicate: independent
        scramblings (``seed``) of one Sobol' sequence, mapped through the normal quantile."""
        rng = np.random.default_rng(self.seed)
        for _ in range(self.n_replicates):
            uniform = qmc.Sobol(dimension, scramble=True, seed=rng).random(self.n_qmc)
            # a scrambled point can be exactly 0: clip so the quantile stays finite
            yield ndtri(np.clip(uniform, 1e-300, 1.0 - 1e-16))

    def _quasi_monte_carlo(self, function, mean, var):
        C = mean.shape[1]
        replicates = []
        for normal in self.scrambled_normals(C):
            batch = max(1, MAX_TENSOR_SIZE // (self.n_qmc * C))
            replicates.append(np.concatenate([
                function(mean[i:i + batch, None, :]
                         + np.sqrt(var[i:i + batch, None, :]) * normal[None]).mean(-1)
                for i in range(0, len(mean), batch)
            ]))
        replicates = np.stack(replicates)
        self.standard_error_ = float(
            np.max(replicates.std(0, ddof=1), initial=0.0) / np.sqrt(self.n_replicates)
        )
        return replicates.mean(0)

    # -- public contract --------------------------------------------------------------------
    def _check(self, mean, var, target_class=None):
        mean, var = as_moments(mean, var)
        if mean.ndim != 2 or mean.shape[1] < 2:
            raise ValueError(
                f"softmax mean and var must have shape (n, C) with C >= 2 classes, got "
                f"{mean.shape}."
            )
        if target_class is not None and (
            isinstance(target_class, bool) or not isinstance(target_class, int | np.integer)
            or not 0 <= target_class < mean.shape[1]
        ):
            raise ValueError(
                f"target_class must be a class index in 0..{mean.shape[1] - 1}, got "
                f"{target_class!r}."
            )
        return mean, var

    def expected_response(self, mean, var) -> np.ndarray:
        """``E[S(f)]`` for independent f_j ~ N(mean_j, var_j), shape (n, C).

        Parameters
        ----------
        mean, var : array-like (n, C)

        Raises
        ------
        ValueError
            Bad shapes (C < 2), non-finite values or negative variances.
        """
        return self.form.response(*self._check(mean, var))

    def expected_gradient(self, mean, var, grad_mean, grad_cov, target_class: int) -> np.ndarray:
        """``E[d S_c(f(x)) / dx_k]`` of class ``target_class`` (Seitz 2022, eq. 30).

        Parameters
        ----------
        mean, var : array-like (n, C)
        grad_mean : array-like (n, C, d)
            ``E[d f_j / dx_k]``.
        grad_cov : array-like (n, C, d)
            ``Cov(f_j(x), d f_j(x) / dx_k)``.
        target_class : int
            Index c of the class in 0..C-1.

        Returns
        -------
        ndarray (n, d)
            ``sum_j grad_mean_j E[d_j S_c] + grad_cov_j E[d_j^2 S_c]`` (quadrature or RQMC,
            see ``standard_error_``), or eq. 37 (taylor).

        Raises
        ------
        ValueError
            Bad shapes, values, or ``target_class``.
        """
        mean, var = self._check(mean, var, target_class)
        mu, c = check_gradient_moments(mean, grad_mean, grad_cov, mean.shape)
        return self.form.gradient(mean, var, mu, c, int(target_class))

    @staticmethod
    def chain(first, second, grad_mean, grad_cov) -> np.ndarray:
        """Stein's lemma per latent: ``sum_j grad_mean_j E[d_j S_c] + grad_cov_j E[d_j^2 S_c]``
        from the slope expectations (n, C) and gradient moments (n, C, d); returns (n, d)."""
        return (np.einsum("pj,pjk->pk", first, grad_mean)
                + np.einsum("pj,pjk->pk", second, grad_cov))

    def slope_expectations(self, mean, var, target_class: int):
        """``E[d_j S_c(f)]`` and ``E[d_j^2 S_c(f)]``, each (n, C)."""
        return self.class_expectations(mean, var, target_class)[1:]

    def class_expectations(self, mean, var, target_class: int):
        """``E[S_c(f)]`` (n,), ``E[d_j S_c(f)]`` and ``E[d_j^2 S_c(f)]`` (n, C), in one pass
        over the nodes (what a probability-level explanation needs at each point)."""
        C = mean.shape[1]
        values = self._expect(lambda f: _class_integrands(f, target_class, False), mean, var)
        return values[:, 0], values[:, 1:C + 1], values[:, C + 1:]

    def gradient_moments(self, mean, var, grad_mean, grad_cov, grad_grad_cov,
                         target_class: int):
        """``E[S_c]`` (n,), ``E[d S_c / dx]`` (n, d) and ``Cov[d S_c / dx]`` (n, d, d) from one
        pass over the nodes (see ``gradient_covariance``)."""
        mean, var = self._check(mean, var, target_class)
        mu, c = check_gradient_moments(mean, grad_mean, grad_cov, mean.shape)
        G = check_gradient_covariance(mu, grad_grad_cov)
        if not np.all(np.isfinite(G)):
            raise ValueError("grad_grad_cov must be finite.")
        return self.form.covariance(mean, var, mu, c, G, int(target_class))

    def gradient_covariance(self, mean, var, grad_mean, grad_cov, grad_grad_cov,
                            target_class: int) -> np.ndarray:
        """Posterior covariance of ``d S_c(f(x)) / dx`` across features (beyond the paper).

        With ``s_j = d_j S_c``, ``d S_c / dx = sum_j s_j(f) g_j`` where g_j = grad f_j is
        jointly Gaussian with f_j and independent of the other classes. Conditioning every g_j
        on f and applying Stein's lemma ``E[h(f) (f_j - m_j)] = s2_j E[d_j h]`` per latent
        (the ``c_j c_j^T / s2_j`` of the conditional covariance cancels against the
        ``(f_j - m_j)^2`` moment, so nothing divides by a variance), with
        ``h_jl = s_j s_l``::

            E[grad S_c grad S_c^T] = sum_jl [ mu_j mu_l^T E[h_jl] + mu_j c_l^T E[d_l h_jl]
                                            + c_j mu_l^T E[d_j h_jl] + c_j c_l^T E[d_j d_l h_jl] ]
                                     + sum_j G_j E[s_j^2],

        minus the outer product of ``expected_gradient``. For C = 1 this is the binary
        links' ``E[h] (G + mu mu^T) + (mu c^T + c mu^T) E[h'] + c c^T E[h'']``. The derivatives
        of ``h_jl`` need those of S_c up to the third order, in closed form in S (see
        ``_class_integrands``); the expectations by the same rule as the means (product
        trapezoid over class differences, or randomised QMC, ``standard_error_`` covering
        these expectations too).

        Parameters
        ----------
        mean, var : array-like (n, C)
        grad_mean : array-like (n, C, d)
            ``mu_j = E[d f_j / dx]``.
        grad_cov : array-like (n, C, d)
            ``c_j = Cov(f_j(x), d f_j(x) / dx)``.
        grad_grad_cov : array-like (n, C, d, d)
            ``G_j = Cov(d f_j / dx)`` (the derivative process of class j).
        target_class : int

        Returns
        -------
        ndarray (n, d, d), symmetric positive semi-definite up to rounding.

        Raises
        ------
        ValueError
            ``approximation="taylor"`` (it approximates means only), bad shapes or values, or
            a bad ``target_class``.
        """
        return self.gradient_moments(mean, var, grad_mean, grad_cov, grad_grad_cov,
                                     target_class)[2]

    # -- what a probability-level explanation asks of its link ------------------------------
    def check_latent_count(self, n_latents: int) -> None:
        if n_latents < 2:
            raise ValueError(
                f"link {self.name!r} does not fit {n_latents} latent posterior(s): softmax "
                "needs one per class (C >= 2), logit/probit exactly one."
            )

    def probability_and_gradient(self, latents: list[LatentMoments], target_class: int,
                                 full: bool):
        """As ``Link.probability_and_gradient``; all three from one pass over the nodes."""
        mean, var, grad_mean, grad_cov = (np.stack([m[i] for m in latents], 1)
                                          for i in range(4))
        if full:
            grad_grad_cov = np.stack([m.grad_grad_cov for m in latents], 1)
            return self.gradient_moments(mean, var, grad_mean, grad_cov, grad_grad_cov,
                                         target_class)
        return *self.form.class_moments(mean, var, grad_mean, grad_cov, target_class), None

    def binary_reduction(self, target_class: int, n_latents: int) -> BinaryReduction | None:
        """2 classes: ``S_c(f) = 1 / (1 + exp(f_other - f_c)) = sigma(f_c - f_other)``, the
        logistic of the difference of two independent latents. None for C >= 3 (whose
        covariance is estimated instead) and for the Taylor form."""
        if not self.gives_covariance or n_latents != 2:
            return None
        return BinaryReduction(
            Logit(), ((1.0, target_class), (-1.0, 1 - target_class)),
            " on the logistic of the latent difference f_c - f_other",
        )


def _class_integrands(f: np.ndarray, target: int, second_moments: bool) -> np.ndarray:
    """Rows ``S_c``, ``s_j = d_j S_c``, ``d_j^2 S_c`` (and, if ``second_moments``, the C x C
    blocks ``s_j s_l``, ``d_l (s_j s_l)``, ``d_j d_l (s_j s_l)``) at latents f (n, N, C);
    returns (n, rows, N). The derivatives of S_c are those of ``softmax_class_derivatives``.
    """
    C = f.shape[-1]
    S, e, Sc = _softmax_and_excess(f, target)
    s = Sc * e
    rows = [Sc[None], s, Sc * (e * e - S * (1.0 - S))]
    if second_moments:
        T2, U = _second_and_third(S, e, Sc)
        diagonal = np.arange(C)
        T2_diagonal = T2[diagonal, diagonal]
        us = U * s[None]
        blocks = [
            s[:, None] * s[None],
            T2 * s[None] + s[:, None] * T2_diagonal[None],
            us + np.swapaxes(us, 0, 1) + T2 * T2 + T2_diagonal[:, None] * T2_diagonal[None],
        ]
        rows += [block.reshape((C * C,) + block.shape[2:]) for block in blocks]
    return np.moveaxis(np.concatenate(rows), 0, 1)


def _softmax_and_excess(f: np.ndarray, target: int):
    """``S`` (C, ...), ``e = onehot_target - S`` (C, ...) and ``S_target`` (...) at latents f
    (..., C), classes moved to the leading axis (every operation then runs over contiguous
    slabs)."""
    C = f.shape[-1]
    S = np.moveaxis(np.exp(log_softmax(f, axis=-1)), -1, 0).copy()
    e = np.eye(C)[target].reshape((C,) + (1,) * (S.ndim - 1)) - S
    return S, e, S[target]


def _second_and_third(S, e, Sc):
    """``T2_jl = d_j d_l S_c`` and ``U_jl = d_j^2 d_l S_c``, each (C, C, ...)."""
    diagonal = np.arange(len(S))
    D = -S[:, None] * S[None]
    D[diagonal, diagonal] += S
    T2 = Sc * (e[:, None] * e[None] - D)
    U = Sc * ((e * e)[:, None] * e[None] - D[diagonal, diagonal][:, None] * e[None]
              - D * (2.0 * e + 1.0 - 2.0 * S)[:, None])
    return T2, U


def softmax_class_derivatives(f: np.ndarray, target: int):
    """Derivatives of ``S_c`` (c = ``target``) in the latents, at latents f (..., C).

    With ``e = onehot_c - S`` and ``D = diag(S) - S S^T`` (= dS/df):
    ``d_j S_c = S_c e_j``, ``d_j d_l S_c = S_c (e_j e_l - D_jl)`` and
    ``d_j^2 d_l S_c = S_c (e_j^2 e_l - D_jj e_l - D_jl (2 e_j + 1 - 2 S_j))``.

    Returns
    -------
    first : ndarray (C, ...)
        ``d_j S_c``.
    second : ndarray (C, C, ...)
        ``d_j d_l S_c`` (symmetric in j, l).
    third : ndarray (C, C, ...)
        ``d_j^2 d_l S_c``.
    """
    S, e, Sc = _softmax_and_excess(f, target)
    return (Sc * e, *_second_and_third(S, e, Sc))
