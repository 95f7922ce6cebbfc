"""Squared-exponential (RBF) kernel, isotropic or ARD, and its integrated-gradient functionals.

Convention (used everywhere in gpexplain)::

    k(x, x') = variance * exp(-0.5 * sum_i (x_i - x'_i)^2 / lengthscale_i^2)

An infinite lengthscale switches a feature off: the kernel ignores it and its attributions are
exactly zero. Estimators use this for constant training columns.
"""

from __future__ import annotations

import numpy as np
from scipy.spatial.distance import cdist

from gpexplain._torch import as_tensor
from gpexplain.kernels._gaussian_integrals import (
    exp_difference,
    path_integral_unit_gaussian,
    segment_moments,
)
from gpexplain.kernels._parameters import as_lengthscale, as_variance
from gpexplain.kernels.base import Kernel

__all__ = ["RBF"]



class RBF(Kernel):
    """Squared-exponential kernel with an output variance and (ARD) lengthscales.

    Parameters
    ----------
    lengthscale : float or array-like of shape (n_features,)
        Positive lengthscale(s) in the units of the inputs. A scalar gives the isotropic kernel,
        a vector the automatic-relevance-determination (ARD) kernel. ``np.inf`` marks a feature
        the kernel ignores.
    variance : float, default 1.0
        Positive output (signal) variance, in the squared units of the target.

    Raises
    ------
    ValueError
        A lengthscale or the variance is not positive, or is NaN.
    """

    def __init__(self, lengthscale=1.0, variance: float = 1.0):
        self.lengthscale = as_lengthscale(lengthscale)
        self.variance = as_variance(variance)

    @property
    def ard(self) -> bool:
        """True when the kernel has one lengthscale per feature."""
        return self.lengthscale.ndim == 1

    def __repr__(self) -> str:
        return f"RBF(lengthscale={self.lengthscale.tolist()!r}, variance={self.variance!r})"

    def _lengthscales(self, n_features: int) -> np.ndarray:
        if not self.ard:
            return np.full(n_features, float(self.lengthscale))
        if self.lengthscale.shape[0] != n_features:
            raise ValueError(
                f"the kernel has {self.lengthscale.shape[0]} lengthscales but the inputs have "
                f"{n_features} features."
            )
        return self.lengthscale

    def _scaled(self, X: np.ndarray) -> np.ndarray:
        return X / self._lengthscales(X.shape[1])

    def __call__(self, X1: np.ndarray, X2: np.ndarray) -> np.ndarray:
        """Kernel matrix ``k(X1, X2)`` of shape (n1, n2)."""
        return self.variance * np.exp(
            -0.5 * self._squared_distances(np.asarray(X1, float), np.asarray(X2, float))
        )

    def _squared_distances(self, X1: np.ndarray, X2: np.ndarray) -> np.ndarray:
        """``|(x1 - x2) / l|^2`` for every pair, (n1, n2).

        Direct differences: the |a|^2 + |b|^2 - 2 a.b expansion cancels catastrophically
        when features sit far from zero relative to their lengthscale (e.g. latitudes). The
        difference is taken before the scaling: ``x1 / l - x2 / l`` would carry the rounding
        of each quotient, ``eps |x / l|``, into every distance.
        """
        inverse_sq = self._lengthscales(X1.shape[1]) ** -2.0
        if np.all(np.isfinite(inverse_sq)):
            return cdist(X1, X2, "sqeuclidean", w=inverse_sq)
        # A lengthscale below 1e-154 overflows 1 / l^2: scale first.
        return cdist(self._scaled(X1), self._scaled(X2), "sqeuclidean")

    def diag(self, X: np.ndarray) -> np.ndarray:
        """``k(x, x)`` for each row of X, shape (n,)."""
        return np.full(np.asarray(X).shape[0], self.variance)

    def torch_kernel(self, n_features: int):
        """An equivalent float64 GPyTorch kernel, for autograd-based (quadrature) explanations.

        Features with an infinite lengthscale are left out through ``active_dims``.
        """
        import gpytorch
        import torch

        lengthscale = self._lengthscales(n_features)
        active = np.flatnonzero(np.isfinite(lengthscale))
        if active.size == 0:
            constant = gpytorch.kernels.ConstantKernel().double()
            return constant.initialize(constant=as_tensor(self.variance, like=constant))
        base = gpytorch.kernels.RBFKernel(
            ard_num_dims=active.size, active_dims=as_tensor(active, dtype=torch.long)
        )
        kernel = gpytorch.kernels.ScaleKernel(base).double()
        base.lengthscale = as_tensor(lengthscale[active], like=base)
        kernel.outputscale = as_tensor(self.variance, like=kernel)
        return kernel

    # -- gradient (derivative-process) functionals -----------------------------------------
    def gradient_cross(self, X: np.ndarray, Z: np.ndarray) -> np.ndarray:
        """Cross term ``C[p, i, n] = d/dx_i k(x_p, z_n) = -k(x_p, z_n) (x_pi - z_ni) / l_i^2``.

        The derivative is in the query argument x (Seitz 2022, eq. 17 as corrected in
        docs/errata.md:
        the derivative in the training-point argument has the opposite sign). Features with an
        infinite lengthscale get exactly zero.

        Parameters
        ----------
        X : ndarray of shape (n_points, n_features)
        Z : ndarray of shape (n_basis, n_features)

        Returns
        -------
        ndarray of shape (n_points, n_features, n_basis), in units of the variance per unit of x_i.
        """
        inverse_sq = self._lengthscales(X.shape[1]) ** -2.0  # 0 for an infinite lengthscale
        difference = X[:, :, None] - Z.T[None, :, :]  # (p, d, n)
        return -self(X, Z)[:, None, :] * difference * inverse_sq[None, :, None]

    def gradient_prior(self, X: np.ndarray) -> np.ndarray:
        """Prior covariance of the gradient, ``d_i d'_j k(x, x') = s2 delta_ij / l_i^2`` at x = x'.

        The same at every point (the kernel is stationary); zero for an infinite lengthscale.

        Parameters
        ----------
        X : ndarray of shape (n_points, n_features)

        Returns
        -------
        ndarray of shape (n_points, n_features, n_features), diagonal.
        """
        inverse_sq = self._lengthscales(X.shape[1]) ** -2.0
        prior = np.diag(self.variance * inverse_sq)
        return np.broadcast_to(prior, (X.shape[0],) + prior.shape).copy()

    def weighted_gradient_prior(self, X: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """``sum_st W_st d_i d'_j k(x_s, x_t)`` over all pairs of rows of X (distinct or not).

        ``d_i d'_j k(x, x') = k(x, x') (delta_ij / l_i^2 - r_i r_j / (l_i^2 l_j^2))`` with
        ``r = x - x'``: the prior covariance of the gradients at two points, contracted with
        pair weights (probability-level integrated gradients weigh each pair of path nodes).

        Parameters
        ----------
        X : ndarray (n_points, n_features)
        weights : ndarray (n_points, n_points)

        Returns
        -------
        ndarray (n_features, n_features), symmetric when ``weights`` is.
        """
        inverse_sq = self._lengthscales(X.shape[1]) ** -2.0
        weighted = weights * self(X, X)
        scaled = (X[:, None, :] - X[None, :, :]) * inverse_sq  # (s, t, d); 0 where l = inf
        return (np.diag(weighted.sum() * inverse_sq)
                - np.einsum("st,sti,stj->ij", weighted, scaled, scaled))

    # -- integrated-gradient functionals --------------------------------------------------
    def _path_geometry(self, X: np.ndarray, baseline: np.ndarray):
        """Scaled displacement ``u = (x - baseline)/l``, its norm and direction (0 where u = 0)."""
        u = self._scaled(X - baseline)
        r = np.sqrt(np.sum(u * u, axis=1))
        direction = np.divide(u, r[:, None], out=np.zeros_like(u), where=r[:, None] > 0)
        return u, r, direction

    def integrated_gradient_cross(
        self, X: np.ndarray, baseline: np.ndarray, Z: np.ndarray
    ) -> np.ndarray:
        """Cross term ``A[p, i, n] = IG_i applied to k(., z_n) at x_p``.

        ``A_{n,i}(x) = (x_i - xt_i) int_0^1 d/dx_i k(xt + t (x - xt), z_n) dt``, evaluated in the
        safe form of docs/errata.md (Butler et al. 2024, Sec. 4.1 corrected)::

            A = -s2 [ d_i^2 (E0 - E1) + d_i v_perp_i (r J0) ]

        with ``u = (x - xt)/l``, ``r = |u|``, ``d = u / r``, ``v = (xt - z_n)/l``,
        ``v_perp = v - (d.v) d``, ``E0 = exp(-|v|^2/2)``, ``E1 = exp(-|v + u|^2/2)`` and
        ``r J0 = r int_0^1 exp(-|v + t u|^2/2) dt``. ``sum_i A[p, i, n] = k(x_p, z_n) -
        k(xt, z_n)`` holds term by term.

        Parameters
        ----------
        X : ndarray of shape (n_points, n_features)
            Query points.
        baseline : ndarray of shape (n_features,)
        Z : ndarray of shape (n_train, n_features)
            Training (or inducing) inputs.

        Returns
        -------
        ndarray of shape (n_points, n_features, n_train), in the units of the kernel variance.
        """
        d, v, v_perp, delta_E, rJ0 = self._cross_terms(X, baseline, Z)
        A = (d * d)[:, :, None] * delta_E[:, None, :] + d[:, :, None] * np.transpose(
            v_perp, (0, 2, 1)
        ) * rJ0[:, None, :]
        return -self.variance * A

    def _cross_terms(self, X, baseline, Z):
        """Pieces of the cross term: ``(d, v, v_perp, E0 - E1, r J0)``, with the (p, n, D)
        array ``v_perp`` re-projected for accuracy near the path.

        Long paths (``r = |u|`` up to 1e14): the far end's distance ``w = (x - z_n) / l =
        v + u`` is taken from ``x - z_n`` directly, never as ``|v|^2 + 2 r beta + r^2``,
        which loses ``eps r^2`` to cancellation when z_n is near x (a relative error of 2e-6
        at r = 1e5, overflow at 1e11); the distance to the path ``h`` and the integration
        limits come from whichever end is nearer z_n.
        """
        # One memory layout: einsum and BLAS round differently on strided (e.g. pandas) input.
        X = np.ascontiguousarray(X)
        _, r, d = self._path_geometry(X, baseline)
        v = self._scaled(baseline[None, :] - Z)  # (n, D)
        v_sq = np.sum(v * v, axis=1)  # (n,)
        beta = d @ v.T  # (p, n) = d . v
        w_sq = self._squared_distances(X, Z)  # (p, n) = |w|^2
        near_x = w_sq < v_sq[None, :]
        w = (X[:, None, :] - Z[None, :, :]) / self._lengthscales(X.shape[1])  # (p, n, D)
        beta_w = np.einsum("pnd,pd->pn", w, d)
        nearer = np.where(near_x[:, :, None], w, v[None, :, :])
        along = np.where(near_x, beta_w, beta)
        v_perp = nearer - along[:, :, None] * d[:, None, :]  # (p, n, D)
        # When z_n lies near the path, the two terms nearly cancel and leave an O(eps |v|)
        # component along d; projecting once more removes it (Gram-Schmidt twice).
        v_perp -= np.sum(v_perp * d[:, None, :], axis=2)[:, :, None] * d[:, None, :]
        h2 = np.sum(v_perp * v_perp, axis=2)
        # c = (|w|^2 - |v|^2) / 2 from whichever form rounds less: r (beta + r / 2) on short
        # paths (the squares nearly cancel), the difference of the squares on long ones.
        c_short = r[:, None] * beta + 0.5 * (r * r)[:, None]
        short = r[:, None] * (np.abs(beta) + r[:, None]) < w_sq + v_sq[None, :]
        c = np.where(short, c_short, 0.5 * (w_sq - v_sq[None, :]))
        E0 = np.exp(-0.5 * v_sq)[None, :]
        E1 = np.exp(-0.5 * w_sq)
        delta_E = exp_difference(E0, E1, c)
        rJ0 = path_integral_unit_gaussian(
            r[:, None], beta / np.sqrt(2.0), h2, E0, E1, z1=beta_w / np.sqrt(2.0)
        )
        return d, v, v_perp, delta_E, rJ0

    def integrated_gradient_prior(self, X: np.ndarray, baseline: np.ndarray) -> np.ndarray:
        """Same-point prior covariance ``P[p, i, j] = Cov(IG_i f(x_p), IG_j f(x_p))``, f ~ GP(0, k).

        ``P_ij = s2 [delta_ij u_i^2 M0(a) - u_i^2 u_j^2 M2(a)]`` with ``u = (x - xt)/l``,
        ``a = |u|^2`` and the segment moments M0, M2 (docs/errata.md; the main text's minus sign).
        ``sum_ij P_ij = 2 s2 (1 - exp(-a/2)) = Var(f(x) - f(xt))``.

        Parameters
        ----------
        X : ndarray of shape (n_points, n_features)
        baseline : ndarray of shape (n_features,)

        Returns
        -------
        ndarray of shape (n_points, n_features, n_features), symmetric positive semi-definite.
        """
        u, r, _ = self._path_geometry(X, baseline)
        M0, M2 = segment_moments(r * r)
        u2 = u * u
        P = -M2[:, None, None] * u2[:, :, None] * u2[:, None, :]
        features = np.arange(u.shape[1])
        P[:, features, features] += M0[:, None] * u2
        return self.variance * P

    # -- two-point prior terms (covariance across explained points) -----------------------
    def gradient_prior_between(self, X1: np.ndarray, X2: np.ndarray) -> np.ndarray:
        """``P[p, q, i, j] = d_i d'_j k(x_p, x'_q) = k (delta_ij / l_i^2 - r_i r_j / (l_i^2
        l_j^2))`` with ``r = x_p - x'_q``: the prior covariance of the gradients at two points.

        Equal to ``gradient_prior`` where ``x_p = x'_q``. Cost O(n1 n2 D^2) time and memory.

        Returns
        -------
        ndarray of shape (n1, n2, n_features, n_features).
        """
        inverse_sq = self._lengthscales(X1.shape[1]) ** -2.0
        scaled = (X1[:, None, :] - X2[None, :, :]) * inverse_sq  # (p, q, d); 0 where l = inf
        gram = self(X1, X2)[:, :, None, None]
        outer = scaled[..., :, None] * scaled[..., None, :]
        return gram * (np.diag(inverse_sq)[None, None] - outer)

    def integrated_gradient_prior_between(
        self, X1: np.ndarray, baseline1: np.ndarray, X2: np.ndarray, baseline2: np.ndarray,
        n_nodes: int = 64,
    ) -> np.ndarray:
        """Two-path prior term ``P[p, q, i, j] = Cov(IG_i f(x_p; xt), IG_j f(x'_q; xt'))``.

        The double path integral (Butler et al. 2024, Theorem 1, with different end points)

            P_ij = s2 int int exp(-|r|^2 / 2) [delta_ij D_i D'_i - D_i D'_j r_i r_j] ds dt,

        ``D = (x - xt)/l``, ``D' = (x' - xt')/l``, ``r = (xt - xt')/l + s D - t D'``, on an
        ``n_nodes`` x ``n_nodes`` tensor Gauss-Legendre grid. ``|r|^2`` is a quadratic in
        (s, t) whose coefficients are dot products, so each pair of points costs
        ``n_nodes^2`` exponentials for six weighted moments, whatever the number of features;
        the integrand is analytic, and the rule converges exponentially (relative error below
        1e-12 against the one-point closed form ``integrated_gradient_prior`` for paths up to
        about 6 lengthscales at 64 nodes; longer paths need more nodes). Cost
        O(n1 n2 (n_nodes^2 + D^2)) time, O(n1 n2 n_nodes^2) memory: call it on blocks.

        Returns
        -------
        ndarray of shape (n1, n2, n_features, n_features).
        """
        n_features = X1.shape[1]
        inverse = 1.0 / self._lengthscales(n_features)  # 0 for an infinite lengthscale
        D1 = (X1 - baseline1[None, :]) * inverse  # (p, d)
        D2 = (X2 - baseline2[None, :]) * inverse  # (q, d)
        c = (baseline1 - baseline2) * inverse  # (d,)
        nodes, weights = np.polynomial.legendre.leggauss(int(n_nodes))
        nodes, weights = 0.5 * (nodes + 1.0), 0.5 * weights
        # |r|^2 = (|c|^2 + s^2 |D1|^2 + 2 s c.D1) + (t^2 |D2|^2 - 2 t c.D2) - 2 s t D1.D2,
        # built in place on one (p, q, S, S) array
        a1, a2, b = np.sum(D1 * D1, 1), np.sum(D2 * D2, 1), D1 @ D2.T
        cd1, cd2 = D1 @ c, D2 @ c
        along1 = c @ c + np.outer(a1, nodes**2) + 2.0 * np.outer(cd1, nodes)  # (p, S)
        along2 = np.outer(a2, nodes**2) - 2.0 * np.outer(cd2, nodes)  # (q, S)
        E = np.multiply.outer(b, -2.0 * np.outer(nodes, nodes))  # (p, q, S, S)
        E += along1[:, None, :, None]
        E += along2[None, :, None, :]
        np.maximum(E, 0.0, out=E)
        E *= -0.5
        np.exp(E, out=E)
        E *= np.outer(weights, weights)
        over_t = E.sum(axis=3)  # (p, q, S): s on the last axis
        over_s = E.sum(axis=2)  # (p, q, S): t on the last axis
        m00 = over_t.sum(axis=2)
        m10, m20 = over_t @ nodes, over_t @ nodes**2
        m01, m02 = over_s @ nodes, over_s @ nodes**2
        m11 = (E @ nodes) @ nodes
        del E
        # sum E r r^T over the grid, r = c + s D1 - t D2, per pair (p, q): (p, q, d, d)
        c_, A, B = c[None, None, :], D1[:, None, :], D2[None, :, :]

        def sym(u, v, m):
            return m[..., None, None] * (u[..., :, None] * v[..., None, :]
                                         + v[..., :, None] * u[..., None, :])

        second = (
            m00[..., None, None] * (c_[..., :, None] * c_[..., None, :])
            + sym(c_, A, m10) - sym(c_, B, m01) - sym(A, B, m11)
            + m20[..., None, None] * (A[..., :, None] * A[..., None, :])
            + m02[..., None, None] * (B[..., :, None] * B[..., None, :])
        )
        P = -(A[..., :, None] * B[..., None, :]) * second
        features = np.arange(n_features)
        P[:, :, features, features] += m00[..., None] * A * B
        return self.variance * P
